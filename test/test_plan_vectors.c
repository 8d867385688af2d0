/* TFLite's memory-planning strategies against the published vectors of TFLite's
 * memory_management_test.cc (ChainRecords, ComplexRecords, alignment), the edge cases (no
 * records, one record, records that never overlap), greedy_best's choice, and — on seeded
 * random record sets — each fast implementation against a straightforward reference written
 * the way TFLite's code reads (quadratic scans, a distance matrix, per-step profiles).
 *
 * TFLite's records are (size, first_task, last_task) with both tasks inclusive; pebble's
 * {size, first, last} is half-open, so TFLite (s, f, l) is pebble {s, f, l + 1}. Every
 * result also goes through pbl_plan_verify. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pebble/pebble.h"

#define N_OF(a) ((int32_t)(sizeof(a) / sizeof((a)[0])))

static const char *const object_strategies[] = { "equality", "greedy_in_order", "greedy_by_breadth",
                                                 "greedy_by_size", "greedy_best", "min_cost_flow" };
static const char *const all_strategies[] = { "equality", "greedy_in_order", "greedy_by_breadth", "greedy_by_size",
                                              "greedy_best", "min_cost_flow", "offset_greedy_by_size" };

/* TFLite's records, inclusive ends, as pebble's. */
static void from_tflite(const int64_t (*t)[3], int32_t n, pbl_usage_record *r)
{
    for (int32_t i = 0; i < n; i++)
        r[i] = (pbl_usage_record){ t[i][0], t[i][1], t[i][2] + 1 };
}

static const int64_t chain[][3] = { { 16, 0, 1 }, { 8, 1, 2 }, { 64, 2, 3 }, { 32, 3, 4 }, { 8, 4, 5 } };
static const int64_t complex_recs[][3] = { { 32, 0, 1 }, { 32, 1, 4 }, { 8, 2, 5 }, { 16, 3, 5 }, { 8, 4, 5 },
                                           { 64, 5, 7 }, { 8, 6, 8 },  { 8, 7, 8 },  { 16, 8, 9 } };

static void print_list(const char *what, const int64_t *v, int32_t n)
{
    printf("%s (", what);
    for (int32_t i = 0; i < n; i++)
        printf("%s%lld", i ? "," : "", (long long)v[i]);
    printf(")");
}

/* Plans with `strategy` (align 1 unless given), verifies, and returns the assignment. */
static pbl_assignment plan(const pbl_usage_record *r, int32_t n, const char *strategy, int64_t align)
{
    pbl_plan_options o = pbl_plan_options_default();
    o.align = align;
    pbl_assignment a;
    char err[256];
    pbl_status s = pbl_plan_records(r, n, strategy, &o, &a, err, sizeof err);
    if (s != PBL_OK)
        print_error("%s: %s (%s)\n", strategy, pbl_status_str(s), err);
    assert_int_equal(s, PBL_OK);
    s = pbl_plan_verify(r, n, &a, align, 0, err, sizeof err);
    if (s != PBL_OK)
        print_error("%s: the verifier refused: %s\n", strategy, err);
    assert_int_equal(s, PBL_OK);
    return a;
}

/* The shared objects of `strategy` are exactly want_obj (per record) and want_size (per
 * object), and the arena is their sum. */
static void expect_objects(const char *name, const pbl_usage_record *r, int32_t n, const char *strategy,
                           const int32_t *want_obj, const int64_t *want_size, int32_t want_n_obj)
{
    pbl_assignment a = plan(r, n, strategy, 1);
    int64_t got_obj[64], want_obj64[64], sum = 0;
    for (int32_t i = 0; i < n; i++) {
        got_obj[i] = a.object ? a.object[i] : -1;
        want_obj64[i] = want_obj[i];
    }
    for (int32_t k = 0; k < want_n_obj; k++)
        sum += want_size[k];
    printf("%s %-17s: ", name, strategy);
    print_list("objects", got_obj, n);
    print_list(" want", want_obj64, n);
    print_list("; sizes", a.object_size ? a.object_size : want_size, a.object_size ? a.n_objects : 0);
    print_list(" want", want_size, want_n_obj);
    printf("; arena %lld want %lld\n", (long long)a.arena, (long long)sum);
    assert_non_null(a.object);
    assert_int_equal(a.n_objects, want_n_obj);
    for (int32_t i = 0; i < n; i++)
        assert_int_equal(a.object[i], want_obj[i]);
    for (int32_t k = 0; k < want_n_obj; k++)
        assert_int_equal(a.object_size[k], want_size[k]);
    assert_int_equal(a.arena, sum);
    pbl_assignment_free(&a);
}

static void expect_offsets(const char *name, const pbl_usage_record *r, int32_t n, const char *strategy, int64_t align,
                           const int64_t *want, int64_t want_arena)
{
    pbl_assignment a = plan(r, n, strategy, align);
    printf("%s %s align %lld: ", name, strategy, (long long)align);
    print_list("offsets", a.offset, n);
    print_list(" want", want, n);
    printf("; arena %lld want %lld\n", (long long)a.arena, (long long)want_arena);
    for (int32_t i = 0; i < n; i++)
        assert_int_equal(a.offset[i], want[i]);
    assert_int_equal(a.arena, want_arena);
    pbl_assignment_free(&a);
}

static void expect_arena(const char *name, const pbl_usage_record *r, int32_t n, const char *strategy, int64_t want)
{
    pbl_assignment a = plan(r, n, strategy, 1);
    printf("%s %-21s: arena %lld want %lld\n", name, strategy, (long long)a.arena, (long long)want);
    assert_int_equal(a.arena, want);
    pbl_assignment_free(&a);
}

/* ---- the published vectors ------------------------------------------------------------------ */

static void test_chain_records(void **state)
{
    (void)state;
    pbl_usage_record r[5];
    from_tflite(chain, 5, r);
    expect_arena("chain", r, 5, "naive", 128);
    expect_objects("chain", r, 5, "equality", (const int32_t[]){ 0, 1, 2, 3, 1 }, (const int64_t[]){ 16, 8, 64, 32 }, 4);
    const char *pairs[] = { "greedy_in_order", "greedy_by_breadth", "greedy_by_size", "greedy_best", "min_cost_flow" };
    for (int32_t k = 0; k < N_OF(pairs); k++)
        expect_objects("chain", r, 5, pairs[k], (const int32_t[]){ 0, 1, 0, 1, 0 }, (const int64_t[]){ 64, 32 }, 2);
    expect_offsets("chain", r, 5, "offset_greedy_by_size", 1, (const int64_t[]){ 0, 64, 0, 64, 0 }, 96);
    expect_offsets("chain", r, 5, "offset_greedy_by_size", 128, (const int64_t[]){ 0, 128, 0, 128, 0 }, 160);
}

static void test_complex_records(void **state)
{
    (void)state;
    pbl_usage_record r[9];
    from_tflite(complex_recs, 9, r);
    expect_arena("complex", r, 9, "naive", 192);
    expect_objects("complex", r, 9, "equality", (const int32_t[]){ 0, 1, 2, 3, 4, 5, 4, 2, 3 },
                   (const int64_t[]){ 32, 32, 8, 16, 8, 64 }, 6);
    expect_objects("complex", r, 9, "min_cost_flow", (const int32_t[]){ 0, 1, 2, 0, 3, 1, 3, 2, 0 },
                   (const int64_t[]){ 32, 64, 8, 8 }, 4);
    expect_objects("complex", r, 9, "greedy_in_order", (const int32_t[]){ 0, 1, 0, 2, 3, 1, 3, 2, 0 },
                   (const int64_t[]){ 32, 64, 16, 8 }, 4);
    expect_objects("complex", r, 9, "greedy_by_breadth", (const int32_t[]){ 0, 4, 2, 1, 3, 0, 2, 3, 1 },
                   (const int64_t[]){ 64, 16, 8, 8, 32 }, 5);
    expect_objects("complex", r, 9, "greedy_by_size", (const int32_t[]){ 1, 0, 2, 1, 3, 0, 1, 2, 0 },
                   (const int64_t[]){ 64, 32, 8, 8 }, 4);
    /* greedy_best keeps greedy_by_size's 112 over greedy_in_order's 120 and breadth's 128 */
    expect_objects("complex", r, 9, "greedy_best", (const int32_t[]){ 1, 0, 2, 1, 3, 0, 1, 2, 0 },
                   (const int64_t[]){ 64, 32, 8, 8 }, 4);
    expect_offsets("complex", r, 9, "offset_greedy_by_size", 1, (const int64_t[]){ 0, 32, 80, 64, 88, 0, 64, 72, 0 },
                   96);
}

/* Objects laid end to end honour the alignment: complex's greedy_by_size objects 64, 32, 8, 8
 * start at 0, 64, 128, 192 with align 64. */
static void test_object_alignment(void **state)
{
    (void)state;
    pbl_usage_record r[9];
    from_tflite(complex_recs, 9, r);
    pbl_assignment a = plan(r, 9, "greedy_by_size", 64);
    const int64_t want[] = { 64, 0, 128, 64, 192, 0, 64, 128, 0 };
    print_list("complex greedy_by_size align 64: offsets", a.offset, 9);
    print_list(" want", want, 9);
    printf("; arena %lld want 200\n", (long long)a.arena);
    for (int32_t i = 0; i < 9; i++)
        assert_int_equal(a.offset[i], want[i]);
    assert_int_equal(a.arena, 200);
    pbl_assignment_free(&a);
}

/* ---- edge cases ---------------------------------------------------------------------------- */

static void test_empty_and_one(void **state)
{
    (void)state;
    pbl_usage_record one = { 16, 0, 1 };
    for (int32_t k = 0; k < N_OF(all_strategies); k++) {
        pbl_assignment a = plan(NULL, 0, all_strategies[k], 1);
        printf("empty %-21s: arena %lld want 0, objects %d want 0\n", all_strategies[k], (long long)a.arena,
               (int)a.n_objects);
        assert_int_equal(a.arena, 0);
        assert_int_equal(a.n_objects, 0);
        pbl_assignment_free(&a);
        a = plan(&one, 1, all_strategies[k], 1);
        printf("one   %-21s: arena %lld want 16, offset %lld want 0\n", all_strategies[k], (long long)a.arena,
               (long long)a.offset[0]);
        assert_int_equal(a.arena, 16);
        assert_int_equal(a.offset[0], 0);
        pbl_assignment_free(&a);
    }
    for (int32_t k = 0; k < N_OF(object_strategies); k++)
        expect_objects("one", &one, 1, object_strategies[k], (const int32_t[]){ 0 }, (const int64_t[]){ 16 }, 1);
}

/* Records that never overlap all reuse one object — equality only when their sizes are equal,
 * and min_cost_flow only when its cost, the bytes each record adds to the object it takes
 * over, says so: on `mixed` the chain r0, r1, r2, r3, r4 costs 24 + 0 + 32 + 0 + 24 = 80, while
 * {r0, r2, r4} and {r1, r3} cost 24 + 16 + 0 + 8 + 8 = 56, the unique minimum. */
static void test_never_overlapping(void **state)
{
    (void)state;
    pbl_usage_record mixed[] = { { 24, 0, 2 }, { 8, 2, 3 }, { 40, 5, 9 }, { 16, 9, 10 }, { 40, 12, 13 } };
    pbl_usage_record same[] = { { 24, 0, 2 }, { 24, 2, 3 }, { 24, 5, 9 }, { 24, 9, 10 }, { 24, 12, 13 } };
    const int32_t zero[5] = { 0 };
    const int64_t zero_off[5] = { 0 };
    for (int32_t k = 0; k < N_OF(object_strategies); k++) {
        if (strcmp(object_strategies[k], "equality") != 0 && strcmp(object_strategies[k], "min_cost_flow") != 0)
            expect_objects("disjoint", mixed, 5, object_strategies[k], zero, (const int64_t[]){ 40 }, 1);
        expect_objects("disjoint-same", same, 5, object_strategies[k], zero, (const int64_t[]){ 24 }, 1);
    }
    expect_objects("disjoint", mixed, 5, "equality", (const int32_t[]){ 0, 1, 2, 3, 2 },
                   (const int64_t[]){ 24, 8, 40, 16 }, 4);
    expect_objects("disjoint", mixed, 5, "min_cost_flow", (const int32_t[]){ 0, 1, 0, 1, 0 },
                   (const int64_t[]){ 40, 16 }, 2);
    expect_offsets("disjoint", mixed, 5, "offset_greedy_by_size", 1, zero_off, 40);
    expect_offsets("disjoint", mixed, 5, "offset_greedy_by_size", 64, zero_off, 40);
}

/* ---- a PRNG and random record sets ---------------------------------------------------------- */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *g) /* splitmix64 */
{
    uint64_t z = (g->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int64_t rng_range(rng *g, int64_t lo, int64_t hi) /* [lo, hi] */
{
    return lo + (int64_t)(rng_next(g) % (uint64_t)(hi - lo + 1));
}

/* n records over steps [0, horizon), sizes from a few classes (so ties happen) or wide. */
static void random_records(rng *g, pbl_usage_record *r, int32_t n, int64_t horizon, int64_t max_len)
{
    static const int64_t classes[] = { 4, 8, 8, 16, 16, 24, 32, 64, 100, 128 };
    int wide = (int)rng_range(g, 0, 2) == 0;
    for (int32_t i = 0; i < n; i++) {
        int64_t first = rng_range(g, 0, horizon - 1);
        int64_t len = rng_range(g, 1, max_len);
        int64_t size = wide ? rng_range(g, 1, 1000) : classes[rng_range(g, 0, N_OF(classes) - 1)];
        r[i] = (pbl_usage_record){ size, first, first + len };
    }
}

/* ---- references: TFLite's algorithms as they read, O(n^2) and worse ------------------------- */

enum { MAXR = 96 };

static int overlap(const pbl_usage_record *a, const pbl_usage_record *b)
{
    return a->first < b->last && b->first < a->last;
}

/* The records by first step, ties by index (what TFLite's in-order strategies assume). */
static void by_first(const pbl_usage_record *r, int32_t n, int32_t *order)
{
    for (int32_t i = 0; i < n; i++)
        order[i] = i;
    for (int32_t i = 1; i < n; i++) /* insertion sort: stable */
        for (int32_t j = i; j > 0 && r[order[j - 1]].first > r[order[j]].first; j--) {
            int32_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
}

/* Releases (in (last, id) order) the objects whose holder ended by `at`. holder[o] = -1: free. */
static int32_t release(const pbl_usage_record *r, int32_t *holder, int32_t n_obj, int64_t at, int32_t *freed)
{
    int32_t n_freed = 0;
    for (;;) {
        int32_t pick = -1;
        for (int32_t o = 0; o < n_obj; o++)
            if (holder[o] >= 0 && r[holder[o]].last <= at &&
                (pick < 0 || r[holder[o]].last < r[holder[pick]].last))
                pick = o;
        if (pick < 0)
            return n_freed;
        holder[pick] = -1;
        freed[n_freed++] = pick;
    }
}

static int32_t ref_equality(const pbl_usage_record *r, int32_t n, int32_t *obj, int64_t *size)
{
    int32_t order[MAXR], holder[MAXR], freed[MAXR], stack[MAXR], n_stack = 0, n_obj = 0;
    by_first(r, n, order);
    for (int32_t k = 0; k < n; k++) {
        int32_t i = order[k];
        int32_t nf = release(r, holder, n_obj, r[i].first, freed);
        for (int32_t f = 0; f < nf; f++)
            stack[n_stack++] = freed[f];
        int32_t take = -1;
        for (int32_t s = n_stack - 1; s >= 0 && take < 0; s--) /* the most recently freed */
            if (size[stack[s]] == r[i].size) {
                take = stack[s];
                memmove(&stack[s], &stack[s + 1], (size_t)(n_stack - s - 1) * sizeof *stack);
                n_stack--;
            }
        if (take < 0) {
            take = n_obj++;
            size[take] = r[i].size;
        }
        obj[i] = take;
        holder[take] = i;
    }
    return n_obj;
}

static int32_t ref_in_order(const pbl_usage_record *r, int32_t n, int32_t *obj, int64_t *size)
{
    int32_t order[MAXR], holder[MAXR], freed[MAXR], n_obj = 0;
    int in_pool[MAXR] = { 0 };
    by_first(r, n, order);
    for (int32_t k = 0; k < n; k++) {
        int32_t i = order[k];
        int32_t nf = release(r, holder, n_obj, r[i].first, freed);
        for (int32_t f = 0; f < nf; f++)
            in_pool[freed[f]] = 1;
        int64_t need = r[i].size;
        int32_t up = -1, down = -1; /* smallest >= need (lowest id); largest < need (highest id) */
        for (int32_t o = 0; o < n_obj; o++) {
            if (!in_pool[o])
                continue;
            if (size[o] >= need && (up < 0 || size[o] < size[up]))
                up = o;
            if (size[o] < need && (down < 0 || size[o] >= size[down]))
                down = o;
        }
        int32_t take = up;
        if (down >= 0 && (up < 0 || need - size[down] < size[up] - need))
            take = down;
        if (take < 0) {
            take = n_obj++;
            size[take] = need;
        } else if (size[take] < need) {
            size[take] = need;
        }
        in_pool[take] = 0;
        obj[i] = take;
        holder[take] = i;
    }
    return n_obj;
}

/* The records by decreasing size, ties by index. */
static void by_size(const pbl_usage_record *r, int32_t n, int32_t *order)
{
    for (int32_t i = 0; i < n; i++)
        order[i] = i;
    for (int32_t i = 1; i < n; i++)
        for (int32_t j = i; j > 0 && r[order[j - 1]].size < r[order[j]].size; j--) {
            int32_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
}

static int32_t ref_breadth(const pbl_usage_record *r, int32_t n, int32_t *obj, int64_t *size)
{
    int64_t horizon = 0;
    for (int32_t i = 0; i < n; i++)
        if (r[i].last > horizon)
            horizon = r[i].last;
    int32_t sorted[MAXR], n_obj = 0, task[256];
    int64_t width[256];
    by_size(r, n, sorted);
    for (int64_t t = 0; t < horizon; t++) {
        width[t] = 0;
        task[t] = (int32_t)t;
        for (int32_t i = 0; i < n; i++)
            if (r[i].first <= t && t < r[i].last)
                width[t] += r[i].size;
    }
    for (int64_t a = 1; a < horizon; a++) /* widest first, ties by task: insertion sort */
        for (int64_t b = a; b > 0 && width[task[b - 1]] < width[task[b]]; b--) {
            int32_t t = task[b];
            task[b] = task[b - 1];
            task[b - 1] = t;
        }
    for (int32_t i = 0; i < n; i++)
        obj[i] = -1;
    for (int64_t k = 0; k < horizon; k++) {
        int64_t t = task[k];
        for (int32_t s = 0; s < n; s++) {
            int32_t i = sorted[s];
            if (obj[i] >= 0 || !(r[i].first <= t && t < r[i].last))
                continue;
            int32_t best = -1;
            for (int32_t o = 0; o < n_obj; o++) {
                int clash = 0;
                for (int32_t j = 0; j < n && !clash; j++)
                    clash = obj[j] == o && overlap(&r[i], &r[j]);
                if (clash)
                    continue;
                int better = best < 0 ||
                             (size[best] < r[i].size ? size[o] > size[best]
                                                      : size[o] >= r[i].size && size[o] < size[best]);
                if (better)
                    best = o;
            }
            if (best < 0) {
                best = n_obj++;
                size[best] = r[i].size;
            } else if (size[best] < r[i].size) {
                size[best] = r[i].size;
            }
            obj[i] = best;
        }
    }
    return n_obj;
}

static int32_t ref_by_size(const pbl_usage_record *r, int32_t n, int32_t *obj, int64_t *size)
{
    const int64_t inf = INT64_MAX;
    int64_t horizon = 0;
    for (int32_t i = 0; i < n; i++)
        if (r[i].last > horizon)
            horizon = r[i].last;
    /* positional maximums from each step's sorted sizes */
    int64_t pm[MAXR];
    int32_t n_pm = 0, sorted[MAXR];
    by_size(r, n, sorted);
    for (int64_t t = 0; t < horizon; t++) {
        int32_t k = 0;
        for (int32_t s = 0; s < n; s++) {
            int32_t i = sorted[s];
            if (r[i].first <= t && t < r[i].last) {
                if (k == n_pm)
                    pm[n_pm++] = r[i].size;
                else if (pm[k] < r[i].size)
                    pm[k] = r[i].size;
                k++;
            }
        }
    }
    static int64_t dist[MAXR][MAXR];
    int32_t position[MAXR], best_obj[MAXR], n_obj = 0;
    int64_t best[MAXR];
    for (int32_t i = 0; i < n; i++) {
        int32_t p = 0;
        while (p < n_pm && pm[p] >= r[i].size)
            p++;
        position[i] = p - 1;
        best[i] = inf;
        best_obj[i] = -1;
        obj[i] = -1;
    }
    for (int32_t step = 0; step < n; step++) {
        int32_t a = -1;
        for (int32_t i = 0; i < n; i++) {
            if (obj[i] >= 0)
                continue;
            if (a < 0 || position[i] < position[a] ||
                (position[i] == position[a] &&
                 (best[i] < best[a] || (best[i] == best[a] && r[i].size > r[a].size))))
                a = i;
        }
        int fresh = best[a] == inf;
        int32_t o = fresh ? n_obj++ : best_obj[a];
        if (fresh)
            size[o] = r[a].size;
        else if (size[o] < r[a].size)
            size[o] = r[a].size;
        obj[a] = o;
        for (int32_t i = 0; i < n; i++) {
            if (obj[i] >= 0 || (!fresh && dist[i][o] == inf))
                continue;
            int64_t d = r[i].last <= r[a].first   ? r[a].first - r[i].last
                        : r[a].last <= r[i].first ? r[i].first - r[a].last
                                                  : inf;
            if (fresh) {
                dist[i][o] = d;
            } else if (d == inf) {
                dist[i][o] = inf;
                if (best_obj[i] == o) {
                    best[i] = inf;
                    for (int32_t p = 0; p < n_obj; p++)
                        if (dist[i][p] < best[i]) {
                            best[i] = dist[i][p];
                            best_obj[i] = p;
                        }
                }
            } else if (d < dist[i][o]) {
                dist[i][o] = d;
            }
            if (d < best[i]) {
                best[i] = d;
                best_obj[i] = o;
            }
        }
    }
    return n_obj;
}

static int64_t ref_offsets(const pbl_usage_record *r, int32_t n, int64_t align, int64_t *off)
{
    int32_t sorted[MAXR], placed[MAXR], n_placed = 0;
    int64_t arena = 0;
    by_size(r, n, sorted);
    for (int32_t s = 0; s < n; s++) {
        int32_t i = sorted[s];
        int64_t end = 0, best = -1, best_gap = INT64_MAX;
        for (int32_t k = 0; k < n_placed; k++) { /* placed[] is in offset order */
            int32_t j = placed[k];
            if (!overlap(&r[i], &r[j]))
                continue;
            if (off[j] >= end && off[j] - end >= r[i].size && off[j] - end < best_gap) {
                best_gap = off[j] - end;
                best = end;
            }
            int64_t e = (off[j] + r[j].size + align - 1) / align * align;
            if (e > end)
                end = e;
        }
        off[i] = best >= 0 ? best : end;
        int32_t at = 0;
        while (at < n_placed && off[placed[at]] <= off[i])
            at++;
        memmove(&placed[at + 1], &placed[at], (size_t)(n_placed - at) * sizeof *placed);
        placed[at] = i;
        n_placed++;
        if (off[i] + r[i].size > arena)
            arena = off[i] + r[i].size;
    }
    return arena;
}

typedef int32_t (*ref_fn)(const pbl_usage_record *r, int32_t n, int32_t *obj, int64_t *size);

/* Each strategy equals its reference on seeded random record sets, object for object. */
static void test_against_references(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        ref_fn      ref;
    } cases[] = { { "equality", ref_equality },
                  { "greedy_in_order", ref_in_order },
                  { "greedy_by_breadth", ref_breadth },
                  { "greedy_by_size", ref_by_size } };
    rng g = { 20240601 };
    int32_t checked = 0;
    for (int round = 0; round < 400; round++) {
        int32_t n = (int32_t)rng_range(&g, 1, MAXR);
        int64_t horizon = rng_range(&g, 2, 200), max_len = rng_range(&g, 1, 40);
        pbl_usage_record r[MAXR];
        random_records(&g, r, n, horizon, max_len);
        for (int32_t c = 0; c < N_OF(cases); c++) {
            int32_t want_obj[MAXR];
            int64_t want_size[MAXR];
            int32_t want_n = cases[c].ref(r, n, want_obj, want_size);
            pbl_assignment a = plan(r, n, cases[c].name, 1);
            int same = a.n_objects == want_n;
            for (int32_t i = 0; same && i < n; i++)
                same = a.object[i] == want_obj[i];
            for (int32_t k = 0; same && k < want_n; k++)
                same = a.object_size[k] == want_size[k];
            if (!same) {
                print_error("round %d, %s, %d records: objects differ from the reference\n", round, cases[c].name,
                            (int)n);
                for (int32_t i = 0; i < n; i++)
                    print_error("  record %d {%lld, %lld, %lld}: object %d, reference %d\n", (int)i,
                                (long long)r[i].size, (long long)r[i].first, (long long)r[i].last,
                                (int)a.object[i], (int)want_obj[i]);
            }
            assert_true(same);
            pbl_assignment_free(&a);
            checked++;
        }
        int64_t align = round % 3 == 0 ? 64 : 1, want_off[MAXR];
        int64_t want_arena = ref_offsets(r, n, align, want_off);
        pbl_assignment a = plan(r, n, "offset_greedy_by_size", align);
        assert_int_equal(a.arena, want_arena);
        for (int32_t i = 0; i < n; i++)
            assert_int_equal(a.offset[i], want_off[i]);
        pbl_assignment_free(&a);
        checked++;
    }
    printf("references: %d random plans equal to the reference, object for object and offset for offset\n",
           (int)checked);
}

/* The cheapest way to chain the records (in first order) into objects: each record opens an
 * object (cost: its size) or takes over an earlier record that ended by its first, used by no
 * other (cost: what it adds to that record's size). Exhaustive. */
static int64_t cheapest_chains(const pbl_usage_record *r, const int32_t *order, int32_t n, int32_t k, int *taken)
{
    if (k == n)
        return 0;
    int32_t i = order[k];
    int64_t best = r[i].size + cheapest_chains(r, order, n, k + 1, taken);
    for (int32_t q = 0; q < k; q++) {
        int32_t j = order[q];
        if (taken[j] || r[j].last > r[i].first)
            continue;
        taken[j] = 1;
        int64_t c = (r[i].size > r[j].size ? r[i].size - r[j].size : 0) + cheapest_chains(r, order, n, k + 1, taken);
        taken[j] = 0;
        if (c < best)
            best = c;
    }
    return best;
}

/* min_cost_flow's objects are chains of minimum cost: checked exhaustively on small sets. */
static void test_min_cost_flow_optimal(void **state)
{
    (void)state;
    rng g = { 4242 };
    for (int round = 0; round < 300; round++) {
        int32_t n = (int32_t)rng_range(&g, 1, 8), order[8];
        pbl_usage_record r[8];
        random_records(&g, r, n, rng_range(&g, 2, 12), rng_range(&g, 1, 4));
        by_first(r, n, order);
        int taken[8] = { 0 };
        int64_t want = cheapest_chains(r, order, n, 0, taken);
        pbl_assignment a = plan(r, n, "min_cost_flow", 1);
        int64_t got = 0, held[8];
        for (int32_t o = 0; o < a.n_objects; o++)
            held[o] = -1;
        for (int32_t k = 0; k < n; k++) { /* each object's records in first order form its chain */
            int32_t i = order[k], o = a.object[i];
            got += held[o] < 0 ? r[i].size : (r[i].size > held[o] ? r[i].size - held[o] : 0);
            held[o] = r[i].size;
        }
        if (got != want)
            print_error("round %d: min_cost_flow's chains cost %lld, the cheapest %lld\n", round, (long long)got,
                        (long long)want);
        assert_int_equal(got, want);
        pbl_assignment_free(&a);
    }
    printf("min_cost_flow: 300 random sets of up to 8 records, chains as cheap as the exhaustive minimum\n");
}

/* greedy_best is the first of greedy_by_size, greedy_by_breadth, greedy_in_order with the
 * smallest arena — checked on seeded random sets, counting how often each one is picked. */
static void test_greedy_best_picks(void **state)
{
    (void)state;
    static const char *const members[] = { "greedy_by_size", "greedy_by_breadth", "greedy_in_order" };
    rng g = { 7 };
    int32_t picked[3] = { 0 };
    for (int round = 0; round < 300; round++) {
        int32_t n = (int32_t)rng_range(&g, 1, 60);
        pbl_usage_record r[60];
        random_records(&g, r, n, rng_range(&g, 2, 60), rng_range(&g, 1, 12));
        int64_t arena[3];
        int32_t pick = 0;
        for (int32_t m = 0; m < 3; m++) {
            pbl_assignment a = plan(r, n, members[m], 1);
            arena[m] = a.arena;
            if (arena[m] < arena[pick])
                pick = m;
            pbl_assignment_free(&a);
        }
        pbl_assignment b = plan(r, n, "greedy_best", 1);
        pbl_assignment want = plan(r, n, members[pick], 1);
        assert_int_equal(b.arena, arena[pick]);
        for (int32_t i = 0; i < n; i++)
            assert_int_equal(b.object[i], want.object[i]);
        for (int32_t m = 0; m < 3; m++)
            assert_true(b.arena <= arena[m]);
        picked[pick]++;
        pbl_assignment_free(&b);
        pbl_assignment_free(&want);
    }
    printf("greedy_best over 300 random sets: picked greedy_by_size %d, greedy_by_breadth %d, greedy_in_order %d "
           "times; each time the smallest, the earliest on a tie\n",
           (int)picked[0], (int)picked[1], (int)picked[2]);
    for (int32_t m = 0; m < 3; m++)
        assert_true(picked[m] > 0);
}

/* One record set for each member greedy_best can pick (found by a seeded search, the
 * members' results cross-checked against the references): ComplexRecords, where
 * greedy_by_size's 112 beats 120 and 128; one where greedy_by_breadth's 56 beats 64 and 64;
 * one where greedy_in_order's 72 beats 80 and 80. greedy_best returns the winner's objects. */
static void test_greedy_best_each_member(void **state)
{
    (void)state;
    static const char *const members[] = { "greedy_by_size", "greedy_by_breadth", "greedy_in_order" };
    static const ref_fn refs[] = { ref_by_size, ref_breadth, ref_in_order };
    pbl_usage_record sets[3][9];
    int32_t n[3] = { 9, 5, 5 };
    from_tflite(complex_recs, 9, sets[0]);
    const pbl_usage_record by_breadth[] = { { 16, 2, 3 }, { 8, 3, 6 }, { 32, 5, 8 }, { 16, 3, 6 }, { 8, 2, 4 } };
    const pbl_usage_record in_order[] = { { 8, 1, 4 }, { 32, 4, 7 }, { 32, 2, 3 }, { 8, 1, 4 }, { 32, 3, 5 } };
    memcpy(sets[1], by_breadth, sizeof by_breadth);
    memcpy(sets[2], in_order, sizeof in_order);
    static const int64_t want[3][3] = { { 112, 128, 120 }, { 64, 56, 64 }, { 80, 80, 72 } };
    for (int32_t c = 0; c < 3; c++) {
        for (int32_t m = 0; m < 3; m++) {
            pbl_assignment a = plan(sets[c], n[c], members[m], 1);
            int32_t ref_obj[MAXR];
            int64_t ref_size[MAXR], ref_sum = 0;
            int32_t ref_n = refs[m](sets[c], n[c], ref_obj, ref_size);
            for (int32_t k = 0; k < ref_n; k++)
                ref_sum += ref_size[k];
            printf("set %d %-17s: arena %lld want %lld (reference %lld)\n", (int)c, members[m], (long long)a.arena,
                   (long long)want[c][m], (long long)ref_sum);
            assert_int_equal(a.arena, want[c][m]);
            assert_int_equal(ref_sum, want[c][m]);
            pbl_assignment_free(&a);
        }
        pbl_assignment b = plan(sets[c], n[c], "greedy_best", 1), w = plan(sets[c], n[c], members[c], 1);
        printf("set %d greedy_best      : arena %lld, objects of %s\n", (int)c, (long long)b.arena, members[c]);
        assert_int_equal(b.arena, w.arena);
        for (int32_t i = 0; i < n[c]; i++)
            assert_int_equal(b.object[i], w.object[i]);
        pbl_assignment_free(&b);
        pbl_assignment_free(&w);
    }
}

/* min_cost_flow refuses politely above its size limit; every other strategy plans 5000 random
 * records into a verified assignment, and `best` still answers. */
static void test_large_inputs(void **state)
{
    (void)state;
    enum { N = 5000 };
    pbl_usage_record *r = malloc(N * sizeof *r);
    assert_non_null(r);
    rng g = { 99 };
    random_records(&g, r, N, 4000, 60);
    pbl_assignment a;
    char err[256];
    pbl_status s = pbl_plan_records(r, N, "min_cost_flow", NULL, &a, err, sizeof err);
    printf("min_cost_flow on %d records: %s (%s), want %s\n", N, pbl_status_str(s), err,
           pbl_status_str(PBL_ERR_UNSUPPORTED));
    assert_int_equal(s, PBL_ERR_UNSUPPORTED);
    assert_null(a.offset);
    int64_t lb = pbl_records_lower_bound(r, N);
    for (int32_t k = 0; k < N_OF(all_strategies); k++) {
        if (strcmp(all_strategies[k], "min_cost_flow") == 0)
            continue;
        a = plan(r, N, all_strategies[k], 64);
        printf("%d records %-21s: arena %lld, lower bound %lld, verified\n", N, all_strategies[k],
               (long long)a.arena, (long long)lb);
        assert_true(a.arena >= lb);
        pbl_assignment_free(&a);
    }
    free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_records),     cmocka_unit_test(test_complex_records),
        cmocka_unit_test(test_object_alignment),  cmocka_unit_test(test_empty_and_one),
        cmocka_unit_test(test_never_overlapping), cmocka_unit_test(test_against_references),
        cmocka_unit_test(test_min_cost_flow_optimal), cmocka_unit_test(test_greedy_best_picks),
        cmocka_unit_test(test_greedy_best_each_member),
        cmocka_unit_test(test_large_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
