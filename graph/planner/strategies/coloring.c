/*
 * coloring: the compiler's view of memory planning — treat tensors like virtual registers and
 * allocate them by colouring their interference graph (Chaitin et al., "Register allocation
 * via coloring", 1981).
 *
 * One vertex per record, an edge between two records whose lifetimes overlap. A proper
 * colouring puts non-interfering records into one colour; each colour becomes one shared
 * object, as large as its largest member, and the objects are laid end to end. The colouring
 * is igraph's greedy one (igraph_vertex_coloring_greedy, COLORED_NEIGHBORS: colour next the
 * vertex with the most coloured neighbours, with the smallest colour its neighbours leave
 * free). Vertices are numbered by decreasing size, then start, then record index, so that
 * igraph's ties (it starts at the vertex of largest degree, the lowest number on a tie, and
 * its heap is filled in vertex order) favour large records, which then set their colours'
 * sizes first.
 *
 * Edges come from a sweep over the records sorted by start, keeping the records live at the
 * current start: each new record meets exactly the records it interferes with, so building
 * the graph costs O(n log n + E), never O(n²) pairs. An interval graph can have Θ(n²) edges;
 * when it would have more than PBL__COLORING_MAX_EDGES (counted first, in O(n log n), before
 * anything big is allocated) the strategy returns PBL_ERR_UNSUPPORTED, and `best` skips it.
 * Measured peak memory is about 60 bytes per edge (our edge list, igraph's graph and its
 * indexes, the colouring's adjacency list), and 2 million edges colour in about a second, so
 * the cap bounds this strategy at roughly 250 MB and a few seconds.
 *
 * igraph's errors: igraph reports a failure through its process-wide error handler, whose
 * default aborts, and setting a handler would be global state, so pebble sets none. Instead
 * every igraph call made here cannot fail on the input it is given (edge endpoints are valid
 * vertex ids, the heuristic is valid) except by running out of memory, which the edge cap
 * bounds; every return value is still checked, so an embedder that installs a non-aborting
 * handler gets PBL_ERR_NOMEM (igraph out of memory) or PBL_ERR_UNSUPPORTED (anything else,
 * e.g. an interruption), never a crash. igraph allocates with malloc, outside
 * opt.allocator; the edge list, which is the largest array, is ours and goes through it.
 *
 * Thread safety: the packaged igraph is built without thread-local state
 * (IGRAPH_THREAD_SAFE 0): its error-cleanup ("finally") stack is a process global that every
 * call pushes to, so concurrent igraph calls corrupt each other. The igraph section is
 * therefore serialised by pebble's one igraph lock (graph/base/igraph_lock.h, shared with the
 * stream colouring), which holds no data. Planning with other strategies is not serialised.
 *
 * Complexity: O(n log n + E) to build the edges, plus igraph's graph construction (it indexes
 * the edges by endpoint) and greedy colouring (O((n + E) log n): an indexed heap update per
 * edge, a sort of each vertex's neighbour colours); O(n + E) memory, E capped as above.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <igraph.h>

#include "graph/base/errmsg.h"
#include "graph/base/igraph_lock.h"
#include "graph/planner/plan_internal.h"
#include "graph/planner/sort.h"

/* More interference edges than this and the strategy declines (see the header comment). */
#define PBL__COLORING_MAX_EDGES ((int64_t)4 * 1000 * 1000)

static pbl_status from_igraph(igraph_error_t e)
{
    return e == IGRAPH_ENOMEM ? PBL_ERR_NOMEM : PBL_ERR_UNSUPPORTED;
}

/* Colours the interference graph given by the edge list (2·n_edges vertex ids); colour[v]
 * per vertex. */
static pbl_status color_graph(const igraph_integer_t *edges, int64_t n_edges, int32_t n, int32_t *colour)
{
    pbl_status s = PBL_OK;
    igraph_vector_int_t ev = { 0 }, colours; /* ev: a view over our edges, filled by igraph */
    igraph_t g;
    igraph_vector_int_view(&ev, edges, (igraph_integer_t)(2 * n_edges));
    pbl__igraph_lock();
    igraph_error_t e = igraph_create(&g, &ev, (igraph_integer_t)n, IGRAPH_UNDIRECTED);
    if (e != IGRAPH_SUCCESS) {
        s = from_igraph(e);
        goto fail_unlock;
    }
    e = igraph_vector_int_init(&colours, 0);
    if (e != IGRAPH_SUCCESS) {
        s = from_igraph(e);
        goto fail_destroy_graph;
    }
    e = igraph_vertex_coloring_greedy(&g, &colours, IGRAPH_COLORING_GREEDY_COLORED_NEIGHBORS);
    if (e != IGRAPH_SUCCESS) {
        s = from_igraph(e);
        goto fail_destroy_colours;
    }
    for (int32_t v = 0; v < n; v++)
        colour[v] = (int32_t)VECTOR(colours)[v];
fail_destroy_colours:
    igraph_vector_int_destroy(&colours);
fail_destroy_graph:
    igraph_destroy(&g);
fail_unlock:
    pbl__igraph_unlock();
    return s;
}

pbl_status pbl__plan_coloring(const pbl__plan_in *in, pbl_assignment *out)
{
    const pbl_allocator *al = in->opt.allocator;
    const pbl_usage_record *r = in->r;
    int32_t n = in->n;
    size_t nn = (size_t)n;
    size_t bytes = nn * (sizeof(pbl__key4) + 3 * sizeof(int32_t));
    char *block = pbl__plan_alloc(al, bytes);
    if (!block)
        return PBL_ERR_NOMEM;
    pbl__key4 *by = (pbl__key4 *)block;                    /* [n] the vertex order */
    int32_t *vertex = (int32_t *)(by + nn);        /* [n] per record: its vertex */
    int32_t *live = vertex + nn;                   /* [n] records live at the sweep's step */
    int32_t *colour = live + nn;                   /* [n] per vertex */

    /* vertex numbers: decreasing size, then start, then index */
    for (int32_t i = 0; i < n; i++)
        by[i] = (pbl__key4){ -r[i].size, r[i].first, 0, i };
    qsort(by, nn, sizeof *by, pbl__key4_cmp);
    for (int32_t v = 0; v < n; v++)
        vertex[by[v].idx] = v;

    /* count the edges: record p (in start order) meets the p records before it less those
     * that ended by its start */
    const pbl__key2 *by_first = in->by_first, *by_last = in->by_last;
    int64_t n_edges = 0;
    for (int32_t p = 0, ended = 0; p < n; p++) {
        while (ended < n && by_last[ended].k <= by_first[p].k)
            ended++;
        n_edges += p - ended;
    }
    if (n_edges > PBL__COLORING_MAX_EDGES) {
        pbl__plan_free(al, block, bytes);
        return pbl__errf(in->why, in->why_len, PBL_ERR_UNSUPPORTED,
                         "declined: %lld pairs of records overlap in time, more than the %lld interference"
                         " edges it colours (about 60 bytes each)",
                         (long long)n_edges, (long long)PBL__COLORING_MAX_EDGES);
    }

    /* the edges, by the same sweep */
    size_t ebytes = (size_t)n_edges * 2 * sizeof(igraph_integer_t);
    igraph_integer_t *edges = pbl__plan_alloc(al, ebytes);
    if (!edges) {
        pbl__plan_free(al, block, bytes);
        return PBL_ERR_NOMEM;
    }
    int64_t e = 0;
    int32_t n_live = 0;
    for (int32_t p = 0; p < n; p++) {
        int32_t i = by_first[p].idx, kept = 0;
        for (int32_t k = 0; k < n_live; k++)
            if (r[live[k]].last > r[i].first)
                live[kept++] = live[k];
        n_live = kept;
        for (int32_t k = 0; k < n_live; k++) {
            edges[e++] = vertex[live[k]];
            edges[e++] = vertex[i];
        }
        live[n_live++] = i;
    }

    pbl_status s = color_graph(edges, n_edges, n, colour);
    pbl__plan_free(al, edges, ebytes);
    if (s == PBL_ERR_UNSUPPORTED)
        pbl__errf(in->why, in->why_len, s, "igraph's colouring failed (an error handler other than its default)");
    if (s != PBL_OK) {
        pbl__plan_free(al, block, bytes);
        return s;
    }

    /* one object per colour, as large as its largest member */
    out->n_objects = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t c = colour[vertex[i]];
        while (out->n_objects <= c)
            out->object_size[out->n_objects++] = 0;
        out->object[i] = c;
        if (r[i].size > out->object_size[c])
            out->object_size[c] = r[i].size;
    }
    pbl__plan_free(al, block, bytes);
    return PBL_OK;
}
