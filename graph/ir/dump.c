/* pbl_graph_dump: a readable listing, one line per variable, node and output. */
#include "graph/ir/graph_internal.h"
#include "graph/ir/registry.h"

static void print_value_ref(FILE *f, const pbl_graph *g, pbl_value v)
{
    char s[96];
    const pbl__value *x = &g->values[v];
    fprintf(f, "%%%d %s %s", (int)v, pbl_shape_str(&x->meta.shape, s, sizeof s), pbl_dtype_name(x->meta.dtype));
}

PBL__API pbl_status pbl_graph_dump(const pbl_graph *g, FILE *f)
{
    if (!g || !f)
        return PBL_ERR_INVALID_ARG;
    fprintf(f, "graph: %d values, %d nodes, %d outputs\n", (int)g->n_values, (int)g->n_nodes, (int)g->n_outputs);
    for (pbl_value v = 0; v < g->n_values; v++) {
        const pbl__value *x = &g->values[v];
        if (x->producer != PBL_NONE)
            continue;
        fprintf(f, "  ");
        print_value_ref(f, g, v);
        fprintf(f, " = %s '%s'\n", pbl_value_kind_name(x->kind), x->name);
    }
    static const char *const section[] = { "forward", "backward", "update" };
    int shown = 0;
    for (pbl_node i = 0; i < g->n_nodes; i++) {
        const pbl__node *n = &g->nodes[i];
        const pbl__op *op = pbl__op_get(n->op);
        int kind = op->n_mutates ? 2 : n->is_backward ? 1 : 0;
        if (kind != shown) {
            fprintf(f, "%s:\n", section[kind]);
            shown = kind;
        }
        fprintf(f, "  ");
        for (int32_t k = 0; k < n->n_out; k++) {
            fprintf(f, k ? ", " : "");
            print_value_ref(f, g, n->out[k]);
        }
        fprintf(f, " = %s(", op->name);
        for (int32_t k = 0; k < n->n_in; k++)
            fprintf(f, k ? ", %%%d" : "%%%d", (int)n->in[k]);
        fprintf(f, ")");
        for (int32_t k = 0; k < op->n_attrs; k++) {
            const pbl__attr_val *a = &n->attr[k];
            if (!a->set)
                continue;
            fprintf(f, " %s=", op->attrs[k].name);
            if (op->attrs[k].type == PBL_ATTR_INT)
                fprintf(f, "%lld", (long long)a->i);
            else if (op->attrs[k].type == PBL_ATTR_FLOAT)
                fprintf(f, "%g", a->f);
            else
                for (int32_t j = 0; j < a->n_ints; j++)
                    fprintf(f, j ? ",%lld" : "[%lld", (long long)a->ints[j]);
            if (op->attrs[k].type == PBL_ATTR_INTS)
                fprintf(f, a->n_ints ? "]" : "[]");
        }
        fprintf(f, "  # %s%s\n", n->name, kind == 1 ? " (backward)" : kind == 2 ? " (update)" : "");
    }
    for (int32_t i = 0; i < g->n_outputs; i++)
        fprintf(f, "output '%s' = %%%d\n", g->outputs[i].name, (int)g->outputs[i].value);
    return ferror(f) ? PBL_ERR_IO : PBL_OK;
}
