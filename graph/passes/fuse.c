/*
 * Operator fusion (pebble/fuse.h): groups of nodes become one fully_connected_act,
 * elementwise_chain, fully_connected_grad_wb or matmul_act_grad node in a copy of the graph.
 *
 * Most groups are chains: each member's only output is read by exactly one node input, the
 * next member's, and is no graph output. The weight/bias-gradient groups are siblings
 * instead: a product and a reduction that both read the same incoming gradient, with no
 * value passing between them. Groups are found in node-id order, greedily, and a node joins a
 * group only if the group stays convex in the graph where earlier groups are already
 * contracted to one node (for siblings: in both directions): otherwise the fused graph could
 * have a cycle (a group reading a weight before its update and, through another member,
 * something computed after it).
 *
 * The copy keeps node-id order, each fused node taking its emission point's place: for a
 * chain its last member's (its inputs are all produced earlier: a member's outside inputs
 * come from nodes with smaller ids, and an inside value is read by nobody else); for a
 * sibling pair the earlier member's when every input of the later one exists by then, else
 * the later member's when nothing reads the earlier one's output before it. So the copy is
 * built front to back like the original and the executor's schedule (dependencies, then
 * smallest id) runs it in the original's order up to that one move.
 */
#include <stdio.h>
#include <string.h>

#include "graph/base/export.h"
#include "graph/ir/schedule.h"
#include "graph/ir/fused_codes.h"
#include "graph/ir/registry.h"
#include "pebble/fuse.h"

enum { KIND_NONE, KIND_DENSE, KIND_CHAIN, KIND_WEIGHT_BIAS, KIND_ACT_GRAD };

typedef struct fuser {
    const pbl_graph *g;
    pbl__mem        *m;
    pbl__deps        deps;
    int32_t         *readers;  /* per value: node inputs reading it (+1 if a graph output) */
    pbl_node        *reader;   /* per value: the last node reading it */
    pbl_node        *head;     /* per node: its group's first member (itself when alone) */
    pbl_node        *next;     /* per node: the next member of its group, PBL_NONE at the end */
    pbl_node        *last;     /* per group head: the last member */
    pbl_node        *emit;     /* per group head: the node whose place the fused node takes */
    int32_t         *kind;     /* per group head */
    int32_t         *seen;     /* per node: the stamp of the last search that reached it */
    pbl_node        *queue;
    int32_t          stamp;
} fuser;


/* The only node reading value v, or PBL_NONE when v is read more than once, is a graph
 * output, or is read by nobody. */
static pbl_node sole_reader(const fuser *f, pbl_value v)
{
    return f->readers[v] == 1 ? f->reader[v] : PBL_NONE;
}

/* Would adding node b (alone, not yet grouped) after the group headed by h leave a path from
 * the group to b through nodes outside it? A breadth-first search over the contracted graph:
 * reaching any member of a group reaches them all. */
static int joins_convexly(fuser *f, pbl_node h, pbl_node b)
{
    int32_t qn = 0, qi = 0;
    f->stamp++;
    for (pbl_node m = h; m != PBL_NONE; m = f->next[m])
        f->seen[m] = f->stamp;
    for (pbl_node m = h; m != PBL_NONE; m = f->next[m])
        for (int32_t e = f->deps.succ_start[m]; e < f->deps.succ_start[m + 1]; e++) {
            pbl_node s = f->deps.succ[e];
            if (s != b && f->seen[s] != f->stamp) {
                f->seen[s] = f->stamp;
                f->queue[qn++] = s;
            }
        }
    while (qi < qn) {
        pbl_node u = f->queue[qi++];
        for (pbl_node m = f->head[u]; m != PBL_NONE; m = f->next[m]) {
            f->seen[m] = f->stamp;
            for (int32_t e = f->deps.succ_start[m]; e < f->deps.succ_start[m + 1]; e++) {
                pbl_node s = f->deps.succ[e];
                if (s == b)
                    return 0;
                if (f->seen[s] != f->stamp) {
                    f->seen[s] = f->stamp;
                    f->queue[qn++] = s;
                }
            }
        }
    }
    return 1;
}

/* Node b may follow the group headed by h, whose last member's output b reads alone. */
static int may_join(fuser *f, pbl_node h, pbl_node b)
{
    const pbl_graph *g = f->g;
    return f->head[b] == b && f->next[b] == PBL_NONE && g->nodes[b].is_backward == g->nodes[h].is_backward &&
           joins_convexly(f, h, b);
}

static void join(fuser *f, pbl_node h, pbl_node b, int32_t kind)
{
    f->next[f->last[h]] = b;
    f->last[h] = b;
    f->emit[h] = b;
    f->head[b] = h;
    f->kind[h] = kind;
}

static int is_activation(int32_t op)
{
    return op == PBL__OP_relu || op == PBL__OP_sigmoid || op == PBL__OP_tanh || op == PBL__OP_gelu;
}

static int is_binary(int32_t op)
{
    return op == PBL__OP_add || op == PBL__OP_sub || op == PBL__OP_mul || op == PBL__OP_div;
}

/* fully_connected [-> add(·, b[out])] [-> activation] from node i. */
static void find_dense(fuser *f, pbl_node i)
{
    const pbl_graph *g = f->g;
    const pbl__node *n = &g->nodes[i];
    if (n->op != PBL__OP_fully_connected || f->head[i] != i || f->next[i] != PBL_NONE)
        return;
    pbl_node c = sole_reader(f, n->out[0]);
    if (c != PBL_NONE && n->n_in == 2 && g->nodes[c].op == PBL__OP_add && g->nodes[c].in[0] == n->out[0]) {
        const pbl_shape *b = &g->values[g->nodes[c].in[1]].meta.shape, *w = &g->values[n->in[1]].meta.shape;
        if (b->ndim == 1 && b->dim[0] == w->dim[0] && may_join(f, i, c)) {
            join(f, i, c, KIND_DENSE);
            c = sole_reader(f, g->nodes[c].out[0]);
        }
    }
    if (c != PBL_NONE && is_activation(g->nodes[c].op) && may_join(f, i, c))
        join(f, i, c, KIND_DENSE);
}

/* The value the chain carries into node c is v; c can take a step of a chain if it is an
 * activation, or a binary op whose other operand has v's shape. */
static int chain_step_ok(const fuser *f, pbl_node c, pbl_value v)
{
    const pbl_graph *g = f->g;
    const pbl__node *n = &g->nodes[c];
    if (is_activation(n->op))
        return 1;
    if (!is_binary(n->op))
        return 0;
    pbl_value other = n->in[0] == v ? n->in[1] : n->in[0];
    return pbl_shape_equal(&g->values[other].meta.shape, &g->values[v].meta.shape) &&
           g->values[other].meta.dtype == PBL_F32 && g->values[v].meta.dtype == PBL_F32;
}

/* A run of element-wise nodes from node i, within the op's limits. */
static void find_chain(fuser *f, pbl_node i)
{
    const pbl_graph *g = f->g;
    if (f->head[i] != i || f->next[i] != PBL_NONE || g->nodes[i].n_in < 1 || !chain_step_ok(f, i, g->nodes[i].in[0]))
        return;
    int32_t steps = 1, operands = 1 + is_binary(g->nodes[i].op);
    pbl_node t = i;
    for (;;) {
        pbl_value v = g->nodes[t].out[0];
        pbl_node c = sole_reader(f, v);
        if (c == PBL_NONE || !chain_step_ok(f, c, v) || steps + 1 > PBL_MAX_INTS ||
            operands + is_binary(g->nodes[c].op) > PBL__MAX_IN || !may_join(f, i, c))
            break;
        join(f, i, c, KIND_CHAIN);
        steps++;
        operands += is_binary(g->nodes[c].op);
        t = c;
    }
}

/* ---- backward: weight + bias gradients, data-gradient product + activation gradient ------- */

static int is_act_grad(int32_t op)
{
    return op == PBL__OP_relu_grad || op == PBL__OP_sigmoid_grad || op == PBL__OP_tanh_grad || op == PBL__OP_gelu_grad;
}

/* Node r reduces the 2-D value dy [N, out] over its rows to [out]: sum(dy, axes [0]) or
 * sum_to(dy, [out]) — the bias gradients of fully_connected and of a bias add. */
static int is_row_sum(const fuser *f, pbl_node r, pbl_value dy)
{
    const pbl_graph *g = f->g;
    const pbl__node *n = &g->nodes[r];
    const pbl_shape *x = &g->values[dy].meta.shape, *y = &g->values[n->out[0]].meta.shape;
    if ((n->op != PBL__OP_sum && n->op != PBL__OP_sum_to) || n->in[0] != dy || x->ndim != 2)
        return 0;
    if (n->op == PBL__OP_sum) {
        const pbl__attr_val *axes = &n->attr[0];
        if (axes->n_ints != 1 || (axes->ints[0] != 0 && axes->ints[0] != -2))
            return 0;
    }
    return y->ndim == 1 && y->dim[0] == x->dim[1];
}

/* The fused node of siblings lo < hi can take lo's place if every input of hi is produced
 * by then (a variable, or a node emitted before lo), or hi's place if nothing depends on lo
 * before hi. Returns that place, or PBL_NONE. */
static pbl_node sibling_place(const fuser *f, pbl_node lo, pbl_node hi)
{
    int early = 1, late = 1;
    for (int32_t e = f->deps.pred_start[hi]; e < f->deps.pred_start[hi + 1] && early; e++)
        early = f->emit[f->head[f->deps.pred[e]]] < lo;
    if (early)
        return lo;
    for (int32_t e = f->deps.succ_start[lo]; e < f->deps.succ_start[lo + 1] && late; e++)
        late = f->emit[f->head[f->deps.succ[e]]] > hi;
    return late ? hi : PBL_NONE;
}

/* matmul(dy, x, trans_a = 1) from node i (fully_connected's weight gradient) and a reduction
 * of dy over its rows (its bias gradient) -> one fully_connected_grad_wb group. */
static void find_weight_bias(fuser *f, pbl_node i)
{
    const pbl_graph *g = f->g;
    const pbl__node *n = &g->nodes[i];
    if (n->op != PBL__OP_matmul || f->head[i] != i || f->next[i] != PBL_NONE || n->attr[0].i != 1 ||
        n->attr[1].i != 0 || g->values[n->in[0]].meta.shape.ndim != 2 || g->values[n->in[1]].meta.shape.ndim != 2)
        return;
    pbl_value dy = n->in[0];
    pbl_node p = g->values[dy].producer;
    if (p == PBL_NONE)
        return;
    /* dy's readers are among its producer's successors */
    for (int32_t e = f->deps.succ_start[p]; e < f->deps.succ_start[p + 1]; e++) {
        pbl_node r = f->deps.succ[e];
        if (r == i || f->head[r] != r || f->next[r] != PBL_NONE || !is_row_sum(f, r, dy) ||
            g->nodes[r].is_backward != n->is_backward || !joins_convexly(f, i, r) || !joins_convexly(f, r, i))
            continue;
        pbl_node place = sibling_place(f, i < r ? i : r, i < r ? r : i);
        if (place == PBL_NONE)
            continue;
        join(f, i, r, KIND_WEIGHT_BIAS); /* the head is the product, the second member the sum */
        f->emit[i] = place;
        return;
    }
}

/* act_grad(matmul(a, b), s) at node i -> one matmul_act_grad group: the product read by
 * nothing else. */
static void find_act_grad(fuser *f, pbl_node i)
{
    const pbl_graph *g = f->g;
    const pbl__node *n = &g->nodes[i];
    if (!is_act_grad(n->op) || f->head[i] != i || f->next[i] != PBL_NONE || n->in[1] == n->in[0])
        return;
    pbl_node p = g->values[n->in[0]].producer;
    if (p == PBL_NONE || g->nodes[p].op != PBL__OP_matmul || f->head[p] != p || f->next[p] != PBL_NONE ||
        sole_reader(f, n->in[0]) != i)
        return;
    if (may_join(f, p, i))
        join(f, p, i, KIND_ACT_GRAD);
}

/* ---- the copy ----------------------------------------------------------------------------- */

typedef struct copier {
    const fuser     *f;
    pbl_graph       *ng;
    pbl_value       *copy;    /* per old value: the new graph's value */
    pbl_fuse_report *r;
    char            *err;
    size_t           errlen;
} copier;

/* Adds a node like old node i, its inputs mapped. */
static pbl_status copy_node(copier *c, pbl_node i)
{
    const pbl__node *n = &c->f->g->nodes[i];
    const pbl__op *op = pbl__op_get(n->op);
    pbl_attr attrs[16];
    pbl_value in[PBL__MAX_IN], out[PBL__MAX_OUT];
    int32_t n_attrs = 0;
    if (op->n_attrs > (int32_t)(sizeof attrs / sizeof attrs[0])) {
        snprintf(c->err, c->errlen, "node '%s' (%s): too many attributes to copy", n->name, op->name);
        return PBL_ERR_INVALID_ARG;
    }
    for (int32_t k = 0; k < op->n_attrs; k++) {
        const pbl__attr_val *a = &n->attr[k];
        if (a->set)
            attrs[n_attrs++] = (pbl_attr){ .name = op->attrs[k].name, .type = op->attrs[k].type, .i = a->i,
                                           .f = a->f, .ints = a->ints, .n_ints = a->n_ints };
    }
    for (int32_t k = 0; k < n->n_in; k++)
        in[k] = c->copy[n->in[k]];
    pbl_node_desc d = { .op = op->name, .name = n->name, .inputs = in, .n_inputs = n->n_in,
                        .attrs = attrs, .n_attrs = n_attrs };
    pbl_status s = pbl_graph_add_node(c->ng, &d, NULL, out);
    if (s != PBL_OK) {
        snprintf(c->err, c->errlen, "copying node '%s': %s", n->name, pbl_graph_errmsg(c->ng));
        return s;
    }
    for (int32_t k = 0; k < n->n_out; k++)
        c->copy[n->out[k]] = out[k];
    return PBL_OK;
}

/* "a+b+c" from the members' names, cut short (with "+...") if it would not fit. */
static void group_name(const fuser *f, pbl_node h, char *name, size_t cap)
{
    size_t len = 0;
    name[0] = '\0';
    for (pbl_node m = h; m != PBL_NONE; m = f->next[m]) {
        int w = snprintf(name + len, cap - len, "%s%s", m == h ? "" : "+", f->g->nodes[m].name);
        if (w < 0 || (size_t)w >= cap - len) {
            snprintf(name + (len < cap - 5 ? len : cap - 5), 5, "+...");
            return;
        }
        len += (size_t)w;
    }
}

static int32_t activation_code(int32_t op)
{
    switch (op) {
    case PBL__OP_relu: return PBL__ACT_RELU;
    case PBL__OP_sigmoid: return PBL__ACT_SIGMOID;
    case PBL__OP_tanh: return PBL__ACT_TANH;
    default: return PBL__ACT_GELU;
    }
}

/* The chain step that node c takes with v the running value. */
static int64_t chain_code(const pbl__node *c, pbl_value v)
{
    static const int64_t fwd[] = { PBL__CHAIN_ADD, PBL__CHAIN_SUB, PBL__CHAIN_MUL, PBL__CHAIN_DIV };
    static const int64_t rev[] = { PBL__CHAIN_RADD, PBL__CHAIN_RSUB, PBL__CHAIN_RMUL, PBL__CHAIN_RDIV };
    int k = c->op == PBL__OP_add ? 0 : c->op == PBL__OP_sub ? 1 : c->op == PBL__OP_mul ? 2 : 3;
    if (is_activation(c->op))
        return PBL__CHAIN_RELU + activation_code(c->op) - PBL__ACT_RELU;
    return c->in[0] == v ? fwd[k] : rev[k];
}

/* The inputs and attributes of a backward group's node: fully_connected_grad_wb (dy, x) or
 * matmul_act_grad (a, b, s; trans_a, trans_b, act). */
static const char *backward_node(copier *c, pbl_node h, pbl_value *in, int32_t *n_in, pbl_attr *attrs,
                                 int32_t *n_attrs)
{
    const fuser *f = c->f;
    const pbl__node *mm = &f->g->nodes[h];
    in[(*n_in)++] = c->copy[mm->in[0]];
    in[(*n_in)++] = c->copy[mm->in[1]];
    if (f->kind[h] == KIND_WEIGHT_BIAS) {
        c->r->weight_bias++;
        return "fully_connected_grad_wb";
    }
    const pbl__node *ag = &f->g->nodes[f->next[h]];
    static const int64_t act[] = { [PBL__OP_relu_grad] = PBL__ACT_RELU, [PBL__OP_sigmoid_grad] = PBL__ACT_SIGMOID,
                                   [PBL__OP_tanh_grad] = PBL__ACT_TANH, [PBL__OP_gelu_grad] = PBL__ACT_GELU };
    in[(*n_in)++] = c->copy[ag->in[1]];
    attrs[(*n_attrs)++] = PBL_ATTR_INT("trans_a", mm->attr[0].i);
    attrs[(*n_attrs)++] = PBL_ATTR_INT("trans_b", mm->attr[1].i);
    attrs[(*n_attrs)++] = PBL_ATTR_INT("act", act[ag->op]);
    c->r->act_grads++;
    return "matmul_act_grad";
}

/* Adds the fused node of the group headed by h. */
static pbl_status emit_group(copier *c, pbl_node h)
{
    const fuser *f = c->f;
    const pbl_graph *g = f->g;
    pbl_value in[PBL__MAX_IN], out[PBL__MAX_OUT];
    int32_t n_in = 0;
    pbl_attr attrs[3];
    int32_t n_attrs = 0;
    int64_t codes[PBL_MAX_INTS];
    const char *op;
    if (f->kind[h] == KIND_DENSE) {
        const pbl__node *fc = &g->nodes[h];
        int64_t act = PBL__ACT_NONE, after = 0;
        for (int32_t k = 0; k < fc->n_in; k++)
            in[n_in++] = c->copy[fc->in[k]];
        for (pbl_node m = f->next[h]; m != PBL_NONE; m = f->next[m]) {
            const pbl__node *n = &g->nodes[m];
            if (n->op == PBL__OP_add) {
                in[n_in++] = c->copy[n->in[1]];
                after = 1;
            } else {
                act = activation_code(n->op);
            }
        }
        op = "fully_connected_act";
        attrs[n_attrs++] = PBL_ATTR_INT("act", act);
        attrs[n_attrs++] = PBL_ATTR_INT("bias_after", after);
        c->r->dense++;
    } else if (f->kind[h] == KIND_CHAIN) {
        int32_t n_codes = 0;
        pbl_value v = g->nodes[h].in[0];
        in[n_in++] = c->copy[v];
        for (pbl_node m = h; m != PBL_NONE; m = f->next[m]) {
            const pbl__node *n = &g->nodes[m];
            codes[n_codes++] = chain_code(n, v);
            if (is_binary(n->op))
                in[n_in++] = c->copy[n->in[0] == v ? n->in[1] : n->in[0]]; /* the other operand */
            v = n->out[0];
        }
        op = "elementwise_chain";
        attrs[n_attrs++] = PBL_ATTR_INTS("codes", codes, n_codes);
        c->r->chains++;
    } else {
        op = backward_node(c, h, in, &n_in, attrs, &n_attrs);
    }
    char name[256];
    group_name(f, h, name, sizeof name);
    pbl_node t = f->last[h];
    pbl_node_desc d = { .op = op, .name = name, .inputs = in, .n_inputs = n_in, .attrs = attrs, .n_attrs = n_attrs };
    c->ng->in_backward = g->nodes[h].is_backward;
    pbl_status s = pbl_graph_add_node(c->ng, &d, NULL, out);
    if (s != PBL_OK) {
        snprintf(c->err, c->errlen, "adding fused node '%s': %s", name, pbl_graph_errmsg(c->ng));
    } else if (f->kind[h] == KIND_WEIGHT_BIAS) {
        /* dw and db are parameter gradients, looked up by name: they keep theirs */
        pbl_value old[2] = { g->nodes[h].out[0], g->nodes[t].out[0] };
        for (int k = 0; k < 2 && s == PBL_OK; k++) {
            c->copy[old[k]] = out[k];
            s = pbl__graph_rename_value(c->ng, out[k], g->values[old[k]].name);
            if (s != PBL_OK)
                snprintf(c->err, c->errlen, "fused node '%s': %s", name, pbl_graph_errmsg(c->ng));
        }
    } else {
        c->copy[g->nodes[t].out[0]] = out[0];
    }
    for (pbl_node m = h; m != PBL_NONE; m = f->next[m])
        c->r->fused_nodes++;
    return s;
}

static pbl_status copy_graph(const fuser *f, const pbl_allocator *a, pbl_graph **out, pbl_fuse_report *r,
                             char *err, size_t errlen)
{
    const pbl_graph *g = f->g;
    size_t nv = (size_t)(g->n_values ? g->n_values : 1);
    copier c = { .f = f, .r = r, .err = err, .errlen = errlen };
    pbl_graph_options go = pbl_graph_options_default();
    go.allocator = a;
    c.copy = pbl__mem_alloc(f->m, nv * sizeof *c.copy);
    pbl_status s = PBL_ERR_NOMEM;
    if (!c.copy || pbl_graph_create(&c.ng, &go) != PBL_OK) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    s = PBL_OK;
    for (pbl_value v = 0; v < g->n_values && s == PBL_OK; v++) {
        const pbl__value *x = &g->values[v];
        c.copy[v] = PBL_NONE;
        if (x->producer != PBL_NONE)
            continue;
        s = pbl_graph_add_variable(c.ng, x->name, x->kind, x->meta.dtype, x->meta.shape, &c.copy[v]);
        if (s != PBL_OK)
            snprintf(err, errlen, "copying variable '%s': %s", x->name, pbl_graph_errmsg(c.ng));
        else
            c.ng->values[c.copy[v]].initial = x->initial;
    }
    for (pbl_node i = 0; i < g->n_nodes && s == PBL_OK; i++) {
        pbl_node h = f->head[i];
        if (h == i && f->next[i] == PBL_NONE) {
            c.ng->in_backward = g->nodes[i].is_backward;
            s = copy_node(&c, i);
        } else if (f->emit[h] == i) {
            s = emit_group(&c, h);
        }
    }
    c.ng->in_backward = 0;
    for (int32_t o = 0; o < g->n_outputs && s == PBL_OK; o++) {
        s = pbl_graph_set_output(c.ng, g->outputs[o].name, c.copy[g->outputs[o].value]);
        if (s != PBL_OK)
            snprintf(err, errlen, "output '%s': %s", g->outputs[o].name, pbl_graph_errmsg(c.ng));
    }
    if (s == PBL_OK) {
        c.ng->has_gradient = g->has_gradient;
        r->nodes_after = c.ng->n_nodes;
        *out = c.ng;
        c.ng = NULL;
    }
done:
    pbl_graph_destroy(c.ng);
    pbl__mem_free(f->m, c.copy, nv * sizeof *c.copy);
    return s;
}

PBL__API pbl_fuse_options pbl_fuse_options_default(void)
{
    return (pbl_fuse_options){ .allocator = NULL, .dense = 1, .chains = 1, .backward = 1 };
}

PBL__API pbl_status pbl_graph_fuse(const pbl_graph *g, const pbl_fuse_options *opt, pbl_graph **out,
                                   pbl_fuse_report *report, char *err, size_t errlen)
{
    char scratch[8];
    pbl_fuse_report local;
    if (!err || !errlen) {
        err = scratch;
        errlen = sizeof scratch;
    }
    err[0] = '\0';
    if (!report)
        report = &local;
    *report = (pbl_fuse_report){ 0 };
    if (out)
        *out = NULL;
    if (!g || !out) {
        snprintf(err, errlen, "fuse: the graph and out must not be NULL");
        return PBL_ERR_INVALID_ARG;
    }
    pbl_fuse_options o = opt ? *opt : pbl_fuse_options_default();
    report->nodes_before = g->n_nodes;
    pbl__mem m;
    pbl__mem_init(&m, o.allocator);
    size_t nv = (size_t)(g->n_values ? g->n_values : 1), nn = (size_t)(g->n_nodes ? g->n_nodes : 1);
    fuser f = { .g = g, .m = &m };
    pbl_status s = pbl__deps_build(g, &m, &f.deps);
    if (s != PBL_OK) {
        snprintf(err, errlen, s == PBL_ERR_NOMEM ? "out of memory" : "fuse: the graph's dependencies: %s",
                 pbl_status_str(s));
        return s;
    }
    f.readers = pbl__mem_calloc(&m, nv * sizeof *f.readers);
    f.reader = pbl__mem_alloc(&m, nv * sizeof *f.reader);
    f.head = pbl__mem_alloc(&m, nn * sizeof *f.head);
    f.next = pbl__mem_alloc(&m, nn * sizeof *f.next);
    f.last = pbl__mem_alloc(&m, nn * sizeof *f.last);
    f.emit = pbl__mem_alloc(&m, nn * sizeof *f.emit);
    f.kind = pbl__mem_calloc(&m, nn * sizeof *f.kind);
    f.seen = pbl__mem_calloc(&m, nn * sizeof *f.seen);
    f.queue = pbl__mem_alloc(&m, nn * sizeof *f.queue);
    s = PBL_ERR_NOMEM;
    if (!f.readers || !f.reader || !f.head || !f.next || !f.last || !f.emit || !f.kind || !f.seen || !f.queue) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    for (pbl_value v = 0; v < g->n_values; v++)
        f.reader[v] = PBL_NONE;
    for (pbl_node i = 0; i < g->n_nodes; i++) {
        f.head[i] = f.last[i] = f.emit[i] = i;
        f.next[i] = PBL_NONE;
        for (int32_t k = 0; k < g->nodes[i].n_in; k++) {
            f.readers[g->nodes[i].in[k]]++;
            f.reader[g->nodes[i].in[k]] = i;
        }
    }
    for (int32_t k = 0; k < g->n_outputs; k++) { /* an output is read after the run: never sole */
        f.readers[g->outputs[k].value]++;
        f.reader[g->outputs[k].value] = PBL_NONE;
    }
    for (pbl_node i = 0; i < g->n_nodes && o.dense; i++)
        find_dense(&f, i);
    for (pbl_node i = 0; i < g->n_nodes && o.backward; i++)
        find_weight_bias(&f, i);
    for (pbl_node i = 0; i < g->n_nodes && o.backward; i++)
        find_act_grad(&f, i);
    for (pbl_node i = 0; i < g->n_nodes && o.chains; i++)
        find_chain(&f, i);
    s = copy_graph(&f, o.allocator, out, report, err, errlen);
done:
    pbl__deps_free(&f.deps, &m);
    pbl__mem_free(&m, f.readers, nv * sizeof *f.readers);
    pbl__mem_free(&m, f.reader, nv * sizeof *f.reader);
    pbl__mem_free(&m, f.head, nn * sizeof *f.head);
    pbl__mem_free(&m, f.next, nn * sizeof *f.next);
    pbl__mem_free(&m, f.last, nn * sizeof *f.last);
    pbl__mem_free(&m, f.emit, nn * sizeof *f.emit);
    pbl__mem_free(&m, f.kind, nn * sizeof *f.kind);
    pbl__mem_free(&m, f.seen, nn * sizeof *f.seen);
    pbl__mem_free(&m, f.queue, nn * sizeof *f.queue);
    return s;
}
