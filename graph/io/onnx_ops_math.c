/*
 * ONNX ops -> pebble ops, the math family: element-wise maps beyond the core arithmetic and
 * activations (Clip, LeakyRelu, Elu, Selu, PRelu, Softplus, ..., Exp, Log, Pow, Sin, Cos), the
 * variadic Min/Max/Sum/Mean, comparisons, logic and Where. Each becomes the pebble op of the same
 * formula (ops/math.c, ops/shared/math.h), broadcast two-way as ONNX does. pebble computes floats
 * as float32 and integers and booleans as int32 (0/1): an op over a dtype its pebble op does not
 * take is refused as unsupported, with the dtype named, never run in another type.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph/io/onnx_internal.h"
#include "pebble/builder.h"

static pbl_dtype dtype_of(pbl__onnx_ctx *c, pbl_value v)
{
    pbl_value_info vi;
    return pbl_graph_value_info(c->g, v, &vi) == PBL_OK ? vi.dtype : PBL_F32;
}

/* Input i of the current node as a pebble value of dtype want (else unsupported). */
static pbl_status input_of(pbl__onnx_ctx *c, size_t i, pbl_dtype want, pbl_value *out)
{
    pbl_status s = pbl__onnx_get(c, c->node->input[i], out);
    if (s == PBL_OK && dtype_of(c, *out) != want)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "input '%s' is %s; pebble's op takes %s here", c->node->input[i],
                  pbl_dtype_name(dtype_of(c, *out)), pbl_dtype_name(want));
    return s;
}

/* One pebble map over the node's one float input, with float attributes read from the node
 * (ONNX's names and defaults, which are pebble's). */
static pbl_status map(pbl__onnx_ctx *c, const char *op, const char *a0, double d0, const char *a1, double d1)
{
    pbl_value x, y;
    pbl_attr at[2];
    int32_t na = 0;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 1, 1)) != PBL_OK || (s = input_of(c, 0, PBL_F32, &x)) != PBL_OK)
        return s;
    const char *names[2] = { a0, a1 };
    const double dflt[2] = { d0, d1 };
    for (int k = 0; k < 2 && names[k]; k++, na++) {
        double v;
        if ((s = pbl__onnx_attr_float(c, names[k], dflt[k], &v)) != PBL_OK)
            return s;
        at[k] = PBL_ATTR_FLOAT(names[k], v);
    }
    if ((s = pbl__onnx_emit(c, op, &x, 1, at, na, NULL, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, c->node->output[0], y);
}

#define MAP0(fn, op) static pbl_status fn(pbl__onnx_ctx *c) { return map(c, op, NULL, 0, NULL, 0); }
MAP0(cv_softplus, "softplus")
MAP0(cv_softsign, "softsign")
MAP0(cv_hard_swish, "hard_swish")
MAP0(cv_erf, "erf")
MAP0(cv_exp, "exp")
MAP0(cv_log, "log")
MAP0(cv_sqrt, "sqrt")
MAP0(cv_neg, "neg")
MAP0(cv_abs, "abs")
MAP0(cv_reciprocal, "reciprocal")
MAP0(cv_sign, "sign")
MAP0(cv_floor, "floor")
MAP0(cv_ceil, "ceil")
MAP0(cv_round, "round")
MAP0(cv_sin, "sin")
MAP0(cv_cos, "cos")
MAP0(cv_tan, "tan")
MAP0(cv_asin, "asin")
MAP0(cv_acos, "acos")
MAP0(cv_atan, "atan")
MAP0(cv_sinh, "sinh")
MAP0(cv_cosh, "cosh")
MAP0(cv_asinh, "asinh")
MAP0(cv_acosh, "acosh")
MAP0(cv_atanh, "atanh")
static pbl_status cv_celu(pbl__onnx_ctx *c) { return map(c, "celu", "alpha", 1.0, NULL, 0); }
static pbl_status cv_leaky_relu(pbl__onnx_ctx *c) { return map(c, "leaky_relu", "alpha", 0.01, NULL, 0); }
static pbl_status cv_elu(pbl__onnx_ctx *c) { return map(c, "elu", "alpha", 1.0, NULL, 0); }
static pbl_status cv_selu(pbl__onnx_ctx *c)
{
    return map(c, "selu", "alpha", 1.67326319217681884765625, "gamma", 1.05070102214813232421875);
}
static pbl_status cv_hard_sigmoid(pbl__onnx_ctx *c) { return map(c, "hard_sigmoid", "alpha", 0.2, "beta", 0.5); }
static pbl_status cv_thresholded_relu(pbl__onnx_ctx *c) { return map(c, "thresholded_relu", "alpha", 1.0, NULL, 0); }
static pbl_status cv_shrink(pbl__onnx_ctx *c) { return map(c, "shrink", "lambd", 0.5, "bias", 0.0); }

/* Gelu (opset 20): approximate "none" is pebble's gelu (the erf form), "tanh" gelu_tanh. */
static pbl_status cv_gelu(pbl__onnx_ctx *c)
{
    const Onnx__AttributeProto *a = pbl__onnx_attr_find(c->node, "approximate");
    const char *op = "gelu";
    if (a && a->has_s) {
        if (a->s.len == 4 && memcmp(a->s.data, "tanh", 4) == 0)
            op = "gelu_tanh";
        else if (!(a->s.len == 4 && memcmp(a->s.data, "none", 4) == 0))
            NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "attribute approximate must be \"none\" or \"tanh\"%s", "");
    }
    return map(c, op, NULL, 0, NULL, 0);
}

/* ---- Clip: bounds as attributes (opset < 11) or optional inputs --------------------------------- */

/* A bound input that is a float constant scalar: its value in *v, 1; else 0. */
static int const_scalar(pbl__onnx_ctx *c, const char *name, double *v)
{
    pbl__onnx_sym *s = pbl__onnx_sym_find(c, name);
    if (!s || !s->is_const || s->data.is_int || !s->data.f || s->data.numel != 1)
        return 0;
    *v = s->data.f[0];
    return 1;
}

static pbl_status cv_clip(pbl__onnx_ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value x, y;
    pbl_status s;
    double lo = -FLT_MAX, hi = FLT_MAX;
    if ((s = pbl__onnx_need_inputs(c, 1, 3)) != PBL_OK || (s = input_of(c, 0, PBL_F32, &x)) != PBL_OK)
        return s;
    if (c->opset < 11) {
        if ((s = pbl__onnx_attr_float(c, "min", -FLT_MAX, &lo)) != PBL_OK ||
            (s = pbl__onnx_attr_float(c, "max", FLT_MAX, &hi)) != PBL_OK)
            return s;
    } else {
        /* constant bounds become clip's attributes; bounds computed by the graph, max and min ops */
        const char *bn[2] = { pbl__onnx_in_name(n, 1), pbl__onnx_in_name(n, 2) };
        double *bv[2] = { &lo, &hi };
        for (int k = 0; k < 2; k++) {
            pbl_value b;
            if (!bn[k] || const_scalar(c, bn[k], bv[k]))
                continue;
            if ((s = input_of(c, 1 + (size_t)k, PBL_F32, &b)) != PBL_OK)
                return s;
            pbl_shape sb = pbl__onnx_shape_of(c, b);
            if (pbl_shape_numel(&sb) != 1)
                NODE_FAIL(c, PBL_ERR_FORMAT, "bound '%s' is not a scalar", bn[k]);
            if ((s = pbl__onnx_emit(c, k == 0 ? "max" : "min", (pbl_value[]){ x, b }, 2, NULL, 0,
                                    k == 0 ? "min" : "max", &x)) != PBL_OK)
                return s;
        }
    }
    if (lo == -FLT_MAX && hi == FLT_MAX) /* no constant bound: x as the max/min nodes left it */
        return pbl__onnx_define(c, n->output[0], x);
    pbl_attr at[] = { PBL_ATTR_FLOAT("min", lo), PBL_ATTR_FLOAT("max", hi) };
    if ((s = pbl__onnx_emit(c, "clip", &x, 1, at, 2, NULL, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, n->output[0], y);
}

/* ---- binary and variadic ------------------------------------------------------------------------ */

/* out = a (op) b, both of dtype want, broadcast two-way */
static pbl_status binary(pbl__onnx_ctx *c, const char *op, int commutative, pbl_dtype want)
{
    pbl_value a, b, y;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 2, 2)) != PBL_OK || (s = input_of(c, 0, want, &a)) != PBL_OK ||
        (s = input_of(c, 1, want, &b)) != PBL_OK)
        return s;
    pbl_shape sa = pbl__onnx_shape_of(c, a), sb = pbl__onnx_shape_of(c, b), so;
    /* pebble broadcasts b to a; a itself is broadcast by broadcast_to, which takes f32 only */
    if (want != PBL_F32 && pbl__onnx_bcast_shape(&sa, &sb, &so) && !pbl_shape_equal(&sa, &so) &&
        !(commutative && pbl_shape_equal(&sb, &so)))
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "input A would need broadcasting, which pebble does for f32 only (A is %s)",
                  pbl_dtype_name(want));
    if ((s = pbl__onnx_binary(c, op, commutative, a, b, NULL, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, c->node->output[0], y);
}

static pbl_status cv_pow(pbl__onnx_ctx *c) { return binary(c, "pow", 0, PBL_F32); }
/* PRelu: the slope broadcasts to x. Before opset 7 a slope of X's channel count (dim 1) is one
 * per channel, as PyTorch's converters of the time wrote it: it becomes [C, 1, ..., 1]. */
static pbl_status cv_prelu(pbl__onnx_ctx *c)
{
    pbl_value x, w, y;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 2, 2)) != PBL_OK || (s = input_of(c, 0, PBL_F32, &x)) != PBL_OK ||
        (s = input_of(c, 1, PBL_F32, &w)) != PBL_OK)
        return s;
    pbl_shape sx = pbl__onnx_shape_of(c, x), sw = pbl__onnx_shape_of(c, w), so;
    if (c->opset < 7 && sx.ndim >= 2 && sw.ndim == 1 && sw.dim[0] == sx.dim[1] && !pbl__onnx_bcast_shape(&sx, &sw, &so)) {
        pbl_shape per = { .ndim = sx.ndim - 1 };
        per.dim[0] = sw.dim[0];
        for (int32_t k = 1; k < per.ndim; k++)
            per.dim[k] = 1;
        if ((s = pbl__onnx_to_shape(c, w, per, "reshape", "slope_per_channel", &w)) != PBL_OK)
            return s;
    }
    if ((s = pbl__onnx_binary(c, "prelu", 0, x, w, NULL, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, c->node->output[0], y);
}

/* comparisons: a and b both float or both int32; int32 0/1 out */
static pbl_status compare(pbl__onnx_ctx *c, const char *op, int commutative)
{
    pbl_value a;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 2, 2)) != PBL_OK || (s = pbl__onnx_get(c, c->node->input[0], &a)) != PBL_OK)
        return s;
    return binary(c, op, commutative, dtype_of(c, a));
}

static pbl_status cv_equal(pbl__onnx_ctx *c) { return compare(c, "equal", 1); }
static pbl_status cv_less(pbl__onnx_ctx *c) { return compare(c, "less", 0); }
static pbl_status cv_greater(pbl__onnx_ctx *c) { return compare(c, "greater", 0); }
static pbl_status cv_less_equal(pbl__onnx_ctx *c) { return compare(c, "less_equal", 0); }
static pbl_status cv_greater_equal(pbl__onnx_ctx *c) { return compare(c, "greater_equal", 0); }
static pbl_status cv_and(pbl__onnx_ctx *c) { return binary(c, "logical_and", 1, PBL_I32); }
static pbl_status cv_or(pbl__onnx_ctx *c) { return binary(c, "logical_or", 1, PBL_I32); }
static pbl_status cv_xor(pbl__onnx_ctx *c) { return binary(c, "logical_xor", 1, PBL_I32); }

/* IsNaN, IsInf: float in, int32 0/1 out */
static pbl_status predicate(pbl__onnx_ctx *c, const char *op, int inf)
{
    pbl_value x, y;
    pbl_status s;
    int64_t neg = 1, pos = 1;
    if ((s = pbl__onnx_need_inputs(c, 1, 1)) != PBL_OK || (s = input_of(c, 0, PBL_F32, &x)) != PBL_OK)
        return s;
    if (inf && ((s = pbl__onnx_attr_bool(c, "detect_negative", 1, &neg)) != PBL_OK ||
                (s = pbl__onnx_attr_bool(c, "detect_positive", 1, &pos)) != PBL_OK))
        return s;
    pbl_attr at[] = { PBL_ATTR_INT("detect_negative", neg), PBL_ATTR_INT("detect_positive", pos) };
    if ((s = pbl__onnx_emit(c, op, &x, 1, at, inf ? 2 : 0, NULL, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, c->node->output[0], y);
}

static pbl_status cv_is_nan(pbl__onnx_ctx *c) { return predicate(c, "is_nan", 0); }
static pbl_status cv_is_inf(pbl__onnx_ctx *c) { return predicate(c, "is_inf", 1); }

/* Mod: fmod 1 is C's remainder (floats: pebble's fmod); fmod 0, integers only, Python's (mod) */
static pbl_status cv_mod(pbl__onnx_ctx *c)
{
    int64_t fm;
    pbl_value a;
    pbl_status s;
    if ((s = pbl__onnx_attr_bool(c, "fmod", 0, &fm)) != PBL_OK || (s = pbl__onnx_need_inputs(c, 2, 2)) != PBL_OK ||
        (s = pbl__onnx_get(c, c->node->input[0], &a)) != PBL_OK)
        return s;
    pbl_dtype dt = dtype_of(c, a);
    if (dt == PBL_F32 && !fm)
        NODE_FAIL(c, PBL_ERR_ATTR, "fmod is 0 with float inputs; ONNX requires 1 for floats%s", "");
    if (dt == PBL_I32 && fm)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "fmod 1 over int32 inputs is not supported (fmod 0 is)%s", "");
    return binary(c, dt == PBL_F32 ? "fmod" : "mod", 0, dt);
}

static pbl_status cv_not(pbl__onnx_ctx *c)
{
    pbl_value x, y;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 1, 1)) != PBL_OK || (s = input_of(c, 0, PBL_I32, &x)) != PBL_OK ||
        (s = pbl__onnx_emit(c, "logical_not", &x, 1, NULL, 0, NULL, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, c->node->output[0], y);
}

/* Min and Max over int32 inputs of one shape: where(less(a, b), a, b) (greater for Max), from
 * ops that take int32, so no integer kernel of their own is needed. */
static pbl_status int_pick(pbl__onnx_ctx *c, const char *op, pbl_value a, pbl_value b, const char *sfx, pbl_value *out)
{
    pbl_shape sa = pbl__onnx_shape_of(c, a), sb = pbl__onnx_shape_of(c, b);
    if (!pbl_shape_equal(&sa, &sb))
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "int32 inputs of different shapes (pebble broadcasts f32 only)%s", "");
    char tsfx[48];
    snprintf(tsfx, sizeof tsfx, "%s%stest", sfx ? sfx : "", sfx ? "_" : "");
    pbl_value t;
    pbl_status s = pbl__onnx_emit(c, strcmp(op, "min") == 0 ? "less" : "greater", (pbl_value[]){ a, b }, 2, NULL, 0, tsfx, &t);
    if (s != PBL_OK)
        return s;
    return pbl__onnx_emit(c, "where", (pbl_value[]){ t, a, b }, 3, NULL, 0, sfx, out);
}

/* Min, Max, Sum, Mean over 1..n float inputs (Min and Max int32 too), folded left to right
 * with two-way broadcasting; Mean then scales by 1/n. One input is the output itself. */
static pbl_status variadic(pbl__onnx_ctx *c, const char *op, int mean)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value acc, x;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 1, n->n_input)) != PBL_OK || (s = pbl__onnx_get(c, n->input[0], &acc)) != PBL_OK)
        return s;
    int ints = strcmp(op, "add") != 0 && dtype_of(c, acc) == PBL_I32;
    pbl_dtype dt = ints ? PBL_I32 : PBL_F32;
    if ((s = input_of(c, 0, dt, &acc)) != PBL_OK)
        return s;
    for (size_t i = 1; i < n->n_input; i++) {
        char sfx[32];
        snprintf(sfx, sizeof sfx, "%s%zu", op, i);
        if (!pbl__onnx_in_name(n, i))
            NODE_FAIL(c, PBL_ERR_FORMAT, "input %zu is empty", i);
        const char *last = i + 1 < n->n_input || mean ? sfx : NULL;
        if ((s = input_of(c, i, dt, &x)) != PBL_OK ||
            (s = ints ? int_pick(c, op, acc, x, last, &acc) : pbl__onnx_binary(c, op, 1, acc, x, last, &acc)) != PBL_OK)
            return s;
    }
    if (mean && n->n_input > 1) {
        pbl_attr at = PBL_ATTR_FLOAT("alpha", 1.0 / (double)n->n_input);
        if ((s = pbl__onnx_emit(c, "scale", &acc, 1, &at, 1, NULL, &acc)) != PBL_OK)
            return s;
    }
    return pbl__onnx_define(c, n->output[0], acc);
}

static pbl_status cv_min(pbl__onnx_ctx *c) { return variadic(c, "min", 0); }
static pbl_status cv_max(pbl__onnx_ctx *c) { return variadic(c, "max", 0); }
static pbl_status cv_sum(pbl__onnx_ctx *c) { return variadic(c, "add", 0); }
static pbl_status cv_mean(pbl__onnx_ctx *c) { return variadic(c, "add", 1); }

/* Where(cond, x, y): the three broadcast to one shape, cond int32 (ONNX's bool) */
static pbl_status cv_where(pbl__onnx_ctx *c)
{
    pbl_value v[3], y;
    pbl_shape sh;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 3, 3)) != PBL_OK || (s = input_of(c, 0, PBL_I32, &v[0])) != PBL_OK ||
        (s = pbl__onnx_get(c, c->node->input[1], &v[1])) != PBL_OK || (s = input_of(c, 2, dtype_of(c, v[1]), &v[2])) != PBL_OK)
        return s;
    if (dtype_of(c, v[1]) != PBL_F32)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "x is %s; pebble's broadcasts take f32", pbl_dtype_name(dtype_of(c, v[1])));
    pbl_shape s0 = pbl__onnx_shape_of(c, v[0]), s1 = pbl__onnx_shape_of(c, v[1]), s2 = pbl__onnx_shape_of(c, v[2]), t;
    if (!pbl__onnx_bcast_shape(&s0, &s1, &t) || !pbl__onnx_bcast_shape(&t, &s2, &sh))
        NODE_FAIL(c, PBL_ERR_SHAPE, "condition, X and Y do not broadcast to one shape%s", "");
    if (!pbl_shape_equal(&s0, &sh))
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "the condition would need broadcasting, which pebble does for f32 only%s", "");
    static const char *const sfx[3] = { "broadcast_condition", "broadcast_x", "broadcast_y" };
    for (int k = 0; k < 3; k++)
        if ((s = pbl__onnx_to_shape(c, v[k], sh, "broadcast_to", sfx[k], &v[k])) != PBL_OK)
            return s;
    if ((s = pbl__onnx_emit(c, "where", v, 3, NULL, 0, NULL, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, c->node->output[0], y);
}

/* The math family's ops with the attributes pebble knows for each (pbl__onnx_op); consumed_inputs
 * is opset 1's legacy hint. */
#define CI "consumed_inputs"
static const pbl__onnx_op math_ops[] = {
    { "Clip", cv_clip, "min max " CI }, { "LeakyRelu", cv_leaky_relu, "alpha " CI }, { "Elu", cv_elu, "alpha " CI },
    { "Selu", cv_selu, "alpha gamma " CI }, { "PRelu", cv_prelu, CI }, { "Softplus", cv_softplus, "" },
    { "Softsign", cv_softsign, "" }, { "HardSigmoid", cv_hard_sigmoid, "alpha beta " CI },
    { "HardSwish", cv_hard_swish, "" }, { "ThresholdedRelu", cv_thresholded_relu, "alpha" },
    { "Shrink", cv_shrink, "lambd bias" }, { "Gelu", cv_gelu, "approximate" }, { "Erf", cv_erf, "" },
    { "Exp", cv_exp, CI }, { "Log", cv_log, CI }, { "Sqrt", cv_sqrt, CI }, { "Neg", cv_neg, CI }, { "Abs", cv_abs, CI },
    { "Reciprocal", cv_reciprocal, CI }, { "Sign", cv_sign, "" }, { "Floor", cv_floor, CI }, { "Ceil", cv_ceil, CI },
    { "Round", cv_round, "" }, { "Sin", cv_sin, "" }, { "Cos", cv_cos, "" }, { "Tan", cv_tan, "" },
    { "Asin", cv_asin, "" }, { "Acos", cv_acos, "" }, { "Atan", cv_atan, "" }, { "Sinh", cv_sinh, "" },
    { "Cosh", cv_cosh, "" }, { "Asinh", cv_asinh, "" }, { "Acosh", cv_acosh, "" }, { "Atanh", cv_atanh, "" },
    { "Celu", cv_celu, "alpha" }, { "Pow", cv_pow, "broadcast" },
    { "Min", cv_min, CI }, { "Max", cv_max, CI }, { "Sum", cv_sum, CI }, { "Mean", cv_mean, CI },
    { "Equal", cv_equal, "broadcast" }, { "Less", cv_less, "broadcast" }, { "Greater", cv_greater, "broadcast" },
    { "LessOrEqual", cv_less_equal, "" }, { "GreaterOrEqual", cv_greater_equal, "" },
    { "Not", cv_not, "" }, { "And", cv_and, "broadcast" }, { "Or", cv_or, "broadcast" }, { "Xor", cv_xor, "broadcast" },
    { "Where", cv_where, "" }, { "IsNaN", cv_is_nan, "" }, { "IsInf", cv_is_inf, "detect_negative detect_positive" },
    { "Mod", cv_mod, "fmod" },
};

const pbl__onnx_op_table pbl__onnx_ops_math = { math_ops, sizeof math_ops / sizeof math_ops[0] };
