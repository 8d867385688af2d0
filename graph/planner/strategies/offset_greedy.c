/*
 * offset_greedy_by_size: TFLite GPU delegate's GreedyBySizeAssignment (tensorflow/lite/
 * delegates/gpu/common/memory_management/greedy_by_size_assignment.cc), the offset
 * calculation of Pisarchyk & Lee 2020, "Efficient Memory Management for Deep Neural Net
 * Inference" (greedy by size for offset calculation).
 *
 * Place the records largest first (ties: record order, as TFLite's stable sort). For the
 * record being placed, walk the already placed records whose lifetimes overlap its own in
 * order of offset (equal offsets: the one placed first), keeping `end`, the largest aligned
 * end (offset + size rounded up to opt.align) seen so far, starting at 0. Every placed record
 * that starts at or above `end` leaves a gap [end, its offset); the record goes into the
 * smallest gap that holds it (the first such on a tie), else at the final `end`. Offsets are
 * therefore multiples of the alignment; the arena is the largest offset + size.
 *
 * TFLite walks all placed records and skips those that do not overlap (O(n^2)). Here the walk
 * reads the bytes taken at some step of the record's lifetime from the space-time index
 * (graph/planner/index/spacetime.h) as merged intervals: the gaps between them are the gaps
 * between the overlapping records, so the offsets are TFLite's (checked identical on the
 * TFLite vectors, the zoo, MiniMalloc's and the real traces), without visiting every
 * overlapping record (4x faster on pangu_2.6B, 6x on 56k records of it interleaved three ways;
 * as fast as before on random, fragmented instances, whose occupied space has many holes).
 *
 * Complexity: O(n log n) to sort, then per record a query and an update of O(log T) merged
 * interval sets (T <= 2n distinct times), each costing its size h: the holes in the occupied
 * space of a time range, small on packed arenas. O(n log T) memory at most.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph/planner/plan_internal.h"
#include "graph/planner/index/spacetime.h"
#include "graph/planner/sort.h"

pbl_status pbl__plan_offset_greedy_by_size(const pbl__plan_in *in, pbl_assignment *out)
{
    const pbl_allocator *al = in->opt.allocator;
    const pbl_usage_record *r = in->r;
    int64_t align = in->opt.align;
    int32_t n = in->n;
    size_t nn = (size_t)n;
    size_t bytes = nn * (sizeof(pbl__key2) + 2 * sizeof(int64_t) + 2 * sizeof(int32_t));
    char *block = pbl__plan_alloc(al, bytes), *at = block;
    if (!block)
        return PBL_ERR_NOMEM;
    pbl__key2 *by_size = (pbl__key2 *)at; at += nn * sizeof *by_size;
    int64_t *times = (int64_t *)at;       at += 2 * nn * sizeof *times; /* the distinct firsts and lasts */
    int32_t *step = (int32_t *)at;                                      /* [2n] per record: its steps [a, b) */

    for (int32_t i = 0; i < n; i++)
        by_size[i] = (pbl__key2){ -r[i].size, i };
    qsort(by_size, nn, sizeof *by_size, pbl__key2_cmp);
    int32_t m = pbl__distinct_times(r, n, times);
    for (int32_t i = 0; i < n; i++) {
        step[2 * i] = pbl__search_i64(times, m, r[i].first, 0);
        step[2 * i + 1] = pbl__search_i64(times, m, r[i].last, 0);
    }
    pbl__spacetime taken;
    pbl__spacetime_scan scan = { 0 };
    pbl_status st = pbl__spacetime_init(&taken, m - 1, al);
    for (int32_t s = 0; st == PBL_OK && s < n; s++) {
        if ((s & 63) == 0 && pbl__plan_expired(in)) {
            st = PBL_ERR_TIMEOUT;
            break;
        }
        int32_t i = by_size[s].idx;
        int64_t size = r[i].size;
        /* the bytes taken at some step of this record's lifetime */
        const pbl__span *taken_now;
        int32_t n_taken;
        st = pbl__spacetime_taken(&taken, step[2 * i], step[2 * i + 1], &scan, &taken_now, &n_taken);
        if (st != PBL_OK)
            break;
        out->offset[i] = pbl__spans_smallest_gap(taken_now, n_taken, size);
        st = pbl__spacetime_add(&taken, step[2 * i], step[2 * i + 1], out->offset[i],
                                pbl__align_up(out->offset[i] + size, align));
    }
    pbl__spacetime_free(&taken);
    pbl__spacetime_scan_free(&scan, al);
    pbl__plan_free(al, block, bytes);
    return st;
}
