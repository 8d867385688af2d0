/* The planner's min segment tree (graph/planner/index/mintree.h): the descents. */
#include "graph/planner/index/mintree.h"

void pbl__mintree_collect(const pbl__mintree *t, int32_t v, int32_t lo, int32_t hi, int32_t from, int32_t to,
                          int64_t thr, int32_t *out, int32_t *n_out)
{
    if (hi <= from || lo >= to || t->v[v] >= thr)
        return;
    if (hi - lo == 1) {
        out[(*n_out)++] = lo;
        return;
    }
    int32_t mid = lo + (hi - lo) / 2;
    pbl__mintree_collect(t, 2 * v, lo, mid, from, to, thr, out, n_out);
    pbl__mintree_collect(t, 2 * v + 1, mid, hi, from, to, thr, out, n_out);
}

int32_t pbl__mintree_first(const pbl__mintree *t, int32_t v, int32_t lo, int32_t hi, int32_t from, int64_t thr)
{
    if (hi <= from || t->v[v] >= thr)
        return -1;
    if (hi - lo == 1)
        return lo;
    int32_t mid = lo + (hi - lo) / 2, p = pbl__mintree_first(t, 2 * v, lo, mid, from, thr);
    return p >= 0 ? p : pbl__mintree_first(t, 2 * v + 1, mid, hi, from, thr);
}

int32_t pbl__mintree_last(const pbl__mintree *t, int32_t v, int32_t lo, int32_t hi, int32_t to, int64_t thr)
{
    if (lo >= to || t->v[v] >= thr)
        return -1;
    if (hi - lo == 1)
        return lo;
    int32_t mid = lo + (hi - lo) / 2, p = pbl__mintree_last(t, 2 * v + 1, mid, hi, to, thr);
    return p >= 0 ? p : pbl__mintree_last(t, 2 * v, lo, mid, to, thr);
}
