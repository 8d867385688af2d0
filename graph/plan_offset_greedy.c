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
 * last > this.first.
 *
 * Complexity: O(n log n + Σ k_i log n), k_i the placed records overlapping record i (at most
 * those live during its lifetime; n in the worst case); O(n) memory.
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

typedef struct placed {
    int64_t offset;
    int32_t seq; /* when it was placed */
    int32_t rec;
} placed;

static int cmp_placed(const void *a, const void *b)
{
    const placed *x = a, *y = b;
    if (x->offset != y->offset)
        return (x->offset > y->offset) - (x->offset < y->offset);
    return (x->seq > y->seq) - (x->seq < y->seq);
}

typedef struct finder {
    int32_t  leaves;
    int64_t *min_first; /* [2·leaves] smallest first of a placed record below each node */
    int32_t *at_pos;    /* [n] the record at each position of the `last` order */
    int32_t *seq;       /* [n] per record: when it was placed */
    int64_t *offset;    /* [n] per record */
    placed  *found;
    int32_t  n_found;
} finder;

/* Collects placed records at positions >= from with first < t, under node v = [lo, hi). */
static void collect(finder *f, int32_t v, int32_t lo, int32_t hi, int32_t from, int64_t t)
{
    if (hi <= from || f->min_first[v] >= t)
        return;
    if (hi - lo == 1) {
        int32_t i = f->at_pos[lo];
        f->found[f->n_found++] = (placed){ f->offset[i], f->seq[i], i };
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

    finder f = { .leaves = 1, .offset = out->offset };
    while (f.leaves < n)
        f.leaves *= 2;
    size_t nn = (size_t)n, nl = (size_t)f.leaves;
    size_t bytes = 2 * nl * sizeof(int64_t) + nn * (2 * sizeof(key2) + sizeof(placed) + sizeof(int64_t) +
                                                    3 * sizeof(int32_t));
    char *block = pbl__plan_alloc(al, bytes), *at = block;
    if (!block) {
        pbl_assignment_free(out);
        return PBL_ERR_NOMEM;
    }
    f.min_first = (int64_t *)at;    at += 2 * nl * sizeof *f.min_first;
    key2 *by_size = (key2 *)at;     at += nn * sizeof *by_size;
    key2 *by_last = (key2 *)at;     at += nn * sizeof *by_last;
    f.found = (placed *)at;         at += nn * sizeof *f.found;
    int64_t *lasts = (int64_t *)at; at += nn * sizeof *lasts;    /* ascending */
    f.at_pos = (int32_t *)at;       at += nn * sizeof *f.at_pos;
    f.seq = (int32_t *)at;          at += nn * sizeof *f.seq;
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
        qsort(f.found, (size_t)f.n_found, sizeof *f.found, cmp_placed);

        /* found: the placed records live with this one, by offset */
        int64_t end = 0, best = -1, best_gap = INT64_MAX;
        for (int32_t k = 0; k < f.n_found; k++) {
            int64_t off = f.found[k].offset;
            if (off >= end && off - end >= size && off - end < best_gap) {
                best_gap = off - end;
                best = end;
            }
            int64_t e = pbl__align_up(off + r[f.found[k].rec].size, align);
            if (e > end)
                end = e;
        }
        out->offset[i] = best >= 0 ? best : end;
        f.seq[i] = s;
        int32_t v = f.leaves + pos[i];
        f.min_first[v] = first;
        for (v /= 2; v >= 1; v /= 2)
            f.min_first[v] = f.min_first[2 * v] < f.min_first[2 * v + 1] ? f.min_first[2 * v] : f.min_first[2 * v + 1];
    }
    pbl__plan_free(al, block, bytes);
    pbl__assignment_finish(out, r);
    return PBL_OK;
}
