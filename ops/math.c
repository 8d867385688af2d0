/* The math family: element-wise maps whose formulas are one table (ops/shared/math.h), the
 * ONNX element-wise ops beyond the core arithmetic and activations. Kernels: ops/cpu/math.c,
 * ops/cuda/math.cu. Every descriptor here is generated from the registry's lists
 * (graph/ir/registry.h: PBL__MATH_*_LIST); what differs per op is data: its attributes below.
 *
 *   unary   <n>(x) -> y, f32; <n>_grad(dy, x) -> dx = dy·f'(x), same attributes
 *   binary  <n>(a, b) -> y, f32, b broadcast to a (right-aligned, dims equal or 1);
 *           <n>_grad(dy, a, b; wrt) -> dy·∂f/∂(a or b), a's shape (summed down to b's by the rule)
 *   compare <n>(a, b) -> int32 0/1, a and b both f32 or both int32, b broadcast to a;
 *           logical_* take int32 (nonzero is true); logical_not(x) likewise
 *   predicate <n>(x) -> int32 0/1, x f32 (is_nan, is_inf)
 *   int map <n>(a, b) -> int32, a and b int32, b broadcast to a (mod)
 *   where   (cond, x, y) -> cond ? x : y, cond int32, all three one shape (any dtype for x, y)
 */
#include <float.h>
#include <stdio.h>

#include "ops/shared/broadcast.h"
#include "ops/shared/math.h"
#include "ops/cpu/kernels.h"

static const int8_t out0_over_in0[][2] = { { 0, 0 } };

/* ---- the attributes: p and q of the formulas, named as ONNX names them ------------------------ */

#define F(n, v) { .name = (n), .type = PBL_ATTR_FLOAT, .f = (v) }
static const pbl__attr_spec clip_attrs[] = { F("min", -FLT_MAX), F("max", FLT_MAX) };
static const pbl__attr_spec leaky_relu_attrs[] = { F("alpha", 0.01) };
static const pbl__attr_spec elu_attrs[] = { F("alpha", 1.0) };
static const pbl__attr_spec selu_attrs[] = { F("alpha", 1.67326319217681884765625),
                                             F("gamma", 1.05070102214813232421875) };
static const pbl__attr_spec hard_sigmoid_attrs[] = { F("alpha", 0.2), F("beta", 0.5) };
static const pbl__attr_spec thresholded_relu_attrs[] = { F("alpha", 1.0) };
static const pbl__attr_spec shrink_attrs[] = { F("lambd", 0.5), F("bias", 0.0) };
static const pbl__attr_spec celu_attrs[] = { F("alpha", 1.0) };
#undef F
/* the maps without attributes */
#define softplus_attrs   NULL
#define softsign_attrs   NULL
#define hard_swish_attrs NULL
#define gelu_tanh_attrs  NULL
#define erf_attrs        NULL
#define exp_attrs        NULL
#define log_attrs        NULL
#define sqrt_attrs       NULL
#define neg_attrs        NULL
#define abs_attrs        NULL
#define reciprocal_attrs NULL
#define sign_attrs       NULL
#define floor_attrs      NULL
#define ceil_attrs       NULL
#define round_attrs      NULL
#define sin_attrs        NULL
#define cos_attrs        NULL
#define tan_attrs        NULL
#define asin_attrs       NULL
#define acos_attrs       NULL
#define atan_attrs       NULL
#define sinh_attrs       NULL
#define cosh_attrs       NULL
#define asinh_attrs      NULL
#define acosh_attrs      NULL
#define atanh_attrs      NULL

/* ---- unary maps ------------------------------------------------------------------------------- */

static pbl_status unary_grad_infer(pbl__infer_ctx *c)
{
    pbl_status s = pbl__infer_check_f32(c, 0, "dy");
    if (s == PBL_OK)
        s = pbl__infer_check_f32(c, 1, "x");
    if (s == PBL_OK)
        s = pbl__infer_check_same(c, 0, 1, "dy", "x");
    if (s == PBL_OK)
        c->out[0] = c->in[0];
    return s;
}

/* dx = <op>_grad(dy, x) with the forward node's attributes */
static pbl_status unary_grad(pbl__grad_ctx *c, const char *op, const pbl__attr_spec *spec, int32_t n_attrs)
{
    pbl_attr at[2] = { PBL_ATTR_FLOAT("", 0.0), PBL_ATTR_FLOAT("", 0.0) }; /* set for -O3's sake: n_attrs <= 2 */
    for (int32_t k = 0; k < n_attrs; k++)
        at[k] = PBL_ATTR_FLOAT(spec[k].name, c->attr[k].f);
    c->dx[0] = pbl__grad_emit(c, op, "grad", (pbl_value[]){ c->dy[0], c->x[0] }, 2, at, n_attrs);
    return c->status;
}

#define UNARY_OP(n)                                                                                 \
    _Static_assert(PBL__MATH_ATTRS_##n <= 2, #n ": at most 2 attributes");                          \
    static pbl_status n##_grad_rule(pbl__grad_ctx *c)                                               \
    {                                                                                               \
        return unary_grad(c, #n "_grad", n##_attrs, PBL__MATH_ATTRS_##n);                           \
    }                                                                                               \
    const pbl__op pbl__op_##n = {                                                                   \
        .name = #n, .n_in_min = 1, .n_in_max = 1, .n_out = 1,                                       \
        .attrs = n##_attrs, .n_attrs = PBL__MATH_ATTRS_##n,                                         \
        .infer = pbl__infer_same_as_input, .grad = n##_grad_rule, .grad_reads_in = 0x1,             \
        .cpu = pbl__cpu_##n,                                                                        \
    };                                                                                              \
    const pbl__op pbl__op_##n##_grad = {                                                            \
        .name = #n "_grad", .n_in_min = 2, .n_in_max = 2, .n_out = 1,                               \
        .attrs = n##_attrs, .n_attrs = PBL__MATH_ATTRS_##n,                                         \
        .infer = unary_grad_infer, .inplace = out0_over_in0, .n_inplace = 1,                        \
        .cpu = pbl__cpu_##n##_grad,                                                                 \
    };
PBL__MATH_UNARY_LIST(UNARY_OP, )

/* ---- binary maps ------------------------------------------------------------------------------ */

/* a and b of dtype dt (b's the same), b broadcast to a */
static pbl_status binary_check(pbl__infer_ctx *c, int32_t ia, int32_t ib, pbl_dtype dt)
{
    const int32_t at[2] = { ia, ib };
    for (int32_t k = 0; k < 2; k++)
        if (c->in[at[k]].dtype != dt)
            return pbl__infer_fail(c, PBL_ERR_DTYPE, "%s is %s, expected %s", k == 0 ? "a" : "b",
                                   pbl_dtype_name(c->in[at[k]].dtype), pbl_dtype_name(dt));
    if (!pbl__bcast_ok(&c->in[ia].shape, &c->in[ib].shape)) {
        char sa[96], sb[96];
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "a is %s and b is %s; b must broadcast to a (right-aligned, dims equal or 1)",
                               pbl_shape_str(&c->in[ia].shape, sa, sizeof sa),
                               pbl_shape_str(&c->in[ib].shape, sb, sizeof sb));
    }
    return PBL_OK;
}

static pbl_status binary_infer(pbl__infer_ctx *c)
{
    pbl_status s = binary_check(c, 0, 1, PBL_F32);
    if (s == PBL_OK)
        c->out[0] = c->in[0];
    return s;
}

/* (dy, a, b) -> a's shape */
static pbl_status binary_grad_infer(pbl__infer_ctx *c)
{
    pbl_status s = binary_check(c, 1, 2, PBL_F32);
    if (s == PBL_OK)
        s = pbl__infer_check_f32(c, 0, "dy");
    if (s == PBL_OK)
        s = pbl__infer_check_same(c, 0, 1, "dy", "a");
    if (s == PBL_OK)
        c->out[0] = c->in[1];
    return s;
}

static const pbl__attr_spec binary_grad_attrs[] = { { .name = "wrt", .type = PBL_ATTR_INT, .required = 1 } };

/* da = <op>_grad(dy, a, b; wrt 0); db = sum_to(<op>_grad(dy, a, b; wrt 1)) when b broadcast */
static pbl_status binary_grad(pbl__grad_ctx *c, const char *op)
{
    const pbl_value in[] = { c->dy[0], c->x[0], c->x[1] };
    if (c->need[0]) {
        pbl_attr w = PBL_ATTR_INT("wrt", 0);
        c->dx[0] = pbl__grad_emit(c, op, "grad_a", in, 3, &w, 1);
    }
    if (c->need[1]) {
        pbl_attr w = PBL_ATTR_INT("wrt", 1);
        pbl_value full = pbl__grad_emit(c, op, "grad_b_full", in, 3, &w, 1);
        pbl_value_info fi, bi;
        if (full == PBL_NONE || pbl_graph_value_info(c->g, full, &fi) != PBL_OK ||
            pbl_graph_value_info(c->g, c->x[1], &bi) != PBL_OK)
            return c->status;
        if (pbl_shape_equal(&fi.shape, &bi.shape)) {
            c->dx[1] = full;
        } else {
            pbl_attr at = PBL_ATTR_INTS("shape", bi.shape.dim, bi.shape.ndim);
            c->dx[1] = pbl__grad_emit(c, "sum_to", "grad_b", &full, 1, &at, 1);
        }
    }
    return c->status;
}

static pbl_status binary_grad_check(pbl__infer_ctx *c)
{
    if (c->attr[0].i != 0 && c->attr[0].i != 1)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "wrt is %lld; it must be 0 (a) or 1 (b)", (long long)c->attr[0].i);
    return binary_grad_infer(c);
}

#define BINARY_OP(n)                                                                                \
    static pbl_status n##_grad_rule(pbl__grad_ctx *c) { return binary_grad(c, #n "_grad"); }        \
    const pbl__op pbl__op_##n = {                                                                   \
        .name = #n, .n_in_min = 2, .n_in_max = 2, .n_out = 1,                                       \
        .infer = binary_infer, .grad = n##_grad_rule, .grad_reads_in = 0x3,                         \
        .cpu = pbl__cpu_##n,                                                                        \
    };                                                                                              \
    const pbl__op pbl__op_##n##_grad = {                                                            \
        .name = #n "_grad", .n_in_min = 3, .n_in_max = 3, .n_out = 1,                               \
        .attrs = binary_grad_attrs, .n_attrs = 1,                                                   \
        .infer = binary_grad_check, .inplace = out0_over_in0, .n_inplace = 1,                       \
        .cpu = pbl__cpu_##n##_grad,                                                                 \
    };
PBL__MATH_BINARY_LIST(BINARY_OP, )

/* ---- comparisons and logic: int32 0/1 out, not differentiable --------------------------------- */

static pbl_status compare_infer(pbl__infer_ctx *c)
{
    pbl_status s = binary_check(c, 0, 1, c->in[0].dtype);
    if (s == PBL_OK) {
        c->out[0].dtype = PBL_I32;
        c->out[0].shape = c->in[0].shape;
    }
    return s;
}

static pbl_status logic_infer(pbl__infer_ctx *c)
{
    pbl_status s = binary_check(c, 0, 1, PBL_I32);
    if (s == PBL_OK)
        c->out[0] = c->in[0];
    return s;
}

#define COMPARE_OP(n, rule)                                                                         \
    const pbl__op pbl__op_##n = {                                                                   \
        .name = #n, .n_in_min = 2, .n_in_max = 2, .n_out = 1, .infer = rule, .cpu = pbl__cpu_##n,   \
    };
#define COMPARE(n) COMPARE_OP(n, compare_infer)
#define LOGIC(n)   COMPARE_OP(n, logic_infer)
PBL__MATH_COMPARE_LIST(COMPARE)
PBL__MATH_LOGIC_LIST(LOGIC)

static pbl_status not_infer(pbl__infer_ctx *c)
{
    if (c->in[0].dtype != PBL_I32)
        return pbl__infer_fail(c, PBL_ERR_DTYPE, "x is %s, expected i32", pbl_dtype_name(c->in[0].dtype));
    c->out[0] = c->in[0];
    return PBL_OK;
}

const pbl__op pbl__op_logical_not = {
    .name = "logical_not", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .infer = not_infer, .inplace = out0_over_in0, .n_inplace = 1,
    .cpu = pbl__cpu_logical_not,
};

/* ---- predicates: f32 -> int32 0/1; int maps: int32 -> int32 ------------------------------------- */

static pbl_status predicate_infer(pbl__infer_ctx *c)
{
    pbl_status s = pbl__infer_check_f32(c, 0, "x");
    if (s == PBL_OK) {
        c->out[0].dtype = PBL_I32;
        c->out[0].shape = c->in[0].shape;
    }
    return s;
}

#define I(n, v) { .name = (n), .type = PBL_ATTR_INT, .i = (v) }
static const pbl__attr_spec is_inf_attrs[] = { I("detect_negative", 1), I("detect_positive", 1) };
#undef I
#define is_nan_attrs NULL

#define PREDICATE(n)                                                                                \
    const pbl__op pbl__op_##n = {                                                                   \
        .name = #n, .n_in_min = 1, .n_in_max = 1, .n_out = 1,                                       \
        .attrs = n##_attrs, .n_attrs = PBL__MATH_ATTRS_##n,                                         \
        .infer = predicate_infer, .cpu = pbl__cpu_##n,                                              \
    };
PBL__MATH_PREDICATE_LIST(PREDICATE)
PBL__MATH_INT_LIST(LOGIC)

/* ---- where ------------------------------------------------------------------------------------ */

static pbl_status where_infer(pbl__infer_ctx *c)
{
    if (c->in[0].dtype != PBL_I32)
        return pbl__infer_fail(c, PBL_ERR_DTYPE, "cond is %s, expected i32", pbl_dtype_name(c->in[0].dtype));
    if (c->in[1].dtype != c->in[2].dtype)
        return pbl__infer_fail(c, PBL_ERR_DTYPE, "x is %s but y is %s; they must agree", pbl_dtype_name(c->in[1].dtype),
                               pbl_dtype_name(c->in[2].dtype));
    pbl_status s = pbl__infer_check_same(c, 1, 0, "x", "cond");
    if (s == PBL_OK)
        s = pbl__infer_check_same(c, 2, 0, "y", "cond");
    if (s == PBL_OK)
        c->out[0] = c->in[1];
    return s;
}

/* dx = where(cond, dy, 0), dy' = where(cond, 0, dy) */
static pbl_status where_grad(pbl__grad_ctx *c)
{
    pbl_value_info yi;
    if (pbl_graph_value_info(c->g, c->dy[0], &yi) != PBL_OK)
        return PBL_ERR_INVALID_ARG;
    pbl_attr fa[] = { PBL_ATTR_INTS("shape", yi.shape.dim, yi.shape.ndim), PBL_ATTR_FLOAT("value", 0.0) };
    pbl_value zero = pbl__grad_emit(c, "fill", "grad_zero", NULL, 0, fa, 2);
    if (zero == PBL_NONE)
        return c->status;
    if (c->need[1])
        c->dx[1] = pbl__grad_emit(c, "where", "grad_x", (pbl_value[]){ c->x[0], c->dy[0], zero }, 3, NULL, 0);
    if (c->need[2])
        c->dx[2] = pbl__grad_emit(c, "where", "grad_y", (pbl_value[]){ c->x[0], zero, c->dy[0] }, 3, NULL, 0);
    return c->status;
}

const pbl__op pbl__op_where = {
    .name = "where", .n_in_min = 3, .n_in_max = 3, .n_out = 1,
    .infer = where_infer, .grad = where_grad, .grad_reads_in = 0x1,
    .cpu = pbl__cpu_where,
};
