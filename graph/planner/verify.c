/* pbl_plan_verify: sweep over time keeping the live records sorted by offset. A valid plan's
 * live records are disjoint in bytes, so a newcomer overlaps one of them exactly when it
 * overlaps its neighbour below or above in that order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/base/errmsg.h"
#include "graph/planner/plan_internal.h"
#include "graph/planner/sort.h"

PBL__API pbl_status pbl_plan_verify(const pbl_usage_record *r, int32_t n, const pbl_assignment *a, int64_t align,
                                    int64_t capacity, char *err, size_t errlen)
{
    pbl__errclear(err, errlen);
    if (!a || n < 0 || (n > 0 && (!r || !a->offset)) || a->n_records != n)
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "verify: the assignment does not match the %d records", (int)n);
    if (align <= 0)
        align = 1;
    int64_t top = 0;
    for (int32_t i = 0; i < n; i++) {
        if (a->offset[i] < 0 || a->offset[i] % align != 0)
            return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "record %d: offset %lld is not a non-negative multiple of %lld",
                       (int)i, (long long)a->offset[i], (long long)align);
        if (a->offset[i] + r[i].size > top)
            top = a->offset[i] + r[i].size;
    }
    if (top != a->arena)
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "the arena is %lld bytes but the records reach %lld",
                   (long long)a->arena, (long long)top);
    if (capacity > 0 && top > capacity)
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "the arena needs %lld bytes, more than the capacity %lld",
                   (long long)top, (long long)capacity);
    if (n == 0)
        return PBL_OK;

    /* scratch from the assignment's allocator: the caller's hook reaches it */
    size_t ev_bytes = (size_t)n * 2 * sizeof(pbl__key2), live_bytes = (size_t)n * sizeof(int32_t);
    pbl__key2 *ev = pbl__plan_alloc(a->allocator, ev_bytes);
    int32_t *live = pbl__plan_alloc(a->allocator, live_bytes); /* live records sorted by offset */
    if (!ev || !live) {
        pbl__plan_free(a->allocator, ev, ev_bytes);
        pbl__plan_free(a->allocator, live, live_bytes);
        return pbl__errf(err, errlen, PBL_ERR_NOMEM, "verify: out of memory");
    }
    for (int32_t i = 0; i < n; i++) {
        ev[2 * i] = (pbl__key2){ r[i].first * 2 + 1, i }; /* time·2, +1 for a start: ends first at a tie */
        ev[2 * i + 1] = (pbl__key2){ r[i].last * 2, i };
    }
    qsort(ev, (size_t)n * 2, sizeof *ev, pbl__key2_cmp);
    int32_t n_live = 0;
    pbl_status s = PBL_OK;
    for (int32_t e = 0; e < 2 * n && s == PBL_OK; e++) {
        int32_t i = ev[e].idx;
        int64_t off = a->offset[i];
        /* position: first live record whose offset is >= off (ties by index) */
        int32_t lo = 0, hi = n_live;
        while (lo < hi) {
            int32_t mid = (lo + hi) / 2, j = live[mid];
            if (a->offset[j] < off || (a->offset[j] == off && j < i))
                lo = mid + 1;
            else
                hi = mid;
        }
        if (!(ev[e].k & 1)) { /* end: remove i, found at lo */
            memmove(&live[lo], &live[lo + 1], (size_t)(n_live - lo - 1) * sizeof *live);
            n_live--;
            continue;
        }
        int32_t below = lo > 0 ? live[lo - 1] : -1, above = lo < n_live ? live[lo] : -1;
        int32_t clash = below >= 0 && a->offset[below] + r[below].size > off ? below
                      : above >= 0 && off + r[i].size > a->offset[above] ? above : -1;
        if (clash >= 0) {
            s = pbl__errf(err, errlen, PBL_ERR_INVALID_ARG,
                    "records %d and %d are both live at step %lld and overlap in bytes: [%lld, %lld) and [%lld, %lld)",
                    (int)clash, (int)i, (long long)r[i].first, (long long)a->offset[clash],
                    (long long)(a->offset[clash] + r[clash].size), (long long)off, (long long)(off + r[i].size));
            break;
        }
        memmove(&live[lo + 1], &live[lo], (size_t)(n_live - lo) * sizeof *live);
        live[lo] = i;
        n_live++;
    }
    pbl__plan_free(a->allocator, ev, ev_bytes);
    pbl__plan_free(a->allocator, live, live_bytes);
    return s;
}
