/*
 * ONNX ops -> pebble ops, the neural-network layer family: convolution (Conv, ConvTranspose),
 * pooling (MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool) and normalisation
 * (BatchNormalization, LayerNormalization, InstanceNormalization: the last two over pebble's
 * layer_norm of x reshaped to rows), and resizing (Resize, Upsample). Windows have 1 to 3 spatial dims (ops/shared/geometry.h); auto_pad is
 * worked out here into explicit pads. The converters moved here from graph/io/onnx_ops.c when
 * they were generalised past 2-D.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph/io/onnx_internal.h"
#include "pebble/builder.h"

/* BatchNormalization whose parameters are not all constants (graph inputs, computed values):
 * pebble's batch_norm in evaluation form, its training switch a runtime scalar left at 0, so
 * y = (x − mean)/√(var + ε)·scale + B with the given statistics. */
static pbl_status batch_norm_values(pbl__onnx_ctx *c, pbl_value x, double eps)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value in[6], outs[4];
    in[0] = x;
    pbl_shape sx = pbl__onnx_shape_of(c, x);
    pbl_status s;
    for (int k = 1; k < 5; k++) {
        if ((s = pbl__onnx_get(c, n->input[k], &in[k])) != PBL_OK)
            return s;
        pbl_shape ps = pbl__onnx_shape_of(c, in[k]);
        if (pbl_shape_numel(&ps) != sx.dim[1])
            NODE_FAIL(c, PBL_ERR_SHAPE, "input '%s' has %lld elements but X has %lld channels", n->input[k],
                      (long long)pbl_shape_numel(&ps), (long long)sx.dim[1]);
        if ((s = pbl__onnx_to_shape(c, in[k], pbl_shape_make(1, &sx.dim[1]), "reshape", "param", &in[k])) != PBL_OK)
            return s;
    }
    char name[400];
    snprintf(name, sizeof name, "%s/training", n->output[0]);
    if ((s = pbl_graph_add_scalar(c->g, name, 0.0, &in[5])) != PBL_OK)
        NODE_FAIL(c, s, "the training switch '%s': %s", name, pbl_graph_errmsg(c->g));
    pbl_attr at = PBL_ATTR_FLOAT("eps", eps);
    if ((s = pbl__onnx_emit_outs(c, "batch_norm", in, 6, &at, 1, NULL, outs)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, n->output[0], outs[0]);
}

/* BatchNormalization at inference: y = (x − mean)/√(var + ε)·scale + B. With constant
 * parameters (the usual export) it folds into y = x·a + b per channel (a = scale/√(var + ε),
 * b = B − mean·a), two element-wise ops; otherwise batch_norm_values. */
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
            return batch_norm_values(c, x, eps);
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

/* A constant float parameter of n elements all `value` (layer_norm's unit gamma, zero beta). */
static pbl_status const_fill(pbl__onnx_ctx *c, const char *what, int64_t n, float value, pbl_value *out)
{
    float *f = pbl__mem_alloc(&c->w->mem, (size_t)n * sizeof *f);
    if (!f)
        NODE_FAIL(c, PBL_ERR_NOMEM, "out of memory%s", "");
    for (int64_t i = 0; i < n; i++)
        f[i] = value;
    char base[400];
    snprintf(base, sizeof base, "%s/%s", c->node->output[0], what);
    pbl_status s = pbl__onnx_add_weight(c, base, pbl_shape_make(1, &n), f, out);
    if (s != PBL_OK)
        pbl__mem_free(&c->w->mem, f, (size_t)n * sizeof *f);
    return s;
}

/* Input i of the node (Scale or B) as layer_norm's [inner] parameter: broadcast to `norm`
 * (the normalised dims) when smaller, then flattened; absent: all `fill`. */
static pbl_status norm_param(pbl__onnx_ctx *c, size_t i, const char *what, const pbl_shape *norm, float fill,
                             pbl_value *out)
{
    int64_t inner = pbl_shape_numel(norm);
    pbl_status s;
    if (!pbl__onnx_in_name(c->node, i))
        return const_fill(c, what, inner, fill, out);
    if ((s = pbl__onnx_get(c, c->node->input[i], out)) != PBL_OK)
        return s;
    pbl_shape ps = pbl__onnx_shape_of(c, *out), bs;
    if (pbl_shape_numel(&ps) != inner) {
        if (!pbl__onnx_bcast_shape(norm, &ps, &bs) || !pbl_shape_equal(&bs, norm)) {
            char sp[96], sn[96];
            NODE_FAIL(c, PBL_ERR_SHAPE, "input '%s' is %s; it must broadcast to the normalised dims %s",
                      c->node->input[i], pbl_shape_str(&ps, sp, sizeof sp), pbl_shape_str(norm, sn, sizeof sn));
        }
        if ((s = pbl__onnx_to_shape(c, *out, *norm, "broadcast_to", what, out)) != PBL_OK)
            return s;
    }
    return pbl__onnx_to_shape(c, *out, pbl_shape_make(1, &inner), "reshape", what, out);
}

/* x normalised over its dims from `axis` on by pebble's layer_norm (which normalises the last
 * dim): x as [outer, inner], gamma and beta [inner]; y back in x's shape, mean and inv_std
 * [outer, 1]. */
static pbl_status layer_norm_rows(pbl__onnx_ctx *c, pbl_value x, int32_t axis, pbl_value gamma, pbl_value beta,
                                  double eps, pbl_value outs[4])
{
    pbl_shape sx = pbl__onnx_shape_of(c, x);
    int64_t rows[2] = { 1, 1 };
    for (int32_t d = 0; d < sx.ndim; d++)
        rows[d >= axis] *= sx.dim[d];
    pbl_value xr;
    pbl_attr at = PBL_ATTR_FLOAT("eps", eps);
    pbl_status s;
    if ((s = pbl__onnx_to_shape(c, x, pbl_shape_make(2, rows), "reshape", "rows", &xr)) != PBL_OK ||
        (s = pbl__onnx_emit_outs(c, "layer_norm", (pbl_value[]){ xr, gamma, beta }, 3, &at, 1, "normed", outs)) != PBL_OK)
        return s;
    return pbl__onnx_to_shape(c, outs[0], sx, "reshape", NULL, &outs[0]);
}

/* LayerNormalization (opset 17): normalised over the dims from axis on, Scale and B
 * broadcast to them; the optional Mean and InvStdDev outputs are layer_norm's statistics
 * shaped [d0, ..., d(axis-1), 1, ..., 1]. Statistics are computed in float (stash_type 1). */
static pbl_status cv_layer_norm(pbl__onnx_ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value x, gamma, beta, outs[4];
    int64_t axis, stash;
    double eps;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 2, 3)) != PBL_OK || (s = pbl__onnx_get(c, n->input[0], &x)) != PBL_OK ||
        (s = pbl__onnx_attr_int(c, "axis", -1, &axis)) != PBL_OK ||
        (s = pbl__onnx_attr_float(c, "epsilon", 1e-5, &eps)) != PBL_OK ||
        (s = pbl__onnx_attr_int(c, "stash_type", 1, &stash)) != PBL_OK)
        return s;
    if (stash != 1)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "stash_type %lld is not supported (pebble computes in float32: 1)",
                  (long long)stash);
    if (!(eps >= 0 && isfinite(eps)))
        NODE_FAIL(c, PBL_ERR_ATTR, "attribute epsilon is %g; it must be a finite number >= 0", eps);
    pbl_shape sx = pbl__onnx_shape_of(c, x);
    if (axis < -sx.ndim || axis >= sx.ndim || sx.ndim < 1)
        NODE_FAIL(c, PBL_ERR_ATTR, "axis %lld is outside X's rank %d", (long long)axis, (int)sx.ndim);
    int32_t ax = (int32_t)(axis < 0 ? axis + sx.ndim : axis);
    pbl_shape norm = pbl_shape_make(sx.ndim - ax, &sx.dim[ax]);
    if ((s = norm_param(c, 1, "scale", &norm, 1.0f, &gamma)) != PBL_OK ||
        (s = norm_param(c, 2, "bias", &norm, 0.0f, &beta)) != PBL_OK ||
        (s = layer_norm_rows(c, x, ax, gamma, beta, eps, outs)) != PBL_OK ||
        (s = pbl__onnx_define(c, n->output[0], outs[0])) != PBL_OK)
        return s;
    pbl_shape st = sx;
    for (int32_t d = ax; d < st.ndim; d++)
        st.dim[d] = 1;
    for (size_t k = 1; k < 3 && k < n->n_output; k++) {
        if (!n->output[k] || !n->output[k][0])
            continue;
        pbl_value v;
        if ((s = pbl__onnx_to_shape(c, outs[k], st, "reshape", k == 1 ? "mean" : "inv_std", &v)) != PBL_OK ||
            (s = pbl__onnx_define(c, n->output[k], v)) != PBL_OK)
            return s;
    }
    return PBL_OK;
}

/* InstanceNormalization: each (n, c) plane normalised (layer_norm over x as [N·C, S]), then
 * scale and B per channel. */
static pbl_status cv_instance_norm(pbl__onnx_ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value x, scale, bias, one, zero, outs[4], y;
    double eps;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 3, 3)) != PBL_OK || (s = pbl__onnx_get(c, n->input[0], &x)) != PBL_OK ||
        (s = pbl__onnx_get(c, n->input[1], &scale)) != PBL_OK || (s = pbl__onnx_get(c, n->input[2], &bias)) != PBL_OK ||
        (s = pbl__onnx_attr_float(c, "epsilon", 1e-5, &eps)) != PBL_OK)
        return s;
    if (!(eps >= 0 && isfinite(eps)))
        NODE_FAIL(c, PBL_ERR_ATTR, "attribute epsilon is %g; it must be a finite number >= 0", eps);
    pbl_shape sx = pbl__onnx_shape_of(c, x);
    if (sx.ndim < 3)
        NODE_FAIL(c, PBL_ERR_SHAPE, "X has rank %d; need [N, C, d1, ...]", (int)sx.ndim);
    int64_t NC = sx.dim[0] * sx.dim[1], S = NC > 0 ? pbl_shape_numel(&sx) / NC : 0;
    pbl_shape cs = { .ndim = sx.ndim - 1 }; /* [C, 1, ...]: broadcasts over [N, C, d...] */
    cs.dim[0] = sx.dim[1];
    for (int32_t k = 1; k < cs.ndim; k++)
        cs.dim[k] = 1;
    for (int k = 0; k < 2; k++) {
        pbl_shape ps = pbl__onnx_shape_of(c, k ? bias : scale);
        if (pbl_shape_numel(&ps) != sx.dim[1])
            NODE_FAIL(c, PBL_ERR_SHAPE, "input '%s' must have %lld elements (X's channels)", n->input[k + 1],
                      (long long)sx.dim[1]);
    }
    if ((s = const_fill(c, "unit_scale", S, 1.0f, &one)) != PBL_OK || (s = const_fill(c, "zero_bias", S, 0.0f, &zero)) != PBL_OK ||
        (s = layer_norm_rows(c, x, 2, one, zero, eps, outs)) != PBL_OK ||
        (s = pbl__onnx_to_shape(c, scale, cs, "reshape", "scale", &scale)) != PBL_OK ||
        (s = pbl__onnx_to_shape(c, bias, cs, "reshape", "bias", &bias)) != PBL_OK ||
        (s = pbl__onnx_emit(c, "mul", (pbl_value[]){ outs[0], scale }, 2, NULL, 0, "scaled", &y)) != PBL_OK ||
        (s = pbl__onnx_emit(c, "add", (pbl_value[]){ y, bias }, 2, NULL, 0, "shifted", &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, n->output[0], y);
}

/* String attribute `name` as its index in known[] (dflt when absent); a value not listed is
 * refused, naming it. */
static pbl_status attr_choice(pbl__onnx_ctx *c, const char *name, const char *const *known, int n_known, int dflt,
                              int *out)
{
    const Onnx__AttributeProto *a = pbl__onnx_attr_find(c->node, name);
    *out = dflt;
    if (!a)
        return PBL_OK;
    if (!a->has_s)
        NODE_FAIL(c, PBL_ERR_FORMAT, "attribute %s must be a string", name);
    for (int k = 0; k < n_known; k++)
        if (a->s.len == strlen(known[k]) && memcmp(a->s.data, known[k], a->s.len) == 0) {
            *out = k;
            return PBL_OK;
        }
    NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "attribute %s is '%.*s', which pebble does not support", name,
              (int)(a->s.len > 64 ? 64 : a->s.len), (const char *)a->s.data);
}

/* The float constant `name` (Resize's scales) into f, n its element count. */
static pbl_status const_floats(pbl__onnx_ctx *c, const char *name, const float **f, int64_t *n)
{
    pbl__onnx_sym *ps = pbl__onnx_sym_find(c, name);
    if (!ps)
        NODE_FAIL(c, PBL_ERR_FORMAT, "input '%s' names no value", name);
    if (!ps->is_const || ps->data.is_int || (!ps->data.f && ps->data.numel))
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "input '%s' must be a float constant (pebble's shapes are static)", name);
    *f = ps->data.f;
    *n = ps->data.numel;
    return PBL_OK;
}

/* Resize (opsets 10 to 18) and Upsample (7, 9): pebble's resize with y's dims worked out
 * here from the constant scales (floor(in·scale), the scale kept for the coordinates) or
 * sizes (the scale then out/in). Modes nearest and linear; cubic, tf_crop_and_resize,
 * antialias and keep_aspect_ratio_policy other than stretch are refused. Opset 10's Resize
 * and Upsample map coordinates asymmetrically and round down. */
static pbl_status cv_resize(pbl__onnx_ctx *c)
{
    static const char *const modes[] = { "nearest", "linear", "bilinear" };
    static const char *const coords[] = { "half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                          "tf_half_pixel_for_nearest", "tf_crop_and_resize", "half_pixel_symmetric",
                                          "tf_half_pixel_for_nn" /* the name before opset 13 */ };
    static const char *const roundings[] = { "round_prefer_floor", "round_prefer_ceil", "floor", "ceil" };
    static const char *const policies[] = { "stretch", "not_larger", "not_smaller" };
    const Onnx__NodeProto *n = c->node;
    int upsample = strcmp(n->op_type, "Upsample") == 0, legacy = upsample || c->opset < 11;
    /* modes, coords[0..4] and roundings are numbered as pebble's resize numbers them (its
     * attributes mode, coord and nearest: ops/pool.c) */
    int mode, coord = legacy ? 3 /* asymmetric */ : 0, nearest = legacy ? 2 /* floor */ : 0, policy;
    int64_t antialias, axes[PBL_MAX_DIMS];
    int32_t n_axes;
    pbl_value x, y;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 1, 4)) != PBL_OK || (s = pbl__onnx_get(c, n->input[0], &x)) != PBL_OK ||
        (s = attr_choice(c, "mode", modes, 3, 0, &mode)) != PBL_OK ||
        (s = attr_choice(c, "coordinate_transformation_mode", coords, 8, coord, &coord)) != PBL_OK ||
        (s = attr_choice(c, "nearest_mode", roundings, 4, nearest, &nearest)) != PBL_OK ||
        (s = attr_choice(c, "keep_aspect_ratio_policy", policies, 3, 0, &policy)) != PBL_OK ||
        (s = pbl__onnx_attr_int(c, "antialias", 0, &antialias)) != PBL_OK ||
        (s = pbl__onnx_attr_ints(c, "axes", axes, PBL_MAX_DIMS, &n_axes)) != PBL_OK)
        return s;
    if (mode == 2) /* Upsample-7's name for linear over the last two dims */
        mode = 1;
    if (coord == 7)
        coord = 4;
    if (coord > 4)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "coordinate_transformation_mode %s is not supported", coords[coord]);
    if (antialias)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "antialias 1 is not supported%s", "");
    pbl_shape sx = pbl__onnx_shape_of(c, x), sy = sx;
    int32_t r = sx.ndim;
    /* the listed axes (default every dim) */
    if (n_axes < 0)
        for (n_axes = 0; n_axes < r; n_axes++)
            axes[n_axes] = n_axes;
    for (int32_t k = 0; k < n_axes; k++) {
        if (axes[k] < -r || axes[k] >= r)
            NODE_FAIL(c, PBL_ERR_ATTR, "axis %lld is outside X's rank %d", (long long)axes[k], (int)r);
        axes[k] = axes[k] < 0 ? axes[k] + r : axes[k];
    }
    double scale[PBL_MAX_DIMS];
    for (int32_t d = 0; d < r; d++)
        scale[d] = 1.0;
    /* where the scales and sizes are: Upsample-7 an attribute, Upsample-9 and Resize-10
     * input 1, later Resize inputs 2 and 3 (input 1 is roi, used only by tf_crop_and_resize) */
    const char *scales_in = legacy ? pbl__onnx_in_name(n, 1) : pbl__onnx_in_name(n, 2);
    const char *sizes_in = legacy ? NULL : pbl__onnx_in_name(n, 3);
    const float *fs = NULL;
    int64_t nf = 0;
    const Onnx__AttributeProto *sa = pbl__onnx_attr_find(n, "scales");
    float attr_scales[PBL_MAX_DIMS];
    if (sa) {
        if (sa->n_floats > PBL_MAX_DIMS)
            NODE_FAIL(c, PBL_ERR_FORMAT, "attribute scales lists %zu values; X has rank %d", sa->n_floats, (int)r);
        for (size_t k = 0; k < sa->n_floats; k++)
            attr_scales[k] = sa->floats[k];
        fs = attr_scales;
        nf = (int64_t)sa->n_floats;
    } else if (scales_in && (s = const_floats(c, scales_in, &fs, &nf)) != PBL_OK) {
        return s;
    }
    if (nf > 0) {
        if (nf != n_axes)
            NODE_FAIL(c, PBL_ERR_SHAPE, "scales lists %lld values for %d axes", (long long)nf, (int)n_axes);
        for (int32_t k = 0; k < n_axes; k++) {
            double sc = fs[k];
            if (!(sc > 0) || !isfinite(sc))
                NODE_FAIL(c, PBL_ERR_ATTR, "scale %g is not a finite number > 0", sc);
            int32_t d = (int32_t)axes[k];
            scale[d] = sc;
            sy.dim[d] = (int64_t)floor((double)sx.dim[d] * sc);
        }
    } else if (sizes_in) {
        const int64_t *sz;
        int64_t ns;
        if ((s = pbl__onnx_get_ints(c, sizes_in, &sz, &ns)) != PBL_OK)
            return s;
        if (ns != n_axes)
            NODE_FAIL(c, PBL_ERR_SHAPE, "sizes lists %lld values for %d axes", (long long)ns, (int)n_axes);
        if (policy != 0)
            NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "keep_aspect_ratio_policy %s is not supported", policies[policy]);
        for (int32_t k = 0; k < n_axes; k++) {
            int32_t d = (int32_t)axes[k];
            if (sz[k] < 1 || sx.dim[d] < 1)
                NODE_FAIL(c, PBL_ERR_SHAPE, "size %lld of dim %d is not positive", (long long)sz[k], (int)d);
            sy.dim[d] = sz[k];
            scale[d] = (double)sz[k] / (double)sx.dim[d];
        }
    } else {
        NODE_FAIL(c, PBL_ERR_FORMAT, "neither scales nor sizes is given%s", "");
    }
    for (int32_t d = 0; d < r; d++)
        if (sy.dim[d] < 1)
            NODE_FAIL(c, PBL_ERR_SHAPE, "dim %d resizes to %lld elements", (int)d, (long long)sy.dim[d]);
    int64_t bits[PBL_MAX_DIMS];
    for (int32_t d = 0; d < r; d++) {
        uint64_t u;
        memcpy(&u, &scale[d], sizeof u);
        bits[d] = (int64_t)u;
    }
    pbl_attr at[5] = { PBL_ATTR_INTS("shape", sy.dim, r), PBL_ATTR_INT("mode", mode), PBL_ATTR_INT("coord", coord),
                       PBL_ATTR_INT("nearest", nearest), PBL_ATTR_INTS("scale_bits", bits, r) };
    if ((s = pbl__onnx_emit(c, "resize", &x, 1, at, 5, NULL, &y)) != PBL_OK)
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
    { "LayerNormalization", cv_layer_norm, "axis epsilon stash_type" },
    { "InstanceNormalization", cv_instance_norm, "epsilon" },
    /* cubic_coeff_a, exclude_outside: cubic mode only; extrapolation_value: tf_crop_and_resize only */
    { "Resize", cv_resize, "mode coordinate_transformation_mode nearest_mode cubic_coeff_a exclude_outside "
                           "extrapolation_value antialias axes keep_aspect_ratio_policy" },
    { "Upsample", cv_resize, "mode scales" },
};

const pbl__onnx_op_table pbl__onnx_ops_nn = { nn_ops, sizeof nn_ops / sizeof nn_ops[0] };
