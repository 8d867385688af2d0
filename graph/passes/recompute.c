/*
 * Static recomputation, the choice: which forward values to drop (MXNet's mirror rule, Chen
 * et al.'s sqrt(n) segments, their Algorithm 2 under a searched B) and what each choice costs
 * once rewritten and planned. See pebble/recompute.h.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph/passes/recompute_internal.h"
#include "graph/ir/cost.h"
#include "graph/ir/registry.h"
#include "pebble/liveness.h"
#include "pebble/plan.h"

PBL__API pbl_recompute_options pbl_recompute_options_default(void)
{
    pbl_recompute_options o = { .allocator = NULL, .method = PBL_RECOMPUTE_SQRT, .budget = 0, .segments = 0,
                                .search_points = 64, .strategy = NULL, .align = 64 };
    return o;
}

PBL__API void pbl_recompute_report_free(pbl_recompute_report *r)
{
    if (!r)
        return;
    pbl__mem m;
    pbl__mem_init(&m, r->allocator);
    pbl__mem_free(&m, r->checkpoints, (size_t)(r->n_checkpoints ? r->n_checkpoints : 1) * sizeof *r->checkpoints);
    r->checkpoints = NULL;
    r->n_checkpoints = 0;
}

/* The planned arena of g, as the executor would plan it (liveness with in-place, then the
 * strategy, then the verifier). */
static pbl_status measure(const pbl_graph *g, const pbl_recompute_options *o, uint64_t *arena, char *err,
                          size_t errlen)
{
    pbl_liveness_options lo = pbl_liveness_options_default();
    lo.allocator = o->allocator;
    lo.align = o->align;
    pbl_graph_records gr = { 0 };
    pbl_assignment a = { 0 };
    const char *strategy = o->strategy ? o->strategy : "best";
    pbl_status s = pbl_graph_liveness(g, &lo, &gr, err, errlen);
    if (s != PBL_OK)
        return s;
    pbl_plan_options po = pbl_plan_options_default();
    po.allocator = o->allocator;
    po.align = o->align;
    char why[256] = "";
    s = pbl_plan_records(gr.records, gr.n_records, strategy, &po, &a, why, sizeof why);
    if (s == PBL_OK)
        s = pbl_plan_verify(gr.records, gr.n_records, &a, o->align, 0, why, sizeof why);
    if (s != PBL_OK)
        snprintf(err, errlen, "planning with '%s': %s", strategy, why);
    else
        *arena = (uint64_t)a.arena;
    pbl_assignment_free(&a);
    pbl_graph_records_free(&gr);
    return s;
}

static uint64_t value_bytes(const pbl_graph *g, pbl_value v, int64_t align)
{
    uint64_t b = (uint64_t)pbl__meta_bytes(&g->values[v].meta), al = (uint64_t)align;
    return (b + al - 1) / al * al;
}

/* MXNet's mirror rule: outputs of cheap forward nodes (pbl__cost_cheap: maps, copies and
 * layout changes) are recomputed from their inputs; products, convolutions, normalisation,
 * pooling, softmax, losses, reductions and dropout keep theirs (MXNet's need_mirror keeps
 * Convolution, FullyConnected, Concat, SoftmaxOutput, BatchNorm and Dropout). */
static void choose_mirror(const pbl_graph *g, const pbl__rc_info *info, uint8_t *drop)
{
    memset(drop, 0, (size_t)g->n_values);
    for (pbl_node i = 0; i < g->n_nodes; i++) {
        const pbl__node *n = &g->nodes[i];
        pbl__cost c = pbl__node_cost(g, i);
        if (!info->forward[i] || !pbl__cost_cheap(&c))
            continue;
        for (int32_t k = 0; k < n->n_out; k++)
            drop[n->out[k]] = info->recomputable[n->out[k]];
    }
}

/* Chen et al. 2016, Algorithm 2: walking the forward values in order, sum their bytes; a
 * droppable value that takes the sum past B is kept (a segment ends there) and the sum
 * restarts; every other forward value is dropped (and recomputed only if needed). B = 0 keeps
 * every candidate: the plain graph. */
static void choose_greedy(const pbl_graph *g, const pbl__rc_info *info, uint64_t B, int64_t align, uint8_t *drop)
{
    memset(drop, 0, (size_t)g->n_values);
    uint64_t temp = 0;
    for (pbl_value v = 0; v < g->n_values; v++) {
        if (!info->recomputable[v])
            continue;
        temp += value_bytes(g, v, align);
        if (info->candidate[v] && temp > B)
            temp = 0;
        else
            drop[v] = 1;
    }
}

/* Chen et al. 2016, section 4.1: cut the forward values, in order, into k segments of equal
 * bytes; the first candidate at or past each cut is kept. */
static void choose_sqrt(const pbl_graph *g, const pbl__rc_info *info, int32_t k, int64_t align, uint8_t *drop)
{
    memset(drop, 0, (size_t)g->n_values);
    double total = 0, prefix = 0;
    for (pbl_value v = 0; v < g->n_values; v++)
        if (info->recomputable[v])
            total += (double)value_bytes(g, v, align);
    int32_t next = 1; /* the next cut: next/k of the bytes */
    for (pbl_value v = 0; v < g->n_values; v++) {
        if (!info->recomputable[v])
            continue;
        prefix += (double)value_bytes(g, v, align);
        if (info->candidate[v] && next < k && prefix * k >= next * total) {
            while (next < k && prefix * k >= next * total)
                next++;
            continue; /* kept */
        }
        drop[v] = 1;
    }
}

/* One rewrite, planned. */
typedef struct trial {
    pbl_graph *g;
    uint8_t   *drop;     /* per value of the input graph */
    uint64_t   arena, B;
    int32_t    recomputed;
    double     extra_flops;
} trial;

typedef struct pass {
    const pbl_graph             *g;
    const pbl_recompute_options *o;
    pbl__mem                     m;
    pbl__rc_info                 info;
    int32_t                      plans_tried;
    char                        *err;
    size_t                       errlen;
} pass;

static void trial_clear(trial *t)
{
    pbl_graph_destroy(t->g);
    t->g = NULL;
}

/* Rewrites p->g with t->drop and plans the result into t. */
static pbl_status trial_run(pass *p, trial *t)
{
    pbl_status s = pbl__rc_rewrite(p->g, &p->info, t->drop, p->o->allocator, &t->g, &t->recomputed,
                                   &t->extra_flops, p->err, p->errlen);
    if (s == PBL_OK)
        s = measure(t->g, p->o, &t->arena, p->err, p->errlen);
    if (s != PBL_OK)
        trial_clear(t);
    p->plans_tried++;
    return s;
}

/* Is a better answer to "fit the budget with the least extra work" than b? */
static int better(const trial *a, const trial *b, uint64_t budget)
{
    int fa = a->arena <= budget, fb = b->arena <= budget;
    if (fa != fb)
        return fa;
    if (!fa) /* neither fits: the smaller arena is the better report */
        return a->arena < b->arena;
    if (a->extra_flops != b->extra_flops)
        return a->extra_flops < b->extra_flops;
    return a->arena < b->arena;
}

/* Algorithm 2 over B = 0 (keep everything) and a geometric grid from the smallest droppable
 * value to all forward bytes; keeps in *best the plan `better` prefers. */
static pbl_status search_budget(pass *p, trial *best, trial *cur, uint64_t budget)
{
    const pbl_graph *g = p->g;
    uint64_t lo = 0, hi = 0;
    for (pbl_value v = 0; v < g->n_values; v++) {
        if (!p->info.recomputable[v])
            continue;
        uint64_t b = value_bytes(g, v, p->o->align);
        hi += b;
        if (p->info.candidate[v] && (lo == 0 || b < lo))
            lo = b;
    }
    int32_t points = p->o->search_points;
    int have = 0;
    uint8_t *last = pbl__mem_alloc(&p->m, (size_t)(g->n_values ? g->n_values : 1));
    if (!last) {
        snprintf(p->err, p->errlen, "out of memory");
        return PBL_ERR_NOMEM;
    }
    pbl_status s = PBL_OK;
    for (int32_t j = 0; j < points; j++) {
        uint64_t B = 0;
        if (j > 0 && lo > 0)
            B = points > 2 ? (uint64_t)((double)lo * pow((double)hi / (double)lo, (double)(j - 1) / (points - 2)))
                           : hi;
        choose_greedy(g, &p->info, B, p->o->align, cur->drop);
        /* neighbouring B often cut the same segments: plan each distinct choice once */
        if (j > 0 && memcmp(cur->drop, last, (size_t)g->n_values) == 0)
            continue;
        memcpy(last, cur->drop, (size_t)g->n_values);
        cur->B = B;
        s = trial_run(p, cur);
        if (s != PBL_OK)
            break;
        if (!have || better(cur, best, budget)) {
            trial t = *best;
            *best = *cur;
            *cur = t;
            have = 1;
        }
        trial_clear(cur);
    }
    pbl__mem_free(&p->m, last, (size_t)(g->n_values ? g->n_values : 1));
    return s;
}

static const char *method_name(pbl_recompute_method m)
{
    switch (m) {
    case PBL_RECOMPUTE_MIRROR: return "mirror";
    case PBL_RECOMPUTE_SQRT: return "sqrt";
    case PBL_RECOMPUTE_BUDGET: return "budget";
    }
    return "?";
}

static pbl_status fill_report(pass *p, const trial *t, pbl_recompute_report *r)
{
    const pbl_graph *g = p->g;
    r->candidates = p->info.n_candidates;
    r->recomputed = t->recomputed;
    r->extra_flops = t->extra_flops;
    r->arena = t->arena;
    r->segment_bytes = t->B;
    r->plans_tried = p->plans_tried;
    r->forward_flops = r->step_flops = 0;
    for (pbl_node i = 0; i < g->n_nodes; i++) {
        double f = (double)pbl__node_cost(g, i).flops;
        r->step_flops += f;
        if (p->info.forward[i])
            r->forward_flops += f;
    }
    int32_t n = 0;
    for (pbl_value v = 0; v < g->n_values; v++)
        n += p->info.candidate[v] && !t->drop[v];
    r->checkpoints = pbl__mem_alloc(&p->m, (size_t)(n ? n : 1) * sizeof *r->checkpoints);
    if (!r->checkpoints) {
        snprintf(p->err, p->errlen, "out of memory");
        return PBL_ERR_NOMEM;
    }
    r->n_checkpoints = n;
    n = 0;
    for (pbl_value v = 0; v < g->n_values; v++)
        if (p->info.candidate[v] && !t->drop[v])
            r->checkpoints[n++] = v;
    return PBL_OK;
}

PBL__API pbl_status pbl_graph_recompute(const pbl_graph *g, const pbl_recompute_options *opt, pbl_graph **out,
                                        pbl_recompute_report *report, char *err, size_t errlen)
{
    char scratch[8];
    if (!err || !errlen) {
        err = scratch;
        errlen = sizeof scratch;
    }
    err[0] = '\0';
    if (out)
        *out = NULL;
    pbl_recompute_options o = opt ? *opt : pbl_recompute_options_default();
    if (report)
        *report = (pbl_recompute_report){ .method = o.method, .allocator = o.allocator };
    if (!g || !out) {
        snprintf(err, errlen, "recompute: the graph and out must not be NULL");
        return PBL_ERR_INVALID_ARG;
    }
    if ((int)o.method < PBL_RECOMPUTE_MIRROR || (int)o.method > PBL_RECOMPUTE_BUDGET || o.segments < 0 ||
        o.search_points < 2 || o.align <= 0 || (o.align & (o.align - 1))) {
        snprintf(err, errlen, "recompute: bad options (method %d, segments %d, search_points %d, align %lld)",
                 (int)o.method, (int)o.segments, (int)o.search_points, (long long)o.align);
        return PBL_ERR_INVALID_ARG;
    }
    pass p = { .g = g, .o = &o, .err = err, .errlen = errlen };
    pbl__mem_init(&p.m, o.allocator);
    size_t nv = (size_t)(g->n_values ? g->n_values : 1);
    trial best = { 0 }, cur = { 0 };
    uint64_t arena_plain = 0;
    pbl_status s = measure(g, &o, &arena_plain, err, errlen);
    if (s != PBL_OK)
        return s;
    s = PBL_ERR_NOMEM;
    best.drop = pbl__mem_alloc(&p.m, nv);
    cur.drop = pbl__mem_alloc(&p.m, nv);
    if (!best.drop || !cur.drop || pbl__rc_info_build(g, &p.m, &p.info) != PBL_OK) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    switch (o.method) {
    case PBL_RECOMPUTE_MIRROR:
        choose_mirror(g, &p.info, best.drop);
        s = trial_run(&p, &best);
        break;
    case PBL_RECOMPUTE_SQRT: {
        int32_t k = o.segments ? o.segments : (int32_t)lround(sqrt((double)p.info.n_candidates));
        choose_sqrt(g, &p.info, k > 0 ? k : 1, o.align, best.drop);
        s = trial_run(&p, &best);
        break;
    }
    case PBL_RECOMPUTE_BUDGET:
        s = search_budget(&p, &best, &cur, o.budget ? o.budget : UINT64_MAX);
        break;
    }
    if (s != PBL_OK)
        goto done;
    if (report) {
        s = fill_report(&p, &best, report);
        report->arena_plain = arena_plain;
        if (s != PBL_OK)
            goto done;
    }
    if (o.budget && best.arena > o.budget) {
        snprintf(err, errlen,
                 "recompute (%s): a budget of %llu bytes is below the smallest arena reached, %llu bytes "
                 "(plain %llu; B %llu, %d plans tried)",
                 method_name(o.method), (unsigned long long)o.budget, (unsigned long long)best.arena,
                 (unsigned long long)arena_plain, (unsigned long long)best.B, (int)p.plans_tried);
        s = PBL_ERR_BUDGET;
        goto done;
    }
    *out = best.g;
    best.g = NULL;
done:
    trial_clear(&best);
    trial_clear(&cur);
    pbl__mem_free(&p.m, best.drop, nv);
    pbl__mem_free(&p.m, cur.drop, nv);
    pbl__rc_info_free(&p.info, &p.m);
    if (s != PBL_OK && s != PBL_ERR_BUDGET && report)
        pbl_recompute_report_free(report);
    return s;
}
