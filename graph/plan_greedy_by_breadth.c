/*
 * greedy_by_breadth: TFLite GPU delegate's GreedyByBreadthAssignment (tensorflow/lite/
 * delegates/gpu/common/memory_management/greedy_by_breadth_assignment.cc), Pisarchyk & Lee
 * 2020, "Efficient Memory Management for Deep Neural Net Inference" (greedy by breadth for
 * shared objects).
 *
 * A step's breadth is the sum of the sizes of the records live at it. Visit the steps widest
 * first (ties: the earlier step); at each, serve its still unassigned records largest first
 * (ties: record order). A record goes to the existing object that holds no record
 * overlapping it and, of those, the smallest one at least its size, else the largest one
 * below its size (which then grows); among equal sizes the lowest id, as TFLite's scan over
 * the objects in id order. With no such object it opens a new one of its size.
 *
 * Steps between two consecutive record boundaries (firsts and lasts) have the same live
 * records, so only the first step of each such segment is visited: the result is TFLite's,
 * whose later visits of the segment find nothing left to assign. The live unassigned records
 * of a segment come from a segment tree over the segments holding each record at its O(log)
 * canonical nodes; a node's list is emptied when read, since all its records get assigned
 * then. The objects sit in a treap keyed by (size, id) and are tried in preference order,
 * stopping at the first that fits; another treap keyed by (object, first) holds the assigned
 * records, so "does object o hold a record overlapping r" is two neighbour lookups.
 *
 * Complexity: O(n log n + Σ c_i log n) time, c_i the objects tried for record i before one
 * fits — only objects holding a record that overlaps i are passed over, so c_i is at most
 * the records live during i's lifetime; O(n log n) memory for the segment tree's lists.
 * (TFLite's profiles take O(Σ lifetimes) memory and every record scans every object.)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph/plan_internal.h"

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

/* ---- a treap keyed by (k1[v], k2[v]), or (k1[v], v) when k2 is NULL ---------------------- */

typedef struct treap {
    const int64_t *k1, *k2;
    int32_t       *left, *right;
    int32_t        root;
} treap;

static uint32_t prio(int32_t v)
{
    uint32_t x = (uint32_t)v * 2654435761u;
    x ^= x >> 15;
    x *= 2246822519u;
    return x ^ (x >> 13);
}

static int64_t key_b(const treap *t, int32_t v) { return t->k2 ? t->k2[v] : v; }

/* key(v) < (a, b) */
static int key_below(const treap *t, int32_t v, int64_t a, int64_t b)
{
    return t->k1[v] < a || (t->k1[v] == a && key_b(t, v) < b);
}

static int32_t merge(treap *t, int32_t a, int32_t b)
{
    if (a < 0)
        return b;
    if (b < 0)
        return a;
    if (prio(a) > prio(b)) {
        t->right[a] = merge(t, t->right[a], b);
        return a;
    }
    t->left[b] = merge(t, a, t->left[b]);
    return b;
}

static void split(treap *t, int32_t v, int64_t a, int64_t b, int32_t *lo, int32_t *hi)
{
    if (v < 0) {
        *lo = *hi = -1;
    } else if (key_below(t, v, a, b)) {
        split(t, t->right[v], a, b, &t->right[v], hi);
        *lo = v;
    } else {
        split(t, t->left[v], a, b, lo, &t->left[v]);
        *hi = v;
    }
}

static void treap_insert(treap *t, int32_t x)
{
    int32_t lo, hi;
    t->left[x] = t->right[x] = -1;
    split(t, t->root, t->k1[x], key_b(t, x), &lo, &hi);
    t->root = merge(t, merge(t, lo, x), hi);
}

static int32_t erase_at(treap *t, int32_t v, int32_t x)
{
    if (v == x)
        return merge(t, t->left[v], t->right[v]);
    if (key_below(t, x, t->k1[v], key_b(t, v)))
        t->left[v] = erase_at(t, t->left[v], x);
    else
        t->right[v] = erase_at(t, t->right[v], x);
    return v;
}

/* The first node with key >= (a, b), or -1. */
static int32_t treap_at_least(const treap *t, int64_t a, int64_t b)
{
    int32_t v = t->root, found = -1;
    while (v >= 0) {
        if (!key_below(t, v, a, b)) {
            found = v;
            v = t->left[v];
        } else {
            v = t->right[v];
        }
    }
    return found;
}

/* The last node with key < (a, b), or -1. */
static int32_t treap_below(const treap *t, int64_t a, int64_t b)
{
    int32_t v = t->root, found = -1;
    while (v >= 0) {
        if (key_below(t, v, a, b)) {
            found = v;
            v = t->right[v];
        } else {
            v = t->left[v];
        }
    }
    return found;
}

/* ---- the plan ------------------------------------------------------------------------------ */

typedef struct breadth {
    const pbl_usage_record *r;
    treap    objs;      /* objects by (size, id) */
    treap    sched;     /* assigned records by (object, first) */
    int64_t *obj_size;  /* = out->object_size */
    int64_t *rec_obj;   /* per record: its object (int64 for the treap key), -1 before */
    int64_t *first;     /* per record */
} breadth;

/* Whether object o holds a record overlapping record i. */
static int clashes(const breadth *b, int32_t o, int32_t i)
{
    int64_t first = b->r[i].first;
    int32_t after = treap_at_least(&b->sched, o, first);
    if (after >= 0 && b->rec_obj[after] == o && b->r[after].first < b->r[i].last)
        return 1;
    int32_t before = treap_below(&b->sched, o, first);
    return before >= 0 && b->rec_obj[before] == o && b->r[before].last > first;
}

/* The object record i goes to, or -1 for a new one. */
static int32_t choose(const breadth *b, int32_t i)
{
    int64_t need = b->r[i].size;
    /* the smallest that holds it, lowest id first */
    for (int32_t o = treap_at_least(&b->objs, need, INT64_MIN); o >= 0;
         o = treap_at_least(&b->objs, b->obj_size[o], (int64_t)o + 1))
        if (!clashes(b, o, i))
            return o;
    /* else the largest below it; among equal sizes the lowest id */
    int32_t best = -1;
    for (int32_t o = treap_below(&b->objs, need, INT64_MIN); o >= 0; o = treap_below(&b->objs, b->obj_size[o], o)) {
        if (best >= 0 && b->obj_size[o] != b->obj_size[best])
            break;
        if (!clashes(b, o, i))
            best = o;
    }
    return best;
}

/* The index of t in the sorted distinct times pts[0, m). */
static int32_t time_index(const int64_t *pts, int32_t m, int64_t t)
{
    int32_t lo = 0, hi = m;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (pts[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

pbl_status pbl__plan_greedy_by_breadth(const pbl__plan_in *in, pbl_assignment *out)
{
    const pbl_allocator *al = in->opt.allocator;
    const pbl_usage_record *r = in->r;
    int32_t n = in->n;
    pbl_status st = pbl__assignment_init(out, n, 1, al);
    if (st != PBL_OK)
        return st;
    if (n == 0)
        return PBL_OK;

    /* segments between consecutive distinct boundaries: pts[k], pts[k + 1] */
    size_t nn = (size_t)n;
    size_t bytes0 = 2 * nn * sizeof(int64_t);
    int64_t *pts = pbl__plan_alloc(al, bytes0);
    if (!pts) {
        pbl_assignment_free(out);
        return PBL_ERR_NOMEM;
    }
    for (int32_t i = 0; i < n; i++) {
        pts[2 * i] = r[i].first;
        pts[2 * i + 1] = r[i].last;
    }
    qsort(pts, 2 * nn, sizeof *pts, cmp_i64);
    int32_t m = 1;
    for (int32_t k = 1; k < 2 * n; k++)
        if (pts[k] != pts[m - 1])
            pts[m++] = pts[k];
    int32_t n_seg = m - 1, leaves = 1, depth = 1;
    while (leaves < n_seg) {
        leaves *= 2;
        depth++;
    }

    /* each record lies at <= 2·depth canonical nodes */
    size_t nl = (size_t)leaves, ns = (size_t)n_seg, max_lists = nn * 2 * (size_t)depth;
    size_t bytes = ns * (sizeof(int64_t) + sizeof(key2)) + nn * (sizeof(key2) + 2 * sizeof(int64_t) + 6 * sizeof(int32_t)) +
                   (4 * nl + 1) * sizeof(int32_t) + max_lists * sizeof(int32_t);
    char *block = pbl__plan_alloc(al, bytes), *at = block;
    if (!block) {
        pbl__plan_free(al, pts, bytes0);
        pbl_assignment_free(out);
        return PBL_ERR_NOMEM;
    }
    int64_t *width = (int64_t *)at;  at += ns * sizeof *width;
    key2 *steps = (key2 *)at;        at += ns * sizeof *steps;
    key2 *batch = (key2 *)at;        at += nn * sizeof *batch;
    breadth b = { .r = r, .obj_size = out->object_size };
    b.rec_obj = (int64_t *)at;       at += nn * sizeof *b.rec_obj;
    b.first = (int64_t *)at;         at += nn * sizeof *b.first;
    int32_t *seg_lo = (int32_t *)at; at += nn * sizeof *seg_lo;
    int32_t *seg_hi = (int32_t *)at; at += nn * sizeof *seg_hi;
    b.objs.left = (int32_t *)at;     at += nn * sizeof(int32_t);
    b.objs.right = (int32_t *)at;    at += nn * sizeof(int32_t);
    b.sched.left = (int32_t *)at;    at += nn * sizeof(int32_t);
    b.sched.right = (int32_t *)at;   at += nn * sizeof(int32_t);
    int32_t *list_at = (int32_t *)at; at += (2 * nl + 1) * sizeof *list_at; /* node v's list starts */
    int32_t *list_end = (int32_t *)at; at += 2 * nl * sizeof *list_end;     /* and ends */
    int32_t *lists = (int32_t *)at;
    b.objs.k1 = out->object_size;
    b.objs.k2 = NULL;
    b.objs.root = -1;
    b.sched.k1 = b.rec_obj;
    b.sched.k2 = b.first;
    b.sched.root = -1;

    /* breadth per segment (a difference array), and the canonical node lists (CSR) */
    memset(width, 0, ns * sizeof *width);
    memset(list_at, 0, (2 * nl + 1) * sizeof *list_at);
    for (int32_t i = 0; i < n; i++) {
        b.rec_obj[i] = -1;
        b.first[i] = r[i].first;
        seg_lo[i] = time_index(pts, m, r[i].first);
        seg_hi[i] = time_index(pts, m, r[i].last);
        width[seg_lo[i]] += r[i].size;
        if (seg_hi[i] < n_seg)
            width[seg_hi[i]] -= r[i].size;
        for (int32_t lo = seg_lo[i] + leaves, hi = seg_hi[i] + leaves; lo < hi; lo /= 2, hi /= 2) {
            if (lo & 1)
                list_at[1 + lo++]++;
            if (hi & 1)
                list_at[1 + --hi]++;
        }
    }
    for (size_t v = 0; v < 2 * nl; v++) {
        list_at[v + 1] += list_at[v];
        list_end[v] = list_at[v];
    }
    for (int32_t i = 0; i < n; i++) {
        for (int32_t lo = seg_lo[i] + leaves, hi = seg_hi[i] + leaves; lo < hi; lo /= 2, hi /= 2) {
            if (lo & 1)
                lists[list_end[lo++]++] = i;
            if (hi & 1)
                lists[list_end[--hi]++] = i;
        }
    }

    int64_t live = 0;
    int32_t n_steps = 0;
    for (int32_t k = 0; k < n_seg; k++) {
        live += width[k];
        if (live > 0)
            steps[n_steps++] = (key2){ -live, k };
    }
    qsort(steps, (size_t)n_steps, sizeof *steps, cmp_key2);

    int32_t n_obj = 0;
    for (int32_t s = 0; s < n_steps; s++) {
        /* the unassigned records live in segment steps[s].idx: every list on its leaf's path */
        int32_t n_batch = 0;
        for (int32_t v = steps[s].idx + leaves; v >= 1; v /= 2) {
            for (int32_t k = list_at[v]; k < list_end[v]; k++)
                if (b.rec_obj[lists[k]] < 0)
                    batch[n_batch++] = (key2){ -r[lists[k]].size, lists[k] };
            list_end[v] = list_at[v]; /* all of them are assigned below */
        }
        qsort(batch, (size_t)n_batch, sizeof *batch, cmp_key2);
        for (int32_t k = 0; k < n_batch; k++) {
            int32_t i = batch[k].idx, o = choose(&b, i);
            if (o < 0) {
                o = n_obj++;
                out->object_size[o] = r[i].size;
                treap_insert(&b.objs, o);
            } else if (out->object_size[o] < r[i].size) {
                b.objs.root = erase_at(&b.objs, b.objs.root, o);
                out->object_size[o] = r[i].size;
                treap_insert(&b.objs, o);
            }
            out->object[i] = o;
            b.rec_obj[i] = o;
            treap_insert(&b.sched, i);
        }
    }
    out->n_objects = n_obj;
    pbl__plan_free(al, block, bytes);
    pbl__plan_free(al, pts, bytes0);
    pbl__assignment_objects_to_offsets(out, in->opt.align);
    return PBL_OK;
}
