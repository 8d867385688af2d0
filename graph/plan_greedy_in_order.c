/*
 * greedy_in_order: TFLite GPU delegate's GreedyInOrderAssignment (tensorflow/lite/delegates/
 * gpu/common/memory_management/greedy_in_order_assignment.h) — shared objects handed out in
 * record order from a pool of free objects ordered by size.
 *
 * Walk the records by first step (ties: record order; TFLite takes its records already in
 * that order). Before serving record i, every object whose current holder has ended by
 * i.first (pebble's last <= first, TFLite's last_task < first_task) returns to the pool.
 * Record i takes, of the free objects, the smallest one at least its size (among equal
 * sizes the lowest id), unless the largest one smaller than it (among equal sizes the
 * highest id) would grow by strictly less than the first would waste; the object grows to
 * the record's size if needed. An empty pool means a new object of the record's size.
 *
 * The pool is an ordered set keyed by (size, id) — a treap, as TFLite uses std::set — and
 * the objects in use sit in a binary heap keyed by (holder's last, id).
 *
 * Complexity: O(n log n) time, O(n) memory.
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

/* ---- objects in use: a binary heap keyed by (last, object) ------------------------------- */

typedef struct busy {
    int64_t last;
    int32_t object;
} busy;

static int busy_before(busy a, busy b)
{
    return a.last < b.last || (a.last == b.last && a.object < b.object);
}

static void heap_push(busy *h, int32_t *n, busy x)
{
    int32_t i = (*n)++;
    while (i > 0 && busy_before(x, h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = x;
}

static void heap_pop(busy *h, int32_t *n)
{
    busy x = h[--(*n)];
    int32_t i = 0;
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && busy_before(h[c + 1], h[c]))
            c++;
        if (!busy_before(h[c], x))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
}

/* ---- the free pool: a treap of objects keyed by (size, id) ------------------------------- */

typedef struct pool {
    const int64_t *size; /* per object */
    int32_t       *left, *right;
    int32_t        root;
} pool;

static uint32_t prio(int32_t v)
{
    uint32_t x = (uint32_t)v * 2654435761u;
    x ^= x >> 15;
    x *= 2246822519u;
    return x ^ (x >> 13);
}

static int key_less(int64_t size_a, int32_t a, int64_t size_b, int32_t b)
{
    return size_a < size_b || (size_a == size_b && a < b);
}

static int32_t merge(pool *p, int32_t a, int32_t b)
{
    if (a < 0)
        return b;
    if (b < 0)
        return a;
    if (prio(a) > prio(b)) {
        p->right[a] = merge(p, p->right[a], b);
        return a;
    }
    p->left[b] = merge(p, a, p->left[b]);
    return b;
}

/* Splits the tree at v into keys below object x's key (*lo) and the rest (*hi). */
static void split(pool *p, int32_t v, int32_t x, int32_t *lo, int32_t *hi)
{
    if (v < 0) {
        *lo = *hi = -1;
    } else if (key_less(p->size[v], v, p->size[x], x)) {
        split(p, p->right[v], x, &p->right[v], hi);
        *lo = v;
    } else {
        split(p, p->left[v], x, lo, &p->left[v]);
        *hi = v;
    }
}

static void pool_insert(pool *p, int32_t x)
{
    int32_t lo, hi;
    p->left[x] = p->right[x] = -1;
    split(p, p->root, x, &lo, &hi);
    p->root = merge(p, merge(p, lo, x), hi);
}

static int32_t erase_at(pool *p, int32_t v, int32_t x)
{
    if (v == x)
        return merge(p, p->left[v], p->right[v]);
    if (key_less(p->size[x], x, p->size[v], v))
        p->left[v] = erase_at(p, p->left[v], x);
    else
        p->right[v] = erase_at(p, p->right[v], x);
    return v;
}

/* The first object with size >= s (lowest id among equals), or -1. */
static int32_t pool_at_least(const pool *p, int64_t s)
{
    int32_t v = p->root, found = -1;
    while (v >= 0) {
        if (p->size[v] >= s) {
            found = v;
            v = p->left[v];
        } else {
            v = p->right[v];
        }
    }
    return found;
}

/* The last object with size < s (highest id among equals), or -1. */
static int32_t pool_below(const pool *p, int64_t s)
{
    int32_t v = p->root, found = -1;
    while (v >= 0) {
        if (p->size[v] < s) {
            found = v;
            v = p->right[v];
        } else {
            v = p->left[v];
        }
    }
    return found;
}

pbl_status pbl__plan_greedy_in_order(const pbl__plan_in *in, pbl_assignment *out)
{
    const pbl_allocator *al = in->opt.allocator;
    const pbl_usage_record *r = in->r;
    int32_t n = in->n;
    pbl_status st = pbl__assignment_init(out, n, 1, al);
    if (st != PBL_OK)
        return st;
    if (n == 0)
        return PBL_OK;

    size_t nn = (size_t)n;
    size_t bytes = nn * (sizeof(key2) + sizeof(busy) + 2 * sizeof(int32_t));
    char *block = pbl__plan_alloc(al, bytes), *at = block;
    if (!block) {
        pbl_assignment_free(out);
        return PBL_ERR_NOMEM;
    }
    key2 *order = (key2 *)at; at += nn * sizeof *order;
    busy *heap = (busy *)at;  at += nn * sizeof *heap;
    pool p = { .size = out->object_size, .root = -1 };
    p.left = (int32_t *)at;   at += nn * sizeof *p.left;
    p.right = (int32_t *)at;

    for (int32_t i = 0; i < n; i++)
        order[i] = (key2){ r[i].first, i };
    qsort(order, nn, sizeof *order, cmp_key2);

    int32_t n_busy = 0, n_obj = 0;
    for (int32_t o = 0; o < n; o++) {
        int32_t i = order[o].idx;
        int64_t need = r[i].size;
        while (n_busy > 0 && heap[0].last <= r[i].first) {
            pool_insert(&p, heap[0].object);
            heap_pop(heap, &n_busy);
        }
        int32_t ob = pool_at_least(&p, need);
        int32_t smaller = pool_below(&p, need);
        if (smaller >= 0 && (ob < 0 || need - out->object_size[smaller] < out->object_size[ob] - need))
            ob = smaller;
        if (ob >= 0) {
            p.root = erase_at(&p, p.root, ob);
            if (out->object_size[ob] < need)
                out->object_size[ob] = need;
        } else {
            ob = n_obj++;
            out->object_size[ob] = need;
        }
        out->object[i] = ob;
        heap_push(heap, &n_busy, (busy){ r[i].last, ob });
    }
    out->n_objects = n_obj;
    pbl__plan_free(al, block, bytes);
    pbl__assignment_objects_to_offsets(out, in->opt.align);
    return PBL_OK;
}
