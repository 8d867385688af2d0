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
 * kept in an array sorted by offset (O(n·w), w the most records live at once: the index below
 * cost three times as much on random, fragmented instances and saved little on real traces).
 * In the other orders the gaps come from the space-time index (graph/planner/index/spacetime.h): the bytes taken
 * at some step of the record's lifetime, as the merged intervals of O(log T) segment-tree
 * nodes over time, each sorted by offset, merged pairwise. The walk reads only the
 * complement of their union, so the offsets are those of walking the overlapping records one
 * by one (as XLA does, and as this file did until it was measured quadratic: 13.6 s at 62k
 * records) — checked identical on the TFLite vectors, the zoo, MiniMalloc's and the real
 * traces.
 *
 * Complexity per order: O(n log T) set updates, each O(log h + h) for a set of h merged
 * intervals, and per record a query of O(log T) sets, Σ h over them; h is the number of
 * holes in the occupied space of a time range, small on packed heaps (the work no longer
 * grows with the records overlapping in time). T <= 2n distinct times. O(n log T) memory at
 * most, usually far less.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph/planner/index/spacetime.h"
#include "graph/planner/plan_internal.h"
#include "graph/planner/sort.h"

typedef pbl__span chunk; /* XLA's word: a placed record's bytes */

typedef struct heap {
    const pbl_usage_record *r;
    const pbl_allocator    *al;
    int32_t  n;
    int32_t *at_pos;     /* [n] the record at each position of the start order */
    int64_t *offset;     /* [n] per record, once placed */
    int32_t *step;       /* [2n] per record: its elementary time intervals [a, b) */
    chunk   *found;      /* [n] the start order: the live chunks by offset */
    int64_t *found_last; /* [n] the start order: `last` of each live chunk */
    pbl__spacetime taken; /* the other orders: bytes taken over time */
    pbl__spacetime_scan scan;   /* a query's buffers (grown) */
} heap;

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

/* Places the records in any order: the bytes taken during each record's lifetime come from
 * the space-time index as merged intervals (graph/planner/index/spacetime.h). Returns the heap
 * size, -1 past the deadline, -2 out of memory. */
static int64_t place_by_index(heap *h, const pbl__key4 *order, int64_t align, const pbl__plan_in *in)
{
    pbl__spacetime_clear(&h->taken);
    int64_t heap_size = 0;
    for (int32_t o = 0; o < h->n; o++) {
        if ((o & 63) == 0 && pbl__plan_expired(in))
            return -1;
        int32_t i = h->at_pos[order[o].idx];
        const pbl_usage_record *ri = &h->r[i];
        int32_t n_found, a = h->step[2 * i], b = h->step[2 * i + 1];
        const chunk *found;
        if (pbl__spacetime_taken(&h->taken, a, b, &h->scan, &found, &n_found) != PBL_OK)
            return -2;
        int64_t at = best_fit(found, n_found, ri->size, heap_size, align);
        h->offset[i] = at;
        if (at + ri->size > heap_size)
            heap_size = at + ri->size;
        if (pbl__spacetime_add(&h->taken, a, b, at, pbl__align_up(at + ri->size, align)) != PBL_OK)
            return -2;
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
    heap h = { .r = in->r, .al = al, .n = n };
    size_t nn = (size_t)n;
    size_t bytes = nn * (4 * sizeof(int64_t) + sizeof(chunk) + sizeof(pbl__key4) + 3 * sizeof(int32_t));
    char *block = pbl__plan_alloc(al, bytes), *at = block;
    if (!block)
        return PBL_ERR_NOMEM;
    /* 8-byte items first, then the 4-byte ones: every array stays aligned */
    int64_t *times = (int64_t *)at; at += 2 * nn * sizeof *times;  /* the distinct firsts and lasts */
    h.offset = (int64_t *)at;       at += nn * sizeof *h.offset;
    h.found_last = (int64_t *)at;   at += nn * sizeof *h.found_last;
    h.found = (chunk *)at;          at += nn * sizeof *h.found;
    pbl__key4 *order = (pbl__key4 *)at; at += nn * sizeof *order;
    h.step = (int32_t *)at;         at += 2 * nn * sizeof *h.step;
    h.at_pos = (int32_t *)at;

    /* the start order: make_order's positions */
    for (int32_t p = 0; p < n; p++)
        h.at_pos[p] = in->by_first[p].idx;
    int32_t m = pbl__distinct_times(in->r, n, times);
    for (int32_t i = 0; i < n; i++) {
        h.step[2 * i] = pbl__search_i64(times, m, in->r[i].first, 0);
        h.step[2 * i + 1] = pbl__search_i64(times, m, in->r[i].last, 0);
    }
    pbl_status st = pbl__spacetime_init(&h.taken, m - 1, al);

    /* past the deadline (`best`'s budget) an order stops unfinished: the finished orders'
     * best is returned with *in->cut_off set, or PBL_ERR_TIMEOUT when none finished */
    int64_t best = -1;
    for (int which = 0; st == PBL_OK && which < N_ORDERS; which++) {
        make_order(&h, which, order);
        int64_t size = which == ORDER_START ? place_by_start(&h, order, in->opt.align, in)
                                            : place_by_index(&h, order, in->opt.align, in);
        if (size == -2) {
            st = PBL_ERR_NOMEM;
            break;
        }
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
    pbl__spacetime_free(&h.taken);
    pbl__spacetime_scan_free(&h.scan, al);
    pbl__plan_free(al, block, bytes);
    if (st != PBL_OK)
        return st;
    return best < 0 ? PBL_ERR_TIMEOUT : PBL_OK;
}
