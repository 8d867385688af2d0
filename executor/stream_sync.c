/* Stream synchronisation: needs -> event waits, reduced with vector clocks (stream_sync.h). */
#include "executor/stream_sync.h"

#include <stdio.h>
#include <string.h>

void pbl__stream_sync_free(pbl__stream_sync *s, pbl__mem *m)
{
    pbl__mem_free(m, s->wait_start, (size_t)(s->n_steps + 1) * sizeof *s->wait_start);
    pbl__mem_free(m, s->wait_ev, (size_t)(s->n_waits ? s->n_waits : 1) * sizeof *s->wait_ev);
    pbl__mem_free(m, s->event, (size_t)(s->n_steps ? s->n_steps : 1) * sizeof *s->event);
    memset(s, 0, sizeof *s);
}

pbl_status pbl__stream_sync_build(int32_t n, int32_t k, const int32_t *stream, const int32_t *need_start,
                                  const int32_t *need, pbl__mem *m, pbl__stream_sync *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->n_steps = n;
    size_t kk = (size_t)k * (size_t)k;
    /* vc[t * k + j]: after step t, the latest step of stream j that t's stream has seen */
    int32_t *vc = pbl__mem_alloc(m, (size_t)(n ? n : 1) * (size_t)k * sizeof *vc);
    int32_t *known = pbl__mem_alloc(m, kk * sizeof *known);   /* per stream: its clock now */
    int32_t *want = pbl__mem_alloc(m, (size_t)k * sizeof *want); /* per stream: latest step t needs */
    int32_t *waited = pbl__mem_alloc(m, (size_t)(need_start[n] ? need_start[n] : 1) * sizeof *waited);
    out->wait_start = pbl__mem_calloc(m, (size_t)(n + 1) * sizeof *out->wait_start);
    out->event = pbl__mem_alloc(m, (size_t)(n ? n : 1) * sizeof *out->event);
    pbl_status s = PBL_OK;
    if (!vc || !known || !want || !waited || !out->wait_start || !out->event) {
        snprintf(err, errlen, "out of memory");
        s = PBL_ERR_NOMEM;
        goto done;
    }
    for (size_t i = 0; i < kk; i++)
        known[i] = -1;
    int32_t nw = 0;
    for (int32_t t = 0; t < n && s == PBL_OK; t++) {
        int32_t st = stream[t];
        int32_t *kn = &known[(size_t)st * k];
        out->event[t] = -1;
        for (int32_t j = 0; j < k; j++)
            want[j] = -1;
        for (int32_t i = need_start[t]; i < need_start[t + 1]; i++) {
            int32_t a = need[i];
            if (a < 0 || a >= t) {
                snprintf(err, errlen, "step %d needs step %d, which is not earlier in the schedule", (int)t, (int)a);
                s = PBL_ERR_INVALID_ARG;
                break;
            }
            if (stream[a] != st && a > want[stream[a]])
                want[stream[a]] = a;
        }
        /* latest first: waiting for a late step often implies the others */
        for (;;) {
            int32_t best = -1;
            for (int32_t j = 0; j < k; j++)
                if (want[j] > kn[j] && (best < 0 || want[j] > want[best]))
                    best = j;
            if (best < 0)
                break;
            int32_t a = want[best];
            waited[nw++] = a;
            for (int32_t j = 0; j < k; j++)
                if (vc[(size_t)a * k + j] > kn[j])
                    kn[j] = vc[(size_t)a * k + j];
        }
        out->wait_start[t + 1] = nw;
        kn[st] = t;
        memcpy(&vc[(size_t)t * k], kn, (size_t)k * sizeof *kn);
    }
    if (s != PBL_OK)
        goto done;
    out->n_waits = nw;
    out->wait_ev = pbl__mem_alloc(m, (size_t)(nw ? nw : 1) * sizeof *out->wait_ev);
    if (!out->wait_ev) {
        snprintf(err, errlen, "out of memory");
        s = PBL_ERR_NOMEM;
        goto done;
    }
    /* events only for the steps some wait names, numbered in schedule order */
    for (int32_t i = 0; i < nw; i++)
        out->event[waited[i]] = 0;
    for (int32_t t = 0; t < n; t++)
        if (out->event[t] == 0)
            out->event[t] = out->n_events++;
    for (int32_t i = 0; i < nw; i++)
        out->wait_ev[i] = out->event[waited[i]];
done:
    pbl__mem_free(m, vc, (size_t)(n ? n : 1) * (size_t)k * sizeof *vc);
    pbl__mem_free(m, known, kk * sizeof *known);
    pbl__mem_free(m, want, (size_t)k * sizeof *want);
    pbl__mem_free(m, waited, (size_t)(need_start[n] ? need_start[n] : 1) * sizeof *waited);
    if (s != PBL_OK)
        pbl__stream_sync_free(out, m);
    return s;
}
