/*
 * Static recomputation, the rewrite: a copy of a training graph in which dropped forward
 * values are computed again, by copies of their producers, just before the backward node that
 * first needs them (see pebble/recompute.h for why ids in that order are also the schedule).
 */
#include <stdio.h>
#include <string.h>

#include "graph/passes/recompute_internal.h"
#include "graph/ir/cost.h"
#include "graph/ir/registry.h"

void pbl__rc_info_free(pbl__rc_info *info, pbl__mem *m)
{
    pbl__mem_free(m, info->forward, (size_t)(info->n_nodes ? info->n_nodes : 1));
    pbl__mem_free(m, info->recomputable, (size_t)(info->n_values ? info->n_values : 1));
    pbl__mem_free(m, info->candidate, (size_t)(info->n_values ? info->n_values : 1));
    memset(info, 0, sizeof *info);
}

pbl_status pbl__rc_info_build(const pbl_graph *g, pbl__mem *m, pbl__rc_info *info)
{
    memset(info, 0, sizeof *info);
    info->n_nodes = g->n_nodes;
    info->n_values = g->n_values;
    info->forward = pbl__mem_calloc(m, (size_t)(g->n_nodes ? g->n_nodes : 1));
    info->recomputable = pbl__mem_calloc(m, (size_t)(g->n_values ? g->n_values : 1));
    info->candidate = pbl__mem_calloc(m, (size_t)(g->n_values ? g->n_values : 1));
    if (!info->forward || !info->recomputable || !info->candidate) {
        pbl__rc_info_free(info, m);
        return PBL_ERR_NOMEM;
    }
    for (pbl_node i = 0; i < g->n_nodes; i++) {
        const pbl__node *n = &g->nodes[i];
        /* updates overwrite their parameter: running one again would apply it twice */
        info->forward[i] = !n->is_backward && pbl__op_get(n->op)->n_mutates == 0;
        for (int32_t k = 0; k < n->n_out && info->forward[i]; k++)
            info->recomputable[n->out[k]] = 1;
    }
    /* graph outputs live to the end of the step: dropping them frees nothing */
    for (int32_t o = 0; o < g->n_outputs; o++)
        info->recomputable[g->outputs[o].value] = 0;
    for (pbl_node i = 0; i < g->n_nodes; i++) {
        if (info->forward[i])
            continue;
        const pbl__node *n = &g->nodes[i];
        for (int32_t k = 0; k < n->n_in; k++)
            if (info->recomputable[n->in[k]])
                info->candidate[n->in[k]] = 1;
    }
    for (pbl_value v = 0; v < g->n_values; v++)
        info->n_candidates += info->candidate[v];
    return PBL_OK;
}

/* The rewrite's state: the new graph and, per old value, its copy and its recomputation. */
typedef struct rewrite {
    const pbl_graph    *g;
    const pbl__rc_info *info;
    const uint8_t      *drop;
    pbl_graph          *ng;
    pbl__mem           *m;
    pbl_value          *copy;    /* per old value: the new graph's value */
    pbl_value          *again;   /* per old value: its recomputation, PBL_NONE if none yet */
    pbl_value          *stack;   /* values whose recomputation is pending */
    int32_t            *cursor;  /* per value on the stack: the next producer input to look at */
    int32_t             recomputed;
    double              extra_flops;
    char               *err;
    size_t              errlen;
} rewrite;

/* Adds a node like old node i, reading in[], named `name`; new outputs in out[]. */
static pbl_status add_like(rewrite *w, pbl_node i, const char *name, const pbl_value *in, pbl_value *out)
{
    const pbl__node *n = &w->g->nodes[i];
    const pbl__op *op = pbl__op_get(n->op);
    pbl_attr attrs[16];
    int32_t n_attrs = 0;
    if (op->n_attrs > (int32_t)(sizeof attrs / sizeof attrs[0])) {
        snprintf(w->err, w->errlen, "node '%s' (%s): too many attributes to copy", n->name, op->name);
        return PBL_ERR_INVALID_ARG;
    }
    for (int32_t k = 0; k < op->n_attrs; k++) {
        const pbl__attr_val *a = &n->attr[k];
        if (!a->set) /* leave it to the op's default, as the original did */
            continue;
        attrs[n_attrs++] = (pbl_attr){ .name = op->attrs[k].name, .type = op->attrs[k].type, .i = a->i,
                                       .f = a->f, .ints = a->ints, .n_ints = a->n_ints };
    }
    pbl_node_desc d = { .op = op->name, .name = name, .inputs = in, .n_inputs = n->n_in,
                        .attrs = attrs, .n_attrs = n_attrs };
    pbl_status s = pbl_graph_add_node(w->ng, &d, NULL, out);
    if (s != PBL_OK)
        snprintf(w->err, w->errlen, "copying node '%s': %s", n->name, pbl_graph_errmsg(w->ng));
    return s;
}

/* The value a recomputation or backward node reads for old value v. */
static pbl_value late_input(const rewrite *w, pbl_value v)
{
    return w->drop[v] ? w->again[v] : w->copy[v];
}

/* Emits the recomputation of dropped value v after those of the dropped values it needs:
 * depth first with an explicit stack (a chain is as deep as the network) and a cursor per
 * value over its producer's inputs. A value is on the stack at most once: the graph is
 * acyclic, and once recomputed it is never pushed again. */
static pbl_status recompute(rewrite *w, pbl_value v)
{
    const pbl_graph *g = w->g;
    int32_t top = 0;
    w->stack[top++] = v;
    w->cursor[v] = 0;
    while (top > 0) {
        pbl_value t = w->stack[top - 1];
        pbl_node p = g->values[t].producer;
        const pbl__node *n = &g->nodes[p];
        int pushed = 0;
        while (w->cursor[t] < n->n_in && !pushed) {
            pbl_value u = n->in[w->cursor[t]++];
            if (w->drop[u] && w->again[u] == PBL_NONE) {
                w->stack[top++] = u;
                w->cursor[u] = 0;
                pushed = 1;
            }
        }
        if (pushed)
            continue;
        top--;
        if (w->again[t] != PBL_NONE) /* a sibling output of a node already recomputed */
            continue;
        pbl_value in[PBL__MAX_IN], out[PBL__MAX_OUT];
        for (int32_t k = 0; k < n->n_in; k++)
            in[k] = late_input(w, n->in[k]);
        char name[160];
        snprintf(name, sizeof name, "%s/recompute", n->name);
        pbl_status s = add_like(w, p, name, in, out);
        if (s != PBL_OK)
            return s;
        for (int32_t k = 0; k < n->n_out; k++)
            w->again[n->out[k]] = out[k];
        w->recomputed++;
        w->extra_flops += (double)pbl__node_cost(g, p).flops;
    }
    return PBL_OK;
}

static pbl_status copy_variables(rewrite *w)
{
    for (pbl_value v = 0; v < w->g->n_values; v++) {
        const pbl__value *x = &w->g->values[v];
        if (x->producer != PBL_NONE)
            continue;
        pbl_status s = pbl_graph_add_variable(w->ng, x->name, x->kind, x->meta.dtype, x->meta.shape, &w->copy[v]);
        if (s != PBL_OK) {
            snprintf(w->err, w->errlen, "copying variable '%s': %s", x->name, pbl_graph_errmsg(w->ng));
            return s;
        }
        w->ng->values[w->copy[v]].initial = x->initial;
    }
    return PBL_OK;
}

static pbl_status copy_nodes(rewrite *w)
{
    const pbl_graph *g = w->g;
    for (pbl_node i = 0; i < g->n_nodes; i++) {
        const pbl__node *n = &g->nodes[i];
        pbl_value in[PBL__MAX_IN], out[PBL__MAX_OUT];
        int late = !w->info->forward[i];
        for (int32_t k = 0; k < n->n_in && late; k++) {
            if (w->drop[n->in[k]] && w->again[n->in[k]] == PBL_NONE) {
                w->ng->in_backward = 1; /* recomputations belong to the backward pass */
                pbl_status s = recompute(w, n->in[k]);
                if (s != PBL_OK)
                    return s;
            }
        }
        for (int32_t k = 0; k < n->n_in; k++)
            in[k] = late ? late_input(w, n->in[k]) : w->copy[n->in[k]];
        w->ng->in_backward = n->is_backward;
        pbl_status s = add_like(w, i, n->name, in, out);
        if (s != PBL_OK)
            return s;
        for (int32_t k = 0; k < n->n_out; k++)
            w->copy[n->out[k]] = out[k];
    }
    w->ng->in_backward = 0;
    return PBL_OK;
}

pbl_status pbl__rc_rewrite(const pbl_graph *g, const pbl__rc_info *info, const uint8_t *drop,
                           const pbl_allocator *a, pbl_graph **out, int32_t *recomputed,
                           double *extra_flops, char *err, size_t errlen)
{
    *out = NULL;
    pbl__mem m;
    pbl__mem_init(&m, a);
    size_t nv = (size_t)(g->n_values ? g->n_values : 1);
    rewrite w = { .g = g, .info = info, .drop = drop, .m = &m, .err = err, .errlen = errlen };
    w.copy = pbl__mem_alloc(&m, nv * sizeof *w.copy);
    w.again = pbl__mem_alloc(&m, nv * sizeof *w.again);
    w.stack = pbl__mem_alloc(&m, nv * sizeof *w.stack);
    w.cursor = pbl__mem_alloc(&m, nv * sizeof *w.cursor);
    pbl_graph_options go = pbl_graph_options_default();
    go.allocator = a;
    pbl_status s = PBL_ERR_NOMEM;
    if (!w.copy || !w.again || !w.stack || !w.cursor || pbl_graph_create(&w.ng, &go) != PBL_OK) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    for (size_t v = 0; v < nv; v++)
        w.copy[v] = w.again[v] = PBL_NONE;
    s = copy_variables(&w);
    if (s == PBL_OK)
        s = copy_nodes(&w);
    for (int32_t o = 0; o < g->n_outputs && s == PBL_OK; o++) {
        s = pbl_graph_set_output(w.ng, g->outputs[o].name, w.copy[g->outputs[o].value]);
        if (s != PBL_OK)
            snprintf(err, errlen, "output '%s': %s", g->outputs[o].name, pbl_graph_errmsg(w.ng));
    }
    if (s == PBL_OK) {
        w.ng->has_gradient = g->has_gradient;
        *out = w.ng;
        w.ng = NULL;
        *recomputed = w.recomputed;
        *extra_flops = w.extra_flops;
    }
done:
    pbl_graph_destroy(w.ng);
    pbl__mem_free(&m, w.copy, nv * sizeof *w.copy);
    pbl__mem_free(&m, w.again, nv * sizeof *w.again);
    pbl__mem_free(&m, w.stack, nv * sizeof *w.stack);
    pbl__mem_free(&m, w.cursor, nv * sizeof *w.cursor);
    return s;
}
