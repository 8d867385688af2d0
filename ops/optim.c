/* Optimizer updates as ops, so one training step is one graph: sgd, sgd_momentum, adam
 * (AdamW with decoupled = 1), and gradient clipping by global norm (global_norm, clip_by_norm,
 * differentiable through global_norm_grad and clip_by_norm_grad_norm).
 * lr, weight_decay and Adam's step may come from runtime scalar inputs (ops/shared/hyper.h);
 * so may the gradients' global norm, with which an update clips g itself (y = g·f exactly as
 * clip_by_norm computes it), saving pbl_graph_add_optimizer a read+write pass per gradient.
 * Each writes its parameter and state in place (mutates): w' is w's storage, and the
 * scheduler orders every other reader of w before the update. Kernels: ops/cpu/optim.c. */
#include <math.h>
#include <stdio.h>

#include "ops/cpu/kernels.h"
#include "ops/shared/hyper.h"

/* in: w g [m [v t]] then the scalars; every state must be shaped like w, t must hold one
 * element. base: the fixed inputs; mask: the "scalars" attribute; allowed: its valid bits. */
static pbl_status update_infer(pbl__infer_ctx *c, int32_t n_like_w, int32_t base, int64_t mask, int64_t allowed,
                               double max_norm)
{
    static const char *const names[] = { "w", "g", "m", "v", "t" };
    allowed |= PBL__HYPER_NORM;
    if (mask & ~allowed)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "scalars is %lld; it must be a sum of 1 (lr), 2 (weight_decay)%s, 8 (norm)",
                               (long long)mask, allowed & PBL__HYPER_STEP ? ", 4 (step)" : "");
    if ((mask & PBL__HYPER_NORM) && !(max_norm > 0.0 && isfinite(max_norm)))
        return pbl__infer_fail(c, PBL_ERR_ATTR, "max_norm is %g; clipping by the norm input needs it finite and positive",
                               max_norm);
    if (c->n_in != base + pbl__hyper_count(mask))
        return pbl__infer_fail(c, PBL_ERR_ARITY, "%d inputs; scalars = %lld needs %d fixed and %d scalar inputs",
                               (int)c->n_in, (long long)mask, (int)base, (int)pbl__hyper_count(mask));
    for (int32_t i = 0; i < c->n_in; i++) {
        pbl_status s = pbl__infer_check_f32(c, i, i < base ? names[i] : "scalar");
        if (s != PBL_OK)
            return s;
        if (i >= base && pbl_shape_numel(&c->in[i].shape) != 1) {
            char st[96];
            return pbl__infer_fail(c, PBL_ERR_SHAPE, "scalar input %d is %s; it must hold one element", (int)i,
                                   pbl_shape_str(&c->in[i].shape, st, sizeof st));
        }
    }
    for (int32_t i = 1; i < n_like_w; i++) {
        pbl_status s = pbl__infer_check_same(c, 0, i, "w", names[i]);
        if (s != PBL_OK)
            return s;
    }
    if (base > n_like_w && pbl_shape_numel(&c->in[n_like_w].shape) != 1) {
        char st[96];
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "t is %s; the step count must hold one element",
                               pbl_shape_str(&c->in[n_like_w].shape, st, sizeof st));
    }
    for (int32_t k = 0; k < base - 1; k++) /* outputs: every fixed input but g, in order */
        c->out[k] = c->in[k == 0 ? 0 : k + 1];
    return PBL_OK;
}

static pbl_status lr_check(pbl__infer_ctx *c, double lr, double wd)
{
    /* an infinite rate turns every weight into inf or nan on the first step: never meant */
    if (!(lr >= 0.0 && isfinite(lr)) || !(wd >= 0.0 && isfinite(wd)))
        return pbl__infer_fail(c, PBL_ERR_ATTR, "lr (%g) and weight_decay (%g) must be finite and non-negative", lr, wd);
    return PBL_OK;
}

/* ---- sgd: w -= lr·(g + wd·w) --------------------------------------------------------------- */

static const pbl__attr_spec sgd_attrs[] = {
    { .name = "lr", .type = PBL_ATTR_FLOAT, .f = 0.01 },
    { .name = "weight_decay", .type = PBL_ATTR_FLOAT },
    { .name = "scalars", .type = PBL_ATTR_INT },
    { .name = "max_norm", .type = PBL_ATTR_FLOAT }, /* with scalars bit 8: g clipped by the norm input */
};
static const int8_t sgd_mutates[][2] = { { 0, 0 } };

static pbl_status sgd_infer(pbl__infer_ctx *c)
{
    pbl_status s = lr_check(c, c->attr[0].f, c->attr[1].f);
    return s == PBL_OK ? update_infer(c, 2, 2, c->attr[2].i, PBL__HYPER_LR | PBL__HYPER_WD, c->attr[3].f) : s;
}

const pbl__op pbl__op_sgd = {
    .name = "sgd", .n_in_min = 2, .n_in_max = 5, .n_out = 1,
    .attrs = sgd_attrs, .n_attrs = 4,
    .infer = sgd_infer,
    .mutates = sgd_mutates, .n_mutates = 1,
    .cpu = pbl__cpu_sgd,
};

/* ---- sgd_momentum: m = μ·m + (g + wd·w); w -= lr·m ----------------------------------------- */

static const pbl__attr_spec momentum_attrs[] = {
    { .name = "lr", .type = PBL_ATTR_FLOAT, .f = 0.01 },
    { .name = "momentum", .type = PBL_ATTR_FLOAT, .f = 0.9 },
    { .name = "weight_decay", .type = PBL_ATTR_FLOAT },
    { .name = "scalars", .type = PBL_ATTR_INT },
    { .name = "max_norm", .type = PBL_ATTR_FLOAT },
};
static const int8_t momentum_mutates[][2] = { { 0, 0 }, { 1, 2 } };

static pbl_status momentum_infer(pbl__infer_ctx *c)
{
    pbl_status s = lr_check(c, c->attr[0].f, c->attr[2].f);
    if (s == PBL_OK && !(c->attr[1].f >= 0.0 && c->attr[1].f < 1.0))
        s = pbl__infer_fail(c, PBL_ERR_ATTR, "momentum is %g; it must be in [0, 1)", c->attr[1].f);
    return s == PBL_OK ? update_infer(c, 3, 3, c->attr[3].i, PBL__HYPER_LR | PBL__HYPER_WD, c->attr[4].f) : s;
}

const pbl__op pbl__op_sgd_momentum = {
    .name = "sgd_momentum", .n_in_min = 3, .n_in_max = 6, .n_out = 2,
    .attrs = momentum_attrs, .n_attrs = 5,
    .infer = momentum_infer,
    .mutates = momentum_mutates, .n_mutates = 2,
    .cpu = pbl__cpu_sgd_momentum,
};

/* ---- adam (Kingma & Ba, with bias correction as PyTorch computes it); decoupled = 1 is
 * AdamW (Loshchilov & Hutter): w ← w·(1 − lr·wd) before the step, the gradient undecayed --- */

static const pbl__attr_spec adam_attrs[] = {
    { .name = "lr", .type = PBL_ATTR_FLOAT, .f = 0.001 },
    { .name = "beta1", .type = PBL_ATTR_FLOAT, .f = 0.9 },
    { .name = "beta2", .type = PBL_ATTR_FLOAT, .f = 0.999 },
    { .name = "eps", .type = PBL_ATTR_FLOAT, .f = 1e-8 },
    { .name = "weight_decay", .type = PBL_ATTR_FLOAT },
    { .name = "scalars", .type = PBL_ATTR_INT },
    { .name = "decoupled", .type = PBL_ATTR_INT },
    { .name = "max_norm", .type = PBL_ATTR_FLOAT },
};
static const int8_t adam_mutates[][2] = { { 0, 0 }, { 1, 2 }, { 2, 3 }, { 3, 4 } };

static pbl_status adam_infer(pbl__infer_ctx *c)
{
    pbl_status s = lr_check(c, c->attr[0].f, c->attr[4].f);
    for (int k = 1; k <= 2 && s == PBL_OK; k++)
        if (!(c->attr[k].f >= 0.0 && c->attr[k].f < 1.0))
            s = pbl__infer_fail(c, PBL_ERR_ATTR, "beta%d is %g; it must be in [0, 1)", k, c->attr[k].f);
    if (s == PBL_OK && !(c->attr[3].f > 0.0 && isfinite(c->attr[3].f)))
        s = pbl__infer_fail(c, PBL_ERR_ATTR, "eps is %g; it must be finite and positive", c->attr[3].f);
    if (s == PBL_OK && c->attr[6].i != 0 && c->attr[6].i != 1)
        s = pbl__infer_fail(c, PBL_ERR_ATTR, "decoupled is %lld; it must be 0 (adam) or 1 (adamw)", (long long)c->attr[6].i);
    return s == PBL_OK ? update_infer(c, 4, 5, c->attr[5].i, PBL__HYPER_LR | PBL__HYPER_WD | PBL__HYPER_STEP, c->attr[7].f) : s;
}

const pbl__op pbl__op_adam = {
    .name = "adam", .n_in_min = 5, .n_in_max = 9, .n_out = 4,
    .attrs = adam_attrs, .n_attrs = 8,
    .infer = adam_infer,
    .mutates = adam_mutates, .n_mutates = 4,
    .cpu = pbl__cpu_adam,
};

/* ---- clipping by global norm (PyTorch's clip_grad_norm_): norm = sqrt(Σ x²) over every
 * element of every input; then each gradient y = x·min(1, max_norm / (norm + 1e-6)). A
 * norm of more than 16 tensors chains: global_norm of partial norms is the whole norm. ---- */

static pbl_status global_norm_infer(pbl__infer_ctx *c)
{
    for (int32_t i = 0; i < c->n_in; i++) {
        pbl_status s = pbl__infer_check_f32(c, i, "x");
        if (s != PBL_OK)
            return s;
    }
    c->out[0] = (pbl__meta){ .dtype = PBL_F32, .shape = { .ndim = 0 } };
    return PBL_OK;
}

static void global_norm_cost(const pbl__cost_ctx *c, pbl__cost *out)
{
    out->flops = 0;
    for (int32_t i = 0; i < c->n_in; i++)
        out->flops += 2 * pbl__cost_numel(&c->in[i]);
}

/* d norm / d x_k = x_k / norm: each input's gradient is x_k·(dy / norm), 0 at norm 0 (the
 * subgradient PyTorch's vector norm takes there). */
static pbl_status global_norm_grad_rule(pbl__grad_ctx *c)
{
    for (int32_t i = 0; i < c->n_in && c->status == PBL_OK; i++) {
        if (!c->need[i])
            continue;
        char suffix[32];
        snprintf(suffix, sizeof suffix, "grad_x%d", (int)i);
        c->dx[i] = pbl__grad_emit(c, "global_norm_grad", suffix, (pbl_value[]){ c->x[i], c->y[0], c->dy[0] }, 3, NULL, 0);
    }
    return c->status;
}

const pbl__op pbl__op_global_norm = {
    .name = "global_norm", .n_in_min = 1, .n_in_max = PBL__MAX_IN, .n_out = 1,
    .infer = global_norm_infer,
    .grad = global_norm_grad_rule,
    .grad_reads_in = (1u << PBL__MAX_IN) - 1, .grad_reads_out = 0x1, /* every x, and the norm */
    .cost = global_norm_cost,
    .cpu = pbl__cpu_global_norm,
};

/* (x, norm, dy) -> dx shaped like x; norm and dy hold one element each. */
static pbl_status global_norm_grad_infer(pbl__infer_ctx *c)
{
    static const char *const names[] = { "x", "norm", "dy" };
    for (int32_t i = 0; i < 3; i++) {
        pbl_status s = pbl__infer_check_f32(c, i, names[i]);
        if (s != PBL_OK)
            return s;
        if (i > 0 && pbl_shape_numel(&c->in[i].shape) != 1) {
            char st[96];
            return pbl__infer_fail(c, PBL_ERR_SHAPE, "%s is %s; it must hold one element", names[i],
                                   pbl_shape_str(&c->in[i].shape, st, sizeof st));
        }
    }
    c->out[0] = c->in[0];
    return PBL_OK;
}

const pbl__op pbl__op_global_norm_grad = {
    .name = "global_norm_grad", .n_in_min = 3, .n_in_max = 3, .n_out = 1,
    .infer = global_norm_grad_infer,
    .cpu = pbl__cpu_global_norm_grad,
};

static const pbl__attr_spec clip_attrs[] = {
    { .name = "max_norm", .type = PBL_ATTR_FLOAT, .required = 1 },
};
static const int8_t clip_inplace[][2] = { { 0, 0 } };

static pbl_status clip_infer(pbl__infer_ctx *c)
{
    double mx = c->attr[0].f;
    if (!(mx > 0.0 && isfinite(mx)))
        return pbl__infer_fail(c, PBL_ERR_ATTR, "max_norm is %g; it must be finite and positive", mx);
    pbl_status s = pbl__infer_check_f32(c, 0, "x");
    if (s == PBL_OK)
        s = pbl__infer_check_f32(c, 1, "norm");
    if (s == PBL_OK && pbl_shape_numel(&c->in[1].shape) != 1) {
        char st[96];
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "norm is %s; it must hold one element",
                               pbl_shape_str(&c->in[1].shape, st, sizeof st));
    }
    if (s == PBL_OK)
        c->out[0] = c->in[0];
    return s;
}

/* y = x·f(norm), f = min(1, max_norm / (norm + 1e-6)): dx = dy·f, which is clip_by_norm of dy;
 * dnorm = f'(norm)·Σ dy·x, f' = -max_norm / (norm + 1e-6)² where f < 1, else 0. */
static pbl_status clip_grad_rule(pbl__grad_ctx *c)
{
    pbl_attr at = PBL_ATTR_FLOAT("max_norm", c->attr[0].f);
    if (c->need[0])
        c->dx[0] = pbl__grad_emit(c, "clip_by_norm", "grad_x", (pbl_value[]){ c->dy[0], c->x[1] }, 2, &at, 1);
    if (c->need[1])
        c->dx[1] = pbl__grad_emit(c, "clip_by_norm_grad_norm", "grad_norm",
                                  (pbl_value[]){ c->dy[0], c->x[0], c->x[1] }, 3, &at, 1);
    return c->status;
}

const pbl__op pbl__op_clip_by_norm = {
    .name = "clip_by_norm", .n_in_min = 2, .n_in_max = 2, .n_out = 1,
    .attrs = clip_attrs, .n_attrs = 1,
    .infer = clip_infer,
    .grad = clip_grad_rule,
    .grad_reads_in = 0x3, /* x (for dnorm) and the norm */
    .inplace = clip_inplace, .n_inplace = 1,
    .cpu = pbl__cpu_clip_by_norm,
};

/* (dy, x, norm) -> dnorm shaped like norm. */
static pbl_status clip_grad_norm_infer(pbl__infer_ctx *c)
{
    pbl__infer_ctx inner = *c;
    inner.in = c->in + 1; /* (x, norm): clip_by_norm's own checks */
    inner.n_in = 2;
    pbl_status s = clip_infer(&inner);
    if (s == PBL_OK)
        s = pbl__infer_check_f32(c, 0, "dy");
    if (s == PBL_OK)
        s = pbl__infer_check_same(c, 0, 1, "dy", "x");
    if (s == PBL_OK)
        c->out[0] = c->in[2];
    return s;
}

static void clip_grad_norm_cost(const pbl__cost_ctx *c, pbl__cost *out)
{
    out->flops = 2 * pbl__cost_numel(&c->in[0]);
}

const pbl__op pbl__op_clip_by_norm_grad_norm = {
    .name = "clip_by_norm_grad_norm", .n_in_min = 3, .n_in_max = 3, .n_out = 1,
    .attrs = clip_attrs, .n_attrs = 1,
    .infer = clip_grad_norm_infer,
    .cost = clip_grad_norm_cost,
    .cpu = pbl__cpu_clip_by_norm_grad_norm,
};
