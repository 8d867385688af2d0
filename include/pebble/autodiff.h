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
 *     o.lr_scalar = "lr";       // optional: a runtime learning rate, pbl_exec_set_scalar(e, "lr", v)
 *     pbl_graph_add_optimizer(g, &o, params, grads, 4);
 *
 * docs/training.md shows a whole training loop with a learning-rate schedule (below).
 */
#ifndef PEBBLE_AUTODIFF_H
#define PEBBLE_AUTODIFF_H

#include <stddef.h>
#include <stdint.h>

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
    PBL_OPTIM_ADAMW, /* Adam with decoupled weight decay (Loshchilov & Hutter): each step
                        first shrinks w by lr·weight_decay, the gradient stays undecayed */
} pbl_optimizer_kind;

typedef struct pbl_optimizer_options {
    pbl_optimizer_kind kind;
    double lr;           /* default 0.01 (sgd, momentum), 0.001 (adam, adamw) */
    double momentum;     /* sgd_momentum; default 0.9 */
    double beta1, beta2; /* adam, adamw; default 0.9, 0.999 */
    double eps;          /* adam, adamw; default 1e-8 */
    double weight_decay; /* L2 added to the gradient (adamw: decoupled decay); default 0
                            (adamw: 0.01, PyTorch's default) */
    /* Runtime scalars (pebble/graph.h, pbl_graph_add_scalar): NULL keeps the constant above;
     * a name makes every update read the scalar of that name at run time, so
     * pbl_exec_set_scalar(e, name, v) changes it between runs. A scalar of that name is
     * created (initial value: lr, weight_decay, or 1 for the step) unless the graph has one;
     * a value of that name that is not a scalar, or an empty name, is PBL_ERR_INVALID_ARG. */
    const char *lr_scalar;
    const char *weight_decay_scalar;
    const char *step_scalar; /* adam, adamw: the bias-correction step, set by the caller
                                (1, 2, ... ; below 1 counts as 1) instead of each parameter's
                                own count t (which still counts) */
    double clip_norm;    /* > 0: clip the gradients by their global norm, inside the updates
                            (the same bits as pbl_graph_clip_grad_norm first); default 0: no clipping */
} pbl_optimizer_options;

pbl_optimizer_options pbl_optimizer_options_default(pbl_optimizer_kind kind);

/* Appends clipping by global norm, as PyTorch's clip_grad_norm_: one "global_norm" node over
 * every grad (more than 16 chain through partial norms), named "grad_norm" (or "grad_norm1",
 * ... when taken), then one "clip_by_norm" node per grad, "<grad>/clipped", computing
 * g·min(1, max_norm / (norm + 1e-6)). clipped[i] (may be grads itself) receives the clipped
 * gradient (PBL_NONE stays PBL_NONE); *norm_out, when not NULL, the norm before clipping
 * (make it a graph output to read it after a run). Returns PBL_ERR_INVALID_ARG (max_norm not
 * finite and positive, bad ids), PBL_ERR_NOMEM; on error the graph is restored. */
pbl_status pbl_graph_clip_grad_norm(pbl_graph *g, const pbl_value *grads, int32_t n, double max_norm,
                                    pbl_value *clipped, pbl_value *norm_out);

/* Appends one update node per (param, grad) pair, skipping pairs whose grad is PBL_NONE.
 * Creates zero-initialised state variables named "<param>/m", "<param>/v", "<param>/t"
 * (adam: first and second moments and the step count) or "<param>/m" (momentum).
 * Update nodes write their parameter and state in place. With opt->clip_norm > 0 a
 * "grad_norm" node (as pbl_graph_clip_grad_norm's) feeds every update, which clips its grad
 * itself: the bits of clipping first, without a clip_by_norm pass per grad. Returns PBL_ERR_INVALID_ARG (a
 * bad kind, a parameter that is not one, a named scalar that is not a scalar, clip_norm
 * negative or not finite), the builder's statuses for bad hyper-parameters (PBL_ERR_ATTR),
 * PBL_ERR_NOMEM; on error the graph is restored. */
pbl_status pbl_graph_add_optimizer(pbl_graph *g, const pbl_optimizer_options *opt,
                                   const pbl_value *params, const pbl_value *grads, int32_t n);

/* ---- data parallelism: one all-reduce per bucket of gradients ------------------------------
 *
 * For N processes (ranks) each training on its share of the batch, pbl_graph_data_parallel
 * sums the gradients over the ranks before the optimizer sees them, as nodes of the graph:
 * gradients are grouped into buckets in the order the backward pass finishes them (the
 * position of each gradient's producer in the program schedule, last layer first), packed
 * greedily up to bucket_bytes (a gradient larger than that is a bucket alone; at most 16
 * gradients per bucket, pack's input limit), and each bucket becomes three kinds of node:
 *
 *     "dp/bucket<k>"             bucket_pack(g_a, g_b, ...): the gradients in one flat value
 *     "dp/bucket<k>/allreduce"   allreduce(...): the sum over the ranks, divided by N when
 *                                opt->mean (the default)
 *     "<grad>/reduced"           bucket_unpack(...): one reduced gradient, shaped as <grad>
 * (each node's value carries the node's name).
 *
 * The flat bucket is an ordinary value, planned like any other. Feed `reduced` to
 * pbl_graph_add_optimizer, so the update of a bucket's parameters depends on that bucket's
 * all-reduce only. The executor runs these nodes on a communication stream of their own
 * (pbl_exec_options.comm, .comm_overlap in pebble/exec.h), overlapping the all-reduce of the
 * last layers' gradients with the backward pass of the first.
 *
 *     pbl_graph_gradient(g, loss, params, 4, grads);
 *     pbl_data_parallel_options dp = pbl_data_parallel_options_default();
 *     pbl_value reduced[4];
 *     pbl_graph_data_parallel(g, &dp, grads, 4, reduced);
 *     pbl_graph_add_optimizer(g, &o, params, reduced, 4);
 *
 * With a mean loss over each rank's B/N samples and opt->mean, the reduced gradient is the
 * gradient of the mean over all B samples, so N ranks train as one process on the whole batch
 * would (to rounding: the sums' order differs). docs/data_parallel.md has the whole story.
 */
typedef struct pbl_data_parallel_options {
    int64_t bucket_bytes; /* most bytes of gradients per bucket (default 1 MiB; >= 1) */
    int32_t mean;         /* 1 (default): divide the sum by the number of ranks; 0: the sum */
} pbl_data_parallel_options;

pbl_data_parallel_options pbl_data_parallel_options_default(void);

/* Appends the buckets' nodes for grads[0 .. n) and sets reduced[i] to the reduced gradient of
 * grads[i] (PBL_NONE stays PBL_NONE; reduced may be grads itself). Gradients must be f32 node outputs. Returns
 * PBL_ERR_INVALID_ARG (bad options or ids, a gradient listed twice, a variable given as a
 * gradient), PBL_ERR_NOMEM; on error the graph is restored. */
pbl_status pbl_graph_data_parallel(pbl_graph *g, const pbl_data_parallel_options *opt, const pbl_value *grads,
                                   int32_t n, pbl_value *reduced);

/* ---- learning-rate schedules, evaluated by the caller per step -----------------------------
 *
 * A schedule is plain data and one pure function of the step: no graph, no executor, no
 * state. Feed its value to a runtime scalar (pebble/graph.h pbl_graph_add_scalar, the
 * optimizer's lr_scalar above) before each run:
 *
 *     // given pbl_exec *e;
 *     pbl_lr_schedule s = pbl_lr_schedule_default(PBL_LR_COSINE, 1e-3);
 *     s.warmup_steps = 100;
 *     s.total_steps = 4690;
 *     char err[128];
 *     if (pbl_lr_schedule_check(&s, err, sizeof err) != PBL_OK)
 *         fprintf(stderr, "%s\n", err);
 *     for (int64_t step = 0; step < s.total_steps; step++) {
 *         pbl_exec_set_scalar(e, "lr", pbl_lr_schedule_at(&s, step));
 *         // ... write the batch ...
 *         pbl_exec_run(e);
 *     }
 *
 * Steps count from 0. Every kind starts with an optional linear warm-up: for step <
 * warmup_steps the rate is base_lr·(step + 1)/warmup_steps (never 0, base_lr at the last
 * warm-up step). After it, with k = step − warmup_steps:
 *   PBL_LR_CONSTANT  base_lr
 *   PBL_LR_STEP      base_lr·gamma^floor(k / step_size)                 (PyTorch's StepLR)
 *   PBL_LR_COSINE    min_lr + (base_lr − min_lr)·(1 + cos(π·k/(total_steps − warmup_steps)))/2,
 *                    min_lr from total_steps on                         (CosineAnnealingLR)
 * These functions are pure (thread-safe).
 */
typedef enum pbl_lr_schedule_kind {
    PBL_LR_CONSTANT,
    PBL_LR_STEP,
    PBL_LR_COSINE,
} pbl_lr_schedule_kind;

typedef struct pbl_lr_schedule {
    pbl_lr_schedule_kind kind;
    double  base_lr;      /* the rate after warm-up; >= 0 and within f32's range */
    int64_t warmup_steps; /* default 0: none */
    int64_t step_size;    /* PBL_LR_STEP: steps between decays (default 1000; >= 1) */
    double  gamma;        /* PBL_LR_STEP: the decay factor (default 0.1; in (0, 1]) */
    int64_t total_steps;  /* PBL_LR_COSINE: the step at which min_lr is reached (> warmup_steps) */
    double  min_lr;       /* PBL_LR_COSINE: the floor (default 0; in [0, base_lr]) */
} pbl_lr_schedule;

pbl_lr_schedule pbl_lr_schedule_default(pbl_lr_schedule_kind kind, double base_lr);

/* PBL_OK, or PBL_ERR_INVALID_ARG with the reason in err (size errlen; may be NULL): an unknown
 * kind, a base_lr or min_lr that is negative or not finite, a base_lr beyond f32's range (the
 * scalars it feeds are f32), a negative warm-up, a step_size below 1, a gamma outside (0, 1],
 * total_steps not past the warm-up, min_lr above base_lr. */
pbl_status pbl_lr_schedule_check(const pbl_lr_schedule *s, char *err, size_t errlen);

/* The rate at `step` (a negative step counts as 0); NaN when s is NULL or fails
 * pbl_lr_schedule_check (pbl_exec_set_scalar refuses NaN, so a bad schedule cannot train). */
double pbl_lr_schedule_at(const pbl_lr_schedule *s, int64_t step);

#ifdef __cplusplus
}
#endif
#endif
