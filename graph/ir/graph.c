/* The graph handle: creation, variables, op nodes (checked eagerly), outputs, queries. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph/base/errmsg.h"
#include "graph/ir/graph_internal.h"
#include "graph/ir/registry.h"

PBL__API pbl_graph_options pbl_graph_options_default(void)
{
    pbl_graph_options o = { .allocator = NULL };
    return o;
}

pbl_status pbl__graph_vfail(pbl_graph *g, pbl_status s, const char *fmt, va_list ap)
{
    return pbl__verrf(g->errmsg, sizeof g->errmsg, s, fmt, ap);
}

pbl_status pbl__graph_fail(pbl_graph *g, pbl_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pbl__graph_vfail(g, s, fmt, ap);
    va_end(ap);
    return s;
}

PBL__API pbl_status pbl_graph_create(pbl_graph **out, const pbl_graph_options *opt)
{
    if (!out)
        return PBL_ERR_INVALID_ARG;
    *out = NULL;
    pbl__mem m;
    pbl__mem_init(&m, opt ? opt->allocator : NULL);
    pbl_graph *g = pbl__mem_calloc(&m, sizeof *g);
    if (!g)
        return PBL_ERR_NOMEM;
    g->mem = m; /* counts the handle itself */
    *out = g;
    return PBL_OK;
}

static void free_node(pbl_graph *g, pbl__node *n)
{
    const pbl__op *op = pbl__op_get(n->op);
    pbl__mem_strfree(&g->mem, n->name);
    pbl__mem_free(&g->mem, n->in, (size_t)n->n_in * sizeof *n->in);
    pbl__mem_free(&g->mem, n->out, (size_t)n->n_out * sizeof *n->out);
    pbl__mem_free(&g->mem, n->attr, (size_t)(op ? op->n_attrs : 0) * sizeof *n->attr);
}

PBL__API void pbl_graph_destroy(pbl_graph *g)
{
    if (!g)
        return;
    for (int32_t i = 0; i < g->n_nodes; i++)
        free_node(g, &g->nodes[i]);
    for (int32_t i = 0; i < g->n_values; i++)
        pbl__mem_strfree(&g->mem, g->values[i].name);
    for (int32_t i = 0; i < g->n_outputs; i++)
        pbl__mem_strfree(&g->mem, g->outputs[i].name);
    pbl__mem_free(&g->mem, g->values, (size_t)g->cap_values * sizeof *g->values);
    pbl__mem_free(&g->mem, g->nodes, (size_t)g->cap_nodes * sizeof *g->nodes);
    pbl__mem_free(&g->mem, g->outputs, (size_t)g->cap_outputs * sizeof *g->outputs);
    pbl__names_free(&g->value_names, &g->mem);
    pbl__names_free(&g->node_names, &g->mem);
    pbl__mem m = g->mem;
    pbl__mem_free(&m, g, sizeof *g);
}

PBL__API const char *pbl_graph_errmsg(const pbl_graph *g)
{
    return g ? g->errmsg : "no graph";
}

static int shape_ok(const pbl_shape *s)
{
    if (s->ndim < 0 || s->ndim > PBL_MAX_DIMS)
        return 0;
    int64_t n = 1;
    for (int32_t i = 0; i < s->ndim; i++) {
        if (s->dim[i] <= 0 || s->dim[i] > (INT64_C(1) << 40) / n)
            return 0;
        n *= s->dim[i];
    }
    return 1;
}

/* Appends a value; the caller has checked the name is free. */
static pbl_status push_value(pbl_graph *g, const char *name, pbl_value_kind kind, pbl__meta meta,
                             pbl_node producer, int32_t slot, pbl_value *out)
{
    if (pbl__mem_reserve(&g->mem, (void **)&g->values, &g->cap_values, g->n_values + 1,
                         sizeof *g->values) != PBL_OK)
        return PBL_ERR_NOMEM;
    char *copy = pbl__mem_strdup(&g->mem, name);
    if (!copy)
        return PBL_ERR_NOMEM;
    pbl_value id = g->n_values;
    if (pbl__names_put(&g->value_names, &g->mem, copy, id) != PBL_OK) {
        pbl__mem_strfree(&g->mem, copy);
        return PBL_ERR_NOMEM;
    }
    g->values[id] = (pbl__value){ .name = copy, .kind = kind, .meta = meta, .producer = producer,
                                  .slot = slot, .is_backward = g->in_backward };
    g->n_values++;
    *out = id;
    return PBL_OK;
}

/* Picks "<stem><N>" not yet used in `t`, N counting from `from`. */
static void fresh_name(const pbl__names *t, const char *stem, int32_t from, char *buf, size_t size)
{
    for (int32_t k = from;; k++) {
        snprintf(buf, size, "%s%d", stem, (int)k);
        if (pbl__names_get(t, buf) < 0)
            return;
    }
}

PBL__API pbl_status pbl_graph_add_variable(pbl_graph *g, const char *name, pbl_value_kind kind,
                                           pbl_dtype dtype, pbl_shape shape, pbl_value *out)
{
    if (!g)
        return PBL_ERR_INVALID_ARG;
    char auto_name[64];
    if (!name || !*name) {
        fresh_name(&g->value_names, "var", g->n_values, auto_name, sizeof auto_name);
        name = auto_name;
    }
    if (kind == PBL_VALUE_NODE || (unsigned)kind > PBL_VALUE_SCALAR)
        return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "variable '%s': kind must be input, param, label, state or scalar", name);
    /* kernels read a scalar as one float: anything else would be read past or misread */
    if (kind == PBL_VALUE_SCALAR && (dtype != PBL_F32 || (shape_ok(&shape) && pbl_shape_numel(&shape) != 1)))
        return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "variable '%s': a scalar must be one f32 element", name);
    if (pbl_dtype_size(dtype) == 0)
        return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "variable '%s': unknown dtype %d", name, (int)dtype);
    if (!shape_ok(&shape)) {
        char s[96];
        if (shape.ndim < 0 || shape.ndim > PBL_MAX_DIMS)
            return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "variable '%s': rank must be 0..%d", name, PBL_MAX_DIMS);
        return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "variable '%s': bad shape %s (dims must be positive, 2^40 elements at most)",
                               name, pbl_shape_str(&shape, s, sizeof s));
    }
    if (pbl__names_get(&g->value_names, name) >= 0)
        return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "variable '%s': a value of that name exists", name);
    pbl_value v;
    pbl__meta meta = { .dtype = dtype, .shape = shape };
    if (push_value(g, name, kind, meta, PBL_NONE, 0, &v) != PBL_OK)
        return pbl__graph_fail(g, PBL_ERR_NOMEM, "variable '%s': out of memory", name);
    if (out)
        *out = v;
    return PBL_OK;
}

PBL__API pbl_status pbl_graph_add_scalar(pbl_graph *g, const char *name, double initial, pbl_value *out)
{
    if (!g)
        return PBL_ERR_INVALID_ARG;
    if (!(fabs(initial) <= FLT_MAX)) /* kernels read it as one f32 */
        return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "scalar '%s': initial value %g is not a finite f32",
                               name ? name : "", initial);
    pbl_value v;
    pbl_status s = pbl_graph_add_variable(g, name, PBL_VALUE_SCALAR, PBL_F32, PBL_SCALAR, &v);
    if (s != PBL_OK)
        return s;
    g->values[v].initial = initial;
    if (out)
        *out = v;
    return PBL_OK;
}

/* Fills attribute slots from the caller's list: names known, types right, no repeats,
 * required ones present. */
static pbl_status fill_attrs(pbl_graph *g, const pbl__op *op, const char *who, const pbl_attr *attrs,
                             int32_t n_attrs, pbl__attr_val *slots)
{
    for (int32_t k = 0; k < op->n_attrs; k++) {
        memset(&slots[k], 0, sizeof slots[k]);
        slots[k].i = op->attrs[k].i;
        slots[k].f = op->attrs[k].f;
    }
    for (int32_t a = 0; a < n_attrs; a++) {
        const pbl_attr *at = &attrs[a];
        int32_t k = 0;
        while (k < op->n_attrs && !(at->name && strcmp(op->attrs[k].name, at->name) == 0))
            k++;
        if (k == op->n_attrs)
            return pbl__graph_fail(g, PBL_ERR_ATTR, "%s: op has no attribute '%s'", who, at->name ? at->name : "(null)");
        if (slots[k].set)
            return pbl__graph_fail(g, PBL_ERR_ATTR, "%s: attribute '%s' given twice", who, at->name);
        pbl_attr_type want = op->attrs[k].type;
        int ok = at->type == want || (want == PBL_ATTR_FLOAT && at->type == PBL_ATTR_INT);
        if (!ok)
            return pbl__graph_fail(g, PBL_ERR_ATTR, "%s: attribute '%s' must be %s", who, at->name,
                                   want == PBL_ATTR_INT ? "an int" : want == PBL_ATTR_FLOAT ? "a float" : "a list of ints");
        if (want == PBL_ATTR_INTS) {
            if (at->n_ints < 0 || at->n_ints > PBL_MAX_INTS || (at->n_ints > 0 && !at->ints))
                return pbl__graph_fail(g, PBL_ERR_ATTR, "%s: attribute '%s' must list 0..%d ints", who, at->name, PBL_MAX_INTS);
            if (at->n_ints > 0)
                memcpy(slots[k].ints, at->ints, (size_t)at->n_ints * sizeof *at->ints);
            slots[k].n_ints = at->n_ints;
        } else if (want == PBL_ATTR_FLOAT) {
            slots[k].f = at->type == PBL_ATTR_INT ? (double)at->i : at->f;
        } else {
            slots[k].i = at->i;
        }
        slots[k].set = 1;
    }
    for (int32_t k = 0; k < op->n_attrs; k++)
        if (op->attrs[k].required && !slots[k].set)
            return pbl__graph_fail(g, PBL_ERR_ATTR, "%s: attribute '%s' is required", who, op->attrs[k].name);
    return PBL_OK;
}

pbl_status pbl__graph_infer_node(const pbl_graph *g, const pbl__node *n, pbl__meta *out, char *err, size_t errlen)
{
    return pbl__graph_infer_node_with(g, n, NULL, out, err, errlen);
}

pbl_status pbl__graph_infer_node_with(const pbl_graph *g, const pbl__node *n, const pbl__meta *metas, pbl__meta *out,
                                      char *err, size_t errlen)
{
    const pbl__op *op = pbl__op_get(n->op);
    pbl__meta in[PBL__MAX_IN];
    for (int32_t i = 0; i < n->n_in; i++)
        in[i] = metas ? metas[n->in[i]] : g->values[n->in[i]].meta;
    char detail[384] = "";
    pbl__infer_ctx c = { .in = in, .n_in = n->n_in, .attr = n->attr, .out = out,
                         .err = detail, .errlen = sizeof detail };
    pbl_status s = op->infer(&c);
    if (s != PBL_OK)
        return pbl__errf(err, errlen, s, "node '%s' (%s): %s", n->name, op->name, detail);
    for (int32_t k = 0; k < op->n_out; k++) {
        if (!shape_ok(&out[k].shape)) {
            char sb[96];
            return pbl__errf(err, errlen, PBL_ERR_SHAPE, "node '%s' (%s): output %d would have shape %s", n->name,
                             op->name, (int)k, pbl_shape_str(&out[k].shape, sb, sizeof sb));
        }
    }
    return PBL_OK;
}

PBL__API pbl_status pbl_graph_add_node(pbl_graph *g, const pbl_node_desc *d, pbl_node *node_out,
                                       pbl_value *outputs)
{
    if (!g || !d)
        return PBL_ERR_INVALID_ARG;
    int32_t op_id = pbl__op_find(d->op);
    const pbl__op *op = pbl__op_get(op_id);
    /* Name the node first so every message carries the name it would have had. */
    char auto_name[96], who[160];
    const char *name = d->name;
    if (!name || !*name) {
        fresh_name(&g->node_names, op ? op->name : "node", g->n_nodes, auto_name, sizeof auto_name);
        name = auto_name;
    }
    if (!op)
        return pbl__graph_fail(g, PBL_ERR_UNKNOWN_OP, "node '%s': unknown op '%s'", name, d->op ? d->op : "(null)");
    snprintf(who, sizeof who, "node '%s' (%s)", name, op->name);
    if (d->n_inputs < op->n_in_min || d->n_inputs > op->n_in_max || (d->n_inputs > 0 && !d->inputs)) {
        if (op->n_in_min == op->n_in_max)
            return pbl__graph_fail(g, PBL_ERR_ARITY, "%s: takes %d inputs, got %d", who, (int)op->n_in_min, (int)d->n_inputs);
        return pbl__graph_fail(g, PBL_ERR_ARITY, "%s: takes %d to %d inputs, got %d", who,
                               (int)op->n_in_min, (int)op->n_in_max, (int)d->n_inputs);
    }
    for (int32_t i = 0; i < d->n_inputs; i++)
        if (d->inputs[i] < 0 || d->inputs[i] >= g->n_values)
            return pbl__graph_fail(g, PBL_ERR_DANGLING, "%s: input %d is %d, which names no value of this graph",
                                   who, (int)i, (int)d->inputs[i]);
    if (d->n_attrs < 0 || (d->n_attrs > 0 && !d->attrs))
        return pbl__graph_fail(g, PBL_ERR_ATTR, "%s: bad attribute list", who);
    if (pbl__names_get(&g->node_names, name) >= 0)
        return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "%s: a node of that name exists", who);
    char out_names[PBL__MAX_OUT][112];
    for (int32_t k = 0; k < op->n_out; k++) {
        if (k == 0)
            snprintf(out_names[k], sizeof out_names[k], "%s", name);
        else
            snprintf(out_names[k], sizeof out_names[k], "%s:%d", name, (int)k);
        if (pbl__names_get(&g->value_names, out_names[k]) >= 0)
            return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "%s: a value named '%s' exists", who, out_names[k]);
    }

    pbl__node n = { .op = op_id, .n_in = d->n_inputs, .n_out = op->n_out, .is_backward = g->in_backward };
    pbl_status s = PBL_ERR_NOMEM;
    n.name = pbl__mem_strdup(&g->mem, name);
    n.in = pbl__mem_alloc(&g->mem, (size_t)n.n_in * sizeof *n.in);
    n.out = pbl__mem_alloc(&g->mem, (size_t)n.n_out * sizeof *n.out);
    n.attr = pbl__mem_alloc(&g->mem, (size_t)op->n_attrs * sizeof *n.attr);
    if (!n.name || (n.n_in && !n.in) || !n.out || (op->n_attrs && !n.attr))
        goto fail_free_node;
    if (n.n_in)
        memcpy(n.in, d->inputs, (size_t)n.n_in * sizeof *n.in);
    s = fill_attrs(g, op, who, d->attrs, d->n_attrs, n.attr);
    if (s != PBL_OK)
        goto fail_free_node;
    pbl__meta out_meta[PBL__MAX_OUT];
    memset(out_meta, 0, sizeof out_meta);
    s = pbl__graph_infer_node(g, &n, out_meta, g->errmsg, sizeof g->errmsg);
    if (s != PBL_OK)
        goto fail_free_node;

    s = PBL_ERR_NOMEM;
    if (pbl__mem_reserve(&g->mem, (void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof *g->nodes) != PBL_OK)
        goto fail_free_node;
    int32_t n_values0 = g->n_values;
    pbl_node id = g->n_nodes;
    for (int32_t k = 0; k < op->n_out; k++)
        if (push_value(g, out_names[k], PBL_VALUE_NODE, out_meta[k], id, k, &n.out[k]) != PBL_OK)
            goto fail_drop_values;
    if (pbl__names_put(&g->node_names, &g->mem, n.name, id) != PBL_OK)
        goto fail_drop_values;
    g->nodes[id] = n;
    g->n_nodes++;
    if (node_out)
        *node_out = id;
    if (outputs)
        memcpy(outputs, n.out, (size_t)n.n_out * sizeof *n.out);
    return PBL_OK;

fail_drop_values:
    pbl__graph_truncate(g, n_values0, g->n_nodes);
fail_free_node:
    free_node(g, &n);
    if (s == PBL_ERR_NOMEM)
        pbl__graph_fail(g, s, "%s: out of memory", who);
    return s;
}

void pbl__graph_truncate(pbl_graph *g, int32_t n_values, int32_t n_nodes)
{
    while (g->n_nodes > n_nodes) {
        pbl__node *n = &g->nodes[--g->n_nodes];
        pbl__names_del(&g->node_names, n->name);
        free_node(g, n);
    }
    while (g->n_values > n_values) {
        pbl__value *v = &g->values[--g->n_values];
        pbl__names_del(&g->value_names, v->name);
        pbl__mem_strfree(&g->mem, v->name);
    }
    /* Outputs naming dropped values go too. */
    int32_t w = 0;
    for (int32_t i = 0; i < g->n_outputs; i++) {
        if (g->outputs[i].value < g->n_values)
            g->outputs[w++] = g->outputs[i];
        else
            pbl__mem_strfree(&g->mem, g->outputs[i].name);
    }
    g->n_outputs = w;
}

pbl_status pbl__graph_rename_value(pbl_graph *g, pbl_value v, const char *name)
{
    if (v < 0 || v >= g->n_values)
        return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "renaming value %d: no such value", (int)v);
    if (strcmp(g->values[v].name, name) == 0)
        return PBL_OK;
    if (pbl__names_get(&g->value_names, name) >= 0)
        return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "renaming value '%s' to '%s': a value of that name exists",
                               g->values[v].name, name);
    char *copy = pbl__mem_strdup(&g->mem, name);
    if (!copy || pbl__names_put(&g->value_names, &g->mem, copy, v) != PBL_OK) {
        pbl__mem_strfree(&g->mem, copy);
        return pbl__graph_fail(g, PBL_ERR_NOMEM, "renaming value '%s' to '%s': out of memory", g->values[v].name, name);
    }
    pbl__names_del(&g->value_names, g->values[v].name);
    pbl__mem_strfree(&g->mem, g->values[v].name);
    g->values[v].name = copy;
    return PBL_OK;
}

PBL__API pbl_status pbl_graph_set_output(pbl_graph *g, const char *name, pbl_value v)
{
    if (!g)
        return PBL_ERR_INVALID_ARG;
    if (!name || !*name)
        return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "output: a name is required");
    if (v < 0 || v >= g->n_values)
        return pbl__graph_fail(g, PBL_ERR_DANGLING, "output '%s': %d names no value of this graph", name, (int)v);
    for (int32_t i = 0; i < g->n_outputs; i++) {
        if (strcmp(g->outputs[i].name, name) == 0) {
            g->outputs[i].value = v;
            return PBL_OK;
        }
    }
    if (pbl__mem_reserve(&g->mem, (void **)&g->outputs, &g->cap_outputs, g->n_outputs + 1,
                         sizeof *g->outputs) != PBL_OK)
        return pbl__graph_fail(g, PBL_ERR_NOMEM, "output '%s': out of memory", name);
    char *copy = pbl__mem_strdup(&g->mem, name);
    if (!copy)
        return pbl__graph_fail(g, PBL_ERR_NOMEM, "output '%s': out of memory", name);
    g->outputs[g->n_outputs++] = (pbl__output){ .name = copy, .value = v };
    return PBL_OK;
}

PBL__API pbl_status pbl_graph_set_input(pbl_graph *g, pbl_node node, int32_t slot, pbl_value v)
{
    if (!g)
        return PBL_ERR_INVALID_ARG;
    if (node < 0 || node >= g->n_nodes)
        return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "set_input: %d names no node", (int)node);
    pbl__node *n = &g->nodes[node];
    if (slot < 0 || slot >= n->n_in)
        return pbl__graph_fail(g, PBL_ERR_ARITY, "node '%s': has no input %d", n->name, (int)slot);
    if (v < 0 || v >= g->n_values)
        return pbl__graph_fail(g, PBL_ERR_DANGLING, "node '%s': input %d set to %d, which names no value",
                               n->name, (int)slot, (int)v);
    const pbl__meta *was = &g->values[n->in[slot]].meta, *now = &g->values[v].meta;
    if (was->dtype != now->dtype || !pbl_shape_equal(&was->shape, &now->shape)) {
        char a[96], b[96];
        return pbl__graph_fail(g, PBL_ERR_SHAPE, "node '%s' (%s): input %d is %s %s, '%s' is %s %s",
                               n->name, pbl__op_get(n->op)->name, (int)slot,
                               pbl_shape_str(&was->shape, a, sizeof a), pbl_dtype_name(was->dtype),
                               g->values[v].name, pbl_shape_str(&now->shape, b, sizeof b), pbl_dtype_name(now->dtype));
    }
    n->in[slot] = v;
    return PBL_OK;
}

/* ---- queries ------------------------------------------------------------------------- */

PBL__API int32_t pbl_graph_value_count(const pbl_graph *g) { return g ? g->n_values : 0; }
PBL__API int32_t pbl_graph_node_count(const pbl_graph *g) { return g ? g->n_nodes : 0; }
PBL__API int32_t pbl_graph_output_count(const pbl_graph *g) { return g ? g->n_outputs : 0; }

PBL__API pbl_status pbl_graph_value_info(const pbl_graph *g, pbl_value v, pbl_value_info *out)
{
    if (!g || !out || v < 0 || v >= g->n_values)
        return PBL_ERR_INVALID_ARG;
    const pbl__value *x = &g->values[v];
    *out = (pbl_value_info){ .name = x->name, .kind = x->kind, .dtype = x->meta.dtype, .shape = x->meta.shape,
                             .producer = x->producer, .producer_slot = x->slot, .is_backward = x->is_backward,
                             .initial = x->initial };
    return PBL_OK;
}

PBL__API pbl_status pbl_graph_node_info(const pbl_graph *g, pbl_node n, pbl_node_info *out)
{
    if (!g || !out || n < 0 || n >= g->n_nodes)
        return PBL_ERR_INVALID_ARG;
    const pbl__node *x = &g->nodes[n];
    *out = (pbl_node_info){ .name = x->name, .op = pbl__op_get(x->op)->name, .inputs = x->in,
                            .n_inputs = x->n_in, .outputs = x->out, .n_outputs = x->n_out,
                            .is_backward = x->is_backward };
    return PBL_OK;
}

PBL__API pbl_status pbl_graph_output_at(const pbl_graph *g, int32_t i, const char **name, pbl_value *v)
{
    if (!g || i < 0 || i >= g->n_outputs)
        return PBL_ERR_INVALID_ARG;
    if (name)
        *name = g->outputs[i].name;
    if (v)
        *v = g->outputs[i].value;
    return PBL_OK;
}

PBL__API pbl_value pbl_graph_find_value(const pbl_graph *g, const char *name)
{
    return g && name ? pbl__names_get(&g->value_names, name) : PBL_NONE;
}

PBL__API pbl_node pbl_graph_find_node(const pbl_graph *g, const char *name)
{
    return g && name ? pbl__names_get(&g->node_names, name) : PBL_NONE;
}

PBL__API pbl_value pbl_graph_output(const pbl_graph *g, const char *name)
{
    if (!g || !name)
        return PBL_NONE;
    for (int32_t i = 0; i < g->n_outputs; i++)
        if (strcmp(g->outputs[i].name, name) == 0)
            return g->outputs[i].value;
    return PBL_NONE;
}

static pbl_status find_attr(const pbl_graph *g, pbl_node n, const char *name, pbl_attr_type type,
                            const pbl__attr_val **out)
{
    if (!g || !name || n < 0 || n >= g->n_nodes)
        return PBL_ERR_INVALID_ARG;
    const pbl__op *op = pbl__op_get(g->nodes[n].op);
    for (int32_t k = 0; k < op->n_attrs; k++) {
        if (strcmp(op->attrs[k].name, name) == 0) {
            if (op->attrs[k].type != type)
                return PBL_ERR_ATTR;
            *out = &g->nodes[n].attr[k];
            return PBL_OK;
        }
    }
    return PBL_ERR_NOT_FOUND;
}

PBL__API pbl_status pbl_graph_node_attr_int(const pbl_graph *g, pbl_node n, const char *name, int64_t *v)
{
    const pbl__attr_val *a;
    pbl_status s = find_attr(g, n, name, PBL_ATTR_INT, &a);
    if (s == PBL_OK && v)
        *v = a->i;
    return s;
}

PBL__API pbl_status pbl_graph_node_attr_float(const pbl_graph *g, pbl_node n, const char *name, double *v)
{
    const pbl__attr_val *a;
    pbl_status s = find_attr(g, n, name, PBL_ATTR_FLOAT, &a);
    if (s == PBL_OK && v)
        *v = a->f;
    return s;
}

PBL__API pbl_status pbl_graph_node_attr_ints(const pbl_graph *g, pbl_node n, const char *name,
                                             const int64_t **ints, int32_t *n_ints)
{
    const pbl__attr_val *a;
    pbl_status s = find_attr(g, n, name, PBL_ATTR_INTS, &a);
    if (s == PBL_OK) {
        if (ints)
            *ints = a->ints;
        if (n_ints)
            *n_ints = a->n_ints;
    }
    return s;
}
