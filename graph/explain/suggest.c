/* pbl_explain_graph: a graph's liveness explained (explain.c), and what would lower its peak,
 * each measured by rewriting the graph and taking the rewritten graph's lower bound. */
#include <stdio.h>
#include <string.h>

#include "graph/base/errmsg.h"
#include "graph/explain/explain_internal.h"
#include "graph/ir/graph_internal.h"
#include "graph/passes/recompute_internal.h"
#include "pebble/fuse.h"
#include "pebble/schedule.h"

/* g's liveness in the order o->schedule names: min_peak's order is made here and handed to
 * liveness (which copies it). With sc given, the schedule is kept there for the caller. */
static pbl_status liveness_in_order(const pbl_graph *g, const pbl_explain_options *o, pbl_graph_records *gr,
                                    pbl_schedule *sc, char *err, size_t errlen)
{
    pbl_liveness_options lo = pbl_liveness_options_default();
    lo.allocator = o->allocator;
    lo.align = o->align;
    pbl_schedule own = { 0 };
    pbl_schedule *use = sc ? sc : &own;
    memset(gr, 0, sizeof *gr);
    memset(use, 0, sizeof *use);
    pbl_status s = PBL_OK;
    if (o->schedule != PBL_SCHEDULE_PROGRAM) {
        pbl_schedule_options so = pbl_schedule_options_default();
        so.allocator = o->allocator;
        so.kind = o->schedule;
        so.align = o->align;
        s = pbl_graph_schedule(g, &so, use, err, errlen);
        lo.order = use->order;
        lo.n_order = use->n_steps;
    }
    if (s == PBL_OK)
        s = pbl_graph_liveness(g, &lo, gr, err, errlen);
    pbl_schedule_free(&own);
    return s;
}

/* The lower bound of g's liveness with the explained options. */
static pbl_status lower_bound_of(const pbl_graph *g, const pbl_explain_options *o, int64_t *lb, char *err,
                                 size_t errlen)
{
    pbl_graph_records gr;
    pbl_status s = liveness_in_order(g, o, &gr, NULL, err, errlen);
    if (s == PBL_OK) {
        *lb = pbl_records_lower_bound(gr.records, gr.n_records);
        if (*lb < 0)
            s = PBL_ERR_NOMEM;
    }
    pbl_graph_records_free(&gr);
    return s;
}

static void measured(pbl_explain *e, pbl_explain_suggestion *x, pbl_status s, int64_t lb, const char *err)
{
    if (s == PBL_OK) {
        x->estimated = 1;
        x->lower_bound = lb;
        x->saves = e->lower_bound - lb;
    } else {
        snprintf(x->note, sizeof x->note, "not estimated: %s", err[0] ? err : pbl_status_str(s));
    }
}

/* pbl_graph_fuse with its defaults: dense layers and element-wise chains become single nodes,
 * so their intermediates never exist. */
static pbl_status suggest_fusion(pbl_explain *e, const pbl_graph *g, const pbl_explain_options *o)
{
    pbl_explain_suggestion *x = &e->suggestions[e->n_suggestions++];
    *x = (pbl_explain_suggestion){ .fix = PBL_EXPLAIN_FIX_FUSION, .value = PBL_NONE };
    pbl_fuse_options fo = pbl_fuse_options_default();
    fo.allocator = o->allocator;
    pbl_fuse_report rep;
    pbl_graph *fused = NULL;
    char err[256] = "";
    int64_t lb = 0;
    pbl_status s = pbl_graph_fuse(g, &fo, &fused, &rep, err, sizeof err);
    if (s == PBL_OK)
        s = lower_bound_of(fused, o, &lb, err, sizeof err);
    measured(e, x, s, lb, err);
    if (s == PBL_OK)
        snprintf(x->note, sizeof x->note, "pbl_graph_fuse: %d nodes -> %d (%d dense, %d chains, %d weight+bias, %d act grads)",
                 (int)rep.nodes_before, (int)rep.nodes_after, (int)rep.dense, (int)rep.chains, (int)rep.weight_bias,
                 (int)rep.act_grads);
    pbl_graph_destroy(fused);
    return s == PBL_ERR_NOMEM ? s : PBL_OK;
}

/* Each activation kept for backward and live at the peak, largest first: drop it (the values
 * sharing its record too) and recompute it before its first backward reader, as
 * pbl_graph_recompute's rewrite does. Its inputs are then kept until that recomputation,
 * which may cost as much as it saves: the lower bound after says. */
static pbl_status suggest_recompute(pbl_explain *e, const pbl_graph *g, const pbl_explain_options *o)
{
    pbl__mem m;
    pbl__mem_init(&m, o->allocator);
    pbl__rc_info info;
    size_t nv = (size_t)(g->n_values ? g->n_values : 1);
    uint8_t *drop = pbl__mem_calloc(&m, nv);
    if (!drop || pbl__rc_info_build(g, &m, &info) != PBL_OK) {
        pbl__mem_free(&m, drop, nv);
        return PBL_ERR_NOMEM;
    }
    pbl_status s = PBL_OK;
    int32_t room = PBL__EXPLAIN_MAX_SUGGESTIONS - 2, tried = 0;
    int32_t limit = o->max_recompute < room ? o->max_recompute : room;
    const pbl_graph_records *gr = &e->graph_records;
    for (int32_t k = 0; k < e->n_live_at_peak && tried < limit && s != PBL_ERR_NOMEM; k++) {
        int32_t r = e->live_at_peak[k];
        if (e->rec[r].kind != PBL_EXPLAIN_SAVED_ACTIVATION)
            continue;
        /* the record's recomputable values, so that an in-place pair (fc1 and relu1 over one
         * record) goes whole: dropping relu1 alone would keep fc1 for its recomputation */
        int any = 0;
        memset(drop, 0, nv);
        for (int32_t v = 0; v < g->n_values; v++)
            if (gr->value_record[v] == r && info.recomputable[v]) {
                drop[v] = 1;
                any |= info.candidate[v];
            }
        if (!any)
            continue;
        tried++;
        pbl_explain_suggestion *x = &e->suggestions[e->n_suggestions++];
        *x = (pbl_explain_suggestion){ .fix = PBL_EXPLAIN_FIX_RECOMPUTE, .value = e->rec[r].value,
                                       .name = e->rec[r].name };
        pbl_graph *ng = NULL;
        int32_t copies = 0;
        double flops = 0;
        char err[256] = "";
        int64_t lb = 0;
        s = pbl__rc_rewrite(g, &info, drop, o->allocator, &ng, &copies, &flops, err, sizeof err);
        if (s == PBL_OK)
            s = lower_bound_of(ng, o, &lb, err, sizeof err);
        measured(e, x, s, lb, err);
        if (s == PBL_OK)
            snprintf(x->note, sizeof x->note, "%d node%s run again in backward, %.3g extra FLOPs", (int)copies,
                     copies == 1 ? "" : "s", flops);
        pbl_graph_destroy(ng);
    }
    pbl__rc_info_free(&info, &m);
    pbl__mem_free(&m, drop, nv);
    return s == PBL_ERR_NOMEM ? s : PBL_OK;
}

/* Another node order: pbl_graph_schedule's min_peak, whose lower bound is measured as
 * liveness would measure it. It keeps program order when nothing beats it, so saves is never
 * negative against program order; explained in min_peak order already, it saves 0. */
static pbl_status suggest_schedule(pbl_explain *e, const pbl_graph *g, const pbl_explain_options *o)
{
    pbl_explain_suggestion *x = &e->suggestions[e->n_suggestions++];
    *x = (pbl_explain_suggestion){ .fix = PBL_EXPLAIN_FIX_SCHEDULE, .value = PBL_NONE };
    pbl_schedule_options so = pbl_schedule_options_default();
    so.allocator = o->allocator;
    so.kind = PBL_SCHEDULE_MIN_PEAK;
    so.align = o->align;
    pbl_schedule sc = { 0 };
    char err[256] = "";
    pbl_status s = pbl_graph_schedule(g, &so, &sc, err, sizeof err);
    measured(e, x, s, sc.peak, err);
    if (s == PBL_OK) {
        const char *proof = sc.exact ? "proven minimal" : "not proven minimal";
        if (x->saves > 0)
            snprintf(x->note, sizeof x->note, "pbl_graph_schedule min_peak (%s of %d orders, %s): program order %lld",
                     sc.method, (int)sc.n_candidates, proof, (long long)sc.program_peak);
        else if (o->schedule == PBL_SCHEDULE_MIN_PEAK)
            snprintf(x->note, sizeof x->note, "this is the min_peak order (%s, %s; program order %lld)", sc.method,
                     proof, (long long)sc.program_peak);
        else
            snprintf(x->note, sizeof x->note, "program order is already minimal%s (%d orders tried)",
                     sc.exact ? " (proven)" : " among min_peak's orders", (int)sc.n_candidates);
    }
    pbl_schedule_free(&sc);
    return s == PBL_ERR_NOMEM ? s : PBL_OK;
}

PBL__API pbl_status pbl_explain_graph(const pbl_graph *g, const pbl_explain_options *opt, pbl_explain *out,
                                      char *err, size_t errlen)
{
    pbl_explain_options o = opt ? *opt : pbl_explain_options_default();
    if (!out)
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "explain: no output");
    memset(out, 0, sizeof *out);
    if (!g || o.align < 1 || o.max_recompute < 0 || (unsigned)o.schedule >= (unsigned)pbl_schedule_kind_count())
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "explain: no graph, or bad options (align %lld)",
                         (long long)o.align);
    pbl_graph_records gr;
    pbl_status s = liveness_in_order(g, &o, &gr, NULL, err, errlen);
    if (s != PBL_OK) {
        pbl_graph_records_free(&gr);
        return s;
    }
    s = pbl_explain_records(gr.records, gr.n_records, NULL, g, &gr, &o, out, err, errlen);
    out->graph_records = gr; /* freed with out, also after an error */
    if (s != PBL_OK || !o.suggest)
        return s;
    pbl__mem m;
    pbl__mem_init(&m, o.allocator);
    out->suggestions = pbl__mem_calloc(&m, PBL__EXPLAIN_MAX_SUGGESTIONS * sizeof *out->suggestions);
    if (!out->suggestions)
        return pbl__errf(err, errlen, PBL_ERR_NOMEM, "explain: out of memory for the suggestions");
    if ((s = suggest_fusion(out, g, &o)) == PBL_OK && (s = suggest_recompute(out, g, &o)) == PBL_OK)
        s = suggest_schedule(out, g, &o);
    if (s != PBL_OK)
        return pbl__errf(err, errlen, s, "explain: out of memory estimating the suggestions");
    return PBL_OK;
}
