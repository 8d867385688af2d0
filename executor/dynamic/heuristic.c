/* DTR's eviction heuristic: the op-cost estimate, the union-find over evicted tensors and
 * h_DTR^eq. The runtime (executor/dynamic/dtr.c) decides what is a candidate; this file only scores. */
#include <string.h>

#include "executor/dynamic/dtr.h"
#include "graph/ir/registry.h"

static double numel(const pbl__meta *m)
{
    double n = 1;
    for (int32_t i = 0; i < m->shape.ndim; i++)
        n *= (double)m->shape.dim[i];
    return n;
}

/* Measured kernel time is what the paper and MegEngine use; an estimate from shapes keeps
 * every decision reproducible (dry runs, tests that assert the victim) and ranks ops the same
 * way on a CPU: products dominate, element-wise ops cost their memory traffic. */
double pbl__dtr_op_cost(const pbl_graph *g, const pbl__node *nd)
{
    double c = 0;
    for (int32_t k = 0; k < nd->n_in; k++)
        c += numel(&g->values[nd->in[k]].meta);
    for (int32_t k = 0; k < nd->n_out; k++)
        c += numel(&g->values[nd->out[k]].meta);
    if (nd->n_in == 0 || nd->n_out == 0)
        return c;
    const pbl__meta *a = &g->values[nd->in[0]].meta;
    const pbl__meta *y = &g->values[nd->out[0]].meta;
    int32_t r = a->shape.ndim;
    if (nd->op == PBL__OP_fully_connected && r >= 1) {
        c += numel(y) * (double)a->shape.dim[r - 1]; /* y[N,out] += x[N,in]·w[out,in]ᵀ */
    } else if (nd->op == PBL__OP_matmul && r >= 2) {
        int64_t ta = nd->attr[0].i;
        c += numel(y) * (double)a->shape.dim[r - 1 - (ta ? 1 : 0)]; /* k of op(a)[..., m, k] */
    }
    return c;
}

int32_t pbl__dtr_dsu_add(pbl__dtr_dsu *u, pbl__mem *m, double cost)
{
    if (pbl__mem_reserve(m, (void **)&u->set, &u->cap, u->n + 1, sizeof *u->set) != 0)
        return -1;
    u->set[u->n] = (pbl__dtr_set){ .parent = u->n, .cost = cost };
    return u->n++;
}

int32_t pbl__dtr_dsu_find(pbl__dtr_dsu *u, int32_t x)
{
    int32_t r = x;
    while (u->set[r].parent != r)
        r = u->set[r].parent;
    while (u->set[x].parent != r) { /* path compression */
        int32_t next = u->set[x].parent;
        u->set[x].parent = r;
        x = next;
    }
    return r;
}

void pbl__dtr_dsu_union(pbl__dtr_dsu *u, int32_t a, int32_t b)
{
    a = pbl__dtr_dsu_find(u, a);
    b = pbl__dtr_dsu_find(u, b);
    if (a == b)
        return;
    if (a > b) { /* the older set stays the root: deterministic */
        int32_t t = a;
        a = b;
        b = t;
    }
    u->set[b].parent = a;
    u->set[a].cost += u->set[b].cost;
}

void pbl__dtr_dsu_free(pbl__dtr_dsu *u, pbl__mem *m)
{
    pbl__mem_free(m, u->set, (size_t)u->cap * sizeof *u->set);
    memset(u, 0, sizeof *u);
}

double pbl__dtr_score(double cost, double neighbour_cost, uint64_t charge, int64_t now, int64_t last)
{
    double staleness = (double)(now - last + 1); /* +1: a tensor used this instant is not infinite */
    return (cost + neighbour_cost) / ((double)charge * staleness);
}
