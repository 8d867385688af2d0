/* Optimizer updates as ops, so one training step is one graph: sgd, sgd_momentum, adam.
 * Each writes its parameter and state in place (mutates): w' is w's storage, and the
 * scheduler orders every other reader of w before the update. Kernels: ops/cpu/optim.c. */
#include <math.h>

#include "ops/cpu/kernels.h"

/* in: w g [m [v t]]; every state must be shaped like w, t must hold one element */
static pbl_status update_infer(pbl__infer_ctx *c, int32_t n_like_w)
{
    static const char *const names[] = { "w", "g", "m", "v", "t" };
    for (int32_t i = 0; i < c->n_in; i++) {
        pbl_status s = pbl__infer_check_f32(c, i, names[i]);
        if (s != PBL_OK)
            return s;
    }
    for (int32_t i = 1; i < n_like_w; i++) {
        pbl_status s = pbl__infer_check_same(c, 0, i, "w", names[i]);
        if (s != PBL_OK)
            return s;
    }
    if (c->n_in > n_like_w && pbl_shape_numel(&c->in[n_like_w].shape) != 1) {
        char st[96];
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "t is %s; the step count must hold one element",
                               pbl_shape_str(&c->in[n_like_w].shape, st, sizeof st));
    }
    for (int32_t k = 0; k < c->n_in - 1; k++) /* outputs: every input but g, in order */
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
};
static const int8_t sgd_mutates[][2] = { { 0, 0 } };

static pbl_status sgd_infer(pbl__infer_ctx *c)
{
    pbl_status s = lr_check(c, c->attr[0].f, c->attr[1].f);
    return s == PBL_OK ? update_infer(c, 2) : s;
}

const pbl__op pbl__op_sgd = {
    .name = "sgd", .n_in_min = 2, .n_in_max = 2, .n_out = 1,
    .attrs = sgd_attrs, .n_attrs = 2,
    .infer = sgd_infer,
    .mutates = sgd_mutates, .n_mutates = 1,
    .cpu = pbl__cpu_sgd,
};

/* ---- sgd_momentum: m = μ·m + (g + wd·w); w -= lr·m ----------------------------------------- */

static const pbl__attr_spec momentum_attrs[] = {
    { .name = "lr", .type = PBL_ATTR_FLOAT, .f = 0.01 },
    { .name = "momentum", .type = PBL_ATTR_FLOAT, .f = 0.9 },
    { .name = "weight_decay", .type = PBL_ATTR_FLOAT },
};
static const int8_t momentum_mutates[][2] = { { 0, 0 }, { 1, 2 } };

static pbl_status momentum_infer(pbl__infer_ctx *c)
{
    pbl_status s = lr_check(c, c->attr[0].f, c->attr[2].f);
    if (s == PBL_OK && !(c->attr[1].f >= 0.0 && c->attr[1].f < 1.0))
        s = pbl__infer_fail(c, PBL_ERR_ATTR, "momentum is %g; it must be in [0, 1)", c->attr[1].f);
    return s == PBL_OK ? update_infer(c, 3) : s;
}

const pbl__op pbl__op_sgd_momentum = {
    .name = "sgd_momentum", .n_in_min = 3, .n_in_max = 3, .n_out = 2,
    .attrs = momentum_attrs, .n_attrs = 3,
    .infer = momentum_infer,
    .mutates = momentum_mutates, .n_mutates = 2,
    .cpu = pbl__cpu_sgd_momentum,
};

/* ---- adam (Kingma & Ba, with bias correction as PyTorch computes it) ---------------------- */

static const pbl__attr_spec adam_attrs[] = {
    { .name = "lr", .type = PBL_ATTR_FLOAT, .f = 0.001 },
    { .name = "beta1", .type = PBL_ATTR_FLOAT, .f = 0.9 },
    { .name = "beta2", .type = PBL_ATTR_FLOAT, .f = 0.999 },
    { .name = "eps", .type = PBL_ATTR_FLOAT, .f = 1e-8 },
    { .name = "weight_decay", .type = PBL_ATTR_FLOAT },
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
    return s == PBL_OK ? update_infer(c, 4) : s;
}

const pbl__op pbl__op_adam = {
    .name = "adam", .n_in_min = 5, .n_in_max = 5, .n_out = 4,
    .attrs = adam_attrs, .n_attrs = 5,
    .infer = adam_infer,
    .mutates = adam_mutates, .n_mutates = 4,
    .cpu = pbl__cpu_adam,
};
