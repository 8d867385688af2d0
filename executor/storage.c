/* The storage step: liveness -> planner -> verifier -> a place for every value. */
#include "executor/storage.h"

#include <stdio.h>
#include <string.h>

#include "ops/registry.h"

void pbl__storage_free(pbl__storage *s, pbl__mem *m)
{
    size_t n = (size_t)(s->n_values ? s->n_values : 1);
    pbl__mem_free(m, s->place, n * sizeof *s->place);
    pbl__mem_free(m, s->offset, n * sizeof *s->offset);
    pbl__mem_free(m, s->alias, n * sizeof *s->alias);
    pbl__mem_free(m, s->kept, n * sizeof *s->kept);
    pbl_graph_records_free(&s->live);
    pbl_assignment_free(&s->plan);
    memset(s, 0, sizeof *s);
}

static uint64_t align_up(uint64_t x) { return (x + PBL__ALIGN - 1) & ~(uint64_t)(PBL__ALIGN - 1); }

/* Variables first (their own region), then node outputs from their records. */
static void place_values(const pbl_graph *g, pbl__storage *s, int planned, int dynamic)
{
    for (pbl_value v = 0; v < g->n_values; v++) {
        s->alias[v] = PBL_NONE;
        if (g->values[v].producer != PBL_NONE)
            continue;
        s->place[v] = PBL__PLACE_VARIABLE;
        s->offset[v] = s->variable_bytes;
        s->kept[v] = 1;
        s->variable_bytes = align_up(s->variable_bytes + pbl__meta_bytes(&g->values[v].meta));
    }
    for (int32_t t = 0; t < s->live.n_steps; t++) {
        const pbl__node *nd = &g->nodes[s->live.schedule[t]];
        const pbl__op *op = pbl__op_get(nd->op);
        for (int32_t k = 0; k < nd->n_out; k++) {
            pbl_value v = nd->out[k];
            int32_t r = s->live.value_record[v];
            if (r >= 0 && dynamic) {
                s->place[v] = PBL__PLACE_DYNAMIC;
                s->kept[v] = s->live.records[r].last == s->live.n_steps;
                s->naive_bytes = align_up(s->naive_bytes + pbl__meta_bytes(&g->values[v].meta));
                continue;
            }
            if (r >= 0) {
                s->place[v] = PBL__PLACE_ARENA;
                s->offset[v] = (uint64_t)s->plan.offset[r];
                s->kept[v] = !planned || s->live.records[r].last == s->live.n_steps;
                s->naive_bytes = align_up(s->naive_bytes + pbl__meta_bytes(&g->values[v].meta));
                continue;
            }
            /* unplanned node output: an update writing a variable in place */
            for (int32_t m = 0; m < op->n_mutates; m++) {
                if (op->mutates[m][0] != k)
                    continue;
                pbl_value in = nd->in[op->mutates[m][1]];
                s->place[v] = PBL__PLACE_ALIAS;
                s->alias[v] = s->place[in] == PBL__PLACE_ALIAS ? s->alias[in] : in;
                s->kept[v] = 1;
            }
        }
    }
}

pbl_status pbl__storage_plan(const pbl_graph *g, const pbl_exec_options *o, pbl__mem *m, pbl__storage *s,
                             char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    int planned = o->storage == PBL_STORAGE_PLANNED, dynamic = o->storage == PBL_STORAGE_DYNAMIC;
    if (!planned && !dynamic && o->storage != PBL_STORAGE_NAIVE) {
        snprintf(err, errlen, "storage mode %d is not supported", (int)o->storage);
        return PBL_ERR_INVALID_ARG;
    }
    s->strategy = dynamic ? "dynamic" : planned ? (o->strategy ? o->strategy : "best") : "naive";
    pbl_liveness_options lo = pbl_liveness_options_default();
    lo.allocator = o->allocator;
    lo.align = PBL__ALIGN;
    lo.inplace = planned;
    lo.targets = o->targets;
    lo.n_targets = o->n_targets;
    pbl_status st = pbl_graph_liveness(g, &lo, &s->live, err, errlen);
    if (st != PBL_OK)
        return st;
    pbl_plan_options po = pbl_plan_options_default();
    po.allocator = o->allocator;
    po.align = PBL__ALIGN;
    char why[256] = "";
    if (!dynamic) /* dynamic mode plans nothing: s->plan stays empty */
        st = pbl_plan_records(s->live.records, s->live.n_records, s->strategy, &po, &s->plan, why, sizeof why);
    if (st == PBL_OK && !dynamic)
        st = pbl_plan_verify(s->live.records, s->live.n_records, &s->plan, PBL__ALIGN, 0, why, sizeof why);
    if (st != PBL_OK) {
        snprintf(err, errlen, "planning storage with '%s': %s", s->strategy, why);
        pbl__storage_free(s, m);
        return st;
    }
    int64_t lb = pbl_records_lower_bound(s->live.records, s->live.n_records);
    s->lower_bound = lb > 0 ? (uint64_t)lb : 0;
    s->arena_bytes = (uint64_t)s->plan.arena;
    s->n_values = g->n_values;
    size_t nv = (size_t)(g->n_values ? g->n_values : 1);
    s->place = pbl__mem_calloc(m, nv * sizeof *s->place);
    s->offset = pbl__mem_calloc(m, nv * sizeof *s->offset);
    s->alias = pbl__mem_alloc(m, nv * sizeof *s->alias);
    s->kept = pbl__mem_calloc(m, nv * sizeof *s->kept);
    if (!s->place || !s->offset || !s->alias || !s->kept) {
        snprintf(err, errlen, "out of memory");
        pbl__storage_free(s, m);
        return PBL_ERR_NOMEM;
    }
    place_values(g, s, planned, dynamic);
    return PBL_OK;
}
