/* DTR's eviction heuristic: the union-find over evicted tensors and h_DTR^eq. The runtime
 * (executor/dynamic/dtr.c) decides what is a candidate and gives each node its cost
 * (pbl__cost_time, graph/ir/cost.h); this file only scores. */
#include <string.h>

#include "executor/dynamic/dtr.h"

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
