/* sum and mean over axes; sum_to and broadcast_to, the pair that moves gradients between
 * broadcast shapes. Kernels: ops/cpu/reduce.c. */
#include <stdio.h>

#include "ops/shared/broadcast.h"
#include "ops/cpu/kernels.h"
#include "ops/shared/reduce.h"

enum { RED_AXES, RED_KEEPDIMS };
static const pbl__attr_spec reduce_attrs[] = {
    { .name = "axes", .type = PBL_ATTR_INTS },
    { .name = "keepdims", .type = PBL_ATTR_INT },
};

int pbl__reduce_keep_shape(const pbl_shape *in, const pbl__attr_val *attr, pbl_shape *keep, char *err, size_t errlen)
{
    const pbl__attr_val *ax = &attr[RED_AXES];
    *keep = *in;
    if (ax->n_ints == 0) {
        for (int32_t i = 0; i < in->ndim; i++)
            keep->dim[i] = 1;
        return 1;
    }
    int32_t seen = 0;
    for (int32_t k = 0; k < ax->n_ints; k++) {
        int64_t a = ax->ints[k] < 0 ? ax->ints[k] + in->ndim : ax->ints[k];
        if (a < 0 || a >= in->ndim) {
            snprintf(err, errlen, "axis %lld is out of range for rank %d", (long long)ax->ints[k], (int)in->ndim);
            return 0;
        }
        if (seen & (1 << a)) {
            snprintf(err, errlen, "axis %lld is given twice", (long long)ax->ints[k]);
            return 0;
        }
        seen |= 1 << a;
        keep->dim[a] = 1;
    }
    return 1;
}

static pbl_status reduce_infer(pbl__infer_ctx *c)
{
    pbl_status s = pbl__infer_check_f32(c, 0, "x");
    if (s != PBL_OK)
        return s;
    pbl_shape keep;
    if (!pbl__reduce_keep_shape(&c->in[0].shape, c->attr, &keep, c->err, c->errlen))
        return PBL_ERR_ATTR;
    c->out[0].dtype = PBL_F32;
    if (c->attr[RED_KEEPDIMS].i) {
        c->out[0].shape = keep;
        return PBL_OK;
    }
    /* drop the reduced dims */
    const pbl__attr_val *ax = &c->attr[RED_AXES];
    pbl_shape out = { 0 };
    for (int32_t i = 0; i < keep.ndim; i++) {
        int reduced = ax->n_ints == 0;
        for (int32_t k = 0; k < ax->n_ints; k++)
            reduced |= (ax->ints[k] < 0 ? ax->ints[k] + keep.ndim : ax->ints[k]) == i;
        if (!reduced)
            out.dim[out.ndim++] = keep.dim[i];
    }
    c->out[0].shape = out;
    return PBL_OK;
}

/* dx = broadcast_to(reshape(dy, keep shape), x's shape), times 1/count for mean */
static pbl_status reduce_grad_common(pbl__grad_ctx *c, int is_mean)
{
    pbl_value_info xi, yi;
    pbl_graph_value_info(c->g, c->x[0], &xi);
    pbl_graph_value_info(c->g, c->y[0], &yi);
    pbl_shape keep;
    char err[128];
    pbl__reduce_keep_shape(&xi.shape, c->attr, &keep, err, sizeof err);
    pbl_value d = c->dy[0];
    if (!pbl_shape_equal(&keep, &yi.shape)) {
        pbl_attr at = PBL_ATTR_INTS("shape", keep.dim, keep.ndim);
        d = pbl__grad_emit(c, "reshape", "grad_keepdims", &d, 1, &at, 1);
    }
    if (d == PBL_NONE)
        return c->status;
    pbl_attr bt = PBL_ATTR_INTS("shape", xi.shape.dim, xi.shape.ndim);
    d = pbl__grad_emit(c, "broadcast_to", is_mean ? "grad_sum" : "grad", &d, 1, &bt, 1);
    if (is_mean && d != PBL_NONE) {
        double count = (double)pbl_shape_numel(&xi.shape) / (double)pbl_shape_numel(&keep);
        pbl_attr st = PBL_ATTR_FLOAT("alpha", 1.0 / count);
        d = pbl__grad_emit(c, "scale", "grad", &d, 1, &st, 1);
    }
    c->dx[0] = d;
    return c->status;
}

static pbl_status sum_grad(pbl__grad_ctx *c) { return reduce_grad_common(c, 0); }
static pbl_status mean_grad(pbl__grad_ctx *c) { return reduce_grad_common(c, 1); }

const pbl__op pbl__op_sum = {
    .name = "sum", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .attrs = reduce_attrs, .n_attrs = 2,
    .infer = reduce_infer, .grad = sum_grad,
    .cost = pbl__cost_reduce,
    .cpu = pbl__cpu_sum,
};

const pbl__op pbl__op_mean = {
    .name = "mean", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .attrs = reduce_attrs, .n_attrs = 2,
    .infer = reduce_infer, .grad = mean_grad,
    .cost = pbl__cost_reduce,
    .cpu = pbl__cpu_mean,
};

/* ---- sum_to / broadcast_to: shape attribute, broadcasting rules of add ------------------- */

static const pbl__attr_spec shape_attr[] = { { .name = "shape", .type = PBL_ATTR_INTS, .required = 1 } };

static pbl_status target_shape(pbl__infer_ctx *c, pbl_shape *t)
{
    pbl_status s = pbl__infer_shape_attr(c, &c->attr[0], t);
    return s == PBL_OK ? pbl__infer_check_f32(c, 0, "x") : s;
}

static pbl_status sum_to_infer(pbl__infer_ctx *c)
{
    pbl_shape t;
    pbl_status s = target_shape(c, &t);
    if (s != PBL_OK)
        return s;
    if (!pbl__bcast_ok(&c->in[0].shape, &t)) {
        char sx[96], st[96];
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "x is %s; shape %s does not broadcast to it",
                               pbl_shape_str(&c->in[0].shape, sx, sizeof sx), pbl_shape_str(&t, st, sizeof st));
    }
    c->out[0].dtype = PBL_F32;
    c->out[0].shape = t;
    return PBL_OK;
}

static pbl_status broadcast_to_infer(pbl__infer_ctx *c)
{
    pbl_shape t;
    pbl_status s = target_shape(c, &t);
    if (s != PBL_OK)
        return s;
    if (!pbl__bcast_ok(&t, &c->in[0].shape)) {
        char sx[96], st[96];
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "x is %s and does not broadcast to %s",
                               pbl_shape_str(&c->in[0].shape, sx, sizeof sx), pbl_shape_str(&t, st, sizeof st));
    }
    c->out[0].dtype = PBL_F32;
    c->out[0].shape = t;
    return PBL_OK;
}

/* Each is the other's gradient. */
static pbl_status swap_grad(pbl__grad_ctx *c, const char *op)
{
    pbl_value_info xi;
    pbl_graph_value_info(c->g, c->x[0], &xi);
    pbl_attr at = PBL_ATTR_INTS("shape", xi.shape.dim, xi.shape.ndim);
    c->dx[0] = pbl__grad_emit(c, op, "grad", &c->dy[0], 1, &at, 1);
    return c->status;
}

static pbl_status sum_to_grad(pbl__grad_ctx *c) { return swap_grad(c, "broadcast_to"); }
static pbl_status broadcast_to_grad(pbl__grad_ctx *c) { return swap_grad(c, "sum_to"); }

const pbl__op pbl__op_sum_to = {
    .name = "sum_to", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .attrs = shape_attr, .n_attrs = 1,
    .infer = sum_to_infer, .grad = sum_to_grad,
    .cost = pbl__cost_reduce,
    .cpu = pbl__cpu_sum_to,
};

const pbl__op pbl__op_broadcast_to = {
    .name = "broadcast_to", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .attrs = shape_attr, .n_attrs = 1,
    .infer = broadcast_to_infer, .grad = broadcast_to_grad,
    .cpu = pbl__cpu_broadcast_to,
};

/* ---- reduce: max, min, prod, L1, L2, log-sum-exp, log-sum, sum of squares over axes ---------
 * The same axes and keepdims as sum and mean, and a mode (ops/shared/reduce.h) saying how each
 * group combines. Its gradient is one reduce_grad node reading x, y and dy. */

static const pbl__attr_spec reduce_mode_attrs[] = {
    { .name = "axes", .type = PBL_ATTR_INTS },
    { .name = "keepdims", .type = PBL_ATTR_INT },
    { .name = "mode", .type = PBL_ATTR_INT, .required = 1 },
};

static pbl_status mode_check(pbl__infer_ctx *c)
{
    int64_t m = c->attr[PBL__RED_A_MODE].i;
    if (m < 0 || m >= PBL__RED_MODES)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "mode %lld is not one of 0..%d", (long long)m, PBL__RED_MODES - 1);
    return PBL_OK;
}

static pbl_status reduce_mode_infer(pbl__infer_ctx *c)
{
    pbl_status s = mode_check(c);
    return s == PBL_OK ? reduce_infer(c) : s;
}

static pbl_status reduce_mode_grad(pbl__grad_ctx *c)
{
    const pbl__attr_val *ax = &c->attr[PBL__RED_A_AXES];
    pbl_attr at[] = { PBL_ATTR_INTS("axes", ax->ints, ax->n_ints), PBL_ATTR_INT("keepdims", c->attr[PBL__RED_A_KEEPDIMS].i),
                      PBL_ATTR_INT("mode", c->attr[PBL__RED_A_MODE].i) };
    c->dx[0] = pbl__grad_emit(c, "reduce_grad", "grad", (pbl_value[]){ c->x[0], c->y[0], c->dy[0] }, 3, at, 3);
    return c->status;
}

const pbl__op pbl__op_reduce = {
    .name = "reduce", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .attrs = reduce_mode_attrs, .n_attrs = 3,
    .infer = reduce_mode_infer, .grad = reduce_mode_grad,
    .grad_reads_in = 0x1, .grad_reads_out = 0x1,
    .cost = pbl__cost_reduce,
    .cpu = pbl__cpu_reduce,
};

/* (x, y, dy) -> dx shaped like x; y and dy have the reduced shape (kept dims or not) */
static pbl_status reduce_grad_infer(pbl__infer_ctx *c)
{
    pbl_status s = mode_check(c);
    for (int32_t i = 0; i < 3 && s == PBL_OK; i++)
        s = pbl__infer_check_f32(c, i, i == 0 ? "x" : i == 1 ? "y" : "dy");
    if (s != PBL_OK)
        return s;
    pbl_shape keep;
    if (!pbl__reduce_keep_shape(&c->in[0].shape, c->attr, &keep, c->err, c->errlen))
        return PBL_ERR_ATTR;
    int64_t n = pbl_shape_numel(&keep);
    if (pbl_shape_numel(&c->in[1].shape) != n || pbl_shape_numel(&c->in[2].shape) != n) {
        char sy[96], sd[96];
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "y is %s and dy %s; both must hold %lld elements",
                               pbl_shape_str(&c->in[1].shape, sy, sizeof sy), pbl_shape_str(&c->in[2].shape, sd, sizeof sd),
                               (long long)n);
    }
    c->out[0] = c->in[0];
    return PBL_OK;
}

const pbl__op pbl__op_reduce_grad = {
    .name = "reduce_grad", .n_in_min = 3, .n_in_max = 3, .n_out = 1,
    .attrs = reduce_mode_attrs, .n_attrs = 3,
    .infer = reduce_grad_infer,
    .cost = pbl__cost_reduce,
    .cpu = pbl__cpu_reduce_grad,
};

/* ---- arg_reduce: the index of the max (mode 0) or min (mode 1) along one axis, as i32 ------ */

static const pbl__attr_spec arg_attrs[] = {
    { .name = "axis", .type = PBL_ATTR_INT },
    { .name = "keepdims", .type = PBL_ATTR_INT, .i = 1 },
    { .name = "select_last", .type = PBL_ATTR_INT },
    { .name = "mode", .type = PBL_ATTR_INT },
};

static pbl_status arg_infer(pbl__infer_ctx *c)
{
    pbl_status s = pbl__infer_check_f32(c, 0, "x");
    if (s != PBL_OK)
        return s;
    const pbl_shape *x = &c->in[0].shape;
    int64_t axis = c->attr[PBL__ARG_A_AXIS].i, m = c->attr[PBL__ARG_A_MODE].i;
    if (m != 0 && m != 1)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "mode %lld is not 0 (argmax) or 1 (argmin)", (long long)m);
    if (axis < -x->ndim || axis >= x->ndim || x->ndim == 0)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "axis %lld is out of range for rank %d", (long long)axis, (int)x->ndim);
    if (axis < 0)
        axis += x->ndim;
    pbl_shape out = { 0 };
    for (int32_t i = 0; i < x->ndim; i++) {
        if (i != axis)
            out.dim[out.ndim++] = x->dim[i];
        else if (c->attr[PBL__ARG_A_KEEPDIMS].i)
            out.dim[out.ndim++] = 1;
    }
    c->out[0].dtype = PBL_I32;
    c->out[0].shape = out;
    return PBL_OK;
}

const pbl__op pbl__op_arg_reduce = {
    .name = "arg_reduce", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .attrs = arg_attrs, .n_attrs = 4,
    .infer = arg_infer,
    .cost = pbl__cost_reduce,
    .cpu = pbl__cpu_arg_reduce,
};
