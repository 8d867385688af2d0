/*
 * batch_norm and layer_norm (training form: statistics of the batch) with their gradient ops.
 * Kernels: ops/cpu/norm.c (the formulas are written there), ops/cuda/norm.cu.
 *
 *   batch_norm       x[N,C,...] scale[C] bias[C]   ->  y, mean[C], inv_std[C]           eps (1e-5)
 *   batch_norm_grad  dy x scale mean inv_std       ->  dx, dscale[C], dbias[C]
 *   layer_norm       x[...,D] gamma[D] beta[D]     ->  y, mean[...,1], inv_std[...,1]  eps (1e-5)
 *   layer_norm_grad  dy x gamma mean inv_std       ->  dx, dgamma[D], dbeta[D]
 *
 * The statistics are outputs so that the backward pass reads them instead of recomputing
 * them; a planner sees them live from the forward node to its gradient. They are not
 * differentiable outputs: a loss that depends on them gives PBL_ERR_NOT_DIFFERENTIABLE.
 *
 * batch_norm may take three more inputs, running_mean[C], running_var[C] and training[] (a
 * runtime scalar): with training 0 it normalises with the running statistics (and outputs
 * them as mean and inv_std = 1/√(running_var + eps)), otherwise with the batch's. Its
 * gradient then gets the switch too: in evaluation mean and inv_std are constants, so
 * dx = dy·scale·inv_std. batch_norm_update keeps the running statistics, in place:
 *
 *   batch_norm_update  mean inv_std running_mean running_var count[1] training[]
 *                      -> running_mean', running_var', count'   momentum (0.1), eps (1e-5),
 *                                                               set_size (required: N·S)
 *
 * in training only: the batch's variance 1/inv_std² − eps made unbiased (× m/(m − 1), as
 * PyTorch keeps it), the first update copies the batch's statistics (count 0; state starts
 * zero-filled), later ones average r ← (1 − momentum)·r + momentum·batch.
 */
#include "ops/cpu/kernels.h"

static const pbl__attr_spec eps_attr[] = { { .name = "eps", .type = PBL_ATTR_FLOAT, .f = 1e-5 } };

typedef struct norm_kind {
    const char *op, *grad_op;
    int         batch;          /* statistics per channel (dim 1), else per row of the last dim */
    const char *param_rule;     /* the parameters' shape, in words */
    const char *stat_rule;      /* the statistics' shape, in words */
} norm_kind;

static const norm_kind batch_kind = { "batch_norm", "batch_norm_grad", 1, "[C], C being x's dim 1",
                                      "[C], C being x's dim 1" };
static const norm_kind layer_kind = { "layer_norm", "layer_norm_grad", 0, "[D], D being x's last dim",
                                      "x's shape with the last dim 1" };

/* From x's shape (input xi), the parameters' shape and the saved statistics' shape. */
static pbl_status norm_shapes(pbl__infer_ctx *c, const norm_kind *k, int32_t xi, pbl_shape *param, pbl_shape *stat)
{
    const pbl_shape *x = &c->in[xi].shape;
    char sx[96];
    if (x->ndim < (k->batch ? 2 : 1))
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "x is %s; %s needs x %s", pbl_shape_str(x, sx, sizeof sx), k->op,
                               k->batch ? "[N, C, ...]" : "[..., D]");
    int64_t n = x->dim[k->batch ? 1 : x->ndim - 1];
    *param = pbl_shape_make(1, &n);
    if (k->batch) {
        *stat = *param;
    } else {
        *stat = *x;
        stat->dim[x->ndim - 1] = 1;
    }
    return PBL_OK;
}

/* Fails unless input i (called what) is f32 of shape `want`, which `rule` puts in words. */
static pbl_status check_shape(pbl__infer_ctx *c, int32_t i, const char *what, int32_t xi, const pbl_shape *want,
                              const char *rule)
{
    pbl_status s = pbl__infer_check_f32(c, i, what);
    if (s != PBL_OK || pbl_shape_equal(&c->in[i].shape, want))
        return s;
    char sg[96], sx[96];
    return pbl__infer_fail(c, PBL_ERR_SHAPE, "%s is %s but x is %s; need %s %s", what,
                           pbl_shape_str(&c->in[i].shape, sg, sizeof sg),
                           pbl_shape_str(&c->in[xi].shape, sx, sizeof sx), what, rule);
}

/* running_mean, running_var (parameter-shaped) and the training switch at inputs first.. */
static pbl_status running_check(pbl__infer_ctx *c, int32_t first, int32_t xi, const pbl_shape *param, const char *rule)
{
    pbl_status s = check_shape(c, first, "running_mean", xi, param, rule);
    if (s == PBL_OK)
        s = check_shape(c, first + 1, "running_var", xi, param, rule);
    if (s == PBL_OK)
        s = pbl__infer_check_f32(c, first + 2, "training");
    if (s == PBL_OK && pbl_shape_numel(&c->in[first + 2].shape) != 1) {
        char st[96];
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "training is %s; the switch must hold one element",
                               pbl_shape_str(&c->in[first + 2].shape, st, sizeof st));
    }
    return s;
}

/* (x, scale, bias [, running_mean, running_var, training]) -> y, mean, inv_std */
static pbl_status norm_infer(pbl__infer_ctx *c, const norm_kind *k)
{
    pbl_shape param, stat;
    pbl_status s = pbl__infer_check_f32(c, 0, "x");
    if (s == PBL_OK)
        s = norm_shapes(c, k, 0, &param, &stat);
    if (s == PBL_OK)
        s = check_shape(c, 1, k->batch ? "scale" : "gamma", 0, &param, k->param_rule);
    if (s == PBL_OK)
        s = check_shape(c, 2, k->batch ? "bias" : "beta", 0, &param, k->param_rule);
    if (s == PBL_OK && c->n_in != 3 && c->n_in != 6)
        s = pbl__infer_fail(c, PBL_ERR_ARITY, "%d inputs; %s takes x, scale, bias and optionally running_mean, "
                            "running_var, training", (int)c->n_in, k->op);
    if (s == PBL_OK && c->n_in == 6)
        s = running_check(c, 3, 0, &param, k->param_rule);
    if (s != PBL_OK)
        return s;
    c->out[0] = c->in[0];
    c->out[1] = c->out[2] = (pbl__meta){ .dtype = PBL_F32, .shape = stat };
    return PBL_OK;
}

/* (dy, x, scale, mean, inv_std [, training]) -> dx, dscale, dbias */
static pbl_status norm_grad_infer(pbl__infer_ctx *c, const norm_kind *k)
{
    pbl_shape param, stat;
    pbl_status s = pbl__infer_check_f32(c, 1, "x");
    if (s == PBL_OK)
        s = norm_shapes(c, k, 1, &param, &stat);
    if (s == PBL_OK)
        s = check_shape(c, 0, "dy", 1, &c->in[1].shape, "of x's shape");
    if (s == PBL_OK)
        s = check_shape(c, 2, k->batch ? "scale" : "gamma", 1, &param, k->param_rule);
    if (s == PBL_OK)
        s = check_shape(c, 3, "mean", 1, &stat, k->stat_rule);
    if (s == PBL_OK)
        s = check_shape(c, 4, "inv_std", 1, &stat, k->stat_rule);
    if (s == PBL_OK && c->n_in > 5)
        s = pbl__infer_check_f32(c, 5, "training");
    if (s == PBL_OK && c->n_in > 5 && pbl_shape_numel(&c->in[5].shape) != 1)
        s = pbl__infer_fail(c, PBL_ERR_SHAPE, "training must hold one element");
    if (s != PBL_OK)
        return s;
    c->out[0] = c->in[1];
    c->out[1] = c->out[2] = (pbl__meta){ .dtype = PBL_F32, .shape = param };
    return PBL_OK;
}

/* One <kind>_grad node reading dy, x, the scale and the saved statistics; its three outputs
 * are the gradients of x, scale and bias. */
static pbl_status norm_grad(pbl__grad_ctx *c, const norm_kind *k)
{
    if (c->dy[1] != PBL_NONE || c->dy[2] != PBL_NONE)
        return pbl__graph_fail(c->g, PBL_ERR_NOT_DIFFERENTIABLE,
                               "node '%s' (%s): the saved mean and inv_std outputs have no gradient, but the "
                               "loss depends on them", c->fwd_name, k->op);
    if (c->dy[0] == PBL_NONE)
        return c->status;
    pbl_value in[] = { c->dy[0], c->x[0], c->x[1], c->y[1], c->y[2], c->n_in > 5 ? c->x[5] : PBL_NONE };
    if (pbl__grad_emit(c, k->grad_op, "grad", in, c->n_in > 5 ? 6 : 5, NULL, 0) == PBL_NONE)
        return c->status;
    const pbl__node *n = &c->g->nodes[c->g->n_nodes - 1]; /* the node just emitted */
    for (int32_t i = 0; i < 3; i++)
        if (c->need[i])
            c->dx[i] = n->out[i];
    return c->status;
}

static pbl_status batch_norm_infer(pbl__infer_ctx *c) { return norm_infer(c, &batch_kind); }
static pbl_status layer_norm_infer(pbl__infer_ctx *c) { return norm_infer(c, &layer_kind); }
static pbl_status batch_norm_grad_infer(pbl__infer_ctx *c) { return norm_grad_infer(c, &batch_kind); }
static pbl_status layer_norm_grad_infer(pbl__infer_ctx *c) { return norm_grad_infer(c, &layer_kind); }
static pbl_status batch_norm_grad(pbl__grad_ctx *c) { return norm_grad(c, &batch_kind); }
static pbl_status layer_norm_grad(pbl__grad_ctx *c) { return norm_grad(c, &layer_kind); }

/* three passes over x: the mean, the variance, the normalised, scaled and shifted output */
static void norm_cost(const pbl__cost_ctx *c, pbl__cost *out) { out->flops = 3 * pbl__cost_numel(&c->in[0]); }

const pbl__op pbl__op_batch_norm = {
    .name = "batch_norm", .n_in_min = 3, .n_in_max = 6, .n_out = 3,
    .attrs = eps_attr, .n_attrs = 1,
    .infer = batch_norm_infer, .grad = batch_norm_grad,
    .grad_reads_in = 0x23, .grad_reads_out = 0x6, /* x, scale, training; mean, inv_std (not y, not bias) */
    .cost = norm_cost,
    .cpu = pbl__cpu_batch_norm,
};

const pbl__op pbl__op_batch_norm_grad = {
    .name = "batch_norm_grad", .n_in_min = 5, .n_in_max = 6, .n_out = 3,
    .infer = batch_norm_grad_infer,
    .cpu = pbl__cpu_batch_norm_grad,
};

const pbl__op pbl__op_layer_norm = {
    .name = "layer_norm", .n_in_min = 3, .n_in_max = 3, .n_out = 3,
    .attrs = eps_attr, .n_attrs = 1,
    .infer = layer_norm_infer, .grad = layer_norm_grad,
    .grad_reads_in = 0x3, .grad_reads_out = 0x6,
    .cost = norm_cost,
    .cpu = pbl__cpu_layer_norm,
};

const pbl__op pbl__op_layer_norm_grad = {
    .name = "layer_norm_grad", .n_in_min = 5, .n_in_max = 5, .n_out = 3,
    .infer = layer_norm_grad_infer,
    .cpu = pbl__cpu_layer_norm_grad,
};

/* ---- batch_norm_update: the running statistics, in place (see the top of this file) ---- */

static const pbl__attr_spec update_attrs[] = {
    { .name = "momentum", .type = PBL_ATTR_FLOAT, .f = 0.1 },
    { .name = "eps", .type = PBL_ATTR_FLOAT, .f = 1e-5 },
    { .name = "set_size", .type = PBL_ATTR_INT, .required = 1 },
};
static const int8_t update_mutates[][2] = { { 0, 2 }, { 1, 3 }, { 2, 4 } };

static pbl_status update_infer(pbl__infer_ctx *c)
{
    static const char *const names[] = { "mean", "inv_std", "running_mean", "running_var", "count", "training" };
    double mom = c->attr[0].f;
    if (!(mom > 0.0 && mom <= 1.0))
        return pbl__infer_fail(c, PBL_ERR_ATTR, "momentum is %g; it must be in (0, 1]", mom);
    if (!(c->attr[1].f >= 0.0 && isfinite(c->attr[1].f)))
        return pbl__infer_fail(c, PBL_ERR_ATTR, "eps is %g; it must be finite and >= 0", c->attr[1].f);
    if (c->attr[2].i < 1)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "set_size is %lld; it must be at least 1", (long long)c->attr[2].i);
    for (int32_t i = 0; i < 6; i++) {
        pbl_status s = pbl__infer_check_f32(c, i, names[i]);
        if (s != PBL_OK)
            return s;
    }
    for (int32_t i = 1; i < 4; i++) {
        pbl_status s = pbl__infer_check_same(c, 0, i, "mean", names[i]);
        if (s != PBL_OK)
            return s;
    }
    for (int32_t i = 4; i < 6; i++)
        if (pbl_shape_numel(&c->in[i].shape) != 1)
            return pbl__infer_fail(c, PBL_ERR_SHAPE, "%s must hold one element", names[i]);
    if (c->in[0].shape.ndim != 1)
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "mean must be [C] (batch_norm's statistics)");
    c->out[0] = c->in[2];
    c->out[1] = c->in[3];
    c->out[2] = c->in[4];
    return PBL_OK;
}

static void update_cost(const pbl__cost_ctx *c, pbl__cost *out) { out->flops = 6 * pbl__cost_numel(&c->in[0]); }

const pbl__op pbl__op_batch_norm_update = {
    .name = "batch_norm_update", .n_in_min = 6, .n_in_max = 6, .n_out = 3,
    .attrs = update_attrs, .n_attrs = 3,
    .infer = update_infer,
    .mutates = update_mutates, .n_mutates = 3,
    .cost = update_cost,
    .cpu = pbl__cpu_batch_norm_update,
    .batch_attr = 1 + 2, /* set_size */
};
