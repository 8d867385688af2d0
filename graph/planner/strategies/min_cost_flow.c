/*
 * min_cost_flow: TFLite GPU delegate's MinCostFlowAssignment (tensorflow/lite/delegates/gpu/
 * common/memory_management/min_cost_flow_assignment.cc) — shared objects as chains of
 * records, chosen by a minimum-cost flow.
 *
 * Take the records by first step (ties: record order; TFLite takes its records already in
 * that order). The flow network has a left vertex L_i and a right vertex R_i per record, a
 * source and a sink, and unit-capacity edges added in this order, record by record:
 *   source -> L_i (cost 0), R_i -> sink (cost 0), source -> R_i (cost size_i: record i opens
 *   a new object), and L_j -> R_i (cost max(0, size_i - size_j): record i takes over j's
 *   object) for every earlier record j that ended by i.first (pebble's last <= first,
 *   TFLite's last_task < first_task), in the order TFLite's queue released them: by
 *   (last, order), accumulated over all earlier records.
 * Successive shortest paths saturate every R_i; each path is found with the same level-by-
 * level SPFA (Bellman-Ford with a queue) as TFLite, scanning each vertex's edges in the order
 * they were added, so ties between equally cheap paths fall the same way. Objects are then
 * read off in record order: every saturated source -> R_i starts an object, which follows the
 * saturated L_j -> R_k edges from record to record; its size is the largest record on it.
 * Costs are int64 (TFLite's are int).
 *
 * Complexity: the network has V = O(n) vertices and E = O(n^2) edges (every record may link
 * to every earlier one); each of the n + 1 searches is O(V·E) = O(n^3) in the worst case and
 * typically a few passes over the edges, so O(n^3) in practice and O(n^4) at worst; O(n^2)
 * memory (about 1 s for 1024 random records). Above PBL__MCF_MAX_RECORDS (1024) records the
 * strategy refuses with PBL_ERR_UNSUPPORTED and no assignment (`best` then skips it).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph/base/errmsg.h"
#include "graph/planner/index/busy_heap.h"
#include "graph/planner/plan_internal.h"
#include "graph/planner/sort.h"

#define PBL__MCF_MAX_RECORDS 1024

/* The residual network, its arcs stored vertex by vertex (CSR) so a scan of a vertex's arcs
 * reads memory in order. */
typedef struct net {
    int32_t  n_vert;
    int32_t *adj_at;   /* [n_vert + 1] where each vertex's arcs start */
    int32_t *fill;     /* [n_vert] cursors while filling */
    int32_t *head;     /* [arcs] the arc's target; NULL during the counting pass */
    int64_t *cost;     /* [arcs] */
    int32_t *rev;      /* [arcs] the reverse arc */
    int8_t  *cap;      /* [arcs] residual capacity, 0 or 1 */
} net;

/* TFLite's AddEdge: the arc goes after `from`'s earlier arcs, its reverse after `to`'s. */
static void add_edge(net *g, int32_t from, int32_t to, int64_t cost)
{
    if (!g->head) { /* counting */
        g->adj_at[from + 1]++;
        g->adj_at[to + 1]++;
        return;
    }
    int32_t a = g->fill[from]++, b = g->fill[to]++;
    g->head[a] = to;
    g->cost[a] = cost;
    g->cap[a] = 1;
    g->rev[a] = b;
    g->head[b] = from;
    g->cost[b] = -cost;
    g->cap[b] = 0;
    g->rev[b] = a;
}

/* The network for records in first order (at[p] is the record at position p); n_freed[p]
 * of the positions in freed[] had ended before position p's first. */
static void add_edges(net *g, const pbl_usage_record *r, const int32_t *at, int32_t n, const int32_t *freed,
                      const int32_t *n_freed)
{
    int32_t source = 2 * n, sink = 2 * n + 1;
    for (int32_t p = 0; p < n; p++) {
        int64_t size = r[at[p]].size;
        add_edge(g, source, p, 0);
        add_edge(g, n + p, sink, 0);
        add_edge(g, source, n + p, size);
        for (int32_t k = 0; k < n_freed[p]; k++) {
            int64_t prev = r[at[freed[k]]].size;
            add_edge(g, freed[k], n + p, size > prev ? size - prev : 0);
        }
    }
}

/* One SPFA pass, level by level as TFLite's: returns 1 and fills via[] (the arc into each
 * vertex on the path) when the sink is reachable. */
static int shortest_path(const net *g, int32_t source, int32_t sink, int64_t *dist, int32_t *stamp,
                         int32_t *via, int32_t *cur, int32_t *next)
{
    for (int32_t v = 0; v < g->n_vert; v++) {
        dist[v] = INT64_MAX;
        stamp[v] = 0;
    }
    int32_t level = 1, n_cur = 0, n_next = 0;
    cur[n_cur++] = source;
    stamp[source] = level;
    dist[source] = 0;
    while (n_cur > 0) {
        level++;
        n_next = 0;
        for (int32_t q = 0; q < n_cur; q++) {
            int32_t v = cur[q];
            int64_t dv = dist[v];
            for (int32_t a = g->adj_at[v]; a < g->adj_at[v + 1]; a++) {
                if (g->cap[a] <= 0)
                    continue;
                int32_t u = g->head[a];
                int64_t d = dv + g->cost[a];
                if (d < dist[u]) {
                    dist[u] = d;
                    via[u] = a;
                    if (stamp[u] != level) {
                        next[n_next++] = u;
                        stamp[u] = level;
                    }
                }
            }
        }
        int32_t *t = cur;
        cur = next;
        next = t;
        n_cur = n_next;
    }
    return dist[sink] != INT64_MAX;
}

pbl_status pbl__plan_min_cost_flow(const pbl__plan_in *in, pbl_assignment *out)
{
    const pbl_allocator *al = in->opt.allocator;
    const pbl_usage_record *r = in->r;
    int32_t n = in->n;
    if (n > PBL__MCF_MAX_RECORDS)
        return pbl__errf(in->why, in->why_len, PBL_ERR_UNSUPPORTED,
                         "declined: %d records, more than the %d its flow network is built for (its work grows"
                         " with their square)", (int)n, (int)PBL__MCF_MAX_RECORDS);

    /* which earlier records (in the first-step order) each one may follow */
    const pbl__key2 *order = in->by_first;
    size_t nn = (size_t)n;
    size_t bytes0 = nn * (sizeof(pbl__busy) + 2 * sizeof(int32_t));
    char *block0 = pbl__plan_alloc(al, bytes0), *at = block0;
    if (!block0)
        return PBL_ERR_NOMEM;
    pbl__busy *heap = (pbl__busy *)at;        at += nn * sizeof *heap;   /* id: position in the first order */
    int32_t *freed = (int32_t *)at; at += nn * sizeof *freed;  /* positions, in release order */
    int32_t *n_freed = (int32_t *)at;                          /* per position: releases so far */
    int32_t n_busy = 0, n_rel = 0;
    int64_t n_links = 0;
    for (int32_t p = 0; p < n; p++) {
        const pbl_usage_record *rp = &r[order[p].idx];
        while (n_busy > 0 && heap[0].last <= rp->first) {
            freed[n_rel++] = heap[0].id;
            pbl__busy_pop(heap, &n_busy);
        }
        n_freed[p] = n_rel;
        n_links += n_rel;
        pbl__busy_push(heap, &n_busy, (pbl__busy){ rp->last, p });
    }

    /* vertices: L_p = p, R_p = n + p, source 2n, sink 2n + 1 */
    net g = { .n_vert = 2 * n + 2 };
    int32_t source = 2 * n, sink = 2 * n + 1;
    size_t arcs = (size_t)(2 * (3 * (int64_t)n + n_links)), verts = (size_t)g.n_vert;
    size_t bytes = arcs * (sizeof(int64_t) + 2 * sizeof(int32_t) + sizeof(int8_t)) +
                   verts * (sizeof(int64_t) + 6 * sizeof(int32_t)) + sizeof(int32_t);
    char *block = pbl__plan_alloc(al, bytes);
    if (!block) {
        pbl__plan_free(al, block0, bytes0);
        return PBL_ERR_NOMEM;
    }
    at = block;
    int64_t *cost = (int64_t *)at;  at += arcs * sizeof *cost;
    int64_t *dist = (int64_t *)at;  at += verts * sizeof *dist;
    int32_t *head = (int32_t *)at;  at += arcs * sizeof *head;
    g.rev = (int32_t *)at;          at += arcs * sizeof *g.rev;
    g.adj_at = (int32_t *)at;       at += (verts + 1) * sizeof *g.adj_at;
    g.fill = (int32_t *)at;         at += verts * sizeof *g.fill;
    int32_t *stamp = (int32_t *)at; at += verts * sizeof *stamp;
    int32_t *via = (int32_t *)at;   at += verts * sizeof *via;
    int32_t *cur = (int32_t *)at;   at += verts * sizeof *cur;
    int32_t *next = (int32_t *)at;  at += verts * sizeof *next;
    g.cap = (int8_t *)at;

    int32_t *at_pos = stamp; /* the record at each position; stamp[] is free until the searches */
    for (int32_t p = 0; p < n; p++)
        at_pos[p] = order[p].idx;
    memset(g.adj_at, 0, (verts + 1) * sizeof *g.adj_at);
    add_edges(&g, r, at_pos, n, freed, n_freed); /* count */
    for (int32_t v = 0; v < g.n_vert; v++) {
        g.adj_at[v + 1] += g.adj_at[v];
        g.fill[v] = g.adj_at[v];
    }
    g.head = head;
    g.cost = cost;
    add_edges(&g, r, at_pos, n, freed, n_freed); /* fill */

    while (shortest_path(&g, source, sink, dist, stamp, via, cur, next)) {
        if (pbl__plan_expired(in)) { /* past `best`'s deadline; a path costs far more than a clock read */
            pbl__plan_free(al, block, bytes);
            pbl__plan_free(al, block0, bytes0);
            return PBL_ERR_TIMEOUT;
        }
        for (int32_t v = sink; v != source;) {
            int32_t a = via[v];
            g.cap[a]--;
            g.cap[g.rev[a]]++;
            v = g.head[g.rev[a]];
        }
    }

    /* objects: each saturated source -> R_p opens one; follow saturated L -> R arcs */
    int32_t n_obj = 0;
    for (int32_t p = 0; p < n; p++)
        out->object[order[p].idx] = -1;
    for (int32_t a = g.adj_at[source]; a < g.adj_at[source + 1]; a++) {
        int32_t h = g.head[a];
        if (g.cap[a] != 0 || h < n || h >= 2 * n)
            continue;
        int64_t size = 0;
        for (int32_t p = h - n; p >= 0;) {
            int32_t i = order[p].idx;
            out->object[i] = n_obj;
            if (r[i].size > size)
                size = r[i].size;
            int32_t follow = -1;
            for (int32_t b = g.adj_at[p]; b < g.adj_at[p + 1] && follow < 0; b++) {
                int32_t t = g.head[b];
                if (g.cap[b] == 0 && t >= n && t < 2 * n && out->object[order[t - n].idx] < 0)
                    follow = t - n;
            }
            p = follow;
        }
        out->object_size[n_obj++] = size;
    }
    out->n_objects = n_obj;
    pbl__plan_free(al, block, bytes);
    pbl__plan_free(al, block0, bytes0);
    return PBL_OK;
}
