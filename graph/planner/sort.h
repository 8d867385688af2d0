/*
 * Sorting and searching helpers the planner's strategies share: (key, index) and
 * (three keys, index) records whose order breaks ties by index (so qsort, which is not stable, gives the same order
 * everywhere), comparators for qsort, a binary search over a sorted array, the distinct
 * lifetime boundaries of a record set, and sorting placed spans by offset.
 */
#ifndef PBL_PLAN_SORT_H
#define PBL_PLAN_SORT_H

#include <stddef.h>
#include <stdint.h>

#include "pebble/plan.h"

/* A sort record: ordered by k, then by idx (usually the record's index). */
typedef struct pbl__key2 {
    int64_t k;
    int32_t idx;
} pbl__key2;

/* A sort record with three keys: ordered by k1, then k2, then k3, then idx. */
typedef struct pbl__key4 {
    int64_t k1, k2, k3;
    int32_t idx;
} pbl__key4;

/* qsort comparators: pbl__key2 by (k, idx); pbl__key4 by (k1, k2, k3, idx); int64_t; int32_t. */
int pbl__key2_cmp(const void *a, const void *b);
int pbl__key4_cmp(const void *a, const void *b);
int pbl__i64_cmp(const void *a, const void *b);
int pbl__i32_cmp(const void *a, const void *b);

/* The index of the first of sorted v[0, n) that is >= t (strict: > t); n if none. */
static inline int32_t pbl__search_i64(const int64_t *v, int32_t n, int64_t t, int strict)
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

/* Fills pts[0, m) with the distinct firsts and lasts of r[0, n), ascending, and returns m.
 * pts holds 2n entries. */
int32_t pbl__distinct_times(const pbl_usage_record *r, int32_t n, int64_t *pts);

/* A placed record's bytes as a gap search sees them: where it starts and where it ends. */
typedef struct pbl__span {
    int64_t offset, end;
} pbl__span;

/* Sorts a[0, n) by offset, stably, by insertion (for short lists). */
static inline void pbl__span_insertion_sort(pbl__span *a, int32_t n)
{
    for (int32_t i = 1; i < n; i++) {
        pbl__span x = a[i];
        int32_t j = i;
        for (; j > 0 && a[j - 1].offset > x.offset; j--)
            a[j] = a[j - 1];
        a[j] = x;
    }
}

/* Sorts a[0, n) by offset, stably: LSD radix a byte at a time, for long lists. Every offset
 * is non-negative and has no bit set above top's highest (top: an upper bound, or the OR of
 * the offsets). tmp holds n spans; the result lands back in a. */
void pbl__span_radix_sort(pbl__span *a, pbl__span *tmp, int32_t n, uint64_t top);

#endif
