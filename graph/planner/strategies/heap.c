/*
 * best_fit_heap: XLA's heap simulator, GlobalDecreasingSizeBestFitHeap
 * (xla/service/heap_simulator/heap_simulator.cc, FindChunkCandidate / CommitChunk), with
 * ChooseBestHeapAlgorithm's "run several orders, keep the smallest heap".
 *
 * Records are placed one at a time, never moved. For the record being placed, take the
 * already placed records whose lifetimes overlap its own, sorted by offset, and walk them
 * upwards: the gaps between them are free space (a gap starts at the previous chunk's end
 * rounded up to the alignment, so every candidate offset is aligned), and so is the space
 * from the highest overlapping chunk's aligned end up to the current heap size. The record
 * goes into the smallest gap that holds it (the lowest such gap on a tie); when none does, it
 * goes at the aligned end of the highest overlapping chunk and the heap grows.
 *
 * Orders tried (the smallest arena wins; a tie keeps the earlier order):
 *   1. decreasing size; ties: earlier start, then record index (XLA's "spatial" order sorts
 *      size ties by longer lifetime first — that is order 3);
 *   2. by start, ties by decreasing size, then index: an allocator's-eye view, which packs
 *      chains of short-lived records tightly;
 *   3. XLA's spatial order: decreasing size, then longer lifetime, then index;
 *   4. XLA's temporal order: longer lifetime, then decreasing size, then index.
 *
 * In start order the placed records that overlap the next one are exactly those still live,
 * kept in an array sorted by offset. In the other orders they are found with a segment tree
 * over the records sorted by start (leaves of 16 positions), holding the largest `last`
 * among placed records under each node, so a query visits only subtrees that hold an
 * overlapping record; the chunks found are then sorted by offset (radix sort for long lists).
 *
 * Complexity per order: O(n log n + Σ k_i log n) time, k_i the placed records overlapping
 * record i in time (at most the records whose lifetimes meet record i's, so O(n² log n)
 * when everything overlaps); the start order is O(n log n + n·w), w the most records live
 * at once. O(n) memory.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph/planner/plan_internal.h"
#include "graph/planner/sort.h"

typedef pbl__span chunk; /* XLA's word: a placed record's bytes */

/* Sorts chunks by offset: introsort (quicksort, median of three, insertion sort below 16,
 * heapsort past 2·log2(n) levels), inlined because qsort's callback dominated the run time. */
static void chunk_sift(chunk *c, int32_t root, int32_t n)
{
    chunk x = c[root];
    for (int32_t child; (child = 2 * root + 1) < n; root = child) {
        if (child + 1 < n && c[child + 1].offset > c[child].offset)
            child++;
        if (c[child].offset <= x.offset)
            break;
        c[root] = c[child];
    }
    c[root] = x;
}

static void chunk_sort_depth(chunk *c, int32_t n, int depth)
{
    while (n > 16) {
        if (depth-- == 0) { /* heapsort */
            for (int32_t i = n / 2 - 1; i >= 0; i--)
                chunk_sift(c, i, n);
            for (int32_t i = n - 1; i > 0; i--) {
                chunk t = c[0];
                c[0] = c[i];
                c[i] = t;
                chunk_sift(c, 0, i);
            }
            return;
        }
        /* median of three to c[0], then Hoare partition around its offset */
        int32_t mid = n / 2;
        chunk t;
#define CHUNK_SWAP(a, b) (t = c[a], c[a] = c[b], c[b] = t)
        if (c[mid].offset < c[0].offset)
            CHUNK_SWAP(mid, 0);
        if (c[n - 1].offset < c[0].offset)
            CHUNK_SWAP(n - 1, 0);
        if (c[n - 1].offset < c[mid].offset)
            CHUNK_SWAP(n - 1, mid);
        CHUNK_SWAP(0, mid);
        int64_t pivot = c[0].offset;
        int32_t i = 0, j = n;
        for (;;) {
            do
                i++;
            while (i < n && c[i].offset < pivot);
            do
                j--;
            while (c[j].offset > pivot);
            if (i >= j)
                break;
            CHUNK_SWAP(i, j);
        }
        CHUNK_SWAP(0, j);
#undef CHUNK_SWAP
        /* recurse into the smaller side, loop on the larger */
        if (j < n - j - 1) {
            chunk_sort_depth(c, j, depth);
            c += j + 1;
            n -= j + 1;
        } else {
            chunk_sort_depth(c + j + 1, n - j - 1, depth);
            n = j;
        }
    }
    pbl__span_insertion_sort(c, n);
}

static void chunk_sort(chunk *c, chunk *tmp, int32_t n, int64_t top)
{
    if (n >= 256) {
        pbl__span_radix_sort(c, tmp, n, (uint64_t)top); /* top: the heap size bounds every offset */
        return;
    }
    int depth = 0;
    for (int32_t m = n; m > 1; m /= 2)
        depth += 2;
    chunk_sort_depth(c, n, depth);
}

#define BLOCK 16

typedef struct placed {
    int64_t last, offset, end;
} placed; /* start-order positions under one segment-tree leaf, scanned linearly */

typedef struct heap {
    const pbl_usage_record *r;
    int32_t  n;
    int32_t  leaves;     /* power of two >= n / BLOCK */
    int64_t *first;      /* [n] per position of the start order: the start, ascending */
    placed  *at;         /* [n] per position: where it was placed (last -1 until then) */
    int32_t *at_pos;     /* [n] the record at each position */
    int64_t *maxlast;    /* [2·leaves] per node: the largest `last` placed below */
    int64_t *offset;     /* [n] per record, once placed */
    chunk   *found;      /* [n] the current query's chunks; the live set in the start pass */
    chunk   *sort_tmp;   /* [n] the radix sort's other buffer */
    int64_t *found_last; /* [n] the start pass: `last` of each live chunk */
    int32_t  n_found;
} heap;

/* Collects the placed records at positions [0, end) with last > t under node v, which
 * covers leaves [lo, hi). */
static void collect(heap *h, int32_t v, int32_t lo, int32_t hi, int32_t end, int64_t t)
{
    if ((int64_t)lo * BLOCK >= end || h->maxlast[v] <= t)
        return;
    if (hi - lo == 1) {
        int32_t p1 = (lo + 1) * BLOCK < end ? (lo + 1) * BLOCK : end;
        for (int32_t p = lo * BLOCK; p < p1; p++)
            if (h->at[p].last > t)
                h->found[h->n_found++] = (chunk){ h->at[p].offset, h->at[p].end };
        return;
    }
    int32_t mid = lo + (hi - lo) / 2;
    collect(h, 2 * v, lo, mid, end, t);
    collect(h, 2 * v + 1, mid, hi, end, t);
}

static void mark_placed(heap *h, int32_t p, int64_t offset)
{
    const pbl_usage_record *rp = &h->r[h->at_pos[p]];
    h->at[p] = (placed){ rp->last, offset, offset + rp->size };
    for (int32_t v = h->leaves + p / BLOCK; v >= 1; v /= 2) {
        if (h->maxlast[v] >= rp->last)
            break;
        h->maxlast[v] = rp->last;
    }
}

/* The offset for a record of `size` bytes among the chunks live with it, sorted by offset:
 * the smallest gap that holds it, else the aligned end of the highest chunk. */
static int64_t best_fit(const chunk *c, int32_t n_c, int64_t size, int64_t heap_size, int64_t align)
{
    int64_t at = 0, best_at = -1, best_gap = INT64_MAX;
    for (int32_t k = 0; k < n_c; k++) {
        if (at < c[k].offset) {
            int64_t gap = c[k].offset - at;
            if (gap >= size && gap < best_gap) {
                best_gap = gap;
                best_at = at;
            }
        }
        int64_t end = pbl__align_up(c[k].end, align);
        if (end > at)
            at = end;
    }
    int64_t top = heap_size - at; /* the space above the highest chunk, up to the heap's top */
    if (top >= size && top < best_gap)
        best_at = at;
    return best_at >= 0 ? best_at : at; /* else grow the heap */
}

/* Places the records in any order: the overlapping placed records come from the segment
 * tree. Returns the heap size. */
static int64_t place_by_tree(heap *h, const pbl__key4 *order, int64_t align, const pbl__plan_in *in)
{
    for (int32_t v = 0; v < 2 * h->leaves; v++)
        h->maxlast[v] = -1;
    for (int32_t p = 0; p < h->n; p++)
        h->at[p].last = -1;
    int64_t heap_size = 0;
    for (int32_t o = 0; o < h->n; o++) {
        if ((o & 63) == 0 && pbl__plan_expired(in))
            return -1;
        int32_t p = order[o].idx, i = h->at_pos[p];
        const pbl_usage_record *ri = &h->r[i];
        /* positions whose start is before this record's end */
        int32_t lo = p + 1, hi = h->n;
        while (lo < hi) {
            int32_t mid = lo + (hi - lo) / 2;
            if (h->first[mid] < ri->last)
                lo = mid + 1;
            else
                hi = mid;
        }
        h->n_found = 0;
        collect(h, 1, 0, h->leaves, lo, ri->first);
        chunk_sort(h->found, h->sort_tmp, h->n_found, heap_size);
        int64_t at = best_fit(h->found, h->n_found, ri->size, heap_size, align);
        h->offset[i] = at;
        if (at + ri->size > heap_size)
            heap_size = at + ri->size;
        mark_placed(h, p, at);
    }
    return heap_size;
}

/* Places the records in start order (ties: larger first, then index): the placed records
 * that overlap the next one are exactly those still live, kept sorted by offset, so no tree
 * and no sort is needed. Returns the heap size. */
static int64_t place_by_start(heap *h, const pbl__key4 *order, int64_t align, const pbl__plan_in *in)
{
    int64_t heap_size = 0;
    int32_t n_live = 0;
    chunk *live = h->found;
    for (int32_t o = 0; o < h->n; o++) {
        if ((o & 63) == 0 && pbl__plan_expired(in))
            return -1;
        int32_t i = h->at_pos[order[o].idx];
        const pbl_usage_record *ri = &h->r[i];
        int32_t kept = 0;
        for (int32_t k = 0; k < n_live; k++)
            if (h->found_last[k] > ri->first) {
                live[kept] = live[k];
                h->found_last[kept++] = h->found_last[k];
            }
        n_live = kept;
        int64_t at = best_fit(live, n_live, ri->size, heap_size, align);
        h->offset[i] = at;
        if (at + ri->size > heap_size)
            heap_size = at + ri->size;
        /* insert, keeping the offset order */
        int32_t lo = 0, hi = n_live;
        while (lo < hi) {
            int32_t mid = lo + (hi - lo) / 2;
            if (live[mid].offset < at)
                lo = mid + 1;
            else
                hi = mid;
        }
        memmove(&live[lo + 1], &live[lo], (size_t)(n_live - lo) * sizeof *live);
        memmove(&h->found_last[lo + 1], &h->found_last[lo], (size_t)(n_live - lo) * sizeof *h->found_last);
        live[lo] = (chunk){ at, at + ri->size };
        h->found_last[lo] = ri->last;
        n_live++;
    }
    return heap_size;
}

enum { N_ORDERS = 4, ORDER_START = 1 };

/* Sort keys for order `which` (see the header comment), as positions of the start order. */
static void make_order(const heap *h, int which, pbl__key4 *key)
{
    for (int32_t p = 0; p < h->n; p++) {
        int32_t i = h->at_pos[p];
        int64_t size = h->r[i].size, first = h->r[i].first, len = h->r[i].last - h->r[i].first;
        switch (which) {
        case 0: key[p] = (pbl__key4){ -size, first, i, p }; break;
        case ORDER_START: key[p] = (pbl__key4){ first, -size, i, p }; break;
        case 2: key[p] = (pbl__key4){ -size, -len, i, p }; break;
        default: key[p] = (pbl__key4){ -len, -size, i, p }; break;
        }
    }
    qsort(key, (size_t)h->n, sizeof *key, pbl__key4_cmp);
}

pbl_status pbl__plan_best_fit_heap(const pbl__plan_in *in, pbl_assignment *out)
{
    const pbl_allocator *al = in->opt.allocator;
    int32_t n = in->n;
    heap h = { .r = in->r, .n = n, .leaves = 1 };
    while ((int64_t)h.leaves * BLOCK < n)
        h.leaves *= 2;
    size_t nn = (size_t)n;
    size_t bytes = nn * (6 * sizeof(int64_t) + 2 * sizeof(chunk) + sizeof(pbl__key4) + sizeof(int32_t)) +
                   2 * (size_t)h.leaves * sizeof(int64_t);
    char *block = pbl__plan_alloc(al, bytes), *at = block;
    if (!block)
        return PBL_ERR_NOMEM;
    /* 8-byte items first, then the 4-byte ones: every array stays aligned */
    h.maxlast = (int64_t *)at;    at += 2 * (size_t)h.leaves * sizeof *h.maxlast;
    h.first = (int64_t *)at;      at += nn * sizeof *h.first;
    h.at = (placed *)at;          at += nn * sizeof *h.at;
    h.offset = (int64_t *)at;     at += nn * sizeof *h.offset;
    h.found_last = (int64_t *)at; at += nn * sizeof *h.found_last;
    h.found = (chunk *)at;        at += nn * sizeof *h.found;
    h.sort_tmp = (chunk *)at;     at += nn * sizeof *h.sort_tmp;
    pbl__key4 *order = (pbl__key4 *)at; at += nn * sizeof *order;
    h.at_pos = (int32_t *)at;

    /* the start order: positions for the overlap queries */
    for (int32_t p = 0; p < n; p++) {
        h.first[p] = in->by_first[p].k;
        h.at_pos[p] = in->by_first[p].idx;
    }

    /* past the deadline (`best`'s budget) an order stops unfinished: the finished orders'
     * best is returned with *in->cut_off set, or PBL_ERR_TIMEOUT when none finished */
    int64_t best = -1;
    for (int which = 0; which < N_ORDERS; which++) {
        make_order(&h, which, order);
        int64_t size = which == ORDER_START ? place_by_start(&h, order, in->opt.align, in)
                                            : place_by_tree(&h, order, in->opt.align, in);
        if (size < 0) {
            if (in->cut_off)
                *in->cut_off = 1;
            break;
        }
        if (best < 0 || size < best) {
            best = size;
            memcpy(out->offset, h.offset, nn * sizeof *h.offset);
        }
    }
    pbl__plan_free(al, block, bytes);
    return best < 0 ? PBL_ERR_TIMEOUT : PBL_OK;
}
