/* PBL_STORAGE_NAIVE: variables in their own region, each node output its own aligned bytes,
 * update outputs aliased to the value they overwrite. */
#include "executor/storage.h"

#include <string.h>

#include "ops/registry.h"

void pbl__storage_free(pbl__storage *s, pbl__mem *m)
{
    size_t n = (size_t)(s->n_values ? s->n_values : 1);
    pbl__mem_free(m, s->place, n * sizeof *s->place);
    pbl__mem_free(m, s->offset, n * sizeof *s->offset);
    pbl__mem_free(m, s->alias, n * sizeof *s->alias);
    memset(s, 0, sizeof *s);
}

static uint64_t align_up(uint64_t x) { return (x + PBL__ALIGN - 1) & ~(uint64_t)(PBL__ALIGN - 1); }

/* Follows aliases to the value that owns the bytes. */
static pbl_value root_of(const pbl__storage *s, pbl_value v)
{
    while (s->place[v] == PBL__PLACE_ALIAS)
        v = s->alias[v];
    return v;
}

pbl_status pbl__storage_plan(const pbl_graph *g, const int32_t *order, int32_t n, pbl_storage_mode mode,
                             pbl__mem *m, pbl__storage *s)
{
    memset(s, 0, sizeof *s);
    if (mode != PBL_STORAGE_NAIVE)
        return PBL_ERR_UNSUPPORTED;
    s->n_values = g->n_values;
    size_t nv = (size_t)(g->n_values ? g->n_values : 1);
    s->place = pbl__mem_calloc(m, nv * sizeof *s->place);
    s->offset = pbl__mem_calloc(m, nv * sizeof *s->offset);
    s->alias = pbl__mem_alloc(m, nv * sizeof *s->alias);
    if (!s->place || !s->offset || !s->alias) {
        pbl__storage_free(s, m);
        return PBL_ERR_NOMEM;
    }
    for (pbl_value v = 0; v < g->n_values; v++) {
        s->alias[v] = PBL_NONE;
        if (g->values[v].producer != PBL_NONE)
            continue;
        s->place[v] = PBL__PLACE_VARIABLE;
        s->offset[v] = s->variable_bytes;
        s->variable_bytes = align_up(s->variable_bytes + pbl__meta_bytes(&g->values[v].meta));
    }
    for (int32_t o = 0; o < n; o++) {
        const pbl__node *nd = &g->nodes[order[o]];
        const pbl__op *op = pbl__op_get(nd->op);
        for (int32_t k = 0; k < nd->n_out; k++) {
            pbl_value v = nd->out[k];
            s->place[v] = PBL__PLACE_ARENA;
            for (int32_t j = 0; j < op->n_mutates; j++) {
                if (op->mutates[j][0] == k) {
                    s->place[v] = PBL__PLACE_ALIAS;
                    s->alias[v] = root_of(s, nd->in[op->mutates[j][1]]);
                }
            }
            if (s->place[v] == PBL__PLACE_ARENA) {
                s->offset[v] = s->arena_bytes;
                s->arena_bytes = align_up(s->arena_bytes + pbl__meta_bytes(&g->values[v].meta));
            }
        }
    }
    return PBL_OK;
}
