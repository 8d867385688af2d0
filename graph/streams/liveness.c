/*
 * Liveness over a stream plan (see pebble/streams.h): pbl_graph_liveness's records, each
 * with every step that touches its bytes. The records are built as graph/liveness/liveness.c builds
 * them — in schedule order, update outputs joining their input's record, in-place offers
 * joining it when taken — so on one stream the records are identical. What changes is the
 * in-place test: "no later reader in schedule order" becomes "every other access of the
 * input's bytes happens-before this step", since a reader on another stream that runs
 * earlier in the schedule may still be running when this step overwrites the bytes.
 *
 * acc[r·S + s] keeps, per record and stream, the latest step on s that touches the record
 * (its values' producers and all their readers, future ones included): that is all the
 * happens-before test needs, because steps on one stream are ordered.
 */
#include <stdio.h>
#include <string.h>

#include "graph/base/errmsg.h"
#include "graph/liveness/liveness_internal.h"
#include "graph/streams/stream_internal.h"
#include "graph/ir/registry.h"

PBL__API void pbl_stream_records_free(pbl_stream_records *r)
{
    if (!r)
        return;
    pbl__mem m;
    pbl__mem_init(&m, r->allocator);
    size_t nv = (size_t)(r->n_values ? r->n_values : 1);
    size_t na = r->access_start ? (size_t)r->access_start[r->n_records] : 0;
    pbl__mem_free(&m, r->records, nv * sizeof *r->records);
    pbl__mem_free(&m, r->record_value, nv * sizeof *r->record_value);
    pbl__mem_free(&m, r->value_record, nv * sizeof *r->value_record);
    pbl__mem_free(&m, r->to_end, nv * sizeof *r->to_end);
    pbl__mem_free(&m, r->access_start, (nv + 1) * sizeof *r->access_start);
    pbl__mem_free(&m, r->access, (na ? na : 1) * sizeof *r->access);
    memset(r, 0, sizeof *r);
}

typedef struct sl_state {
    const pbl_graph       *g;
    const pbl_stream_plan *sp;
    int32_t                n, S;
    pbl__live_reads        reads;      /* last readers, graph outputs */
    int32_t               *vacc;       /* per value · stream: latest step on s producing or reading it */
    int32_t               *racc;       /* per record · stream: the same over the record's values */
    int32_t               *clock;      /* pbl__stream_clocks */
    pbl_stream_records    *out;
    int64_t                align;
} sl_state;

static void join_value(sl_state *s, int32_t r, pbl_value v)
{
    for (int32_t k = 0; k < s->S; k++)
        if (s->vacc[(size_t)v * s->S + k] > s->racc[(size_t)r * s->S + k])
            s->racc[(size_t)r * s->S + k] = s->vacc[(size_t)v * s->S + k];
}

/* Whether output `out` of step t may take input `in`'s record: as liveness.c, with the
 * race-free test in place of "read by no later step". */
static int can_take(void *ctx, pbl_value in, pbl_value out, int32_t t)
{
    const sl_state *s = ctx;
    const pbl_graph *g = s->g;
    int32_t r = s->out->value_record[in];
    if (r < 0 || s->reads.is_output[in] || s->out->to_end[r] ||
        pbl__meta_bytes(&g->values[in].meta) != pbl__meta_bytes(&g->values[out].meta))
        return 0;
    const int32_t *c = s->clock + (size_t)t * s->S, *a = s->racc + (size_t)r * s->S;
    for (int32_t k = 0; k < s->S; k++) {
        if (k == s->sp->stream[t] ? a[k] > t : a[k] > c[k])
            return 0;
    }
    return 1;
}

/* Value v now uses record r: r is live to the end if v is, and its accesses include v's. */
static void placed(void *ctx, int32_t r, pbl_value v, int fresh)
{
    sl_state *s = ctx;
    if (fresh) {
        s->out->to_end[r] = s->reads.is_output[v];
        for (int32_t q = 0; q < s->S; q++)
            s->racc[(size_t)r * s->S + q] = -1;
    } else {
        s->out->to_end[r] |= s->reads.is_output[v];
    }
    join_value(s, r, v);
}

static void build_records(sl_state *s, int inplace)
{
    pbl_stream_records *o = s->out;
    pbl__live_build b = { .g = s->g, .reads = &s->reads, .records = o->records, .record_value = o->record_value,
                          .value_record = o->value_record, .n_records = &o->n_records, .n_inplace = &o->n_inplace,
                          .align = s->align, .inplace = inplace, .can_take = can_take, .placed = placed,
                          .ctx = s };
    pbl__live_build_records(&b, s->sp->schedule);
}

/* access lists: every (record, step) where the step reads or writes one of its values */
static pbl_status build_access(sl_state *s, pbl__mem *m)
{
    const pbl_graph *g = s->g;
    pbl_stream_records *o = s->out;
    size_t nv = (size_t)(o->n_values ? o->n_values : 1);
    o->access_start = pbl__mem_calloc(m, (nv + 1) * sizeof *o->access_start);
    if (!o->access_start)
        return PBL_ERR_NOMEM;
    int32_t *cnt = o->access_start + 1, total = 0;
    int32_t *seen = pbl__mem_alloc(m, nv * sizeof *seen); /* per record: the last step counted */
    if (!seen)
        return PBL_ERR_NOMEM;
    for (int pass = 0; pass < 2; pass++) {
        for (int32_t r = 0; r < o->n_records; r++)
            seen[r] = -1;
        for (int32_t t = 0; t < s->n; t++) {
            const pbl__node *nd = &g->nodes[s->sp->schedule[t]];
            for (int32_t k = 0; k < nd->n_in + nd->n_out; k++) {
                pbl_value v = k < nd->n_in ? nd->in[k] : nd->out[k - nd->n_in];
                int32_t r = o->value_record[v];
                if (r < 0 || seen[r] == t)
                    continue;
                seen[r] = t;
                if (pass == 0)
                    cnt[r]++;
                else
                    o->access[cnt[r]++] = t;
            }
        }
        if (pass == 0) {
            for (int32_t r = 0; r < o->n_records; r++)
                o->access_start[r + 1] += o->access_start[r];
            total = o->access_start[o->n_records];
            o->access = pbl__mem_alloc(m, (size_t)(total ? total : 1) * sizeof *o->access);
            if (!o->access) {
                pbl__mem_free(m, seen, nv * sizeof *seen);
                return PBL_ERR_NOMEM;
            }
            cnt = o->access_start; /* fill cursors: they end at the next record's start */
        }
    }
    for (int32_t r = o->n_records; r > 0; r--)
        o->access_start[r] = o->access_start[r - 1];
    o->access_start[0] = 0;
    pbl__mem_free(m, seen, nv * sizeof *seen);
    return PBL_OK;
}

PBL__API pbl_status pbl_graph_stream_liveness(const pbl_graph *g, const pbl_stream_plan *sp,
                                              const pbl_liveness_options *opt, pbl_stream_records *out, char *err,
                                              size_t errlen)
{
    char why[256] = "";
    pbl__errclear(err, errlen);
    if (!g || !sp || !out) {
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "stream liveness: no %s", !g ? "graph" : !sp ? "stream plan" : "output");
    }
    memset(out, 0, sizeof *out);
    pbl_liveness_options o = opt ? *opt : pbl_liveness_options_default();
    pbl_status s = pbl__stream_plan_shape(sp, why, sizeof why);
    if (s != PBL_OK) {
        return pbl__errf(err, errlen, s, "%s", why);
    }
    pbl__mem m;
    pbl__mem_init(&m, o.allocator);
    size_t nv = (size_t)(g->n_values ? g->n_values : 1), nn = (size_t)(g->n_nodes ? g->n_nodes : 1);
    int32_t S = sp->n_streams;
    sl_state st = { .g = g, .sp = sp, .n = sp->n_steps, .S = S, .out = out, .align = o.align > 0 ? o.align : 1 };
    uint8_t *scheduled = pbl__mem_calloc(&m, nn);
    out->allocator = o.allocator;
    out->n_values = g->n_values;
    s = pbl__live_records_alloc(g, &m, &out->records, &out->record_value, &out->value_record);
    out->to_end = pbl__mem_calloc(&m, nv * sizeof *out->to_end);
    st.vacc = pbl__mem_alloc(&m, nv * (size_t)S * sizeof *st.vacc);
    st.racc = pbl__mem_alloc(&m, nv * (size_t)S * sizeof *st.racc);
    snprintf(why, sizeof why, "out of memory");
    if (s != PBL_OK || !scheduled || !out->to_end || !st.vacc || !st.racc ||
        pbl__stream_clocks(sp, &m, &st.clock) != PBL_OK) {
        s = PBL_ERR_NOMEM;
        goto done;
    }
    s = PBL_ERR_INVALID_ARG;
    for (int32_t t = 0; t < sp->n_steps; t++) {
        pbl_node i = sp->schedule ? sp->schedule[t] : -1;
        if (i < 0 || i >= g->n_nodes || scheduled[i]) {
            snprintf(why, sizeof why, "stream liveness: step %d runs node %d, which is no node of the graph or runs twice",
                     (int)t, (int)i);
            goto done;
        }
        scheduled[i] = 1;
    }
    for (int32_t v = 0; v < g->n_values; v++)
        for (int32_t k = 0; k < S; k++)
            st.vacc[(size_t)v * S + k] = -1;
    for (int32_t t = 0; t < sp->n_steps; t++) {
        const pbl__node *nd = &g->nodes[sp->schedule[t]];
        for (int32_t k = 0; k < nd->n_in + nd->n_out; k++) {
            pbl_value v = k < nd->n_in ? nd->in[k] : nd->out[k - nd->n_in];
            if (k < nd->n_in) {
                pbl_node p = g->values[v].producer;
                if (p != PBL_NONE && !scheduled[p]) {
                    snprintf(why, sizeof why, "stream liveness: node '%s' reads '%s', whose producer is not scheduled",
                             nd->name, g->values[v].name);
                    goto done;
                }
            }
            st.vacc[(size_t)v * S + sp->stream[t]] = t; /* steps ascend: the last write wins */
        }
    }
    if (pbl__live_reads_init(&st.reads, g, sp->schedule, sp->n_steps, &m) != PBL_OK) {
        s = PBL_ERR_NOMEM;
        snprintf(why, sizeof why, "out of memory");
        goto done;
    }
    build_records(&st, o.inplace);
    s = build_access(&st, &m);
    if (s != PBL_OK)
        snprintf(why, sizeof why, "out of memory");
done:
    pbl__mem_free(&m, scheduled, nn);
    pbl__mem_free(&m, st.vacc, nv * (size_t)S * sizeof *st.vacc);
    pbl__mem_free(&m, st.racc, nv * (size_t)S * sizeof *st.racc);
    pbl__live_reads_free(&st.reads, g, &m);
    if (st.clock)
        pbl__stream_clocks_free(sp, &m, st.clock);
    if (s != PBL_OK) {
        pbl__errf(err, errlen, s, "%s", why);
        pbl_stream_records_free(out);
    }
    return s;
}
