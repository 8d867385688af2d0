/* pbl_graph_add_optimizer: one update node per parameter, with its state variables. */
#include <math.h>
#include <stdio.h>

#include "graph/ir/graph_internal.h"
#include "pebble/autodiff.h"

PBL__API pbl_optimizer_options pbl_optimizer_options_default(pbl_optimizer_kind kind)
{
    int adam = kind == PBL_OPTIM_ADAM || kind == PBL_OPTIM_ADAMW;
    pbl_optimizer_options o = { .kind = kind, .lr = adam ? 1e-3 : 1e-2, .momentum = 0.9, .beta1 = 0.9, .beta2 = 0.999,
                                .eps = 1e-8, .weight_decay = kind == PBL_OPTIM_ADAMW ? 0.01 : 0.0,
                                .lr_scalar = NULL, .weight_decay_scalar = NULL, .step_scalar = NULL, .clip_norm = 0.0 };
    return o;
}

/* A zeroed state variable "<param>/<what>" shaped like the parameter (or [1] for t). */
static pbl_status add_state(pbl_graph *g, pbl_value param, const char *what, int scalar, pbl_value *out)
{
    char name[160];
    snprintf(name, sizeof name, "%s/%s", g->values[param].name, what);
    pbl_shape shape = scalar ? PBL_SHAPE(1) : g->values[param].meta.shape;
    return pbl_graph_add_variable(g, name, PBL_VALUE_STATE, PBL_F32, shape, out);
}

/* The runtime scalar called `name`, created at `initial` when the graph has none. */
static pbl_status use_scalar(pbl_graph *g, const char *name, double initial, pbl_value *out)
{
    if (!*name) /* pbl_graph_add_scalar would pick a new "var<N>" for every update: none the caller could set */
        return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "optimizer: a scalar's name is empty (NULL keeps the constant)");
    pbl_value v = pbl_graph_find_value(g, name);
    if (v == PBL_NONE)
        return pbl_graph_add_scalar(g, name, initial, out);
    if (g->values[v].kind != PBL_VALUE_SCALAR)
        return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "optimizer: '%s' is a %s, not a scalar", name,
                               pbl_value_kind_name(g->values[v].kind));
    *out = v;
    return PBL_OK;
}

/* Routes the hyper-parameters named as scalars through trailing inputs (ops/shared/hyper.h),
 * then the global norm when clipping (norm != PBL_NONE); *mask gets the op's "scalars" attribute. */
static pbl_status add_scalar_inputs(pbl_graph *g, const pbl_optimizer_options *o, int adam, pbl_value norm,
                                    pbl_value *in, int32_t *n_in, int64_t *mask)
{
    const char *names[3] = { o->lr_scalar, o->weight_decay_scalar, adam ? o->step_scalar : NULL };
    const double initial[3] = { o->lr, o->weight_decay, 1.0 };
    *mask = 0;
    for (int b = 0; b < 3; b++) {
        if (!names[b])
            continue;
        pbl_status s = use_scalar(g, names[b], initial[b], &in[(*n_in)++]);
        if (s != PBL_OK)
            return s;
        *mask |= (int64_t)1 << b;
    }
    if (norm != PBL_NONE) {
        in[(*n_in)++] = norm;
        *mask |= (int64_t)1 << 3; /* the norm's bit (ops/shared/hyper.h) */
    }
    return PBL_OK;
}

/* The update of p by its gradient gr; with a global norm, the update clips gr itself (one
 * pass over gr, where a clip_by_norm node before it read and wrote gr once more). */
static pbl_status add_update(pbl_graph *g, const pbl_optimizer_options *o, pbl_value p, pbl_value gr, pbl_value norm)
{
    pbl_value in[10] = { p, gr };
    int32_t n_in = 2;
    pbl_attr at[10];
    int32_t n_at = 0;
    const char *op = "sgd";
    pbl_status s = PBL_OK;
    int adam = o->kind == PBL_OPTIM_ADAM || o->kind == PBL_OPTIM_ADAMW;
    at[n_at++] = PBL_ATTR_FLOAT("lr", o->lr);
    switch (o->kind) {
    case PBL_OPTIM_SGD:
        break;
    case PBL_OPTIM_SGD_MOMENTUM:
        op = "sgd_momentum";
        s = add_state(g, p, "m", 0, &in[n_in++]);
        at[n_at++] = PBL_ATTR_FLOAT("momentum", o->momentum);
        break;
    case PBL_OPTIM_ADAM:
    case PBL_OPTIM_ADAMW:
        op = "adam";
        s = add_state(g, p, "m", 0, &in[n_in++]);
        if (s == PBL_OK)
            s = add_state(g, p, "v", 0, &in[n_in++]);
        if (s == PBL_OK)
            s = add_state(g, p, "t", 1, &in[n_in++]);
        at[n_at++] = PBL_ATTR_FLOAT("beta1", o->beta1);
        at[n_at++] = PBL_ATTR_FLOAT("beta2", o->beta2);
        at[n_at++] = PBL_ATTR_FLOAT("eps", o->eps);
        if (o->kind == PBL_OPTIM_ADAMW)
            at[n_at++] = PBL_ATTR_INT("decoupled", 1);
        break;
    default:
        return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "optimizer: unknown kind %d", (int)o->kind);
    }
    if (s != PBL_OK)
        return s;
    at[n_at++] = PBL_ATTR_FLOAT("weight_decay", o->weight_decay);
    int64_t mask = 0;
    s = add_scalar_inputs(g, o, adam, norm, in, &n_in, &mask);
    if (s != PBL_OK)
        return s;
    if (mask) /* graphs without scalars keep their attributes (and JSON files) as before */
        at[n_at++] = PBL_ATTR_INT("scalars", mask);
    if (norm != PBL_NONE)
        at[n_at++] = PBL_ATTR_FLOAT("max_norm", o->clip_norm);
    char name[160];
    snprintf(name, sizeof name, "%s/update", g->values[p].name);
    pbl_node_desc d = { .op = op, .name = name, .inputs = in, .n_inputs = n_in, .attrs = at, .n_attrs = n_at };
    return pbl_graph_add_node(g, &d, NULL, NULL);
}

/* A fresh value name "<stem>", "<stem>1", ... */
static void fresh(const pbl_graph *g, const char *stem, char *buf, size_t size)
{
    snprintf(buf, size, "%s", stem);
    for (int k = 1; pbl_graph_find_value(g, buf) != PBL_NONE || pbl_graph_find_node(g, buf) != PBL_NONE; k++)
        snprintf(buf, size, "%s%d", stem, k);
}

/* The global norm of vals[0..n) (n >= 1): one node per 16, then norms of norms. */
static pbl_status add_norm(pbl_graph *g, const pbl_value *vals, int32_t n, pbl_value *out)
{
    pbl_value part[16];
    int32_t n_part = 0;
    pbl_status s = PBL_OK;
    char name[64];
    if (n <= 16) {
        fresh(g, "grad_norm", name, sizeof name);
        pbl_node_desc d = { .op = "global_norm", .name = name, .inputs = vals, .n_inputs = n };
        return pbl_graph_add_node(g, &d, NULL, out);
    }
    /* more than 256 tensors nest once more: each part covers ceil(n / 16) of them */
    int32_t per = (n + 15) / 16;
    for (int32_t i = 0; i < n && s == PBL_OK; i += per)
        s = add_norm(g, vals + i, n - i < per ? n - i : per, &part[n_part++]);
    return s == PBL_OK ? add_norm(g, part, n_part, out) : s;
}

/* The global norm of the gradients grads[0..n) that are not PBL_NONE (*norm: PBL_NONE when
 * none is), after checking max_norm and the values. */
static pbl_status norm_of(pbl_graph *g, const pbl_value *grads, int32_t n, double max_norm, pbl_value *norm)
{
    if (!(max_norm > 0.0 && isfinite(max_norm)))
        return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "clip_grad_norm: max_norm is %g; it must be finite and positive",
                               max_norm);
    pbl_value *live = pbl__mem_alloc(&g->mem, (size_t)(n > 0 ? n : 1) * sizeof *live);
    if (!live)
        return pbl__graph_fail(g, PBL_ERR_NOMEM, "clip_grad_norm: out of memory");
    int32_t n_live = 0;
    pbl_status s = PBL_OK;
    for (int32_t i = 0; i < n && s == PBL_OK; i++) {
        if (grads[i] == PBL_NONE)
            continue;
        if (grads[i] < 0 || grads[i] >= g->n_values)
            s = pbl__graph_fail(g, PBL_ERR_DANGLING, "clip_grad_norm: grads[%d] = %d names no value", (int)i, (int)grads[i]);
        live[n_live++] = grads[i];
    }
    *norm = PBL_NONE;
    if (s == PBL_OK && n_live > 0)
        s = add_norm(g, live, n_live, norm);
    pbl__mem_free(&g->mem, live, (size_t)(n > 0 ? n : 1) * sizeof *live);
    return s;
}

static pbl_status clip(pbl_graph *g, const pbl_value *grads, int32_t n, double max_norm, pbl_value *clipped,
                       pbl_value *norm_out)
{
    pbl_value norm = PBL_NONE;
    pbl_status s = norm_of(g, grads, n, max_norm, &norm);
    pbl_attr at[1] = { PBL_ATTR_FLOAT("max_norm", max_norm) };
    for (int32_t i = 0; i < n && s == PBL_OK; i++) {
        if (grads[i] == PBL_NONE) {
            clipped[i] = PBL_NONE;
            continue;
        }
        char name[192];
        snprintf(name, sizeof name, "%s/clipped", g->values[grads[i]].name);
        pbl_value in[2] = { grads[i], norm };
        pbl_node_desc d = { .op = "clip_by_norm", .name = name, .inputs = in, .n_inputs = 2, .attrs = at, .n_attrs = 1 };
        s = pbl_graph_add_node(g, &d, NULL, &clipped[i]);
    }
    if (s == PBL_OK && norm_out)
        *norm_out = norm;
    return s;
}

PBL__API pbl_status pbl_graph_clip_grad_norm(pbl_graph *g, const pbl_value *grads, int32_t n, double max_norm,
                                             pbl_value *clipped, pbl_value *norm_out)
{
    if (!g)
        return PBL_ERR_INVALID_ARG;
    if (n < 0 || (n > 0 && (!grads || !clipped)))
        return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "clip_grad_norm: bad arguments");
    int32_t nv0 = g->n_values, nn0 = g->n_nodes;
    pbl_status s = clip(g, grads, n, max_norm, clipped, norm_out);
    if (s != PBL_OK)
        pbl__graph_truncate(g, nv0, nn0);
    return s;
}

PBL__API pbl_status pbl_graph_add_optimizer(pbl_graph *g, const pbl_optimizer_options *opt,
                                            const pbl_value *params, const pbl_value *grads, int32_t n)
{
    if (!g)
        return PBL_ERR_INVALID_ARG;
    if (!opt || n < 0 || (n > 0 && (!params || !grads)))
        return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "optimizer: bad arguments");
    if (!(opt->clip_norm >= 0.0 && isfinite(opt->clip_norm)))
        return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "optimizer: clip_norm is %g; it must be finite, and 0 (off) or positive",
                               opt->clip_norm);
    int32_t nv0 = g->n_values, nn0 = g->n_nodes;
    pbl_status s = PBL_OK;
    pbl_value *use = NULL, norm = PBL_NONE;
    size_t use_bytes = (size_t)(n > 0 ? n : 1) * sizeof *use;
    if (opt->clip_norm > 0.0) {
        use = pbl__mem_alloc(&g->mem, use_bytes);
        if (!use)
            return pbl__graph_fail(g, PBL_ERR_NOMEM, "optimizer: out of memory");
        for (int32_t i = 0; i < n; i++) /* only the parameters' gradients count toward the norm */
            use[i] = params[i] >= 0 && params[i] < g->n_values && g->values[params[i]].kind == PBL_VALUE_PARAM
                         ? grads[i] : PBL_NONE;
        s = norm_of(g, use, n, opt->clip_norm, &norm);
    }
    for (int32_t i = 0; i < n && s == PBL_OK; i++) {
        if (params[i] < 0 || params[i] >= g->n_values)
            s = pbl__graph_fail(g, PBL_ERR_DANGLING, "optimizer: params[%d] = %d names no value", (int)i, (int)params[i]);
        else if (g->values[params[i]].kind != PBL_VALUE_PARAM)
            s = pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "optimizer: '%s' is a %s, not a parameter",
                                g->values[params[i]].name, pbl_value_kind_name(g->values[params[i]].kind));
        else if (grads[i] != PBL_NONE)
            s = add_update(g, opt, params[i], grads[i], norm); /* clipped inside the update */
    }
    if (use)
        pbl__mem_free(&g->mem, use, use_bytes);
    if (s != PBL_OK)
        pbl__graph_truncate(g, nv0, nn0);
    return s;
}
