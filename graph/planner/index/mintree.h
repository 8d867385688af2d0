/*
 * A min segment tree over a fixed order of the records (positions 0 .. leaves-1, leaves a
 * power of two): node 1 is the root, node v's children are 2v and 2v + 1, and leaf p is node
 * leaves + p. The caller owns v[2·leaves] and fills it (INT64_MAX, or whatever stands for
 * "nothing here", at empty positions) with every inner node the min of its children.
 */
#ifndef PBL_PLAN_MINTREE_H
#define PBL_PLAN_MINTREE_H

#include <stdint.h>

typedef struct pbl__mintree {
    int32_t  leaves;
    int64_t *v; /* [2·leaves] */
} pbl__mintree;

/* Sets position p to x and updates the nodes above it. */
static inline void pbl__mintree_set(pbl__mintree *t, int32_t p, int64_t x)
{
    int32_t v = t->leaves + p;
    t->v[v] = x;
    for (v /= 2; v >= 1; v /= 2) {
        int64_t m = t->v[2 * v] < t->v[2 * v + 1] ? t->v[2 * v] : t->v[2 * v + 1];
        if (t->v[v] == m)
            break;
        t->v[v] = m;
    }
}

/* Appends to out[] the positions in [from, to) under node v = [lo, hi) whose value is < thr,
 * in increasing order. Call with v = 1, lo = 0, hi = leaves. */
void    pbl__mintree_collect(const pbl__mintree *t, int32_t v, int32_t lo, int32_t hi, int32_t from, int32_t to,
                             int64_t thr, int32_t *out, int32_t *n_out);
/* The first position >= from under node v = [lo, hi) with value < thr, or -1. */
int32_t pbl__mintree_first(const pbl__mintree *t, int32_t v, int32_t lo, int32_t hi, int32_t from, int64_t thr);
/* The last position < to under node v = [lo, hi) with value < thr, or -1. */
int32_t pbl__mintree_last(const pbl__mintree *t, int32_t v, int32_t lo, int32_t hi, int32_t to, int64_t thr);

#endif
