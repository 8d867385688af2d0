/* The storage step: liveness -> planner -> verifier -> a place for every value. */
#include "executor/storage.h"

#include <stdio.h>
#include <string.h>

#include "graph/planner/plan_internal.h"
#include "graph/streams/stream_internal.h"
#include "graph/ir/registry.h"

void pbl__storage_free(pbl__storage *s, pbl__mem *m)
{
    size_t n = (size_t)(s->n_values ? s->n_values : 1);
    pbl__mem_free(m, s->place, n * sizeof *s->place);
    pbl__mem_free(m, s->offset, n * sizeof *s->offset);
    pbl__mem_free(m, s->alias, n * sizeof *s->alias);
    pbl__mem_free(m, s->kept, n * sizeof *s->kept);
    if (s->multi) { /* live only views sr and sp */
        pbl_stream_records_free(&s->sr);
        pbl_stream_plan_free(&s->sp);
    } else {
        pbl_graph_records_free(&s->live);
    }
    pbl_assignment_free(&s->plan);
    memset(s, 0, sizeof *s);
}

static uint64_t align_up(uint64_t x) { return (x + PBL__ALIGN - 1) & ~(uint64_t)(PBL__ALIGN - 1); }

/* Variables first (their own region), then node outputs from their records. */
static void place_values(const pbl_graph *g, pbl__storage *s, int planned, int dynamic)
{
    for (pbl_value v = 0; v < g->n_values; v++) {
        s->alias[v] = PBL_NONE;
        if (g->values[v].producer != PBL_NONE)
            continue;
        s->place[v] = PBL__PLACE_VARIABLE;
        s->offset[v] = s->variable_bytes;
        s->kept[v] = 1;
        s->variable_bytes = align_up(s->variable_bytes + pbl__meta_bytes(&g->values[v].meta));
    }
    for (int32_t t = 0; t < s->live.n_steps; t++) {
        const pbl__node *nd = &g->nodes[s->live.schedule[t]];
        const pbl__op *op = pbl__op_get(nd->op);
        for (int32_t k = 0; k < nd->n_out; k++) {
            pbl_value v = nd->out[k];
            int32_t r = s->live.value_record[v];
            if (r >= 0 && dynamic) {
                s->place[v] = PBL__PLACE_DYNAMIC;
                s->kept[v] = s->live.records[r].last == s->live.n_steps;
                s->unshared_bytes = align_up(s->unshared_bytes + pbl__meta_bytes(&g->values[v].meta));
                continue;
            }
            if (r >= 0) {
                s->place[v] = PBL__PLACE_ARENA;
                s->offset[v] = (uint64_t)s->plan.offset[r];
                s->kept[v] = !planned || s->live.records[r].last == s->live.n_steps;
                s->unshared_bytes = align_up(s->unshared_bytes + pbl__meta_bytes(&g->values[v].meta));
                continue;
            }
            /* unplanned node output: an update writing a variable in place */
            for (int32_t m = 0; m < op->n_mutates; m++) {
                if (op->mutates[m][0] != k)
                    continue;
                pbl_value in = nd->in[op->mutates[m][1]];
                s->place[v] = PBL__PLACE_ALIAS;
                s->alias[v] = s->place[in] == PBL__PLACE_ALIAS ? s->alias[in] : in;
                s->kept[v] = 1;
            }
        }
    }
}

/* Several streams: the stream plan, then its records with their accesses and a
 * happens-before-safe plan, verified: pbl_graph_stream_storage, the pipeline users call
 * (naive: every record its own bytes, verified the same way); then live and plan view them. */
static pbl_status plan_streams(const pbl_graph *g, const pbl_exec_options *o, const pbl_schedule *order,
                               int32_t n_streams, const int32_t *stream_of_node, int planned, pbl__storage *s,
                               char *err, size_t errlen)
{
    char why[512] = "";
    s->multi = 1;
    pbl_stream_options so = pbl_stream_options_default();
    so.allocator = o->allocator;
    so.n_streams = n_streams;
    so.targets = o->targets;
    so.n_targets = o->n_targets;
    so.order = order->order;
    so.n_order = order->n_steps;
    pbl_status st = pbl__graph_streams_given(g, &so, stream_of_node, &s->sp, why, sizeof why);
    if (st == PBL_OK)
        st = pbl_stream_plan_check(g, &s->sp, why, sizeof why);
    if (st == PBL_OK && planned) {
        pbl_stream_storage_options sso = pbl_stream_storage_options_default();
        sso.allocator = o->allocator;
        sso.align = PBL__ALIGN;
        sso.strategy = PBL_STREAM_STRATEGY_HB;
        sso.interval_strategy = o->strategy ? o->strategy : "best";
        s->strategy = pbl_stream_strategy_name(sso.strategy);
        pbl_stream_storage ss;
        st = pbl_graph_stream_storage(g, &s->sp, &sso, &ss, why, sizeof why);
        s->sr = ss.live; /* zeroed on failure */
        s->plan = ss.plan;
    } else if (st == PBL_OK) {
        pbl_liveness_options lo = pbl_liveness_options_default();
        lo.allocator = o->allocator;
        lo.align = PBL__ALIGN;
        lo.inplace = 0;
        pbl_plan_options po = pbl_plan_options_default();
        po.allocator = o->allocator;
        po.align = PBL__ALIGN;
        st = pbl_graph_stream_liveness(g, &s->sp, &lo, &s->sr, why, sizeof why);
        if (st == PBL_OK)
            st = pbl_plan_records(s->sr.records, s->sr.n_records, "naive", &po, &s->plan, why, sizeof why);
        if (st == PBL_OK)
            st = pbl_stream_plan_verify(&s->sp, &s->sr, &s->plan, PBL__ALIGN, why, sizeof why);
    }
    if (st != PBL_OK) {
        snprintf(err, errlen, "planning storage on %d streams with '%s': %s", (int)n_streams, s->strategy, why);
        return st;
    }
    s->live = (pbl_graph_records){ .records = s->sr.records, .record_value = s->sr.record_value,
                                   .n_records = s->sr.n_records, .value_record = s->sr.value_record,
                                   .n_values = s->sr.n_values, .schedule = s->sp.schedule,
                                   .n_steps = s->sp.n_steps, .n_inplace = s->sr.n_inplace,
                                   .allocator = o->allocator };
    return PBL_OK;
}

pbl_status pbl__storage_plan(const pbl_graph *g, const pbl_exec_options *o, int32_t n_streams,
                             const int32_t *stream_of_node, pbl__mem *m, pbl__storage *s, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    int planned = o->storage == PBL_STORAGE_PLANNED, dynamic = o->storage == PBL_STORAGE_DYNAMIC;
    if (!planned && !dynamic && o->storage != PBL_STORAGE_UNSHARED) {
        snprintf(err, errlen, "storage mode %d is not supported", (int)o->storage);
        return PBL_ERR_INVALID_ARG;
    }
    if (n_streams < 1 || n_streams > PBL_MAX_STREAMS) {
        snprintf(err, errlen, "%d streams: need 1 to %d", (int)n_streams, PBL_MAX_STREAMS);
        return PBL_ERR_INVALID_ARG;
    }
    if (dynamic && (n_streams > 1 || stream_of_node)) {
        snprintf(err, errlen, "dynamic storage runs on one stream (%d asked for)", (int)n_streams);
        return PBL_ERR_UNSUPPORTED;
    }
    s->strategy = dynamic ? "dynamic" : planned ? (o->strategy ? o->strategy : "best") : "naive";
    /* the order: NULL (program order) unless asked for another, measured as it is planned */
    pbl_schedule order = { 0 };
    if (o->schedule != PBL_SCHEDULE_PROGRAM) {
        pbl_schedule_options so = pbl_schedule_options_default();
        so.allocator = o->allocator;
        so.kind = o->schedule;
        so.align = PBL__ALIGN;
        so.inplace = planned;
        so.targets = o->targets;
        so.n_targets = o->n_targets;
        pbl_status st = pbl_graph_schedule(g, &so, &order, err, errlen);
        if (st != PBL_OK)
            return st;
    }
    pbl_status st;
    if (n_streams > 1 || stream_of_node) {
        st = plan_streams(g, o, &order, n_streams, stream_of_node, planned, s, err, errlen);
        pbl_schedule_free(&order);
        if (st != PBL_OK) {
            pbl__storage_free(s, m);
            return st;
        }
    } else {
        pbl_liveness_options lo = pbl_liveness_options_default();
        lo.allocator = o->allocator;
        lo.align = PBL__ALIGN;
        lo.inplace = planned;
        lo.targets = o->targets;
        lo.n_targets = o->n_targets;
        lo.order = order.order;
        lo.n_order = order.n_steps;
        st = pbl_graph_liveness(g, &lo, &s->live, err, errlen);
        pbl_schedule_free(&order);
        if (st != PBL_OK)
            return st;
        pbl_plan_options po = pbl_plan_options_default();
        po.allocator = o->allocator;
        po.align = PBL__ALIGN;
        char why[256] = "";
        if (!dynamic) /* dynamic mode plans nothing: s->plan stays empty */
            st = pbl_plan_records(s->live.records, s->live.n_records, s->strategy, &po, &s->plan, why, sizeof why);
        if (st == PBL_OK && !dynamic)
            st = pbl_plan_verify(s->live.records, s->live.n_records, &s->plan, PBL__ALIGN, 0, why, sizeof why);
        if (st != PBL_OK) {
            snprintf(err, errlen, "planning storage with '%s': %s", s->strategy, why);
            pbl__storage_free(s, m);
            return st;
        }
    }
    int64_t lb = pbl__records_lower_bound(s->live.records, s->live.n_records, o->allocator);
    if (lb < 0) {
        snprintf(err, errlen, "out of memory");
        pbl__storage_free(s, m);
        return PBL_ERR_NOMEM;
    }
    s->lower_bound = (uint64_t)lb;
    /* the baseline under its one definition: the naive strategy on these very records, so it
     * is what `pebble plan --strategy naive` prints for the graph (place_values sums the
     * other baseline, every value apart: unshared_bytes) */
    pbl_assignment naive;
    pbl_plan_options po = pbl_plan_options_default();
    po.allocator = o->allocator;
    po.align = PBL__ALIGN;
    char why[256] = "";
    st = pbl_plan_records(s->live.records, s->live.n_records, "naive", &po, &naive, why, sizeof why);
    if (st != PBL_OK) {
        snprintf(err, errlen, "the naive baseline of the storage plan: %s", why);
        pbl__storage_free(s, m);
        return st;
    }
    s->naive_bytes = (uint64_t)naive.arena;
    pbl_assignment_free(&naive);
    s->arena_bytes = (uint64_t)s->plan.arena;
    s->n_values = g->n_values;
    size_t nv = (size_t)(g->n_values ? g->n_values : 1);
    s->place = pbl__mem_calloc(m, nv * sizeof *s->place);
    s->offset = pbl__mem_calloc(m, nv * sizeof *s->offset);
    s->alias = pbl__mem_alloc(m, nv * sizeof *s->alias);
    s->kept = pbl__mem_calloc(m, nv * sizeof *s->kept);
    if (!s->place || !s->offset || !s->alias || !s->kept) {
        snprintf(err, errlen, "out of memory");
        pbl__storage_free(s, m);
        return PBL_ERR_NOMEM;
    }
    place_values(g, s, planned, dynamic);
    return PBL_OK;
}
