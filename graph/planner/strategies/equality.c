/*
 * equality: TFLite GPU delegate's EqualityAssignment (tensorflow/lite/delegates/gpu/common/
 * memory_management/equality_assignment.h, the hashed variant its dispatcher uses) — shared
 * objects reused only by records of exactly the same size.
 *
 * Walk the records by first step (ties: record order; TFLite takes its records already in
 * that order). Before serving record i, every object whose current holder has ended by
 * i.first (pebble's last <= first, TFLite's last_task < first_task) goes back to a free list
 * for its size, in order of (holder's last, object id). Record i takes the object most
 * recently freed of exactly its size (each free list is a stack, as TFLite's vector with
 * push_back/pop_back), or a new object of its size.
 *
 * Sizes are ranked once by sorting, so each free list is a stack indexed by rank; objects in
 * use sit in a binary heap keyed by (last, object id).
 *
 * Complexity: O(n log n) time (the sorts and the heap), O(n) memory.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph/planner/index/busy_heap.h"
#include "graph/planner/plan_internal.h"
#include "graph/planner/sort.h"

pbl_status pbl__plan_equality(const pbl__plan_in *in, pbl_assignment *out)
{
    const pbl_allocator *al = in->opt.allocator;
    const pbl_usage_record *r = in->r;
    int32_t n = in->n;
    size_t nn = (size_t)n;
    size_t bytes = nn * (sizeof(pbl__key2) + sizeof(pbl__busy) + 4 * sizeof(int32_t));
    char *block = pbl__plan_alloc(al, bytes), *at = block;
    if (!block)
        return PBL_ERR_NOMEM;
    pbl__key2 *by_size = (pbl__key2 *)at;   at += nn * sizeof *by_size;
    pbl__busy *heap = (pbl__busy *)at;      at += nn * sizeof *heap;
    int32_t *rank = (int32_t *)at; at += nn * sizeof *rank;    /* per record: its size's rank */
    int32_t *obj_rank = (int32_t *)at; at += nn * sizeof *obj_rank;
    int32_t *top = (int32_t *)at; at += nn * sizeof *top;      /* per rank: last freed object, or -1 */
    int32_t *below = (int32_t *)at;                            /* per object: next in its free stack */

    for (int32_t i = 0; i < n; i++)
        by_size[i] = (pbl__key2){ r[i].size, i };
    qsort(by_size, nn, sizeof *by_size, pbl__key2_cmp);
    int32_t n_ranks = 0;
    for (int32_t k = 0; k < n; k++) {
        if (k > 0 && by_size[k].k != by_size[k - 1].k)
            n_ranks++;
        rank[by_size[k].idx] = n_ranks;
    }
    for (int32_t k = 0; k <= n_ranks; k++)
        top[k] = -1;

    int32_t n_busy = 0, n_obj = 0;
    for (int32_t o = 0; o < n; o++) {
        int32_t i = in->by_first[o].idx;
        while (n_busy > 0 && heap[0].last <= r[i].first) {
            int32_t ob = heap[0].id;
            pbl__busy_pop(heap, &n_busy);
            below[ob] = top[obj_rank[ob]];
            top[obj_rank[ob]] = ob;
        }
        int32_t ob = top[rank[i]];
        if (ob >= 0) {
            top[rank[i]] = below[ob];
        } else {
            ob = n_obj++;
            obj_rank[ob] = rank[i];
            out->object_size[ob] = r[i].size;
        }
        out->object[i] = ob;
        pbl__busy_push(heap, &n_busy, (pbl__busy){ r[i].last, ob });
    }
    out->n_objects = n_obj;
    pbl__plan_free(al, block, bytes);
    return PBL_OK;
}
