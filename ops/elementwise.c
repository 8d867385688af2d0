/* add, sub, mul, div (b broadcast over a), scale, add_n, fill, copy. Kernels: ops/cpu/elementwise.c. */
#include <stdio.h>

#include "ops/shared/broadcast.h"
#include "ops/cpu/kernels.h"

static const int8_t out0_over_in0[][2] = { { 0, 0 } };

/* b broadcasts to a (right-aligned, dims equal or 1); y is shaped and typed as a */
static pbl_status binary_shape(pbl__infer_ctx *c)
{
    if (!pbl__bcast_ok(&c->in[0].shape, &c->in[1].shape)) {
        char sa[96], sb[96];
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "a is %s and b is %s; b must broadcast to a (right-aligned, dims equal or 1)",
                               pbl_shape_str(&c->in[0].shape, sa, sizeof sa),
                               pbl_shape_str(&c->in[1].shape, sb, sizeof sb));
    }
    c->out[0] = c->in[0];
    return PBL_OK;
}

static pbl_status binary_infer(pbl__infer_ctx *c)
{
    pbl_status s = pbl__infer_check_f32(c, 0, "a");
    if (s == PBL_OK)
        s = pbl__infer_check_f32(c, 1, "b");
    if (s != PBL_OK)
        return s;
    return binary_shape(c);
}

/* add, sub, mul also over i32 (both operands; wrapping on overflow, as ONNX's integer ops):
 * index and shape arithmetic on data, as exporters emit it. Not differentiable there. */
static pbl_status binary_infer_int(pbl__infer_ctx *c)
{
    if (c->in[0].dtype == PBL_I32 && c->in[1].dtype == PBL_I32)
        return binary_shape(c);
    if (c->in[0].dtype == PBL_I32 || c->in[1].dtype == PBL_I32)
        return pbl__infer_fail(c, PBL_ERR_DTYPE, "a is %s and b is %s; both must be f32, or both i32",
                               pbl_dtype_name(c->in[0].dtype), pbl_dtype_name(c->in[1].dtype));
    return binary_infer(c);
}

/* The gradient reaching b: dy itself when shapes agree, else summed down to b's shape. */
static pbl_value reduce_to(pbl__grad_ctx *c, pbl_value dy, pbl_value like, const char *suffix)
{
    pbl_value_info yi, bi;
    if (pbl_graph_value_info(c->g, dy, &yi) != PBL_OK || pbl_graph_value_info(c->g, like, &bi) != PBL_OK)
        return PBL_NONE;
    if (pbl_shape_equal(&yi.shape, &bi.shape))
        return dy;
    pbl_attr at = PBL_ATTR_INTS("shape", bi.shape.dim, bi.shape.ndim);
    return pbl__grad_emit(c, "sum_to", suffix, &dy, 1, &at, 1);
}

static pbl_status add_grad(pbl__grad_ctx *c)
{
    if (c->need[0])
        c->dx[0] = c->dy[0];
    if (c->need[1])
        c->dx[1] = reduce_to(c, c->dy[0], c->x[1], "grad_b");
    return c->status;
}

static pbl_status sub_grad(pbl__grad_ctx *c)
{
    if (c->need[0])
        c->dx[0] = c->dy[0];
    if (c->need[1]) {
        pbl_value r = reduce_to(c, c->dy[0], c->x[1], "grad_b_sum");
        pbl_attr neg = PBL_ATTR_FLOAT("alpha", -1.0);
        c->dx[1] = r == PBL_NONE ? PBL_NONE : pbl__grad_emit(c, "scale", "grad_b", &r, 1, &neg, 1);
    }
    return c->status;
}

static pbl_status mul_grad(pbl__grad_ctx *c)
{
    pbl_value dy = c->dy[0];
    if (c->need[0])
        c->dx[0] = pbl__grad_emit(c, "mul", "grad_a", (pbl_value[]){ dy, c->x[1] }, 2, NULL, 0);
    if (c->need[1]) {
        pbl_value p = pbl__grad_emit(c, "mul", "grad_b_full", (pbl_value[]){ dy, c->x[0] }, 2, NULL, 0);
        c->dx[1] = p == PBL_NONE ? PBL_NONE : reduce_to(c, p, c->x[1], "grad_b");
    }
    return c->status;
}

const pbl__op pbl__op_add = {
    .name = "add", .n_in_min = 2, .n_in_max = 2, .n_out = 1,
    .infer = binary_infer_int, .grad = add_grad,
    .inplace = out0_over_in0, .n_inplace = 1,
    .cpu = pbl__cpu_add,
};

const pbl__op pbl__op_sub = {
    .name = "sub", .n_in_min = 2, .n_in_max = 2, .n_out = 1,
    .infer = binary_infer_int, .grad = sub_grad,
    .inplace = out0_over_in0, .n_inplace = 1,
    .cpu = pbl__cpu_sub,
};

/* y = a / b: da = dy / b; db = −Σ(dy·y / b) over b's broadcast dims (y / b = a / b²) */
static pbl_status div_grad(pbl__grad_ctx *c)
{
    pbl_value dy = c->dy[0];
    if (c->need[0])
        c->dx[0] = pbl__grad_emit(c, "div", "grad_a", (pbl_value[]){ dy, c->x[1] }, 2, NULL, 0);
    if (c->need[1]) {
        pbl_value p = pbl__grad_emit(c, "mul", "grad_b_dy_y", (pbl_value[]){ dy, c->y[0] }, 2, NULL, 0);
        pbl_value q = p == PBL_NONE ? PBL_NONE : pbl__grad_emit(c, "div", "grad_b_full", (pbl_value[]){ p, c->x[1] }, 2, NULL, 0);
        pbl_value r = q == PBL_NONE ? PBL_NONE : reduce_to(c, q, c->x[1], "grad_b_sum");
        pbl_attr neg = PBL_ATTR_FLOAT("alpha", -1.0);
        c->dx[1] = r == PBL_NONE ? PBL_NONE : pbl__grad_emit(c, "scale", "grad_b", &r, 1, &neg, 1);
    }
    return c->status;
}

const pbl__op pbl__op_div = {
    .name = "div", .n_in_min = 2, .n_in_max = 2, .n_out = 1,
    .infer = binary_infer, .grad = div_grad,
    .grad_reads_in = 0x2, .grad_reads_out = 0x1,
    .inplace = out0_over_in0, .n_inplace = 1,
    .cpu = pbl__cpu_div,
};

const pbl__op pbl__op_mul = {
    .name = "mul", .n_in_min = 2, .n_in_max = 2, .n_out = 1,
    .infer = binary_infer_int, .grad = mul_grad,
    .grad_reads_in = 0x3,
    .inplace = out0_over_in0, .n_inplace = 1,
    .cpu = pbl__cpu_mul,
};

/* ---- scale: y = alpha·x ------------------------------------------------------------------- */

static const pbl__attr_spec scale_attrs[] = { { .name = "alpha", .type = PBL_ATTR_FLOAT, .f = 1.0 } };

static pbl_status scale_grad(pbl__grad_ctx *c)
{
    pbl_attr at = PBL_ATTR_FLOAT("alpha", c->attr[0].f);
    c->dx[0] = pbl__grad_emit(c, "scale", "grad", &c->dy[0], 1, &at, 1);
    return c->status;
}

const pbl__op pbl__op_scale = {
    .name = "scale", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .attrs = scale_attrs, .n_attrs = 1,
    .infer = pbl__infer_same_as_input, .grad = scale_grad,
    .inplace = out0_over_in0, .n_inplace = 1,
    .cpu = pbl__cpu_scale,
};

/* ---- add_n: y = x1 + ... + xk, the gradient pass's aggregation node ----------------------- */

static pbl_status add_n_infer(pbl__infer_ctx *c)
{
    for (int32_t i = 0; i < c->n_in; i++) {
        char what[32];
        snprintf(what, sizeof what, "input %d", (int)i);
        pbl_status s = pbl__infer_check_f32(c, i, what);
        if (s == PBL_OK && i > 0) {
            char other[32];
            snprintf(other, sizeof other, "input 0");
            s = pbl__infer_check_same(c, i, 0, what, other);
        }
        if (s != PBL_OK)
            return s;
    }
    c->out[0] = c->in[0];
    return PBL_OK;
}

static pbl_status add_n_grad(pbl__grad_ctx *c)
{
    for (int32_t i = 0; i < c->n_in; i++)
        if (c->need[i])
            c->dx[i] = c->dy[0];
    return c->status;
}

/* n − 1 adds per element; with one input a copy, one per element like copy's */
static void add_n_cost(const pbl__cost_ctx *c, pbl__cost *out)
{
    out->flops = pbl__cost_numel(&c->out[0]) * (c->n_in > 1 ? c->n_in - 1 : 1);
}

const pbl__op pbl__op_add_n = {
    .name = "add_n", .n_in_min = 1, .n_in_max = PBL__MAX_IN, .n_out = 1,
    .infer = add_n_infer, .grad = add_n_grad,
    .inplace = out0_over_in0, .n_inplace = 1,
    .cost = add_n_cost,
    .cpu = pbl__cpu_add_n,
};

/* ---- fill: y[shape] = value (no inputs; the gradient pass seeds d loss / d loss = 1) ----- */

enum { FILL_SHAPE, FILL_VALUE };
static const pbl__attr_spec fill_attrs[] = {
    { .name = "shape", .type = PBL_ATTR_INTS },
    { .name = "value", .type = PBL_ATTR_FLOAT },
};

static pbl_status fill_infer(pbl__infer_ctx *c)
{
    c->out[0].dtype = PBL_F32;
    return pbl__infer_shape_attr(c, &c->attr[FILL_SHAPE], &c->out[0].shape);
}

const pbl__op pbl__op_fill = {
    .name = "fill", .n_in_min = 0, .n_in_max = 0, .n_out = 1,
    .attrs = fill_attrs, .n_attrs = 2,
    .infer = fill_infer,
    .cpu = pbl__cpu_fill,
};

/* ---- copy ------------------------------------------------------------------------------- */

static pbl_status copy_infer(pbl__infer_ctx *c)
{
    c->out[0] = c->in[0];
    return PBL_OK;
}

static pbl_status copy_grad(pbl__grad_ctx *c)
{
    c->dx[0] = c->dy[0];
    return c->status;
}

const pbl__op pbl__op_copy = {
    .name = "copy", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .infer = copy_infer, .grad = copy_grad,
    .cpu = pbl__cpu_copy,
};
