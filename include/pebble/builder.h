/*
 * pebble/builder.h — one-line helpers that add one op node each.
 *
 * Each helper wraps pbl_graph_add_node and returns the node's (first) output value. On error
 * it returns PBL_NONE and the graph remembers the error: pbl_graph_build_status() returns it,
 * pbl_graph_errmsg() explains it, and every later helper returns PBL_NONE at once (until
 * pbl_graph_build_reset), so the first error is the one reported. A model can be written
 * straight through and checked once, as with cairo's sticky errors:
 *
 *     // given pbl_graph *g; pbl_value x, y, w1, b1, w2, b2;
 *     pbl_value h = pbl_relu(g, pbl_fully_connected(g, x, w1, b1));
 *     pbl_value logits = pbl_fully_connected(g, h, w2, b2);
 *     pbl_value loss = pbl_softmax_cross_entropy(g, logits, y);
 *     if (pbl_graph_build_status(g) != PBL_OK)
 *         fprintf(stderr, "%s\n", pbl_graph_errmsg(g));
 *
 * Node names are picked automatically ("relu3"); use pbl_graph_add_node to choose them.
 * The ops and their attributes are listed in pebble/ops.h.
 */
#ifndef PEBBLE_BUILDER_H
#define PEBBLE_BUILDER_H

#include "pebble/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The first error a helper met on g since creation or the last reset, else PBL_OK. */
pbl_status pbl_graph_build_status(const pbl_graph *g);
void       pbl_graph_build_reset(pbl_graph *g);

/* Variables (PBL_F32 unless said). */
pbl_value pbl_input(pbl_graph *g, const char *name, pbl_shape shape);
pbl_value pbl_param(pbl_graph *g, const char *name, pbl_shape shape);
pbl_value pbl_label(pbl_graph *g, const char *name, pbl_dtype dtype, pbl_shape shape);

/* x: [N, in], w: [out, in], b: [out] or PBL_NONE  ->  [N, out] = x·wᵀ + b */
pbl_value pbl_fully_connected(pbl_graph *g, pbl_value x, pbl_value w, pbl_value b);
/* op(a)·op(b), op transposes the last two dims when the flag is set */
pbl_value pbl_matmul(pbl_graph *g, pbl_value a, pbl_value b, int trans_a, int trans_b);
/* Element-wise with broadcasting of b over a's leading dims (b's shape a suffix of a's, 1s allowed) */
pbl_value pbl_add(pbl_graph *g, pbl_value a, pbl_value b);
pbl_value pbl_sub(pbl_graph *g, pbl_value a, pbl_value b);
pbl_value pbl_mul(pbl_graph *g, pbl_value a, pbl_value b);
pbl_value pbl_relu(pbl_graph *g, pbl_value x);
pbl_value pbl_sigmoid(pbl_graph *g, pbl_value x);
pbl_value pbl_tanh(pbl_graph *g, pbl_value x);
pbl_value pbl_gelu(pbl_graph *g, pbl_value x);
pbl_value pbl_softmax(pbl_graph *g, pbl_value x);          /* over the last dim */
pbl_value pbl_log_softmax(pbl_graph *g, pbl_value x);      /* over the last dim */
/* logits: [N, C] f32, labels: [N] i32  ->  scalar mean cross-entropy */
pbl_value pbl_softmax_cross_entropy(pbl_graph *g, pbl_value logits, pbl_value labels);
/* scalar mean of (pred - target)² */
pbl_value pbl_mse_loss(pbl_graph *g, pbl_value pred, pbl_value target);
/* Reductions over `axes` (n_axes 0: all); keepdims keeps reduced dims as 1. */
pbl_value pbl_sum(pbl_graph *g, pbl_value x, const int64_t *axes, int32_t n_axes, int keepdims);
pbl_value pbl_mean(pbl_graph *g, pbl_value x, const int64_t *axes, int32_t n_axes, int keepdims);
/* New shape with the same element count; one dim may be -1. */
pbl_value pbl_reshape(pbl_graph *g, pbl_value x, pbl_shape shape);
/* [d0, ..., d(axis-1), rest]  ->  [d0*...*d(axis-1), rest] */
pbl_value pbl_flatten(pbl_graph *g, pbl_value x, int32_t axis);
pbl_value pbl_copy(pbl_graph *g, pbl_value x);
/* Zeroes each element with probability p and scales the rest by 1/(1-p). The mask (second
 * output, also f32) holds the factor applied to each element, 0 or 1/(1-p); it is a pure function of (seed, run counter, element index), so runs repeat
 * exactly; it is saved for the backward pass. *mask may be NULL. */
pbl_value pbl_dropout(pbl_graph *g, pbl_value x, double p, uint64_t seed, pbl_value *mask);
/* pbl_dropout that obeys a training switch: `training`, a runtime scalar (pbl_graph_add_scalar),
 * read at each run; 0 evaluates (y = x, mask all 1), any other value trains as pbl_dropout.
 * pbl_exec_set_scalar(e, "training", 0) turns one training graph into its evaluation. */
pbl_value pbl_dropout_switched(pbl_graph *g, pbl_value x, double p, uint64_t seed, pbl_value training,
                               pbl_value *mask);
/* Batch normalisation over x[N, C, ...] (scale, bias: [C]) that obeys a training switch (a
 * runtime scalar): not 0, it normalises with the batch's statistics and updates running
 * ones; 0, it normalises with the running statistics and leaves them. They are state
 * variables "<name>/running_mean", "<name>/running_var" (unbiased) and "<name>/count" (saved in
 * checkpoints): the first training run copies the batch's statistics, later ones average
 * r ← (1 − momentum)·r + momentum·batch (PyTorch's momentum, 0.1 there). Nodes "<name>"
 * (batch_norm) and "<name>/update" (batch_norm_update). eps: as PyTorch's, 1e-5. */
pbl_value pbl_batch_norm_switched(pbl_graph *g, const char *name, pbl_value x, pbl_value scale, pbl_value bias,
                                  pbl_value training, double momentum, double eps);

#ifdef __cplusplus
}
#endif
#endif
