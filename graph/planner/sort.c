/* Sorting and searching helpers the planner's strategies share (graph/planner/sort.h). */
#include <stdlib.h>
#include <string.h>

#include "graph/planner/sort.h"

int pbl__key2_cmp(const void *a, const void *b)
{
    const pbl__key2 *x = a, *y = b;
    if (x->k != y->k)
        return (x->k > y->k) - (x->k < y->k);
    return (x->idx > y->idx) - (x->idx < y->idx);
}

int pbl__key4_cmp(const void *a, const void *b)
{
    const pbl__key4 *x = a, *y = b;
    if (x->k1 != y->k1)
        return (x->k1 > y->k1) - (x->k1 < y->k1);
    if (x->k2 != y->k2)
        return (x->k2 > y->k2) - (x->k2 < y->k2);
    if (x->k3 != y->k3)
        return (x->k3 > y->k3) - (x->k3 < y->k3);
    return (x->idx > y->idx) - (x->idx < y->idx);
}

int pbl__i64_cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int pbl__i32_cmp(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int32_t pbl__distinct_times(const pbl_usage_record *r, int32_t n, int64_t *pts)
{
    for (int32_t i = 0; i < n; i++) {
        pts[2 * i] = r[i].first;
        pts[2 * i + 1] = r[i].last;
    }
    qsort(pts, 2 * (size_t)n, sizeof *pts, pbl__i64_cmp);
    int32_t m = 1;
    for (int32_t k = 1; k < 2 * n; k++)
        if (pts[k] != pts[m - 1])
            pts[m++] = pts[k];
    return m;
}

void pbl__span_radix_sort(pbl__span *a, pbl__span *tmp, int32_t n, uint64_t top)
{
    /* The histograms of every digit in one read, and a digit all spans share (the high
     * bytes, often) costs no scatter: a third of offset_greedy_by_size's time on an 18k-record
     * trace was here. LSD order, each pass stable: the result is the same either way. */
    int     passes = 0;
    int32_t count[8][257];
    while (passes < 8 && (top >> (8 * passes)) != 0)
        passes++;
    memset(count, 0, (size_t)passes * sizeof count[0]);
    for (int32_t i = 0; i < n; i++) {
        uint64_t x = (uint64_t)a[i].offset;
        for (int p = 0; p < passes; p++)
            count[p][((x >> (8 * p)) & 255) + 1]++;
    }
    pbl__span *from = a, *to = tmp;
    for (int p = 0; p < passes; p++) {
        int32_t *c = count[p];
        int shared = 0;
        for (int d = 1; d <= 256 && !shared; d++)
            shared = c[d] == n;
        if (shared)
            continue;
        for (int d = 0; d < 256; d++)
            c[d + 1] += c[d];
        for (int32_t i = 0; i < n; i++)
            to[c[((uint64_t)from[i].offset >> (8 * p)) & 255]++] = from[i];
        pbl__span *t = from;
        from = to;
        to = t;
    }
    if (from != a)
        memcpy(a, from, (size_t)n * sizeof *a);
}
