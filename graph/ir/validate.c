/* pbl_graph_validate: the whole-graph re-check (after rewiring or loading), and its read-only
 * form pbl__graph_check, which the executor and the planners call on a const graph. */
#include <stdarg.h>
#include <string.h>

#include "graph/base/errmsg.h"
#include "graph/ir/schedule.h"
#include "graph/ir/registry.h"

/* What one check reads and where it reports: g is only read, so several threads may check one
 * graph at once, each with its own scratch allocator and message buffer. */
typedef struct check_ctx {
    const pbl_graph *g;
    pbl__mem        *m;    /* scratch */
    char            *err;  /* may be NULL */
    size_t           errlen;
} check_ctx;

__attribute__((format(printf, 3, 4))) static pbl_status fail(const check_ctx *c, pbl_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pbl__verrf(c->err, c->errlen, s, fmt, ap);
    va_end(ap);
    return s;
}

static pbl_status check_node(const check_ctx *c, pbl_node id)
{
    const pbl_graph *g = c->g;
    const pbl__node *n = &g->nodes[id];
    const pbl__op *op = pbl__op_get(n->op);
    if (!op)
        return fail(c, PBL_ERR_UNKNOWN_OP, "node '%s': unknown op id %d", n->name, (int)n->op);
    if (n->n_in < op->n_in_min || n->n_in > op->n_in_max)
        return fail(c, PBL_ERR_ARITY, "node '%s' (%s): has %d inputs, the op takes %d to %d", n->name, op->name,
                    (int)n->n_in, (int)op->n_in_min, (int)op->n_in_max);
    for (int32_t i = 0; i < n->n_in; i++)
        if (n->in[i] < 0 || n->in[i] >= g->n_values)
            return fail(c, PBL_ERR_DANGLING, "node '%s' (%s): input %d is %d, which names no value", n->name,
                        op->name, (int)i, (int)n->in[i]);
    for (int32_t k = 0; k < op->n_attrs; k++)
        if (op->attrs[k].required && !n->attr[k].set)
            return fail(c, PBL_ERR_ATTR, "node '%s' (%s): attribute '%s' is required", n->name, op->name,
                        op->attrs[k].name);
    pbl__meta out[PBL__MAX_OUT];
    memset(out, 0, sizeof out);
    pbl_status s = pbl__graph_infer_node(g, n, out, c->err, c->errlen);
    if (s != PBL_OK)
        return s;
    for (int32_t k = 0; k < n->n_out; k++) {
        const pbl__meta *have = &g->values[n->out[k]].meta;
        if (have->dtype != out[k].dtype || !pbl_shape_equal(&have->shape, &out[k].shape)) {
            char a[96], b[96];
            return fail(c, PBL_ERR_SHAPE, "node '%s' (%s): output %d is %s but its inputs now give %s", n->name,
                        op->name, (int)k, pbl_shape_str(&have->shape, a, sizeof a),
                        pbl_shape_str(&out[k].shape, b, sizeof b));
        }
    }
    return PBL_OK;
}

/* An update op overwrites its input; two updates of one value would race for it. */
static pbl_status check_single_writer(const check_ctx *c)
{
    const pbl_graph *g = c->g;
    size_t bytes = (size_t)(g->n_values ? g->n_values : 1) * sizeof(pbl_node);
    pbl_node *writer = pbl__mem_alloc(c->m, bytes);
    if (!writer)
        return fail(c, PBL_ERR_NOMEM, "validate: out of memory");
    for (int32_t v = 0; v < g->n_values; v++)
        writer[v] = PBL_NONE;
    pbl_status s = PBL_OK;
    for (int32_t i = 0; i < g->n_nodes && s == PBL_OK; i++) {
        const pbl__node *n = &g->nodes[i];
        const pbl__op *op = pbl__op_get(n->op);
        for (int32_t m = 0; m < op->n_mutates && s == PBL_OK; m++) {
            pbl_value v = n->in[op->mutates[m][1]];
            if (writer[v] != PBL_NONE)
                s = fail(c, PBL_ERR_INVALID_ARG, "node '%s' (%s): value '%s' is already updated in place by node '%s'",
                         n->name, op->name, g->values[v].name, g->nodes[writer[v]].name);
            writer[v] = i;
        }
    }
    pbl__mem_free(c->m, writer, bytes);
    return s;
}

pbl_status pbl__graph_check(const pbl_graph *g, pbl__mem *m, char *err, size_t errlen)
{
    check_ctx c = { .g = g, .m = m, .err = err, .errlen = errlen };
    if (!g)
        return fail(&c, PBL_ERR_INVALID_ARG, "validate: no graph");
    for (pbl_node i = 0; i < g->n_nodes; i++) {
        pbl_status s = check_node(&c, i);
        if (s != PBL_OK)
            return s;
    }
    for (int32_t i = 0; i < g->n_outputs; i++)
        if (g->outputs[i].value < 0 || g->outputs[i].value >= g->n_values)
            return fail(&c, PBL_ERR_DANGLING, "output '%s' names no value", g->outputs[i].name);
    pbl_status s = check_single_writer(&c);
    if (s != PBL_OK)
        return s;

    pbl__deps d;
    if (pbl__deps_build(g, m, &d) != PBL_OK)
        return fail(&c, PBL_ERR_NOMEM, "validate: out of memory");
    size_t bytes = (size_t)(g->n_nodes ? g->n_nodes : 1) * sizeof(int32_t);
    int32_t *order = pbl__mem_alloc(m, bytes);
    if (!order) {
        pbl__deps_free(&d, m);
        return fail(&c, PBL_ERR_NOMEM, "validate: out of memory");
    }
    int32_t n_order = 0;
    pbl_node on_cycle = PBL_NONE;
    s = pbl__deps_order(&d, m, NULL, NULL, order, &n_order, &on_cycle);
    if (s == PBL_ERR_CYCLE) {
        char cycle[512];
        pbl__deps_cycle_text(g, &d, m, on_cycle, cycle, sizeof cycle);
        fail(&c, s, "node '%s' (%s) lies on a cycle of dependencies, so no order can run the graph: %s",
             g->nodes[on_cycle].name, pbl__op_get(g->nodes[on_cycle].op)->name, cycle);
    }
    else if (s != PBL_OK)
        fail(&c, s, "validate: out of memory");
    pbl__mem_free(m, order, bytes);
    pbl__deps_free(&d, m);
    return s;
}

PBL__API pbl_status pbl_graph_validate(pbl_graph *g)
{
    if (!g)
        return PBL_ERR_INVALID_ARG;
    return pbl__graph_check(g, &g->mem, g->errmsg, sizeof g->errmsg);
}
