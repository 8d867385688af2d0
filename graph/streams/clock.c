/*
 * Vector clocks over a stream plan, the transitive reduction of waits, and the makespan
 * estimate (see graph/streams/stream_internal.h). One pass in step order does each: a step's clock
 * is the join (elementwise max) of its stream predecessor's clock and its waits' clocks.
 * O(n_steps · n_streams + waits · n_streams) time, n_steps · n_streams memory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/streams/stream_internal.h"

pbl_status pbl__stream_plan_shape(const pbl_stream_plan *sp, char *err, size_t errlen)
{
    if (!sp || sp->n_steps < 0 || sp->n_streams < 1 || sp->n_streams > PBL_MAX_STREAMS ||
        (sp->n_steps > 0 && (!sp->stream || !sp->wait_start))) {
        snprintf(err, errlen, "stream plan: bad counts or missing arrays");
        return PBL_ERR_INVALID_ARG;
    }
    if (sp->n_steps > 0 && sp->wait_start[0] != 0) {
        snprintf(err, errlen, "stream plan: wait_start[0] is %d, not 0", (int)sp->wait_start[0]);
        return PBL_ERR_INVALID_ARG;
    }
    for (int32_t t = 0; t < sp->n_steps; t++) {
        if (sp->stream[t] < 0 || sp->stream[t] >= sp->n_streams) {
            snprintf(err, errlen, "stream plan: step %d is on stream %d of %d", (int)t, (int)sp->stream[t],
                     (int)sp->n_streams);
            return PBL_ERR_INVALID_ARG;
        }
        if (sp->wait_start[t + 1] < sp->wait_start[t]) {
            snprintf(err, errlen, "stream plan: wait_start decreases at step %d", (int)t);
            return PBL_ERR_INVALID_ARG;
        }
        for (int32_t e = sp->wait_start[t]; e < sp->wait_start[t + 1]; e++) {
            int32_t w = sp->wait ? sp->wait[e] : -1;
            if (w < 0 || w >= t || sp->stream[w] == sp->stream[t]) {
                snprintf(err, errlen, "stream plan: step %d waits for step %d, which is not an earlier step on another stream",
                         (int)t, (int)w);
                return PBL_ERR_INVALID_ARG;
            }
        }
    }
    return PBL_OK;
}

/* c = join(c, clock after step u) */
static void join_after(int32_t *c, const int32_t *clock, const int32_t *stream, int32_t S, int32_t u)
{
    const int32_t *cu = clock + (size_t)u * (size_t)S;
    for (int32_t s = 0; s < S; s++)
        if (cu[s] > c[s])
            c[s] = cu[s];
    if (u > c[stream[u]])
        c[stream[u]] = u;
}

/* c = the clock after the step before t on t's stream (all -1 when none) */
static void start_clock(int32_t *c, const int32_t *clock, const int32_t *stream, int32_t S, int32_t prev)
{
    for (int32_t s = 0; s < S; s++)
        c[s] = -1;
    if (prev >= 0)
        join_after(c, clock, stream, S, prev);
}

pbl_status pbl__stream_clocks(const pbl_stream_plan *sp, pbl__mem *m, int32_t **out)
{
    int32_t S = sp->n_streams, n = sp->n_steps, prev[PBL_MAX_STREAMS];
    int32_t *clock = pbl__mem_alloc(m, pbl__stream_n(sp) * (size_t)S * sizeof *clock);
    *out = clock;
    if (!clock)
        return PBL_ERR_NOMEM;
    for (int32_t s = 0; s < S; s++)
        prev[s] = -1;
    for (int32_t t = 0; t < n; t++) {
        int32_t *c = clock + (size_t)t * (size_t)S;
        start_clock(c, clock, sp->stream, S, prev[sp->stream[t]]);
        for (int32_t e = sp->wait_start[t]; e < sp->wait_start[t + 1]; e++)
            join_after(c, clock, sp->stream, S, sp->wait[e]);
        prev[sp->stream[t]] = t;
    }
    return PBL_OK;
}

void pbl__stream_clocks_free(const pbl_stream_plan *sp, pbl__mem *m, int32_t *clock)
{
    pbl__mem_free(m, clock, pbl__stream_n(sp) * (size_t)sp->n_streams * sizeof *clock);
}

void pbl__stream_waits_free(pbl_stream_plan *sp, pbl__mem *m)
{
    size_t nw = sp->wait_start ? (size_t)sp->wait_start[sp->n_steps] : 0;
    pbl__mem_free(m, sp->wait, (nw ? nw : 1) * sizeof *sp->wait);
    pbl__mem_free(m, sp->wait_start, (pbl__stream_n(sp) + 1) * sizeof *sp->wait_start);
    sp->wait = NULL;
    sp->wait_start = NULL;
}

static int cmp_desc(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x < y) - (x > y);
}

pbl_status pbl__stream_reduce(pbl_stream_plan *sp, pbl__mem *m, const int32_t *need_start, const int32_t *need)
{
    int32_t S = sp->n_streams, n = sp->n_steps, prev[PBL_MAX_STREAMS], max_need = 0;
    size_t nn = pbl__stream_n(sp), total = (size_t)need_start[n];
    for (int32_t t = 0; t < n; t++)
        if (need_start[t + 1] - need_start[t] > max_need)
            max_need = need_start[t + 1] - need_start[t];
    int32_t *clock = pbl__mem_alloc(m, nn * (size_t)S * sizeof *clock);
    int32_t *start = pbl__mem_alloc(m, (nn + 1) * sizeof *start);
    int32_t *kept = pbl__mem_alloc(m, (total ? total : 1) * sizeof *kept);
    int32_t *sorted = pbl__mem_alloc(m, (size_t)(max_need ? max_need : 1) * sizeof *sorted);
    if (!clock || !start || !kept || !sorted) {
        pbl__mem_free(m, clock, nn * (size_t)S * sizeof *clock);
        pbl__mem_free(m, start, (nn + 1) * sizeof *start);
        pbl__mem_free(m, kept, (total ? total : 1) * sizeof *kept);
        pbl__mem_free(m, sorted, (size_t)(max_need ? max_need : 1) * sizeof *sorted);
        return PBL_ERR_NOMEM;
    }
    for (int32_t s = 0; s < S; s++)
        prev[s] = -1;
    int32_t nk = 0;
    for (int32_t t = 0; t < n; t++) {
        int32_t *c = clock + (size_t)t * (size_t)S, k = need_start[t + 1] - need_start[t];
        start_clock(c, clock, sp->stream, S, prev[sp->stream[t]]);
        memcpy(sorted, need + need_start[t], (size_t)k * sizeof *sorted);
        /* latest first: a later step may know an earlier one, never the reverse */
        qsort(sorted, (size_t)k, sizeof *sorted, cmp_desc);
        start[t] = nk;
        for (int32_t i = 0; i < k; i++) {
            int32_t u = sorted[i];
            if (sp->stream[u] == sp->stream[t] || u <= c[sp->stream[u]])
                continue; /* stream order or a kept wait already covers it */
            kept[nk++] = u;
            join_after(c, clock, sp->stream, S, u);
        }
        /* waits ascending, as the header promises */
        for (int32_t i = start[t], j = nk - 1; i < j; i++, j--) {
            int32_t x = kept[i];
            kept[i] = kept[j];
            kept[j] = x;
        }
        prev[sp->stream[t]] = t;
    }
    start[n] = nk;
    pbl__mem_free(m, clock, nn * (size_t)S * sizeof *clock);
    pbl__mem_free(m, sorted, (size_t)(max_need ? max_need : 1) * sizeof *sorted);
    int32_t *wait = pbl__mem_resize(m, kept, (total ? total : 1) * sizeof *kept, (size_t)(nk ? nk : 1) * sizeof *kept);
    if (!wait) {
        pbl__mem_free(m, kept, (total ? total : 1) * sizeof *kept);
        pbl__mem_free(m, start, (nn + 1) * sizeof *start);
        return PBL_ERR_NOMEM;
    }
    pbl__stream_waits_free(sp, m);
    sp->wait = wait;
    sp->wait_start = start;
    return PBL_OK;
}

PBL__API int64_t pbl_stream_plan_makespan(const pbl_stream_plan *sp, int64_t *total)
{
    char why[128];
    if (total)
        *total = 0;
    if (pbl__stream_plan_shape(sp, why, sizeof why) != PBL_OK)
        return -1;
    pbl__mem m;
    pbl__mem_init(&m, sp->allocator);
    int64_t *finish = pbl__mem_alloc(&m, pbl__stream_n(sp) * sizeof *finish), last[PBL_MAX_STREAMS] = { 0 }, span = 0;
    if (!finish)
        return -1;
    for (int32_t t = 0; t < sp->n_steps; t++) {
        int64_t ready = last[sp->stream[t]], c = sp->cost ? sp->cost[t] : 1;
        for (int32_t e = sp->wait_start[t]; e < sp->wait_start[t + 1]; e++)
            if (finish[sp->wait[e]] > ready)
                ready = finish[sp->wait[e]];
        finish[t] = last[sp->stream[t]] = ready + c;
        if (finish[t] > span)
            span = finish[t];
        if (total)
            *total += c;
    }
    pbl__mem_free(&m, finish, pbl__stream_n(sp) * sizeof *finish);
    return span;
}
