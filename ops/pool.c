/*
 * Pooling over NCW, NCHW or NCDHW (despite the names, 1 to 3 spatial dims) and the gradient
 * ops (ops/cpu/pool.c; avg_pool2d divides by the taps inside x, or with count_pad 1 by the taps
 * inside the padded input, ONNX's count_include_pad; max_pool2d_grad gives each output's
 * gradient to the first tap, in window order, whose x equals y).
 *
 *   max_pool2d            x[N,C,d...]  ->  y[N,C,o...]    kernel, stride, pad, dilation, ceil
 *   avg_pool2d            x[N,C,d...]  ->  y[N,C,o...]    the same and count_pad
 *   global_avg_pool       x[N,C,...]   ->  y[N,C,1,...]   (ONNX GlobalAveragePool)
 *   max_pool2d_grad       dy x y       ->  dx             the max's position comes from x and y
 *   avg_pool2d_grad       dy           ->  dx             shape: x's shape
 *   global_avg_pool_grad  dy           ->  dx             shape: x's shape
 *
 * Window attributes as in ops/shared/geometry.h (ONNX's: stride defaults to 1, not to the kernel);
 * padding must be smaller than the kernel, so no window lies wholly in the padding.
 */
#include "ops/cpu/kernels.h"
#include "ops/shared/geometry.h"
#include "ops/shared/resize.h"

enum { PL_KERNEL, PL_STRIDE, PL_PAD, PL_DILATION, PL_CEIL, PL_COUNT_PAD, PL_SHAPE };
static const pbl__attr_spec pool_attrs[] = {
    { .name = "kernel", .type = PBL_ATTR_INTS, .required = 1 },
    { .name = "stride", .type = PBL_ATTR_INTS },
    { .name = "pad", .type = PBL_ATTR_INTS },
    { .name = "dilation", .type = PBL_ATTR_INTS },
    { .name = "ceil", .type = PBL_ATTR_INT },      /* 1: output dims round up (ONNX ceil_mode) */
    { .name = "count_pad", .type = PBL_ATTR_INT }, /* avg: 1 divides by the taps in the padded input */
    { .name = "shape", .type = PBL_ATTR_INTS, .required = 1 }, /* avg_pool2d_grad only */
};

/* y = the pool's output shape over input shape x. */
static pbl_status pool_shape(pbl__infer_ctx *c, const pbl_shape *x, pbl_shape *y)
{
    char sx[96];
    int nsp = pbl__window_nsp(x->ndim);
    if (nsp == 0)
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "x is %s; need x [N, C, d...] with 1 to 3 spatial dims d",
                               pbl_shape_str(x, sx, sizeof sx));
    pbl__window w;
    pbl_status s = pbl__window_parse(c, nsp, &c->attr[PL_KERNEL], &c->attr[PL_STRIDE], &c->attr[PL_PAD],
                                     &c->attr[PL_DILATION], &w);
    if (s != PBL_OK)
        return s;
    for (int k = 0; k < 6; k++)
        if (w.pad[k] >= w.kernel[k % 3])
            return pbl__infer_fail(c, PBL_ERR_ATTR, "pad %lld is not smaller than the kernel (%lld)",
                                   (long long)w.pad[k], (long long)w.kernel[k % 3]);
    for (int k = PL_CEIL; k <= PL_COUNT_PAD; k++)
        if (c->attr[k].i != 0 && c->attr[k].i != 1)
            return pbl__infer_fail(c, PBL_ERR_ATTR, "%s is %lld; it must be 0 or 1", pool_attrs[k].name,
                                   (long long)c->attr[k].i);
    w.ceil = (int)c->attr[PL_CEIL].i;
    *y = pbl__window_shape(&w, x, x->dim[1]);
    for (int32_t d = 2; d < y->ndim; d++)
        if (y->dim[d] < 1) {
            pbl_shape ks = pbl_shape_make(nsp, &w.kernel[3 - nsp]);
            char sk[96];
            return pbl__infer_fail(c, PBL_ERR_SHAPE, "x is %s and the kernel %s (dilated) does not fit in its padded "
                                   "spatial dims", pbl_shape_str(x, sx, sizeof sx), pbl_shape_str(&ks, sk, sizeof sk));
        }
    return PBL_OK;
}

static pbl_status pool_infer(pbl__infer_ctx *c)
{
    pbl_status s = pbl__infer_check_f32(c, 0, "x");
    if (s == PBL_OK)
        s = pool_shape(c, &c->in[0].shape, &c->out[0].shape);
    c->out[0].dtype = PBL_F32;
    return s;
}

/* Fails unless the shape of input i (named what) is `want`, the pool of x. */
static pbl_status pool_check(pbl__infer_ctx *c, int32_t i, const char *what, const pbl_shape *x,
                             const pbl_shape *want)
{
    if (pbl_shape_equal(&c->in[i].shape, want))
        return PBL_OK;
    char sg[96], sx[96], sw[96];
    return pbl__infer_fail(c, PBL_ERR_SHAPE, "%s is %s but pooling x %s gives %s", what,
                           pbl_shape_str(&c->in[i].shape, sg, sizeof sg), pbl_shape_str(x, sx, sizeof sx),
                           pbl_shape_str(want, sw, sizeof sw));
}

/* max_pool2d_grad: (dy, x, y) -> dx shaped like x */
static pbl_status max_pool_grad_infer(pbl__infer_ctx *c)
{
    static const char *const what[] = { "dy", "x", "y" };
    for (int32_t i = 0; i < 3; i++) {
        pbl_status s = pbl__infer_check_f32(c, i, what[i]);
        if (s != PBL_OK)
            return s;
    }
    pbl_shape y;
    pbl_status s = pool_shape(c, &c->in[1].shape, &y);
    if (s == PBL_OK)
        s = pool_check(c, 2, "y", &c->in[1].shape, &y);
    if (s == PBL_OK)
        s = pool_check(c, 0, "dy", &c->in[1].shape, &y);
    c->out[0] = c->in[1];
    return s;
}

/* avg_pool2d_grad: (dy) -> dx of the `shape` attribute */
static pbl_status avg_pool_grad_infer(pbl__infer_ctx *c)
{
    pbl_shape x, y;
    pbl_status s = pbl__infer_check_f32(c, 0, "dy");
    if (s == PBL_OK)
        s = pbl__infer_shape_attr(c, &c->attr[PL_SHAPE], &x);
    if (s == PBL_OK)
        s = pool_shape(c, &x, &y);
    if (s == PBL_OK)
        s = pool_check(c, 0, "dy", &x, &y);
    if (s != PBL_OK)
        return s;
    c->out[0].dtype = PBL_F32;
    c->out[0].shape = x;
    return s;
}

/* The window attributes the forward node was given, into at; returns how many. */
static int pool_grad_attrs(pbl__grad_ctx *c, pbl_attr at[7])
{
    int n = 0;
    for (int k = PL_KERNEL; k <= PL_DILATION; k++)
        if (c->attr[k].n_ints > 0)
            at[n++] = PBL_ATTR_INTS(pool_attrs[k].name, c->attr[k].ints, c->attr[k].n_ints);
    for (int k = PL_CEIL; k <= PL_COUNT_PAD; k++)
        if (c->attr[k].i)
            at[n++] = PBL_ATTR_INT(pool_attrs[k].name, c->attr[k].i);
    return n;
}

static pbl_status max_pool_grad(pbl__grad_ctx *c)
{
    pbl_attr at[7];
    int n = pool_grad_attrs(c, at);
    c->dx[0] = pbl__grad_emit(c, "max_pool2d_grad", "grad", (pbl_value[]){ c->dy[0], c->x[0], c->y[0] }, 3, at, n);
    return c->status;
}

static pbl_status avg_pool_grad(pbl__grad_ctx *c)
{
    pbl_value_info xi;
    if (pbl_graph_value_info(c->g, c->x[0], &xi) != PBL_OK)
        return PBL_ERR_INVALID_ARG;
    pbl_attr at[7];
    int n = pool_grad_attrs(c, at);
    at[n++] = PBL_ATTR_INTS("shape", xi.shape.dim, xi.shape.ndim);
    c->dx[0] = pbl__grad_emit(c, "avg_pool2d_grad", "grad", &c->dy[0], 1, at, n);
    return c->status;
}

/* one operation per tap of each output's window */
static void pool_cost(const pbl__cost_ctx *c, pbl__cost *out)
{
    const pbl__attr_val *k = &c->attr[PL_KERNEL];
    int64_t taps = 1;
    for (int32_t i = 0; i < k->n_ints; i++)
        taps *= k->ints[i];
    int nsp = pbl__window_nsp(c->out[0].shape.ndim);
    for (int i = 1; k->n_ints == 1 && i < nsp; i++)
        taps *= k->ints[0];
    out->flops = pbl__cost_numel(&c->out[0]) * taps;
}

const pbl__op pbl__op_max_pool2d = {
    .name = "max_pool2d", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .attrs = pool_attrs, .n_attrs = 6,
    .infer = pool_infer, .grad = max_pool_grad,
    .grad_reads_in = 0x1, .grad_reads_out = 0x1, /* where the max was: x against y */
    .cost = pool_cost,
    .cpu = pbl__cpu_max_pool2d,
};

const pbl__op pbl__op_max_pool2d_grad = {
    .name = "max_pool2d_grad", .n_in_min = 3, .n_in_max = 3, .n_out = 1,
    .attrs = pool_attrs, .n_attrs = 6,
    .infer = max_pool_grad_infer,
    .cpu = pbl__cpu_max_pool2d_grad,
};

const pbl__op pbl__op_avg_pool2d = {
    .name = "avg_pool2d", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .attrs = pool_attrs, .n_attrs = 6,
    .infer = pool_infer, .grad = avg_pool_grad,
    .cost = pool_cost,
    .cpu = pbl__cpu_avg_pool2d,
};

const pbl__op pbl__op_avg_pool2d_grad = {
    .name = "avg_pool2d_grad", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .attrs = pool_attrs, .n_attrs = 7,
    .infer = avg_pool_grad_infer,
    .cpu = pbl__cpu_avg_pool2d_grad,
};

/* ---- global_avg_pool: the mean over every dim after the first two ------------------------- */

static const pbl__attr_spec shape_attr[] = { { .name = "shape", .type = PBL_ATTR_INTS, .required = 1 } };

static pbl_status global_pool_infer(pbl__infer_ctx *c)
{
    pbl_status s = pbl__infer_check_f32(c, 0, "x");
    if (s != PBL_OK)
        return s;
    const pbl_shape *x = &c->in[0].shape;
    if (x->ndim < 3) {
        char sx[96];
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "x is %s; need x [N, C, d1, ...] with at least one spatial dim",
                               pbl_shape_str(x, sx, sizeof sx));
    }
    c->out[0].dtype = PBL_F32;
    c->out[0].shape = *x;
    for (int32_t i = 2; i < x->ndim; i++)
        c->out[0].shape.dim[i] = 1;
    return PBL_OK;
}

static pbl_status global_pool_grad_infer(pbl__infer_ctx *c)
{
    pbl_shape x;
    pbl_status s = pbl__infer_check_f32(c, 0, "dy");
    if (s == PBL_OK)
        s = pbl__infer_shape_attr(c, &c->attr[0], &x);
    if (s != PBL_OK)
        return s;
    const pbl_shape *dy = &c->in[0].shape;
    int ok = x.ndim >= 3 && dy->ndim == x.ndim && dy->dim[0] == x.dim[0] && dy->dim[1] == x.dim[1];
    for (int32_t i = 2; ok && i < x.ndim; i++)
        ok = dy->dim[i] == 1;
    if (!ok) {
        char sd[96], sx[96];
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "dy is %s but global pooling of x %s gives [N, C, 1, ...]",
                               pbl_shape_str(dy, sd, sizeof sd), pbl_shape_str(&x, sx, sizeof sx));
    }
    c->out[0].dtype = PBL_F32;
    c->out[0].shape = x;
    return PBL_OK;
}

static pbl_status global_pool_grad(pbl__grad_ctx *c)
{
    pbl_value_info xi;
    if (pbl_graph_value_info(c->g, c->x[0], &xi) != PBL_OK)
        return PBL_ERR_INVALID_ARG;
    pbl_attr at = PBL_ATTR_INTS("shape", xi.shape.dim, xi.shape.ndim);
    c->dx[0] = pbl__grad_emit(c, "global_avg_pool_grad", "grad", &c->dy[0], 1, &at, 1);
    return c->status;
}

const pbl__op pbl__op_global_avg_pool = {
    .name = "global_avg_pool", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .infer = global_pool_infer, .grad = global_pool_grad,
    .cost = pbl__cost_reduce,
    .cpu = pbl__cpu_global_avg_pool,
};

const pbl__op pbl__op_global_avg_pool_grad = {
    .name = "global_avg_pool_grad", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .attrs = shape_attr, .n_attrs = 1,
    .infer = global_pool_grad_infer,
    .cpu = pbl__cpu_global_avg_pool_grad,
};

/* ---- resize (ONNX Resize and Upsample: nearest and linear, any rank) and its gradient ------
 * The arithmetic is ops/shared/resize.h (kernels: ops/cpu/pool.c, ops/cuda/pool.cu).
 *
 *   resize       x     ->  y   shape (y's dims), mode (0 nearest, 1 linear), coord (the
 *                              coordinate transformation), nearest (the rounding), scale_bits
 *   resize_grad  dy    ->  dx  the same attributes and x_shape (dx's dims)
 *
 * y's dims are an attribute: the ONNX converter works them out from the constant scales or
 * sizes. scale_bits carries each dim's scale (the divisor of the coordinate transformation,
 * which ONNX takes from the scales input rather than from out/in) as the bits of a binary64;
 * empty, the scale is out/in. The gradient adds each output's dy into the inputs it read,
 * with the same weights. (Resampling lives with pooling: ops/ is at its file cap.) */

enum { RS_SHAPE, RS_MODE, RS_COORD, RS_NEAREST, RS_SCALES, RS_X_SHAPE };
static const pbl__attr_spec resize_attrs[] = {
    { .name = "shape", .type = PBL_ATTR_INTS, .required = 1 },
    { .name = "mode", .type = PBL_ATTR_INT },
    { .name = "coord", .type = PBL_ATTR_INT },
    { .name = "nearest", .type = PBL_ATTR_INT },
    { .name = "scale_bits", .type = PBL_ATTR_INTS },
    { .name = "x_shape", .type = PBL_ATTR_INTS, .required = 1 }, /* resize_grad only */
};

/* Checks the attributes for resizing x to y. */
static pbl_status resize_check(pbl__infer_ctx *c, const pbl_shape *x, const pbl_shape *y)
{
    char sx[96], sy[96];
    const pbl__attr_val *a = c->attr;
    if (a[RS_MODE].i < 0 || a[RS_MODE].i > PBL__RESIZE_LINEAR)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "mode is %lld; it must be 0 (nearest) or 1 (linear)",
                               (long long)a[RS_MODE].i);
    if (a[RS_COORD].i < 0 || a[RS_COORD].i >= PBL__RC_COUNT)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "coord is %lld; it must be 0..%d", (long long)a[RS_COORD].i,
                               PBL__RC_COUNT - 1);
    if (a[RS_NEAREST].i < 0 || a[RS_NEAREST].i >= PBL__RN_COUNT)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "nearest is %lld; it must be 0..%d", (long long)a[RS_NEAREST].i,
                               PBL__RN_COUNT - 1);
    if (y->ndim != x->ndim)
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "x is %s but the resized shape %s has another rank",
                               pbl_shape_str(x, sx, sizeof sx), pbl_shape_str(y, sy, sizeof sy));
    for (int32_t d = 0; d < x->ndim; d++)
        if ((x->dim[d] == 0) != (y->dim[d] == 0))
            return pbl__infer_fail(c, PBL_ERR_SHAPE, "x is %s and the resized shape %s: an empty dim stays empty",
                                   pbl_shape_str(x, sx, sizeof sx), pbl_shape_str(y, sy, sizeof sy));
    const pbl__attr_val *sc = &a[RS_SCALES];
    if (sc->n_ints != 0 && sc->n_ints != x->ndim)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "scale_bits lists %d values; x has rank %d", (int)sc->n_ints,
                               (int)x->ndim);
    for (int32_t d = 0; d < sc->n_ints; d++) {
        double s;
        uint64_t u = (uint64_t)sc->ints[d];
        memcpy(&s, &u, sizeof s);
        if (!(s > 0) || !isfinite(s))
            return pbl__infer_fail(c, PBL_ERR_ATTR, "scale %d is %g; it must be a finite number > 0", (int)d, s);
    }
    return PBL_OK;
}

static pbl_status resize_infer(pbl__infer_ctx *c)
{
    pbl_shape y;
    pbl_status s = pbl__infer_check_f32(c, 0, "x");
    if (s == PBL_OK)
        s = pbl__infer_shape_attr(c, &c->attr[RS_SHAPE], &y);
    if (s == PBL_OK)
        s = resize_check(c, &c->in[0].shape, &y);
    if (s != PBL_OK)
        return s;
    c->out[0].dtype = PBL_F32;
    c->out[0].shape = y;
    return PBL_OK;
}

static pbl_status resize_grad_infer(pbl__infer_ctx *c)
{
    pbl_shape y, x;
    pbl_status s = pbl__infer_check_f32(c, 0, "dy");
    if (s == PBL_OK)
        s = pbl__infer_shape_attr(c, &c->attr[RS_SHAPE], &y);
    if (s == PBL_OK)
        s = pbl__infer_shape_attr(c, &c->attr[RS_X_SHAPE], &x);
    if (s == PBL_OK)
        s = resize_check(c, &x, &y);
    if (s == PBL_OK && !pbl_shape_equal(&y, &c->in[0].shape)) {
        char sd[96], sy[96];
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "dy is %s but the resize makes %s",
                               pbl_shape_str(&c->in[0].shape, sd, sizeof sd), pbl_shape_str(&y, sy, sizeof sy));
    }
    if (s != PBL_OK)
        return s;
    c->out[0].dtype = PBL_F32;
    c->out[0].shape = x;
    return PBL_OK;
}

static pbl_status resize_grad(pbl__grad_ctx *c)
{
    pbl_value_info xi;
    if (pbl_graph_value_info(c->g, c->x[0], &xi) != PBL_OK)
        return PBL_ERR_INVALID_ARG;
    const pbl__attr_val *a = c->attr;
    pbl_attr at[6];
    int32_t n = 0;
    at[n++] = PBL_ATTR_INTS("shape", a[RS_SHAPE].ints, a[RS_SHAPE].n_ints);
    at[n++] = PBL_ATTR_INT("mode", a[RS_MODE].i);
    at[n++] = PBL_ATTR_INT("coord", a[RS_COORD].i);
    at[n++] = PBL_ATTR_INT("nearest", a[RS_NEAREST].i);
    if (a[RS_SCALES].n_ints)
        at[n++] = PBL_ATTR_INTS("scale_bits", a[RS_SCALES].ints, a[RS_SCALES].n_ints);
    at[n++] = PBL_ATTR_INTS("x_shape", xi.shape.dim, xi.shape.ndim);
    c->dx[0] = pbl__grad_emit(c, "resize_grad", "grad", &c->dy[0], 1, at, n);
    return c->status;
}

/* each output reads up to 2^k inputs (k resized dims); charged 4 multiply-adds */
static void resize_cost(const pbl__cost_ctx *c, pbl__cost *out) { out->flops = 8 * pbl__cost_numel(&c->out[0]); }
static void resize_grad_cost(const pbl__cost_ctx *c, pbl__cost *out) { out->flops = 8 * pbl__cost_numel(&c->in[0]); }

const pbl__op pbl__op_resize = {
    .name = "resize", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .attrs = resize_attrs, .n_attrs = 5,
    .infer = resize_infer, .grad = resize_grad,
    .cost = resize_cost,
    .cpu = pbl__cpu_resize,
};

const pbl__op pbl__op_resize_grad = {
    .name = "resize_grad", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .attrs = resize_attrs, .n_attrs = 6,
    .infer = resize_grad_infer,
    .cost = resize_grad_cost,
    .cpu = pbl__cpu_resize_grad,
};
