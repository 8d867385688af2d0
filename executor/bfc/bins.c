/* The BFC pool's bins: 21 size classes, each an ordered set of free chunks.
 *
 * TensorFlow keeps each bin as a std::set ordered by (size, address) so that a best-fit
 * search is a lower-bound lookup. Here each bin is a treap (a binary search tree whose
 * nodes also form a heap on random priorities: expected O(log n) depth) threaded through
 * the chunk records, so inserting and removing allocate nothing. */
#include "executor/bfc/bfc_internal.h"

int pbl__bfc_bin(size_t size)
{
    size_t units = size >> 8; /* >= 1 for any chunk */
    int bin = 63 - __builtin_clzll((unsigned long long)units);
    return bin < PBL_BFC_NUM_BINS - 1 ? bin : PBL_BFC_NUM_BINS - 1;
}

static int key_less(const pbl__bfc_chunk *c, int32_t a, int32_t b)
{
    if (c[a].size != c[b].size)
        return c[a].size < c[b].size;
    return c[a].ptr < c[b].ptr;
}

/* Splits tree t into the keys below h's (*l) and above it (*r); h is not in t. */
static void split(pbl__bfc_chunk *c, int32_t t, int32_t h, int32_t *l, int32_t *r)
{
    if (t == PBL__BFC_NONE) {
        *l = *r = PBL__BFC_NONE;
    } else if (key_less(c, t, h)) {
        split(c, c[t].right, h, &c[t].right, r);
        *l = t;
    } else {
        split(c, c[t].left, h, l, &c[t].left);
        *r = t;
    }
}

/* Joins a and b, every key of a below every key of b. */
static int32_t merge(pbl__bfc_chunk *c, int32_t a, int32_t b)
{
    if (a == PBL__BFC_NONE)
        return b;
    if (b == PBL__BFC_NONE)
        return a;
    if (c[a].prio >= c[b].prio) {
        c[a].right = merge(c, c[a].right, b);
        return a;
    }
    c[b].left = merge(c, a, c[b].left);
    return b;
}

static int32_t insert(pbl__bfc_chunk *c, int32_t t, int32_t h)
{
    if (t == PBL__BFC_NONE)
        return h;
    if (c[h].prio > c[t].prio) {
        split(c, t, h, &c[h].left, &c[h].right);
        return h;
    }
    if (key_less(c, h, t))
        c[t].left = insert(c, c[t].left, h);
    else
        c[t].right = insert(c, c[t].right, h);
    return t;
}

int32_t pbl__bfc_treap_insert(pbl__bfc_chunk *c, int32_t root, int32_t h)
{
    c[h].left = c[h].right = PBL__BFC_NONE;
    return insert(c, root, h);
}

int32_t pbl__bfc_treap_erase(pbl__bfc_chunk *c, int32_t t, int32_t h)
{
    if (t == PBL__BFC_NONE) /* not reached when h is in the tree */
        return t;
    if (t == h) {
        int32_t r = merge(c, c[t].left, c[t].right);
        c[t].left = c[t].right = PBL__BFC_NONE;
        return r;
    }
    if (key_less(c, h, t))
        c[t].left = pbl__bfc_treap_erase(c, c[t].left, h);
    else
        c[t].right = pbl__bfc_treap_erase(c, c[t].right, h);
    return t;
}

int32_t pbl__bfc_treap_lower_bound(const pbl__bfc_chunk *c, int32_t t, size_t size)
{
    int32_t best = PBL__BFC_NONE;
    while (t != PBL__BFC_NONE) {
        if (c[t].size >= size) {
            best = t;
            t = c[t].left;
        } else {
            t = c[t].right;
        }
    }
    return best;
}

int32_t pbl__bfc_treap_max(const pbl__bfc_chunk *c, int32_t t)
{
    if (t == PBL__BFC_NONE)
        return t;
    while (c[t].right != PBL__BFC_NONE)
        t = c[t].right;
    return t;
}

void pbl__bfc_bin_insert(pbl_bfc *b, int32_t h)
{
    int bin = pbl__bfc_bin(b->chunks[h].size);
    b->chunks[h].bin = (int8_t)bin;
    b->bins[bin] = pbl__bfc_treap_insert(b->chunks, b->bins[bin], h);
    b->st.n_free_chunks++;
}

void pbl__bfc_bin_remove(pbl_bfc *b, int32_t h)
{
    int bin = b->chunks[h].bin;
    b->bins[bin] = pbl__bfc_treap_erase(b->chunks, b->bins[bin], h);
    b->chunks[h].bin = -1;
    b->st.n_free_chunks--;
}

size_t pbl__bfc_largest_free(const pbl_bfc *b)
{
    for (int bin = PBL_BFC_NUM_BINS - 1; bin >= 0; bin--) {
        int32_t h = pbl__bfc_treap_max(b->chunks, b->bins[bin]);
        if (h != PBL__BFC_NONE)
            return b->chunks[h].size;
    }
    return 0;
}
