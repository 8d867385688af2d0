/*
 * conv2d over NCW, NCHW or NCDHW (despite the name, 1 to 3 spatial dims: ONNX Conv) and its
 * gradient ops (ops/cpu/conv.c: im2col + sgemm, col2im for the input gradient).
 *
 *   conv2d              x[N,C,d...] w[Cout,C/groups,k...] b?[Cout]  ->  y[N,Cout,o...]
 *   conv2d_grad_input   dy[N,Cout,o...] w                           ->  dx (shape: x's shape;
 *                       ONNX ConvTranspose, so it has a gradient rule too)
 *   conv2d_grad_weight  dy x                                        ->  dw (shape: w's shape)
 *
 * Attributes stride, pad, dilation (see ops/shared/geometry.h) and groups (1; depthwise is groups = C).
 * The bias gradient is sum(dy) over every axis but 1. The gradient ops take the shape they produce
 * as an attribute rather than the tensor itself, so dx does not keep x alive (nor dw w): dx
 * reads w's data, dw reads x's, the bias gradient reads neither.
 */
#include "ops/cpu/kernels.h"
#include "ops/shared/geometry.h"

enum { CV_STRIDE, CV_PAD, CV_DILATION, CV_GROUPS, CV_SHAPE };
static const pbl__attr_spec conv_attrs[] = {
    { .name = "stride", .type = PBL_ATTR_INTS },
    { .name = "pad", .type = PBL_ATTR_INTS },
    { .name = "dilation", .type = PBL_ATTR_INTS },
    { .name = "groups", .type = PBL_ATTR_INT, .i = 1 },
    { .name = "shape", .type = PBL_ATTR_INTS, .required = 1 }, /* the gradient ops only */
};

/* y = conv2d's output shape for input shape x and weight shape w, checking that they fit. */
static pbl_status conv_shape(pbl__infer_ctx *c, const pbl_shape *x, const pbl_shape *w, pbl_shape *y)
{
    char sx[96], sw[96];
    int64_t groups = c->attr[CV_GROUPS].i;
    if (groups < 1)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "groups is %lld; it must be at least 1", (long long)groups);
    int nsp = pbl__window_nsp(x->ndim);
    if (nsp == 0 || w->ndim != x->ndim)
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "x is %s and w is %s; need x [N, C, d...] and w [Cout, C/groups, k...] "
                               "with 1 to 3 spatial dims d, as many in k",
                               pbl_shape_str(x, sx, sizeof sx), pbl_shape_str(w, sw, sizeof sw));
    if (x->dim[1] % groups != 0 || w->dim[0] % groups != 0 || w->dim[1] * groups != x->dim[1])
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "x is %s and w is %s; with groups %lld need C and Cout divisible by "
                               "%lld and w [Cout, %lld/%lld, k...]",
                               pbl_shape_str(x, sx, sizeof sx), pbl_shape_str(w, sw, sizeof sw), (long long)groups,
                               (long long)groups, (long long)x->dim[1], (long long)groups);
    pbl__window win;
    pbl_status s = pbl__window_parse(c, nsp, NULL, &c->attr[CV_STRIDE], &c->attr[CV_PAD], &c->attr[CV_DILATION], &win);
    if (s != PBL_OK)
        return s;
    pbl__window_kernel_of(&win, w);
    *y = pbl__window_shape(&win, x, w->dim[0]);
    for (int32_t d = 2; d < y->ndim; d++)
        if (y->dim[d] < 1)
            return pbl__infer_fail(c, PBL_ERR_SHAPE, "x is %s and w is %s; the padded input is smaller than the dilated "
                                   "kernel", pbl_shape_str(x, sx, sizeof sx), pbl_shape_str(w, sw, sizeof sw));
    return PBL_OK;
}

static pbl_status conv_infer(pbl__infer_ctx *c)
{
    static const char *const what[] = { "x", "w", "b" };
    for (int32_t i = 0; i < c->n_in; i++) {
        pbl_status s = pbl__infer_check_f32(c, i, what[i]);
        if (s != PBL_OK)
            return s;
    }
    pbl_shape y;
    pbl_status s = conv_shape(c, &c->in[0].shape, &c->in[1].shape, &y);
    if (s != PBL_OK)
        return s;
    if (c->n_in == 3) {
        const pbl_shape *b = &c->in[2].shape, *w = &c->in[1].shape;
        if (b->ndim != 1 || b->dim[0] != w->dim[0]) {
            char sb[96], sw[96];
            return pbl__infer_fail(c, PBL_ERR_SHAPE, "b is %s but w is %s; need b [Cout]",
                                   pbl_shape_str(b, sb, sizeof sb), pbl_shape_str(w, sw, sizeof sw));
        }
    }
    c->out[0].dtype = PBL_F32;
    c->out[0].shape = y;
    return PBL_OK;
}

/* The gradient ops: dy (input 0) must be what conv2d makes of x and w, one of which is the
 * `shape` attribute (the output) and the other input 1. */
static pbl_status conv_grad_infer(pbl__infer_ctx *c, int makes_input)
{
    pbl_status s = pbl__infer_check_f32(c, 0, "dy");
    if (s == PBL_OK)
        s = pbl__infer_check_f32(c, 1, makes_input ? "w" : "x");
    pbl_shape made;
    if (s == PBL_OK)
        s = pbl__infer_shape_attr(c, &c->attr[CV_SHAPE], &made);
    if (s != PBL_OK)
        return s;
    const pbl_shape *x = makes_input ? &made : &c->in[1].shape, *w = makes_input ? &c->in[1].shape : &made;
    pbl_shape y;
    if ((s = conv_shape(c, x, w, &y)) != PBL_OK)
        return s;
    if (!pbl_shape_equal(&y, &c->in[0].shape)) {
        char sd[96], sx[96], sw[96], sy[96];
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "dy is %s but conv2d of x %s with w %s gives %s",
                               pbl_shape_str(&c->in[0].shape, sd, sizeof sd), pbl_shape_str(x, sx, sizeof sx),
                               pbl_shape_str(w, sw, sizeof sw), pbl_shape_str(&y, sy, sizeof sy));
    }
    c->out[0].dtype = PBL_F32;
    c->out[0].shape = made;
    return PBL_OK;
}

static pbl_status conv_grad_input_infer(pbl__infer_ctx *c) { return conv_grad_infer(c, 1); }
static pbl_status conv_grad_weight_infer(pbl__infer_ctx *c) { return conv_grad_infer(c, 0); }

/* One gradient op: the forward node's window attributes (those it was given) plus the shape
 * the gradient op makes. */
static pbl_value conv_grad_emit_on(pbl__grad_ctx *c, const char *op, const char *suffix, pbl_value in0,
                                   pbl_value in1, pbl_value like)
{
    pbl_value_info li;
    if (pbl_graph_value_info(c->g, like, &li) != PBL_OK)
        return PBL_NONE;
    pbl_attr at[5];
    int32_t n = 0;
    for (int k = CV_STRIDE; k <= CV_DILATION; k++)
        if (c->attr[k].n_ints > 0)
            at[n++] = PBL_ATTR_INTS(conv_attrs[k].name, c->attr[k].ints, c->attr[k].n_ints);
    at[n++] = PBL_ATTR_INT("groups", c->attr[CV_GROUPS].i);
    at[n++] = PBL_ATTR_INTS("shape", li.shape.dim, li.shape.ndim);
    return pbl__grad_emit(c, op, suffix, (pbl_value[]){ in0, in1 }, 2, at, n);
}

static pbl_value conv_grad_emit(pbl__grad_ctx *c, const char *op, const char *suffix, pbl_value other,
                                pbl_value like)
{
    return conv_grad_emit_on(c, op, suffix, c->dy[0], other, like);
}

static pbl_status conv_grad(pbl__grad_ctx *c)
{
    if (c->need[0])
        c->dx[0] = conv_grad_emit(c, "conv2d_grad_input", "grad_input", c->x[1], c->x[0]);
    if (c->need[1])
        c->dx[1] = conv_grad_emit(c, "conv2d_grad_weight", "grad_weight", c->x[0], c->x[1]);
    if (c->n_in == 3 && c->need[2]) {
        pbl_value_info yi;
        if (pbl_graph_value_info(c->g, c->dy[0], &yi) != PBL_OK)
            return PBL_ERR_INVALID_ARG;
        int64_t axes[PBL_MAX_DIMS];
        int32_t n = 0;
        for (int32_t d = 0; d < yi.shape.ndim; d++)
            if (d != 1)
                axes[n++] = d;
        c->dx[2] = pbl__grad_emit(c, "sum", "grad_bias", &c->dy[0], 1, (pbl_attr[]){ PBL_ATTR_INTS("axes", axes, n) }, 1);
    }
    return c->status;
}

/* conv2d_grad_input as a forward op (ONNX ConvTranspose): dx = conv2d_grad_input(dy, w) is
 * linear in each input, so d(dy) = conv2d(g, w) and dw = conv2d_grad_weight(dy, g) for the
 * incoming gradient g (shaped like dx). */
static pbl_status conv_grad_input_grad(pbl__grad_ctx *c)
{
    pbl_attr at[5];
    int32_t n = 0;
    for (int k = CV_STRIDE; k <= CV_DILATION; k++)
        if (c->attr[k].n_ints > 0)
            at[n++] = PBL_ATTR_INTS(conv_attrs[k].name, c->attr[k].ints, c->attr[k].n_ints);
    at[n++] = PBL_ATTR_INT("groups", c->attr[CV_GROUPS].i);
    if (c->need[0])
        c->dx[0] = pbl__grad_emit(c, "conv2d", "grad_dy", (pbl_value[]){ c->dy[0], c->x[1] }, 2, at, n);
    if (c->need[1])
        c->dx[1] = conv_grad_emit_on(c, "conv2d_grad_weight", "grad_w", c->x[0], c->dy[0], c->x[1]);
    return c->status;
}

/* Every element of the big tensor t meets every weight of its output channel once, a
 * multiply-add: 2·|t|·|w|/Cout, where t is y for conv2d and dy (input 0) for the gradients,
 * w the weight (input 1 of conv2d and conv2d_grad_input, the output of conv2d_grad_weight). */
static void conv_cost_of(const pbl__meta *t, const pbl__meta *w, pbl__cost *out)
{
    int64_t cout = w->shape.ndim >= 1 && w->shape.dim[0] > 0 ? w->shape.dim[0] : 1;
    out->flops = 2 * pbl__cost_numel(t) * (pbl__cost_numel(w) / cout);
}

static void conv_cost(const pbl__cost_ctx *c, pbl__cost *out) { conv_cost_of(&c->out[0], &c->in[1], out); }
static void conv_grad_input_cost(const pbl__cost_ctx *c, pbl__cost *out) { conv_cost_of(&c->in[0], &c->in[1], out); }
static void conv_grad_weight_cost(const pbl__cost_ctx *c, pbl__cost *out) { conv_cost_of(&c->in[0], &c->out[0], out); }

const pbl__op pbl__op_conv2d = {
    .name = "conv2d", .n_in_min = 2, .n_in_max = 3, .n_out = 1,
    .attrs = conv_attrs, .n_attrs = 4,
    .infer = conv_infer, .grad = conv_grad,
    .grad_reads_in = 0x3, /* w for dx, x for dw; b's data is never read */
    .cost = conv_cost,
    .cpu = pbl__cpu_conv2d,
    .cpu_scratch = pbl__cpu_conv2d_scratch,
};

const pbl__op pbl__op_conv2d_grad_input = {
    .name = "conv2d_grad_input", .n_in_min = 2, .n_in_max = 2, .n_out = 1,
    .attrs = conv_attrs, .n_attrs = 5,
    .infer = conv_grad_input_infer, .grad = conv_grad_input_grad,
    .grad_reads_in = 0x3, /* w for d(dy), dy for dw */
    .cost = conv_grad_input_cost,
    .cpu = pbl__cpu_conv2d_grad_input,
    .cpu_scratch = pbl__cpu_conv2d_grad_input_scratch,
};

const pbl__op pbl__op_conv2d_grad_weight = {
    .name = "conv2d_grad_weight", .n_in_min = 2, .n_in_max = 2, .n_out = 1,
    .attrs = conv_attrs, .n_attrs = 5,
    .infer = conv_grad_weight_infer,
    .cost = conv_grad_weight_cost,
    .cpu = pbl__cpu_conv2d_grad_weight,
    .cpu_scratch = pbl__cpu_conv2d_grad_weight_scratch,
};
