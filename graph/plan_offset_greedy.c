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

/* A placed record as the walk sees it: where it starts and its end rounded up to the
 * alignment. The walk's result does not depend on the order of equal offsets. */
typedef struct span {
    int64_t offset, end;
} span;

/* Sorts spans by offset: insertion sort when few, else LSD radix on the offset's bytes. */
static void sort_spans(span *a, span *tmp, int32_t k)
{
    if (k < 64) {
        for (int32_t i = 1; i < k; i++) {
            span x = a[i];
            int32_t j = i;
            for (; j > 0 && a[j - 1].offset > x.offset; j--)
                a[j] = a[j - 1];
            a[j] = x;
        }
        return;
    }
    uint64_t top = 0;
    for (int32_t i = 0; i < k; i++)
        top |= (uint64_t)a[i].offset;
    span *from = a, *to = tmp;
    for (int shift = 0; shift < 64 && (top >> shift) != 0; shift += 8) {
        int32_t count[257] = { 0 };
        for (int32_t i = 0; i < k; i++)
            count[(((uint64_t)from[i].offset >> shift) & 255) + 1]++;
        for (int d = 0; d < 256; d++)
            count[d + 1] += count[d];
        for (int32_t i = 0; i < k; i++)
            to[count[((uint64_t)from[i].offset >> shift) & 255]++] = from[i];
        span *t = from;
        from = to;
        to = t;
    }
    if (from != a)
        memcpy(a, from, (size_t)k * sizeof *a);
}

typedef struct finder {
    int32_t  leaves;
    int64_t *min_first; /* [2·leaves] smallest first of a placed record below each node */
    int32_t *at_pos;    /* [n] the record at each position of the `last` order */
    const pbl_usage_record *r;
    int64_t  align;
    int64_t *offset;    /* [n] per record */
    span    *found, *tmp;
    int32_t  n_found;
} finder;

/* Collects placed records at positions >= from with first < t, under node v = [lo, hi). */
static void collect(finder *f, int32_t v, int32_t lo, int32_t hi, int32_t from, int64_t t)
{
    if (hi <= from || f->min_first[v] >= t)
        return;
    if (hi - lo == 1) {
        int32_t i = f->at_pos[lo];
        f->found[f->n_found++] = (span){ f->offset[i], pbl__align_up(f->offset[i] + f->r[i].size, f->align) };
        return;
    }
    int32_t mid = lo + (hi - lo) / 2;
    collect(f, 2 * v, lo, mid, from, t);
    collect(f, 2 * v + 1, mid, hi, from, t);
}

pbl_status pbl__plan_offset_greedy_by_size(const pbl__plan_in *in, pbl_assignment *out)
{
    const pbl_allocator *al = in->opt.allocator;
    const pbl_usage_record *r = in->r;
    int64_t align = in->opt.align;
    int32_t n = in->n;
    pbl_status st = pbl__assignment_init(out, n, 0, al);
    if (st != PBL_OK)
        return st;
    if (n == 0)
        return PBL_OK;

    finder f = { .leaves = 1, .offset = out->offset, .r = r, .align = align };
    while (f.leaves < n)
        f.leaves *= 2;
    size_t nn = (size_t)n, nl = (size_t)f.leaves;
    size_t bytes = 2 * nl * sizeof(int64_t) + nn * (2 * sizeof(key2) + 2 * sizeof(span) + sizeof(int64_t) +
                                                    2 * sizeof(int32_t));
    char *block = pbl__plan_alloc(al, bytes), *at = block;
    if (!block) {
        pbl_assignment_free(out);
        return PBL_ERR_NOMEM;
    }
    f.min_first = (int64_t *)at;    at += 2 * nl * sizeof *f.min_first;
    key2 *by_size = (key2 *)at;     at += nn * sizeof *by_size;
    key2 *by_last = (key2 *)at;     at += nn * sizeof *by_last;
    f.found = (span *)at;           at += nn * sizeof *f.found;
    f.tmp = (span *)at;             at += nn * sizeof *f.tmp;
    int64_t *lasts = (int64_t *)at; at += nn * sizeof *lasts;    /* ascending */
    f.at_pos = (int32_t *)at;       at += nn * sizeof *f.at_pos;
    int32_t *pos = (int32_t *)at;                                /* per record: its position */

    for (int32_t i = 0; i < n; i++) {
        by_size[i] = (key2){ -r[i].size, i };
        by_last[i] = (key2){ r[i].last, i };
    }
    qsort(by_size, nn, sizeof *by_size, cmp_key2);
    qsort(by_last, nn, sizeof *by_last, cmp_key2);
    for (int32_t p = 0; p < n; p++) {
        lasts[p] = by_last[p].k;
        f.at_pos[p] = by_last[p].idx;
        pos[by_last[p].idx] = p;
    }
    for (size_t v = 0; v < 2 * nl; v++)
        f.min_first[v] = INT64_MAX;

    for (int32_t s = 0; s < n; s++) {
        int32_t i = by_size[s].idx;
        int64_t first = r[i].first, last = r[i].last, size = r[i].size;
        /* positions whose last is after this record's first */
        int32_t lo = 0, hi = n;
        while (lo < hi) {
            int32_t mid = lo + (hi - lo) / 2;
            if (lasts[mid] <= first)
                lo = mid + 1;
            else
                hi = mid;
        }
        f.n_found = 0;
        collect(&f, 1, 0, f.leaves, lo, last);
        sort_spans(f.found, f.tmp, f.n_found);

        /* found: the placed records live with this one, by offset */
        int64_t end = 0, best = -1, best_gap = INT64_MAX;
        for (int32_t k = 0; k < f.n_found; k++) {
            int64_t off = f.found[k].offset;
            if (off >= end && off - end >= size && off - end < best_gap) {
                best_gap = off - end;
                best = end;
            }
            if (f.found[k].end > end)
                end = f.found[k].end;
        }
        out->offset[i] = best >= 0 ? best : end;
        int32_t v = f.leaves + pos[i];
        f.min_first[v] = first;
        for (v /= 2; v >= 1; v /= 2)
            f.min_first[v] = f.min_first[2 * v] < f.min_first[2 * v + 1] ? f.min_first[2 * v] : f.min_first[2 * v + 1];
    }
    pbl__plan_free(al, block, bytes);
    pbl__assignment_finish(out, r);
    return PBL_OK;
}
