/*
 * An ordered set of small integers (objects, records) as a treap over caller-owned arrays,
 * keyed by (k1[v], k2[v]), or by (k1[v], v) when k2 is NULL — the std::set the TFLite
 * strategies keep their free objects in. A node's priority is a fixed hash of its number,
 * so the tree's shape, and every result, is the same on every run.
 *
 *     pbl__treap t = { .k1 = size, .k2 = NULL, .left = l, .right = r, .root = -1 };
 *     pbl__treap_insert(&t, o);
 *     int32_t v = pbl__treap_at_least(&t, need, INT64_MIN); // smallest size >= need, lowest id
 *
 * A key must not change while its node is in the set.
 */
#ifndef PBL_PLAN_TREAP_H
#define PBL_PLAN_TREAP_H

#include <stdint.h>

typedef struct pbl__treap {
    const int64_t *k1, *k2;
    int32_t       *left, *right; /* per node */
    int32_t        root;         /* -1: empty */
} pbl__treap;

/* The priority of node v (a hash of v; the larger nearer the root). */
static inline uint32_t pbl__treap_prio(int32_t v)
{
    uint32_t x = (uint32_t)v * 2654435761u;
    x ^= x >> 15;
    x *= 2246822519u;
    return x ^ (x >> 13);
}

static inline int64_t pbl__treap_key2(const pbl__treap *t, int32_t v) { return t->k2 ? t->k2[v] : v; }

/* key(v) < (a, b) */
static inline int pbl__treap_key_below(const pbl__treap *t, int32_t v, int64_t a, int64_t b)
{
    return t->k1[v] < a || (t->k1[v] == a && pbl__treap_key2(t, v) < b);
}

void pbl__treap_insert(pbl__treap *t, int32_t x);
void pbl__treap_erase(pbl__treap *t, int32_t x); /* x must be in the set */

/* The first node with key >= (a, b), or -1. */
static inline int32_t pbl__treap_at_least(const pbl__treap *t, int64_t a, int64_t b)
{
    int32_t v = t->root, found = -1;
    while (v >= 0) {
        if (!pbl__treap_key_below(t, v, a, b)) {
            found = v;
            v = t->left[v];
        } else {
            v = t->right[v];
        }
    }
    return found;
}

/* The last node with key < (a, b), or -1. */
static inline int32_t pbl__treap_below(const pbl__treap *t, int64_t a, int64_t b)
{
    int32_t v = t->root, found = -1;
    while (v >= 0) {
        if (pbl__treap_key_below(t, v, a, b)) {
            found = v;
            v = t->right[v];
        } else {
            v = t->left[v];
        }
    }
    return found;
}

#endif
