/*
 * pebble/recompute.h — static recomputation: trade compute for the memory of a training graph.
 *
 * A training step keeps every forward value the backward pass reads until that read, so the
 * planned arena grows with depth. pbl_graph_recompute rewrites a training graph (made by
 * pbl_graph_gradient and pbl_graph_add_optimizer) into a NEW graph in which chosen forward
 * values are dropped after their forward use and computed again in the backward pass, just
 * before their first backward reader, from the values that were kept (the checkpoints). The
 * input graph is not changed. The result is an ordinary pbl_graph: it validates, liveness and
 * the planner see it like any other, and the executor runs it.
 *
 * Recomputed nodes are real nodes: a copy of forward node "fc7" is "fc7/recompute" (marked
 * backward), with the same op and attributes, reading the checkpoints or other recomputed
 * values. Every other node and variable keeps its name, so pbl_graph_find_value finds the
 * parameters, inputs and outputs of the rewritten graph by the names of the old one.
 *
 * Order. The executor runs the topological order that takes the smallest ready node id first
 * (updates, once ready, before anything else). The rewrite gives nodes ids in a topological
 * order — every node of the input graph in its old order, each recomputation inserted just
 * before the first backward node that needs it — so that order IS the id order: a
 * recomputation never runs early and keeps nothing alive across the forward pass. No extra
 * control edges are needed.
 *
 * Methods (what is dropped):
 *   PBL_RECOMPUTE_MIRROR  MXNet's mirror rule (MXNET_BACKWARD_DO_MIRROR): the outputs of cheap
 *                         nodes are recomputed from their inputs, which are kept; cheap is at
 *                         most one operation per element written, by pebble's cost model
 *                         (element-wise ops, activations, copies, layout changes, gathers);
 *                         products, convolutions, pooling, reductions, normalisation, loss,
 *                         softmax and dropout outputs are kept. A baseline: it removes little
 *                         on an MLP whose activation already runs in place.
 *   PBL_RECOMPUTE_SQRT    Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost",
 *                         section 4.1: the forward values, in order, are cut into k segments
 *                         of equal bytes (k = round(sqrt(n)) for n droppable values, or
 *                         opt.segments); the value ending each segment is kept, the rest are
 *                         recomputed one segment at a time in the backward pass: O(sqrt(n))
 *                         memory for about one extra forward pass.
 *   PBL_RECOMPUTE_BUDGET  Chen et al. 2016, Algorithm 2 ("memory planning with budget"): a
 *                         greedy pass over the forward values in order sums their bytes and
 *                         keeps a droppable value (starting a new segment) once the sum
 *                         exceeds B; B is searched over a geometric grid (plus "keep all"),
 *                         each candidate is rewritten and planned, and the plan whose arena
 *                         fits opt.budget with the fewest estimated extra FLOPs wins.
 *
 * A droppable value ("candidate") is a forward node output that some backward node reads and
 * that is not a graph output (those live to the end anyway). Any forward value that is not
 * kept and that a recomputation needs is recomputed as well (a relu's input, say).
 *
 *     // given pbl_graph *g;
 *     pbl_recompute_options o = pbl_recompute_options_default();
 *     o.method = PBL_RECOMPUTE_BUDGET;
 *     o.budget = 64 << 20;                           // planned arena bytes
 *     pbl_graph *lean;
 *     pbl_recompute_report r;
 *     char err[256];
 *     if (pbl_graph_recompute(g, &o, &lean, &r, err, sizeof err) != PBL_OK)
 *         fprintf(stderr, "%s\n", err);              // PBL_ERR_BUDGET: r.arena is the least reached
 *     ...
 *     pbl_recompute_report_free(&r);
 *     pbl_graph_destroy(lean);
 *
 * Thread-safety: g is only read, except that a g that fails validation gets its message set
 * (as pbl_graph_liveness does); calls on different graphs may run at once.
 */
#ifndef PEBBLE_RECOMPUTE_H
#define PEBBLE_RECOMPUTE_H

#include <stdint.h>

#include "pebble/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pbl_recompute_method {
    PBL_RECOMPUTE_MIRROR,
    PBL_RECOMPUTE_SQRT,
    PBL_RECOMPUTE_BUDGET,
} pbl_recompute_method;

typedef struct pbl_recompute_options {
    const pbl_allocator *allocator;   /* the pass's memory and the new graph's; NULL: malloc/free */
    pbl_recompute_method method;      /* default PBL_RECOMPUTE_SQRT */
    uint64_t             budget;      /* the planned arena must be at most this (bytes); 0: no
                                         limit (BUDGET then keeps everything). MIRROR and SQRT
                                         check their result against it */
    int32_t              segments;    /* SQRT: segments; 0 (default) = round(sqrt(candidates)) */
    int32_t              search_points; /* BUDGET: values of B tried (default 64; at least 2) */
    const char          *strategy;    /* planner strategy that measures arenas; NULL: "best",
                                         the executor's default */
    int64_t              align;       /* record alignment, as the executor's (default 64) */
} pbl_recompute_options;

pbl_recompute_options pbl_recompute_options_default(void);

/* What the rewrite chose and what it reaches. FLOPs are pebble's cost model's estimates
 * (pbl_node_cost's: 2·m·n·k for products and convolutions, one per element per pass over
 * the data for the rest). */
typedef struct pbl_recompute_report {
    pbl_recompute_method method;
    int32_t    candidates;       /* droppable forward values in the input graph */
    int32_t    n_checkpoints;    /* candidates kept */
    pbl_value *checkpoints;      /* their ids in the INPUT graph, in forward order */
    int32_t    recomputed;       /* recompute nodes added */
    double     forward_flops;    /* the input graph's forward nodes */
    double     step_flops;       /* all its nodes */
    double     extra_flops;      /* the recompute nodes */
    uint64_t   arena_plain;      /* the input graph's planned arena (bytes) */
    uint64_t   arena;            /* the rewritten graph's; on PBL_ERR_BUDGET the least reached */
    uint64_t   segment_bytes;    /* SQRT and BUDGET: the B of Algorithm 2 (bytes; 0 keeps all) */
    int32_t    plans_tried;      /* rewrites built and planned */
    const pbl_allocator *allocator;
} pbl_recompute_report;

/* Rewrites g into a new graph *out (the caller destroys it; g is not changed) and, when
 * report is not NULL, describes the choice (free it with pbl_recompute_report_free, also
 * after a failure). g must validate; a graph without backward nodes is copied as is.
 * Returns PBL_ERR_INVALID_ARG (NULL g or out, bad options), pbl_graph_validate's statuses,
 * PBL_ERR_BUDGET (no plan tried fits opt.budget; err names the smallest arena reached, and
 * the report describes that plan), PBL_ERR_NOMEM. On failure *out is NULL and
 * err (errlen bytes, may be NULL) says why. */
pbl_status pbl_graph_recompute(const pbl_graph *g, const pbl_recompute_options *opt, pbl_graph **out,
                               pbl_recompute_report *report, char *err, size_t errlen);

/* Frees the report's checkpoint list. Accepts NULL and a zeroed or freed report. */
void pbl_recompute_report_free(pbl_recompute_report *r);

#ifdef __cplusplus
}
#endif
#endif
