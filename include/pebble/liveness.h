/*
 * pebble/liveness.h — from a graph to usage records.
 *
 * Liveness schedules the graph (as an executor would), then gives every planner-owned value
 * — every node output except those that update a variable in place — a usage record: its
 * bytes, from the step that produces it up to, not including, the step after its last reader.
 * Graph outputs stay live to the end. Variables (inputs, parameters, labels, state) belong to
 * the caller and are not planned. Because the backward pass is made of explicit nodes, a
 * forward value that no gradient reads dies after its last forward reader.
 *
 * In place: when an op offers an output the storage of an input (relu, add, reshape, ...),
 * liveness takes the offer if that input is planner-owned, is not a graph output, has the same
 * byte size, and is read by no later step. The two values then share one record, whatever
 * strategy plans the records.
 *
 *     // given pbl_graph *g;
 *     pbl_graph_records gr;
 *     pbl_assignment a;
 *     char err[256];
 *     pbl_liveness_options lo = pbl_liveness_options_default();
 *     if (pbl_graph_liveness(g, &lo, &gr, err, sizeof err) != PBL_OK ||
 *         pbl_plan_records(gr.records, gr.n_records, "best", NULL, &a, err, sizeof err) != PBL_OK) {
 *         fprintf(stderr, "%s\n", err);
 *         return 1;
 *     }
 *     // value v lives at a.offset[gr.value_record[v]] when gr.value_record[v] >= 0
 *     pbl_assignment_free(&a);
 *     pbl_graph_records_free(&gr);
 */
#ifndef PEBBLE_LIVENESS_H
#define PEBBLE_LIVENESS_H

#include "pebble/graph.h"
#include "pebble/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pbl_liveness_options {
    const pbl_allocator *allocator; /* NULL: malloc/free */
    int64_t              align;     /* record sizes are rounded up to this (default 64): planned
                                       with the same alignment, the lower bound is then exact */
    int32_t              inplace;   /* take in-place offers (default 1) */
    const char *const   *targets;   /* as pbl_exec_options.targets: NULL = all outputs + updates */
    int32_t              n_targets;
    const pbl_node      *order;     /* NULL (the default): the program order (the topological
                                       order closest to node ids, updates as soon as they may
                                       run); else the schedule to use, n_order steps, e.g. from
                                       pbl_graph_schedule (pebble/schedule.h): exactly the nodes
                                       the targets need, each after those it depends on
                                       (PBL_ERR_INVALID_ARG otherwise) */
    int32_t              n_order;
} pbl_liveness_options;

pbl_liveness_options pbl_liveness_options_default(void);

typedef struct pbl_graph_records {
    pbl_usage_record    *records;       /* n_records */
    pbl_value           *record_value;  /* per record: the value that first used it */
    int32_t              n_records;
    int32_t             *value_record;  /* per value of the graph: its record, or -1 (not planned) */
    int32_t              n_values;
    pbl_node            *schedule;      /* the node at each step */
    int32_t              n_steps;
    int32_t              n_inplace;     /* in-place offers taken */
    const pbl_allocator *allocator;
} pbl_graph_records;

/* Validates and schedules g and computes its records. Returns pbl_graph_validate's statuses,
 * PBL_ERR_NOT_FOUND (a target names no output), PBL_ERR_NOMEM; err explains. */
pbl_status pbl_graph_liveness(const pbl_graph *g, const pbl_liveness_options *opt, pbl_graph_records *out,
                              char *err, size_t errlen);
void       pbl_graph_records_free(pbl_graph_records *r); /* accepts a zeroed or freed struct */

#ifdef __cplusplus
}
#endif
#endif
