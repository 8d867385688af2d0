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
 * records, so "does object o hold a record overlapping r" is two neighbour lookups. When the
 * first 16 tried all clash (many records live at once), the objects that can take the record
 * are listed instead: those with a free gap holding it, from two segment trees that keep,
 * for each assigned record, where the free gap after it ends (by last) and where the one
 * before it starts (by first); the preferred of them is the answer either way.
 *
 * Complexity: O(n log n + Σ min(c_i, 16 + g_i) log n) time, c_i the objects tried for
 * record i before one fits (those passed over hold a record overlapping i) and g_i the
 * objects that could take it; O(n log n) memory for the segment tree's lists. (TFLite's
 * profiles take O(Σ lifetimes) memory and every record scans every object.)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph/planner/plan_internal.h"
#include "graph/planner/index/mintree.h"
#include "graph/planner/sort.h"
#include "graph/planner/index/treap.h"

/* ---- the plan ------------------------------------------------------------------------------ */

typedef struct breadth {
    const pbl_usage_record *r;
    int32_t  n;
    pbl__treap objs;    /* objects by (size, id) */
    pbl__treap sched;   /* assigned records by (object, first) */
    int64_t *obj_size;  /* = out->object_size */
    int64_t *rec_obj;   /* per record: its object (int64 for the treap key), -1 before */
    int64_t *first;     /* per record */
    int64_t *firsts, *lasts;  /* sorted */
    int32_t *fpos, *lpos;     /* per record: position in the first / last order */
    int32_t *at_f, *at_l;     /* per position: the record */
    pbl__mintree gap_after;  /* by last: -(end of the free gap after each assigned record) */
    pbl__mintree gap_before; /* by first: start of the free gap before each assigned record */
    int32_t *found;      /* scratch, [n] */
} breadth;

/* Whether object o holds a record overlapping record i. */
static int clashes(const breadth *b, int32_t o, int32_t i)
{
    int64_t first = b->r[i].first;
    int32_t after = pbl__treap_at_least(&b->sched, o, first);
    if (after >= 0 && b->rec_obj[after] == o && b->r[after].first < b->r[i].last)
        return 1;
    int32_t before = pbl__treap_below(&b->sched, o, first);
    return before >= 0 && b->rec_obj[before] == o && b->r[before].last > first;
}

/* Whether object x is preferred to object y (-1: none) for a record of size need: the smallest
 * at least need, else the largest; the lowest id among equal sizes. */
static int prefer(const breadth *b, int32_t x, int32_t y, int64_t need)
{
    if (y < 0)
        return 1;
    int64_t sx = b->obj_size[x], sy = b->obj_size[y];
    if ((sx >= need) != (sy >= need))
        return sx >= need;
    if (sx != sy)
        return sx >= need ? sx < sy : sx > sy;
    return x < y;
}

/* The objects that can take record i are those with a free gap holding it: the gap after an
 * assigned record ending by i.first that reaches i.last, or an object's leading gap (before
 * its first record, which starts at or after i.last). */
static int32_t choose_by_gaps(breadth *b, int32_t i)
{
    int64_t first = b->r[i].first, last = b->r[i].last;
    int32_t n = b->n, n_found = 0, best = -1;
    pbl__mintree_collect(&b->gap_after, 1, 0, b->gap_after.leaves, 0, pbl__search_i64(b->lasts, n, first, 1),
                         -last + 1, b->found, &n_found);
    for (int32_t k = 0; k < n_found; k++) {
        int32_t o = (int32_t)b->rec_obj[b->at_l[b->found[k]]];
        if (prefer(b, o, best, b->r[i].size))
            best = o;
    }
    n_found = 0;
    pbl__mintree_collect(&b->gap_before, 1, 0, b->gap_before.leaves, pbl__search_i64(b->firsts, n, last, 0), n,
                         INT64_MIN + 1, b->found, &n_found);
    for (int32_t k = 0; k < n_found; k++) {
        int32_t o = (int32_t)b->rec_obj[b->at_f[b->found[k]]];
        if (prefer(b, o, best, b->r[i].size))
            best = o;
    }
    return best;
}

/* The object record i goes to, or -1 for a new one. The objects are tried in order of
 * preference; when the first few all hold a record overlapping it (many records live at
 * once), the ones that can take it are listed from the gap trees instead. */
static int32_t choose(breadth *b, int32_t i)
{
    int64_t need = b->r[i].size;
    int budget = 16;
    /* the smallest that holds it, lowest id first */
    for (int32_t o = pbl__treap_at_least(&b->objs, need, INT64_MIN); o >= 0;
         o = pbl__treap_at_least(&b->objs, b->obj_size[o], (int64_t)o + 1)) {
        if (budget-- == 0)
            return choose_by_gaps(b, i);
        if (!clashes(b, o, i))
            return o;
    }
    /* else the largest below it; among equal sizes the lowest id */
    int32_t best = -1;
    for (int32_t o = pbl__treap_below(&b->objs, need, INT64_MIN); o >= 0;
         o = pbl__treap_below(&b->objs, b->obj_size[o], o)) {
        if (best >= 0 && b->obj_size[o] != b->obj_size[best])
            break;
        if (budget-- == 0)
            return choose_by_gaps(b, i);
        if (!clashes(b, o, i))
            best = o;
    }
    return best;
}

/* Record i joins object o: it splits o's free gap [prev.last, next.first) in two. */
static void join(breadth *b, int32_t i, int32_t o)
{
    int64_t first = b->r[i].first, last = b->r[i].last;
    int32_t next = pbl__treap_at_least(&b->sched, o, first), prev = pbl__treap_below(&b->sched, o, first);
    if (next >= 0 && b->rec_obj[next] != o)
        next = -1;
    if (prev >= 0 && b->rec_obj[prev] != o)
        prev = -1;
    b->rec_obj[i] = o;
    pbl__treap_insert(&b->sched, i);
    pbl__mintree_set(&b->gap_after, b->lpos[i], next >= 0 ? -b->r[next].first : -INT64_MAX);
    pbl__mintree_set(&b->gap_before, b->fpos[i], prev >= 0 ? b->r[prev].last : INT64_MIN);
    if (prev >= 0)
        pbl__mintree_set(&b->gap_after, b->lpos[prev], -first);
    if (next >= 0)
        pbl__mintree_set(&b->gap_before, b->fpos[next], last);
}

pbl_status pbl__plan_greedy_by_breadth(const pbl__plan_in *in, pbl_assignment *out)
{
    const pbl_allocator *al = in->opt.allocator;
    const pbl_usage_record *r = in->r;
    int32_t n = in->n;
    /* segments between consecutive distinct boundaries: pts[k], pts[k + 1] */
    size_t nn = (size_t)n;
    size_t bytes0 = 2 * nn * sizeof(int64_t);
    int64_t *pts = pbl__plan_alloc(al, bytes0);
    if (!pts)
        return PBL_ERR_NOMEM;
    int32_t m = pbl__distinct_times(r, n, pts);
    int32_t n_seg = m - 1, leaves = 1, depth = 1;
    while (leaves < n_seg) {
        leaves *= 2;
        depth++;
    }

    /* each record lies at <= 2·depth canonical nodes */
    int32_t gap_leaves = 1;
    while (gap_leaves < n)
        gap_leaves *= 2;
    size_t nl = (size_t)leaves, ns = (size_t)n_seg, max_lists = nn * 2 * (size_t)depth, gl = (size_t)gap_leaves;
    size_t bytes = ns * (sizeof(int64_t) + sizeof(pbl__key2)) +
                   nn * (sizeof(pbl__key2) + 4 * sizeof(int64_t) + 11 * sizeof(int32_t)) +
                   4 * gl * sizeof(int64_t) + (4 * nl + 1) * sizeof(int32_t) + max_lists * sizeof(int32_t);
    char *block = pbl__plan_alloc(al, bytes), *at = block;
    if (!block) {
        pbl__plan_free(al, pts, bytes0);
        return PBL_ERR_NOMEM;
    }
    int64_t *width = (int64_t *)at;  at += ns * sizeof *width;
    pbl__key2 *steps = (pbl__key2 *)at; at += ns * sizeof *steps;
    pbl__key2 *batch = (pbl__key2 *)at; at += nn * sizeof *batch;
    breadth b = { .r = r, .n = n, .obj_size = out->object_size };
    b.rec_obj = (int64_t *)at;       at += nn * sizeof *b.rec_obj;
    b.first = (int64_t *)at;         at += nn * sizeof *b.first;
    b.firsts = (int64_t *)at;        at += nn * sizeof *b.firsts;
    b.lasts = (int64_t *)at;         at += nn * sizeof *b.lasts;
    b.gap_after = (pbl__mintree){ gap_leaves, (int64_t *)at };  at += 2 * gl * sizeof(int64_t);
    b.gap_before = (pbl__mintree){ gap_leaves, (int64_t *)at }; at += 2 * gl * sizeof(int64_t);
    int32_t **ints[] = { &b.fpos, &b.lpos, &b.at_f, &b.at_l, &b.found };
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
        *ints[k] = (int32_t *)at;
        at += nn * sizeof(int32_t);
    }
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

    /* the records by first and by last, for the gap trees */
    for (size_t v = 0; v < 2 * gl; v++)
        b.gap_after.v[v] = b.gap_before.v[v] = INT64_MAX;
    for (int32_t p = 0; p < n; p++) {
        b.firsts[p] = in->by_first[p].k;
        b.at_f[p] = in->by_first[p].idx;
        b.fpos[in->by_first[p].idx] = p;
        b.lasts[p] = in->by_last[p].k;
        b.at_l[p] = in->by_last[p].idx;
        b.lpos[in->by_last[p].idx] = p;
    }

    /* breadth per segment (a difference array), and the canonical node lists (CSR) */
    memset(width, 0, ns * sizeof *width);
    memset(list_at, 0, (2 * nl + 1) * sizeof *list_at);
    for (int32_t i = 0; i < n; i++) {
        b.rec_obj[i] = -1;
        b.first[i] = r[i].first;
        seg_lo[i] = pbl__search_i64(pts, m, r[i].first, 0);
        seg_hi[i] = pbl__search_i64(pts, m, r[i].last, 0);
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
            steps[n_steps++] = (pbl__key2){ -live, k };
    }
    qsort(steps, (size_t)n_steps, sizeof *steps, pbl__key2_cmp);

    int32_t n_obj = 0;
    for (int32_t s = 0; s < n_steps; s++) {
        if ((s & 63) == 0 && pbl__plan_expired(in)) {
            n_obj = -1;
            break;
        }
        /* the unassigned records live in segment steps[s].idx: every list on its leaf's path */
        int32_t n_batch = 0;
        for (int32_t v = steps[s].idx + leaves; v >= 1; v /= 2) {
            for (int32_t k = list_at[v]; k < list_end[v]; k++)
                if (b.rec_obj[lists[k]] < 0)
                    batch[n_batch++] = (pbl__key2){ -r[lists[k]].size, lists[k] };
            list_end[v] = list_at[v]; /* all of them are assigned below */
        }
        qsort(batch, (size_t)n_batch, sizeof *batch, pbl__key2_cmp);
        for (int32_t k = 0; k < n_batch; k++) {
            int32_t i = batch[k].idx, o = choose(&b, i);
            if (o < 0) {
                o = n_obj++;
                out->object_size[o] = r[i].size;
                pbl__treap_insert(&b.objs, o);
            } else if (out->object_size[o] < r[i].size) {
                pbl__treap_erase(&b.objs, o);
                out->object_size[o] = r[i].size;
                pbl__treap_insert(&b.objs, o);
            }
            out->object[i] = o;
            join(&b, i, o);
        }
    }
    pbl__plan_free(al, block, bytes);
    pbl__plan_free(al, pts, bytes0);
    if (n_obj < 0) /* past `best`'s deadline */
        return PBL_ERR_TIMEOUT;
    out->n_objects = n_obj;
    return PBL_OK;
}
