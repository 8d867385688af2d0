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
 * TFLite walks all placed records and skips those that do not overlap (O(n^2)). Here the
 * overlapping ones are found directly: the records are sorted by `last`, and a segment tree
 * over that order holds the smallest `first` of the placed records under each node, so a
 * query visits only subtrees holding a placed record with first < this.last among those with
 * last > this.first. They are then sorted by offset alone (radix sort when many): records at
 * the same offset leave the walk's result the same in either order.
 *
 * Complexity: O(n log n + Σ k_i log n) time, k_i the placed records overlapping record i (at
 * most those live during its lifetime; n in the worst case); O(n) memory.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph/planner/plan_internal.h"
#include "graph/planner/index/mintree.h"
#include "graph/planner/sort.h"

/* Sorts the spans by offset: insertion sort when few, else radix. The walk's result does not
 * depend on the order of equal offsets. */
static void sort_spans(pbl__span *a, pbl__span *tmp, int32_t k)
{
    if (k < 64) {
        pbl__span_insertion_sort(a, k);
        return;
    }
    uint64_t top = 0;
    for (int32_t i = 0; i < k; i++)
        top |= (uint64_t)a[i].offset;
    pbl__span_radix_sort(a, tmp, k, top);
}

pbl_status pbl__plan_offset_greedy_by_size(const pbl__plan_in *in, pbl_assignment *out)
{
    const pbl_allocator *al = in->opt.allocator;
    const pbl_usage_record *r = in->r;
    int64_t align = in->opt.align;
    int32_t n = in->n;
    /* min_first: by last, the smallest first of a placed record under each node */
    pbl__mintree min_first = { .leaves = 1 };
    while (min_first.leaves < n)
        min_first.leaves *= 2;
    size_t nn = (size_t)n, nl = (size_t)min_first.leaves;
    size_t bytes = 2 * nl * sizeof(int64_t) + nn * (sizeof(pbl__key2) + 2 * sizeof(pbl__span) +
                                                    sizeof(int64_t) + 3 * sizeof(int32_t));
    char *block = pbl__plan_alloc(al, bytes), *at = block;
    if (!block)
        return PBL_ERR_NOMEM;
    min_first.v = (int64_t *)at;          at += 2 * nl * sizeof *min_first.v;
    pbl__key2 *by_size = (pbl__key2 *)at; at += nn * sizeof *by_size;
    pbl__span *found = (pbl__span *)at;   at += nn * sizeof *found;
    pbl__span *tmp = (pbl__span *)at;     at += nn * sizeof *tmp;
    int64_t *lasts = (int64_t *)at;       at += nn * sizeof *lasts;  /* ascending */
    int32_t *at_pos = (int32_t *)at;      at += nn * sizeof *at_pos; /* the record at each position */
    int32_t *hits = (int32_t *)at;        at += nn * sizeof *hits;   /* positions found */
    int32_t *pos = (int32_t *)at;                                    /* per record: its position */

    for (int32_t i = 0; i < n; i++)
        by_size[i] = (pbl__key2){ -r[i].size, i };
    qsort(by_size, nn, sizeof *by_size, pbl__key2_cmp);
    const pbl__key2 *by_last = in->by_last;
    for (int32_t p = 0; p < n; p++) {
        lasts[p] = by_last[p].k;
        at_pos[p] = by_last[p].idx;
        pos[by_last[p].idx] = p;
    }
    for (size_t v = 0; v < 2 * nl; v++)
        min_first.v[v] = INT64_MAX;

    for (int32_t s = 0; s < n; s++) {
        if ((s & 63) == 0 && pbl__plan_expired(in)) {
            pbl__plan_free(al, block, bytes);
            return PBL_ERR_TIMEOUT;
        }
        int32_t i = by_size[s].idx;
        int64_t first = r[i].first, last = r[i].last, size = r[i].size;
        /* the placed records at positions whose last is after this record's first, that start
         * before its last */
        int32_t n_found = 0;
        pbl__mintree_collect(&min_first, 1, 0, min_first.leaves, pbl__search_i64(lasts, n, first, 1), n, last, hits,
                             &n_found);
        for (int32_t k = 0; k < n_found; k++) {
            int32_t j = at_pos[hits[k]];
            found[k] = (pbl__span){ out->offset[j], pbl__align_up(out->offset[j] + r[j].size, align) };
        }
        sort_spans(found, tmp, n_found);

        /* found: the placed records live with this one, by offset */
        int64_t end = 0, best = -1, best_gap = INT64_MAX;
        for (int32_t k = 0; k < n_found; k++) {
            int64_t off = found[k].offset;
            if (off >= end && off - end >= size && off - end < best_gap) {
                best_gap = off - end;
                best = end;
            }
            if (found[k].end > end)
                end = found[k].end;
        }
        out->offset[i] = best >= 0 ? best : end;
        pbl__mintree_set(&min_first, pos[i], first);
    }
    pbl__plan_free(al, block, bytes);
    return PBL_OK;
}
