/*
 * pebble's op-cost estimate, the weight the stream colouring puts on each node. Compute-bound
 * ops (matrix products, convolutions) cost their multiply-adds, two FLOPs each; everything
 * else is bound by memory and costs the bytes it reads plus the bytes it writes. Counting a
 * FLOP and a byte alike understates compute by the machine's balance (tens of FLOPs per byte
 * on a GPU), which only moves weight towards the already heavy products: the colouring asks
 * for the heaviest path, not for times. One small function per family, chosen by a table.
 */
#include "graph/ir/graph_internal.h"
#include "graph/ir/registry.h"
#include "pebble/streams.h"

typedef int64_t (*cost_rule)(const pbl_graph *g, const pbl__node *n);

static int64_t numel(const pbl_graph *g, pbl_value v) { return pbl_shape_numel(&g->values[v].meta.shape); }

static int64_t bytes_moved(const pbl_graph *g, const pbl__node *n)
{
    int64_t b = 0;
    for (int32_t k = 0; k < n->n_in; k++)
        b += (int64_t)pbl__meta_bytes(&g->values[n->in[k]].meta);
    for (int32_t k = 0; k < n->n_out; k++)
        b += (int64_t)pbl__meta_bytes(&g->values[n->out[k]].meta);
    return b;
}

/* y [.., out] = x [.., in] · w [out, in]ᵀ: 2·|y|·in */
static int64_t fully_connected_flops(const pbl_graph *g, const pbl__node *n)
{
    const pbl_shape *w = &g->values[n->in[1]].meta.shape;
    return 2 * numel(g, n->out[0]) * (w->ndim >= 2 ? w->dim[1] : 1);
}

/* y [.., m, n] = op(a) [.., m, k] · op(b) [.., k, n]: 2·|y|·k, k from a and trans_a (slot 0) */
static int64_t matmul_flops(const pbl_graph *g, const pbl__node *n)
{
    const pbl_shape *a = &g->values[n->in[0]].meta.shape;
    int64_t k = 1;
    if (a->ndim >= 2)
        k = n->attr[0].i ? a->dim[a->ndim - 2] : a->dim[a->ndim - 1];
    else if (a->ndim == 1)
        k = a->dim[0];
    return 2 * numel(g, n->out[0]) * k;
}

/* The conv2d family: every output-channel element of the big tensor meets every weight of
 * its channel: 2·|t|·|w|/C_out, where t is y (conv2d), dy (the gradients: input 0) and w is
 * the weight (input 1 of conv2d and grad_input, the output of grad_weight). */
static int64_t conv_flops(const pbl_graph *g, const pbl__node *n)
{
    pbl_value t = n->op == PBL__OP_conv2d ? n->out[0] : n->in[0];
    pbl_value w = n->op == PBL__OP_conv2d_grad_weight ? n->out[0] : n->in[1];
    const pbl_shape *ws = &g->values[w].meta.shape;
    int64_t cout = ws->ndim >= 1 && ws->dim[0] > 0 ? ws->dim[0] : 1;
    return 2 * numel(g, t) * (numel(g, w) / cout);
}

static cost_rule rule_of(int32_t op)
{
    switch (op) {
    case PBL__OP_fully_connected: return fully_connected_flops;
    case PBL__OP_matmul: return matmul_flops;
    case PBL__OP_conv2d:
    case PBL__OP_conv2d_grad_input:
    case PBL__OP_conv2d_grad_weight: return conv_flops;
    default: return bytes_moved;
    }
}

PBL__API int64_t pbl_node_cost(const pbl_graph *g, pbl_node n)
{
    if (!g || n < 0 || n >= g->n_nodes)
        return 1;
    const pbl__node *nd = &g->nodes[n];
    int64_t c = rule_of(nd->op)(g, nd);
    return c > 0 ? c : 1;
}
