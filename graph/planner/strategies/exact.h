/*
 * The exact planner's decision search (graph/planner/strategies/exact_search.c), shared with its driver
 * (graph/planner/strategies/exact.c). A search object holds records prepared once — time cut into
 * sections, overlap lists — and answers "is there a packing within capacity C?" as often as
 * the driver asks, each time within a budget of search nodes and a deadline.
 */
#ifndef PBL_PLAN_EXACT_H
#define PBL_PLAN_EXACT_H

#include <stdint.h>

#include "graph/planner/plan_internal.h"

typedef enum pbl__exact_result {
    PBL__EXACT_FOUND,      /* a packing within the capacity is in offset[] */
    PBL__EXACT_INFEASIBLE, /* proven: no packing fits */
    PBL__EXACT_ABORTED,    /* the budget ran out first */
    PBL__EXACT_NOMEM
} pbl__exact_result;

typedef struct pbl__exact_budget {
    int64_t nodes_left; /* search nodes (buffer placements) still allowed; < 0: no limit */
    double  deadline;   /* pbl__plan_now() value to stop at; 0: none */
    int64_t nodes;      /* placements made so far (a counter the search adds to) */
    int32_t timed_out;  /* set when the deadline, not the node budget, stopped a search */
} pbl__exact_budget;

typedef struct pbl__exact pbl__exact;

/* Prepares n records (n >= 1, already checked) for searching with offsets that are multiples
 * of align. PBL_ERR_NOMEM, or PBL_ERR_UNSUPPORTED when the instance is too large to search
 * (more than PBL__EXACT_MAX_PAIRS overlapping pairs or section memberships). */
#define PBL__EXACT_MAX_PAIRS 4000000
pbl_status pbl__exact_create(const pbl_usage_record *r, int32_t n, int64_t align, const pbl_allocator *al,
                             pbl__exact **out);
void       pbl__exact_destroy(pbl__exact *e);

/* Moves from's scratch pools (the trail, candidate and component stacks: emptied by every
 * decision, so they carry nothing between searches) into e where they are larger, so that a
 * series of searches on related instances (the window step's) grows them once: growing them
 * anew cost a third of each window search in copies and page faults. */
void       pbl__exact_take_scratch(pbl__exact *e, pbl__exact *from);

/* Searches for offsets (per record, in the caller's order) with every record within capacity.
 * Deterministic for a given budget when the deadline is not reached. */
pbl__exact_result pbl__exact_decide(pbl__exact *e, int64_t capacity, pbl__exact_budget *b, int64_t *offset);

/* The peak, counting alignment: the records live together in a section stack, each padded to
 * the alignment but the top one. At least pbl_records_lower_bound. */
int64_t pbl__exact_lower_bound(const pbl__exact *e);

/* A greedy packing: buffers in preorder h (0..3, see set_preorder), each at the lowest aligned
 * offset where it fits. Returns the arena, or -1 when out of memory. */
int64_t pbl__exact_lowest_fit(pbl__exact *e, int h, int64_t *offset);

/* Local improvement (graph/planner/strategies/exact_local.c): re-packs the records around the
 * arena's top against the fixed rest while that lowers the arena, until a whole round of moves
 * keeps nothing or deadline (0: none) passes. offset[] (a packing: no two records that live
 * together overlap) is improved in place and stays a packing. Returns its arena, or -1 when
 * out of memory (offset[] then unchanged or improved, still a packing). */
int64_t pbl__exact_local(const pbl_usage_record *r, int32_t n, int64_t align, double deadline,
                         const pbl_allocator *al, int64_t *offset);

/* The window step (graph/planner/strategies/exact_window.c): the decision search within target
 * on the records meeting windows of growing width around the peak step and around every step
 * where a completion broke the target (lifetimes clipped to the windows' hull), the rest placed
 * around them by size; offset[] (a packing) is replaced by a completion smaller than its arena,
 * the smallest found, and the step ends at the first one within stop (>= target). Node budgets
 * per search make it deterministic unless deadline (0: none) passes. Returns the arena of
 * offset[] afterwards, or -1 when out of memory (offset[] then unchanged or improved). */
int64_t pbl__exact_window(const pbl_usage_record *r, int32_t n, int64_t align, int64_t target, int64_t stop,
                          double deadline, const pbl_allocator *al, int64_t *offset);

#endif
