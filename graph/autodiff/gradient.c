/*
 * The gradient pass (MXNet-style): walk the nodes that lie between the parameters and the
 * loss in reverse topological order; at each node, sum the gradient contributions of each
 * output (one add_n node when there are several), then let the op's gradient rule emit the
 * input gradients as ordinary nodes through pbl_graph_add_node.
 */
#include <stdio.h>
#include <string.h>

#include "graph/ir/schedule.h"
#include "graph/ir/registry.h"
#include "pebble/autodiff.h"

/* Gradient contributions per value, as linked lists in one array. */
typedef struct contrib {
    pbl_value grad;
    int32_t   next;
} contrib;

typedef struct grad_state {
    pbl_graph *g;
    int32_t   *head;    /* per value: first contribution or -1 */
    int32_t   *count;   /* per value: contributions */
    contrib   *list;
    int32_t    n_list, cap_list;
} grad_state;

static pbl_status add_contrib(grad_state *st, pbl_value v, pbl_value grad)
{
    if (pbl__mem_reserve(&st->g->mem, (void **)&st->list, &st->cap_list, st->n_list + 1, sizeof *st->list) != PBL_OK)
        return PBL_ERR_NOMEM;
    st->list[st->n_list] = (contrib){ .grad = grad, .next = st->head[v] };
    st->head[v] = st->n_list++;
    st->count[v]++;
    return PBL_OK;
}

/* The total gradient of v: PBL_NONE, its one contribution, or an add_n over all of them
 * (chained when there are more than add_n takes). */
static pbl_status total_grad(grad_state *st, pbl_value v, pbl_value *out)
{
    *out = PBL_NONE;
    int32_t n = st->count[v];
    if (n == 0)
        return PBL_OK;
    pbl_value parts[PBL__MAX_IN];
    int32_t k = 0, at = st->head[v];
    /* the list is newest first; sum in the order contributions arrived */
    pbl_value stack_small[64];
    pbl_value *all = n <= 64 ? stack_small : pbl__mem_alloc(&st->g->mem, (size_t)n * sizeof *all);
    if (!all)
        return pbl__graph_fail(st->g, PBL_ERR_NOMEM, "gradient: out of memory");
    for (int32_t i = n - 1; i >= 0; i--, at = st->list[at].next)
        all[i] = st->list[at].grad;
    pbl_status s = PBL_OK;
    if (n == 1) {
        *out = all[0];
        goto done;
    }
    pbl_value acc = PBL_NONE;
    for (int32_t i = 0, round = 0; i < n; round++) {
        k = 0;
        if (acc != PBL_NONE)
            parts[k++] = acc;
        while (k < PBL__MAX_IN && i < n)
            parts[k++] = all[i++];
        char name[160];
        snprintf(name, sizeof name, round ? "%s/grad_sum%d" : "%s/grad_sum", st->g->values[v].name, (int)round);
        pbl_node_desc d = { .op = "add_n", .name = name, .inputs = parts, .n_inputs = k };
        s = pbl_graph_add_node(st->g, &d, NULL, &acc);
        if (s != PBL_OK)
            goto done;
    }
    *out = acc;
done:
    if (all != stack_small)
        pbl__mem_free(&st->g->mem, all, (size_t)n * sizeof *all);
    return s;
}

pbl_value pbl__grad_emit(pbl__grad_ctx *c, const char *op, const char *suffix, const pbl_value *in,
                         int32_t n_in, const pbl_attr *attrs, int32_t n_attrs)
{
    if (c->status != PBL_OK)
        return PBL_NONE;
    char name[160];
    snprintf(name, sizeof name, "%s/%s", c->fwd_name, suffix);
    pbl_node_desc d = { .op = op, .name = name, .inputs = in, .n_inputs = n_in, .attrs = attrs, .n_attrs = n_attrs };
    pbl_value out[PBL__MAX_OUT];
    c->status = pbl_graph_add_node(c->g, &d, NULL, out);
    return c->status == PBL_OK ? out[0] : PBL_NONE;
}

/* Marks nodes on a path from some wrt value to the loss (relevant[]) and the values that
 * depend on a wrt value (varies[]). */
static pbl_status find_paths(pbl_graph *g, const pbl__deps *d, const int32_t *order, int32_t n_order,
                             pbl_value loss, const pbl_value *wrt, int32_t n_wrt,
                             uint8_t *varies, uint8_t *relevant)
{
    for (int32_t i = 0; i < n_wrt; i++)
        varies[wrt[i]] = 1;
    for (int32_t o = 0; o < n_order; o++) {
        const pbl__node *n = &g->nodes[order[o]];
        int v = 0;
        for (int32_t k = 0; k < n->n_in; k++)
            v |= varies[n->in[k]];
        for (int32_t k = 0; k < n->n_out && v; k++)
            varies[n->out[k]] = g->values[n->out[k]].meta.dtype == PBL_F32;
    }
    uint8_t *seed = relevant; /* reuse: seed = the loss's producer, then its ancestors */
    memset(seed, 0, (size_t)g->n_nodes);
    if (g->values[loss].producer >= 0)
        seed[g->values[loss].producer] = 1;
    uint8_t *anc = pbl__mem_alloc(&g->mem, (size_t)(g->n_nodes ? g->n_nodes : 1));
    if (!anc)
        return PBL_ERR_NOMEM;
    pbl_status s = pbl__deps_ancestors(d, &g->mem, seed, anc);
    for (int32_t i = 0; i < g->n_nodes && s == PBL_OK; i++) {
        const pbl__node *n = &g->nodes[i];
        int v = 0;
        for (int32_t k = 0; k < n->n_in; k++)
            v |= varies[n->in[k]];
        relevant[i] = anc[i] && v;
    }
    pbl__mem_free(&g->mem, anc, (size_t)(g->n_nodes ? g->n_nodes : 1));
    return s;
}

static pbl_status backward_node(grad_state *st, const uint8_t *varies, pbl_node id)
{
    pbl_graph *g = st->g;
    /* Copy what the rule reads: adding nodes may move g->nodes. */
    pbl__node n = g->nodes[id];
    const pbl__op *op = pbl__op_get(n.op);
    pbl_value x[PBL__MAX_IN], y[PBL__MAX_OUT], dy[PBL__MAX_OUT], dx[PBL__MAX_IN];
    int32_t need[PBL__MAX_IN];
    pbl__attr_val attr[8];
    char fwd_name[128];
    snprintf(fwd_name, sizeof fwd_name, "%s", n.name);
    memcpy(x, n.in, (size_t)n.n_in * sizeof *x);
    memcpy(y, n.out, (size_t)n.n_out * sizeof *y);
    if (op->n_attrs > 0)
        memcpy(attr, n.attr, (size_t)op->n_attrs * sizeof *attr);

    int any_dy = 0, any_need = 0;
    for (int32_t k = 0; k < n.n_out; k++) {
        pbl_status s = total_grad(st, y[k], &dy[k]);
        if (s != PBL_OK)
            return s;
        any_dy |= dy[k] != PBL_NONE;
    }
    for (int32_t i = 0; i < n.n_in; i++) {
        need[i] = varies[x[i]];
        any_need |= need[i];
        dx[i] = PBL_NONE;
    }
    if (!any_dy || !any_need)
        return PBL_OK;
    if (!op->grad)
        return pbl__graph_fail(g, PBL_ERR_NOT_DIFFERENTIABLE, "node '%s' (%s): op has no gradient rule, but lies between the loss and a parameter",
                               fwd_name, op->name);
    pbl__grad_ctx c = { .g = g, .fwd_name = fwd_name, .x = x, .y = y, .attr = attr, .n_in = n.n_in,
                        .dy = dy, .dx = dx, .need = need };
    pbl_status s = op->grad(&c);
    if (s != PBL_OK)
        return s;
    for (int32_t i = 0; i < n.n_in; i++) {
        if (need[i] && dx[i] != PBL_NONE && add_contrib(st, x[i], dx[i]) != PBL_OK)
            return pbl__graph_fail(g, PBL_ERR_NOMEM, "gradient: out of memory");
    }
    return PBL_OK;
}

PBL__API pbl_status pbl_graph_gradient(pbl_graph *g, pbl_value loss, const pbl_value *wrt, int32_t n_wrt,
                                       pbl_value *grads)
{
    if (!g)
        return PBL_ERR_INVALID_ARG;
    if (n_wrt < 0 || (n_wrt > 0 && (!wrt || !grads)))
        return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "gradient: bad wrt list");
    if (g->has_gradient)
        return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "gradient: this graph already has backward nodes");
    if (loss < 0 || loss >= g->n_values)
        return pbl__graph_fail(g, PBL_ERR_DANGLING, "gradient: loss %d names no value", (int)loss);
    const pbl__meta *lm = &g->values[loss].meta;
    if (lm->dtype != PBL_F32 || pbl_shape_numel(&lm->shape) != 1)
        return pbl__graph_fail(g, PBL_ERR_SHAPE, "gradient: loss '%s' must be a scalar f32", g->values[loss].name);
    for (int32_t i = 0; i < n_wrt; i++) {
        if (wrt[i] < 0 || wrt[i] >= g->n_values)
            return pbl__graph_fail(g, PBL_ERR_DANGLING, "gradient: wrt[%d] = %d names no value", (int)i, (int)wrt[i]);
        if (g->values[wrt[i]].meta.dtype != PBL_F32)
            return pbl__graph_fail(g, PBL_ERR_DTYPE, "gradient: '%s' is %s; only f32 values have gradients",
                                   g->values[wrt[i]].name, pbl_dtype_name(g->values[wrt[i]].meta.dtype));
    }
    pbl_status s = pbl_graph_validate(g);
    if (s != PBL_OK)
        return s;

    int32_t nv0 = g->n_values, nn0 = g->n_nodes;
    grad_state st = { .g = g };
    pbl__deps d = { 0 };
    int32_t *order = pbl__mem_alloc(&g->mem, (size_t)(nn0 ? nn0 : 1) * sizeof *order);
    uint8_t *varies = pbl__mem_calloc(&g->mem, (size_t)(nv0 ? nv0 : 1));
    uint8_t *relevant = pbl__mem_calloc(&g->mem, (size_t)(nn0 ? nn0 : 1));
    st.head = pbl__mem_alloc(&g->mem, (size_t)(nv0 ? nv0 : 1) * sizeof *st.head);
    st.count = pbl__mem_calloc(&g->mem, (size_t)(nv0 ? nv0 : 1) * sizeof *st.count);
    s = PBL_ERR_NOMEM;
    if (!order || !varies || !relevant || !st.head || !st.count || pbl__deps_build(g, &g->mem, &d) != PBL_OK)
        goto fail;
    for (int32_t v = 0; v < nv0; v++)
        st.head[v] = -1;
    int32_t n_order = 0;
    s = pbl__deps_order(&d, &g->mem, NULL, NULL, order, &n_order, NULL);
    if (s == PBL_OK)
        s = find_paths(g, &d, order, n_order, loss, wrt, n_wrt, varies, relevant);
    if (s != PBL_OK)
        goto fail;

    g->in_backward = 1;
    if (varies[loss]) {
        /* d loss / d loss = 1 */
        char name[160];
        snprintf(name, sizeof name, "%s/grad_seed", g->values[loss].name);
        pbl_attr at[] = { PBL_ATTR_INTS("shape", lm->shape.dim, lm->shape.ndim), PBL_ATTR_FLOAT("value", 1.0) };
        pbl_node_desc seed = { .op = "fill", .name = name, .attrs = at, .n_attrs = 2 };
        pbl_value one;
        s = pbl_graph_add_node(g, &seed, NULL, &one);
        if (s == PBL_OK && add_contrib(&st, loss, one) != PBL_OK)
            s = PBL_ERR_NOMEM;
        for (int32_t o = n_order - 1; o >= 0 && s == PBL_OK; o--)
            if (relevant[order[o]])
                s = backward_node(&st, varies, order[o]);
    }
    for (int32_t i = 0; i < n_wrt && s == PBL_OK; i++)
        s = total_grad(&st, wrt[i], &grads[i]);
    g->in_backward = 0;
    if (s != PBL_OK)
        goto fail;
    g->has_gradient = 1;
    goto done;

fail:
    g->in_backward = 0;
    if (s == PBL_ERR_NOMEM)
        pbl__graph_fail(g, s, "gradient: out of memory");
    pbl__graph_truncate(g, nv0, nn0);
done:
    pbl__deps_free(&d, &g->mem);
    pbl__mem_free(&g->mem, order, (size_t)(nn0 ? nn0 : 1) * sizeof *order);
    pbl__mem_free(&g->mem, varies, (size_t)(nv0 ? nv0 : 1));
    pbl__mem_free(&g->mem, relevant, (size_t)(nn0 ? nn0 : 1));
    pbl__mem_free(&g->mem, st.head, (size_t)(nv0 ? nv0 : 1) * sizeof *st.head);
    pbl__mem_free(&g->mem, st.count, (size_t)(nv0 ? nv0 : 1) * sizeof *st.count);
    pbl__mem_free(&g->mem, st.list, (size_t)st.cap_list * sizeof *st.list);
    return s;
}
