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
 * Which windows: none is chosen for a particular instance. The first is centred on the peak
 * step; its half-width (in elementary steps: between consecutive distinct firsts and lasts)
 * doubles while the windows hold at most half the records (beyond that they are nearly the
 * whole instance, which the full search handles). Where the completion puts a record above
 * the target, that record met no window, and the bound broke at some step of its lifetime
 * that no window covers: the hottest one (most live bytes) becomes one more centre, and the
 * windows (each centre's, merged where they meet) are searched together at the same width.
 * Instances with several steps near their peak (two phases of a model, a model run twice, a
 * pipeline of stages) need that: a single window's completion rises at the other near-peaks,
 * which a wider single window reaches only once it holds most of the run. The records that
 * live only between two windows are left to the completion: they live where no break was
 * seen, i.e. where there is room. While more centres may be added, a completion stops at its
 * first record above the target (about a third of the way through on the two-copy stand-ins
 * built from pangu_2.6B), since the windows are searched again anyway. Each window search
 * gets a node budget proportional to its records (deterministic, like the full search's);
 * the first completion at the target stops the step, and the best completion is kept. The
 * records that live over all the windows (weights, long-lived activations: most of what meets
 * a narrow window on real traces) are stacked under the rest without being searched (see
 * try_windows). At most MAX_CENTRES centres: each costs a search and a partial completion
 * (the stand-ins needed 3 to 8), and the deadline bounds them too.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph/planner/index/spacetime.h"
#include "graph/planner/sort.h"
#include "graph/planner/strategies/exact.h"

#define MAX_CENTRES 16 /* windows searched together; see pbl__exact_window */
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
    int64_t                *live;  /* [m] bytes live at each elementary step */
    int32_t                 broke; /* the first record the last completion put above target, or -1 */
    int32_t                 stop_at_break; /* 1: a completion stops there (see pbl__exact_window) */
    pbl__spacetime          taken; /* the completion's index, emptied (not freed) between them: */
    pbl__spacetime_scan     scan;  /* its sets' memory is what page faults cost most of a retry */
    pbl__exact             *spare; /* the last window search, whose scratch pools the next takes */
} window;

/* Fills w->live and returns the elementary step with the most live bytes (the first on a tie). */
static int32_t peak_step(window *w)
{
    int64_t *live = w->live;
    memset(live, 0, (size_t)w->m * sizeof *live);
    for (int32_t i = 0; i < w->n; i++) {
        live[w->step[2 * i]] += w->r[i].size;
        live[w->step[2 * i + 1]] -= w->r[i].size;
    }
    int32_t p = 0;
    int64_t cur = 0, best = -1;
    for (int32_t s = 0; s + 1 < w->m; s++) {
        cur += live[s];
        live[s] = cur;
        if (cur > best) {
            best = cur;
            p = s;
        }
    }
    live[w->m - 1] = 0;
    return p;
}

/* The step of [a, b) with the most live bytes (the first on a tie). */
static int32_t hottest_step(const window *w, int32_t a, int32_t b)
{
    int32_t p = a;
    for (int32_t s = a + 1; s < b; s++)
        if (w->live[s] > w->live[p])
            p = s;
    return p;
}

/* Places every record not fixed around the fixed ones, largest first, each in the smallest gap
 * that holds it over its lifetime (else above everything), into w->trial. Returns the arena,
 * 0 when deadline (0: none) passed first or a record reached `above` (the completion can no
 * longer beat the packing in hand: stopping there halves the cost of the windows that fail),
 * or -1 when out of memory. */
static int64_t complete(window *w, int64_t target, int64_t above, double deadline)
{
    pbl__spacetime *taken = &w->taken;
    pbl__spacetime_scan *scan = &w->scan;
    int64_t arena = -1;
    pbl__spacetime_clear(taken);
    int32_t nb = 0;
    for (int32_t i = 0; i < w->n; i++) {
        if (w->fixed[i]) {
            if (pbl__spacetime_add(taken, w->step[2 * i], w->step[2 * i + 1], w->trial[i],
                                   pbl__align_up(w->trial[i] + w->r[i].size, w->align)) != PBL_OK)
                goto done;
        } else {
            w->by_size[nb++] = (pbl__key2){ -w->r[i].size, i };
        }
    }
    qsort(w->by_size, (size_t)nb, sizeof *w->by_size, pbl__key2_cmp);
    for (int32_t s = 0; s < nb; s++) {
        if ((s & 255) == 0 && deadline > 0 && pbl__plan_now() > deadline) {
            arena = 0;
            goto done;
        }
        int32_t i = w->by_size[s].idx, n_taken;
        int64_t size = w->r[i].size;
        const pbl__span *taken_now;
        if (pbl__spacetime_taken(taken, w->step[2 * i], w->step[2 * i + 1], scan, &taken_now, &n_taken) != PBL_OK)
            goto done;
        w->trial[i] = pbl__spans_smallest_gap(taken_now, n_taken, size);
        if (w->trial[i] + size > target && w->broke < 0)
            w->broke = i;
        if (w->trial[i] + size >= above || (w->broke >= 0 && w->stop_at_break)) {
            arena = 0;
            goto done;
        }
        if (pbl__spacetime_add(taken, w->step[2 * i], w->step[2 * i + 1], w->trial[i],
                               pbl__align_up(w->trial[i] + size, w->align)) != PBL_OK)
            goto done;
    }
    arena = 0;
    for (int32_t i = 0; i < w->n; i++)
        if (w->trial[i] + w->r[i].size > arena)
            arena = w->trial[i] + w->r[i].size;
done:
    return arena;
}

/* Whether a record over steps [a, b) meets one of the windows win[0, 2·nw) (pairs of steps
 * [from, to), disjoint, by step). */
static int meets(const int32_t *win, int32_t nw, int32_t a, int32_t b)
{
    for (int32_t j = 0; j < nw; j++)
        if (a < win[2 * j + 1] && win[2 * j] < b)
            return 1;
    return 0;
}

/* The search on the records meeting the windows win[0, 2·nw), then the completion. Their
 * lifetimes are clipped to the windows' hull [win[0], win[2·nw - 1]): two records that overlap
 * each other and both meet the hull overlap inside it (Helly, as above), so the search keeps
 * apart exactly the pairs that must be. The records that live only between two windows are
 * left to the completion: the windows are put where the live bytes come near the target, so
 * between them there is room. Returns the completed arena (in w->trial), 0 when the search
 * found no packing within target (or the windows cannot be searched) or the completion
 * reached `above`, -1 when out of memory. w->broke: the first record the completion put above
 * target (-1: none, or no completion). */
static int64_t try_windows(window *w, const int32_t *win, int32_t nw, int64_t target, int64_t above,
                           double deadline)
{
    int64_t t0 = w->times[win[0]], t1 = w->times[win[2 * nw - 1]];
    int32_t ns = 0, nsp = 0;
    w->broke = -1;
    /* Spanners: records that live over the whole hull. Each overlaps every other record the
     * search sees, so in any packing of these records the spanners hold address bands that no
     * other record crosses; sliding the spanners to the bottom and every band above down by
     * the spanners' bytes below it is again a packing, of the same height. So (at alignment 1;
     * with an alignment, each padded) the spanners go at the bottom, largest first (the
     * completion's own order: outside the windows they are what it would have placed first;
     * on the pangu-built stand-ins this took the fewest completions — 8 on the shifted copy,
     * against 13 to 21 stacking by lifetime, end or start), and the search sees only the rest,
     * under cap minus their bytes. They are most of what overlaps a
     * narrow window on real traces (weights and long-lived activations) and each spans every
     * section of the windows, so searching them cost most of the step's time. */
    for (int32_t i = 0; i < w->n; i++) {
        w->fixed[i] = 0;
        if (!meets(win, nw, w->step[2 * i], w->step[2 * i + 1]))
            continue;
        if (w->r[i].first <= t0 && w->r[i].last >= t1) {
            w->by_size[nsp++] = (pbl__key2){ -w->r[i].size, i };
            continue;
        }
        w->in[ns] = i;
        w->sub[ns] = (pbl_usage_record){ w->r[i].size, w->r[i].first > t0 ? w->r[i].first : t0,
                                         w->r[i].last < t1 ? w->r[i].last : t1 };
        ns++;
    }
    qsort(w->by_size, (size_t)nsp, sizeof *w->by_size, pbl__key2_cmp);
    int64_t base = 0;
    for (int32_t k = 0; k < nsp; k++) {
        int32_t i = w->by_size[k].idx;
        w->trial[i] = base;
        base = pbl__align_up(base + w->r[i].size, w->align);
    }
    pbl__exact *e = NULL;
    int64_t cap = target;
    if (ns > 0) {
        pbl_status s = pbl__exact_create(w->sub, ns, w->align, w->al, &e);
        if (s == PBL_ERR_NOMEM)
            return -1;
        if (s != PBL_OK)
            return 0;
        /* with an alignment the windows' own bound (their records padded in the stack at the
         * peak) can be above target; it binds the whole instance too (the windows are a
         * relaxation, and the spanners' padded stack under any of their sections) */
        if (base + pbl__exact_lower_bound(e) > cap)
            cap = base + pbl__exact_lower_bound(e);
        pbl__exact_take_scratch(e, w->spare);
        pbl__exact_destroy(w->spare);
        w->spare = e;
    }
    if (cap >= above || base > cap)
        return 0;
    if (ns > 0) {
        pbl__exact_budget b_ = { .nodes_left = WINDOW_NODES(ns), .deadline = deadline };
        pbl__exact_result res = pbl__exact_decide(e, cap - base, &b_, w->sub_off);
        if (res == PBL__EXACT_NOMEM)
            return -1;
        if (res != PBL__EXACT_FOUND)
            return 0;
    }
    for (int32_t k = 0; k < nsp; k++)
        w->fixed[w->by_size[k].idx] = 1;
    for (int32_t j = 0; j < ns; j++) {
        w->fixed[w->in[j]] = 1;
        w->trial[w->in[j]] = base + w->sub_off[j];
    }
    return complete(w, cap, above, deadline);
}

/* The windows of half-width h around the centres c[0, nc) (sorted), merged where they meet,
 * into win[0, 2·nw); returns nw. */
static int32_t windows_around(const window *w, const int32_t *c, int32_t nc, int64_t h, int32_t *win)
{
    int32_t nw = 0;
    for (int32_t j = 0; j < nc; j++) {
        int32_t a = c[j] - h + 1 > 0 ? (int32_t)(c[j] - h + 1) : 0;
        int32_t b = c[j] + h < w->m - 1 ? (int32_t)(c[j] + h) : w->m - 1;
        if (nw > 0 && a <= win[2 * nw - 1]) {
            if (b > win[2 * nw - 1])
                win[2 * nw - 1] = b;
        } else {
            win[2 * nw] = a;
            win[2 * nw + 1] = b;
            nw++;
        }
    }
    return nw;
}

static void add_centre(int32_t *c, int32_t *nc, int32_t q)
{
    int32_t j = *nc;
    while (j > 0 && c[j - 1] > q) {
        c[j] = c[j - 1];
        j--;
    }
    c[j] = q;
    (*nc)++;
}

int64_t pbl__exact_window(const pbl_usage_record *r, int32_t n, int64_t align, int64_t target, int64_t stop,
                          double deadline, const pbl_allocator *al, int64_t *offset)
{
    window w = { .r = r, .n = n, .align = align > 0 ? align : 1, .al = al };
    size_t nn = (size_t)n;
    size_t bytes = nn * (2 * sizeof(int64_t) + 2 * sizeof(int32_t) + sizeof(int32_t) + sizeof(pbl_usage_record) +
                         2 * sizeof(int64_t) + sizeof(uint8_t) + sizeof(pbl__key2) + 2 * sizeof(int64_t));
    char *block = pbl__plan_alloc(al, bytes), *at = block;
    if (!block)
        return -1;
    w.by_size = (pbl__key2 *)at;        at += nn * sizeof *w.by_size;
    w.sub = (pbl_usage_record *)at;     at += nn * sizeof *w.sub;
    w.times = (int64_t *)at;            at += 2 * nn * sizeof *w.times;
    w.live = (int64_t *)at;             at += 2 * nn * sizeof *w.live;
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
    if (pbl__spacetime_init(&w.taken, w.m - 1, al) != PBL_OK) {
        pbl__plan_free(al, block, bytes);
        return -1;
    }
    for (int32_t i = 0; i < n; i++) {
        w.step[2 * i] = pbl__search_i64(w.times, w.m, r[i].first, 0);
        w.step[2 * i + 1] = pbl__search_i64(w.times, w.m, r[i].last, 0);
    }
    /* Centres: the peak step, then every step where a completion first rose above the target
     * (the hottest step in the lifetime of the first record it put there: no window met that
     * record, so the step lies outside them). An instance with several steps near its peak
     * (two phases of a model, or a model run twice) needs a window at each: one window's
     * completion rises at the others, which a wider single window reaches only once it holds
     * most of the run. Each added centre is one more search and completion on the same width,
     * at most MAX_CENTRES (the deadline bounds them too). */
    int32_t centre[MAX_CENTRES], win[2 * MAX_CENTRES];
    int32_t nc = 0, peak = w.m > 1 ? peak_step(&w) : -1;
    /* more centres while 1; once the windows around several centres hold more than half the
     * records, the step goes on with the peak's window alone, growing, as it would without
     * them (on small instances the centres fill half the records within a few widths; a wider
     * window around the peak alone still finds smaller completions there: MiniMalloc H) */
    int several = 1;
    if (peak >= 0)
        centre[nc++] = peak;
    int32_t last_k = -1;
    for (int64_t h = 1; nc > 0 && arena > stop; h *= 2) {
        int whole = 0, over = 0;
        for (;;) {
            if (deadline > 0 && pbl__plan_now() > deadline) {
                over = 1;
                break;
            }
            int32_t nw = windows_around(&w, centre, nc, h, win);
            int32_t k = 0;
            for (int32_t i = 0; i < n; i++)
                k += meets(win, nw, w.step[2 * i], w.step[2 * i + 1]);
            if (k > n / 2 && nc > 1) {
                centre[0] = peak;
                nc = 1;
                several = 0;
                last_k = -1;
                continue;
            }
            if (k > n / 2) {
                over = 1;
                break;
            }
            whole = win[0] == 0 && win[2 * nw - 1] == w.m - 1 && nw == 1;
            /* a window of the peak step alone: every record there overlaps every other, so
             * any stack is a packing and the search has nothing to choose; it must reach
             * beyond it */
            if (k == last_k || (nw == 1 && win[1] - win[0] <= 1))
                break;
            last_k = k;
            w.stop_at_break = several && nc < MAX_CENTRES;
            int64_t got = try_windows(&w, win, nw, target, arena, deadline);
            if (got < 0) {
                arena = -1;
                goto done;
            }
            if (got > 0 && got < arena) {
                arena = got;
                memcpy(offset, w.trial, nn * sizeof *offset);
            }
            if (arena <= stop || w.broke < 0 || !several || nc == MAX_CENTRES)
                break;
            add_centre(centre, &nc, hottest_step(&w, w.step[2 * w.broke], w.step[2 * w.broke + 1]));
        }
        if (over || whole)
            break;
    }
done:
    pbl__exact_destroy(w.spare);
    pbl__spacetime_free(&w.taken);
    pbl__spacetime_scan_free(&w.scan, al);
    pbl__plan_free(al, block, bytes);
    return arena;
}
