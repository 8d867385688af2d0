/*
 * pebble/autodiff.h — explicit backward nodes and optimizer updates.
 *
 * pbl_graph_gradient appends the backward pass to the same graph, MXNet-style: a reverse
 * topological walk from the loss in which each op's gradient rule emits ordinary nodes
 * through the builder. A value read by several nodes gets exactly one aggregation node
 * (op "add_n", named "<value>/grad_sum") summing its gradient contributions; add_n takes 16
 * inputs, so past 16 contributions further add_n nodes chain ("<value>/grad_sum1", ...).
 * Values with no path to the loss get no backward nodes. Backward nodes are marked
 * (pbl_node_info.is_backward); those of an op are named after the forward node they
 * differentiate ("fc2/grad_w"), the loss's seed "<loss>/grad_seed".
 *
 * pbl_graph_add_optimizer then appends one update node per parameter (sgd, sgd_momentum or
 * adam), creating the optimizer state it needs as PBL_VALUE_STATE variables, so one run of
 * the graph is one whole training step.
 *
 *     // given pbl_graph *g; pbl_value loss, w1, b1, w2, b2;
 *     pbl_value params[] = { w1, b1, w2, b2 }, grads[4];
 *     pbl_graph_gradient(g, loss, params, 4, grads);
 *     pbl_optimizer_options o = pbl_optimizer_options_default(PBL_OPTIM_ADAM);
 *     o.lr = 1e-3;
 *     pbl_graph_add_optimizer(g, &o, params, grads, 4);
 */
#ifndef PEBBLE_AUTODIFF_H
#define PEBBLE_AUTODIFF_H

#include "pebble/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Appends nodes computing d loss / d wrt[i] into grads[i] (PBL_NONE when wrt[i] has no path
 * to the loss). loss must be a scalar f32 value. The same call may run once per graph: a
 * graph that already has backward nodes gives PBL_ERR_INVALID_ARG.
 * Returns PBL_ERR_NOT_DIFFERENTIABLE naming the node when the path crosses an op without a
 * gradient rule, PBL_ERR_NOMEM. On error the graph is restored as it was. */
pbl_status pbl_graph_gradient(pbl_graph *g, pbl_value loss, const pbl_value *wrt, int32_t n_wrt,
                              pbl_value *grads);

typedef enum pbl_optimizer_kind {
    PBL_OPTIM_SGD,
    PBL_OPTIM_SGD_MOMENTUM,
    PBL_OPTIM_ADAM,
} pbl_optimizer_kind;

typedef struct pbl_optimizer_options {
    pbl_optimizer_kind kind;
    double lr;           /* default 0.01 (sgd, momentum), 0.001 (adam) */
    double momentum;     /* sgd_momentum; default 0.9 */
    double beta1, beta2; /* adam; default 0.9, 0.999 */
    double eps;          /* adam; default 1e-8 */
    double weight_decay; /* L2 added to the gradient; default 0 */
} pbl_optimizer_options;

pbl_optimizer_options pbl_optimizer_options_default(pbl_optimizer_kind kind);

/* Appends one update node per (param, grad) pair, skipping pairs whose grad is PBL_NONE.
 * Creates zero-initialised state variables named "<param>/m", "<param>/v", "<param>/t"
 * (adam: first and second moments and the step count) or "<param>/m" (momentum).
 * Update nodes write their parameter and state in place. */
pbl_status pbl_graph_add_optimizer(pbl_graph *g, const pbl_optimizer_options *opt,
                                   const pbl_value *params, const pbl_value *grads, int32_t n);

#ifdef __cplusplus
}
#endif
#endif
