/* Dependency edges (data and write-after-read) and a deterministic topological order. */
#include "graph/ir/schedule.h"

#include <stdio.h>
#include <string.h>

#include "graph/ir/registry.h"

void pbl__deps_free(pbl__deps *d, pbl__mem *m)
{
    pbl__mem_free(m, d->pred_start, (size_t)(d->n + 1) * sizeof(int32_t));
    pbl__mem_free(m, d->succ_start, (size_t)(d->n + 1) * sizeof(int32_t));
    pbl__mem_free(m, d->pred, (size_t)d->n_edges * sizeof(int32_t));
    pbl__mem_free(m, d->succ, (size_t)d->n_edges * sizeof(int32_t));
    memset(d, 0, sizeof *d);
}

/* Calls emit(from, to) for every edge; run twice (count, then fill). */
typedef struct edge_sink {
    int32_t *pred_start, *succ_start; /* counting pass: degrees; filling pass: cursors */
    int32_t *pred, *succ;             /* NULL in the counting pass */
    int32_t  n_edges;
} edge_sink;

static void emit(edge_sink *e, int32_t from, int32_t to)
{
    if (e->pred) {
        e->pred[e->pred_start[to]++] = from;
        e->succ[e->succ_start[from]++] = to;
    } else {
        e->pred_start[to]++;
        e->succ_start[from]++;
    }
    e->n_edges++;
}

/* readers: CSR of the nodes reading each value (a node reading a value twice appears twice). */
static void walk_edges(const pbl_graph *g, const int32_t *rd_start, const int32_t *rd, edge_sink *e)
{
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const pbl__node *n = &g->nodes[i];
        for (int32_t k = 0; k < n->n_in; k++) {
            pbl_node p = g->values[n->in[k]].producer;
            if (p >= 0)
                emit(e, p, i);
        }
        const pbl__op *op = pbl__op_get(n->op);
        for (int32_t m = 0; m < op->n_mutates; m++) {
            pbl_value v = n->in[op->mutates[m][1]];
            for (int32_t r = rd_start[v]; r < rd_start[v + 1]; r++)
                if (rd[r] != i)
                    emit(e, rd[r], i);
        }
    }
}

pbl_status pbl__deps_build(const pbl_graph *g, pbl__mem *m, pbl__deps *d)
{
    memset(d, 0, sizeof *d);
    int32_t nv = g->n_values, nn = g->n_nodes, n_reads = 0;
    for (int32_t i = 0; i < nn; i++)
        n_reads += g->nodes[i].n_in;
    int32_t *rd_start = pbl__mem_calloc(m, (size_t)(nv + 1) * sizeof *rd_start);
    int32_t *rd = pbl__mem_alloc(m, (size_t)(n_reads ? n_reads : 1) * sizeof *rd);
    d->n = nn;
    d->pred_start = pbl__mem_calloc(m, (size_t)(nn + 1) * sizeof(int32_t));
    d->succ_start = pbl__mem_calloc(m, (size_t)(nn + 1) * sizeof(int32_t));
    if (!rd_start || !rd || !d->pred_start || !d->succ_start)
        goto fail_nomem;

    /* readers of each value, as CSR */
    for (int32_t i = 0; i < nn; i++)
        for (int32_t k = 0; k < g->nodes[i].n_in; k++)
            rd_start[g->nodes[i].in[k] + 1]++;
    for (int32_t v = 0; v < nv; v++)
        rd_start[v + 1] += rd_start[v];
    {
        int32_t *cur = pbl__mem_alloc(m, (size_t)(nv ? nv : 1) * sizeof *cur);
        if (!cur)
            goto fail_nomem;
        memcpy(cur, rd_start, (size_t)nv * sizeof *cur);
        for (int32_t i = 0; i < nn; i++)
            for (int32_t k = 0; k < g->nodes[i].n_in; k++)
                rd[cur[g->nodes[i].in[k]]++] = i;
        pbl__mem_free(m, cur, (size_t)(nv ? nv : 1) * sizeof *cur);
    }

    /* count, prefix-sum, fill */
    edge_sink e = { .pred_start = d->pred_start + 1, .succ_start = d->succ_start + 1 };
    walk_edges(g, rd_start, rd, &e);
    for (int32_t i = 0; i < nn; i++) {
        d->pred_start[i + 1] += d->pred_start[i];
        d->succ_start[i + 1] += d->succ_start[i];
    }
    d->n_edges = e.n_edges;
    d->pred = pbl__mem_alloc(m, (size_t)d->n_edges * sizeof(int32_t));
    d->succ = pbl__mem_alloc(m, (size_t)d->n_edges * sizeof(int32_t));
    if (d->n_edges && (!d->pred || !d->succ))
        goto fail_nomem;
    edge_sink f = { .pred_start = d->pred_start, .succ_start = d->succ_start, .pred = d->pred, .succ = d->succ };
    walk_edges(g, rd_start, rd, &f);
    /* the fill pass advanced each start to the next node's start: shift back */
    for (int32_t i = nn; i > 0; i--) {
        d->pred_start[i] = d->pred_start[i - 1];
        d->succ_start[i] = d->succ_start[i - 1];
    }
    d->pred_start[0] = d->succ_start[0] = 0;

    pbl__mem_free(m, rd_start, (size_t)(nv + 1) * sizeof *rd_start);
    pbl__mem_free(m, rd, (size_t)(n_reads ? n_reads : 1) * sizeof *rd);
    return PBL_OK;

fail_nomem:
    pbl__mem_free(m, rd_start, (size_t)(nv + 1) * sizeof *rd_start);
    pbl__mem_free(m, rd, (size_t)(n_reads ? n_reads : 1) * sizeof *rd);
    pbl__deps_free(d, m);
    return PBL_ERR_NOMEM;
}

void pbl__heap_push(int32_t *h, int32_t *n, int32_t x)
{
    int32_t i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > x) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = x;
}

int32_t pbl__heap_pop(int32_t *h, int32_t *n)
{
    int32_t top = h[0], x = h[--(*n)], i = 0;
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && h[c + 1] < h[c])
            c++;
        if (h[c] >= x)
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0)
        h[i] = x;
    return top;
}

pbl_status pbl__deps_order(const pbl__deps *d, pbl__mem *m, const uint8_t *keep, const uint8_t *urgent,
                           int32_t *order, int32_t *n_order, pbl_node *cycle_node)
{
    /* heap keys: urgent nodes are their id, the rest id + n, so urgent ones pop first */
#define KEY(i) ((urgent && urgent[i]) ? (i) : (i) + n)
    int32_t n = d->n;
    size_t bytes = (size_t)(n ? n : 1) * sizeof(int32_t);
    int32_t *indeg = pbl__mem_calloc(m, bytes), *heap = pbl__mem_alloc(m, bytes);
    if (!indeg || !heap) {
        pbl__mem_free(m, indeg, bytes);
        pbl__mem_free(m, heap, bytes);
        return PBL_ERR_NOMEM;
    }
    int32_t want = 0, hn = 0, got = 0;
    for (int32_t i = 0; i < n; i++) {
        if (keep && !keep[i])
            continue;
        want++;
        for (int32_t e = d->pred_start[i]; e < d->pred_start[i + 1]; e++)
            if (!keep || keep[d->pred[e]])
                indeg[i]++;
    }
    for (int32_t i = 0; i < n; i++)
        if ((!keep || keep[i]) && indeg[i] == 0)
            pbl__heap_push(heap, &hn, KEY(i));
    while (hn > 0) {
        int32_t k = pbl__heap_pop(heap, &hn), i = k >= n ? k - n : k;
        order[got++] = i;
        for (int32_t e = d->succ_start[i]; e < d->succ_start[i + 1]; e++) {
            int32_t s = d->succ[e];
            if ((!keep || keep[s]) && --indeg[s] == 0)
                pbl__heap_push(heap, &hn, KEY(s));
        }
    }
#undef KEY
    pbl_status st = PBL_OK;
    if (got < want) {
        /* Every unordered node has an unordered predecessor: walking them must revisit a
         * node, and the first revisited node lies on a cycle. indeg doubles as "seen" mark. */
        int32_t at = 0;
        while ((keep && !keep[at]) || indeg[at] == 0)
            at++;
        for (int32_t i = 0; i < n; i++)
            if (indeg[i] > 0)
                indeg[i] = 1; /* unordered, unseen */
        while (indeg[at] != 2) {
            indeg[at] = 2;
            for (int32_t e = d->pred_start[at]; e < d->pred_start[at + 1]; e++) {
                int32_t p = d->pred[e];
                if ((!keep || keep[p]) && indeg[p] > 0) {
                    at = p;
                    break;
                }
            }
        }
        if (cycle_node)
            *cycle_node = at;
        st = PBL_ERR_CYCLE;
    }
    *n_order = got;
    pbl__mem_free(m, indeg, bytes);
    pbl__mem_free(m, heap, bytes);
    return st;
}

pbl_status pbl__deps_ancestors(const pbl__deps *d, pbl__mem *m, const uint8_t *seed, uint8_t *keep)
{
    size_t bytes = (size_t)(d->n ? d->n : 1) * sizeof(int32_t);
    int32_t *stack = pbl__mem_alloc(m, bytes), top = 0;
    if (!stack)
        return PBL_ERR_NOMEM;
    memset(keep, 0, (size_t)d->n);
    for (int32_t i = 0; i < d->n; i++) {
        if (seed[i] && !keep[i]) {
            keep[i] = 1;
            stack[top++] = i;
        }
    }
    while (top > 0) {
        int32_t i = stack[--top];
        for (int32_t e = d->pred_start[i]; e < d->pred_start[i + 1]; e++) {
            int32_t p = d->pred[e];
            if (!keep[p]) {
                keep[p] = 1;
                stack[top++] = p;
            }
        }
    }
    pbl__mem_free(m, stack, bytes);
    return PBL_OK;
}

/* Seeds: producers of the targets, or of every output plus every update node. */
static pbl_status seed_nodes(const pbl_graph *g, const char *const *targets, int32_t n_targets, uint8_t *seed,
                             char *err, size_t errlen)
{
    if (n_targets > 0) {
        for (int32_t t = 0; t < n_targets; t++) {
            const char *name = targets ? targets[t] : NULL;
            pbl_value v = name ? pbl_graph_output(g, name) : PBL_NONE;
            if (v == PBL_NONE) {
                snprintf(err, errlen, "target '%s' is not an output of the graph", name ? name : "(null)");
                return PBL_ERR_NOT_FOUND;
            }
            if (g->values[v].producer != PBL_NONE)
                seed[g->values[v].producer] = 1;
        }
        return PBL_OK;
    }
    for (int32_t i = 0; i < g->n_outputs; i++) {
        pbl_node p = g->values[g->outputs[i].value].producer;
        if (p != PBL_NONE)
            seed[p] = 1;
    }
    for (pbl_node i = 0; i < g->n_nodes; i++)
        if (pbl__op_get(g->nodes[i].op)->n_mutates > 0)
            seed[i] = 1;
    return PBL_OK;
}

pbl_status pbl__graph_schedule(const pbl_graph *g, const char *const *targets, int32_t n_targets, pbl__mem *m,
                               int32_t **order, int32_t *n_order, char *err, size_t errlen)
{
    size_t nn = (size_t)(g->n_nodes ? g->n_nodes : 1);
    *order = NULL;
    *n_order = 0;
    pbl__deps d;
    if (pbl__deps_build(g, m, &d) != PBL_OK) {
        snprintf(err, errlen, "out of memory");
        return PBL_ERR_NOMEM;
    }
    uint8_t *seed = pbl__mem_calloc(m, nn), *keep = pbl__mem_alloc(m, nn);
    int32_t *out = pbl__mem_alloc(m, nn * sizeof *out);
    pbl_status s = seed && keep && out ? seed_nodes(g, targets, n_targets, seed, err, errlen) : PBL_ERR_NOMEM;
    if (s == PBL_OK)
        s = pbl__deps_ancestors(&d, m, seed, keep);
    pbl_node on_cycle = PBL_NONE;
    if (s == PBL_OK) {
        for (pbl_node i = 0; i < g->n_nodes; i++) /* reuse seed[] as "urgent": the updates */
            seed[i] = pbl__op_get(g->nodes[i].op)->n_mutates > 0;
        s = pbl__deps_order(&d, m, keep, seed, out, n_order, &on_cycle);
    }
    if (s == PBL_ERR_NOMEM)
        snprintf(err, errlen, "out of memory");
    else if (s == PBL_ERR_CYCLE)
        snprintf(err, errlen, "node '%s' lies on a cycle", g->nodes[on_cycle].name);
    pbl__mem_free(m, seed, nn);
    pbl__mem_free(m, keep, nn);
    pbl__deps_free(&d, m);
    if (s != PBL_OK) {
        pbl__mem_free(m, out, nn * sizeof *out);
        *n_order = 0;
        return s;
    }
    *order = out;
    return PBL_OK;
}

void pbl__schedule_free(const pbl_graph *g, pbl__mem *m, int32_t *order)
{
    pbl__mem_free(m, order, (size_t)(g->n_nodes ? g->n_nodes : 1) * sizeof *order);
}

pbl_status pbl__graph_schedule_given(const pbl_graph *g, const char *const *targets, int32_t n_targets,
                                     const pbl_node *given, int32_t n_given, pbl__mem *m, int32_t **order,
                                     int32_t *n_order, char *err, size_t errlen)
{
    pbl_status s = pbl__graph_schedule(g, targets, n_targets, m, order, n_order, err, errlen);
    if (s != PBL_OK || !given)
        return s;
    /* the given order must hold exactly the nodes the program order holds, each once, and
     * put every node after the nodes it depends on (data and write-after-read edges) */
    size_t nn = (size_t)(g->n_nodes ? g->n_nodes : 1);
    int32_t *step = pbl__mem_alloc(m, nn * sizeof *step);
    pbl__deps d;
    memset(&d, 0, sizeof d);
    if (!step || pbl__deps_build(g, m, &d) != PBL_OK) {
        snprintf(err, errlen, "out of memory");
        s = PBL_ERR_NOMEM;
        goto done;
    }
    for (int32_t i = 0; i < g->n_nodes; i++)
        step[i] = -1;
    for (int32_t t = 0; t < *n_order; t++)
        step[(*order)[t]] = -2; /* needed, not yet placed */
    s = PBL_ERR_INVALID_ARG;
    if (n_given != *n_order) {
        snprintf(err, errlen, "the given schedule has %d steps, the graph needs %d", (int)n_given, (int)*n_order);
        goto done;
    }
    for (int32_t t = 0; t < n_given; t++) {
        pbl_node v = given[t];
        if (v < 0 || v >= g->n_nodes || step[v] != -2) {
            snprintf(err, errlen, "the given schedule's step %d: %s", (int)t,
                     v < 0 || v >= g->n_nodes ? "no such node"
                     : step[v] == -1          ? "a node the outputs do not need"
                                              : "a node placed twice");
            goto done;
        }
        step[v] = t;
    }
    for (int32_t t = 0; t < n_given; t++) {
        pbl_node v = given[t];
        for (int32_t e = d.pred_start[v]; e < d.pred_start[v + 1]; e++) {
            if (step[d.pred[e]] > t) {
                snprintf(err, errlen, "the given schedule runs node '%s' before '%s', which it depends on",
                         g->nodes[v].name, g->nodes[d.pred[e]].name);
                goto done;
            }
        }
    }
    memcpy(*order, given, (size_t)n_given * sizeof *given);
    s = PBL_OK;
done:
    pbl__deps_free(&d, m);
    pbl__mem_free(m, step, nn * sizeof *step);
    if (s != PBL_OK) {
        pbl__schedule_free(g, m, *order);
        *order = NULL;
        *n_order = 0;
    }
    return s;
}

/* Why q depends on p, appended to buf: q reads an output of p, or q overwrites a value p reads. */
static size_t edge_why(const pbl_graph *g, pbl_node p, pbl_node q, char *buf, size_t len, size_t at)
{
    const pbl__node *nq = &g->nodes[q], *np = &g->nodes[p];
    for (int32_t k = 0; k < nq->n_in; k++)
        if (g->values[nq->in[k]].producer == p)
            return at + (size_t)snprintf(buf + at, len - at, " -> '%s' (reads '%s')", nq->name,
                                         g->values[nq->in[k]].name);
    const pbl__op *op = pbl__op_get(nq->op);
    for (int32_t m = 0; m < op->n_mutates; m++) {
        pbl_value v = nq->in[op->mutates[m][1]];
        for (int32_t k = 0; k < np->n_in; k++)
            if (np->in[k] == v)
                return at + (size_t)snprintf(buf + at, len - at, " -> '%s' (overwrites '%s', which '%s' reads)",
                                             nq->name, g->values[v].name, np->name);
    }
    return at + (size_t)snprintf(buf + at, len - at, " -> '%s'", nq->name);
}

void pbl__deps_cycle_text(const pbl_graph *g, const pbl__deps *d, pbl__mem *m, pbl_node on_cycle, char *buf,
                          size_t len)
{
    /* breadth first along dependency edges from on_cycle back to itself: the shortest cycle */
    size_t bytes = (size_t)(d->n ? d->n : 1) * sizeof(int32_t);
    int32_t *parent = pbl__mem_alloc(m, bytes), *queue = pbl__mem_alloc(m, bytes), *path = pbl__mem_alloc(m, bytes);
    snprintf(buf, len, "'%s'", g->nodes[on_cycle].name);
    if (!parent || !queue || !path)
        goto done;
    for (int32_t i = 0; i < d->n; i++)
        parent[i] = -1;
    int32_t head = 0, tail = 0, last = -1;
    queue[tail++] = on_cycle;
    while (head < tail && last < 0) {
        int32_t v = queue[head++];
        for (int32_t e = d->succ_start[v]; e < d->succ_start[v + 1]; e++) {
            int32_t s = d->succ[e];
            if (s == on_cycle) {
                last = v;
                break;
            }
            if (parent[s] < 0 && s != on_cycle) {
                parent[s] = v;
                queue[tail++] = s;
            }
        }
    }
    if (last < 0)
        goto done;
    int32_t n = 0;
    for (int32_t v = last; v != on_cycle; v = parent[v])
        path[n++] = v;
    size_t at = strlen(buf);
    pbl_node prev = on_cycle;
    for (int32_t i = n - 1; i >= 0 && at < len; i--) {
        at = edge_why(g, prev, path[i], buf, len, at);
        prev = path[i];
    }
    if (at < len)
        edge_why(g, prev, on_cycle, buf, len, at);
done:
    pbl__mem_free(m, parent, bytes);
    pbl__mem_free(m, queue, bytes);
    pbl__mem_free(m, path, bytes);
}
