/*
 * What the planner's strategy files share. The dispatcher (graph/planner/plan.c) does what
 * every strategy would otherwise repeat: it checks the records, sorts them by first and by
 * last step once, allocates the assignment, answers n == 0 itself, and afterwards frees the
 * assignment when the strategy fails or finishes it when it succeeds. A strategy therefore
 * gets at least one valid record and an allocated, zeroed assignment, and fills either
 * offset[] (PBL__FILLS_OFFSETS: the dispatcher then sets arena = max(offset + size)) or
 * object[], object_size[] and n_objects (PBL__FILLS_OBJECTS, TFLite's shared "objects": the
 * dispatcher lays the objects end to end and sets offset[] and arena).
 */
#ifndef PBL_PLAN_INTERNAL_H
#define PBL_PLAN_INTERNAL_H

#include <stddef.h>

#include "graph/base/export.h"
#include "graph/planner/sort.h"
#include "pebble/plan.h"

typedef struct pbl__plan_in {
    const pbl_usage_record *r;
    int32_t                 n;
    pbl_plan_options        opt;      /* defaults filled in */
    const pbl__key2        *by_first; /* [n] the records by (first, index): k = first, idx = record */
    const pbl__key2        *by_last;  /* [n] the records by (last, index): k = last, idx = record */
    /* `best`'s time budget (graph/planner/plan.c), seen by the strategies it runs: */
    double                  deadline;  /* pbl__plan_now() past which a strategy stops; 0: none */
    int32_t                *cut_off;   /* may be NULL; set to 1 by a strategy that stopped at the
                                          deadline but still returns a (partial-effort) result */
    const int64_t          *incumbent; /* may be NULL: offsets of the best verified packing so
                                          far, which exact starts from */
    const char *const      *ran;       /* [n_ran] strategies whose finished result `best` has
                                          already weighed into the incumbent (exact need not run
                                          them again); NULL / 0 outside `best` */
    int32_t                 n_ran;
    /* Where a strategy that declines or fails says why (pbl__errf; may be NULL / 0): the
     * dispatcher prefixes "strategy 'NAME': " and falls back to the status's words. */
    char                   *why;
    size_t                  why_len;
} pbl__plan_in;

typedef pbl_status (*pbl__strategy_fn)(const pbl__plan_in *in, pbl_assignment *out);

/* What a strategy fills in the assignment the dispatcher hands it (see above). */
typedef enum pbl__fills { PBL__FILLS_OFFSETS, PBL__FILLS_OBJECTS } pbl__fills;

/* Declarations of every strategy function: pbl__plan_<name>. */
#include "graph/planner/strategies.h"
#define PBL__STRATEGY_DECL(name, fills) pbl_status pbl__plan_##name(const pbl__plan_in *in, pbl_assignment *out);
PBL__STRATEGY_LIST(PBL__STRATEGY_DECL)
#undef PBL__STRATEGY_DECL

/* Runs one strategy as the dispatcher does: allocates *out, calls fn unless there are no
 * records, then frees *out (fn failed) or finishes it as `fills` says. For strategies made of
 * others (greedy_best). PBL_OK, PBL_ERR_NOMEM, or fn's status. */
pbl_status pbl__plan_run(const pbl__plan_in *in, pbl__strategy_fn fn, pbl__fills fills, pbl_assignment *out);

/* Keeps *a in *best when *best is empty (zeroed) or a's arena is strictly smaller (so a tie
 * keeps the earlier result), and frees the other; *a is left empty. */
void       pbl__plan_keep_smaller(pbl_assignment *best, pbl_assignment *a);

/* Allocates offset[] (and, when with_objects, object[] and object_size[] for up to n objects),
 * zeroed. PBL_OK or PBL_ERR_NOMEM. */
pbl_status pbl__assignment_init(pbl_assignment *a, int32_t n, int with_objects, const pbl_allocator *al);
/* Offsets from objects: object k starts where object k-1 ends (each start aligned); sets
 * offset[], arena. n_objects and object_size[] must be set. */
void       pbl__assignment_objects_to_offsets(pbl_assignment *a, int64_t align);
/* The arena pbl__assignment_objects_to_offsets gives objects of these sizes. */
int64_t    pbl__objects_arena(const int64_t *object_size, int32_t n_objects, int64_t align);
/* arena = max(offset + size). */
void       pbl__assignment_finish(pbl_assignment *a, const pbl_usage_record *r);

/* Runs the strategy called `name` (not "best") on in, deadline included. PBL_ERR_NOT_FOUND for
 * an unknown name. */
pbl_status pbl__plan_by_name(const pbl__plan_in *in, const char *name, pbl_assignment *out);

/* The budget clock (graph/planner/plan.c): seconds of the calling thread's CPU time, jumped
 * far ahead once a call's wall-clock safety cap (WALL_CAP_FACTOR times its budget) has passed.
 * Every deadline is a value of this clock. */
double     pbl__plan_now(void);
/* Seconds on a monotonic wall clock (what reports say a step took). */
double     pbl__plan_wall(void);
#define WALL_CAP_FACTOR 10.0

/* For tests: the clocks pbl__plan_now and pbl__plan_wall read on this thread (each gets ctx);
 * NULL (or NULL functions): the real ones. */
typedef struct pbl__plan_clocks {
    double (*cpu)(void *ctx);
    double (*wall)(void *ctx);
    void   *ctx;
} pbl__plan_clocks;
void       pbl__plan_set_clocks(const pbl__plan_clocks *c);
/* 1 once in's deadline has passed. A strategy calls it every few dozen steps of its main
 * loops (a clock read costs about as much as one step) and then returns PBL_ERR_TIMEOUT,
 * freeing what it built, or what it has with *in->cut_off set. */
static inline int pbl__plan_expired(const pbl__plan_in *in)
{
    return in->deadline > 0 && pbl__plan_now() > in->deadline;
}

void      *pbl__plan_alloc(const pbl_allocator *al, size_t bytes);   /* NULL on failure */
void       pbl__plan_free(const pbl_allocator *al, void *p, size_t bytes);
/* pbl_records_lower_bound with its scratch from al (NULL: malloc); -1 if out of memory. */
int64_t    pbl__records_lower_bound(const pbl_usage_record *r, int32_t n, const pbl_allocator *al);

static inline int64_t pbl__align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

#endif
