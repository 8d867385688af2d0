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
 * depends on the order things happened in, and this implementation replays it exactly.
 *
 * TFLite's version is O(n^2) time (a scan for the next record and a pass over all records per
 * assignment) and keeps an n x objects distance matrix. Here:
 *   - positional maximums: insert the records largest first into a range-add/max segment
 *     tree over the time segments; after each insertion the most records live at once, c,
 *     means pm[0..c) are at least this size.
 *   - the records a new member of object o can improve are contiguous in the order of
 *     `first`: those starting in o's gap after it and ending before o's next record (their
 *     gap to it is first - its last), and those starting in o's gap before it and ending by
 *     its first (gap: its first - their last). A segment tree over that order takes the
 *     update as a lazy tag "distance = min(distance, first - c)" (or "c' - last"), which
 *     composes (the larger c wins; the earlier tag on a tie, as TFLite keeps the first object
 *     to reach a distance). The records in the range that end too late (they overlap o's
 *     next record, or the new member) are skipped by splitting the range around them.
 *   - each node keeps, among the records of the current position, the one to take next, and
 *     the ones with the smallest first and the largest last: after a tag the next one is one
 *     of those three, so selection is the root's answer.
 *   - recomputations visit the unassigned records overlapping the new member that fit in
 *     the gap it went into (a segment tree over the records by `last` holding the smallest
 *     unassigned first). A record's best over all objects is the free gap holding it with
 *     the nearest end: two more segment trees hold each assigned record's following gap's
 *     end (by last) and preceding gap's start (by first), so it is two descents, and the
 *     ties (the lowest object id wins) are the other gaps ending or starting at that step.
 *     A treap per object, keyed by first, finds a new member's neighbours.
 *
 * When most records overlap many others (the overlapping pairs K exceed n^2 / 16, as in
 * training graphs), the K log n above loses to TFLite's own plain pass over the unassigned
 * records per step; that pass is used then, over packed records, with the gap trees for the
 * recomputations and the observation that a joining member can only improve the records in
 * the gap it went into (elsewhere one of its object's records is nearer).
 *
 * Complexity: O((n + K) log n) time, K the pairs of overlapping records (n·w for w records
 * live at once), plus the ties; O(n^2) when K > n^2 / 16; O(n) memory.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph/planner/plan_internal.h"
#include "graph/planner/index/mintree.h"
#include "graph/planner/sort.h"
#include "graph/planner/index/treap.h"

#define FAR INT64_MAX /* an infinite distance */

/* Records overlapping more than n / PBL__DENSE others on average: run the plain loop. */
#define PBL__DENSE 16

/* ---- per object, a treap of its records keyed by first ---------------------------------- */

typedef struct node {
    int64_t first, last;
    int32_t left, right;
} node; /* one cache line per level of a descent */

typedef struct treap {
    node    *v;    /* per record */
    int32_t *root; /* per object */
} treap;

static int32_t merge(treap *t, int32_t a, int32_t b)
{
    if (a < 0)
        return b;
    if (b < 0)
        return a;
    if (pbl__treap_prio(a) > pbl__treap_prio(b)) {
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

/* ---- the records' best distances: a lazy segment tree over the records by first ---------- */

/* A pending improvement: distance = min(distance, first - r_at) from object r_obj (made at
 * step r_step), and = min(distance, l_at - last) from l_obj (step l_step); step -1: none. */
typedef struct tag {
    int64_t r_at, l_at;
    int32_t r_obj, r_step, l_obj, l_step;
} tag;

static const tag no_tag = { 0, 0, -1, -1, -1, -1 };

typedef struct state {
    const pbl_usage_record *r;
    int32_t  n, leaves, depth; /* leaves = 2^depth */
    int32_t *position; /* per record */
    int64_t *best;     /* per record: best distance (FAR: none), current below pending tags */
    int32_t *best_obj; /* per record */
    int32_t *obj;      /* per record: its object, -1 while unassigned */
    uint8_t *active;   /* per record: unassigned and of the position being served */
    int32_t *fpos, *lpos;    /* per record: position in the first / last order */
    int32_t *at_f, *at_l;    /* per position: the record */
    int64_t *firsts, *lasts; /* sorted */
    /* per node of the lazy tree (leaf leaves + p is position p of the first order) */
    int32_t *next;     /* the active record to take next below the node, or -1 */
    int64_t *next_d;   /* its distance */
    int32_t *early;    /* the active record with the smallest (first, -size, index) */
    int32_t *late;     /* the active record with the largest last, then (-size, index) */
    tag     *pending;  /* applied to the node, not yet to its children */
    pbl__mintree live;       /* by last: first of unassigned records (FAR: assigned) */
    pbl__mintree gap_after;  /* by last: -(end of the free gap after each assigned record) */
    pbl__mintree gap_before; /* by first: start of the free gap before each assigned record */
    treap    placed;
    int32_t *found, *cut, *ties; /* scratch, [n] each */
} state;

/* (d_a, -size_a, a) < (d_b, -size_b, b): record a is taken before record b. */
static int takes_first(const state *s, int32_t a, int64_t d_a, int32_t b, int64_t d_b)
{
    if (b < 0)
        return a >= 0;
    if (a < 0)
        return 0;
    if (d_a != d_b)
        return d_a < d_b;
    if (s->r[a].size != s->r[b].size)
        return s->r[a].size > s->r[b].size;
    return a < b;
}

/* Applies t to record i's own best, as the sequence of updates it stands for would: only a
 * strictly smaller distance moves the best, and of two equal ones the earlier. */
static void improve(state *s, int32_t i, const tag *t)
{
    int64_t d = FAR;
    int32_t o = -1, step = -1;
    if (t->r_step >= 0) {
        d = s->r[i].first - t->r_at;
        o = t->r_obj;
        step = t->r_step;
    }
    if (t->l_step >= 0) {
        int64_t dl = t->l_at - s->r[i].last;
        if (o < 0 || dl < d || (dl == d && t->l_step < step)) {
            d = dl;
            o = t->l_obj;
        }
    }
    if (o >= 0 && d < s->best[i]) {
        s->best[i] = d;
        s->best_obj[i] = o;
    }
}

static void leaf_sync(state *s, int32_t v)
{
    int32_t p = v - s->leaves, i = p < s->n ? s->at_f[p] : -1;
    int on = i >= 0 && s->active[i];
    s->next[v] = s->early[v] = s->late[v] = on ? i : -1;
    s->next_d[v] = on ? s->best[i] : FAR;
}

/* Applies t to node v: its records' distances and, for an inner node, its pending tag. */
static void apply(state *s, int32_t v, const tag *t)
{
    if (v >= s->leaves) {
        int32_t p = v - s->leaves;
        if (p < s->n) {
            improve(s, s->at_f[p], t);
            leaf_sync(s, v);
        }
        return;
    }
    /* the next record is the old next (its distance lowered by t), or the earliest starting
     * one at its distance from t's right part, or the latest ending one at its distance from
     * t's left part — whichever comes first */
    int32_t x = s->next[v];
    if (x >= 0) {
        int64_t d = s->next_d[v];
        if (t->r_step >= 0 && s->r[x].first - t->r_at < d)
            d = s->r[x].first - t->r_at;
        if (t->l_step >= 0 && t->l_at - s->r[x].last < d)
            d = t->l_at - s->r[x].last;
        if (t->r_step >= 0) {
            int32_t y = s->early[v];
            int64_t dy = s->r[y].first - t->r_at;
            if (takes_first(s, y, dy, x, d)) {
                x = y;
                d = dy;
            }
        }
        if (t->l_step >= 0) {
            int32_t z = s->late[v];
            int64_t dz = t->l_at - s->r[z].last;
            if (takes_first(s, z, dz, x, d)) {
                x = z;
                d = dz;
            }
        }
        s->next[v] = x;
        s->next_d[v] = d;
    }
    tag *q = &s->pending[v];
    if (t->r_step >= 0 && (q->r_step < 0 || t->r_at > q->r_at)) {
        q->r_at = t->r_at;
        q->r_obj = t->r_obj;
        q->r_step = t->r_step;
    }
    if (t->l_step >= 0 && (q->l_step < 0 || t->l_at < q->l_at)) {
        q->l_at = t->l_at;
        q->l_obj = t->l_obj;
        q->l_step = t->l_step;
    }
}

static void push(state *s, int32_t v)
{
    tag *q = &s->pending[v];
    if (q->r_step < 0 && q->l_step < 0)
        return;
    tag t = *q;
    *q = no_tag;
    apply(s, 2 * v, &t);
    apply(s, 2 * v + 1, &t);
}

static void pull(state *s, int32_t v)
{
    int32_t a = s->next[2 * v], b = s->next[2 * v + 1];
    int take_b = takes_first(s, b, s->next_d[2 * v + 1], a, s->next_d[2 * v]);
    s->next[v] = take_b ? b : a;
    s->next_d[v] = take_b ? s->next_d[2 * v + 1] : s->next_d[2 * v];
    a = s->early[2 * v];
    b = s->early[2 * v + 1];
    s->early[v] = b >= 0 && (a < 0 || takes_first(s, b, s->r[b].first, a, s->r[a].first)) ? b : a;
    a = s->late[2 * v];
    b = s->late[2 * v + 1];
    s->late[v] = b >= 0 && (a < 0 || takes_first(s, b, -s->r[b].last, a, -s->r[a].last)) ? b : a;
}

/* Brings record i's best up to date: pushes the tags above its leaf down. */
static void settle(state *s, int32_t i)
{
    int32_t leaf = s->leaves + s->fpos[i];
    for (int32_t k = s->depth; k >= 1; k--)
        push(s, leaf >> k);
}

/* After record i's best or activity changed (settled first): the nodes above it. */
static void resync(state *s, int32_t i)
{
    int32_t v = s->leaves + s->fpos[i];
    leaf_sync(s, v);
    for (v /= 2; v >= 1; v /= 2)
        pull(s, v);
}

/* Tags the records at positions [lo, hi) of the first order under node v = [nlo, nhi). */
static void update(state *s, int32_t v, int32_t nlo, int32_t nhi, int32_t lo, int32_t hi, const tag *t)
{
    if (hi <= nlo || nhi <= lo)
        return;
    if (lo <= nlo && nhi <= hi) {
        apply(s, v, t);
        return;
    }
    push(s, v);
    int32_t mid = nlo + (nhi - nlo) / 2;
    update(s, 2 * v, nlo, mid, lo, hi, t);
    update(s, 2 * v + 1, mid, nhi, lo, hi, t);
    pull(s, v);
}

/* Tags positions [lo, hi) except the n_cut positions in cut[] (sorted). */
static void update_around(state *s, int32_t lo, int32_t hi, const int32_t *cut, int32_t n_cut, const tag *t)
{
    for (int32_t k = 0; k <= n_cut && lo < hi; k++) {
        int32_t end = k < n_cut ? cut[k] : hi;
        if (end > hi)
            end = hi;
        if (lo < end)
            update(s, 1, 0, s->leaves, lo, end, t);
        if (end + 1 > lo)
            lo = end + 1;
    }
}

/* Positional maximums pm[] (returns their count) and each record's position. */
static int32_t positions(state *s, int64_t *pts, pbl__key2 *by_size, int64_t *add, int64_t *top, int64_t *pm)
{
    const pbl_usage_record *r = s->r;
    int32_t n = s->n;
    for (int32_t i = 0; i < n; i++)
        by_size[i] = (pbl__key2){ -r[i].size, i };
    qsort(by_size, (size_t)n, sizeof *by_size, pbl__key2_cmp);
    int32_t m = pbl__distinct_times(r, n, pts);
    int32_t leaves = 1;
    while (leaves < m - 1)
        leaves *= 2;
    memset(add, 0, 2 * (size_t)leaves * sizeof *add);
    memset(top, 0, 2 * (size_t)leaves * sizeof *top);

    int32_t n_pm = 0;
    for (int32_t k = 0; k < n; k++) {
        int32_t i = by_size[k].idx;
        /* +1 on the segments [lo, hi), bottom-up; top[v] = add[v] + max(top of children) */
        int32_t lo = pbl__search_i64(pts, m, r[i].first, 0) + leaves;
        int32_t hi = pbl__search_i64(pts, m, r[i].last, 0) + leaves;
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

/* Record i's best over all objects, as TFLite's RecalcBestDist: the smallest distance, the
 * lowest object id among equals. Object o is compatible with i when i fits in one of o's free
 * gaps (between two of its records, or before its first, or after its last), and then the
 * distance is to that gap's nearer end. So the best is the gap holding i with the largest
 * start (the gap after an assigned record ending by i.first that ends at or after i.last),
 * or the one with the smallest end, found by descents of the two gap trees; ties are the
 * other gaps starting (or ending) at the same step. */
static void recompute(state *s, int32_t i)
{
    const pbl_usage_record *r = s->r;
    int32_t n = s->n, n_found = 0;
    int64_t first = r[i].first, last = r[i].last, d_before = FAR, d_after = FAR;
    int32_t to = pbl__search_i64(s->lasts, n, first, 1), from = pbl__search_i64(s->firsts, n, last, 0);
    int32_t p = pbl__mintree_last(&s->gap_after, 1, 0, s->leaves, to, -last + 1);  /* gap end >= last */
    int32_t q = pbl__mintree_first(&s->gap_before, 1, 0, s->leaves, from, first + 1); /* gap start <= first */
    if (p >= 0)
        d_before = first - s->lasts[p];
    if (q >= 0)
        d_after = s->firsts[q] - last;
    int64_t d = d_before < d_after ? d_before : d_after;
    s->best[i] = d;
    if (d == FAR)
        return; /* TFLite leaves the best object as it was */
    if (d_before == d)
        pbl__mintree_collect(&s->gap_after, 1, 0, s->leaves, pbl__search_i64(s->lasts, n, s->lasts[p], 0), to,
                             -last + 1, s->ties, &n_found);
    int32_t n_before = n_found;
    if (d_after == d)
        pbl__mintree_collect(&s->gap_before, 1, 0, s->leaves, from, pbl__search_i64(s->firsts, n, s->firsts[q], 1),
                             first + 1, s->ties, &n_found);
    int32_t best_obj = INT32_MAX;
    for (int32_t k = 0; k < n_found; k++) {
        int32_t j = k < n_before ? s->at_l[s->ties[k]] : s->at_f[s->ties[k]];
        if (s->obj[j] < best_obj)
            best_obj = s->obj[j];
    }
    s->best_obj[i] = best_obj;
}

/* Record a joins object o: o's free gap [prev.last, next.first) around it becomes
 * [prev.last, a.first) and [a.last, next.first) (prev, next: o's neighbours of a, or -1). */
static void split_gap(state *s, int32_t a, int32_t o, int fresh, int32_t *prev, int32_t *next)
{
    int64_t first = s->r[a].first, last = s->r[a].last;
    int32_t dummy;
    s->obj[a] = o;
    treap_insert(&s->placed, o, a);
    *prev = *next = -1;
    if (!fresh) {
        neighbours(&s->placed, o, first, prev, &dummy);
        neighbours(&s->placed, o, last, &dummy, next);
    }
    pbl__mintree_set(&s->gap_after, s->lpos[a], *next >= 0 ? -s->r[*next].first : -INT64_MAX);
    pbl__mintree_set(&s->gap_before, s->fpos[a], *prev >= 0 ? s->r[*prev].last : INT64_MIN);
    if (*prev >= 0)
        pbl__mintree_set(&s->gap_after, s->lpos[*prev], -first);
    if (*next >= 0)
        pbl__mintree_set(&s->gap_before, s->fpos[*next], last);
}

/* Record a joins object o (fresh: a new one) at this step; the others' bests follow. */
static void place(state *s, int32_t a, int32_t o, int fresh, int32_t step)
{
    const pbl_usage_record *r = s->r;
    int32_t n = s->n, n_found = 0, n_cut = 0;
    int64_t first = r[a].first, last = r[a].last;
    settle(s, a);
    s->obj[a] = o;
    s->active[a] = 0;
    resync(s, a);
    pbl__mintree_set(&s->live, s->lpos[a], FAR);

    int32_t prev, next;
    split_gap(s, a, o, fresh, &prev, &next);
    int64_t gap_from = prev >= 0 ? r[prev].last : INT64_MIN;
    int64_t gap_to = next >= 0 ? r[next].first : INT64_MAX;

    /* the unassigned records overlapping a (last > a.first, first < a.last); those that had o
     * as their best look again — they fit in the gap a went into, or o was never possible */
    pbl__mintree_collect(&s->live, 1, 0, s->leaves, pbl__search_i64(s->lasts, n, first, 1), n, last, s->found,
                         &n_found);
    if (!fresh) {
        for (int32_t k = 0; k < n_found; k++) {
            int32_t i = s->at_l[s->found[k]];
            if (r[i].first < gap_from || r[i].last > gap_to)
                continue;
            settle(s, i);
            if (s->best[i] != FAR && s->best_obj[i] == o) {
                recompute(s, i);
                resync(s, i);
            }
        }
    }

    /* before a: first in [gap_from, a.first), skipping those overlapping a */
    for (int32_t k = 0; k < n_found; k++) {
        int32_t i = s->at_l[s->found[k]];
        if (r[i].first < first && r[i].first >= gap_from)
            s->cut[n_cut++] = s->fpos[i];
    }
    qsort(s->cut, (size_t)n_cut, sizeof *s->cut, pbl__i32_cmp);
    tag t = { .r_at = 0, .r_obj = -1, .r_step = -1, .l_at = first, .l_obj = o, .l_step = step };
    update_around(s, prev >= 0 ? pbl__search_i64(s->firsts, n, gap_from, 0) : 0,
                  pbl__search_i64(s->firsts, n, first, 0), s->cut, n_cut, &t);

    /* after a: first in [a.last, gap_to), skipping those overlapping o's next record */
    n_cut = 0;
    if (next >= 0) {
        n_found = 0;
        pbl__mintree_collect(&s->live, 1, 0, s->leaves, pbl__search_i64(s->lasts, n, gap_to, 1), n, gap_to, s->found,
                             &n_found);
        for (int32_t k = 0; k < n_found; k++) {
            int32_t i = s->at_l[s->found[k]];
            if (r[i].first >= last)
                s->cut[n_cut++] = s->fpos[i];
        }
        qsort(s->cut, (size_t)n_cut, sizeof *s->cut, pbl__i32_cmp);
    }
    t = (tag){ .r_at = last, .r_obj = o, .r_step = step, .l_at = 0, .l_obj = -1, .l_step = -1 };
    update_around(s, pbl__search_i64(s->firsts, n, last, 0), next >= 0 ? pbl__search_i64(s->firsts, n, gap_to, 0) : n,
                  s->cut, n_cut, &t);
}

/* TFLite's loop with the lazy tree: O((n + K) log n). */
static int32_t run_sparse(state *s, const pbl__key2 *by_pos, pbl_assignment *out, const pbl__plan_in *in)
{
    const pbl_usage_record *r = s->r;
    int32_t n = s->n, n_obj = 0, served = 0; /* by_pos[0, served): records whose position has come */
    for (int32_t step = 0; step < n; step++) {
        if ((step & 63) == 0 && pbl__plan_expired(in))
            return -1;
        while (s->next[1] < 0 && served < n) { /* the next position's records become candidates */
            int32_t p = s->position[by_pos[served].idx];
            for (; served < n && s->position[by_pos[served].idx] == p; served++) {
                int32_t i = by_pos[served].idx;
                settle(s, i);
                s->active[i] = 1;
                resync(s, i);
            }
        }
        int32_t a = s->next[1], o;
        settle(s, a);
        int fresh = s->best[a] == FAR;
        if (fresh) {
            o = n_obj++;
            out->object_size[o] = r[a].size;
        } else {
            o = s->best_obj[a];
            if (out->object_size[o] < r[a].size)
                out->object_size[o] = r[a].size;
        }
        out->object[a] = o;
        place(s, a, o, fresh, step);
    }
    return n_obj;
}

/* An unassigned record as run_dense keeps it: packed, so a pass streams through memory. */
typedef struct open_rec {
    int64_t first, last, best;
    int32_t best_obj, idx, position;
} open_rec;

/* Whether open record x is taken before open record y (-1: none). */
static int open_first(const state *s, const open_rec *x, const open_rec *y)
{
    return !y || takes_first(s, x->idx, x->best, y->idx, y->best);
}

/* The open record to take next: of the smallest position, by (best, -size, index). */
static int32_t open_next(const state *s, const open_rec *open, int32_t n_open)
{
    int32_t p = INT32_MAX, pick = -1;
    for (int32_t k = 0; k < n_open; k++)
        if (open[k].position < p)
            p = open[k].position;
    for (int32_t k = 0; k < n_open; k++)
        if (open[k].position == p && open_first(s, &open[k], pick >= 0 ? &open[pick] : NULL))
            pick = k;
    return pick;
}

/* TFLite's loop as it reads, a pass over the unassigned records per step, with two shortcuts:
 * a record's distance to a joining object's existing one can only improve if it lies in the
 * gap the new member went into (elsewhere one of o's records is closer), and recomputations
 * use the gap trees. The pass also finds the next record. O(n^2) with a small constant:
 * faster than the lazy tree when most records overlap many others. */
static int32_t run_dense(state *s, open_rec *open, pbl_assignment *out, const pbl__plan_in *in)
{
    const pbl_usage_record *r = s->r;
    int32_t n = s->n, n_obj = 0, n_open = n;
    for (int32_t i = 0; i < n; i++)
        open[i] = (open_rec){ r[i].first, r[i].last, FAR, -1, i, s->position[i] };
    int32_t pick = open_next(s, open, n_open);
    for (int32_t step = 0; step < n; step++) {
        if ((step & 63) == 0 && pbl__plan_expired(in))
            return -1;
        open_rec ar = open[pick];
        open[pick] = open[--n_open];
        int32_t a = ar.idx, o, prev, next;
        int fresh = ar.best == FAR;
        if (fresh) {
            o = n_obj++;
            out->object_size[o] = r[a].size;
        } else {
            o = ar.best_obj;
            if (out->object_size[o] < r[a].size)
                out->object_size[o] = r[a].size;
        }
        out->object[a] = o;
        split_gap(s, a, o, fresh, &prev, &next);
        int64_t first = ar.first, last = ar.last;
        int64_t gap_from = prev >= 0 ? r[prev].last : INT64_MIN, gap_to = next >= 0 ? r[next].first : INT64_MAX;
        pick = -1;
        for (int32_t k = 0; k < n_open; k++) {
            open_rec *q = &open[k];
            if (q->first < last && first < q->last) { /* overlaps a */
                if (!fresh && q->best != FAR && q->best_obj == o) {
                    s->best_obj[q->idx] = q->best_obj;
                    recompute(s, q->idx);
                    q->best = s->best[q->idx];
                    q->best_obj = s->best_obj[q->idx];
                }
            } else if (fresh || (q->first >= gap_from && q->last <= gap_to)) {
                int64_t d = q->last <= first ? first - q->last : q->first - last;
                if (d < q->best) {
                    q->best = d;
                    q->best_obj = o;
                }
            }
            if (q->position == ar.position && open_first(s, q, pick >= 0 ? &open[pick] : NULL))
                pick = k;
        }
        if (pick < 0 && n_open > 0) /* this position is done: the next one's first record */
            pick = open_next(s, open, n_open);
    }
    return n_obj;
}

pbl_status pbl__plan_greedy_by_size(const pbl__plan_in *in, pbl_assignment *out)
{
    const pbl_allocator *al = in->opt.allocator;
    const pbl_usage_record *r = in->r;
    int32_t n = in->n;
    state s = { .r = r, .n = n, .leaves = 1 };
    while (s.leaves < 2 * n) { /* also covers the time segments (< 2n) of positions() */
        s.leaves *= 2;
        s.depth++;
    }
    size_t nn = (size_t)n, nodes = 2 * (size_t)s.leaves;
    size_t bytes = nodes * (5 * sizeof(int64_t) + sizeof(tag) + 3 * sizeof(int32_t)) +
                   nn * (2 * sizeof(pbl__key2) + sizeof(node) + 4 * sizeof(int64_t) + 11 * sizeof(int32_t) + 1);
    char *block = pbl__plan_alloc(al, bytes), *at = block;
    if (!block)
        return PBL_ERR_NOMEM;
    pbl__mintree *trees[] = { &s.live, &s.gap_after, &s.gap_before };
    for (size_t k = 0; k < 3; k++) {
        trees[k]->leaves = s.leaves;
        trees[k]->v = (int64_t *)at;
        at += nodes * sizeof(int64_t);
    }
    int64_t *scratch_a = (int64_t *)at; at += nodes * sizeof(int64_t);
    s.next_d = (int64_t *)at;     at += nodes * sizeof *s.next_d;
    s.pending = (tag *)at;        at += nodes * sizeof *s.pending;
    pbl__key2 *scratch_k = (pbl__key2 *)at; at += nn * sizeof *scratch_k;
    pbl__key2 *by_pos = (pbl__key2 *)at;    at += nn * sizeof *by_pos;
    s.placed.v = (node *)at;      at += nn * sizeof *s.placed.v;
    s.best = (int64_t *)at;       at += nn * sizeof *s.best;
    s.firsts = (int64_t *)at;     at += nn * sizeof *s.firsts;
    s.lasts = (int64_t *)at;      at += nn * sizeof *s.lasts;
    int64_t *pm = (int64_t *)at;  at += nn * sizeof *pm;
    s.next = (int32_t *)at;       at += nodes * sizeof *s.next;
    s.early = (int32_t *)at;      at += nodes * sizeof *s.early;
    s.late = (int32_t *)at;       at += nodes * sizeof *s.late;
    int32_t **ints[] = { &s.position, &s.best_obj, &s.obj, &s.fpos, &s.lpos, &s.at_f, &s.at_l, &s.placed.root,
                         &s.found, &s.cut, &s.ties };
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
        *ints[k] = (int32_t *)at;
        at += nn * sizeof(int32_t);
    }
    s.active = (uint8_t *)at;

    /* positions, with the trees' memory as scratch (2n time points, 2·leaves nodes each) */
    positions(&s, s.live.v, scratch_k, scratch_a, s.next_d, pm);

    const pbl__key2 *by_first = in->by_first, *by_last = in->by_last;
    for (int32_t i = 0; i < n; i++)
        by_pos[i] = (pbl__key2){ s.position[i], i };
    qsort(by_pos, nn, sizeof *by_pos, pbl__key2_cmp);
    for (int32_t p = 0; p < n; p++) {
        s.firsts[p] = by_first[p].k;
        s.at_f[p] = by_first[p].idx;
        s.fpos[by_first[p].idx] = p;
        s.lasts[p] = by_last[p].k;
        s.at_l[p] = by_last[p].idx;
        s.lpos[by_last[p].idx] = p;
    }
    for (size_t v = 0; v < nodes; v++) {
        s.live.v[v] = s.gap_after.v[v] = s.gap_before.v[v] = FAR;
        s.pending[v] = no_tag;
    }
    for (int32_t i = 0; i < n; i++) {
        s.best[i] = FAR;
        s.best_obj[i] = -1;
        s.obj[i] = -1;
        s.active[i] = 0;
        s.placed.root[i] = -1;
        s.placed.v[i] = (node){ r[i].first, r[i].last, -1, -1 };
        s.live.v[s.leaves + s.lpos[i]] = r[i].first;
    }
    for (int32_t v = s.leaves - 1; v >= 1; v--)
        s.live.v[v] = s.live.v[2 * v] < s.live.v[2 * v + 1] ? s.live.v[2 * v] : s.live.v[2 * v + 1];
    for (int32_t v = (int32_t)nodes - 1; v >= s.leaves; v--)
        leaf_sync(&s, v);
    for (int32_t v = s.leaves - 1; v >= 1; v--)
        pull(&s, v);

    /* the overlapping pairs decide between the two ways of running TFLite's loop */
    int64_t pairs = 0;
    for (int32_t i = 0; i < n; i++)
        pairs += pbl__search_i64(s.firsts, n, r[i].last, 0) - pbl__search_i64(s.lasts, n, r[i].first, 1) - 1;
    int32_t n_obj;
    if (pairs > (int64_t)n * n / PBL__DENSE) {
        open_rec *open = pbl__plan_alloc(al, nn * sizeof *open);
        if (!open) {
            pbl__plan_free(al, block, bytes);
            return PBL_ERR_NOMEM;
        }
        n_obj = run_dense(&s, open, out, in);
        pbl__plan_free(al, open, nn * sizeof *open);
    } else {
        n_obj = run_sparse(&s, by_pos, out, in);
    }
    pbl__plan_free(al, block, bytes);
    if (n_obj < 0) /* past `best`'s deadline */
        return PBL_ERR_TIMEOUT;
    out->n_objects = n_obj;
    return PBL_OK;
}

/* greedy_best: greedy_by_size, then greedy_by_breadth, then greedy_in_order; a later one
 * replaces the kept result only when its arena is strictly smaller (TFLite's BestGreedy
 * tries the first two in that order, same rule). A strategy that fails is skipped (one cut
 * off at the deadline too, setting *cut_off); out of memory is returned. Complexity: the sum of the three. */
pbl_status pbl__plan_greedy_best(const pbl__plan_in *in, pbl_assignment *out)
{
    pbl__strategy_fn members[] = { pbl__plan_greedy_by_size, pbl__plan_greedy_by_breadth, pbl__plan_greedy_in_order };
    pbl_assignment best = { 0 };
    pbl_status last_error = PBL_ERR_INVALID_ARG;
    for (size_t k = 0; k < sizeof members / sizeof members[0]; k++) {
        pbl_assignment a = { 0 };
        pbl_status st = pbl__plan_run(in, members[k], PBL__FILLS_OBJECTS, &a);
        if (st == PBL_ERR_NOMEM) {
            pbl_assignment_free(&best);
            return st;
        }
        if (st == PBL_ERR_TIMEOUT) {
            /* past the deadline: the members after it stop at their first check, except
             * greedy_in_order (O(n log n), no check), whose result is then kept */
            if (in->cut_off)
                *in->cut_off = 1;
            last_error = st;
            continue;
        }
        if (st != PBL_OK) {
            last_error = st;
            continue;
        }
        pbl__plan_keep_smaller(&best, &a);
    }
    if (!best.offset)
        return last_error;
    pbl_assignment given = *out; /* the dispatcher's, as large as best's: best takes its place */
    *out = best;
    pbl_assignment_free(&given);
    return PBL_OK;
}
