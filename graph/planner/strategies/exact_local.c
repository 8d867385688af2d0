/*
 * exact's local improvement (graph/planner/strategies/exact.h): re-packing the records around
 * the arena's highest point against the fixed rest, for instances too large for the full
 * search, and for those where the search ran out of budget above the lower bound.
 *
 * Only the records that reach the top make the arena what it is. One move: pick a record
 * whose top is the arena's, take the window of time it lives in (widened by a multiple of its
 * own lifetime), remove the m records live in that window with the highest tops, and put them
 * back one by one, each at the lowest aligned offset where it overlaps nothing (the fixed rest
 * and those already put back), in one of a few orders. The move is kept when it lowers the
 * arena, or keeps it and leaves fewer records at the top (so peaks in separate places are
 * flattened one at a time until the arena itself comes down); otherwise the old offsets come
 * back. Each kept move strictly lowers (arena, records at the top), so the loop ends; it stops
 * too after a whole round of moves (every m, order and width) keeps nothing, when its work
 * budget is spent (WORK_*), or at the deadline. Nothing here depends on a particular instance: m grows geometrically from a
 * handful to a few hundred (cost: m times the records live beside them), the widths are
 * multiples of the top record's own lifetime, and the orders are the usual greedy ones
 * (largest first, longest first, largest area first, and the old offsets' order, which can
 * only compact). No randomness: the same input and budget give the same offsets.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph/planner/strategies/exact.h"

#define N_M      6   /* m = 8, 16, ..., 256 records taken out per move */
#define M_FIRST  8
#define N_ORDERS 4
#define N_WIDTHS 3   /* the window: the top record's lifetime widened by 0, 1 or 4 lifetimes */
static const int64_t widths[N_WIDTHS] = { 0, 1, 4 };
/* Work: neighbour checks (one per record live beside a record put back). Bounded, like the
 * search's node budget, so that exact without a time limit gives the same offsets on every
 * machine and stays well under a second at 20k records (a check costs tens of ns with its
 * share of the sorting); small instances get a floor that lets every round finish. */
#define WORK_PER_RECORD 1000
#define WORK_MIN        10000000

typedef struct local {
    const pbl_usage_record *r;
    int32_t                 n;
    int64_t                 align;
    int64_t                *offset;
    int32_t                *set;     /* [n] the records taken out */
    int32_t                *cand;    /* [n] the records live beside them */
    int64_t                *ivl;     /* [2n] address intervals of one record's neighbours */
    int64_t                *saved;   /* [n] offsets of the set before the move */
    uint8_t                *out;     /* [n] 1: taken out (and not yet put back) */
    int64_t                *key;     /* [n] sort keys of the set */
    int64_t                 work;    /* neighbour checks so far */
} local;

static int64_t top_of(const local *l, int32_t i) { return l->offset[i] + l->r[i].size; }

static void arena_and_tops(const local *l, int64_t *arena, int32_t *n_top)
{
    int64_t a = 0;
    int32_t c = 0;
    for (int32_t i = 0; i < l->n; i++) {
        int64_t t = top_of(l, i);
        if (t > a) {
            a = t;
            c = 0;
        }
        c += t == a;
    }
    *arena = a;
    *n_top = c;
}

static int cmp_i64_pair(const void *x, const void *y)
{
    const int64_t *a = x, *b = y;
    return (a[0] > b[0]) - (a[0] < b[0]);
}

/* (key, record) pairs by key descending, ties by record (deterministic). */
static int cmp_key_desc(const void *x, const void *y)
{
    const int64_t *a = x, *b = y;
    if (a[0] != b[0])
        return a[0] > b[0] ? -1 : 1;
    return (a[1] > b[1]) - (a[1] < b[1]);
}

/* Sorts set[0..ns) by key[] descending, through ivl[] as pair scratch. */
static void sort_set(local *l, int32_t ns)
{
    for (int32_t s = 0; s < ns; s++) {
        l->ivl[2 * s] = l->key[l->set[s]];
        l->ivl[2 * s + 1] = l->set[s];
    }
    qsort(l->ivl, (size_t)ns, 2 * sizeof *l->ivl, cmp_key_desc);
    for (int32_t s = 0; s < ns; s++)
        l->set[s] = (int32_t)l->ivl[2 * s + 1];
}

static int overlaps(const pbl_usage_record *a, const pbl_usage_record *b)
{
    return a->first < b->last && b->first < a->last;
}

/* The lowest aligned offset where record i overlaps none of the records in cand[0..nc) that
 * are in place (not out). */
static int64_t lowest_fit(local *l, int32_t i, int32_t nc)
{
    int32_t k = 0;
    l->work += nc;
    for (int32_t c = 0; c < nc; c++) {
        int32_t j = l->cand[c];
        if (j == i || l->out[j] || !overlaps(&l->r[i], &l->r[j]))
            continue;
        l->ivl[2 * k] = l->offset[j];
        l->ivl[2 * k + 1] = top_of(l, j);
        k++;
    }
    qsort(l->ivl, (size_t)k, 2 * sizeof *l->ivl, cmp_i64_pair);
    int64_t at = 0, size = l->r[i].size;
    for (int32_t c = 0; c < k; c++) {
        if (l->ivl[2 * c] >= at + size)
            break;
        if (l->ivl[2 * c + 1] > at)
            at = pbl__align_up(l->ivl[2 * c + 1], l->align);
    }
    return at;
}

/* One move around top record t: m records, an order, a width. 1 when kept. */
static int move(local *l, int32_t t, int32_t m, int32_t order, int64_t width, int64_t arena, int32_t n_top)
{
    const pbl_usage_record *r = l->r;
    int64_t len = r[t].last - r[t].first;
    pbl_usage_record win = { 1, r[t].first - width * len, r[t].last + width * len };
    /* the m highest tops live in the window */
    int32_t ns = 0;
    for (int32_t i = 0; i < l->n; i++)
        if (overlaps(&r[i], &win))
            l->set[ns++] = i;
    for (int32_t s = 0; s < ns; s++)
        l->key[l->set[s]] = top_of(l, l->set[s]);
    sort_set(l, ns);
    if (ns > m)
        ns = m;
    /* the order they go back in */
    for (int32_t s = 0; s < ns; s++) {
        int32_t i = l->set[s];
        int64_t life = r[i].last - r[i].first;
        l->key[i] = order == 0 ? r[i].size
                  : order == 1 ? life
                  : order == 2 ? (r[i].size > INT64_MAX / life ? INT64_MAX : r[i].size * life)
                               : -l->offset[i];
    }
    sort_set(l, ns);
    /* the span their lifetimes cover, and the records live in it */
    pbl_usage_record span = r[l->set[0]];
    for (int32_t s = 0; s < ns; s++) {
        int32_t i = l->set[s];
        span.first = r[i].first < span.first ? r[i].first : span.first;
        span.last = r[i].last > span.last ? r[i].last : span.last;
        l->out[i] = 1;
        l->saved[s] = l->offset[i];
    }
    int32_t nc = 0;
    for (int32_t i = 0; i < l->n; i++)
        if (overlaps(&r[i], &span))
            l->cand[nc++] = i;
    for (int32_t s = 0; s < ns; s++) {
        int32_t i = l->set[s];
        l->offset[i] = lowest_fit(l, i, nc);
        l->out[i] = 0;
    }
    int64_t a;
    int32_t c;
    arena_and_tops(l, &a, &c);
    if (a < arena || (a == arena && c < n_top))
        return 1;
    for (int32_t s = 0; s < ns; s++)
        l->offset[l->set[s]] = l->saved[s];
    return 0;
}

int64_t pbl__exact_local(const pbl_usage_record *r, int32_t n, int64_t align, double deadline,
                         const pbl_allocator *al, int64_t *offset)
{
    local l = { .r = r, .n = n, .align = align > 0 ? align : 1, .offset = offset };
    size_t b32 = (size_t)n * sizeof(int32_t), b64 = (size_t)n * sizeof(int64_t);
    l.set = pbl__plan_alloc(al, b32);
    l.cand = pbl__plan_alloc(al, b32);
    l.ivl = pbl__plan_alloc(al, 2 * b64);
    l.saved = pbl__plan_alloc(al, b64);
    l.key = pbl__plan_alloc(al, b64);
    l.out = pbl__plan_alloc(al, (size_t)n);
    int64_t arena = -1;
    if (!l.set || !l.cand || !l.ivl || !l.saved || !l.key || !l.out)
        goto done;
    memset(l.out, 0, (size_t)n);
    int32_t n_top;
    int64_t work_budget = (int64_t)n * WORK_PER_RECORD > WORK_MIN ? (int64_t)n * WORK_PER_RECORD : WORK_MIN;
    arena_and_tops(&l, &arena, &n_top);
    /* a round: every (width, m, order) around the first record at the top; any kept move
     * starts a new round */
    for (int kept = 1; kept;) {
        kept = 0;
        for (int32_t w = 0; w < N_WIDTHS && !kept; w++)
            for (int32_t mi = 0, m = M_FIRST; mi < N_M && !kept; mi++, m *= 2)
                for (int32_t o = 0; o < N_ORDERS && !kept; o++) {
                    if ((deadline > 0 && pbl__plan_now() > deadline) || l.work > work_budget)
                        goto done;
                    int32_t t = 0;
                    while (top_of(&l, t) != arena)
                        t++;
                    if (move(&l, t, m, o, widths[w], arena, n_top)) {
                        kept = 1;
                        arena_and_tops(&l, &arena, &n_top);
                    }
                }
    }
done:
    pbl__plan_free(al, l.set, b32);
    pbl__plan_free(al, l.cand, b32);
    pbl__plan_free(al, l.ivl, 2 * b64);
    pbl__plan_free(al, l.saved, b64);
    pbl__plan_free(al, l.key, b64);
    pbl__plan_free(al, l.out, (size_t)n);
    return arena;
}
