/*
 * exact's window step (graph/planner/strategies/exact.h): the search on a window of time around
 * the peak, the greedy for the rest — for instances too large for the full search.
 *
 * The lower bound is decided at one step, the peak of live bytes: there every record live must
 * be stacked without a hole. A greedy planner that places the records by size over the whole
 * run leaves holes there (on real traces the records that arrive at the peak meet gaps shaped
 * by records of other sizes), and re-packing around the arena's top (exact_local.c) cannot
 * close them because the holes lie under the top, not at it. Here the decision search
 * (exact_search.c) packs the records that overlap a window of steps around the peak, their
 * lifetimes clipped to the window, within the lower bound; then every record outside the
 * window is placed around them, largest first, in the smallest gap that holds it over its
 * lifetime (offset_greedy_by_size's rule, through the space-time index). Away from the peak
 * there is slack, which is where the greedy does well.
 *
 * Why the clipped packing is valid for the whole lifetimes: two records that both overlap the
 * window and overlap each other overlap inside the window (intervals that meet pairwise have a
 * common point — Helly's theorem in one dimension), so no two records the search kept apart
 * in the window can meet outside it.
 *
 * Which window: none is chosen for a particular instance. The window starts at the peak step
 * and doubles its half-width (in elementary steps: between consecutive distinct firsts and
 * lasts) while it holds at most half the records (beyond that it is nearly the whole instance,
 * which the full search handles); each window's search gets a node budget proportional to its
 * records (deterministic, like the full search's), and the first completion at the target
 * stops the step. A wider window gives the search more of the structure around the peak, a
 * narrower one is cheaper and leaves the greedy more freedom; the best completion is kept.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph/planner/index/spacetime.h"
#include "graph/planner/sort.h"
#include "graph/planner/strategies/exact.h"

#define WINDOW_NODES(k) (20 * (int64_t)(k) + 1000) /* search nodes per window of k records */

typedef struct window {
    const pbl_usage_record *r;
    int32_t                 n;
    int64_t                 align;
    const pbl_allocator    *al;
    int64_t                *times; /* [2n] distinct firsts and lasts */
    int32_t                 m;
    int32_t                *step;  /* [2n] per record: its steps [a, b) */
    int32_t                *in;    /* [n] the records overlapping the window */
    pbl_usage_record       *sub;   /* [n] their lifetimes clipped to it */
    int64_t                *sub_off;
    int64_t                *trial; /* [n] a completed packing */
    uint8_t                *fixed; /* [n] 1: placed by the search */
    pbl__key2              *by_size;
} window;

/* The elementary step with the most live bytes (the first on a tie), or -1 when out of memory. */
static int32_t peak_step(const window *w)
{
    int64_t *live = pbl__plan_alloc(w->al, (size_t)w->m * sizeof *live);
    if (!live)
        return -1;
    memset(live, 0, (size_t)w->m * sizeof *live);
    for (int32_t i = 0; i < w->n; i++) {
        live[w->step[2 * i]] += w->r[i].size;
        live[w->step[2 * i + 1]] -= w->r[i].size;
    }
    int32_t p = 0;
    int64_t cur = 0, best = -1;
    for (int32_t s = 0; s + 1 < w->m; s++) {
        cur += live[s];
        if (cur > best) {
            best = cur;
            p = s;
        }
    }
    pbl__plan_free(w->al, live, (size_t)w->m * sizeof *live);
    return p;
}

/* Places every record not fixed around the fixed ones, largest first, each in the smallest gap
 * that holds it over its lifetime (else above everything), into w->trial. Returns the arena,
 * 0 when deadline (0: none) passed first or a record reached `above` (the completion can no
 * longer beat the packing in hand: stopping there halves the cost of the windows that fail),
 * or -1 when out of memory. */
static int64_t complete(window *w, int64_t above, double deadline)
{
    pbl__spacetime taken;
    pbl__spacetime_scan scan = { 0 };
    int64_t arena = -1;
    if (pbl__spacetime_init(&taken, w->m - 1, w->al) != PBL_OK)
        return -1;
    int32_t nb = 0;
    for (int32_t i = 0; i < w->n; i++) {
        if (w->fixed[i]) {
            if (pbl__spacetime_add(&taken, w->step[2 * i], w->step[2 * i + 1], w->trial[i],
                                   pbl__align_up(w->trial[i] + w->r[i].size, w->align)) != PBL_OK)
                goto done;
        } else {
            w->by_size[nb++] = (pbl__key2){ -w->r[i].size, i };
        }
    }
    qsort(w->by_size, (size_t)nb, sizeof *w->by_size, pbl__key2_cmp);
    for (int32_t s = 0; s < nb; s++) {
        if ((s & 255) == 0 && deadline > 0 && pbl__exact_now() > deadline) {
            arena = 0;
            goto done;
        }
        int32_t i = w->by_size[s].idx, n_taken;
        int64_t size = w->r[i].size;
        const pbl__span *taken_now;
        if (pbl__spacetime_taken(&taken, w->step[2 * i], w->step[2 * i + 1], &scan, &taken_now, &n_taken) != PBL_OK)
            goto done;
        w->trial[i] = pbl__spans_smallest_gap(taken_now, n_taken, size);
        if (w->trial[i] + size >= above) {
            arena = 0;
            goto done;
        }
        if (pbl__spacetime_add(&taken, w->step[2 * i], w->step[2 * i + 1], w->trial[i],
                               pbl__align_up(w->trial[i] + size, w->align)) != PBL_OK)
            goto done;
    }
    arena = 0;
    for (int32_t i = 0; i < w->n; i++)
        if (w->trial[i] + w->r[i].size > arena)
            arena = w->trial[i] + w->r[i].size;
done:
    pbl__spacetime_free(&taken);
    pbl__spacetime_scan_free(&scan, w->al);
    return arena;
}

/* The search on the records overlapping steps [a, b), then the completion. Returns the
 * completed arena (in w->trial), 0 when the search found no packing within target (or the
 * window cannot be searched) or the completion reached `above`, -1 when out of memory. */
static int64_t try_window(window *w, int32_t a, int32_t b, int64_t target, int64_t above, double deadline)
{
    int64_t t0 = w->times[a], t1 = w->times[b];
    int32_t ns = 0;
    for (int32_t i = 0; i < w->n; i++) {
        w->fixed[i] = 0;
        if (w->r[i].first < t1 && t0 < w->r[i].last) {
            w->in[ns] = i;
            w->sub[ns] = (pbl_usage_record){ w->r[i].size, w->r[i].first > t0 ? w->r[i].first : t0,
                                             w->r[i].last < t1 ? w->r[i].last : t1 };
            ns++;
        }
    }
    pbl__exact *e = NULL;
    pbl_status s = pbl__exact_create(w->sub, ns, w->align, w->al, &e);
    if (s == PBL_ERR_NOMEM)
        return -1;
    if (s != PBL_OK)
        return 0;
    /* with an alignment the window's own bound (its records padded in the stack at the peak)
     * can be above target; it binds the whole instance too (the window is a relaxation) */
    int64_t cap = pbl__exact_lower_bound(e) > target ? pbl__exact_lower_bound(e) : target;
    if (cap >= above) {
        pbl__exact_destroy(e);
        return 0;
    }
    pbl__exact_budget b_ = { .nodes_left = WINDOW_NODES(ns), .deadline = deadline };
    pbl__exact_result res = pbl__exact_decide(e, cap, &b_, w->sub_off);
    pbl__exact_destroy(e);
    if (res == PBL__EXACT_NOMEM)
        return -1;
    if (res != PBL__EXACT_FOUND)
        return 0;
    for (int32_t j = 0; j < ns; j++) {
        w->fixed[w->in[j]] = 1;
        w->trial[w->in[j]] = w->sub_off[j];
    }
    return complete(w, above, deadline);
}

int64_t pbl__exact_window(const pbl_usage_record *r, int32_t n, int64_t align, int64_t target, int64_t stop,
                          double deadline, const pbl_allocator *al, int64_t *offset)
{
    window w = { .r = r, .n = n, .align = align > 0 ? align : 1, .al = al };
    size_t nn = (size_t)n;
    size_t bytes = nn * (2 * sizeof(int64_t) + 2 * sizeof(int32_t) + sizeof(int32_t) + sizeof(pbl_usage_record) +
                         2 * sizeof(int64_t) + sizeof(uint8_t) + sizeof(pbl__key2));
    char *block = pbl__plan_alloc(al, bytes), *at = block;
    if (!block)
        return -1;
    w.by_size = (pbl__key2 *)at;        at += nn * sizeof *w.by_size;
    w.sub = (pbl_usage_record *)at;     at += nn * sizeof *w.sub;
    w.times = (int64_t *)at;            at += 2 * nn * sizeof *w.times;
    w.sub_off = (int64_t *)at;          at += nn * sizeof *w.sub_off;
    w.trial = (int64_t *)at;            at += nn * sizeof *w.trial;
    w.step = (int32_t *)at;             at += 2 * nn * sizeof *w.step;
    w.in = (int32_t *)at;               at += nn * sizeof *w.in;
    w.fixed = (uint8_t *)at;

    int64_t arena = 0;
    for (int32_t i = 0; i < n; i++)
        if (offset[i] + r[i].size > arena)
            arena = offset[i] + r[i].size;
    w.m = pbl__distinct_times(r, n, w.times);
    for (int32_t i = 0; i < n; i++) {
        w.step[2 * i] = pbl__search_i64(w.times, w.m, r[i].first, 0);
        w.step[2 * i + 1] = pbl__search_i64(w.times, w.m, r[i].last, 0);
    }
    int32_t p = w.m > 1 ? peak_step(&w) : -1;
    if (p < 0 && w.m > 1) {
        arena = -1;
        goto done;
    }
    int32_t last_k = -1;
    for (int64_t h = 1; p >= 0 && arena > stop; h *= 2) {
        if (deadline > 0 && pbl__exact_now() > deadline)
            break;
        int32_t a = p - h + 1 > 0 ? (int32_t)(p - h + 1) : 0;
        int32_t b = p + h < w.m - 1 ? (int32_t)(p + h) : w.m - 1;
        int32_t k = 0;
        for (int32_t i = 0; i < n; i++)
            k += w.step[2 * i] < b && a < w.step[2 * i + 1];
        if (k > n / 2)
            break;
        /* the peak step alone: every record there overlaps every other, so any stack is a
         * packing and the search has nothing to choose; the window must reach beyond it */
        if (k != last_k && b - a > 1) {
            last_k = k;
            int64_t got = try_window(&w, a, b, target, arena, deadline);
            if (got < 0) {
                arena = -1;
                goto done;
            }
            if (got > 0 && got < arena) {
                arena = got;
                memcpy(offset, w.trial, nn * sizeof *offset);
            }
        }
        if (a == 0 && b == w.m - 1)
            break;
    }
done:
    pbl__plan_free(al, block, bytes);
    return arena;
}
