/*
 * Memory planning over a stream plan (see pebble/streams.h): records and their access steps
 * in, offsets out. Nothing here reads a graph.
 *
 * The relation. Record i is before record j when every access of i happens-before every
 * access of j. With last_i[s] the latest access of i on stream s, and meet_j[s] the least,
 * over j's accesses b, of b's clock entry for s (pbl__stream_clocks), that is
 * last_i[s] <= meet_j[s] for every stream s; a record live to the end is before nothing. Two
 * records conflict — may not share bytes — unless one is before the other. On one stream
 * meet_j = first_j - 1, so "i before j" is "i's interval ends by j's start": today's rule.
 *
 * Safe intervals. safe_hi(i) is the first step h such that every step from h on knows all of
 * i's accesses are done. Records whose [first, safe_hi) intervals do not overlap are
 * ordered, so any interval strategy of graph/planner/plan.c plans them race-free; on one stream
 * safe_hi is the record's last, and the records are today's.
 *
 * Strategies:
 *   colour     greedy by size (largest first, lowest offset that clears every placed record
 *              it may not share with) where sharing needs "before" and, as in MXNet's
 *              GraphAllocator (src/nnvm/plan_memory.cc: a freed block is reused only by a
 *              node of the colour that released it), the earlier record's last access and
 *              the later one's producer on one stream;
 *   hb         the smaller of greedy by size under "before" alone, and interval_strategy over
 *              safe intervals;
 *   hb_events  hb after adding barriers (see pebble/streams.h), each kept only if the safe
 *              intervals' lower bound drops and the makespan stays within the slack; the
 *              whole set is kept only if hb's arena then shrinks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/base/errmsg.h"
#include "graph/planner/plan_internal.h"
#include "graph/streams/stream_internal.h"

PBL__API pbl_stream_storage_options pbl_stream_storage_options_default(void)
{
    pbl_stream_storage_options o = { .allocator = NULL, .align = 64, .inplace = 1,
                                     .strategy = PBL_STREAM_STRATEGY_HB, .interval_strategy = "best",
                                     .event_slack = 0.02, .max_candidates = 64 };
    return o;
}

PBL__API const char *pbl_stream_strategy_name(pbl_stream_strategy s)
{
    switch (s) {
    case PBL_STREAM_STRATEGY_COLOUR: return "colour";
    case PBL_STREAM_STRATEGY_HB: return "hb";
    case PBL_STREAM_STRATEGY_HB_EVENTS: return "hb_events";
    }
    return NULL;
}

/* Per-record summaries over one stream plan. */
typedef struct summary {
    int32_t  n, S, n_steps;
    int32_t *last;   /* [n·S] latest access on s, -1 none */
    int32_t *meet;   /* [n·S] min over accesses of their clock entry for s */
    int32_t *first;  /* [n] first access */
    int32_t *final;  /* [n] last access (any stream) */
    int64_t *hi;     /* [n] safe_hi */
    pbl__mem *m;
} summary;

static void summary_free(summary *y)
{
    size_t nS = (size_t)(y->n ? y->n : 1) * (size_t)y->S, n = (size_t)(y->n ? y->n : 1);
    pbl__mem_free(y->m, y->last, nS * sizeof *y->last);
    pbl__mem_free(y->m, y->meet, nS * sizeof *y->meet);
    pbl__mem_free(y->m, y->first, n * sizeof *y->first);
    pbl__mem_free(y->m, y->final, n * sizeof *y->final);
    pbl__mem_free(y->m, y->hi, n * sizeof *y->hi);
    memset(y, 0, sizeof *y);
}

static pbl_status summarise(const pbl_stream_plan *sp, const pbl_stream_records *sr, pbl__mem *m, summary *y)
{
    memset(y, 0, sizeof *y);
    int32_t n = sr->n_records, S = sp->n_streams, T = sp->n_steps, *clock = NULL;
    size_t nS = (size_t)(n ? n : 1) * (size_t)S, nn = (size_t)(n ? n : 1), nT = pbl__stream_n(sp);
    y->n = n;
    y->S = S;
    y->n_steps = T;
    y->m = m;
    y->last = pbl__mem_alloc(m, nS * sizeof *y->last);
    y->meet = pbl__mem_alloc(m, nS * sizeof *y->meet);
    y->first = pbl__mem_alloc(m, nn * sizeof *y->first);
    y->final = pbl__mem_alloc(m, nn * sizeof *y->final);
    y->hi = pbl__mem_alloc(m, nn * sizeof *y->hi);
    int32_t *sufmin = pbl__mem_alloc(m, (nT + 1) * (size_t)S * sizeof *sufmin);
    if (!y->last || !y->meet || !y->first || !y->final || !y->hi || !sufmin ||
        pbl__stream_clocks(sp, m, &clock) != PBL_OK) {
        pbl__mem_free(m, sufmin, (nT + 1) * (size_t)S * sizeof *sufmin);
        summary_free(y);
        return PBL_ERR_NOMEM;
    }
    /* sufmin[b·S + s] = min over steps b' >= b of clock[b'][s]: what every step from b on knows */
    for (int32_t s = 0; s < S; s++)
        sufmin[(size_t)T * S + s] = T;
    for (int32_t b = T - 1; b >= 0; b--)
        for (int32_t s = 0; s < S; s++) {
            int32_t c = clock[(size_t)b * S + s], d = sufmin[(size_t)(b + 1) * S + s];
            sufmin[(size_t)b * S + s] = c < d ? c : d;
        }
    for (int32_t r = 0; r < n; r++) {
        int32_t *l = y->last + (size_t)r * S, *mt = y->meet + (size_t)r * S;
        for (int32_t s = 0; s < S; s++) {
            l[s] = -1;
            mt[s] = T;
        }
        y->first[r] = T;
        y->final[r] = -1;
        for (int32_t e = sr->access_start[r]; e < sr->access_start[r + 1]; e++) {
            int32_t b = sr->access[e];
            if (b > l[sp->stream[b]])
                l[sp->stream[b]] = b;
            for (int32_t s = 0; s < S; s++)
                if (clock[(size_t)b * S + s] < mt[s])
                    mt[s] = clock[(size_t)b * S + s];
            if (b < y->first[r])
                y->first[r] = b;
            if (b > y->final[r])
                y->final[r] = b;
        }
        if (y->final[r] < 0) { /* no access (a hand-made record): its interval stands for it */
            y->first[r] = (int32_t)sr->records[r].first;
            y->final[r] = (int32_t)sr->records[r].last - 1;
        }
        int64_t hi = (int64_t)y->final[r] + 1;
        if (sr->to_end[r] || sr->records[r].last > hi)
            hi = sr->to_end[r] ? T : sr->records[r].last;
        for (int32_t s = 0; s < S && hi < T; s++) {
            if (l[s] < 0)
                continue;
            /* the first b with sufmin[b][s] >= l[s]; sufmin ascends in b */
            int32_t lo = 0, up = T;
            while (lo < up) {
                int32_t mid = lo + (up - lo) / 2;
                if (sufmin[(size_t)mid * S + s] >= l[s])
                    up = mid;
                else
                    lo = mid + 1;
            }
            if (lo > hi)
                hi = lo;
        }
        y->hi[r] = hi;
    }
    pbl__mem_free(m, sufmin, (nT + 1) * (size_t)S * sizeof *sufmin);
    pbl__stream_clocks_free(sp, m, clock);
    return PBL_OK;
}

static int before(const summary *y, const pbl_stream_records *sr, int32_t i, int32_t j)
{
    if (sr->to_end[i])
        return 0;
    const int32_t *l = y->last + (size_t)i * y->S, *mt = y->meet + (size_t)j * y->S;
    for (int32_t s = 0; s < y->S; s++)
        if (l[s] > mt[s])
            return 0;
    return 1;
}

/* May i and j share bytes under the strategy? */
static int may_share(const summary *y, const pbl_stream_plan *sp, const pbl_stream_records *sr, int colour_rule,
                     int32_t i, int32_t j)
{
    if (y->hi[i] <= y->first[j] || y->hi[j] <= y->first[i]) {
        if (!colour_rule)
            return 1; /* safe intervals apart: ordered */
    } else if (y->final[i] >= y->first[j] && y->final[j] >= y->first[i]) {
        return 0; /* schedule intervals overlap: never ordered */
    }
    if (before(y, sr, i, j))
        return !colour_rule || sp->stream[y->final[i]] == sp->stream[y->first[j]];
    if (before(y, sr, j, i))
        return !colour_rule || sp->stream[y->final[j]] == sp->stream[y->first[i]];
    return 0;
}

typedef struct span {
    int64_t off, end;
} span;

static int cmp_span(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return (x->off > y->off) - (x->off < y->off);
}

typedef struct by_size {
    int64_t size;
    int32_t first, idx;
} by_size;

static int cmp_by_size(const void *a, const void *b)
{
    const by_size *x = a, *y = b;
    if (x->size != y->size)
        return (x->size < y->size) - (x->size > y->size);
    if (x->first != y->first)
        return (x->first > y->first) - (x->first < y->first);
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Greedy by size: largest first, at the lowest aligned offset clear of every placed record it
 * may not share with. O(n² · S) tests, O(n² log n) sorting at worst. */
static pbl_status greedy_by_size(const summary *y, const pbl_stream_plan *sp, const pbl_stream_records *sr,
                                 int colour_rule, int64_t align, const pbl_allocator *al, pbl__mem *m,
                                 pbl_assignment *out)
{
    int32_t n = sr->n_records;
    size_t nn = (size_t)(n ? n : 1);
    by_size *order = pbl__mem_alloc(m, nn * sizeof *order);
    span *busy = pbl__mem_alloc(m, nn * sizeof *busy);
    int32_t *placed = pbl__mem_alloc(m, nn * sizeof *placed);
    pbl_status s = order && busy && placed ? pbl__assignment_init(out, n, 0, al)
                                           : PBL_ERR_NOMEM;
    if (s == PBL_OK) {
        for (int32_t i = 0; i < n; i++)
            order[i] = (by_size){ sr->records[i].size, y->first[i], i };
        qsort(order, nn, sizeof *order, cmp_by_size);
        for (int32_t k = 0; k < n; k++) {
            int32_t i = order[k].idx, nb = 0;
            for (int32_t q = 0; q < k; q++) {
                int32_t j = placed[q];
                if (!may_share(y, sp, sr, colour_rule, i, j))
                    busy[nb++] = (span){ out->offset[j], out->offset[j] + sr->records[j].size };
            }
            qsort(busy, (size_t)nb, sizeof *busy, cmp_span);
            int64_t at = 0;
            for (int32_t b = 0; b < nb; b++) {
                if (busy[b].off >= at + sr->records[i].size)
                    break;
                if (busy[b].end > at)
                    at = pbl__align_up(busy[b].end, align);
            }
            out->offset[i] = at;
            placed[k] = i;
        }
        pbl__assignment_finish(out, sr->records);
    }
    pbl__mem_free(m, order, nn * sizeof *order);
    pbl__mem_free(m, busy, nn * sizeof *busy);
    pbl__mem_free(m, placed, nn * sizeof *placed);
    return s;
}

/* The records with their safe intervals. */
static pbl_usage_record *safe_records(const summary *y, const pbl_stream_records *sr, pbl__mem *m)
{
    pbl_usage_record *w = pbl__mem_alloc(m, (size_t)(y->n ? y->n : 1) * sizeof *w);
    if (!w)
        return NULL;
    for (int32_t r = 0; r < y->n; r++) {
        int64_t first = y->first[r] < sr->records[r].first ? y->first[r] : sr->records[r].first;
        w[r] = (pbl_usage_record){ .size = sr->records[r].size, .first = first,
                                   .last = y->hi[r] > first ? y->hi[r] : first + 1 };
    }
    return w;
}

/* hb: the smaller of greedy by size under "before" and the interval strategy over safe
 * intervals (greedy only up to 20000 records: it is quadratic). */
static pbl_status plan_hb(const pbl_stream_plan *sp, const pbl_stream_records *sr, const pbl_stream_storage_options *o,
                          pbl__mem *m, pbl_assignment *out, char *err, size_t errlen)
{
    summary y;
    if (summarise(sp, sr, m, &y) != PBL_OK) {
        snprintf(err, errlen, "out of memory");
        return PBL_ERR_NOMEM;
    }
    pbl_assignment a = { 0 }, b = { 0 };
    pbl_status s = PBL_ERR_NOMEM;
    pbl_usage_record *w = safe_records(&y, sr, m);
    snprintf(err, errlen, "out of memory");
    if (!w)
        goto done;
    pbl_plan_options po = pbl_plan_options_default();
    po.allocator = o->allocator;
    po.align = o->align;
    s = pbl_plan_records(w, sr->n_records, o->interval_strategy ? o->interval_strategy : "best", &po, &a, err, errlen);
    if (s != PBL_OK)
        goto done;
    pbl__assignment_finish(&a, sr->records);
    if (sr->n_records <= 20000) {
        s = greedy_by_size(&y, sp, sr, 0, o->align, o->allocator, m, &b);
        if (s != PBL_OK) {
            snprintf(err, errlen, "out of memory");
            goto done;
        }
        if (b.arena < a.arena) {
            pbl_assignment t = a;
            a = b;
            b = t;
        }
    }
    *out = a;
    a = (pbl_assignment){ 0 };
    s = PBL_OK;
done:
    pbl__mem_free(m, w, (size_t)(y.n ? y.n : 1) * sizeof *w);
    pbl_assignment_free(&a);
    pbl_assignment_free(&b);
    summary_free(&y);
    return s;
}

static int64_t safe_lower_bound(const pbl_stream_plan *sp, const pbl_stream_records *sr, pbl__mem *m)
{
    summary y;
    if (summarise(sp, sr, m, &y) != PBL_OK)
        return -1;
    pbl_usage_record *w = safe_records(&y, sr, m);
    int64_t lb = w ? pbl__records_lower_bound(w, sr->n_records, &m->hook) : -1;
    pbl__mem_free(m, w, (size_t)(y.n ? y.n : 1) * sizeof *w);
    summary_free(&y);
    return lb;
}

/* A copy of sp's waits plus a barrier at step p: p waits for the latest earlier step of every
 * other stream, and the next step of every other stream waits for p. The copy's waits are
 * reduced again. */
static pbl_status with_barrier(const pbl_stream_plan *sp, int32_t p, pbl__mem *m, pbl_stream_plan *out)
{
    int32_t S = sp->n_streams, n = sp->n_steps, before_p[PBL_MAX_STREAMS], after_p[PBL_MAX_STREAMS];
    for (int32_t s = 0; s < S; s++)
        before_p[s] = after_p[s] = -1;
    for (int32_t t = 0; t < p; t++)
        before_p[sp->stream[t]] = t;
    for (int32_t t = n - 1; t > p; t--)
        after_p[sp->stream[t]] = t;
    size_t nn = pbl__stream_n(sp), old = (size_t)sp->wait_start[n], cap = old + 2 * (size_t)S;
    int32_t *start = pbl__mem_alloc(m, (nn + 1) * sizeof *start), *need = pbl__mem_alloc(m, cap * sizeof *need);
    if (!start || !need) {
        pbl__mem_free(m, start, (nn + 1) * sizeof *start);
        pbl__mem_free(m, need, cap * sizeof *need);
        return PBL_ERR_NOMEM;
    }
    int32_t k = 0;
    for (int32_t t = 0; t < n; t++) {
        start[t] = k;
        for (int32_t e = sp->wait_start[t]; e < sp->wait_start[t + 1]; e++)
            need[k++] = sp->wait[e];
        for (int32_t s = 0; s < S; s++) {
            if (s == sp->stream[p])
                continue;
            if (t == p && before_p[s] >= 0)
                need[k++] = before_p[s];
            if (t == after_p[s] && t > p)
                need[k++] = p;
        }
    }
    start[n] = k;
    *out = *sp;
    out->wait = NULL;
    out->wait_start = NULL;
    pbl_status s = pbl__stream_reduce(out, m, start, need);
    pbl__mem_free(m, start, (nn + 1) * sizeof *start);
    pbl__mem_free(m, need, cap * sizeof *need);
    return s;
}

/* hb_events: barriers at the producers of the largest records, each kept when it lowers the
 * safe-interval lower bound within the makespan budget; then hb, kept only if smaller. */
static pbl_status plan_hb_events(pbl_stream_plan *sp, const pbl_stream_records *sr,
                                 const pbl_stream_storage_options *o, pbl__mem *m, pbl_assignment *out,
                                 int32_t *n_added, char *err, size_t errlen)
{
    pbl_status s = plan_hb(sp, sr, o, m, out, err, errlen);
    if (s != PBL_OK || sp->n_streams == 1 || sr->n_records == 0)
        return s;
    int32_t n = sr->n_records, max_c = o->max_candidates > 0 ? o->max_candidates : 0;
    by_size *order = pbl__mem_alloc(m, (size_t)n * sizeof *order);
    if (!order) {
        snprintf(err, errlen, "out of memory");
        pbl_assignment_free(out);
        return PBL_ERR_NOMEM;
    }
    for (int32_t r = 0; r < n; r++) {
        int32_t first = sr->access_start[r] < sr->access_start[r + 1] ? sr->access[sr->access_start[r]]
                                                                       : (int32_t)sr->records[r].first;
        order[r] = (by_size){ sr->records[r].size, first, r };
    }
    qsort(order, (size_t)n, sizeof *order, cmp_by_size);
    int64_t total = 0, span0 = pbl_stream_plan_makespan(sp, &total);
    double budget = (double)span0 * (1.0 + (o->event_slack > 0 ? o->event_slack : 0));
    int64_t lb = safe_lower_bound(sp, sr, m);
    pbl_stream_plan cur = *sp; /* shares sp's arrays; its own waits once a barrier is kept */
    int own = 0;
    s = span0 < 0 || lb < 0 ? PBL_ERR_NOMEM : PBL_OK;
    for (int32_t c = 0; s == PBL_OK && c < n && c < max_c; c++) {
        int32_t p = order[c].first;
        if (p <= 0 || p >= sp->n_steps)
            continue;
        pbl_stream_plan next;
        s = with_barrier(&cur, p, m, &next);
        if (s != PBL_OK)
            break;
        int64_t ms = pbl_stream_plan_makespan(&next, NULL), nlb = safe_lower_bound(&next, sr, m);
        if (ms < 0 || nlb < 0) {
            pbl__stream_waits_free(&next, m);
            s = PBL_ERR_NOMEM;
            break;
        }
        if ((double)ms <= budget && nlb < lb) {
            if (own)
                pbl__stream_waits_free(&cur, m);
            cur = next;
            own = 1;
            lb = nlb;
        } else {
            pbl__stream_waits_free(&next, m);
        }
    }
    pbl__mem_free(m, order, (size_t)n * sizeof *order);
    if (s != PBL_OK || !own) {
        if (own)
            pbl__stream_waits_free(&cur, m);
        if (s != PBL_OK) {
            snprintf(err, errlen, "out of memory");
            pbl_assignment_free(out);
        }
        return s;
    }
    pbl_assignment b = { 0 };
    s = plan_hb(&cur, sr, o, m, &b, err, errlen);
    if (s == PBL_OK && b.arena < out->arena) {
        /* waits of cur that sp lacks (both lists ascend per step) */
        int32_t added = 0;
        for (int32_t t = 0; t < sp->n_steps; t++)
            for (int32_t e = cur.wait_start[t], f = sp->wait_start[t]; e < cur.wait_start[t + 1]; e++) {
                while (f < sp->wait_start[t + 1] && sp->wait[f] < cur.wait[e])
                    f++;
                added += f == sp->wait_start[t + 1] || sp->wait[f] != cur.wait[e];
            }
        pbl_assignment_free(out);
        *out = b;
        /* sp takes cur's waits (allocated with sp's allocator: m was made from it) */
        pbl__stream_waits_free(sp, m);
        sp->wait = cur.wait;
        sp->wait_start = cur.wait_start;
        if (n_added)
            *n_added = added;
        return PBL_OK;
    }
    pbl_assignment_free(&b);
    pbl__stream_waits_free(&cur, m);
    if (s != PBL_OK)
        pbl_assignment_free(out);
    return s;
}

PBL__API pbl_status pbl_stream_plan_records(pbl_stream_plan *sp, const pbl_stream_records *sr,
                                            const pbl_stream_storage_options *opt, pbl_assignment *out,
                                            int32_t *n_added, char *err, size_t errlen)
{
    return pbl__stream_plan_records(sp, sr, opt, out, n_added, NULL, NULL, err, errlen);
}

pbl_status pbl__stream_plan_records(pbl_stream_plan *sp, const pbl_stream_records *sr,
                                    const pbl_stream_storage_options *opt, pbl_assignment *out, int32_t *n_added,
                                    int32_t *bad_a, int32_t *bad_b, char *err, size_t errlen)
{
    char why[512] = "";
    if (n_added)
        *n_added = 0;
    pbl__errclear(err, errlen);
    if (out)
        memset(out, 0, sizeof *out);
    pbl_stream_storage_options o = opt ? *opt : pbl_stream_storage_options_default();
    if (o.align < 1)
        o.align = 1;
    pbl_status s = !out || !sr || (sr->n_records > 0 && (!sr->records || !sr->access_start || !sr->to_end))
                       ? PBL_ERR_INVALID_ARG
                       : pbl__stream_plan_shape(sp, why, sizeof why);
    if (s == PBL_OK && !pbl_stream_strategy_name(o.strategy)) {
        s = PBL_ERR_INVALID_ARG;
        snprintf(why, sizeof why, "stream planning: no strategy %d", (int)o.strategy);
    }
    for (int32_t r = 0; s == PBL_OK && r < sr->n_records; r++) {
        for (int32_t e = sr->access_start[r]; e < sr->access_start[r + 1]; e++)
            if (sr->access[e] < 0 || sr->access[e] >= sp->n_steps) {
                s = PBL_ERR_INVALID_ARG;
                snprintf(why, sizeof why, "stream planning: record %d accesses step %d of %d", (int)r,
                         (int)sr->access[e], (int)sp->n_steps);
            }
    }
    if (s != PBL_OK) {
        return pbl__errf(err, errlen, s, "%s", why[0] ? why : "stream planning: no records or no output");
    }
    /* sp's allocator: hb_events reallocates sp's waits */
    pbl__mem m;
    pbl__mem_init(&m, sp->allocator);
    if (o.strategy == PBL_STREAM_STRATEGY_COLOUR) {
        summary y;
        s = summarise(sp, sr, &m, &y);
        if (s == PBL_OK) {
            s = greedy_by_size(&y, sp, sr, 1, o.align, o.allocator, &m, out);
            summary_free(&y);
        }
        if (s != PBL_OK)
            snprintf(why, sizeof why, "out of memory");
    } else if (o.strategy == PBL_STREAM_STRATEGY_HB) {
        s = plan_hb(sp, sr, &o, &m, out, why, sizeof why);
    } else {
        s = plan_hb_events(sp, sr, &o, &m, out, n_added, why, sizeof why);
    }
    if (s == PBL_OK) {
        s = pbl__stream_verify(sp, sr, out, o.align, bad_a, bad_b, why, sizeof why);
        if (s != PBL_OK)
            pbl_assignment_free(out);
    }
    if (s != PBL_OK)
        pbl__errf(err, errlen, s, "%s: %s", pbl_stream_strategy_name(o.strategy), why);
    return s;
}
