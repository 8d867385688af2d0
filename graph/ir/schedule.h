/*
 * Dependencies and order. A node depends on the producers of its inputs and — because update
 * ops (sgd, adam, ...) overwrite their inputs — an update node also depends on every other
 * reader of the value it overwrites (write after read). The schedule is the topological order
 * closest to program order (smallest ready node id first), so it is deterministic.
 */
#ifndef PBL_SCHEDULE_H
#define PBL_SCHEDULE_H

#include "graph/ir/graph_internal.h"

typedef struct pbl__deps {
    int32_t  n;           /* nodes */
    int32_t *pred_start;  /* n + 1: node i's predecessors are pred[pred_start[i] .. pred_start[i+1]) */
    int32_t *pred;
    int32_t *succ_start;
    int32_t *succ;
    int32_t  n_edges;
} pbl__deps;

/* A binary min-heap of int32 in h[0 .. *n): Kahn's ready set, smallest first. push needs room
 * for one more; pop needs *n > 0. */
void    pbl__heap_push(int32_t *h, int32_t *n, int32_t x);
int32_t pbl__heap_pop(int32_t *h, int32_t *n);

pbl_status pbl__deps_build(const pbl_graph *g, pbl__mem *m, pbl__deps *d);
void       pbl__deps_free(pbl__deps *d, pbl__mem *m);

/* Orders the nodes with keep[i] set (all when keep is NULL) into order[] (room for every
 * node); *n_order gets the count. Among ready nodes, those with urgent[i] set go first (NULL:
 * none), then the smallest id. PBL_ERR_CYCLE if they cannot be ordered, with *cycle_node set
 * to a node that lies on a cycle. */
pbl_status pbl__deps_order(const pbl__deps *d, pbl__mem *m, const uint8_t *keep, const uint8_t *urgent,
                           int32_t *order, int32_t *n_order, pbl_node *cycle_node);

/* Writes the shortest cycle of dependencies through on_cycle (a node on one) to buf, each
 * edge with its reason: "'a' -> 'b' (reads 'x') -> 'a' (overwrites 'w', which 'b' reads)". */
void pbl__deps_cycle_text(const pbl_graph *g, const pbl__deps *d, pbl__mem *m, pbl_node on_cycle, char *buf,
                          size_t len);

/* Marks in keep[] every node some seed node (seed[i] set) depends on, and the seeds. */
pbl_status pbl__deps_ancestors(const pbl__deps *d, pbl__mem *m, const uint8_t *seed, uint8_t *keep);

/* The executor's schedule: the nodes that the named outputs need (targets; NULL or none: every
 * output and every update node), in pbl__deps_order's order with update nodes urgent: an
 * update runs as soon as its gradient is ready and the old weight's readers are done, so the
 * gradient's bytes are free early (the MLP step's arena shrinks ~10% this way). *order is allocated in m with
 * room for every node of g (free with pbl__schedule_free). err explains a failure:
 * PBL_ERR_NOT_FOUND for a target that names no output, PBL_ERR_CYCLE, PBL_ERR_NOMEM. */
pbl_status pbl__graph_schedule(const pbl_graph *g, const char *const *targets, int32_t n_targets, pbl__mem *m,
                               int32_t **order, int32_t *n_order, char *err, size_t errlen);
/* As pbl__graph_schedule, but when given is not NULL the order is given[0 .. n_given): it must
 * hold exactly the nodes pbl__graph_schedule would, each once, every node after those it
 * depends on; PBL_ERR_INVALID_ARG (err names the step or the pair of nodes) otherwise. */
pbl_status pbl__graph_schedule_given(const pbl_graph *g, const char *const *targets, int32_t n_targets,
                                     const pbl_node *given, int32_t n_given, pbl__mem *m, int32_t **order,
                                     int32_t *n_order, char *err, size_t errlen);
void       pbl__schedule_free(const pbl_graph *g, pbl__mem *m, int32_t *order);

#endif
