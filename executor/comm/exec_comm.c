/* What the executor needs to run a data-parallel graph: the communication stream's nodes and
 * the hash every rank compares at setup (executor/comm/comm.h). */
#include <string.h>

#include "executor/comm/comm.h"
#include "graph/ir/registry.h"
#include "graph/ir/schedule.h"

int pbl__op_is_comm(int32_t op)
{
    return op == PBL__OP_bucket_pack || op == PBL__OP_allreduce || op == PBL__OP_bucket_unpack;
}

pbl_status pbl__comm_streams(const pbl_graph *g, const char *const *targets, int32_t n_targets, pbl__mem *m,
                             int32_t **stream_of_node, int32_t *n_comm)
{
    *stream_of_node = NULL;
    *n_comm = 0;
    /* only the nodes the executor will run count: an evaluation executor over a training graph
     * (targets) runs none of them and stays on one stream */
    int32_t *order = NULL, n = 0;
    char why[256];
    pbl_status st = pbl__graph_schedule(g, targets, n_targets, m, &order, &n, why, sizeof why);
    if (st != PBL_OK)
        return st == PBL_ERR_NOMEM ? st : PBL_OK; /* the storage step reports it with its context */
    for (int32_t t = 0; t < n; t++)
        *n_comm += pbl__op_is_comm(g->nodes[order[t]].op);
    pbl__schedule_free(g, m, order);
    if (*n_comm == 0)
        return PBL_OK;
    int32_t *s = pbl__mem_alloc(m, (size_t)g->n_nodes * sizeof *s);
    if (!s)
        return PBL_ERR_NOMEM;
    for (int32_t i = 0; i < g->n_nodes; i++)
        s[i] = pbl__op_is_comm(g->nodes[i].op);
    *stream_of_node = s;
    return PBL_OK;
}

static uint64_t mix(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t mix_str(uint64_t h, const char *s) { return mix(h, s ? s : "", s ? strlen(s) + 1 : 1); }

static uint64_t mix_meta(uint64_t h, const pbl__meta *m)
{
    int32_t d = (int32_t)m->dtype;
    h = mix(h, &d, sizeof d);
    h = mix(h, &m->shape.ndim, sizeof m->shape.ndim);
    return mix(h, m->shape.dim, (size_t)m->shape.ndim * sizeof m->shape.dim[0]);
}

uint64_t pbl__graph_hash(const pbl_graph *g)
{
    uint64_t h = 0xcbf29ce484222325ull;
    h = mix(h, &g->n_values, sizeof g->n_values);
    h = mix(h, &g->n_nodes, sizeof g->n_nodes);
    for (pbl_value v = 0; v < g->n_values; v++) {
        const pbl__value *x = &g->values[v];
        int32_t kind = (int32_t)x->kind;
        h = mix_str(h, x->name);
        h = mix(h, &kind, sizeof kind);
        h = mix_meta(h, &x->meta);
    }
    for (pbl_node n = 0; n < g->n_nodes; n++) {
        const pbl__node *nd = &g->nodes[n];
        const pbl__op *op = pbl__op_get(nd->op);
        h = mix(h, &nd->op, sizeof nd->op);
        h = mix_str(h, nd->name);
        h = mix(h, nd->in, (size_t)nd->n_in * sizeof *nd->in);
        for (int32_t a = 0; op && a < op->n_attrs; a++) {
            const pbl__attr_val *av = &nd->attr[a];
            h = mix(h, &av->i, sizeof av->i);
            h = mix(h, &av->f, sizeof av->f);
            h = mix(h, av->ints, (size_t)av->n_ints * sizeof av->ints[0]);
        }
    }
    return h;
}
