/*
 * ONNX ops -> pebble ops, the core family (arithmetic, products, activations, shapes; the
 * neural-network layers are graph/io/onnx_ops_nn.c, reductions, softmax and the losses
 * graph/io/onnx_ops_reduce.c), the list of every family's table and the
 * lookup through them. A converter reads the current node (c->node) through the helpers of
 * graph/io/onnx_node.c, emits pebble nodes and defines the node's outputs; reading the model
 * itself is graph/io/onnx_load.c.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph/base/cpu.h"
#include "graph/io/onnx_internal.h"
#include "pebble/builder.h"

/* ---- converters: one per ONNX op of the core family ------------------------------------------------------------- */


static pbl_status cv_binary(pbl__onnx_ctx *c, const char *op, int commutative)
{
    pbl_value a, b, y;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 2, 2)) != PBL_OK || (s = pbl__onnx_get(c, c->node->input[0], &a)) != PBL_OK ||
        (s = pbl__onnx_get(c, c->node->input[1], &b)) != PBL_OK || (s = pbl__onnx_binary(c, op, commutative, a, b, NULL, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, c->node->output[0], y);
}

static pbl_status cv_add(pbl__onnx_ctx *c) { return cv_binary(c, "add", 1); }
static pbl_status cv_sub(pbl__onnx_ctx *c) { return cv_binary(c, "sub", 0); }
static pbl_status cv_mul(pbl__onnx_ctx *c) { return cv_binary(c, "mul", 1); }
static pbl_status cv_div(pbl__onnx_ctx *c) { return cv_binary(c, "div", 0); }


static pbl_status cv_relu(pbl__onnx_ctx *c) { return pbl__onnx_unary(c, "relu"); }
static pbl_status cv_sigmoid(pbl__onnx_ctx *c) { return pbl__onnx_unary(c, "sigmoid"); }
static pbl_status cv_tanh(pbl__onnx_ctx *c) { return pbl__onnx_unary(c, "tanh"); }

/* Identity, and Dropout at inference: the output is the input's value (no node). */
static pbl_status cv_identity(pbl__onnx_ctx *c)
{
    pbl_value x;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 1, 1)) != PBL_OK || (s = pbl__onnx_get(c, c->node->input[0], &x)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, c->node->output[0], x);
}

static pbl_status cv_dropout(pbl__onnx_ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value x;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 1, 3)) != PBL_OK || (s = pbl__onnx_get(c, n->input[0], &x)) != PBL_OK)
        return s;
    int64_t is_test = 1;
    double ratio;
    if ((s = pbl__onnx_attr_bool(c, "is_test", 1, &is_test)) != PBL_OK || /* opset < 7 */
        (s = pbl__onnx_attr_float(c, "ratio", 0.5, &ratio)) != PBL_OK)     /* opset < 12; then an input */
        return s;
    /* inference ignores the ratio, but one outside [0, 1) says the model is not what it claims */
    if (!(ratio >= 0 && ratio < 1))
        NODE_FAIL(c, PBL_ERR_ATTR, "attribute ratio is %g; it must be in [0, 1)", ratio);
    const char *rn = pbl__onnx_in_name(n, 1); /* opset >= 12: the ratio as an input */
    pbl__onnx_sym *rs = rn ? pbl__onnx_sym_find(c, rn) : NULL;
    if (rs && rs->is_const && !rs->data.is_int && rs->data.f && rs->data.numel == 1 &&
        !(rs->data.f[0] >= 0 && rs->data.f[0] < 1))
        NODE_FAIL(c, PBL_ERR_ATTR, "input ratio '%s' is %g; it must be in [0, 1)", rn, (double)rs->data.f[0]);
    const char *tm = pbl__onnx_in_name(n, 2);
    if (tm) {
        const int64_t *v;
        int64_t k;
        pbl__onnx_sym *ts = pbl__onnx_sym_find(c, tm);
        if (!ts || !ts->is_const)
            NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "training_mode '%s' must be a constant false (pebble loads models for inference)", tm);
        if (ts->data.is_int) {
            if ((s = pbl__onnx_get_ints(c, tm, &v, &k)) != PBL_OK)
                return s;
            if (k != 1 || v[0] != 0)
                NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "training_mode '%s' is true; pebble runs Dropout for inference", tm);
        }
    }
    if ((s = pbl__onnx_define(c, n->output[0], x)) != PBL_OK)
        return s;
    if (n->n_output > 1 && n->output[1] && n->output[1][0]) {
        pbl__onnx_sym *m;
        if ((s = pbl__onnx_sym_add(c, n->output[1], &m)) != PBL_OK)
            return s;
        m->unsupported = "Dropout's mask output (a bool tensor) is not supported";
    }
    return PBL_OK;
}

/* w[N, K], a float constant (the caller checked), as fully_connected_packed's panels
 * wp[ceil(N/16), K, 16]: a new parameter "<w>/packed". */
static pbl_status pack_weights(pbl__onnx_ctx *c, const char *name, pbl_value *out)
{
    pbl__onnx_sym *s = pbl__onnx_sym_find(c, name);
    int64_t N = s->data.shape.dim[0], K = s->data.shape.dim[1], NB = (N + 15) / 16;
    if (NB > PBL__ONNX_MAX_NUMEL / (16 * K))
        NODE_FAIL(c, PBL_ERR_FORMAT, "'%s' is absurdly large", name);
    size_t bytes = (size_t)(NB * K * 16) * sizeof(float);
    float *wp = pbl__mem_calloc(&c->w->mem, bytes);
    if (!wp)
        NODE_FAIL(c, PBL_ERR_NOMEM, "out of memory packing '%s'", name);
    const float *w = s->data.f;
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++)
            wp[((n / 16) * K + k) * 16 + n % 16] = w[n * K + k];
    char base[400];
    snprintf(base, sizeof base, "%s/packed", name);
    pbl_status st = pbl__onnx_add_weight(c, base, pbl_shape_make(3, (int64_t[]){ NB, K, 16 }), wp, out);
    if (st != PBL_OK)
        pbl__mem_free(&c->w->mem, wp, bytes);
    return st;
}

/* Whether packing w beats fully_connected's sgemm for an x of M rows on the kernel level in
 * use (graph/base/cpu.h). pack_weights 2: always, 0: never, 1: where it won when measured
 * (bench/onnx_vs_ort.sh's MLP, 784-512-512-10, 1 thread, OpenBLAS 0.3.21 on the same level):
 * with AVX-512 and AVX2 at every batch (1: 0.024 vs 0.036 ms and 0.026 vs 0.12 ms; 256: 1.31 vs
 * 1.40 and 2.45 vs 2.54 ms), at the SSE2 baseline only for small batches (1: 0.028 vs
 * 0.24 ms; 64: 2.4 vs 2.0 ms: OpenBLAS's SSE kernel beats the packed one there). */
static int pack_wins(pbl__onnx_ctx *c, pbl_value x)
{
    if (c->opt->pack_weights != 1)
        return c->opt->pack_weights != 0;
    pbl_shape sx = pbl__onnx_shape_of(c, x);
    return pbl__cpu_level() != PBL__CPU_BASELINE || (sx.ndim == 2 && sx.dim[0] < 16);
}

static pbl_status cv_gemm(pbl__onnx_ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value a, b, cc = PBL_NONE, y;
    int64_t ta, tb;
    double alpha, beta;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 2, 3)) != PBL_OK || (s = pbl__onnx_get(c, n->input[0], &a)) != PBL_OK ||
        (s = pbl__onnx_attr_bool(c, "transA", 0, &ta)) != PBL_OK || (s = pbl__onnx_attr_bool(c, "transB", 0, &tb)) != PBL_OK ||
        (s = pbl__onnx_attr_float(c, "alpha", 1.0, &alpha)) != PBL_OK || (s = pbl__onnx_attr_float(c, "beta", 1.0, &beta)) != PBL_OK)
        return s;
    if (pbl__onnx_in_name(n, 2) && (s = pbl__onnx_get(c, n->input[2], &cc)) != PBL_OK)
        return s;
    pbl_shape sc = cc != PBL_NONE ? pbl__onnx_shape_of(c, cc) : (pbl_shape){ 0 };
    /* x·wᵀ + b with w a constant not yet in the graph: fully_connected_packed on w repacked
     * once, here (w itself never becomes a parameter unless another node reads it) */
    pbl__onnx_sym *ws = pbl__onnx_sym_find(c, n->input[1]);
    if (pack_wins(c, a) && !ta && tb && alpha == 1.0 && ws && ws->is_const && !ws->data.is_int && ws->data.f &&
        ws->v == PBL_NONE && ws->data.shape.ndim == 2) {
        int64_t N = ws->data.shape.dim[0];
        int c_is_row = cc != PBL_NONE && ((sc.ndim == 1 && sc.dim[0] == N) || (sc.ndim == 2 && sc.dim[0] == 1 && sc.dim[1] == N));
        if (cc == PBL_NONE || (beta == 1.0 && c_is_row)) {
            pbl_value in[3] = { a, PBL_NONE, cc };
            pbl_attr oa[] = { PBL_ATTR_INT("out", N) };
            if ((s = pack_weights(c, n->input[1], &in[1])) != PBL_OK)
                return s;
            if (cc != PBL_NONE && sc.ndim == 2 &&
                (s = pbl__onnx_to_shape(c, cc, pbl_shape_make(1, &N), "reshape", "bias", &in[2])) != PBL_OK)
                return s;
            if ((s = pbl__onnx_emit(c, "fully_connected_packed", in, cc != PBL_NONE ? 3 : 2, oa, 1, NULL, &y)) != PBL_OK)
                return s;
            return pbl__onnx_define(c, n->output[0], y);
        }
    }
    if ((s = pbl__onnx_get(c, n->input[1], &b)) != PBL_OK)
        return s;
    pbl_shape sa = pbl__onnx_shape_of(c, a), sb = pbl__onnx_shape_of(c, b);
    if (sa.ndim != 2 || sb.ndim != 2) {
        char ba[96], bb[96];
        NODE_FAIL(c, PBL_ERR_SHAPE, "A is %s and B is %s; Gemm needs matrices", pbl_shape_str(&sa, ba, sizeof ba),
                  pbl_shape_str(&sb, bb, sizeof bb));
    }
    int64_t N = tb ? sb.dim[0] : sb.dim[1];
    int c_is_row = cc != PBL_NONE && ((sc.ndim == 1 && sc.dim[0] == N) || (sc.ndim == 2 && sc.dim[0] == 1 && sc.dim[1] == N));
    if (!ta && tb && alpha == 1.0 && (cc == PBL_NONE || (beta == 1.0 && c_is_row))) {
        /* x·wᵀ + b: pebble's fully_connected, one sgemm with the bias preloaded */
        pbl_value in[3] = { a, b, cc };
        if (cc != PBL_NONE && sc.ndim == 2 && (s = pbl__onnx_to_shape(c, cc, pbl_shape_make(1, &N), "reshape", "bias", &in[2])) != PBL_OK)
            return s;
        if ((s = pbl__onnx_emit(c, "fully_connected", in, cc != PBL_NONE ? 3 : 2, NULL, 0, NULL, &y)) != PBL_OK)
            return s;
        return pbl__onnx_define(c, n->output[0], y);
    }
    int has_c = cc != PBL_NONE && beta != 0.0;
    pbl_attr mm[] = { PBL_ATTR_INT("trans_a", ta != 0), PBL_ATTR_INT("trans_b", tb != 0) };
    if ((s = pbl__onnx_emit(c, "matmul", (pbl_value[]){ a, b }, 2, mm, 2, alpha != 1.0 || has_c ? "matmul" : NULL, &y)) != PBL_OK)
        return s;
    if (alpha != 1.0) {
        pbl_attr sa_[] = { PBL_ATTR_FLOAT("alpha", alpha) };
        if ((s = pbl__onnx_emit(c, "scale", &y, 1, sa_, 1, has_c ? "alpha" : NULL, &y)) != PBL_OK)
            return s;
    }
    if (has_c) {
        if (beta != 1.0) {
            pbl_attr sb_[] = { PBL_ATTR_FLOAT("alpha", beta) };
            if ((s = pbl__onnx_emit(c, "scale", &cc, 1, sb_, 1, "beta", &cc)) != PBL_OK)
                return s;
        }
        if ((s = pbl__onnx_binary(c, "add", 1, y, cc, NULL, &y)) != PBL_OK)
            return s;
    }
    return pbl__onnx_define(c, n->output[0], y);
}

static pbl_status cv_matmul(pbl__onnx_ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value a, b, y;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 2, 2)) != PBL_OK || (s = pbl__onnx_get(c, n->input[0], &a)) != PBL_OK ||
        (s = pbl__onnx_get(c, n->input[1], &b)) != PBL_OK)
        return s;
    pbl_shape sa = pbl__onnx_shape_of(c, a), sb = pbl__onnx_shape_of(c, b);
    char ba[96], bb[96];
    if (sa.ndim < 1 || sb.ndim < 1)
        NODE_FAIL(c, PBL_ERR_SHAPE, "A is %s and B is %s; MatMul needs at least one dim each",
                  pbl_shape_str(&sa, ba, sizeof ba), pbl_shape_str(&sb, bb, sizeof bb));
    /* numpy.matmul: a 1-D A is [1, k] and a 1-D B is [k, 1], their added dims dropped after */
    pbl_shape a2 = sa, b2 = sb;
    if (sa.ndim == 1)
        a2 = pbl_shape_make(2, (int64_t[]){ 1, sa.dim[0] });
    if (sb.ndim == 1)
        b2 = pbl_shape_make(2, (int64_t[]){ sb.dim[0], 1 });
    int64_t M = a2.dim[a2.ndim - 2], K = a2.dim[a2.ndim - 1], K2 = b2.dim[b2.ndim - 2], Nn = b2.dim[b2.ndim - 1];
    pbl_shape ba_ = { .ndim = a2.ndim - 2 }, bb_ = { .ndim = b2.ndim - 2 }, batch;
    memcpy(ba_.dim, a2.dim, sizeof(int64_t) * (size_t)ba_.ndim);
    memcpy(bb_.dim, b2.dim, sizeof(int64_t) * (size_t)bb_.ndim);
    if (K != K2 || !pbl__onnx_bcast_shape(&ba_, &bb_, &batch) || batch.ndim + 2 > PBL_MAX_DIMS)
        NODE_FAIL(c, PBL_ERR_SHAPE, "A is %s and B is %s; they do not multiply", pbl_shape_str(&sa, ba, sizeof ba),
                  pbl_shape_str(&sb, bb, sizeof bb));
    /* ONNX's output shape */
    pbl_shape so = batch;
    if (sa.ndim > 1)
        so.dim[so.ndim++] = M;
    if (sb.ndim > 1)
        so.dim[so.ndim++] = Nn;
    if (b2.ndim == 2 && a2.ndim > 2) {
        /* [..., m, k]·[k, n]: one product over the flattened rows (no copies of B) */
        int64_t rows = pbl_shape_numel(&a2) / K;
        if ((s = pbl__onnx_to_shape(c, a, pbl_shape_make(2, (int64_t[]){ rows, K }), "reshape", "rows", &a)) != PBL_OK ||
            (s = pbl__onnx_to_shape(c, b, b2, "reshape", "b2", &b)) != PBL_OK ||
            (s = pbl__onnx_emit(c, "matmul", (pbl_value[]){ a, b }, 2, NULL, 0, "matmul", &y)) != PBL_OK ||
            (s = pbl__onnx_to_shape(c, y, so, "reshape", NULL, &y)) != PBL_OK)
            return s;
        return pbl__onnx_define(c, n->output[0], y);
    }
    pbl_shape ta = batch, tb = batch;
    ta.dim[ta.ndim++] = M, ta.dim[ta.ndim++] = K;
    tb.dim[tb.ndim++] = K, tb.dim[tb.ndim++] = Nn;
    /* a 1-D operand is reshaped first, then broadcast over the batch dims */
    if ((s = pbl__onnx_to_shape(c, a, a2, "reshape", "a2", &a)) != PBL_OK || (s = pbl__onnx_to_shape(c, b, b2, "reshape", "b2", &b)) != PBL_OK ||
        (s = pbl__onnx_to_shape(c, a, ta, "broadcast_to", "broadcast_a", &a)) != PBL_OK ||
        (s = pbl__onnx_to_shape(c, b, tb, "broadcast_to", "broadcast_b", &b)) != PBL_OK)
        return s;
    pbl_shape mo = batch;
    mo.dim[mo.ndim++] = M, mo.dim[mo.ndim++] = Nn;
    int same = pbl_shape_equal(&mo, &so);
    if ((s = pbl__onnx_emit(c, "matmul", (pbl_value[]){ a, b }, 2, NULL, 0, same ? NULL : "matmul", &y)) != PBL_OK ||
        (s = pbl__onnx_to_shape(c, y, so, "reshape", NULL, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, n->output[0], y);
}

static pbl_status cv_flatten(pbl__onnx_ctx *c)
{
    pbl_value x, y;
    int64_t axis;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 1, 1)) != PBL_OK || (s = pbl__onnx_get(c, c->node->input[0], &x)) != PBL_OK ||
        (s = pbl__onnx_attr_int(c, "axis", 1, &axis)) != PBL_OK)
        return s;
    int32_t r = pbl__onnx_shape_of(c, x).ndim;
    if (axis < -r || axis > r)
        NODE_FAIL(c, PBL_ERR_ATTR, "axis %lld is out of range for rank %d", (long long)axis, (int)r);
    if (axis < 0)
        axis += r;
    pbl_attr fa[] = { PBL_ATTR_INT("axis", axis) };
    if ((s = pbl__onnx_emit(c, "flatten", &x, 1, fa, 1, NULL, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, c->node->output[0], y);
}

static pbl_status cv_reshape(pbl__onnx_ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value x, y;
    pbl_status s;
    int64_t allowzero, attr_shape[PBL_MAX_DIMS];
    int32_t n_attr;
    const int64_t *dims;
    int64_t nd;
    if ((s = pbl__onnx_need_inputs(c, 1, 2)) != PBL_OK || (s = pbl__onnx_get(c, n->input[0], &x)) != PBL_OK ||
        (s = pbl__onnx_attr_bool(c, "allowzero", 0, &allowzero)) != PBL_OK ||
        (s = pbl__onnx_attr_ints(c, "shape", attr_shape, PBL_MAX_DIMS, &n_attr)) != PBL_OK)
        return s;
    if (pbl__onnx_in_name(n, 1)) {
        if ((s = pbl__onnx_get_ints(c, n->input[1], &dims, &nd)) != PBL_OK)
            return s;
    } else if (n_attr >= 0) { /* opset < 5 */
        dims = attr_shape;
        nd = n_attr;
    } else {
        NODE_FAIL(c, PBL_ERR_FORMAT, "no shape given%s", "");
    }
    if (nd > PBL_MAX_DIMS)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "the new shape has %lld dims; pebble's limit is %d", (long long)nd, PBL_MAX_DIMS);
    pbl_shape sx = pbl__onnx_shape_of(c, x);
    int64_t want[PBL_MAX_DIMS];
    for (int64_t i = 0; i < nd; i++) {
        want[i] = dims[i];
        if (dims[i] == 0 && !allowzero) {
            if (i >= sx.ndim)
                NODE_FAIL(c, PBL_ERR_SHAPE, "shape dim %lld is 0 (copy the input's) but the input has rank %d",
                          (long long)i, (int)sx.ndim);
            want[i] = sx.dim[i];
        } else if (dims[i] < -1 || dims[i] == 0) {
            NODE_FAIL(c, dims[i] == 0 ? PBL_ERR_UNSUPPORTED : PBL_ERR_SHAPE, "shape dim %lld is %lld", (long long)i,
                      (long long)dims[i]);
        }
    }
    pbl_attr ra[] = { PBL_ATTR_INTS("shape", want, (int32_t)nd) };
    if ((s = pbl__onnx_emit(c, "reshape", &x, 1, ra, 1, NULL, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, n->output[0], y);
}

static pbl_status cv_transpose(pbl__onnx_ctx *c)
{
    pbl_value x, y;
    int64_t perm[PBL_MAX_INTS];
    int32_t np;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 1, 1)) != PBL_OK || (s = pbl__onnx_get(c, c->node->input[0], &x)) != PBL_OK ||
        (s = pbl__onnx_attr_ints(c, "perm", perm, PBL_MAX_INTS, &np)) != PBL_OK)
        return s;
    pbl_attr pa[] = { PBL_ATTR_INTS("perm", perm, np < 0 ? 0 : np) };
    if ((s = pbl__onnx_emit(c, "transpose", &x, 1, pa, 1, NULL, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, c->node->output[0], y);
}

enum { CONCAT_MAX = 16 }; /* pebble's concat takes at most 16 inputs */

static pbl_status cv_concat(pbl__onnx_ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value in[CONCAT_MAX], y;
    int64_t axis;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 1, CONCAT_MAX)) != PBL_OK || (s = pbl__onnx_attr_int(c, "axis", INT64_MIN, &axis)) != PBL_OK)
        return s;
    if (axis == INT64_MIN)
        NODE_FAIL(c, PBL_ERR_FORMAT, "attribute axis is required%s", "");
    int32_t k = 0;
    for (size_t i = 0; i < n->n_input; i++) {
        if (!pbl__onnx_in_name(n, i))
            continue;
        if ((s = pbl__onnx_get(c, n->input[i], &in[k++])) != PBL_OK)
            return s;
    }
    pbl_attr ca[] = { PBL_ATTR_INT("axis", axis) };
    if ((s = pbl__onnx_emit(c, "concat", in, k, ca, 1, NULL, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, n->output[0], y);
}

/* A Constant's value attribute (tensor, float(s) or int(s)) becomes a constant. */
static pbl_status cv_constant(pbl__onnx_ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    pbl_status s;
    if (n->n_output < 1 || !n->output[0] || !n->output[0][0])
        NODE_FAIL(c, PBL_ERR_FORMAT, "has no output%s", "");
    const Onnx__AttributeProto *a = NULL;
    for (size_t i = 0; i < n->n_attribute && !a; i++)
        if (n->attribute[i] && n->attribute[i]->name)
            a = n->attribute[i];
    if (!a)
        NODE_FAIL(c, PBL_ERR_FORMAT, "has no value attribute%s", "");
    pbl__onnx_data d = { 0 };
    const char *an = a->name;
    if (strcmp(an, "value") == 0 && a->t) {
        char what[256];
        snprintf(what, sizeof what, "Constant '%s'", n->output[0]);
        if ((s = pbl__onnx_data_decode(a->t, &c->w->mem, &c->mem, &d, what, c->err, c->errlen)) != PBL_OK)
            return s;
    } else if (strcmp(an, "value_float") == 0 || strcmp(an, "value_floats") == 0) {
        int one = strcmp(an, "value_float") == 0;
        d.numel = one ? 1 : (int64_t)a->n_floats;
        d.shape = one ? PBL_SCALAR : pbl_shape_make(1, &d.numel);
        if (d.numel == 0 || !(d.f = pbl__mem_alloc(&c->w->mem, (size_t)d.numel * sizeof(float))))
            NODE_FAIL(c, d.numel ? PBL_ERR_NOMEM : PBL_ERR_UNSUPPORTED, "%s", d.numel ? "out of memory" : "an empty constant");
        for (int64_t i = 0; i < d.numel; i++)
            d.f[i] = one ? a->f : a->floats[i];
    } else if (strcmp(an, "value_int") == 0 || strcmp(an, "value_ints") == 0) {
        int one = strcmp(an, "value_int") == 0;
        d.is_int = 1;
        d.numel = one ? 1 : (int64_t)a->n_ints;
        d.shape = one ? PBL_SCALAR : pbl_shape_make(1, &d.numel);
        if (d.numel == 0 || !(d.ints = pbl__mem_alloc(&c->mem, (size_t)d.numel * sizeof(int64_t))))
            NODE_FAIL(c, d.numel ? PBL_ERR_NOMEM : PBL_ERR_UNSUPPORTED, "%s", d.numel ? "out of memory" : "an empty constant");
        for (int64_t i = 0; i < d.numel; i++)
            d.ints[i] = one ? a->i : a->ints[i];
    } else {
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "attribute %s is not supported (value, value_float(s), value_int(s) are)", an);
    }
    pbl__onnx_sym *sm;
    if ((s = pbl__onnx_sym_add(c, n->output[0], &sm)) != PBL_OK) {
        pbl__onnx_data_free(&d, &c->w->mem, &c->mem);
        return s;
    }
    sm->is_const = 1;
    sm->data = d;
    return PBL_OK;
}

/* The core family's ops with the attributes pebble knows for each, over every opset it accepts
 * (what is listed and why: pbl__onnx_op). Constant's attributes (one value, in one of several
 * forms) are checked by its converter. */
#define BINARY_ATTRS "consumed_inputs broadcast"
static const pbl__onnx_op core_ops[] = {
    { "Add", cv_add, BINARY_ATTRS }, { "Sub", cv_sub, BINARY_ATTRS }, { "Mul", cv_mul, BINARY_ATTRS },
    { "Div", cv_div, BINARY_ATTRS },
    { "Gemm", cv_gemm, "transA transB alpha beta broadcast" }, { "MatMul", cv_matmul, "" },
    { "Relu", cv_relu, "consumed_inputs" }, { "Sigmoid", cv_sigmoid, "consumed_inputs" },
    { "Tanh", cv_tanh, "consumed_inputs" },
    { "Flatten", cv_flatten, "axis" }, { "Reshape", cv_reshape, "shape allowzero consumed_inputs" },
    { "Identity", cv_identity, "" },
    { "Transpose", cv_transpose, "perm" },
    { "Concat", cv_concat, "axis" }, { "Dropout", cv_dropout, "ratio is_test seed consumed_inputs" },
    { "Constant", cv_constant, NULL },
};

const pbl__onnx_op_table pbl__onnx_ops_core = { core_ops, sizeof core_ops / sizeof core_ops[0] };

/* Every family's table; an op is looked up in each in turn (names are unique across them). */
static const pbl__onnx_op_table *const op_tables[] = {
    &pbl__onnx_ops_core,
    &pbl__onnx_ops_nn,
    &pbl__onnx_ops_tensor,
    &pbl__onnx_ops_math,
    &pbl__onnx_ops_reduce,
};

static const pbl__onnx_op *find_op(const Onnx__NodeProto *n)
{
    if (!n->op_type || !pbl__onnx_default_domain(n->domain))
        return NULL;
    for (size_t t = 0; t < sizeof op_tables / sizeof op_tables[0]; t++)
        for (size_t i = 0; i < op_tables[t]->n; i++)
            if (strcmp(op_tables[t]->ops[i].name, n->op_type) == 0)
                return &op_tables[t]->ops[i];
    return NULL;
}

/* 1 when `name` is one of the space-separated words of list. */
static int listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        size_t w = strcspn(p, " ");
        if (w == n && strncmp(p, name, n) == 0)
            return 1;
        p += w;
        p += strspn(p, " ");
    }
    return 0;
}

pbl_status pbl__onnx_convert(pbl__onnx_ctx *c)
{
    const pbl__onnx_op *op = find_op(c->node);
    for (size_t i = 0; op && op->attrs && i < c->node->n_attribute; i++) {
        const Onnx__AttributeProto *a = c->node->attribute[i];
        const char *name = a && a->name ? a->name : "";
        if (!listed(op->attrs, name))
            NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "attribute '%s' is not one pebble knows for %s (it knows: %s)", name,
                      op->name, op->attrs[0] ? op->attrs : "none");
    }
    /* shape arithmetic on constants becomes constants (graph/io/onnx_fold.c) */
    int folded = 0;
    pbl_status fs = pbl__onnx_foldable(c->node) ? pbl__onnx_fold(c, &folded) : PBL_OK;
    if (fs != PBL_OK || folded)
        return fs;
    if (!op)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "its inputs are not all constants; pebble runs %s only folded at load time",
                  c->node->op_type);
    return op->fn(c);
}

int pbl__onnx_default_domain(const char *d) { return !d || !d[0] || strcmp(d, "ai.onnx") == 0; }

int pbl__onnx_known_op(const Onnx__NodeProto *n)
{
    return find_op(n) != NULL || pbl__onnx_foldable(n);
}
