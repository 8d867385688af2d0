/*
 * The scheduler's memory model: the bytes live at each step of an order, computed the way
 * graph/liveness computes its records (test_schedule checks the two agree), but step by step
 * so that a search can extend an order one node at a time.
 *
 * A record is a planner-owned value together with the update outputs that overwrite it
 * (mutates: one storage). Executing node v after the set S of executed nodes costs
 *     live(S) + (v's new records) - (in-place savings)
 * where live(S) is the bytes of records produced in S that a node outside S still reads, or
 * that are graph outputs; an in-place offer saves the input's bytes when that input's record
 * ends at this step (as pbl_graph_liveness takes it). live(S) depends on S only, which is
 * what lets the exact search treat a set of executed nodes as a state.
 */
#ifndef PBL_SCHEDULE_MODEL_H
#define PBL_SCHEDULE_MODEL_H

#include <stdint.h>

#include "graph/ir/graph_internal.h"

typedef struct pbl__sched_model {
    int32_t   n;           /* nodes to order (local ids 0..n-1, in program order) */
    pbl_node *node;        /* [n] local -> graph node */
    int32_t  *local;       /* [g->n_nodes] graph node -> local id, or -1 */
    int32_t  *pred_start;  /* [n + 1] CSR of local predecessors (data and write-after-read) */
    int32_t  *pred;
    int32_t  *succ_start;  /* [n + 1] */
    int32_t  *succ;
    int32_t   n_edges;
    uint8_t  *urgent;      /* [n] update nodes */
    int32_t   n_rec;       /* records */
    int32_t  *rec_of;      /* [g->n_values] a value's record, or -1 (not planned) */
    int64_t  *rec_size;    /* [n_rec] aligned bytes */
    uint8_t  *rec_out;     /* [n_rec] some member is a graph output: lives to the end */
    int32_t  *rec_readers; /* [n_rec] nodes that read it (each node once) */
    uint64_t *rec_mask;    /* [n_rec] those nodes as a bit set, when n <= 64 */
    int32_t  *new_start;   /* [n + 1] CSR: the records node i creates */
    int32_t  *new_rec;
    int32_t  *read_start;  /* [n + 1] CSR: the records node i reads (each once) */
    int32_t  *read_rec;
    int32_t   inplace;
    const pbl_graph *g;
    size_t    bytes_used;  /* for freeing: see pbl__sched_model_free */
} pbl__sched_model;

/* Builds the model of g's nodes in program order `order` (n steps). PBL_ERR_NOMEM. */
pbl_status pbl__sched_model_build(const pbl_graph *g, const int32_t *order, int32_t n, int64_t align, int inplace,
                                  pbl__mem *m, pbl__sched_model *md);
void       pbl__sched_model_free(pbl__sched_model *md, pbl__mem *m);

/* How many readers of record r have not run: a counter per record (cnt) or, for the exact
 * search, the executed set as a bit mask (cnt NULL). */
typedef struct pbl__sched_cursor {
    const int32_t *cnt;
    uint64_t       done;
} pbl__sched_cursor;

/* Step v from the state c whose live bytes are `live`: *peak gets the bytes live during the
 * step, *after the bytes live once v has run (v is not yet in c). */
void pbl__sched_step(const pbl__sched_model *md, const pbl__sched_cursor *c, int64_t live, int32_t v, int64_t *peak,
                     int64_t *after);

/* The peak of a whole order of local ids (counters, any n). PBL_ERR_NOMEM gives -1. */
int64_t pbl__sched_peak(const pbl__sched_model *md, const int32_t *order, pbl__mem *m);

/* A floor under every order's peak: the most, over nodes v, of the bytes live at v's step
 * whatever the order (records v's ancestors made that v or one of its descendants reads, or
 * that are graph outputs, plus v's own). -1 when n > 8192, -2 out of memory. */
int64_t pbl__sched_floor(const pbl__sched_model *md, pbl__mem *m);

/* The exact search (model.n <= 64): the order with the smallest peak, if one below `bound`
 * exists within max_states sets. Returns 1 and fills order and peak when it found one below
 * bound; 0 when it proved none is below bound (bound is then the minimum); -1 when it ran out
 * of states (nothing proven); -2 out of memory. */
int pbl__sched_exact(const pbl__sched_model *md, int64_t bound, int64_t max_states, pbl__mem *m, int32_t *order,
                     int64_t *peak);

#endif
