/* The planner's ordered set (graph/planner/index/treap.h): split and merge by priority. */
#include "graph/planner/index/treap.h"

static int32_t merge(pbl__treap *t, int32_t a, int32_t b)
{
    if (a < 0)
        return b;
    if (b < 0)
        return a;
    if (pbl__treap_prio(a) > pbl__treap_prio(b)) {
        t->right[a] = merge(t, t->right[a], b);
        return a;
    }
    t->left[b] = merge(t, a, t->left[b]);
    return b;
}

/* Splits the tree at v into keys below (a, b) (*lo) and the rest (*hi). */
static void split(pbl__treap *t, int32_t v, int64_t a, int64_t b, int32_t *lo, int32_t *hi)
{
    if (v < 0) {
        *lo = *hi = -1;
    } else if (pbl__treap_key_below(t, v, a, b)) {
        split(t, t->right[v], a, b, &t->right[v], hi);
        *lo = v;
    } else {
        split(t, t->left[v], a, b, lo, &t->left[v]);
        *hi = v;
    }
}

void pbl__treap_insert(pbl__treap *t, int32_t x)
{
    int32_t lo, hi;
    t->left[x] = t->right[x] = -1;
    split(t, t->root, t->k1[x], pbl__treap_key2(t, x), &lo, &hi);
    t->root = merge(t, merge(t, lo, x), hi);
}

static int32_t erase_at(pbl__treap *t, int32_t v, int32_t x)
{
    if (v == x)
        return merge(t, t->left[v], t->right[v]);
    if (pbl__treap_key_below(t, x, t->k1[v], pbl__treap_key2(t, v)))
        t->left[v] = erase_at(t, t->left[v], x);
    else
        t->right[v] = erase_at(t, t->right[v], x);
    return v;
}

void pbl__treap_erase(pbl__treap *t, int32_t x)
{
    t->root = erase_at(t, t->root, x);
}
