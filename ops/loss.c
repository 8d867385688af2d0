/* softmax_cross_entropy (integer labels, mean over the batch) and mse_loss, with their
 * gradient ops. Kernels: ops/cpu/loss.c. */
#include "ops/cpu/kernels.h"

static pbl_status sce_check(pbl__infer_ctx *c)
{
    char sl[96], sy[96];
    pbl_status s = pbl__infer_check_f32(c, 0, "logits");
    if (s != PBL_OK)
        return s;
    if (c->in[1].dtype != PBL_I32)
        return pbl__infer_fail(c, PBL_ERR_DTYPE, "labels are %s, expected i32 class indices", pbl_dtype_name(c->in[1].dtype));
    const pbl_shape *l = &c->in[0].shape, *y = &c->in[1].shape;
    if (l->ndim != 2 || y->ndim != 1 || y->dim[0] != l->dim[0])
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "logits are %s and labels %s; need logits [N, C] and labels [N]",
                               pbl_shape_str(l, sl, sizeof sl), pbl_shape_str(y, sy, sizeof sy));
    return PBL_OK;
}

static pbl_status scalar_check(pbl__infer_ctx *c, int32_t i)
{
    pbl_status s = pbl__infer_check_f32(c, i, "dloss");
    if (s == PBL_OK && pbl_shape_numel(&c->in[i].shape) != 1) {
        char sd[96];
        s = pbl__infer_fail(c, PBL_ERR_SHAPE, "dloss is %s; it must be a scalar",
                            pbl_shape_str(&c->in[i].shape, sd, sizeof sd));
    }
    return s;
}

static pbl_status sce_infer(pbl__infer_ctx *c)
{
    pbl_status s = sce_check(c);
    if (s == PBL_OK) {
        c->out[0].dtype = PBL_F32;
        c->out[0].shape = PBL_SCALAR;
    }
    return s;
}

static pbl_status sce_grad(pbl__grad_ctx *c)
{
    if (c->need[0])
        c->dx[0] = pbl__grad_emit(c, "softmax_cross_entropy_grad", "grad",
                                  (pbl_value[]){ c->x[0], c->x[1], c->dy[0] }, 3, NULL, 0);
    return c->status;
}

/* softmax's three passes over the logits; picking each row's label is one more per row */
static void sce_cost(const pbl__cost_ctx *c, pbl__cost *out)
{
    out->flops = 3 * pbl__cost_numel(&c->in[0]) + pbl__cost_numel(&c->in[1]);
}

const pbl__op pbl__op_softmax_cross_entropy = {
    .name = "softmax_cross_entropy", .n_in_min = 2, .n_in_max = 2, .n_out = 1,
    .infer = sce_infer, .grad = sce_grad,
    .grad_reads_in = 0x3, /* the softmax is recomputed from the logits */
    .cost = sce_cost,
    .cpu = pbl__cpu_softmax_cross_entropy,
};

static pbl_status sce_grad_infer(pbl__infer_ctx *c)
{
    pbl_status s = sce_check(c);
    if (s == PBL_OK)
        s = scalar_check(c, 2);
    if (s == PBL_OK)
        c->out[0] = c->in[0];
    return s;
}

const pbl__op pbl__op_softmax_cross_entropy_grad = {
    .name = "softmax_cross_entropy_grad", .n_in_min = 3, .n_in_max = 3, .n_out = 1,
    .infer = sce_grad_infer,
    .cpu = pbl__cpu_softmax_cross_entropy_grad,
};

/* ---- mse_loss: mean((pred − target)²) ---------------------------------------------------- */

static pbl_status mse_check(pbl__infer_ctx *c)
{
    pbl_status s = pbl__infer_check_f32(c, 0, "pred");
    if (s == PBL_OK)
        s = pbl__infer_check_f32(c, 1, "target");
    if (s == PBL_OK)
        s = pbl__infer_check_same(c, 0, 1, "pred", "target");
    return s;
}

static pbl_status mse_infer(pbl__infer_ctx *c)
{
    pbl_status s = mse_check(c);
    if (s == PBL_OK) {
        c->out[0].dtype = PBL_F32;
        c->out[0].shape = PBL_SCALAR;
    }
    return s;
}

static pbl_status mse_grad(pbl__grad_ctx *c)
{
    pbl_value dp = pbl__grad_emit(c, "mse_loss_grad", "grad_pred",
                                  (pbl_value[]){ c->x[0], c->x[1], c->dy[0] }, 3, NULL, 0);
    if (c->need[0])
        c->dx[0] = dp;
    if (c->need[1] && dp != PBL_NONE) {
        pbl_attr neg = PBL_ATTR_FLOAT("alpha", -1.0);
        c->dx[1] = pbl__grad_emit(c, "scale", "grad_target", &dp, 1, &neg, 1);
    }
    return c->status;
}

const pbl__op pbl__op_mse_loss = {
    .name = "mse_loss", .n_in_min = 2, .n_in_max = 2, .n_out = 1,
    .infer = mse_infer, .grad = mse_grad, .grad_reads_in = 0x3,
    .cost = pbl__cost_reduce, /* one squared difference summed per element */
    .cpu = pbl__cpu_mse_loss,
};

static pbl_status mse_grad_infer(pbl__infer_ctx *c)
{
    pbl_status s = mse_check(c);
    if (s == PBL_OK)
        s = scalar_check(c, 2);
    if (s == PBL_OK)
        c->out[0] = c->in[0];
    return s;
}

const pbl__op pbl__op_mse_loss_grad = {
    .name = "mse_loss_grad", .n_in_min = 3, .n_in_max = 3, .n_out = 1,
    .infer = mse_grad_infer,
    .cpu = pbl__cpu_mse_loss_grad,
};

/* ---- nll_loss: −logp[n, target[n, d...], d...]·weight[target], none / sum / mean -------------
 * logp [N, C, d...] (log-probabilities, f32), target [N, d...] (i32 class indices), optional
 * weight [C]. reduction 0 keeps one loss per target ([N, d...]), 1 sums them, 2 (the default)
 * divides the sum by the summed weights of the targets counted. A target equal to
 * ignore_index counts nothing. The ONNX losses NegativeLogLikelihoodLoss and
 * SoftmaxCrossEntropyLoss (log_softmax then this) map onto it. */

enum { NLL_REDUCTION, NLL_IGNORE };
static const pbl__attr_spec nll_attrs[] = {
    { .name = "reduction", .type = PBL_ATTR_INT, .i = 2 },
    { .name = "ignore_index", .type = PBL_ATTR_INT, .i = INT64_MIN },
};

/* logp, target and the optional weight (input iw) agree */
static pbl_status nll_check(pbl__infer_ctx *c, int32_t iw)
{
    char sl[96], st[96];
    pbl_status s = pbl__infer_check_f32(c, 0, "logp");
    if (s != PBL_OK)
        return s;
    if (c->in[1].dtype != PBL_I32)
        return pbl__infer_fail(c, PBL_ERR_DTYPE, "target is %s, expected i32 class indices", pbl_dtype_name(c->in[1].dtype));
    int64_t r = c->attr[NLL_REDUCTION].i;
    if (r < 0 || r > 2)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "reduction %lld is not 0 (none), 1 (sum) or 2 (mean)", (long long)r);
    const pbl_shape *l = &c->in[0].shape, *t = &c->in[1].shape;
    int ok = l->ndim >= 2 && t->ndim == l->ndim - 1 && t->dim[0] == l->dim[0];
    for (int32_t i = 2; ok && i < l->ndim; i++)
        ok = t->dim[i - 1] == l->dim[i];
    if (!ok)
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "logp is %s and target %s; need logp [N, C, d...] and target [N, d...]",
                               pbl_shape_str(l, sl, sizeof sl), pbl_shape_str(t, st, sizeof st));
    if (iw < c->n_in) {
        if ((s = pbl__infer_check_f32(c, iw, "weight")) != PBL_OK)
            return s;
        const pbl_shape *w = &c->in[iw].shape;
        if (w->ndim != 1 || w->dim[0] != l->dim[1])
            return pbl__infer_fail(c, PBL_ERR_SHAPE, "weight is %s; it must be [%lld], one per class",
                                   pbl_shape_str(w, st, sizeof st), (long long)l->dim[1]);
    }
    return PBL_OK;
}

static pbl_status nll_infer(pbl__infer_ctx *c)
{
    pbl_status s = nll_check(c, 2);
    if (s == PBL_OK) {
        c->out[0].dtype = PBL_F32;
        c->out[0].shape = c->attr[NLL_REDUCTION].i == 0 ? c->in[1].shape : PBL_SCALAR;
    }
    return s;
}

static pbl_status nll_grad(pbl__grad_ctx *c)
{
    pbl_attr at[] = { PBL_ATTR_INT("reduction", c->attr[NLL_REDUCTION].i), PBL_ATTR_INT("ignore_index", c->attr[NLL_IGNORE].i) };
    pbl_value in[] = { c->x[0], c->x[1], c->dy[0], c->n_in > 2 ? c->x[2] : PBL_NONE };
    if (c->need[0])
        c->dx[0] = pbl__grad_emit(c, "nll_loss_grad", "grad", in, c->n_in > 2 ? 4 : 3, at, 2);
    return c->status;
}

const pbl__op pbl__op_nll_loss = {
    .name = "nll_loss", .n_in_min = 2, .n_in_max = 3, .n_out = 1,
    .attrs = nll_attrs, .n_attrs = 2,
    .infer = nll_infer, .grad = nll_grad,
    /* the targets and weights; logp is an input of nll_loss_grad for its shape only, declared
     * all the same (a backward node's inputs are what it reads); after a log_softmax its
     * gradient keeps logp alive anyway */
    .grad_reads_in = 0x7,
    .cost = pbl__cost_reduce,
    .cpu = pbl__cpu_nll_loss,
};

/* (logp, target, dy, [weight]) -> dlogp */
static pbl_status nll_grad_infer(pbl__infer_ctx *c)
{
    pbl_status s = nll_check(c, 3);
    if (s != PBL_OK)
        return s;
    if ((s = pbl__infer_check_f32(c, 2, "dy")) != PBL_OK)
        return s;
    int64_t want = c->attr[NLL_REDUCTION].i == 0 ? pbl_shape_numel(&c->in[1].shape) : 1;
    if (pbl_shape_numel(&c->in[2].shape) != want) {
        char sd[96];
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "dy is %s; it must hold %lld elements",
                               pbl_shape_str(&c->in[2].shape, sd, sizeof sd), (long long)want);
    }
    c->out[0] = c->in[0];
    return PBL_OK;
}

const pbl__op pbl__op_nll_loss_grad = {
    .name = "nll_loss_grad", .n_in_min = 3, .n_in_max = 4, .n_out = 1,
    .attrs = nll_attrs, .n_attrs = 2,
    .infer = nll_grad_infer,
    .cpu = pbl__cpu_nll_loss_grad,
};
