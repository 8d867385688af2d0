/* The planner's front door: strategy lookup, record checks, the prologue and epilogue every
 * strategy shares (sorted orders, the assignment, n == 0, objects to offsets), `best` (the
 * anytime portfolio), the deadline, the lower bound, and the assignment helpers. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graph/base/errmsg.h"
#include "graph/planner/plan_internal.h"

typedef struct strategy {
    const char      *name;
    pbl__strategy_fn fn;
    pbl__fills       fills;
} strategy;

static const strategy strategies[] = {
#define PBL__STRATEGY_ENTRY(n, fills) { #n, pbl__plan_##n, PBL__FILLS_##fills },
    PBL__STRATEGY_LIST(PBL__STRATEGY_ENTRY)
#undef PBL__STRATEGY_ENTRY
};
#define N_STRATEGIES ((int32_t)(sizeof strategies / sizeof strategies[0]))

PBL__API pbl_plan_options pbl_plan_options_default(void)
{
    pbl_plan_options o = { .allocator = NULL, .align = 1, .capacity = 0, .time_limit = 0,
                           .mxnet_match_range = 16.0, .mxnet_sweep = 0, .report = NULL };
    return o;
}

PBL__API int32_t pbl_plan_strategy_count(void) { return N_STRATEGIES + 1; }

PBL__API const char *pbl_plan_strategy_name(int32_t i)
{
    if (i >= 0 && i < N_STRATEGIES)
        return strategies[i].name;
    return i == N_STRATEGIES ? "best" : NULL;
}

void *pbl__plan_alloc(const pbl_allocator *al, size_t bytes)
{
    if (bytes == 0)
        bytes = 1;
    return al && al->alloc ? al->alloc(al->user, bytes) : malloc(bytes);
}

void pbl__plan_free(const pbl_allocator *al, void *p, size_t bytes)
{
    if (!p)
        return;
    if (bytes == 0)
        bytes = 1;
    if (al && al->alloc)
        al->free(al->user, p, bytes);
    else
        free(p);
}

pbl_status pbl__assignment_init(pbl_assignment *a, int32_t n, int with_objects, const pbl_allocator *al)
{
    memset(a, 0, sizeof *a);
    a->allocator = al;
    a->n_records = n;
    a->offset = pbl__plan_alloc(al, (size_t)n * sizeof *a->offset);
    if (with_objects) {
        a->object = pbl__plan_alloc(al, (size_t)n * sizeof *a->object);
        a->object_size = pbl__plan_alloc(al, (size_t)n * sizeof *a->object_size);
    }
    if (!a->offset || (with_objects && (!a->object || !a->object_size))) {
        pbl_assignment_free(a);
        return PBL_ERR_NOMEM;
    }
    memset(a->offset, 0, (size_t)n * sizeof *a->offset);
    if (with_objects) {
        memset(a->object, 0, (size_t)n * sizeof *a->object);
        memset(a->object_size, 0, (size_t)n * sizeof *a->object_size);
    }
    return PBL_OK;
}

PBL__API void pbl_assignment_free(pbl_assignment *a)
{
    if (!a)
        return;
    size_t n = (size_t)a->n_records;
    pbl__plan_free(a->allocator, a->offset, n * sizeof *a->offset);
    pbl__plan_free(a->allocator, a->object, n * sizeof *a->object);
    pbl__plan_free(a->allocator, a->object_size, n * sizeof *a->object_size);
    memset(a, 0, sizeof *a);
}

int64_t pbl__objects_arena(const int64_t *object_size, int32_t n_objects, int64_t align)
{
    int64_t at = 0;
    for (int32_t k = 0; k < n_objects; k++)
        at = pbl__align_up(at, align) + object_size[k];
    return at;
}

void pbl__assignment_objects_to_offsets(pbl_assignment *a, int64_t align)
{
    /* Objects end to end, each start aligned; a record sits at its object's start. To stay
     * O(n) without allocating, object_size[] holds the starts while records look them up,
     * then is turned back into sizes. */
    int64_t at = 0;
    int64_t *start = a->object_size;
    for (int32_t k = 0; k < a->n_objects; k++) {
        int64_t size = start[k];
        at = pbl__align_up(at, align);
        start[k] = at;
        at += size;
    }
    for (int32_t i = 0; i < a->n_records; i++)
        a->offset[i] = start[a->object[i]];
    for (int32_t k = 0; k < a->n_objects; k++)
        start[k] = (k + 1 < a->n_objects ? start[k + 1] : at) - start[k];
    a->arena = at;
}

void pbl__assignment_finish(pbl_assignment *a, const pbl_usage_record *r)
{
    a->arena = 0;
    for (int32_t i = 0; i < a->n_records; i++)
        if (a->offset[i] + r[i].size > a->arena)
            a->arena = a->offset[i] + r[i].size;
}

pbl_status pbl__plan_run(const pbl__plan_in *in, pbl__strategy_fn fn, pbl__fills fills, pbl_assignment *out)
{
    pbl_status s = pbl__assignment_init(out, in->n, fills == PBL__FILLS_OBJECTS, in->opt.allocator);
    if (s != PBL_OK || in->n == 0)
        return s;
    s = fn(in, out);
    if (s != PBL_OK)
        pbl_assignment_free(out);
    else if (fills == PBL__FILLS_OBJECTS)
        pbl__assignment_objects_to_offsets(out, in->opt.align);
    else
        pbl__assignment_finish(out, in->r);
    return s;
}

void pbl__plan_keep_smaller(pbl_assignment *best, pbl_assignment *a)
{
    if (!best->offset || a->arena < best->arena) {
        pbl_assignment_free(best);
        *best = *a;
        memset(a, 0, sizeof *a);
    } else {
        pbl_assignment_free(a);
    }
}

/* The records by (first, index) and by (last, index), which most strategies walk: sorted once
 * here rather than in each of them (and once for all of `best`'s). keys holds 2n. */
static void sort_orders(pbl__plan_in *in, pbl__key2 *keys)
{
    size_t n = (size_t)in->n;
    for (int32_t i = 0; i < in->n; i++) {
        keys[i] = (pbl__key2){ in->r[i].first, i };
        keys[n + (size_t)i] = (pbl__key2){ in->r[i].last, i };
    }
    qsort(keys, n, sizeof *keys, pbl__key2_cmp);
    qsort(keys + n, n, sizeof *keys, pbl__key2_cmp);
    in->by_first = keys;
    in->by_last = keys + n;
}

typedef struct event {
    int64_t key;    /* time·2, +1 for a start: at one time, ends sort before starts */
    int64_t delta;  /* +size at a start, −size at an end */
} event;

static int cmp_event(const void *a, const void *b)
{
    int64_t x = ((const event *)a)->key, y = ((const event *)b)->key;
    return (x > y) - (x < y);
}

int64_t pbl__records_lower_bound(const pbl_usage_record *r, int32_t n, const pbl_allocator *al)
{
    if (n <= 0)
        return 0;
    size_t bytes = (size_t)n * 2 * sizeof(event);
    event *e = pbl__plan_alloc(al, bytes);
    if (!e)
        return -1;
    for (int32_t i = 0; i < n; i++) {
        e[2 * i] = (event){ r[i].first * 2 + 1, r[i].size };
        e[2 * i + 1] = (event){ r[i].last * 2, -r[i].size };
    }
    qsort(e, (size_t)n * 2, sizeof *e, cmp_event);
    int64_t live = 0, best = 0;
    for (int32_t i = 0; i < 2 * n; i++) {
        live += e[i].delta;
        if (live > best)
            best = live;
    }
    pbl__plan_free(al, e, bytes);
    return best;
}

PBL__API int64_t pbl_records_lower_bound(const pbl_usage_record *r, int32_t n)
{
    return pbl__records_lower_bound(r, n, NULL);
}

static pbl_status check_records(const pbl_usage_record *r, int32_t n, char *err, size_t errlen)
{
    for (int32_t i = 0; i < n; i++) {
        const char *why = r[i].size <= 0 ? "size must be positive"
                        : r[i].first < 0 ? "first must not be negative"
                        : r[i].last <= r[i].first ? "last must be greater than first" : NULL;
        if (why) {
            return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "record %d (size %lld, [%lld, %lld)): %s", (int)i,
                             (long long)r[i].size, (long long)r[i].first, (long long)r[i].last, why);
        }
    }
    return PBL_OK;
}

PBL__API const char *pbl_plan_outcome_str(int32_t outcome)
{
    switch (outcome) {
    case PBL_PLAN_NOT_RUN: return "not run (lower bound reached)";
    case PBL_PLAN_FINISHED: return "finished";
    case PBL_PLAN_CUT_OFF: return "cut off";
    case PBL_PLAN_SKIPPED_BUDGET: return "skipped (budget spent)";
    case PBL_PLAN_FAILED: return "failed";
    case PBL_PLAN_REJECTED: return "rejected";
    default: return "?";
    }
}

/*
 * The budget clock (issue 15). Every deadline (`best`'s budget, --time-limit, exact's safety
 * net) is counted in the CPU time of the calling thread — the planner runs on that thread
 * alone — not in wall-clock time: a busy machine then slows the planner down but does not
 * change how much work the budget buys, so the same input gives the same arena under any
 * load (as long as the work fits the budget with some room: CPU time itself varies by a few
 * per cent with cache and frequency effects). Process CPU time would count the caller's other
 * threads.
 *
 * A wall-clock safety cap bounds what a starved thread costs: where a budget is set it ends
 * WALL_CAP_FACTOR times the budget in wall-clock seconds after the call began; past it the
 * budget clock jumps PAST_EVERY_DEADLINE ahead (latched until the call returns), so every
 * deadline check stops its strategy as the budget's end would. Only then does the result
 * depend on the load; the report says so (pbl_plan_report.wall_capped).
 *
 * Tests swap both clocks (pbl__plan_set_clocks) for counters, so that what the budget buys is
 * a deterministic number of deadline checks.
 */
#define PAST_EVERY_DEADLINE 1e9

static _Thread_local pbl__plan_clocks clocks;    /* NULL functions: the real clocks */
static _Thread_local double           wall_cap;  /* wall-clock seconds, 0: none */
static _Thread_local int              capped;    /* wall_cap passed during this call */

static double read_clock(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

PBL__API void pbl__plan_set_clocks(const pbl__plan_clocks *c)
{
    clocks = c ? *c : (pbl__plan_clocks){ 0 };
}

double pbl__plan_wall(void)
{
    return clocks.wall ? clocks.wall(clocks.ctx) : read_clock(CLOCK_MONOTONIC);
}

/* The thread's CPU seconds, without the cap's jump. */
static double cpu_now(void)
{
    return clocks.cpu ? clocks.cpu(clocks.ctx) : read_clock(CLOCK_THREAD_CPUTIME_ID);
}

double pbl__plan_now(void)
{
    double t = cpu_now();
    if (!capped && wall_cap > 0 && pbl__plan_wall() > wall_cap)
        capped = 1;
    return capped ? t + PAST_EVERY_DEADLINE : t;
}

/* Sets the wall-clock cap for a call with this budget (seconds of the budget clock; 0: no
 * budget, no cap), saving the caller's (a nested call restores it with end_cap). */
typedef struct cap_state {
    double wall_cap;
    int    capped;
} cap_state;

static cap_state begin_cap(double budget)
{
    cap_state was = { wall_cap, capped };
    wall_cap = budget > 0 ? pbl__plan_wall() + WALL_CAP_FACTOR * budget : 0;
    capped = 0;
    return was;
}

/* Restores the caller's cap; returns whether this call's cap was reached. */
static int end_cap(cap_state was)
{
    int hit = capped;
    wall_cap = was.wall_cap;
    capped = was.capped;
    return hit;
}

pbl_status pbl__plan_by_name(const pbl__plan_in *in, const char *name, pbl_assignment *out)
{
    for (int32_t k = 0; k < N_STRATEGIES; k++)
        if (strcmp(strategies[k].name, name) == 0)
            return pbl__plan_run(in, strategies[k].fn, strategies[k].fills, out);
    return PBL_ERR_NOT_FOUND;
}

/*
 * best: an anytime portfolio. The strategies run one after another under one deadline, each
 * result goes through the verifier, the smallest verified one is kept (ties: the earlier),
 * and the portfolio stops as soon as one reaches the lower bound — nothing can beat it.
 *
 * The order, by what each costs and how close it tends to come (nothing here is tuned to a
 * particular instance):
 *  1. mxnet, equality, greedy_in_order: O(n log n) whatever the overlap (a few ms at 20k
 *     records), so a verified result exists almost at once; when sizes repeat (as in graphs
 *     built from one layer shape) sharing whole buffers can reach the bound by itself.
 *  2. offset_greedy_by_size: every record gets an offset of its own, so no slack is lost to a
 *     smaller buffer sitting in a larger one's object; on records with widely varied sizes
 *     (real models) it comes close, in about n log n plus the overlaps each record meets.
 *  3. exact: starts from the best packing so far (in->incumbent) and searches below it; on
 *     large instances its window step (exact_window.c) is what reaches the lower bound, at a
 *     few offset_greedy_by_size passes' cost, so it goes before best_fit_heap, which costs
 *     about five such passes (four orders; 0.76 s of CPU at 37k records) and reaches the
 *     bound less often.
 *  3b. best_fit_heap: XLA's heap simulator; the next best when exact stops short.
 *  4. greedy_by_breadth, greedy_by_size, greedy_best, coloring, min_cost_flow: object sharing
 *     whose work grows with the overlapping pairs or faster, cheapest first.
 *  5. naive: never smaller than another result; it is the fallback (see below).
 * One property of the request changes the order: with a capacity, exact goes first — it is
 * the only strategy that aims at a capacity; the others' results are only checked against it.
 *
 * Every strategy sees the deadline and checks it in its main loops: one still running when
 * time is up stops cleanly (PBL_ERR_TIMEOUT, or what it verifiably has with *cut_off set),
 * and those after it are skipped. While there is no result at all, the O(n log n) ones of
 * group 1 and naive (O(n), never fails on valid records) run whatever the budget, so a tiny
 * budget still yields a verified result, and one far better than naive's. opt.report, when
 * given, gets every strategy's outcome, arena and time.
 */
static const char *const portfolio[] = { "mxnet", "equality", "greedy_in_order", "offset_greedy_by_size",
                                         "exact", "best_fit_heap", "greedy_by_breadth", "greedy_by_size",
                                         "greedy_best", "coloring", "min_cost_flow", "naive" };
#define N_PORTFOLIO ((int32_t)(sizeof portfolio / sizeof portfolio[0]))

/* Group 1 and naive: cheap enough to run past the budget when nothing else has a result. */
static int is_fallback(const char *name)
{
    return strcmp(name, "naive") == 0 || strcmp(name, portfolio[0]) == 0 || strcmp(name, portfolio[1]) == 0 ||
           strcmp(name, portfolio[2]) == 0;
}

PBL__API double pbl_plan_best_budget(int32_t n)
{
    double extra = ((double)n - 30000.0) / 20000.0;
    return extra <= 0 ? 1.0 : extra < 9.0 ? 1.0 + extra : 10.0;
}

static pbl_status plan_best(const pbl__plan_in *in0, pbl_assignment *out, char *err, size_t errlen)
{
    pbl__plan_in in = *in0;
    pbl_plan_report local, *rep = in.opt.report ? in.opt.report : &local;
    double budget = in.opt.time_limit > 0 ? in.opt.time_limit : pbl_plan_best_budget(in.n);
    double t0 = cpu_now(), w0 = pbl__plan_wall();
    memset(rep, 0, sizeof *rep);
    rep->budget = budget;
    rep->lower_bound = pbl__records_lower_bound(in.r, in.n, in.opt.allocator);
    if (rep->lower_bound < 0)
        return pbl__errf(err, errlen, PBL_ERR_NOMEM, "plan: out of memory");
    in.deadline = t0 + budget;
    in.opt.report = NULL;

    const char *order[N_PORTFOLIO];
    int32_t n_order = 0;
    if (in.opt.capacity > 0)
        order[n_order++] = "exact";
    for (int32_t k = 0; k < N_PORTFOLIO; k++)
        if (!(in.opt.capacity > 0 && strcmp(portfolio[k], "exact") == 0))
            order[n_order++] = portfolio[k];

    pbl_assignment best = { 0 };
    int have = 0, done = 0;
    pbl_status last_error = PBL_OK;
    /* A strategy's result is verified after it returns, so the strategies stop that much before
     * the budget's end: the most CPU time a verification took so far (14 ms at 56k records),
     * else a cut-off strategy's result would be verified past the budget */
    double verify_cost = 0;
    const char *ran[PBL_PLAN_MAX_STEPS]; /* finished, weighed into `best`: see pbl__plan_in.ran */
    int32_t n_ran = 0;
    for (int32_t k = 0; k < n_order && k < PBL_PLAN_MAX_STEPS; k++) {
        pbl_plan_step *step = &rep->step[rep->n_steps++];
        *step = (pbl_plan_step){ .strategy = order[k], .outcome = PBL_PLAN_NOT_RUN, .arena = -1 };
        if (done)
            continue;
        int fallback = !have && is_fallback(order[k]);
        if (pbl__plan_now() > in.deadline && !fallback) {
            step->outcome = PBL_PLAN_SKIPPED_BUDGET;
            continue;
        }
        pbl__plan_in sub = in;
        int32_t cut = 0;
        sub.cut_off = &cut;
        sub.incumbent = have ? best.offset : NULL;
        sub.ran = have ? ran : NULL;
        sub.n_ran = have ? n_ran : 0;
        if (fallback)
            sub.deadline = 0;
        double s0 = pbl__plan_wall();
        pbl_assignment a = { 0 };
        pbl_status st = pbl__plan_by_name(&sub, order[k], &a);
        step->status = st;
        if (st == PBL_ERR_NOMEM) {
            pbl_assignment_free(&best);
            return st;
        }
        double v0 = cpu_now();
        if (st == PBL_OK)
            st = pbl_plan_verify(in.r, in.n, &a, in.opt.align, in.opt.capacity, NULL, 0);
        if (cpu_now() - v0 > verify_cost) {
            verify_cost = cpu_now() - v0;
            in.deadline = t0 + budget - verify_cost;
        }
        if (st == PBL_ERR_NOMEM) { /* the verifier's scratch: no verdict, so no result */
            pbl_assignment_free(&a);
            pbl_assignment_free(&best);
            return st;
        }
        step->seconds = pbl__plan_wall() - s0;
        if (st != PBL_OK) {
            step->outcome = step->status == PBL_ERR_TIMEOUT ? PBL_PLAN_CUT_OFF
                          : step->status != PBL_OK         ? PBL_PLAN_FAILED
                                                           : PBL_PLAN_REJECTED;
            if (step->status == PBL_OK)
                step->status = st;
            if (last_error != PBL_ERR_INFEASIBLE) /* a proof that nothing fits outranks a miss */
                last_error = st;
            pbl_assignment_free(&a);
            continue;
        }
        step->outcome = cut ? PBL_PLAN_CUT_OFF : PBL_PLAN_FINISHED;
        step->arena = a.arena;
        if (!cut)
            ran[n_ran++] = order[k];
        if (!have || a.arena < best.arena) {
            pbl_assignment_free(&best);
            best = a;
            have = 1;
            rep->winner = order[k];
        } else {
            pbl_assignment_free(&a);
        }
        done = best.arena <= rep->lower_bound;
    }
    rep->seconds = pbl__plan_wall() - w0;
    rep->cpu_seconds = cpu_now() - t0;
    if (!have) {
        /* more bytes live at one step than the capacity: no strategy could have fitted */
        if (in.opt.capacity && rep->lower_bound > in.opt.capacity)
            last_error = PBL_ERR_INFEASIBLE;
        return pbl__errf(err, errlen, last_error != PBL_OK ? last_error : PBL_ERR_INVALID_ARG,
                         "no strategy produced a verified assignment%s", in.opt.capacity ? " within the capacity" : "");
    }
    rep->reached_lower_bound = best.arena <= rep->lower_bound;
    *out = best;
    return PBL_OK;
}

PBL__API pbl_status pbl_plan_records(const pbl_usage_record *r, int32_t n, const char *name,
                                     const pbl_plan_options *opt, pbl_assignment *out, char *err, size_t errlen)
{
    pbl__errclear(err, errlen);
    if (!out || n < 0 || (n > 0 && !r) || !name) {
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "plan: bad arguments");
    }
    memset(out, 0, sizeof *out);
    pbl__plan_in in = { .r = r, .n = n, .opt = opt ? *opt : pbl_plan_options_default() };
    if (in.opt.align <= 0)
        in.opt.align = 1;
    if (in.opt.mxnet_match_range < 1.0)
        in.opt.mxnet_match_range = 16.0;
    if (in.opt.capacity < 0 || in.opt.time_limit < 0) {
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "plan: capacity and time limit must not be negative");
    }
    pbl_status s = check_records(r, n, err, errlen);
    if (s != PBL_OK)
        return s;
    int32_t k = 0;
    while (k < N_STRATEGIES && strcmp(strategies[k].name, name) != 0)
        k++;
    if (k == N_STRATEGIES && strcmp(name, "best") != 0)
        return pbl__errf(err, errlen, PBL_ERR_NOT_FOUND, "unknown strategy '%s'", name);
    size_t key_bytes = 2 * (size_t)n * sizeof(pbl__key2);
    pbl__key2 *keys = pbl__plan_alloc(in.opt.allocator, key_bytes);
    pbl_assignment a = { 0 };
    int32_t cut = 0;
    char why[256] = "";
    double budget = k < N_STRATEGIES                ? in.opt.time_limit
                  : in.opt.time_limit > 0          ? in.opt.time_limit
                                                   : pbl_plan_best_budget(n);
    cap_state was = begin_cap(budget);
    if (!keys) {
        s = PBL_ERR_NOMEM;
    } else if (k == N_STRATEGIES) {
        sort_orders(&in, keys);
        s = plan_best(&in, &a, err, errlen);
    } else {
        /* the time limit is one strategy's deadline too (best sets its own per strategy) */
        if (in.opt.time_limit > 0)
            in.deadline = pbl__plan_now() + in.opt.time_limit;
        in.cut_off = &cut;
        in.why = why;
        in.why_len = sizeof why;
        sort_orders(&in, keys);
        s = pbl__plan_run(&in, strategies[k].fn, strategies[k].fills, &a);
    }
    int hit = end_cap(was);
    if (keys && k == N_STRATEGIES && in.opt.report)
        in.opt.report->wall_capped = hit;
    pbl__plan_free(in.opt.allocator, keys, key_bytes);
    if (s != PBL_OK && k < N_STRATEGIES) {
        if (s == PBL_ERR_TIMEOUT && in.deadline > 0 && !why[0])
            snprintf(why, sizeof why, "cut off at the time limit (%.3g s) before it had a result%s", in.opt.time_limit,
                     in.opt.capacity ? " within the capacity" : "");
        return pbl__errf(err, errlen, s, "strategy '%s': %s", name, why[0] ? why : pbl_status_str(s));
    }
    if (s != PBL_OK)
        return s;
    a.cut_off = cut != 0;
    int64_t bound = a.optimal ? 0 : pbl__records_lower_bound(r, n, in.opt.allocator);
    if (bound < 0) {
        pbl_assignment_free(&a);
        return pbl__errf(err, errlen, PBL_ERR_NOMEM, "plan: out of memory");
    }
    if (!a.optimal && a.arena == bound)
        a.optimal = 1;
    *out = a;
    return PBL_OK;
}
