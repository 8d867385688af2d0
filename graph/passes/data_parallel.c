/*
 * pbl_graph_data_parallel: gradients -> buckets -> one all-reduce per bucket (pebble/autodiff.h).
 *
 * Buckets follow the order the backward pass finishes the gradients, so the first bucket can
 * be reduced while the backward pass still computes the others' gradients: that is the
 * overlap the communication stream gives. The order is each gradient's producer's position in
 * the program schedule (pbl__deps_order with no urgency: the order a graph without update
 * nodes runs in), ties (one node producing two gradients) by the caller's order.
 */
#include <stdio.h>
#include <stdlib.h>

#include "graph/ir/graph_internal.h"
#include "graph/ir/schedule.h"
#include "pebble/autodiff.h"

PBL__API pbl_data_parallel_options pbl_data_parallel_options_default(void)
{
    return (pbl_data_parallel_options){ .bucket_bytes = (int64_t)1 << 20, .mean = 1 };
}

typedef struct grad_ref {
    int32_t pos; /* schedule position of the producer */
    int32_t i;   /* index into the caller's arrays */
} grad_ref;

static int by_position(const void *a, const void *b)
{
    const grad_ref *x = a, *y = b;
    if (x->pos != y->pos)
        return x->pos < y->pos ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* pos[node] = the node's position in the program schedule. */
static pbl_status schedule_positions(pbl_graph *g, int32_t *pos)
{
    pbl__deps d;
    pbl_status s = pbl__deps_build(g, &g->mem, &d);
    if (s != PBL_OK)
        return pbl__graph_fail(g, s, "data_parallel: out of memory");
    size_t nn = (size_t)(g->n_nodes ? g->n_nodes : 1);
    int32_t *order = pbl__mem_alloc(&g->mem, nn * sizeof *order), n_order = 0;
    pbl_node cyc = PBL_NONE;
    s = order ? pbl__deps_order(&d, &g->mem, NULL, NULL, order, &n_order, &cyc) : PBL_ERR_NOMEM;
    if (s == PBL_OK)
        for (int32_t t = 0; t < n_order; t++)
            pos[order[t]] = t;
    else if (s == PBL_ERR_CYCLE)
        pbl__graph_fail(g, s, "data_parallel: the graph has a cycle through node '%s'", g->nodes[cyc].name);
    else
        pbl__graph_fail(g, s, "data_parallel: out of memory");
    pbl__mem_free(&g->mem, order, nn * sizeof *order);
    pbl__deps_free(&d, &g->mem);
    return s;
}

static pbl_status check_grads(pbl_graph *g, const pbl_value *grads, int32_t n)
{
    for (int32_t i = 0; i < n; i++) {
        pbl_value v = grads[i];
        if (v == PBL_NONE)
            continue;
        if (v < 0 || v >= g->n_values)
            return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "data_parallel: grads[%d] = %d names no value", (int)i,
                                   (int)v);
        if (g->values[v].producer == PBL_NONE)
            return pbl__graph_fail(g, PBL_ERR_INVALID_ARG,
                                   "data_parallel: grads[%d] '%s' is a %s, not a node's output (a gradient)", (int)i,
                                   g->values[v].name, pbl_value_kind_name(g->values[v].kind));
        if (g->values[v].meta.dtype != PBL_F32)
            return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "data_parallel: gradient '%s' is not f32",
                                   g->values[v].name);
        for (int32_t j = 0; j < i; j++)
            if (grads[j] == v)
                return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "data_parallel: gradient '%s' is listed twice (%d and %d)",
                                       g->values[v].name, (int)j, (int)i);
    }
    return PBL_OK;
}

/* One bucket: pack, all-reduce, and an unpack per gradient. */
static pbl_status add_bucket(pbl_graph *g, const pbl_data_parallel_options *o, int32_t k, const pbl_value *grads,
                             const grad_ref *refs, int32_t n_refs, pbl_value *reduced)
{
    pbl_value in[16], flat = PBL_NONE, sum = PBL_NONE;
    for (int32_t j = 0; j < n_refs; j++)
        in[j] = grads[refs[j].i];
    char name[192];
    /* a node's one output carries the node's name (as JSON graphs store it): the pack node is
     * "dp/bucket<k>", its flat value too */
    snprintf(name, sizeof name, "dp/bucket%d", (int)k);
    pbl_node_desc d = { .op = "bucket_pack", .name = name, .inputs = in, .n_inputs = n_refs };
    pbl_status s = pbl_graph_add_node(g, &d, NULL, &flat);
    if (s == PBL_OK) {
        pbl_attr at[1] = { PBL_ATTR_INT("mean", o->mean ? 1 : 0) };
        snprintf(name, sizeof name, "dp/bucket%d/allreduce", (int)k);
        pbl_node_desc ar = { .op = "allreduce", .name = name, .inputs = &flat, .n_inputs = 1, .attrs = at, .n_attrs = 1 };
        s = pbl_graph_add_node(g, &ar, NULL, &sum);
    }
    int64_t offset = 0;
    for (int32_t j = 0; j < n_refs && s == PBL_OK; j++) {
        const pbl__value *gv = &g->values[grads[refs[j].i]];
        int64_t dims[PBL_MAX_DIMS], numel = 1;
        for (int32_t a = 0; a < gv->meta.shape.ndim; a++) {
            dims[a] = gv->meta.shape.dim[a];
            numel *= dims[a];
        }
        pbl_attr at[2] = { PBL_ATTR_INT("offset", offset), PBL_ATTR_INTS("shape", dims, gv->meta.shape.ndim) };
        snprintf(name, sizeof name, "%s/reduced", gv->name);
        pbl_node_desc u = { .op = "bucket_unpack", .name = name, .inputs = &sum, .n_inputs = 1, .attrs = at, .n_attrs = 2 };
        s = pbl_graph_add_node(g, &u, NULL, &reduced[refs[j].i]);
        offset += numel;
    }
    return s;
}

static pbl_status bucketize(pbl_graph *g, const pbl_data_parallel_options *o, const pbl_value *grads, int32_t n,
                            pbl_value *reduced, grad_ref *refs, int32_t *pos)
{
    pbl_status s = schedule_positions(g, pos);
    if (s != PBL_OK)
        return s;
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) { /* reduced may be grads: each slot is written once, by its own bucket */
        if (grads[i] != PBL_NONE)
            refs[m++] = (grad_ref){ .pos = pos[g->values[grads[i]].producer], .i = i };
        else
            reduced[i] = PBL_NONE;
    }
    qsort(refs, (size_t)m, sizeof *refs, by_position);
    int32_t k = 0;
    for (int32_t a = 0; a < m && s == PBL_OK; k++) {
        /* greedy: add gradients while the bucket stays within bucket_bytes (the first always) */
        int64_t bytes = (int64_t)pbl__meta_bytes(&g->values[grads[refs[a].i]].meta);
        int32_t b = a + 1;
        while (b < m && b - a < 16) {
            int64_t next = (int64_t)pbl__meta_bytes(&g->values[grads[refs[b].i]].meta);
            if (bytes + next > o->bucket_bytes)
                break;
            bytes += next;
            b++;
        }
        s = add_bucket(g, o, k, grads, refs + a, b - a, reduced);
        a = b;
    }
    return s;
}

PBL__API pbl_status pbl_graph_data_parallel(pbl_graph *g, const pbl_data_parallel_options *opt, const pbl_value *grads,
                                            int32_t n, pbl_value *reduced)
{
    if (!g)
        return PBL_ERR_INVALID_ARG;
    pbl_data_parallel_options o = opt ? *opt : pbl_data_parallel_options_default();
    if (n < 0 || (n > 0 && (!grads || !reduced)))
        return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "data_parallel: bad arguments");
    if (o.bucket_bytes < 1)
        return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "data_parallel: bucket_bytes is %lld; it must be at least 1",
                               (long long)o.bucket_bytes);
    pbl_status s = check_grads(g, grads, n);
    if (s != PBL_OK)
        return s;
    int32_t nv0 = g->n_values, nn0 = g->n_nodes;
    size_t refs_bytes = (size_t)(n > 0 ? n : 1) * sizeof(grad_ref);
    size_t pos_bytes = (size_t)(g->n_nodes > 0 ? g->n_nodes : 1) * sizeof(int32_t);
    grad_ref *refs = pbl__mem_alloc(&g->mem, refs_bytes);
    int32_t *pos = pbl__mem_alloc(&g->mem, pos_bytes);
    if (!refs || !pos)
        s = pbl__graph_fail(g, PBL_ERR_NOMEM, "data_parallel: out of memory");
    else
        s = bucketize(g, &o, grads, n, reduced, refs, pos);
    pbl__mem_free(&g->mem, refs, refs_bytes);
    pbl__mem_free(&g->mem, pos, pos_bytes);
    if (s != PBL_OK)
        pbl__graph_truncate(g, nv0, nn0);
    return s;
}
