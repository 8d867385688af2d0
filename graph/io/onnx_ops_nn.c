/*
 * ONNX ops -> pebble ops, the neural-network layer family: convolution (Conv, ConvTranspose),
 * pooling (MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool) and normalisation
 * (BatchNormalization). Windows have 1 to 3 spatial dims (ops/shared/geometry.h); auto_pad is
 * worked out here into explicit pads. The converters moved here from graph/io/onnx_ops.c when
 * they were generalised past 2-D.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph/io/onnx_internal.h"
#include "pebble/builder.h"

/* BatchNormalization at inference: y = (x − mean)/√(var + ε)·scale + B. With constant
 * statistics it folds into y = x·a + b per channel (a = scale/√(var + ε), b = B − mean·a),
 * two element-wise ops that run on the CPU. */
static pbl_status cv_batch_norm(pbl__onnx_ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value x, y;
    double eps;
    int64_t training;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 5, 5)) != PBL_OK || (s = pbl__onnx_get(c, n->input[0], &x)) != PBL_OK ||
        (s = pbl__onnx_attr_float(c, "epsilon", 1e-5, &eps)) != PBL_OK || (s = pbl__onnx_attr_bool(c, "training_mode", 0, &training)) != PBL_OK)
        return s;
    int64_t spatial; /* opsets < 9: 0 means statistics per element, not per channel */
    if ((s = pbl__onnx_attr_bool(c, "spatial", 1, &spatial)) != PBL_OK)
        return s;
    if (!spatial)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "spatial 0 (statistics per element) is not supported%s", "");
    if (!(eps >= 0 && isfinite(eps)))
        NODE_FAIL(c, PBL_ERR_ATTR, "attribute epsilon is %g; it must be a finite number >= 0", eps);
    if (training)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "training_mode 1 is not supported (inference only)%s", "");
    for (size_t k = 1; k < n->n_output; k++)
        if (n->output[k] && n->output[k][0])
            NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "output %zu (running statistics) is not supported", k);
    pbl_shape sx = pbl__onnx_shape_of(c, x);
    if (sx.ndim < 2)
        NODE_FAIL(c, PBL_ERR_SHAPE, "X has rank %d; need [N, C, ...]", (int)sx.ndim);
    int64_t C = sx.dim[1];
    const float *p[4];
    for (int k = 0; k < 4; k++) {
        pbl__onnx_sym *ps = pbl__onnx_sym_find(c, n->input[k + 1]);
        if (!ps)
            NODE_FAIL(c, PBL_ERR_FORMAT, "input '%s' names no value", n->input[k + 1]);
        if (!ps->is_const || ps->data.is_int || !ps->data.f)
            NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "input '%s' must be a float constant (statistics are folded at load time)",
                      n->input[k + 1]);
        if (ps->data.numel != C)
            NODE_FAIL(c, PBL_ERR_SHAPE, "input '%s' has %lld elements but X has %lld channels", n->input[k + 1],
                      (long long)ps->data.numel, (long long)C);
        p[k] = ps->data.f;
    }
    /* a, b: [C, 1, ..., 1], broadcasting over [N, C, spatial...] */
    pbl_shape cs = { .ndim = sx.ndim - 1 };
    cs.dim[0] = C;
    for (int32_t k = 1; k < cs.ndim; k++)
        cs.dim[k] = 1;
    float *fa = pbl__mem_alloc(&c->w->mem, (size_t)C * sizeof *fa), *fb = pbl__mem_alloc(&c->w->mem, (size_t)C * sizeof *fb);
    if (!fa || !fb) {
        pbl__mem_free(&c->w->mem, fa, (size_t)C * sizeof *fa);
        pbl__mem_free(&c->w->mem, fb, (size_t)C * sizeof *fb);
        NODE_FAIL(c, PBL_ERR_NOMEM, "out of memory%s", "");
    }
    for (int64_t i = 0; i < C; i++) {
        double a = (double)p[0][i] / sqrt((double)p[3][i] + eps);
        fa[i] = (float)a;
        fb[i] = (float)((double)p[1][i] - (double)p[2][i] * a);
    }
    char base[400];
    pbl_value va, vb;
    snprintf(base, sizeof base, "%s/bn_scale", n->output[0]);
    if ((s = pbl__onnx_add_weight(c, base, cs, fa, &va)) != PBL_OK) {
        pbl__mem_free(&c->w->mem, fa, (size_t)C * sizeof *fa);
        pbl__mem_free(&c->w->mem, fb, (size_t)C * sizeof *fb);
        return s;
    }
    snprintf(base, sizeof base, "%s/bn_shift", n->output[0]);
    if ((s = pbl__onnx_add_weight(c, base, cs, fb, &vb)) != PBL_OK) {
        pbl__mem_free(&c->w->mem, fb, (size_t)C * sizeof *fb);
        return s;
    }
    if ((s = pbl__onnx_emit(c, "mul", (pbl_value[]){ x, va }, 2, NULL, 0, "scaled", &y)) != PBL_OK ||
        (s = pbl__onnx_emit(c, "add", (pbl_value[]){ y, vb }, 2, NULL, 0, NULL, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, n->output[0], y);
}

/* A window's attributes over nsp spatial dims: strides, dilations (1 each when absent), pads
 * (ONNX's [begins, ends] is pebble's order; 0 when absent); auto_pad SAME_UPPER / SAME_LOWER
 * makes pads that give out = ceil(in / stride), VALID none. kernel is the window's (dilated
 * by dil). Fills at[0..2] (stride, pad, dilation) over the caller's arrays. */
static pbl_status window_attrs(pbl__onnx_ctx *c, const pbl_shape *sx, int nsp, const int64_t *kernel, pbl_attr *at,
                               int64_t *stride, int64_t *pads, int64_t *dil)
{
    int32_t ns, np, nd;
    pbl_status s;
    const char *auto_pad;
    if ((s = pbl__onnx_attr_ints(c, "strides", stride, 3, &ns)) != PBL_OK || (s = pbl__onnx_attr_ints(c, "pads", pads, 6, &np)) != PBL_OK ||
        (s = pbl__onnx_attr_ints(c, "dilations", dil, 3, &nd)) != PBL_OK || (s = pbl__onnx_attr_string_is(c, "auto_pad", "NOTSET", &auto_pad)) != PBL_OK)
        return s;
    for (int k = 0; k < nsp; k++) {
        if (ns < 0)
            stride[k] = 1;
        if (nd < 0)
            dil[k] = 1;
    }
    for (int k = 0; np < 0 && k < 2 * nsp; k++)
        pads[k] = 0;
    if ((ns >= 0 && ns != nsp) || (nd >= 0 && nd != nsp) || (np >= 0 && np != 2 * nsp))
        NODE_FAIL(c, PBL_ERR_FORMAT, "strides, dilations must list %d ints and pads %d (X has %d spatial dims)", nsp,
                  2 * nsp, nsp);
    int same = strcmp(auto_pad, "SAME_UPPER") == 0 || strcmp(auto_pad, "SAME_LOWER") == 0;
    for (int k = 0; k < nsp; k++) {
        if (stride[k] < 1 || dil[k] < 1)
            NODE_FAIL(c, PBL_ERR_ATTR, "stride %lld and dilation %lld must be positive", (long long)stride[k],
                      (long long)dil[k]);
        if (same) {
            int64_t in = sx->dim[2 + k], out = (in + stride[k] - 1) / stride[k];
            int64_t total = (out - 1) * stride[k] + (kernel[k] - 1) * dil[k] + 1 - in;
            if (total < 0)
                total = 0;
            int64_t small = total / 2, big = total - small;
            int upper = strcmp(auto_pad, "SAME_UPPER") == 0;
            pads[k] = upper ? small : big;
            pads[k + nsp] = upper ? big : small;
        } else if (strcmp(auto_pad, "VALID") == 0) {
            pads[k] = pads[k + nsp] = 0;
        }
    }
    at[0] = PBL_ATTR_INTS("stride", stride, nsp);
    at[1] = PBL_ATTR_INTS("pad", pads, 2 * nsp);
    at[2] = PBL_ATTR_INTS("dilation", dil, nsp);
    return PBL_OK;
}

/* X's spatial dims (1..3), or a refusal naming the rank. */
static pbl_status spatial_dims(pbl__onnx_ctx *c, const pbl_shape *sx, int *nsp)
{
    *nsp = sx->ndim >= 3 && sx->ndim <= 5 ? (int)sx->ndim - 2 : 0;
    if (*nsp == 0)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "X has rank %d; pebble's windows take 1 to 3 spatial dims (rank 3 to 5)",
                  (int)sx->ndim);
    return PBL_OK;
}

static pbl_status cv_conv(pbl__onnx_ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value in[3], y;
    int64_t groups, stride[3], pads[6], dil[3];
    pbl_attr at[4];
    pbl_status s;
    int nsp;
    if ((s = pbl__onnx_need_inputs(c, 2, 3)) != PBL_OK || (s = pbl__onnx_get(c, n->input[0], &in[0])) != PBL_OK ||
        (s = pbl__onnx_get(c, n->input[1], &in[1])) != PBL_OK || (s = pbl__onnx_attr_int(c, "group", 1, &groups)) != PBL_OK)
        return s;
    int32_t k = 2;
    if (pbl__onnx_in_name(n, 2) && (s = pbl__onnx_get(c, n->input[2], &in[k++])) != PBL_OK)
        return s;
    pbl_shape sx = pbl__onnx_shape_of(c, in[0]), sw = pbl__onnx_shape_of(c, in[1]);
    if ((s = spatial_dims(c, &sx, &nsp)) != PBL_OK)
        return s;
    if (sw.ndim != sx.ndim)
        NODE_FAIL(c, PBL_ERR_SHAPE, "W has rank %d but X has rank %d", (int)sw.ndim, (int)sx.ndim);
    if ((s = window_attrs(c, &sx, nsp, &sw.dim[2], at, stride, pads, dil)) != PBL_OK)
        return s;
    at[3] = PBL_ATTR_INT("groups", groups);
    if ((s = pbl__onnx_emit(c, "conv2d", in, k, at, 4, NULL, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, n->output[0], y);
}

/* ConvTranspose is conv2d's input gradient: y = conv2d_grad_input(X, W) where W [C, M/group,
 * k...] is read as the weight of a conv from y [N, M, o...] to X. Output dims are
 * stride·(in − 1) + output_padding + dilation·(k − 1) + 1 − pads, or output_shape's (pads
 * then follow from auto_pad: SAME_UPPER puts the odd one at the end). Padding past the end
 * (output_padding, or output_shape larger than the padding-free result) only adds outputs no
 * window reaches: zeros before the bias. */
static pbl_status cv_conv_transpose(pbl__onnx_ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value x, w, y;
    int64_t groups, stride[3], pads[6], dil[3], opad[3], oshape[5];
    int32_t nop, nos;
    const char *auto_pad;
    pbl_attr at[5];
    pbl_status s;
    int nsp;
    if ((s = pbl__onnx_need_inputs(c, 2, 3)) != PBL_OK || (s = pbl__onnx_get(c, n->input[0], &x)) != PBL_OK ||
        (s = pbl__onnx_get(c, n->input[1], &w)) != PBL_OK || (s = pbl__onnx_attr_int(c, "group", 1, &groups)) != PBL_OK ||
        (s = pbl__onnx_attr_ints(c, "output_padding", opad, 3, &nop)) != PBL_OK ||
        (s = pbl__onnx_attr_ints(c, "output_shape", oshape, 5, &nos)) != PBL_OK ||
        (s = pbl__onnx_attr_string_is(c, "auto_pad", "NOTSET", &auto_pad)) != PBL_OK)
        return s;
    pbl_shape sx = pbl__onnx_shape_of(c, x), sw = pbl__onnx_shape_of(c, w);
    if ((s = spatial_dims(c, &sx, &nsp)) != PBL_OK)
        return s;
    if (sw.ndim != sx.ndim || groups < 1 || sw.dim[0] != sx.dim[1] || sx.dim[1] % groups != 0)
        NODE_FAIL(c, PBL_ERR_SHAPE, "W has rank %d and %lld input channels; need rank %d, X's %lld channels divisible by "
                  "group %lld", (int)sw.ndim, (long long)sw.dim[0], (int)sx.ndim, (long long)sx.dim[1], (long long)groups);
    if (nop >= 0 && nop != nsp)
        NODE_FAIL(c, PBL_ERR_FORMAT, "output_padding lists %d ints; need %d", (int)nop, nsp);
    if (nos >= 0 && nos != nsp && nos != nsp + 2)
        NODE_FAIL(c, PBL_ERR_FORMAT, "output_shape lists %d ints; need %d", (int)nos, nsp);
    /* window_attrs' SAME pads are conv's; ConvTranspose's come from the output size below */
    int same = strcmp(auto_pad, "SAME_UPPER") == 0 || strcmp(auto_pad, "SAME_LOWER") == 0;
    if ((s = window_attrs(c, &sx, nsp, &sw.dim[2], at, stride, pads, dil)) != PBL_OK)
        return s;
    pbl_shape sy = sx;
    sy.dim[1] = sw.dim[1] * groups;
    for (int k = 0; k < nsp; k++) {
        int64_t op = nop >= 0 ? opad[k] : 0, in = sx.dim[2 + k], ke = (sw.dim[2 + k] - 1) * dil[k] + 1;
        int64_t full = stride[k] * (in - 1) + op + ke; /* the output with no padding */
        if (op < 0)
            NODE_FAIL(c, PBL_ERR_ATTR, "output_padding %lld is negative", (long long)op);
        if (nos >= 0 || same) {
            int64_t out = nos >= 0 ? oshape[nos - nsp + k] : in * stride[k], total = full - out;
            int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2); /* floor(total / 2) */
            int upper = strcmp(auto_pad, "SAME_UPPER") == 0;
            pads[k] = upper ? half : total - half;
            pads[k + nsp] = total - pads[k];
        }
        int64_t out = full - pads[k] - pads[k + nsp];
        if (pads[k] < 0 || out < 1)
            NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "spatial dim %d: padding %lld at the start or an output of %lld is not "
                      "supported", k, (long long)pads[k], (long long)out);
        /* outputs past the last window's reach (output_padding, negative end pad) are zeros
         * conv2d_grad_input writes anyway: drop them from the pads */
        op = pads[k + nsp] < 0 ? op - pads[k + nsp] : op;
        if (pads[k + nsp] < 0)
            pads[k + nsp] = 0;
        if (op >= stride[k])
            NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "spatial dim %d: %lld extra outputs past the last window is not less "
                      "than the stride %lld", k, (long long)op, (long long)stride[k]);
        sy.dim[2 + k] = out;
    }
    at[3] = PBL_ATTR_INT("groups", groups);
    at[4] = PBL_ATTR_INTS("shape", sy.dim, sy.ndim);
    if ((s = pbl__onnx_emit(c, "conv2d_grad_input", (pbl_value[]){ x, w }, 2, at, 5, NULL, &y)) != PBL_OK)
        return s;
    if (pbl__onnx_in_name(n, 2)) {
        pbl_value b;
        if ((s = pbl__onnx_get(c, n->input[2], &b)) != PBL_OK)
            return s;
        pbl_shape bs = { .ndim = sy.ndim - 1 };
        bs.dim[0] = sy.dim[1];
        for (int32_t k = 1; k < bs.ndim; k++)
            bs.dim[k] = 1;
        pbl_shape sb = pbl__onnx_shape_of(c, b);
        if (pbl_shape_numel(&sb) != sy.dim[1])
            NODE_FAIL(c, PBL_ERR_SHAPE, "B must have %lld elements (the output channels)", (long long)sy.dim[1]);
        if ((s = pbl__onnx_to_shape(c, b, bs, "reshape", "bias", &b)) != PBL_OK ||
            (s = pbl__onnx_emit(c, "add", (pbl_value[]){ y, b }, 2, NULL, 0, "biased", &y)) != PBL_OK)
            return s;
    }
    return pbl__onnx_define(c, n->output[0], y);
}

static pbl_status cv_pool(pbl__onnx_ctx *c, const char *op)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value x, y;
    int64_t kernel[3], stride[3], pads[6], dil[3], ceil_mode, storage, count_pad;
    int32_t nk;
    pbl_attr at[6];
    pbl_status s;
    int nsp;
    if ((s = pbl__onnx_need_inputs(c, 1, 1)) != PBL_OK || (s = pbl__onnx_get(c, n->input[0], &x)) != PBL_OK ||
        (s = pbl__onnx_attr_ints(c, "kernel_shape", kernel, 3, &nk)) != PBL_OK || (s = pbl__onnx_attr_bool(c, "ceil_mode", 0, &ceil_mode)) != PBL_OK ||
        (s = pbl__onnx_attr_int(c, "storage_order", 0, &storage)) != PBL_OK ||
        (s = pbl__onnx_attr_bool(c, "count_include_pad", 0, &count_pad)) != PBL_OK)
        return s;
    /* storage_order only says how the Indices output counts, which pebble does not give */
    if (n->n_output > 1 && n->output[1] && n->output[1][0])
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "the Indices output is not supported%s", "");
    pbl_shape sx = pbl__onnx_shape_of(c, x);
    if ((s = spatial_dims(c, &sx, &nsp)) != PBL_OK)
        return s;
    if (nk != nsp)
        NODE_FAIL(c, nk < 0 ? PBL_ERR_FORMAT : PBL_ERR_SHAPE, "kernel_shape must list %d ints (X's spatial dims)", nsp);
    if ((s = window_attrs(c, &sx, nsp, kernel, at, stride, pads, dil)) != PBL_OK)
        return s;
    at[3] = PBL_ATTR_INTS("kernel", kernel, nsp);
    at[4] = PBL_ATTR_INT("ceil", ceil_mode);
    at[5] = PBL_ATTR_INT("count_pad", count_pad);
    if ((s = pbl__onnx_emit(c, op, &x, 1, at, 6, NULL, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, n->output[0], y);
}

static pbl_status cv_max_pool(pbl__onnx_ctx *c) { return cv_pool(c, "max_pool2d"); }
static pbl_status cv_avg_pool(pbl__onnx_ctx *c) { return cv_pool(c, "avg_pool2d"); }
static pbl_status cv_global_avg_pool(pbl__onnx_ctx *c) { return pbl__onnx_unary(c, "global_avg_pool"); }

/* GlobalMaxPool: max_pool2d with the window the whole of X's spatial dims. */
static pbl_status cv_global_max_pool(pbl__onnx_ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value x, y;
    pbl_status s;
    int nsp;
    if ((s = pbl__onnx_need_inputs(c, 1, 1)) != PBL_OK || (s = pbl__onnx_get(c, n->input[0], &x)) != PBL_OK)
        return s;
    pbl_shape sx = pbl__onnx_shape_of(c, x);
    if ((s = spatial_dims(c, &sx, &nsp)) != PBL_OK)
        return s;
    pbl_attr at = PBL_ATTR_INTS("kernel", &sx.dim[2], nsp);
    if ((s = pbl__onnx_emit(c, "max_pool2d", &x, 1, &at, 1, NULL, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, n->output[0], y);
}

/* The family's ops with the attributes pebble knows for each (what is listed and why:
 * pbl__onnx_op). */
#define WINDOW_ATTRS "strides pads dilations auto_pad"
static const pbl__onnx_op nn_ops[] = {
    { "BatchNormalization", cv_batch_norm, "epsilon momentum training_mode is_test spatial consumed_inputs" },
    { "Conv", cv_conv, WINDOW_ATTRS " group kernel_shape" },
    { "ConvTranspose", cv_conv_transpose, WINDOW_ATTRS " group kernel_shape output_padding output_shape" },
    { "MaxPool", cv_max_pool, WINDOW_ATTRS " kernel_shape ceil_mode storage_order" },
    { "AveragePool", cv_avg_pool, WINDOW_ATTRS " kernel_shape ceil_mode count_include_pad" },
    { "GlobalAveragePool", cv_global_avg_pool, "" },
    { "GlobalMaxPool", cv_global_max_pool, "" },
};

const pbl__onnx_op_table pbl__onnx_ops_nn = { nn_ops, sizeof nn_ops / sizeof nn_ops[0] };
