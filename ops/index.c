/*
 * The indexing ops: slice, pad, gather, cast, and the gradients of the first three. Kernels in
 * ops/cpu/index.c and ops/cuda/index.cu, over the index maps of ops/shared/index.h.
 *
 *   slice        x[...] f32|i32 -> y[sizes]   y[i] = x[start + i·step] per dim; starts, steps
 *                and sizes list one entry per dim of x (a step may be negative)
 *   slice_grad   dy[sizes] -> dx[shape]       dy put back where the slice took it, zeros elsewhere
 *   pad          x[...] f32|i32 -> y          pads = [before..., after...] per dim (constant mode:
 *                negative cuts); mode 0 constant (`value`), 1 reflect, 2 edge
 *   pad_grad     dy -> dx[shape]              each x position gets the sum of the y positions that read it
 *   gather       x[..., n, ...] f32|i32, ids[...] i32 -> y[x before axis, ids..., x after axis];
 *                an id in [-n, n) (negative: from the end), others fail the run
 *   gather_grad  dy, ids -> dx[shape]         dy's rows added back at their ids (repeats add up)
 *   cast         x f32|i32 -> y of dtype `to` f32 -> i32 truncates toward zero (NaN -> 0, saturating)
 *
 * slice, pad and gather are differentiable in their f32 data input; their gradients read no
 * data but gather's ids.
 */
#include "ops/cpu/kernels.h"

/* ---- slice -------------------------------------------------------------------------------- */

static const pbl__attr_spec slice_attrs[] = {
    { .name = "starts", .type = PBL_ATTR_INTS, .required = 1 },
    { .name = "steps", .type = PBL_ATTR_INTS, .required = 1 },
    { .name = "sizes", .type = PBL_ATTR_INTS, .required = 1 },
};

/* starts/steps/sizes fit x (shape): every taken position inside x */
static pbl_status slice_check(pbl__infer_ctx *c, const pbl_shape *x, const pbl__attr_val *st, const pbl__attr_val *sp,
                              const pbl__attr_val *sz)
{
    char sx[96];
    if (st->n_ints != x->ndim || sp->n_ints != x->ndim || sz->n_ints != x->ndim)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "x is %s; starts, steps and sizes need %d entries each (have %d, %d, %d)",
                               pbl_shape_str(x, sx, sizeof sx), (int)x->ndim, (int)st->n_ints, (int)sp->n_ints,
                               (int)sz->n_ints);
    for (int32_t d = 0; d < x->ndim; d++) {
        int64_t s = st->ints[d], p = sp->ints[d], k = sz->ints[d];
        if (p == 0 || k < 1 || s < 0 || s >= x->dim[d] || (k - 1) > (p > 0 ? (x->dim[d] - 1 - s) / p : s / -p))
            return pbl__infer_fail(c, PBL_ERR_ATTR, "x is %s; dim %d: start %lld, step %lld, size %lld leave it",
                                   pbl_shape_str(x, sx, sizeof sx), (int)d, (long long)s, (long long)p, (long long)k);
    }
    return PBL_OK;
}

static pbl_status slice_infer(pbl__infer_ctx *c)
{
    pbl_status s = slice_check(c, &c->in[0].shape, &c->attr[0], &c->attr[1], &c->attr[2]);
    if (s != PBL_OK)
        return s;
    c->out[0].dtype = c->in[0].dtype;
    c->out[0].shape = pbl_shape_make(c->attr[2].n_ints, c->attr[2].ints);
    return PBL_OK;
}

/* the attribute slot a as an INTS pbl_attr */
static pbl_attr ints_attr(const char *name, const pbl__attr_val *a) { return (pbl_attr)PBL_ATTR_INTS(name, a->ints, a->n_ints); }

static pbl_status slice_grad(pbl__grad_ctx *c)
{
    pbl_value_info xi;
    if (pbl_graph_value_info(c->g, c->x[0], &xi) != PBL_OK)
        return PBL_ERR_INVALID_ARG;
    pbl_attr at[] = { ints_attr("starts", &c->attr[0]), ints_attr("steps", &c->attr[1]),
                      PBL_ATTR_INTS("shape", xi.shape.dim, xi.shape.ndim) };
    c->dx[0] = pbl__grad_emit(c, "slice_grad", "grad", &c->dy[0], 1, at, 3);
    return c->status;
}

const pbl__op pbl__op_slice = {
    .name = "slice", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .attrs = slice_attrs, .n_attrs = 3,
    .infer = slice_infer, .grad = slice_grad,
    .cpu = pbl__cpu_slice,
};

static const pbl__attr_spec slice_grad_attrs[] = {
    { .name = "starts", .type = PBL_ATTR_INTS, .required = 1 },
    { .name = "steps", .type = PBL_ATTR_INTS, .required = 1 },
    { .name = "shape", .type = PBL_ATTR_INTS, .required = 1 },
};

static pbl_status slice_grad_infer(pbl__infer_ctx *c)
{
    pbl_shape x;
    pbl_status s = pbl__infer_check_f32(c, 0, "dy");
    if (s == PBL_OK)
        s = pbl__infer_shape_attr(c, &c->attr[2], &x);
    pbl__attr_val sizes = { .n_ints = c->in[0].shape.ndim };
    for (int32_t d = 0; d < c->in[0].shape.ndim; d++)
        sizes.ints[d] = c->in[0].shape.dim[d];
    if (s == PBL_OK)
        s = slice_check(c, &x, &c->attr[0], &c->attr[1], &sizes);
    if (s != PBL_OK)
        return s;
    c->out[0].dtype = PBL_F32;
    c->out[0].shape = x;
    return PBL_OK;
}

const pbl__op pbl__op_slice_grad = {
    .name = "slice_grad", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .attrs = slice_grad_attrs, .n_attrs = 3,
    .infer = slice_grad_infer,
    .cpu = pbl__cpu_slice_grad,
};

/* ---- pad ---------------------------------------------------------------------------------- */

static const pbl__attr_spec pad_attrs[] = {
    { .name = "pads", .type = PBL_ATTR_INTS, .required = 1 },
    { .name = "mode", .type = PBL_ATTR_INT, .i = 0 },
    { .name = "value", .type = PBL_ATTR_FLOAT, .f = 0.0 },
};

/* pads and mode fit x; y's shape into *y */
static pbl_status pad_check(pbl__infer_ctx *c, const pbl_shape *x, const pbl__attr_val *pads, int64_t mode, pbl_shape *y)
{
    char sx[96];
    int32_t r = x->ndim;
    if (mode < 0 || mode > 2)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "mode is %lld; it must be 0 (constant), 1 (reflect) or 2 (edge)", (long long)mode);
    if (pads->n_ints != 2 * r)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "x is %s; pads needs %d entries (before and after each dim), has %d",
                               pbl_shape_str(x, sx, sizeof sx), (int)(2 * r), (int)pads->n_ints);
    y->ndim = r;
    for (int32_t d = 0; d < r; d++) {
        int64_t n = x->dim[d], b = pads->ints[d], e = pads->ints[r + d];
        int bad = n + b + e < 1 || (mode != 0 && (b < 0 || e < 0)) || (mode == 1 && (b > n - 1 || e > n - 1));
        if (bad || b > ((int64_t)1 << 40) || e > ((int64_t)1 << 40))
            return pbl__infer_fail(c, PBL_ERR_ATTR, "x is %s; pads %lld and %lld of dim %d do not fit%s",
                                   pbl_shape_str(x, sx, sizeof sx), (long long)b, (long long)e, (int)d,
                                   mode == 1 ? " (reflect takes at most the dim - 1 on each side)" : "");
        y->dim[d] = n + b + e;
    }
    return PBL_OK;
}

static pbl_status pad_infer(pbl__infer_ctx *c)
{
    pbl_shape y;
    pbl_status s = pad_check(c, &c->in[0].shape, &c->attr[0], c->attr[1].i, &y);
    if (s != PBL_OK)
        return s;
    c->out[0].dtype = c->in[0].dtype;
    c->out[0].shape = y;
    return PBL_OK;
}

static pbl_status pad_grad(pbl__grad_ctx *c)
{
    pbl_value_info xi;
    if (pbl_graph_value_info(c->g, c->x[0], &xi) != PBL_OK)
        return PBL_ERR_INVALID_ARG;
    pbl_attr at[] = { ints_attr("pads", &c->attr[0]), PBL_ATTR_INT("mode", c->attr[1].i),
                      PBL_ATTR_INTS("shape", xi.shape.dim, xi.shape.ndim) };
    c->dx[0] = pbl__grad_emit(c, "pad_grad", "grad", &c->dy[0], 1, at, 3);
    return c->status;
}

const pbl__op pbl__op_pad = {
    .name = "pad", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .attrs = pad_attrs, .n_attrs = 3,
    .infer = pad_infer, .grad = pad_grad,
    .cpu = pbl__cpu_pad,
};

static const pbl__attr_spec pad_grad_attrs[] = {
    { .name = "pads", .type = PBL_ATTR_INTS, .required = 1 },
    { .name = "mode", .type = PBL_ATTR_INT, .i = 0 },
    { .name = "shape", .type = PBL_ATTR_INTS, .required = 1 },
};

static pbl_status pad_grad_infer(pbl__infer_ctx *c)
{
    pbl_shape x, y;
    pbl_status s = pbl__infer_check_f32(c, 0, "dy");
    if (s == PBL_OK)
        s = pbl__infer_shape_attr(c, &c->attr[2], &x);
    if (s == PBL_OK)
        s = pad_check(c, &x, &c->attr[0], c->attr[1].i, &y);
    if (s != PBL_OK)
        return s;
    if (!pbl_shape_equal(&y, &c->in[0].shape)) {
        char sy[96], sd[96];
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "dy is %s but the padded shape is %s",
                               pbl_shape_str(&c->in[0].shape, sd, sizeof sd), pbl_shape_str(&y, sy, sizeof sy));
    }
    c->out[0].dtype = PBL_F32;
    c->out[0].shape = x;
    return PBL_OK;
}

const pbl__op pbl__op_pad_grad = {
    .name = "pad_grad", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .attrs = pad_grad_attrs, .n_attrs = 3,
    .infer = pad_grad_infer,
    .cpu = pbl__cpu_pad_grad,
};

/* ---- gather ------------------------------------------------------------------------------- */

static const pbl__attr_spec gather_attrs[] = { { .name = "axis", .type = PBL_ATTR_INT, .i = 0 } };

/* y's shape from x's and the ids' (axis checked) */
static pbl_status gather_shape(pbl__infer_ctx *c, const pbl_shape *x, const pbl_shape *ids, int64_t axis, pbl_shape *y)
{
    char sx[96], si[96];
    if (c->in[1].dtype != PBL_I32)
        return pbl__infer_fail(c, PBL_ERR_DTYPE, "ids are %s, expected i32", pbl_dtype_name(c->in[1].dtype));
    if (axis < 0 || axis >= x->ndim)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "axis %lld is outside 0..%d (x is %s)", (long long)axis, (int)x->ndim - 1,
                               pbl_shape_str(x, sx, sizeof sx));
    if (x->ndim - 1 + ids->ndim > PBL_MAX_DIMS)
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "x is %s and ids are %s; y would have more than %d dims",
                               pbl_shape_str(x, sx, sizeof sx), pbl_shape_str(ids, si, sizeof si), PBL_MAX_DIMS);
    y->ndim = 0;
    for (int32_t d = 0; d < axis; d++)
        y->dim[y->ndim++] = x->dim[d];
    for (int32_t d = 0; d < ids->ndim; d++)
        y->dim[y->ndim++] = ids->dim[d];
    for (int32_t d = (int32_t)axis + 1; d < x->ndim; d++)
        y->dim[y->ndim++] = x->dim[d];
    return PBL_OK;
}

static pbl_status gather_infer(pbl__infer_ctx *c)
{
    pbl_shape y;
    pbl_status s = gather_shape(c, &c->in[0].shape, &c->in[1].shape, c->attr[0].i, &y);
    if (s != PBL_OK)
        return s;
    c->out[0].dtype = c->in[0].dtype;
    c->out[0].shape = y;
    return PBL_OK;
}

static pbl_status gather_grad(pbl__grad_ctx *c)
{
    if (!c->need[0])
        return c->status;
    pbl_value_info xi;
    if (pbl_graph_value_info(c->g, c->x[0], &xi) != PBL_OK)
        return PBL_ERR_INVALID_ARG;
    pbl_attr at[] = { PBL_ATTR_INT("axis", c->attr[0].i), PBL_ATTR_INTS("shape", xi.shape.dim, xi.shape.ndim) };
    c->dx[0] = pbl__grad_emit(c, "gather_grad", "grad", (pbl_value[]){ c->dy[0], c->x[1] }, 2, at, 2);
    return c->status;
}

const pbl__op pbl__op_gather = {
    .name = "gather", .n_in_min = 2, .n_in_max = 2, .n_out = 1,
    .attrs = gather_attrs, .n_attrs = 1,
    .infer = gather_infer, .grad = gather_grad,
    .grad_reads_in = 0x2, /* the ids */
    .cpu = pbl__cpu_gather,
};

static const pbl__attr_spec gather_grad_attrs[] = {
    { .name = "axis", .type = PBL_ATTR_INT, .i = 0 },
    { .name = "shape", .type = PBL_ATTR_INTS, .required = 1 },
};

static pbl_status gather_grad_infer(pbl__infer_ctx *c)
{
    pbl_shape x, y;
    pbl_status s = pbl__infer_check_f32(c, 0, "dy");
    if (s == PBL_OK)
        s = pbl__infer_shape_attr(c, &c->attr[1], &x);
    if (s == PBL_OK)
        s = gather_shape(c, &x, &c->in[1].shape, c->attr[0].i, &y);
    if (s != PBL_OK)
        return s;
    if (!pbl_shape_equal(&y, &c->in[0].shape)) {
        char sy[96], sd[96];
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "dy is %s but the gathered shape is %s",
                               pbl_shape_str(&c->in[0].shape, sd, sizeof sd), pbl_shape_str(&y, sy, sizeof sy));
    }
    c->out[0].dtype = PBL_F32;
    c->out[0].shape = x;
    return PBL_OK;
}

const pbl__op pbl__op_gather_grad = {
    .name = "gather_grad", .n_in_min = 2, .n_in_max = 2, .n_out = 1,
    .attrs = gather_grad_attrs, .n_attrs = 2,
    .infer = gather_grad_infer,
    .cpu = pbl__cpu_gather_grad,
};

/* ---- cast --------------------------------------------------------------------------------- */

static const pbl__attr_spec cast_attrs[] = { { .name = "to", .type = PBL_ATTR_INT, .required = 1 } };

static pbl_status cast_infer(pbl__infer_ctx *c)
{
    int64_t to = c->attr[0].i;
    if (to != PBL_F32 && to != PBL_I32)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "to is %lld; it must be %d (f32) or %d (i32)", (long long)to, (int)PBL_F32,
                               (int)PBL_I32);
    c->out[0].dtype = (pbl_dtype)to;
    c->out[0].shape = c->in[0].shape;
    return PBL_OK;
}

const pbl__op pbl__op_cast = {
    .name = "cast", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .attrs = cast_attrs, .n_attrs = 1,
    .infer = cast_infer,
    .cpu = pbl__cpu_cast,
};
