/*
 * pebble/fuse.h — operator fusion: fewer nodes, fewer intermediates, the same bits.
 *
 * pbl_graph_fuse rewrites a graph into a NEW graph (the input is not changed) in which
 *
 *   dense   fully_connected(x, w, b?)  [-> add(·, b[out])]  [-> relu | sigmoid | tanh | gelu]
 *           becomes one fully_connected_act node: y = act(x·wᵀ + b), the product by BLAS and
 *           then one pass adding the bias and applying the activation;
 *   chains  runs of element-wise ops (relu, sigmoid, tanh, gelu; add, sub, mul, div whose two
 *           operands have the same shape) become one elementwise_chain node that applies the
 *           steps to each element in one loop;
 *
 * and, in the backward pass (option backward),
 *
 *   weight + bias gradients   matmul(dy, x, trans_a = 1) and sum(dy, axes [0]) (or
 *           sum_to(dy, [out]), a bias add's gradient) reading the same dy [N, out] — the
 *           gradients dw and db of one fully_connected — become one fully_connected_grad_wb
 *           node with both outputs (on CUDA one cuBLASLt product whose epilogue also reduces
 *           dy: BGRADB);
 *   product + activation gradient   relu_grad / sigmoid_grad / tanh_grad / gelu_grad of a
 *           matmul's product read by nothing else — the data gradient reaching the previous
 *           layer's activation — becomes one matmul_act_grad node.
 *
 * Semantics of the ops: ops/fused.c. Liveness and the memory plan are computed by the
 * executor on the fused graph, so the intermediates vanish from the plan: the node count is
 * smaller and the arena is never larger than the unfused graph's, but for one exception: a
 * fully_connected_grad_wb node writes dw and db at once, so both are live together where the
 * unfused graph may have freed dw (its update ran) before the sum wrote db — the arena may
 * grow by one bias gradient (mlp_train: 836,928 -> 837,952 bytes, +1 KiB; mlp100_train: no
 * change). Fuse with backward = 0 where that matters.
 *
 * When nodes fuse. A value between two fused nodes must be read by exactly one node input
 * (its consumer) and must not be a graph output; the nodes must both be forward or both be
 * backward nodes; nodes that mutate (optimizer updates) never fuse; and the fused group
 * must stay convex — no dependency path (data, or an update's write-after-read order) may
 * leave the group and come back — so the fused graph can be scheduled exactly as the
 * original. A relu after a fully_connected in a training graph fuses (the backward pass
 * reads relu's output, not the product); a gelu does not (its gradient reads its input).
 * The weight + bias pair passes no value between its members (both read dy, which may have
 * any number of other readers): there convexity is checked both ways, and the fused node
 * takes the earlier member's place in the order (or the later one's, when the earlier one's
 * output is read by nothing before it); where neither works, nothing fuses.
 *
 * Fusion runs AFTER pbl_graph_gradient and pbl_graph_add_optimizer: the fused ops have no
 * gradient rule. On the CPU the fused graph computes the same bits as the unfused one (each
 * step is the same f32 expression, in the same order, as the kernel it replaces), so it is an
 * optimisation, not an approximation; test/test_fuse.c checks this on MLP training.
 *
 * Backends. The CPU backend runs every fused op; the CUDA backend runs them all too:
 * fully_connected_act, fully_connected_grad_wb and matmul_act_grad (ops/cuda/fused.cu;
 * docs/cuda.md says which cuBLASLt epilogues) and elementwise_chain (ops/cuda/chain.cu).
 *
 * Names. A fused node is named after its members joined by '+' ("fc1+relu1",
 * "fc1/grad_w+fc1/grad_b"), and so is its output value, except that a weight + bias node's
 * two outputs keep the gradients' names ("fc1/grad_w", "fc1/grad_b"); every other node and
 * value keeps its name, so parameters, inputs, outputs and gradients are found in the fused
 * graph by their old names.
 *
 *     // given pbl_graph *g;
 *     pbl_fuse_options o = pbl_fuse_options_default();
 *     pbl_graph *fused;
 *     pbl_fuse_report r;
 *     char err[256];
 *     if (pbl_graph_fuse(g, &o, &fused, &r, err, sizeof err) != PBL_OK)
 *         fprintf(stderr, "%s\n", err);
 *     // r.dense, r.chains, r.weight_bias, r.act_grads, r.nodes_before -> r.nodes_after
 *     pbl_graph_destroy(fused);
 *
 * Thread-safety: reads g only; calls on different graphs (or the same, unchanged) may run at
 * once.
 */
#ifndef PEBBLE_FUSE_H
#define PEBBLE_FUSE_H

#include <stdint.h>

#include "pebble/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pbl_fuse_options {
    const pbl_allocator *allocator;  /* the pass's memory and the new graph's; NULL: malloc/free */
    int32_t dense;                   /* fuse fully_connected + bias + activation (default 1) */
    int32_t chains;                  /* fuse element-wise chains (default 1) */
    int32_t backward;                /* fuse weight + bias gradients and product + activation
                                        gradient (default 1) */
} pbl_fuse_options;

pbl_fuse_options pbl_fuse_options_default(void);

typedef struct pbl_fuse_report {
    int32_t nodes_before, nodes_after;
    int32_t dense;          /* fully_connected_act nodes made */
    int32_t chains;         /* elementwise_chain nodes made */
    int32_t fused_nodes;    /* nodes of the input graph folded into those */
    int32_t weight_bias;    /* fully_connected_grad_wb nodes made */
    int32_t act_grads;      /* matmul_act_grad nodes made */
} pbl_fuse_report;

/* Writes into *out a fused copy of g (the caller destroys it) and, when report is not NULL,
 * what was fused. g must validate. Returns PBL_ERR_INVALID_ARG (NULL g or out),
 * pbl_graph_validate's statuses, PBL_ERR_NOMEM. On failure *out is NULL and err (errlen
 * bytes, may be NULL) says why. */
pbl_status pbl_graph_fuse(const pbl_graph *g, const pbl_fuse_options *opt, pbl_graph **out,
                          pbl_fuse_report *report, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
