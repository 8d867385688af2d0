/*
 * pbl_graph_schedule (pebble/schedule.h): candidate orders scored by the memory model, the
 * exact search on small graphs, and the winner measured again by pbl_graph_liveness itself,
 * so that what is reported is the bound the planners will see.
 */
#include <stdio.h>
#include <string.h>

#include "graph/base/errmsg.h"
#include "graph/ir/registry.h"
#include "graph/ir/schedule.h"
#include "graph/schedule/model.h"
#include "pebble/liveness.h"
#include "pebble/plan.h"
#include "pebble/schedule.h"

static const char *const kind_names[] = { "program", "min_peak" };

PBL__API const char *pbl_schedule_kind_name(pbl_schedule_kind k)
{
    return (int)k >= 0 && (int)k < 2 ? kind_names[k] : NULL;
}

PBL__API int32_t pbl_schedule_kind_count(void)
{
    return 2;
}

PBL__API pbl_status pbl_schedule_kind_parse(const char *name, pbl_schedule_kind *out)
{
    for (int32_t i = 0; name && i < 2; i++) {
        if (strcmp(name, kind_names[i]) == 0) {
            *out = (pbl_schedule_kind)i;
            return PBL_OK;
        }
    }
    return PBL_ERR_NOT_FOUND;
}

PBL__API pbl_schedule_options pbl_schedule_options_default(void)
{
    pbl_schedule_options o = { .allocator = NULL, .kind = PBL_SCHEDULE_PROGRAM, .align = 64, .inplace = 1,
                               .targets = NULL, .n_targets = 0, .exact_max_nodes = 40,
                               .exact_max_states = INT64_C(1) << 20 };
    return o;
}

PBL__API void pbl_schedule_free(pbl_schedule *s)
{
    if (!s)
        return;
    pbl__mem m;
    pbl__mem_init(&m, s->allocator);
    pbl__mem_free(&m, s->order, (size_t)(s->n_steps ? s->n_steps : 1) * sizeof *s->order);
    memset(s, 0, sizeof *s);
}

/* ---- the heuristics: each writes a whole order of local ids ---- */

enum { LIST_LPMF, LIST_FREE };

/* Node v's step from `live`, and with `lookahead` the updates it alone holds back run right
 * after it (the list scheduler with updates first does run them next): the pair is scored
 * as one, so a weight gradient whose update frees it at once is not put off behind a node
 * whose bytes stay. cnt is left as it was found. */
static void score(const pbl__sched_model *md, int32_t *cnt, const int32_t *indeg, int64_t live, int32_t v,
                  int lookahead, int64_t *peak, int64_t *after)
{
    pbl__sched_cursor c = { .cnt = cnt };
    pbl__sched_step(md, &c, live, v, peak, after);
    if (!lookahead)
        return;
    int applied = 0;
    for (int32_t e = md->succ_start[v]; e < md->succ_start[v + 1]; e++) {
        int32_t u = md->succ[e], from_v = 0;
        if (!md->urgent[u])
            continue;
        for (int32_t f = md->pred_start[u]; f < md->pred_start[u + 1]; f++)
            from_v += md->pred[f] == v;
        if (indeg[u] != from_v || (e > md->succ_start[v] && md->succ[e - 1] == u))
            continue; /* u waits for another node too, or was scored already */
        if (!applied) {
            for (int32_t k = md->read_start[v]; k < md->read_start[v + 1]; k++)
                cnt[md->read_rec[k]]--;
            applied = 1;
        }
        int64_t p, a;
        pbl__sched_step(md, &c, *after, u, &p, &a);
        if (p > *peak)
            *peak = p;
        *after = a;
        for (int32_t k = md->read_start[u]; k < md->read_start[u + 1]; k++)
            cnt[md->read_rec[k]]--; /* the next update is scored after u; restored below */
    }
    if (applied) {
        for (int32_t e = md->succ_start[v]; e < md->succ_start[v + 1]; e++) {
            int32_t u = md->succ[e], from_v = 0;
            if (!md->urgent[u])
                continue;
            for (int32_t f = md->pred_start[u]; f < md->pred_start[u + 1]; f++)
                from_v += md->pred[f] == v;
            if (indeg[u] != from_v || (e > md->succ_start[v] && md->succ[e - 1] == u))
                continue;
            for (int32_t k = md->read_start[u]; k < md->read_start[u + 1]; k++)
                cnt[md->read_rec[k]]++;
        }
        for (int32_t k = md->read_start[v]; k < md->read_start[v + 1]; k++)
            cnt[md->read_rec[k]]++;
    }
}

/* A list scheduler: among the ready nodes (updates first when `updates`), the one whose step
 * peaks lowest (LPMF) or that leaves the fewest bytes live (FREE), the other as the tie
 * break, then program order; with `lookahead`, each node scored with the updates it frees. */
static pbl_status list_order(const pbl__sched_model *md, int mode, int updates, int lookahead, pbl__mem *m,
                             int32_t *order)
{
    int32_t n = md->n;
    size_t bn = (size_t)(n + 1) * sizeof(int32_t), br = (size_t)(md->n_rec + 1) * sizeof(int32_t);
    int32_t *indeg = pbl__mem_calloc(m, bn), *ready = pbl__mem_alloc(m, bn), *cnt = pbl__mem_alloc(m, br);
    pbl_status s = PBL_ERR_NOMEM;
    if (!indeg || !ready || !cnt)
        goto done;
    memcpy(cnt, md->rec_readers, (size_t)md->n_rec * sizeof *cnt);
    int32_t nr = 0;
    for (int32_t v = 0; v < n; v++) {
        indeg[v] = md->pred_start[v + 1] - md->pred_start[v];
        if (indeg[v] == 0)
            ready[nr++] = v;
    }
    pbl__sched_cursor c = { .cnt = cnt };
    int64_t live = 0;
    for (int32_t t = 0; t < n; t++) {
        int32_t best = -1;
        int64_t bp = 0, ba = 0;
        int bu = 0;
        for (int32_t k = 0; k < nr; k++) {
            int32_t v = ready[k];
            int64_t p, a;
            score(md, cnt, indeg, live, v, lookahead, &p, &a);
            int u = updates && md->urgent[v];
            int64_t k1 = mode == LIST_LPMF ? p : a, k2 = mode == LIST_LPMF ? a : p;
            int64_t b1 = mode == LIST_LPMF ? bp : ba, b2 = mode == LIST_LPMF ? ba : bp;
            int better = best < 0 || u > bu ||
                         (u == bu && (k1 < b1 || (k1 == b1 && (k2 < b2 || (k2 == b2 && v < ready[best])))));
            if (better) {
                best = k;
                bp = p;
                ba = a;
                bu = u;
            }
        }
        int32_t v = ready[best];
        ready[best] = ready[--nr];
        order[t] = v;
        pbl__sched_step(md, &c, live, v, &bp, &ba); /* the node alone: its updates come next */
        live = ba;
        for (int32_t k = md->read_start[v]; k < md->read_start[v + 1]; k++)
            cnt[md->read_rec[k]]--;
        for (int32_t e = md->succ_start[v]; e < md->succ_start[v + 1]; e++)
            if (--indeg[md->succ[e]] == 0)
                ready[nr++] = md->succ[e];
    }
    s = PBL_OK;
done:
    pbl__mem_free(m, indeg, bn);
    pbl__mem_free(m, ready, bn);
    pbl__mem_free(m, cnt, br);
    return s;
}

/* Breadth first: by depth (the longest path from a source), then program order. Local ids
 * are a topological order, so depths come in one pass and sorting by them keeps every edge. */
static pbl_status bfs_order(const pbl__sched_model *md, pbl__mem *m, int32_t *order)
{
    int32_t n = md->n;
    size_t bn = (size_t)(n + 1) * sizeof(int32_t);
    int32_t *depth = pbl__mem_calloc(m, bn), *count = pbl__mem_calloc(m, bn + sizeof(int32_t));
    if (!depth || !count) {
        pbl__mem_free(m, depth, bn);
        pbl__mem_free(m, count, bn + sizeof(int32_t));
        return PBL_ERR_NOMEM;
    }
    for (int32_t v = 0; v < n; v++)
        for (int32_t e = md->pred_start[v]; e < md->pred_start[v + 1]; e++)
            if (depth[md->pred[e]] + 1 > depth[v])
                depth[v] = depth[md->pred[e]] + 1;
    /* counting sort, stable: program order within a depth */
    for (int32_t v = 0; v < n; v++)
        count[depth[v] + 1]++;
    for (int32_t d = 0; d < n; d++)
        count[d + 1] += count[d];
    for (int32_t v = 0; v < n; v++)
        order[count[depth[v]]++] = v;
    pbl__mem_free(m, depth, bn);
    pbl__mem_free(m, count, bn + sizeof(int32_t));
    return PBL_OK;
}

/* Depth first from the sinks, in program order: before a node, its inputs' branches, the one
 * that holds the most bytes (its own outputs plus its heaviest input's, recursively) first;
 * after a node, any update it made ready (so gradients die early, as in program order). */
static pbl_status dfs_order(const pbl__sched_model *md, pbl__mem *m, int32_t *order)
{
    int32_t n = md->n, got = 0;
    size_t bn = (size_t)(n + 1) * sizeof(int32_t), bw = (size_t)(n + 1) * sizeof(int64_t);
    int64_t *w = pbl__mem_calloc(m, bw);
    int32_t *stack = pbl__mem_alloc(m, 2 * bn), top = 0;
    uint8_t *emitted = pbl__mem_calloc(m, (size_t)n + 1);
    pbl_status s = PBL_ERR_NOMEM;
    if (!w || !stack || !emitted)
        goto done;
    for (int32_t v = 0; v < n; v++) {
        int64_t own = 0, most = 0;
        for (int32_t k = md->new_start[v]; k < md->new_start[v + 1]; k++)
            own += md->rec_size[md->new_rec[k]];
        for (int32_t e = md->pred_start[v]; e < md->pred_start[v + 1]; e++)
            if (w[md->pred[e]] > most)
                most = w[md->pred[e]];
        w[v] = own + most;
    }
    for (int32_t root = 0; root < n; root++) {
        if (emitted[root] || md->succ_start[root + 1] > md->succ_start[root])
            continue; /* sinks only: the rest are reached from them */
        stack[top++] = root;
        while (top > 0) {
            int32_t v = stack[top - 1], pick = -1;
            for (int32_t e = md->pred_start[v]; e < md->pred_start[v + 1]; e++) {
                int32_t p = md->pred[e];
                if (!emitted[p] && (pick < 0 || w[p] > w[pick] || (w[p] == w[pick] && p < pick)))
                    pick = p;
            }
            if (pick >= 0) {
                stack[top++] = pick;
                continue;
            }
            top--;
            if (emitted[v])
                continue;
            emitted[v] = 1;
            order[got++] = v;
            for (int32_t e = md->succ_start[v]; e < md->succ_start[v + 1]; e++) {
                int32_t u = md->succ[e], ready = md->urgent[u] && !emitted[u];
                for (int32_t f = md->pred_start[u]; ready && f < md->pred_start[u + 1]; f++)
                    ready = emitted[md->pred[f]];
                if (ready && top < 2 * n)
                    stack[top++] = u;
            }
        }
    }
    s = got == n ? PBL_OK : PBL_ERR_INVALID_ARG; /* every node is some sink's ancestor */
done:
    pbl__mem_free(m, w, bw);
    pbl__mem_free(m, stack, 2 * bn);
    pbl__mem_free(m, emitted, (size_t)n + 1);
    return s;
}

/* ---- measuring with liveness itself ---- */

static pbl_status liveness_peak(const pbl_graph *g, const pbl_schedule_options *o, const pbl_node *order, int32_t n,
                                int64_t *peak, char *err, size_t errlen)
{
    pbl_liveness_options lo = pbl_liveness_options_default();
    lo.allocator = o->allocator;
    lo.align = o->align;
    lo.inplace = o->inplace;
    lo.targets = o->targets;
    lo.n_targets = o->n_targets;
    lo.order = order;
    lo.n_order = n;
    pbl_graph_records gr;
    pbl_status s = pbl_graph_liveness(g, &lo, &gr, err, errlen);
    if (s != PBL_OK)
        return s;
    *peak = pbl_records_lower_bound(gr.records, gr.n_records);
    pbl_graph_records_free(&gr);
    return *peak < 0 ? PBL_ERR_NOMEM : PBL_OK;
}

typedef pbl_status (*heuristic_fn)(const pbl__sched_model *md, pbl__mem *m, int32_t *order);

static pbl_status lpmf(const pbl__sched_model *md, pbl__mem *m, int32_t *o) { return list_order(md, LIST_LPMF, 0, 0, m, o); }
static pbl_status lpmf_u(const pbl__sched_model *md, pbl__mem *m, int32_t *o) { return list_order(md, LIST_LPMF, 1, 0, m, o); }
static pbl_status lpmf_l(const pbl__sched_model *md, pbl__mem *m, int32_t *o) { return list_order(md, LIST_LPMF, 1, 1, m, o); }
static pbl_status ffirst(const pbl__sched_model *md, pbl__mem *m, int32_t *o) { return list_order(md, LIST_FREE, 0, 0, m, o); }
static pbl_status ffirst_u(const pbl__sched_model *md, pbl__mem *m, int32_t *o) { return list_order(md, LIST_FREE, 1, 0, m, o); }
static pbl_status ffirst_l(const pbl__sched_model *md, pbl__mem *m, int32_t *o) { return list_order(md, LIST_FREE, 1, 1, m, o); }

static const struct {
    const char  *name;
    heuristic_fn fn;
} heuristics[] = { { "lpmf", lpmf },
                   { "lpmf-updates", lpmf_u },
                   { "lpmf-lookahead", lpmf_l },
                   { "free-first", ffirst },
                   { "free-first-updates", ffirst_u },
                   { "free-first-lookahead", ffirst_l },
                   { "bfs", bfs_order },
                   { "dfs", dfs_order } };

/* The best order of the model's nodes (local ids into best[]): program order, each
 * heuristic, then the exact search when the graph is small enough. */
static pbl_status search_min_peak(const pbl__sched_model *md, const pbl_schedule_options *o, pbl__mem *m,
                                  int32_t *best, pbl_schedule *out)
{
    int32_t n = md->n;
    size_t bn = (size_t)(n ? n : 1) * sizeof(int32_t);
    int32_t *cand = pbl__mem_alloc(m, bn);
    if (!cand)
        return PBL_ERR_NOMEM;
    pbl_status s = PBL_OK;
    for (int32_t t = 0; t < n; t++)
        best[t] = t;
    int64_t best_peak = pbl__sched_peak(md, best, m);
    out->method = "program";
    out->n_candidates = 1;
    for (size_t h = 0; h < sizeof heuristics / sizeof heuristics[0] && best_peak >= 0; h++) {
        if ((s = heuristics[h].fn(md, m, cand)) != PBL_OK)
            goto done;
        int64_t p = pbl__sched_peak(md, cand, m);
        out->n_candidates++;
        if (p < 0) {
            s = PBL_ERR_NOMEM;
            goto done;
        }
        if (p < best_peak) {
            best_peak = p;
            memcpy(best, cand, bn);
            out->method = heuristics[h].name;
        }
    }
    if (best_peak < 0) {
        s = PBL_ERR_NOMEM;
        goto done;
    }
    if (n > 0 && n <= o->exact_max_nodes && n <= 64) {
        int64_t p = best_peak;
        int rc = pbl__sched_exact(md, best_peak, o->exact_max_states, m, cand, &p);
        out->n_candidates++;
        if (rc == -2) {
            s = PBL_ERR_NOMEM;
            goto done;
        }
        if (rc == 1) {
            memcpy(best, cand, bn);
            out->method = "exact";
        }
        out->exact = rc >= 0;
    }
done:
    pbl__mem_free(m, cand, bn);
    return s;
}

PBL__API pbl_status pbl_graph_schedule(const pbl_graph *g, const pbl_schedule_options *opt, pbl_schedule *out,
                                       char *err, size_t errlen)
{
    char why[512] = "";
    pbl__errclear(err, errlen);
    if (!g || !out)
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "schedule: no %s", g ? "output" : "graph");
    memset(out, 0, sizeof *out);
    pbl_schedule_options o = opt ? *opt : pbl_schedule_options_default();
    if (!pbl_schedule_kind_name(o.kind))
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "schedule: kind %d is not one of program, min_peak",
                         (int)o.kind);
    if (o.align <= 0)
        o.align = 1;
    pbl__mem m;
    pbl__mem_init(&m, o.allocator);
    pbl_status s = pbl__graph_check(g, &m, err, errlen);
    if (s != PBL_OK)
        return s;
    int32_t *program = NULL, n = 0, *best = NULL;
    pbl__sched_model md;
    memset(&md, 0, sizeof md);
    s = pbl__graph_schedule(g, o.targets, o.n_targets, &m, &program, &n, why, sizeof why);
    if (s != PBL_OK)
        goto done;
    out->allocator = o.allocator;
    out->n_steps = n;
    out->order = pbl__mem_alloc(&m, (size_t)(n ? n : 1) * sizeof *out->order);
    best = pbl__mem_alloc(&m, (size_t)(n ? n : 1) * sizeof *best);
    s = PBL_ERR_NOMEM;
    snprintf(why, sizeof why, "out of memory");
    if (!out->order || !best)
        goto done;
    memcpy(out->order, program, (size_t)n * sizeof *out->order);
    out->method = "program";
    out->n_candidates = 1;
    out->floor = -1;
    if ((s = liveness_peak(g, &o, program, n, &out->program_peak, why, sizeof why)) != PBL_OK)
        goto done;
    out->peak = out->program_peak;
    if (o.kind == PBL_SCHEDULE_MIN_PEAK) {
        if ((s = pbl__sched_model_build(g, program, n, o.align, o.inplace, &m, &md)) != PBL_OK) {
            snprintf(why, sizeof why, "out of memory");
            goto done;
        }
        pbl_schedule found = { 0 };
        if ((s = search_min_peak(&md, &o, &m, best, &found)) != PBL_OK) {
            snprintf(why, sizeof why, "out of memory");
            goto done;
        }
        for (int32_t t = 0; t < n; t++)
            best[t] = md.node[best[t]];
        int64_t peak;
        if ((s = liveness_peak(g, &o, best, n, &peak, why, sizeof why)) != PBL_OK)
            goto done;
        out->n_candidates = found.n_candidates;
        out->exact = found.exact;
        out->floor = pbl__sched_floor(&md, &m);
        if (out->floor == -2) {
            s = PBL_ERR_NOMEM;
            snprintf(why, sizeof why, "out of memory");
            goto done;
        }
        if (peak < out->program_peak) { /* never worse than program order, measured */
            memcpy(out->order, best, (size_t)n * sizeof *out->order);
            out->peak = peak;
            out->method = found.method;
        }
        if (out->floor == out->peak) /* (test_schedule checks floor <= every order's peak) */
            out->exact = 1;
    }
    s = PBL_OK;
done:
    pbl__sched_model_free(&md, &m);
    if (program)
        pbl__schedule_free(g, &m, program);
    pbl__mem_free(&m, best, (size_t)(n ? n : 1) * sizeof *best);
    if (s != PBL_OK) {
        pbl__errf(err, errlen, s, "%s", why);
        pbl_schedule_free(out);
    }
    return s;
}
