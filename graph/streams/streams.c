/*
 * Colouring a schedule into streams (see pebble/streams.h), after NNVM's ColorNodeGroup
 * (nnvm/include/nnvm/graph_algorithm.h): up to k-1 times, find the path through the
 * dependency DAG whose node weights sum highest, give its still-weighted nodes the next
 * colour and zero their weights; the nodes left get the last colour. The first colour is thus
 * the critical path, and each later colour the heaviest chain of work the earlier ones left.
 *
 * igraph holds the DAG (one vertex per step, the dependency edges data and write-after-read)
 * and gives its topological order and in-adjacency; each path is then a dynamic programme
 * over that order, O(V + E) per colour. Waits come from pbl__stream_reduce over the
 * dependency edges that cross streams.
 */
#include <stdio.h>
#include <string.h>

#include <igraph.h>

#include "graph/base/errmsg.h"
#include "graph/base/igraph_lock.h"
#include "graph/ir/schedule.h"
#include "graph/streams/stream_internal.h"

PBL__API pbl_stream_options pbl_stream_options_default(void)
{
    pbl_stream_options o = { .allocator = NULL, .n_streams = 1, .cost = NULL, .cost_user = NULL,
                             .targets = NULL, .n_targets = 0 };
    return o;
}

PBL__API void pbl_stream_plan_free(pbl_stream_plan *sp)
{
    if (!sp)
        return;
    pbl__mem m;
    pbl__mem_init(&m, sp->allocator);
    size_t n = pbl__stream_n(sp);
    pbl__stream_waits_free(sp, &m);
    pbl__mem_free(&m, sp->schedule, n * sizeof *sp->schedule);
    pbl__mem_free(&m, sp->stream, n * sizeof *sp->stream);
    pbl__mem_free(&m, sp->cost, n * sizeof *sp->cost);
    memset(sp, 0, sizeof *sp);
}

static pbl_status from_igraph(igraph_error_t e) { return e == IGRAPH_ENOMEM ? PBL_ERR_NOMEM : PBL_ERR_UNSUPPORTED; }

/* dependency edges between scheduled steps, as CSR over the later step: need[] */
typedef struct step_deps {
    int32_t *start, *pred;
    int32_t  n_edges;
} step_deps;

static pbl_status build_step_deps(const pbl_graph *g, const int32_t *order, int32_t n, pbl__mem *m, step_deps *sd)
{
    memset(sd, 0, sizeof *sd);
    pbl__deps d;
    if (pbl__deps_build(g, m, &d) != PBL_OK)
        return PBL_ERR_NOMEM;
    size_t nn = (size_t)(g->n_nodes ? g->n_nodes : 1);
    int32_t *step_of = pbl__mem_alloc(m, nn * sizeof *step_of);
    sd->start = pbl__mem_calloc(m, ((size_t)n + 1) * sizeof *sd->start);
    sd->pred = pbl__mem_alloc(m, (size_t)(d.n_edges ? d.n_edges : 1) * sizeof *sd->pred);
    if (!step_of || !sd->start || !sd->pred) {
        pbl__mem_free(m, step_of, nn * sizeof *step_of);
        pbl__mem_free(m, sd->start, ((size_t)n + 1) * sizeof *sd->start);
        pbl__mem_free(m, sd->pred, (size_t)(d.n_edges ? d.n_edges : 1) * sizeof *sd->pred);
        pbl__deps_free(&d, m);
        memset(sd, 0, sizeof *sd);
        return PBL_ERR_NOMEM;
    }
    for (int32_t i = 0; i < g->n_nodes; i++)
        step_of[i] = -1;
    for (int32_t t = 0; t < n; t++)
        step_of[order[t]] = t;
    int32_t k = 0;
    for (int32_t t = 0; t < n; t++) {
        sd->start[t] = k;
        int32_t v = order[t];
        for (int32_t e = d.pred_start[v]; e < d.pred_start[v + 1]; e++)
            if (step_of[d.pred[e]] >= 0) /* a scheduled node's predecessors are scheduled */
                sd->pred[k++] = step_of[d.pred[e]];
    }
    sd->start[n] = k;
    sd->n_edges = d.n_edges;
    pbl__mem_free(m, step_of, nn * sizeof *step_of);
    pbl__deps_free(&d, m);
    return PBL_OK;
}

static void step_deps_free(step_deps *sd, int32_t n, pbl__mem *m)
{
    pbl__mem_free(m, sd->start, ((size_t)n + 1) * sizeof *sd->start);
    pbl__mem_free(m, sd->pred, (size_t)(sd->n_edges ? sd->n_edges : 1) * sizeof *sd->pred);
}

/* NNVM's colouring of the n steps into at most k colours: colour[t]; returns the colours used
 * (renumbered densely, in the order they were handed out) through *used. */
static pbl_status colour_steps(const step_deps *sd, int32_t n, const int64_t *cost, int32_t k, pbl__mem *m,
                               int32_t *colour, int32_t *used)
{
    size_t nn = (size_t)(n ? n : 1);
    int64_t *w = pbl__mem_alloc(m, nn * sizeof *w), *dist = pbl__mem_alloc(m, nn * sizeof *dist);
    int32_t *from = pbl__mem_alloc(m, nn * sizeof *from);
    igraph_integer_t *edges = pbl__mem_alloc(m, (size_t)(sd->start[n] ? sd->start[n] : 1) * 2 * sizeof *edges);
    pbl_status s = PBL_ERR_NOMEM;
    if (!w || !dist || !from || !edges)
        goto free_ours;
    for (int32_t t = 0, e = 0; t < n; t++)
        for (int32_t i = sd->start[t]; i < sd->start[t + 1]; i++, e++) {
            edges[2 * e] = sd->pred[i];
            edges[2 * e + 1] = t;
        }
    memcpy(w, cost, (size_t)n * sizeof *w);
    for (int32_t t = 0; t < n; t++)
        colour[t] = -1;

    igraph_vector_int_t ev = { 0 }, topo;
    igraph_adjlist_t in;
    igraph_t dag;
    igraph_vector_int_view(&ev, edges, (igraph_integer_t)(2 * sd->start[n]));
    pbl__igraph_lock();
    igraph_error_t e = igraph_create(&dag, &ev, (igraph_integer_t)n, IGRAPH_DIRECTED);
    if (e != IGRAPH_SUCCESS) {
        s = from_igraph(e);
        goto unlock;
    }
    e = igraph_vector_int_init(&topo, 0);
    if (e != IGRAPH_SUCCESS) {
        s = from_igraph(e);
        goto destroy_dag;
    }
    e = igraph_topological_sorting(&dag, &topo, IGRAPH_OUT);
    if (e == IGRAPH_SUCCESS && igraph_vector_int_size(&topo) != n)
        e = IGRAPH_EINVAL; /* not a DAG: cannot happen for a schedule's dependencies */
    if (e != IGRAPH_SUCCESS) {
        s = from_igraph(e);
        goto destroy_topo;
    }
    e = igraph_adjlist_init(&dag, &in, IGRAPH_IN, IGRAPH_LOOPS_ONCE, IGRAPH_MULTIPLE);
    if (e != IGRAPH_SUCCESS) {
        s = from_igraph(e);
        goto destroy_topo;
    }
    int32_t c = 0;
    for (; c < k - 1; c++) {
        /* dist[v]: the heaviest path ending at v; from[v]: its previous vertex */
        int32_t best = -1;
        for (int32_t i = 0; i < n; i++) {
            int32_t v = (int32_t)VECTOR(topo)[i];
            igraph_vector_int_t *p = igraph_adjlist_get(&in, v);
            dist[v] = 0;
            from[v] = -1;
            for (igraph_integer_t j = 0; j < igraph_vector_int_size(p); j++) {
                int32_t u = (int32_t)VECTOR(*p)[j];
                if (dist[u] > dist[v]) {
                    dist[v] = dist[u];
                    from[v] = u;
                }
            }
            dist[v] += w[v];
            if (best < 0 || dist[v] > dist[best])
                best = v;
        }
        if (best < 0 || dist[best] == 0)
            break; /* nothing weighted is left */
        for (int32_t v = best; v >= 0; v = from[v])
            if (w[v] != 0) {
                colour[v] = c;
                w[v] = 0;
            }
    }
    for (int32_t t = 0; t < n; t++)
        if (colour[t] < 0)
            colour[t] = c;
    s = PBL_OK;
    igraph_adjlist_destroy(&in);
destroy_topo:
    igraph_vector_int_destroy(&topo);
destroy_dag:
    igraph_destroy(&dag);
unlock:
    pbl__igraph_unlock();
    if (s == PBL_OK) {
        /* dense numbering: drop colours no step got (the last one when paths took all) */
        int32_t map[PBL_MAX_STREAMS + 1];
        for (int32_t i = 0; i <= PBL_MAX_STREAMS; i++)
            map[i] = -1;
        for (int32_t t = 0; t < n; t++)
            map[colour[t]] = 0;
        int32_t u = 0;
        for (int32_t i = 0; i <= PBL_MAX_STREAMS; i++)
            if (map[i] == 0)
                map[i] = u++;
        for (int32_t t = 0; t < n; t++)
            colour[t] = map[colour[t]];
        *used = u ? u : 1;
    }
free_ours:
    pbl__mem_free(m, w, nn * sizeof *w);
    pbl__mem_free(m, dist, nn * sizeof *dist);
    pbl__mem_free(m, from, nn * sizeof *from);
    pbl__mem_free(m, edges, (size_t)(sd->start[n] ? sd->start[n] : 1) * 2 * sizeof *edges);
    return s;
}

PBL__API pbl_status pbl_graph_streams(const pbl_graph *g, const pbl_stream_options *opt, pbl_stream_plan *out,
                                      char *err, size_t errlen)
{
    return pbl__graph_streams_given(g, opt, NULL, out, err, errlen);
}

pbl_status pbl__graph_streams_given(const pbl_graph *g, const pbl_stream_options *opt, const int32_t *stream_of_node,
                                    pbl_stream_plan *out, char *err, size_t errlen)
{
    char why[256] = "";
    pbl__errclear(err, errlen);
    if (!g || !out) {
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "streams: no %s", g ? "output" : "graph");
    }
    memset(out, 0, sizeof *out);
    pbl_stream_options o = opt ? *opt : pbl_stream_options_default();
    if (o.n_streams < 1 || o.n_streams > PBL_MAX_STREAMS) {
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "streams: n_streams is %d, not in 1..%d", (int)o.n_streams, PBL_MAX_STREAMS);
    }
    pbl__mem m;
    pbl__mem_init(&m, o.allocator);
    pbl_status s = pbl__graph_check(g, &m, err, errlen); /* g is only read */
    if (s != PBL_OK)
        return s;
    out->allocator = o.allocator;
    int32_t *order = NULL, n = 0;
    step_deps sd = { 0 };
    s = pbl__graph_schedule_given(g, o.targets, o.n_targets, o.order, o.n_order, &m, &order, &n, why, sizeof why);
    if (s != PBL_OK)
        goto done;
    out->n_steps = n;
    size_t nn = pbl__stream_n(out);
    out->schedule = pbl__mem_alloc(&m, nn * sizeof *out->schedule);
    out->stream = pbl__mem_alloc(&m, nn * sizeof *out->stream);
    out->cost = pbl__mem_alloc(&m, nn * sizeof *out->cost);
    s = PBL_ERR_NOMEM;
    snprintf(why, sizeof why, "out of memory");
    if (!out->schedule || !out->stream || !out->cost)
        goto done;
    for (int32_t t = 0; t < n; t++) {
        out->schedule[t] = order[t];
        out->cost[t] = o.cost ? o.cost(o.cost_user, g, order[t]) : pbl_node_cost(g, order[t]);
        if (out->cost[t] < 0) {
            s = PBL_ERR_INVALID_ARG;
            snprintf(why, sizeof why, "streams: the cost of node '%s' is negative (%lld)", g->nodes[order[t]].name,
                     (long long)out->cost[t]);
            goto done;
        }
        int32_t given = stream_of_node ? stream_of_node[order[t]] : 0;
        if (given < 0 || given >= o.n_streams) {
            s = PBL_ERR_INVALID_ARG;
            snprintf(why, sizeof why, "node '%s': stream %d is outside [0, %d)", g->nodes[order[t]].name, (int)given,
                     (int)o.n_streams);
            goto done;
        }
        out->stream[t] = given;
    }
    if (build_step_deps(g, order, n, &m, &sd) != PBL_OK)
        goto done;
    out->n_streams = o.n_streams;
    s = stream_of_node ? PBL_OK : colour_steps(&sd, n, out->cost, o.n_streams, &m, out->stream, &out->n_streams);
    if (s != PBL_OK) {
        snprintf(why, sizeof why, "streams: igraph failed (%s)", pbl_status_str(s));
        goto done;
    }
    s = pbl__stream_reduce(out, &m, sd.start, sd.pred);
    if (s != PBL_OK)
        snprintf(why, sizeof why, "out of memory");
done:
    if (order)
        pbl__schedule_free(g, &m, order);
    if (sd.start)
        step_deps_free(&sd, n, &m);
    if (s != PBL_OK) {
        pbl__errf(err, errlen, s, "%s", why);
        pbl_stream_plan_free(out);
    }
    return s;
}

PBL__API pbl_status pbl_stream_plan_check(const pbl_graph *g, const pbl_stream_plan *sp, char *err, size_t errlen)
{
    char why[256] = "";
    pbl_status s = pbl__stream_plan_shape(sp, why, sizeof why);
    if (s != PBL_OK || !g) {
        return pbl__errf(err, errlen, s, "%s", why);
    }
    pbl__mem m;
    pbl__mem_init(&m, sp->allocator);
    int32_t S = sp->n_streams, *clock = NULL;
    step_deps sd = { 0 };
    s = PBL_ERR_NOMEM;
    snprintf(why, sizeof why, "out of memory");
    for (int32_t t = 0; t < sp->n_steps; t++)
        if (sp->schedule[t] < 0 || sp->schedule[t] >= g->n_nodes) {
            s = PBL_ERR_INVALID_ARG;
            snprintf(why, sizeof why, "stream plan: step %d runs node %d, not a node of the graph", (int)t,
                     (int)sp->schedule[t]);
            goto done;
        }
    if (pbl__stream_clocks(sp, &m, &clock) != PBL_OK || build_step_deps(g, sp->schedule, sp->n_steps, &m, &sd) != PBL_OK)
        goto done;
    s = PBL_ERR_INVALID_ARG;
    for (int32_t t = 0; t < sp->n_steps; t++) {
        const int32_t *c = clock + (size_t)t * (size_t)S;
        for (int32_t i = sd.start[t]; i < sd.start[t + 1]; i++) {
            int32_t u = sd.pred[i];
            if (u >= t || u > c[sp->stream[u]]) {
                snprintf(why, sizeof why, "stream plan: node '%s' (step %d) depends on node '%s' (step %d), "
                         "which stream order and waits do not put before it",
                         g->nodes[sp->schedule[t]].name, (int)t, g->nodes[sp->schedule[u]].name, (int)u);
                goto done;
            }
        }
        /* no wait implied by stream order and the step's other waits */
        for (int32_t e = sp->wait_start[t]; e < sp->wait_start[t + 1]; e++) {
            int32_t x[PBL_MAX_STREAMS], u = sp->wait[e], prev = -1;
            for (int32_t q = t - 1; q >= 0 && prev < 0; q--)
                if (sp->stream[q] == sp->stream[t])
                    prev = q;
            for (int32_t k = 0; k < S; k++)
                x[k] = prev >= 0 ? clock[(size_t)prev * (size_t)S + k] : -1;
            if (prev >= 0)
                x[sp->stream[prev]] = prev;
            for (int32_t f = sp->wait_start[t]; f < sp->wait_start[t + 1]; f++) {
                if (f == e)
                    continue;
                int32_t w = sp->wait[f];
                for (int32_t k = 0; k < S; k++)
                    if (clock[(size_t)w * (size_t)S + k] > x[k])
                        x[k] = clock[(size_t)w * (size_t)S + k];
                if (w > x[sp->stream[w]])
                    x[sp->stream[w]] = w;
            }
            if (u <= x[sp->stream[u]]) {
                snprintf(why, sizeof why, "stream plan: step %d's wait for step %d is implied by the others", (int)t,
                         (int)u);
                goto done;
            }
        }
    }
    s = PBL_OK;
done:
    pbl__stream_clocks_free(sp, &m, clock);
    if (sd.start)
        step_deps_free(&sd, sp->n_steps, &m);
    if (s != PBL_OK)
        pbl__errf(err, errlen, s, "%s", why);
    return s;
}
