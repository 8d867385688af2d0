/*
 * pebble/schedule.h — the order the nodes run in, chosen for memory.
 *
 * Every planner takes the node order as given, and the order sets the lower bound they all
 * chase: the most bytes live at one step. `program` is the order pebble always used, the
 * topological order closest to the nodes' ids with optimizer updates as soon as they may run.
 * `min_peak` tries several orders and keeps the one with the smallest lower bound: program
 * order itself (so it is never worse), two memory-pressure list schedulers (at each step,
 * the ready node whose step peaks lowest, or that leaves the fewest bytes live; each plain,
 * with updates first, and with updates first scored together with the node that frees
 * them), a breadth-first order (by depth) and a depth-first one (heaviest branch first,
 * updates as soon as ready). On graphs of at most exact_max_nodes nodes it
 * then searches exactly (a bottleneck shortest path over the sets of executed nodes, best
 * first, bounded by the best heuristic) and, unless it runs out of exact_max_states, proves
 * the minimum. Every candidate respects what the executor relies on: each node after the
 * producers of its inputs, each update after every other reader of what it overwrites.
 * With several streams the colouring is made from the chosen order and each stream runs its
 * nodes in that order (pbl_stream_options.order).
 *
 *     // given pbl_graph *g;
 *     pbl_schedule_options so = pbl_schedule_options_default();
 *     so.kind = PBL_SCHEDULE_MIN_PEAK;
 *     pbl_schedule sc;
 *     char err[256];
 *     if (pbl_graph_schedule(g, &so, &sc, err, sizeof err) != PBL_OK) {
 *         fprintf(stderr, "%s\n", err);
 *         return 1;
 *     }
 *     pbl_liveness_options lo = pbl_liveness_options_default();
 *     lo.order = sc.order;
 *     lo.n_order = sc.n_steps;   // liveness now gives records whose bound is sc.peak
 *     pbl_graph_records gr;
 *     if (pbl_graph_liveness(g, &lo, &gr, err, sizeof err) == PBL_OK) {
 *         printf("lower bound %lld (program order: %lld)\n",
 *                (long long)pbl_records_lower_bound(gr.records, gr.n_records), (long long)sc.program_peak);
 *         pbl_graph_records_free(&gr);
 *     }
 *     pbl_schedule_free(&sc);
 *
 * The executor takes the same choice as pbl_exec_options.schedule. Thread-safe on distinct
 * data; the graph is only read.
 */
#ifndef PEBBLE_SCHEDULE_H
#define PEBBLE_SCHEDULE_H

#include "pebble/alloc.h"
#include "pebble/graph.h"
#include "pebble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pbl_schedule_kind {
    PBL_SCHEDULE_PROGRAM = 0,  /* the program order (the default) */
    PBL_SCHEDULE_MIN_PEAK = 1, /* the candidate order with the smallest lower bound */
} pbl_schedule_kind;

/* "program", "min_peak"; NULL for a kind out of range. */
const char *pbl_schedule_kind_name(pbl_schedule_kind k);
int32_t     pbl_schedule_kind_count(void);
/* The kind of that name: PBL_OK, or PBL_ERR_NOT_FOUND. */
pbl_status  pbl_schedule_kind_parse(const char *name, pbl_schedule_kind *out);

typedef struct pbl_schedule_options {
    const pbl_allocator *allocator;        /* NULL: malloc/free */
    pbl_schedule_kind    kind;             /* default PBL_SCHEDULE_PROGRAM */
    int64_t              align;            /* as pbl_liveness_options: the peak is measured on
                                              records rounded up to this (default 64) */
    int32_t              inplace;          /* as pbl_liveness_options (default 1) */
    const char *const   *targets;          /* as pbl_exec_options.targets */
    int32_t              n_targets;
    int32_t              exact_max_nodes;  /* min_peak: search exactly when the graph needs at
                                              most this many nodes (default 40; 0: never; the
                                              most is 64) */
    int64_t              exact_max_states; /* the exact search gives up (not proven) after this
                                              many sets of executed nodes (default 1 << 20) */
} pbl_schedule_options;

pbl_schedule_options pbl_schedule_options_default(void);

typedef struct pbl_schedule {
    pbl_node            *order;        /* [n_steps] the node at each step */
    int32_t              n_steps;
    int64_t              peak;         /* the lower bound of this order: pbl_records_lower_bound
                                          of pbl_graph_liveness's records for it */
    int64_t              program_peak; /* the same for the program order */
    const char          *method;       /* the candidate kept: "program", "lpmf", "lpmf-updates",
                                          "lpmf-lookahead", "free-first", "free-first-updates",
                                          "free-first-lookahead", "bfs", "dfs", "exact"
                                          (static strings) */
    int32_t              exact;        /* 1 when peak is proven minimal: the exact search
                                          finished, or peak == floor */
    int32_t              n_candidates; /* the orders scored */
    int64_t              floor;        /* min_peak: no order's peak is below this (at some node,
                                          the bytes its ancestors made for it or for its
                                          descendants); peak == floor proves peak minimal too.
                                          -1 when not computed (program, or over 8192 nodes) */
    const pbl_allocator *allocator;
} pbl_schedule;

/* Validates g and orders the nodes its targets need. Returns pbl_graph_validate's statuses
 * (PBL_ERR_CYCLE names the nodes on a cycle), PBL_ERR_NOT_FOUND (a target names no output),
 * PBL_ERR_INVALID_ARG (bad options), PBL_ERR_NOMEM; err explains. */
pbl_status pbl_graph_schedule(const pbl_graph *g, const pbl_schedule_options *opt, pbl_schedule *out, char *err,
                              size_t errlen);
void       pbl_schedule_free(pbl_schedule *s); /* accepts a zeroed or freed struct */

#ifdef __cplusplus
}
#endif
#endif
