/*
 * greedy_by_size: TFLite GPU delegate's GreedyBySizeDistPriorityAssignment (tensorflow/lite/
 * delegates/gpu/common/memory_management/greedy_by_size_assignment.cc), Pisarchyk & Lee 2020,
 * "Efficient Memory Management for Deep Neural Net Inference" (greedy by size for shared
 * objects, with the distance priority). greedy_best: TFLite's BestGreedy, widened to the
 * three greedy shared-object strategies.
 *
 * Positional maximums: sort each step's live sizes in decreasing order; pm[k] is the largest
 * k-th entry over all steps — a lower bound on the k-th largest object. A record's position
 * is the last k with pm[k] >= its size. The distance from record r to object o is infinite
 * when o holds a record overlapping r, else the smallest gap between r and o's records
 * (TFLite counts steps between inclusive ends, one more than pebble's half-open gap; the
 * order is the same). Each record keeps its best distance and best object.
 *
 * Repeat n times: take the unassigned record with the smallest position, then the smallest
 * best distance, then the largest size, then the lowest index. If its best distance is
 * infinite it opens a new object of its size, else it joins its best object (which grows
 * to its size if needed). Then every unassigned record's distances change as TFLite's do:
 * its best moves to this object only if the new distance is strictly smaller; if this record
 * overlaps it and the object was its best, its best is recomputed over all objects in id
 * order (strictly smaller wins, so the lowest id among equals). Which object wins a tie thus
 * depends on the order things happened in, and the implementation replays it exactly.
 *
 * What makes it fast (TFLite's is O(n^2) selection plus an n x objects distance matrix):
 *   - positional maximums: insert the records largest first into a range-add/max segment
 *     tree over the time segments; after each insertion the most records live at once,
 *     c, means pm[0..c) are at least this size. O(n log n).
 *   - selection: a tournament tree over the records keyed as above. O(log n) per change.
 *   - updates: a record's best changes only if (a) this record overlaps it and the object was
 *     its best, or (b) the gap to this record is below its best distance. (a) comes from a
 *     segment tree over the records sorted by last holding the smallest unassigned first;
 *     (b) from segment trees holding first - best (records after) and -(last + best)
 *     (records before), so each query visits only records whose best changes or that
 *     clash with the object; records with no object yet are found the same way, only when a
 *     new object opens. Objects' records sit in a treap keyed by (object, first), so a
 *     record's distance to one object is two neighbour lookups.
 *
 * Complexity: O((n + U + K) log n + R·m log n) time, U the changes of best, K the records
 * overlapping each assigned one, R the recomputations, m the objects; O(n) memory. U and R
 * are usually a small multiple of n; the worst case stays polynomial but quadratic-ish.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph/plan_internal.h"

#define FAR INT64_MAX /* an infinite distance, or a removed leaf */

typedef struct key2 {
    int64_t k;
    int32_t idx;
} key2;

static int cmp_key2(const void *a, const void *b)
{
    const key2 *x = a, *y = b;
    if (x->k != y->k)
        return (x->k > y->k) - (x->k < y->k);
    return (x->idx > y->idx) - (x->idx < y->idx);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The index of the first of sorted v[0, n) that is >= t (strict: > t). */
static int32_t search(const int64_t *v, int32_t n, int64_t t, int strict)
{
    int32_t lo = 0, hi = n;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (v[mid] < t || (strict && v[mid] == t))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* ---- a min segment tree over positions [0, leaves), listing leaves below a threshold ------ */

typedef struct mintree {
    int32_t  leaves;
    int64_t *v; /* [2·leaves] */
} mintree;

static void mt_set(mintree *t, int32_t p, int64_t x)
{
    int32_t v = t->leaves + p;
    if (t->v[v] == x)
        return;
    t->v[v] = x;
    for (v /= 2; v >= 1; v /= 2) {
        int64_t m = t->v[2 * v] < t->v[2 * v + 1] ? t->v[2 * v] : t->v[2 * v + 1];
        if (t->v[v] == m)
            break;
        t->v[v] = m;
    }
}

/* Appends to out[] the positions in [from, to) under node v = [lo, hi) whose value is < thr. */
static void mt_collect(const mintree *t, int32_t v, int32_t lo, int32_t hi, int32_t from, int32_t to, int64_t thr,
                       int32_t *out, int32_t *n_out)
{
    if (hi <= from || lo >= to || t->v[v] >= thr)
        return;
    if (hi - lo == 1) {
        out[(*n_out)++] = lo;
        return;
    }
    int32_t mid = lo + (hi - lo) / 2;
    mt_collect(t, 2 * v, lo, mid, from, to, thr, out, n_out);
    mt_collect(t, 2 * v + 1, mid, hi, from, to, thr, out, n_out);
}

/* ---- per object, a treap of its records keyed by first ---------------------------------- */

typedef struct node {
    int64_t first, last;
    int32_t left, right;
} node; /* one cache line per level of a descent */

typedef struct treap {
    node    *v;    /* per record */
    int32_t *root; /* per object */
} treap;

static uint32_t prio(int32_t v)
{
    uint32_t x = (uint32_t)v * 2654435761u;
    x ^= x >> 15;
    x *= 2246822519u;
    return x ^ (x >> 13);
}

static int32_t merge(treap *t, int32_t a, int32_t b)
{
    if (a < 0)
        return b;
    if (b < 0)
        return a;
    if (prio(a) > prio(b)) {
        t->v[a].right = merge(t, t->v[a].right, b);
        return a;
    }
    t->v[b].left = merge(t, a, t->v[b].left);
    return b;
}

/* Splits the tree at v into records starting before `first` (*lo) and the rest (*hi). */
static void split(treap *t, int32_t v, int64_t first, int32_t *lo, int32_t *hi)
{
    if (v < 0) {
        *lo = *hi = -1;
    } else if (t->v[v].first < first) {
        split(t, t->v[v].right, first, &t->v[v].right, hi);
        *lo = v;
    } else {
        split(t, t->v[v].left, first, lo, &t->v[v].left);
        *hi = v;
    }
}

static void treap_insert(treap *t, int32_t o, int32_t x)
{
    int32_t lo, hi;
    t->v[x].left = t->v[x].right = -1;
    split(t, t->root[o], t->v[x].first, &lo, &hi);
    t->root[o] = merge(t, merge(t, lo, x), hi);
}

/* Object o's last record starting before `first` (*before) and first record starting at or
 * after it (*after); -1 for none. */
static void neighbours(const treap *t, int32_t o, int64_t first, int32_t *before, int32_t *after)
{
    *before = *after = -1;
    for (int32_t v = t->root[o]; v >= 0;) {
        if (t->v[v].first < first) {
            *before = v;
            v = t->v[v].right;
        } else {
            *after = v;
            v = t->v[v].left;
        }
    }
}

/* The gap between [first, last) and object o's records; FAR when one overlaps it. */
static int64_t distance(const treap *t, int32_t o, int64_t first, int64_t last)
{
    int64_t d = FAR;
    int32_t before = -1;
    for (int32_t v = t->root[o]; v >= 0;) {
        const node *x = &t->v[v];
        if (x->first < first) {
            before = v;
            v = x->right;
        } else { /* the lowest such is the next record */
            if (x->first < last)
                return FAR;
            d = x->first - last;
            v = x->left;
        }
    }
    if (before >= 0) {
        if (t->v[before].last > first)
            return FAR;
        if (first - t->v[before].last < d)
            d = first - t->v[before].last;
    }
    return d;
}

/* ---- the plan ------------------------------------------------------------------------------ */

typedef struct state {
    const pbl_usage_record *r;
    int32_t  n, leaves;
    int32_t *position; /* per record */
    int64_t *best;     /* per record: best distance, FAR for none */
    int32_t *best_obj; /* per record */
    int32_t *obj;      /* per record: its object, -1 while unassigned */
    int32_t *fpos, *lpos;       /* per record: position in the first / last order */
    int32_t *at_f, *at_l;       /* per position: the record */
    int64_t *firsts, *lasts;    /* sorted */
    mintree  after;    /* by first: first - best, for unassigned records with a best */
    mintree  before;   /* by last: -(last + best), likewise */
    mintree  after_none, before_none; /* 0 for unassigned records with no best yet */
    mintree  live;     /* by last: first of unassigned records */
    int32_t *win;      /* [2·leaves] tournament: the record to take next under each node */
    treap    placed;
    int32_t *found;    /* scratch, [n] */
} state;

/* Whether record a is taken before record b. */
static int takes_first(const state *s, int32_t a, int32_t b)
{
    if (b < 0)
        return a >= 0;
    if (a < 0)
        return 0;
    if (s->position[a] != s->position[b])
        return s->position[a] < s->position[b];
    if (s->best[a] != s->best[b])
        return s->best[a] < s->best[b];
    if (s->r[a].size != s->r[b].size)
        return s->r[a].size > s->r[b].size;
    return a < b;
}

/* Brings every index up to date with record i's state. */
static void refresh(state *s, int32_t i)
{
    int open = s->obj[i] < 0, some = open && s->best[i] != FAR;
    mt_set(&s->after, s->fpos[i], some ? s->r[i].first - s->best[i] : FAR);
    mt_set(&s->before, s->lpos[i], some ? -(s->r[i].last + s->best[i]) : FAR);
    mt_set(&s->after_none, s->fpos[i], open && !some ? 0 : FAR);
    mt_set(&s->before_none, s->lpos[i], open && !some ? 0 : FAR);
    mt_set(&s->live, s->lpos[i], open ? s->r[i].first : FAR);
    int32_t v = s->leaves + i;
    s->win[v] = open ? i : -1;
    for (v /= 2; v >= 1; v /= 2)
        s->win[v] = takes_first(s, s->win[2 * v + 1], s->win[2 * v]) ? s->win[2 * v + 1] : s->win[2 * v];
}

/* Positional maximums pm[] (returns their count) and each record's position. */
static int32_t positions(state *s, int64_t *pts, key2 *by_size, int64_t *add, int64_t *top, int64_t *pm)
{
    const pbl_usage_record *r = s->r;
    int32_t n = s->n;
    for (int32_t i = 0; i < n; i++) {
        pts[2 * i] = r[i].first;
        pts[2 * i + 1] = r[i].last;
        by_size[i] = (key2){ -r[i].size, i };
    }
    qsort(pts, 2 * (size_t)n, sizeof *pts, cmp_i64);
    qsort(by_size, (size_t)n, sizeof *by_size, cmp_key2);
    int32_t m = 1;
    for (int32_t k = 1; k < 2 * n; k++)
        if (pts[k] != pts[m - 1])
            pts[m++] = pts[k];
    int32_t leaves = 1;
    while (leaves < m - 1)
        leaves *= 2;
    memset(add, 0, 2 * (size_t)leaves * sizeof *add);
    memset(top, 0, 2 * (size_t)leaves * sizeof *top);

    int32_t n_pm = 0;
    for (int32_t k = 0; k < n; k++) {
        int32_t i = by_size[k].idx;
        /* +1 on the segments [lo, hi), bottom-up; top[v] = add[v] + max(top of children) */
        int32_t lo = search(pts, m, r[i].first, 0) + leaves, hi = search(pts, m, r[i].last, 0) + leaves;
        int32_t l0 = lo, h0 = hi - 1;
        for (; lo < hi; lo /= 2, hi /= 2) {
            if (lo & 1) {
                add[lo]++;
                top[lo]++;
                lo++;
            }
            if (hi & 1) {
                --hi;
                add[hi]++;
                top[hi]++;
            }
        }
        for (l0 /= 2; l0 >= 1; l0 /= 2)
            top[l0] = add[l0] + (top[2 * l0] > top[2 * l0 + 1] ? top[2 * l0] : top[2 * l0 + 1]);
        for (h0 /= 2; h0 >= 1; h0 /= 2)
            top[h0] = add[h0] + (top[2 * h0] > top[2 * h0 + 1] ? top[2 * h0] : top[2 * h0 + 1]);
        while (n_pm < top[1])
            pm[n_pm++] = r[i].size;
    }
    for (int32_t i = 0; i < n; i++) {
        /* pm is non-increasing: count the entries >= size */
        int32_t lo = 0, hi = n_pm;
        while (lo < hi) {
            int32_t mid = lo + (hi - lo) / 2;
            if (pm[mid] >= r[i].size)
                lo = mid + 1;
            else
                hi = mid;
        }
        s->position[i] = lo - 1;
    }
    return n_pm;
}

/* Record i's best over all objects in id order, as TFLite's RecalcBestDist. */
static void recompute(state *s, int32_t i, int32_t n_obj)
{
    int64_t best = FAR;
    int32_t best_obj = s->best_obj[i];
    for (int32_t o = 0; o < n_obj && best > 0; o++) { /* nothing beats a gap of 0 */
        int64_t d = distance(&s->placed, o, s->r[i].first, s->r[i].last);
        if (d < best) {
            best = d;
            best_obj = o;
        }
    }
    s->best[i] = best;
    s->best_obj[i] = best_obj;
}

/* Records record a joining object o (fresh: a new object) and updates the others. */
static void place(state *s, int32_t a, int32_t o, int fresh, int32_t n_obj)
{
    const pbl_usage_record *r = s->r;
    int32_t n = s->n, k, n_found;
    int64_t first = r[a].first, last = r[a].last;
    s->obj[a] = o;
    refresh(s, a);
    treap_insert(&s->placed, o, a);

    /* positions after a (first >= a.last) in the first order; before a (last <= a.first)
     * and overlapping it (last > a.first) in the last order */
    int32_t after_from = search(s->firsts, n, last, 0), before_to = search(s->lasts, n, first, 1);

    if (!fresh) { /* (a) records overlapping a that had o as their best */
        n_found = 0;
        mt_collect(&s->live, 1, 0, s->leaves, before_to, n, last, s->found, &n_found);
        for (k = 0; k < n_found; k++) {
            int32_t i = s->at_l[s->found[k]];
            if (s->best[i] != FAR && s->best_obj[i] == o) {
                recompute(s, i, n_obj);
                refresh(s, i);
            }
        }
    }
    /* (b) records whose gap to a is below their best and that fit between o's records around
     * a: after a and ending by o's next record's first, or before a and starting at or after
     * o's previous record's last (a fresh object has neither) */
    int32_t prev, next, dummy;
    neighbours(&s->placed, o, first, &prev, &dummy);
    neighbours(&s->placed, o, last, &dummy, &next);
    int64_t gap_from = prev >= 0 ? r[prev].last : INT64_MIN, gap_to = next >= 0 ? r[next].first : INT64_MAX;
    int32_t after_to = next >= 0 ? search(s->firsts, n, gap_to, 0) : n;
    int32_t before_from = prev >= 0 ? search(s->lasts, n, gap_from, 1) : 0;
    n_found = 0;
    mt_collect(&s->after, 1, 0, s->leaves, after_from, after_to, last, s->found, &n_found);
    for (k = 0; k < n_found; k++) {
        int32_t i = s->at_f[s->found[k]];
        if (r[i].last <= gap_to) {
            s->best[i] = r[i].first - last;
            s->best_obj[i] = o;
            refresh(s, i);
        }
    }
    n_found = 0;
    mt_collect(&s->before, 1, 0, s->leaves, before_from, before_to, -first, s->found, &n_found);
    for (k = 0; k < n_found; k++) {
        int32_t i = s->at_l[s->found[k]];
        if (r[i].first >= gap_from) {
            s->best[i] = first - r[i].last;
            s->best_obj[i] = o;
            refresh(s, i);
        }
    }
    if (fresh) { /* records with no best: a new object that does not overlap them is one */
        n_found = 0;
        mt_collect(&s->after_none, 1, 0, s->leaves, after_from, n, 1, s->found, &n_found);
        for (k = 0; k < n_found; k++) {
            int32_t i = s->at_f[s->found[k]];
            s->best[i] = r[i].first - last;
            s->best_obj[i] = o;
            refresh(s, i);
        }
        n_found = 0;
        mt_collect(&s->before_none, 1, 0, s->leaves, 0, before_to, 1, s->found, &n_found);
        for (k = 0; k < n_found; k++) {
            int32_t i = s->at_l[s->found[k]];
            s->best[i] = first - r[i].last;
            s->best_obj[i] = o;
            refresh(s, i);
        }
    }
}

pbl_status pbl__plan_greedy_by_size(const pbl__plan_in *in, pbl_assignment *out)
{
    const pbl_allocator *al = in->opt.allocator;
    const pbl_usage_record *r = in->r;
    int32_t n = in->n;
    pbl_status st = pbl__assignment_init(out, n, 1, al);
    if (st != PBL_OK)
        return st;
    if (n == 0)
        return PBL_OK;

    state s = { .r = r, .n = n, .leaves = 1 };
    while (s.leaves < 2 * n) /* also covers the time segments (< 2n) of positions() */
        s.leaves *= 2;
    size_t nn = (size_t)n, nl = (size_t)s.leaves;
    size_t bytes = nl * 2 * sizeof(int64_t) * 5 + nn * (2 * sizeof(key2) + sizeof(node) + 4 * sizeof(int64_t)) +
                   nl * 2 * sizeof(int32_t) + nn * 10 * sizeof(int32_t);
    char *block = pbl__plan_alloc(al, bytes), *at = block;
    if (!block) {
        pbl_assignment_free(out);
        return PBL_ERR_NOMEM;
    }
    mintree *trees[5] = { &s.after, &s.before, &s.after_none, &s.before_none, &s.live };
    for (int t = 0; t < 5; t++) {
        trees[t]->leaves = s.leaves;
        trees[t]->v = (int64_t *)at;
        at += nl * 2 * sizeof(int64_t);
    }
    key2 *by_first = (key2 *)at;  at += nn * sizeof *by_first;
    key2 *by_last = (key2 *)at;   at += nn * sizeof *by_last;
    s.best = (int64_t *)at;       at += nn * sizeof *s.best;
    s.firsts = (int64_t *)at;     at += nn * sizeof *s.firsts;
    s.lasts = (int64_t *)at;      at += nn * sizeof *s.lasts;
    int64_t *pm = (int64_t *)at;  at += nn * sizeof *pm;
    s.placed.v = (node *)at;      at += nn * sizeof *s.placed.v;
    s.win = (int32_t *)at;        at += nl * 2 * sizeof *s.win;
    int32_t **ints[] = { &s.position, &s.best_obj, &s.obj, &s.fpos, &s.lpos, &s.at_f, &s.at_l,
                         &s.placed.root, &s.found };
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
        *ints[k] = (int32_t *)at;
        at += nn * sizeof(int32_t);
    }

    /* positions, with the trees' memory as scratch (2n time points, 2·leaves nodes each) */
    positions(&s, s.after.v, by_first, s.before.v, s.live.v, pm);

    for (int32_t i = 0; i < n; i++) {
        by_first[i] = (key2){ r[i].first, i };
        by_last[i] = (key2){ r[i].last, i };
    }
    qsort(by_first, nn, sizeof *by_first, cmp_key2);
    qsort(by_last, nn, sizeof *by_last, cmp_key2);
    for (int32_t p = 0; p < n; p++) {
        s.firsts[p] = by_first[p].k;
        s.at_f[p] = by_first[p].idx;
        s.fpos[by_first[p].idx] = p;
        s.lasts[p] = by_last[p].k;
        s.at_l[p] = by_last[p].idx;
        s.lpos[by_last[p].idx] = p;
    }
    for (int t = 0; t < 5; t++)
        for (size_t v = 0; v < 2 * nl; v++)
            trees[t]->v[v] = FAR;
    for (size_t v = 0; v < 2 * nl; v++)
        s.win[v] = -1;
    for (int32_t i = 0; i < n; i++) {
        s.best[i] = FAR;
        s.best_obj[i] = -1;
        s.obj[i] = -1;
        s.placed.root[i] = -1;
        s.placed.v[i] = (node){ r[i].first, r[i].last, -1, -1 };
    }
    for (int32_t i = 0; i < n; i++)
        refresh(&s, i);

    int32_t n_obj = 0;
    for (int32_t step = 0; step < n; step++) {
        int32_t a = s.win[1], o;
        int fresh = s.best[a] == FAR;
        if (fresh) {
            o = n_obj++;
            out->object_size[o] = r[a].size;
        } else {
            o = s.best_obj[a];
            if (out->object_size[o] < r[a].size)
                out->object_size[o] = r[a].size;
        }
        out->object[a] = o;
        place(&s, a, o, fresh, n_obj);
    }
    out->n_objects = n_obj;
    pbl__plan_free(al, block, bytes);
    pbl__assignment_objects_to_offsets(out, in->opt.align);
    return PBL_OK;
}

/* greedy_best: greedy_by_size, then greedy_by_breadth, then greedy_in_order; a later one
 * replaces the kept result only when its arena is strictly smaller (TFLite's BestGreedy
 * tries the first two in that order, same rule). A strategy that fails is skipped; out of
 * memory is returned. Complexity: the sum of the three. */
pbl_status pbl__plan_greedy_best(const pbl__plan_in *in, pbl_assignment *out)
{
    pbl__strategy_fn members[] = { pbl__plan_greedy_by_size, pbl__plan_greedy_by_breadth, pbl__plan_greedy_in_order };
    pbl_assignment best = { 0 };
    int have = 0;
    pbl_status last_error = PBL_ERR_INVALID_ARG;
    for (size_t k = 0; k < sizeof members / sizeof members[0]; k++) {
        pbl_assignment a = { 0 };
        pbl_status st = members[k](in, &a);
        if (st == PBL_ERR_NOMEM) {
            pbl_assignment_free(&best);
            return st;
        }
        if (st != PBL_OK) {
            last_error = st;
            continue;
        }
        if (!have || a.arena < best.arena) {
            pbl_assignment_free(&best);
            best = a;
            have = 1;
        } else {
            pbl_assignment_free(&a);
        }
    }
    if (!have)
        return last_error;
    *out = best;
    return PBL_OK;
}
