/*
 * The stream plan verifier (see pebble/streams.h). It shares nothing with the planner but
 * the vector clocks: records are sorted by offset, every pair whose bytes overlap is found by
 * a scan, and for each pair every access of the second is tested against the latest access
 * of the first on every stream. O(n log n + P · A · S) for P overlapping pairs, A accesses
 * per record and S streams.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/base/errmsg.h"
#include "graph/planner/sort.h"
#include "graph/streams/stream_internal.h"

/* Whether every access of i happens-before every access of j; if not, *wa and *wb get an
 * access of i and one of j that are not so ordered (-1 for wb when i is live to the end). */
static int ordered(const pbl_stream_plan *sp, const pbl_stream_records *sr, const int32_t *clock, const int32_t *last,
                   int32_t i, int32_t j, int32_t *wa, int32_t *wb)
{
    int32_t S = sp->n_streams;
    if (sr->to_end[i]) {
        *wa = sr->access[sr->access_start[i + 1] - 1];
        *wb = -1;
        return 0;
    }
    const int32_t *li = last + (size_t)i * S;
    for (int32_t e = sr->access_start[j]; e < sr->access_start[j + 1]; e++) {
        int32_t b = sr->access[e];
        for (int32_t s = 0; s < S; s++)
            if (li[s] > clock[(size_t)b * S + s]) {
                *wa = li[s];
                *wb = b;
                return 0;
            }
    }
    return 1;
}

pbl_status pbl__stream_verify(const pbl_stream_plan *sp, const pbl_stream_records *sr, const pbl_assignment *a,
                              int64_t align, int32_t *bad_a, int32_t *bad_b, char *err, size_t errlen)
{
    char why[256] = "";
    if (bad_a)
        *bad_a = -1;
    if (bad_b)
        *bad_b = -1;
    pbl_status s = pbl__stream_plan_shape(sp, why, sizeof why);
    if (s != PBL_OK)
        goto say;
    s = PBL_ERR_INVALID_ARG;
    if (!sr || !a || a->n_records != sr->n_records || (sr->n_records > 0 && !a->offset)) {
        snprintf(why, sizeof why, "verify: the assignment does not match the records");
        goto say;
    }
    if (align < 1)
        align = 1;
    int32_t n = sr->n_records, S = sp->n_streams;
    int64_t arena = 0;
    for (int32_t r = 0; r < n; r++) {
        if (sr->records[r].size <= 0 || a->offset[r] < 0 || a->offset[r] % align != 0) {
            snprintf(why, sizeof why, "verify: record %d has size %lld at offset %lld (align %lld)", (int)r,
                     (long long)sr->records[r].size, (long long)a->offset[r], (long long)align);
            goto say;
        }
        if (sr->access_start[r + 1] <= sr->access_start[r]) {
            snprintf(why, sizeof why, "verify: record %d has no accesses", (int)r);
            goto say;
        }
        for (int32_t e = sr->access_start[r]; e < sr->access_start[r + 1]; e++)
            if (sr->access[e] < 0 || sr->access[e] >= sp->n_steps ||
                (e > sr->access_start[r] && sr->access[e] <= sr->access[e - 1])) {
                snprintf(why, sizeof why, "verify: record %d's accesses are not ascending steps of the plan", (int)r);
                goto say;
            }
        if (a->offset[r] + sr->records[r].size > arena)
            arena = a->offset[r] + sr->records[r].size;
    }
    if (arena != a->arena) {
        snprintf(why, sizeof why, "verify: the arena is %lld bytes, but the records end at %lld", (long long)a->arena,
                 (long long)arena);
        goto say;
    }
    pbl__mem m;
    pbl__mem_init(&m, sp->allocator);
    size_t nn = (size_t)(n ? n : 1);
    int32_t *clock = NULL, *last = pbl__mem_alloc(&m, nn * (size_t)S * sizeof *last);
    pbl__key2 *ord = pbl__mem_alloc(&m, nn * sizeof *ord);
    s = PBL_ERR_NOMEM;
    snprintf(why, sizeof why, "out of memory");
    if (!last || !ord || pbl__stream_clocks(sp, &m, &clock) != PBL_OK)
        goto free;
    for (int32_t r = 0; r < n; r++) {
        for (int32_t k = 0; k < S; k++)
            last[(size_t)r * S + k] = -1;
        for (int32_t e = sr->access_start[r]; e < sr->access_start[r + 1]; e++)
            last[(size_t)r * S + sp->stream[sr->access[e]]] = sr->access[e]; /* ascending: the last wins */
        ord[r] = (pbl__key2){ a->offset[r], r };
    }
    qsort(ord, nn, sizeof *ord, pbl__key2_cmp);
    s = PBL_OK;
    for (int32_t p = 0; p < n && s == PBL_OK; p++) {
        int32_t i = ord[p].idx;
        int64_t end = a->offset[i] + sr->records[i].size;
        for (int32_t q = p + 1; q < n && ord[q].k < end; q++) {
            int32_t j = ord[q].idx, a1, b1, a2, b2;
            if (ordered(sp, sr, clock, last, i, j, &a1, &b1) || ordered(sp, sr, clock, last, j, i, &a2, &b2))
                continue;
            int64_t lo = a->offset[j], hi = end < a->offset[j] + sr->records[j].size ? end : a->offset[j] + sr->records[j].size;
            if (b1 < 0)
                snprintf(why, sizeof why, "records %d and %d share bytes [%lld, %lld) but record %d is live to the end "
                         "and step %d (stream %d) accesses record %d after it is made",
                         (int)i, (int)j, (long long)lo, (long long)hi, (int)i, (int)a2, (int)sp->stream[a2], (int)j);
            else
                snprintf(why, sizeof why, "records %d and %d share bytes [%lld, %lld) but neither happens-before the other: "
                         "step %d (stream %d, record %d) and step %d (stream %d, record %d) are not ordered",
                         (int)i, (int)j, (long long)lo, (long long)hi, (int)a1, (int)sp->stream[a1], (int)i, (int)b1,
                         (int)sp->stream[b1], (int)j);
            if (bad_a)
                *bad_a = i;
            if (bad_b)
                *bad_b = j;
            s = PBL_ERR_RACE;
            break;
        }
    }
free:
    pbl__mem_free(&m, last, nn * (size_t)S * sizeof *last);
    pbl__mem_free(&m, ord, nn * sizeof *ord);
    if (clock)
        pbl__stream_clocks_free(sp, &m, clock);
say:
    if (s != PBL_OK)
        pbl__errf(err, errlen, s, "%s", why);
    return s;
}

PBL__API pbl_status pbl_stream_plan_verify(const pbl_stream_plan *sp, const pbl_stream_records *sr,
                                           const pbl_assignment *a, int64_t align, char *err, size_t errlen)
{
    return pbl__stream_verify(sp, sr, a, align, NULL, NULL, err, errlen);
}
