/*
 * ONNX ops -> pebble ops, the reduction family: the Reduce* ops over any axes, ArgMax/ArgMin,
 * Softmax/LogSoftmax/Hardmax on any axis, and the two losses (NegativeLogLikelihoodLoss,
 * SoftmaxCrossEntropyLoss). Shared helpers: graph/io/onnx_node.c.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "graph/io/onnx_internal.h"
#include "graph/ir/reduce_modes.h"
#include "pebble/builder.h"

/* ---- Reduce*: axes as an attribute (ReduceSum before 13, the others before 18) or a constant
 * second input (from then on); noop_with_empty_axes makes empty axes a no-op. sum and mean are
 * pebble ops of their own; the rest are reduce with a mode. */
static pbl_status cv_reduce(pbl__onnx_ctx *c, const char *op, int64_t mode)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value x, y;
    int64_t keep, noop, axes[PBL_MAX_INTS];
    int32_t na;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 1, 2)) != PBL_OK || (s = pbl__onnx_get(c, n->input[0], &x)) != PBL_OK ||
        (s = pbl__onnx_attr_bool(c, "keepdims", 1, &keep)) != PBL_OK || (s = pbl__onnx_attr_bool(c, "noop_with_empty_axes", 0, &noop)) != PBL_OK ||
        (s = pbl__onnx_attr_ints(c, "axes", axes, PBL_MAX_INTS, &na)) != PBL_OK)
        return s;
    if (na < 0)
        na = 0;
    if (pbl__onnx_in_name(n, 1)) {
        const int64_t *v;
        int64_t k;
        if ((s = pbl__onnx_get_ints(c, n->input[1], &v, &k)) != PBL_OK)
            return s;
        if (k > PBL_MAX_INTS)
            NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "%lld axes; pebble takes at most %d", (long long)k, PBL_MAX_INTS);
        for (int64_t i = 0; i < k; i++)
            axes[i] = v[i];
        na = (int32_t)k;
    }
    if (na == 0 && noop)
        return pbl__onnx_define(c, n->output[0], x);
    pbl_attr ra[] = { PBL_ATTR_INTS("axes", axes, na), PBL_ATTR_INT("keepdims", keep != 0), PBL_ATTR_INT("mode", mode) };
    if ((s = pbl__onnx_emit(c, op, &x, 1, ra, mode < 0 ? 2 : 3, NULL, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, n->output[0], y);
}

static pbl_status cv_reduce_sum(pbl__onnx_ctx *c) { return cv_reduce(c, "sum", -1); }
static pbl_status cv_reduce_mean(pbl__onnx_ctx *c) { return cv_reduce(c, "mean", -1); }
static pbl_status cv_reduce_max(pbl__onnx_ctx *c) { return cv_reduce(c, "reduce", PBL__RED_MAX); }
static pbl_status cv_reduce_min(pbl__onnx_ctx *c) { return cv_reduce(c, "reduce", PBL__RED_MIN); }
static pbl_status cv_reduce_prod(pbl__onnx_ctx *c) { return cv_reduce(c, "reduce", PBL__RED_PROD); }
static pbl_status cv_reduce_l1(pbl__onnx_ctx *c) { return cv_reduce(c, "reduce", PBL__RED_L1); }
static pbl_status cv_reduce_l2(pbl__onnx_ctx *c) { return cv_reduce(c, "reduce", PBL__RED_L2); }
static pbl_status cv_reduce_lse(pbl__onnx_ctx *c) { return cv_reduce(c, "reduce", PBL__RED_LOG_SUM_EXP); }
static pbl_status cv_reduce_log_sum(pbl__onnx_ctx *c) { return cv_reduce(c, "reduce", PBL__RED_LOG_SUM); }
static pbl_status cv_reduce_sum_square(pbl__onnx_ctx *c) { return cv_reduce(c, "reduce", PBL__RED_SUM_SQUARE); }

/* ArgMax / ArgMin: ONNX's int64 indices are pebble's i32 */
static pbl_status cv_arg(pbl__onnx_ctx *c, int64_t is_min)
{
    pbl_value x, y;
    int64_t axis, keep, last;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 1, 1)) != PBL_OK || (s = pbl__onnx_get(c, c->node->input[0], &x)) != PBL_OK ||
        (s = pbl__onnx_attr_int(c, "axis", 0, &axis)) != PBL_OK || (s = pbl__onnx_attr_bool(c, "keepdims", 1, &keep)) != PBL_OK ||
        (s = pbl__onnx_attr_bool(c, "select_last_index", 0, &last)) != PBL_OK)
        return s;
    int32_t r = pbl__onnx_shape_of(c, x).ndim;
    if (axis < -r || axis >= r)
        NODE_FAIL(c, PBL_ERR_ATTR, "attribute axis is %lld; it must be in [%d, %d)", (long long)axis, -(int)r, (int)r);
    pbl_attr at[] = { PBL_ATTR_INT("axis", axis), PBL_ATTR_INT("keepdims", keep), PBL_ATTR_INT("select_last", last),
                      PBL_ATTR_INT("mode", is_min) };
    if ((s = pbl__onnx_emit(c, "arg_reduce", &x, 1, at, 4, NULL, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, c->node->output[0], y);
}

static pbl_status cv_argmax(pbl__onnx_ctx *c) { return cv_arg(c, 0); }
static pbl_status cv_argmin(pbl__onnx_ctx *c) { return cv_arg(c, 1); }

/* ---- Softmax / LogSoftmax / Hardmax. Before opset 13 the input is coerced to 2-D at `axis`
 * (default 1) and normalised over the flattened trailing dims; from opset 13 over the one dim
 * `axis` (default -1). pebble normalises the last dim: the first is flatten + reshape back, the
 * second a transpose to the end and back. */
static pbl_status softmax_on(pbl__onnx_ctx *c, const char *op, pbl_value x, int64_t axis, int coerce_2d,
                             const char *suffix, pbl_value *y)
{
    pbl_shape sx = pbl__onnx_shape_of(c, x);
    int32_t r = sx.ndim;
    pbl_status s;
    char sfx[3][64];
    snprintf(sfx[0], sizeof sfx[0], "%s%s2d", suffix ? suffix : "", suffix ? "/" : "");
    snprintf(sfx[1], sizeof sfx[1], "%s%sop", suffix ? suffix : "", suffix ? "/" : "");
    snprintf(sfx[2], sizeof sfx[2], "%s%sto_last", suffix ? suffix : "", suffix ? "/" : "");
    if (axis < -r || axis >= r || r == 0)
        NODE_FAIL(c, PBL_ERR_ATTR, "attribute axis is %lld; it is out of range for rank %d", (long long)axis, (int)r);
    if (axis < 0)
        axis += r;
    if (axis == r - 1)
        return pbl__onnx_emit(c, op, &x, 1, NULL, 0, suffix, y);
    if (coerce_2d) {
        pbl_attr fa[] = { PBL_ATTR_INT("axis", axis) };
        if ((s = pbl__onnx_emit(c, "flatten", &x, 1, fa, 1, sfx[0], y)) != PBL_OK || (s = pbl__onnx_emit(c, op, y, 1, NULL, 0, sfx[1], y)) != PBL_OK)
            return s;
        return pbl__onnx_to_shape(c, *y, sx, "reshape", suffix, y);
    }
    int64_t perm[PBL_MAX_DIMS];
    for (int32_t k = 0; k < r; k++)
        perm[k] = k;
    perm[axis] = r - 1;
    perm[r - 1] = axis; /* a swap is its own inverse */
    pbl_attr pa[] = { PBL_ATTR_INTS("perm", perm, r) };
    if ((s = pbl__onnx_emit(c, "transpose", &x, 1, pa, 1, sfx[2], y)) != PBL_OK || (s = pbl__onnx_emit(c, op, y, 1, NULL, 0, sfx[1], y)) != PBL_OK)
        return s;
    return pbl__onnx_emit(c, "transpose", y, 1, pa, 1, suffix, y);
}

static pbl_status cv_softmax_family(pbl__onnx_ctx *c, const char *op)
{
    pbl_value x, y;
    pbl_status s;
    int64_t axis;
    int before13 = c->opset < 13;
    if ((s = pbl__onnx_need_inputs(c, 1, 1)) != PBL_OK || (s = pbl__onnx_get(c, c->node->input[0], &x)) != PBL_OK ||
        (s = pbl__onnx_attr_int(c, "axis", before13 ? 1 : -1, &axis)) != PBL_OK ||
        (s = softmax_on(c, op, x, axis, before13, NULL, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, c->node->output[0], y);
}

static pbl_status cv_softmax(pbl__onnx_ctx *c) { return cv_softmax_family(c, "softmax"); }
static pbl_status cv_log_softmax(pbl__onnx_ctx *c) { return cv_softmax_family(c, "log_softmax"); }
static pbl_status cv_hardmax(pbl__onnx_ctx *c) { return cv_softmax_family(c, "hardmax"); }

/* ---- the losses: reduction ("none", "sum", "mean") and ignore_index as nll_loss's attributes */
static pbl_status loss_attrs(pbl__onnx_ctx *c, pbl_attr *at)
{
    const Onnx__AttributeProto *a = pbl__onnx_attr_find(c->node, "reduction");
    int64_t red = 2, ignore;
    if (a) {
        static const char *const names[] = { "none", "sum", "mean" };
        red = -1;
        for (int k = 0; k < 3 && a->has_s; k++)
            if (a->s.len == strlen(names[k]) && memcmp(a->s.data, names[k], a->s.len) == 0)
                red = k;
        if (red < 0)
            NODE_FAIL(c, PBL_ERR_ATTR, "attribute reduction is not one of none, sum, mean%s", "");
    }
    pbl_status s = pbl__onnx_attr_int(c, "ignore_index", INT64_MIN, &ignore);
    at[0] = PBL_ATTR_INT("reduction", red);
    at[1] = PBL_ATTR_INT("ignore_index", ignore);
    return s;
}

/* (logp, target, [weight]) -> nll_loss, defining output 0 */
static pbl_status emit_nll(pbl__onnx_ctx *c, pbl_value logp)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value in[3] = { logp, PBL_NONE, PBL_NONE }, y;
    pbl_attr at[2];
    pbl_status s;
    if ((s = loss_attrs(c, at)) != PBL_OK || (s = pbl__onnx_get(c, n->input[1], &in[1])) != PBL_OK)
        return s;
    pbl_value_info ti;
    pbl_graph_value_info(c->g, in[1], &ti);
    if (ti.dtype != PBL_I32)
        NODE_FAIL(c, PBL_ERR_DTYPE, "target '%s' must hold integer class indices", n->input[1]);
    int32_t k = 2;
    if (pbl__onnx_in_name(n, 2) && (s = pbl__onnx_get(c, n->input[2], &in[k++])) != PBL_OK)
        return s;
    if ((s = pbl__onnx_emit(c, "nll_loss", in, k, at, 2, NULL, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, n->output[0], y);
}

static pbl_status cv_nll_loss(pbl__onnx_ctx *c)
{
    pbl_value x;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 2, 3)) != PBL_OK || (s = pbl__onnx_get(c, c->node->input[0], &x)) != PBL_OK)
        return s;
    return emit_nll(c, x);
}

/* log_softmax over the classes (dim 1), then nll_loss; output 1 (optional) is the log_softmax */
static pbl_status cv_softmax_ce_loss(pbl__onnx_ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value x, lp;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 2, 3)) != PBL_OK || (s = pbl__onnx_get(c, n->input[0], &x)) != PBL_OK)
        return s;
    if (pbl__onnx_shape_of(c, x).ndim < 2)
        NODE_FAIL(c, PBL_ERR_SHAPE, "scores '%s' must be [N, C, d...]", n->input[0]);
    if ((s = softmax_on(c, "log_softmax", x, 1, 0, "log_prob", &lp)) != PBL_OK || (s = emit_nll(c, lp)) != PBL_OK)
        return s;
    if (n->n_output > 1 && n->output[1] && n->output[1][0])
        return pbl__onnx_define(c, n->output[1], lp);
    return PBL_OK;
}

#define REDUCE_ATTRS "axes keepdims noop_with_empty_axes"
static const pbl__onnx_op reduce_ops[] = {
    { "ReduceSum", cv_reduce_sum, REDUCE_ATTRS }, { "ReduceMean", cv_reduce_mean, REDUCE_ATTRS },
    { "ReduceMax", cv_reduce_max, REDUCE_ATTRS }, { "ReduceMin", cv_reduce_min, REDUCE_ATTRS },
    { "ReduceProd", cv_reduce_prod, REDUCE_ATTRS }, { "ReduceL1", cv_reduce_l1, REDUCE_ATTRS },
    { "ReduceL2", cv_reduce_l2, REDUCE_ATTRS }, { "ReduceLogSumExp", cv_reduce_lse, REDUCE_ATTRS },
    { "ReduceLogSum", cv_reduce_log_sum, REDUCE_ATTRS }, { "ReduceSumSquare", cv_reduce_sum_square, REDUCE_ATTRS },
    { "ArgMax", cv_argmax, "axis keepdims select_last_index" }, { "ArgMin", cv_argmin, "axis keepdims select_last_index" },
    { "Softmax", cv_softmax, "axis" }, { "LogSoftmax", cv_log_softmax, "axis" }, { "Hardmax", cv_hardmax, "axis" },
    { "NegativeLogLikelihoodLoss", cv_nll_loss, "reduction ignore_index" },
    { "SoftmaxCrossEntropyLoss", cv_softmax_ce_loss, "reduction ignore_index" },
};

const pbl__onnx_op_table pbl__onnx_ops_reduce = { reduce_ops, sizeof reduce_ops / sizeof reduce_ops[0] };
