/*
 * pebble/plan.h — the memory planner's core: usage records in, an assignment out.
 *
 * A usage record says a tensor needs `size` bytes from step `first` up to, not including,
 * step `last` (half-open, MiniMalloc's convention). An assignment gives every record an
 * offset into one arena; strategies that share whole buffers (TFLite's "objects") also say
 * which object each record uses. Two records whose lifetimes overlap must not overlap in
 * bytes; pbl_plan_verify checks that, the alignment, and a capacity.
 *
 *     pbl_usage_record r[] = { { 16, 0, 2 }, { 8, 1, 3 }, { 64, 2, 4 } };
 *     pbl_assignment a;
 *     char err[256];
 *     if (pbl_plan_records(r, 3, "best", NULL, &a, err, sizeof err) == PBL_OK) {
 *         printf("arena %lld, lower bound %lld\n", (long long)a.arena,
 *                (long long)pbl_records_lower_bound(r, 3));
 *         pbl_assignment_free(&a);
 *     }
 *
 * prints:
 *
 *     arena 72, lower bound 72
 *
 * The baseline is the `naive` strategy: every record its own bytes, one after another (each
 * offset aligned), so no two records share and the arena is the sum of the sizes. A record is
 * the planner's unit: for records made from a graph (pebble/liveness.h), values that liveness
 * let share storage in place (a relu over its input) are one record and count once. The
 * executor reports this figure as pbl_exec_stats.naive_bytes, beside the other baseline,
 * unshared_bytes: every node output its own bytes, in place or not (pebble/exec.h). For the
 * training step of zoo:mlp_train, naive is 1,344,192 bytes and unshared 1,737,408.
 *
 * This part of pebble depends on nothing else in the tree: records in, offsets out.
 * Everything here is thread-safe on distinct data.
 */
#ifndef PEBBLE_PLAN_H
#define PEBBLE_PLAN_H

#include <stdint.h>

#include "pebble/alloc.h"
#include "pebble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pbl_usage_record {
    int64_t size;   /* bytes, > 0 */
    int64_t first;  /* first step live */
    int64_t last;   /* one past the last step live: live on [first, last), last > first */
} pbl_usage_record;

typedef struct pbl_assignment {
    int64_t             *offset;    /* per record: bytes into the arena */
    int32_t             *object;    /* per record: shared object id, or NULL (offset strategies) */
    int64_t             *object_size; /* per object: bytes (NULL when object is NULL) */
    int32_t              n_objects;
    int32_t              n_records;
    int64_t              arena;     /* max over records of offset + size (0 for none) */
    int32_t              optimal;   /* proven optimal: arena equals a lower bound, or an exact search said so */
    const pbl_allocator *allocator; /* what the arrays were allocated with */
    int32_t              cut_off;   /* 1 when opt.time_limit stopped the strategy before it had
                                       done all its work: a valid result, but possibly larger
                                       than an unhurried run's (never set by `best`, whose
                                       report says which strategies were cut off) */
    int64_t              bound;     /* the strongest lower bound on any packing's arena the
                                       strategy proved (exact: the peak of live bytes raised
                                       for alignment, or above an arena its search proved
                                       infeasible), 0: none; arena / bound is the proven gap */
} pbl_assignment;

/* What `best` did with one strategy (pbl_plan_report). */
typedef enum pbl_plan_outcome {
    PBL_PLAN_NOT_RUN = 0,      /* not started: an earlier result reached the lower bound */
    PBL_PLAN_FINISHED,         /* ran to its end; its result passed the verifier */
    PBL_PLAN_CUT_OFF,          /* stopped at the time budget; arena >= 0 when what it had by then
                                  (e.g. best_fit_heap's finished orders) passed the verifier */
    PBL_PLAN_SKIPPED_BUDGET,   /* not started: the time budget was spent */
    PBL_PLAN_FAILED,           /* returned an error (status says which, e.g. not supported) */
    PBL_PLAN_REJECTED          /* its result failed the verifier (e.g. above the capacity) */
} pbl_plan_outcome;

typedef struct pbl_plan_step {
    const char *strategy;      /* static string */
    int32_t     outcome;       /* a pbl_plan_outcome */
    int32_t     status;        /* what the strategy returned (a pbl_status) */
    int64_t     arena;         /* its verified arena, -1 when none */
    double      seconds;       /* wall-clock time it took, verification included (the budget
                                  counts CPU time: see pbl_plan_options.time_limit) */
} pbl_plan_step;

#define PBL_PLAN_MAX_STEPS 32

/* Filled by `best` when pbl_plan_options.report points to one: every strategy in the order
 * best considered them, which one won, and why the others stopped. */
typedef struct pbl_plan_report {
    const char   *winner;      /* the strategy whose result best returned (NULL: none) */
    int32_t       reached_lower_bound; /* the winner's arena equals the lower bound */
    double        budget;      /* seconds of CPU time best allowed itself */
    double        seconds;     /* wall-clock seconds it took */
    double        cpu_seconds; /* CPU seconds it took (the calling thread's): what the budget counts */
    int32_t       wall_capped; /* 1 when the wall-clock safety cap (ten times the budget) stopped
                                  it: only then does the result depend on the machine's load */
    int64_t       lower_bound;
    int32_t       n_steps;
    pbl_plan_step step[PBL_PLAN_MAX_STEPS];
} pbl_plan_report;

/* A static word for an outcome: "not run (lower bound reached)", "finished", "cut off",
 * "skipped (budget spent)", "failed", "rejected"; "?" for other values. */
const char *pbl_plan_outcome_str(int32_t outcome);

/* pbl_plan_options.capacity and pbl_plan_verify's capacity: no limit. */
#define PBL_PLAN_NO_CAPACITY 0

typedef struct pbl_plan_options {
    const pbl_allocator *allocator;   /* NULL: malloc/free */
    int64_t align;                    /* offsets are multiples of this (default 1 for records; the
                                         executor uses 64) */
    int64_t capacity;                 /* PBL_PLAN_NO_CAPACITY (0, the default): no limit; else
                                         strategies that can aim for it do, and the verifier
                                         checks arena <= capacity (no arena fits in 0 bytes, so
                                         0 is only ever "none"; the CLI refuses --capacity 0) */
    double  time_limit;               /* seconds of CPU time of the calling thread (the planner
                                         runs on it alone), 0: none. CPU, not wall-clock, time:
                                         on a busy machine the call takes longer but buys the
                                         same work, so it gives the same result as on a quiet
                                         one. A deadline for every strategy: one still working
                                         when it passes stops, returning what it verifiably has
                                         (assignment.cut_off set) or PBL_ERR_TIMEOUT when it has
                                         nothing yet; searching strategies (exact) search until
                                         it; `best`'s whole time budget (0:
                                         pbl_plan_best_budget(n)). A safety cap of ten times the
                                         budget in wall-clock seconds stops a thread starved of
                                         CPU all the same (pbl_plan_report.wall_capped) */
    double  mxnet_match_range;        /* mxnet: a free block matches a request within this factor
                                         (default 16) */
    int32_t mxnet_sweep;              /* mxnet: also try ranges 1, 2, 4, ... up to the range and keep
                                         the best (default 0) */
    pbl_plan_report *report;          /* NULL, or filled by `best` (see pbl_plan_report) */
} pbl_plan_options;

/* `best`'s time budget in CPU seconds for n records when time_limit is 0: one second up to 30,000
 * records, then one more per 20,000 (2.6 s at 62,000), as the work of the strategies that come
 * closest grows with n (a fixed second would cut them off on the largest real models), and at
 * most ten seconds (from 210,000 records: a million-record instance stops there). */
double pbl_plan_best_budget(int32_t n);

pbl_plan_options pbl_plan_options_default(void);

/* The number of strategies and the name of strategy i (NULL when out of range): "naive",
 * "mxnet", "equality", "greedy_in_order", ..., "best". `best` is an anytime portfolio: it
 * runs the others, strong offset packers first, under a time budget (time_limit, else
 * pbl_plan_best_budget(n)), keeps the smallest result that passes pbl_plan_verify, and stops
 * as soon as one reaches the lower bound. A strategy still running at the budget's end is
 * cut off (keeping what it verifiably has), later ones are skipped; while nothing has a result
 * the O(n log n) ones (mxnet, equality, greedy_in_order, then naive) run whatever the budget,
 * so a small budget still gives a verified result. Its
 * result depends on the machine's speed (not its load: the budget counts CPU time) only when
 * something was cut off or skipped (opt.report says). */
int32_t     pbl_plan_strategy_count(void);
const char *pbl_plan_strategy_name(int32_t i);

/* Plans n records with the named strategy into *out (freed with pbl_assignment_free).
 * Returns PBL_ERR_NOT_FOUND (no such strategy), PBL_ERR_INVALID_ARG (a bad record: size <= 0,
 * last <= first, negative first; or bad options), PBL_ERR_NOMEM. err (may be NULL) explains.
 * The result is not verified here; pbl_plan_verify does that. */
pbl_status pbl_plan_records(const pbl_usage_record *r, int32_t n, const char *strategy,
                            const pbl_plan_options *opt, pbl_assignment *out, char *err, size_t errlen);
void       pbl_assignment_free(pbl_assignment *a); /* accepts a zeroed or freed assignment */

/* The largest sum of sizes live at one step: no assignment can use less. -1 if out of memory. */
int64_t    pbl_records_lower_bound(const pbl_usage_record *r, int32_t n);

/* Checks that records whose lifetimes overlap do not overlap in bytes, every offset is a
 * non-negative multiple of align, arena is max(offset + size), and arena <= capacity when
 * capacity > 0. Returns PBL_OK or PBL_ERR_INVALID_ARG with err naming the two records (by
 * index) or the offset at fault. O(n log n + n·w), w the most records live at once. */
pbl_status pbl_plan_verify(const pbl_usage_record *r, int32_t n, const pbl_assignment *a, int64_t align,
                           int64_t capacity, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
