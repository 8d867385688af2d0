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

#include "graph/planner/index/busy_heap.h"
#include "graph/planner/plan_internal.h"
#include "graph/planner/sort.h"
#include "graph/planner/index/treap.h"

pbl_status pbl__plan_greedy_in_order(const pbl__plan_in *in, pbl_assignment *out)
{
    const pbl_allocator *al = in->opt.allocator;
    const pbl_usage_record *r = in->r;
    int32_t n = in->n;
    size_t nn = (size_t)n;
    size_t bytes = nn * (sizeof(pbl__busy) + 2 * sizeof(int32_t));
    char *block = pbl__plan_alloc(al, bytes), *at = block;
    if (!block)
        return PBL_ERR_NOMEM;
    pbl__busy *heap = (pbl__busy *)at;  at += nn * sizeof *heap;
    pbl__treap p = { .k1 = out->object_size, .k2 = NULL, .root = -1 }; /* free objects by (size, id) */
    p.left = (int32_t *)at;   at += nn * sizeof *p.left;
    p.right = (int32_t *)at;

    int32_t n_busy = 0, n_obj = 0;
    for (int32_t o = 0; o < n; o++) {
        int32_t i = in->by_first[o].idx;
        int64_t need = r[i].size;
        while (n_busy > 0 && heap[0].last <= r[i].first) {
            pbl__treap_insert(&p, heap[0].id);
            pbl__busy_pop(heap, &n_busy);
        }
        int32_t ob = pbl__treap_at_least(&p, need, INT64_MIN);
        int32_t smaller = pbl__treap_below(&p, need, INT64_MIN);
        if (smaller >= 0 && (ob < 0 || need - out->object_size[smaller] < out->object_size[ob] - need))
            ob = smaller;
        if (ob >= 0) {
            pbl__treap_erase(&p, ob);
            if (out->object_size[ob] < need)
                out->object_size[ob] = need;
        } else {
            ob = n_obj++;
            out->object_size[ob] = need;
        }
        out->object[i] = ob;
        pbl__busy_push(heap, &n_busy, (pbl__busy){ r[i].last, ob });
    }
    out->n_objects = n_obj;
    pbl__plan_free(al, block, bytes);
    return PBL_OK;
}
