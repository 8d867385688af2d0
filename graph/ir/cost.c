/*
 * The one cost model: a node's cost from its op's rule (pbl__op.cost), and the numbers the
 * consumers make of it (graph/ir/cost.h). The rules live beside their ops, in ops/.
 */
#include "graph/ir/cost.h"
#include "graph/ir/registry.h"
#include "pebble/streams.h"

int64_t pbl__cost_numel(const pbl__meta *m) { return pbl_shape_numel(&m->shape); }

void pbl__cost_reduce(const pbl__cost_ctx *c, pbl__cost *out)
{
    out->flops = c->n_in > 0 ? pbl__cost_numel(&c->in[0]) : 0;
}

pbl__cost pbl__op_cost(const pbl__op *op, const pbl__cost_ctx *c)
{
    pbl__cost r = { 0 };
    for (int32_t k = 0; k < c->n_in; k++)
        r.bytes_read += (int64_t)pbl__meta_bytes(&c->in[k]);
    for (int32_t k = 0; k < c->n_out; k++) {
        r.bytes_written += (int64_t)pbl__meta_bytes(&c->out[k]);
        r.flops += pbl__cost_numel(&c->out[k]);
    }
    if (op && op->cost)
        op->cost(c, &r);
    return r;
}

pbl__cost pbl__node_cost(const pbl_graph *g, pbl_node n)
{
    if (!g || n < 0 || n >= g->n_nodes)
        return (pbl__cost){ 0 };
    const pbl__node *nd = &g->nodes[n];
    pbl__meta in[PBL__MAX_IN], out[PBL__MAX_OUT];
    for (int32_t k = 0; k < nd->n_in; k++)
        in[k] = g->values[nd->in[k]].meta;
    for (int32_t k = 0; k < nd->n_out; k++)
        out[k] = g->values[nd->out[k]].meta;
    pbl__cost_ctx c = { .in = in, .n_in = nd->n_in, .out = out, .n_out = nd->n_out, .attr = nd->attr };
    return pbl__op_cost(pbl__op_get(nd->op), &c);
}

int64_t pbl__cost_time(const pbl__cost *c)
{
    int64_t bytes = c->bytes_read + c->bytes_written;
    return c->flops > bytes ? c->flops : bytes;
}

int pbl__cost_cheap(const pbl__cost *c) { return c->flops * 4 <= c->bytes_written; }

PBL__API int64_t pbl_node_cost(const pbl_graph *g, pbl_node n)
{
    pbl__cost c = pbl__node_cost(g, n);
    int64_t t = pbl__cost_time(&c);
    return t > 0 ? t : 1;
}
