/* The planner's front door: strategy lookup, record checks, the prologue and epilogue every
 * strategy shares (sorted orders, the assignment, n == 0, objects to offsets), `best`, the
 * lower bound, and the assignment helpers. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
                           .mxnet_match_range = 16.0, .mxnet_sweep = 0 };
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

PBL__API int64_t pbl_records_lower_bound(const pbl_usage_record *r, int32_t n)
{
    if (n <= 0)
        return 0;
    event *e = malloc((size_t)n * 2 * sizeof *e);
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
    free(e);
    return best;
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

/* Pairs of records whose lifetimes overlap: at each start, every record already live. */
static int64_t overlapping_pairs(const pbl_usage_record *r, int32_t n)
{
    event *e = malloc((size_t)(n ? n : 1) * 2 * sizeof *e);
    if (!e)
        return INT64_MAX;
    for (int32_t i = 0; i < n; i++) {
        e[2 * i] = (event){ r[i].first * 2 + 1, 1 };
        e[2 * i + 1] = (event){ r[i].last * 2, -1 };
    }
    qsort(e, (size_t)n * 2, sizeof *e, cmp_event);
    int64_t live = 0, pairs = 0;
    for (int32_t i = 0; i < 2 * n; i++) {
        if (e[i].delta > 0)
            pairs += live;
        live += e[i].delta;
    }
    free(e);
    return pairs;
}

/* Strategies whose work grows with the overlapping pairs (or faster): `best` skips them when
 * there are more pairs than PAIR_BUDGET, which keeps it to about a second on 2 cores. Asked
 * for by name, they always run. */
static const char *const pair_bound[] = { "coloring", "best_fit_heap", "min_cost_flow", "greedy_by_size",
                                          "greedy_best", "offset_greedy_by_size" };
#define PAIR_BUDGET INT64_C(5000000)

static int skip_in_best(const char *name, int64_t pairs)
{
    if (pairs <= PAIR_BUDGET)
        return 0;
    for (size_t i = 0; i < sizeof pair_bound / sizeof pair_bound[0]; i++)
        if (strcmp(pair_bound[i], name) == 0)
            return 1;
    return 0;
}

/* best: every strategy, keeping the smallest result that verifies (ties: the earlier one).
 * A result at the lower bound cannot be beaten, so the search stops there; strategies whose
 * work is quadratic in overlapping lifetimes sit out huge instances (skip_in_best). */
static pbl_status plan_best(const pbl__plan_in *in, pbl_assignment *out, char *err, size_t errlen)
{
    pbl_assignment best = { 0 };
    pbl_status last_error = PBL_OK;
    int64_t bound = pbl_records_lower_bound(in->r, in->n), pairs = overlapping_pairs(in->r, in->n);
    for (int32_t s = 0; s < N_STRATEGIES && !(best.offset && best.arena <= bound); s++) {
        if (skip_in_best(strategies[s].name, pairs))
            continue;
        pbl_assignment a = { 0 };
        pbl_status st = pbl__plan_run(in, strategies[s].fn, strategies[s].fills, &a);
        if (st == PBL_ERR_NOMEM) {
            pbl_assignment_free(&best);
            return st;
        }
        if (st == PBL_OK)
            st = pbl_plan_verify(in->r, in->n, &a, in->opt.align, in->opt.capacity, NULL, 0);
        if (st != PBL_OK) {
            last_error = st;
            pbl_assignment_free(&a);
            continue;
        }
        pbl__plan_keep_smaller(&best, &a);
    }
    if (!best.offset)
        return pbl__errf(err, errlen, last_error != PBL_OK ? last_error : PBL_ERR_INVALID_ARG,
                         "no strategy produced a verified assignment%s", in->opt.capacity ? " within the capacity" : "");
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
    if (!keys) {
        s = PBL_ERR_NOMEM;
    } else {
        sort_orders(&in, keys);
        s = k == N_STRATEGIES ? plan_best(&in, &a, err, errlen)
                              : pbl__plan_run(&in, strategies[k].fn, strategies[k].fills, &a);
        pbl__plan_free(in.opt.allocator, keys, key_bytes);
    }
    if (s != PBL_OK && k < N_STRATEGIES && err && errlen && !err[0])
        snprintf(err, errlen, "strategy '%s': %s", name, pbl_status_str(s));
    if (s != PBL_OK)
        return s;
    if (!a.optimal && a.arena == pbl_records_lower_bound(r, n))
        a.optimal = 1;
    *out = a;
    return PBL_OK;
}
