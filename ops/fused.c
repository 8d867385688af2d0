/*
 * The ops the fusion pass (graph/passes/fuse.c, pebble/fuse.h) writes; kernels in ops/cpu/fused.c
 * and ops/cuda/fused.cu. None has a gradient rule, and none ever needs one: fusion runs after
 * pbl_graph_gradient, on the finished training graph, so nothing differentiates through a
 * fused node (two of them are gradient computations themselves).
 *
 * fully_connected_act   x[N,in] w[out,in] b?[out] -> y[N,out] = act(x·wᵀ + b)
 *     The layouts of fully_connected (w is [out, in], row-major, y = x·wᵀ). Attributes:
 *     act (0 none, 1 relu, 2 sigmoid, 3 tanh, 4 gelu: the formulas of the ops of those
 *     names), bias_after (0: b enters the product the way fully_connected adds it — each row
 *     of y starts as b and the product accumulates onto it; 1: the product is formed first
 *     and b added after, the way add(fully_connected(x, w), b) rounds). The two differ only
 *     in rounding; the pass picks the one the unfused graph had, so fused and unfused results
 *     are the same bits on the CPU. A backend with a bias epilogue (cuBLASLt) may use either.
 *     Without b, bias_after has no effect.
 *
 * elementwise_chain     x, b1..bk (all x's shape) -> y (x's shape)
 *     Attribute codes: the steps (graph/ir/fused_codes.h, at most PBL_MAX_INTS), applied in order to the
 *     running value v, which starts as x; binary steps read b1, b2, ... in turn. Each step is
 *     the formula of the op it came from, computed in f32 as that op's kernel does, so the
 *     chain gives the unfused graph's bits, without writing its intermediates.
 *
 * fully_connected_grad_wb   dy[N,out] x[N,in] -> dw[out,in] = dyᵀ·x, db[out] = Σ_n dy[n,:]
 *     fully_connected's weight and bias gradients from the same incoming gradient, in one
 *     node: dw is matmul(dy, x, trans_a = 1)'s product, db is sum(dy, axes [0]) (equally
 *     sum_to(dy, [out]), the bias gradient of a separate add), summed row after row in the
 *     order those kernels use. On CUDA the reduction rides on the product (cuBLASLt's BGRADB
 *     epilogue), so dy is read once.
 *
 * matmul_act_grad           a b s -> dx = act_grad(op(a)·op(b), s)
 *     A data-gradient product followed by an activation's gradient: attributes trans_a and
 *     trans_b as matmul's (the same slots, first), act (1 relu, 2 sigmoid, 3 tanh, 4 gelu:
 *     relu_grad, ... gelu_grad's formula), s the value that gradient op reads (relu, sigmoid,
 *     tanh: their output; gelu: its input), shaped like the product. The product is written
 *     into dx and the gradient applied in place, so the product never exists as a value.
 */
#include <stdio.h>

#include "ops/cpu/kernels.h"
#include "graph/ir/fused_codes.h"

static const int8_t out0_over_in0[][2] = { { 0, 0 } };

/* ---- fully_connected_act ------------------------------------------------------------------ */

enum { FCA_ACT, FCA_BIAS_AFTER };
static const pbl__attr_spec fca_attrs[] = {
    { .name = "act", .type = PBL_ATTR_INT },
    { .name = "bias_after", .type = PBL_ATTR_INT },
};

static pbl_status fca_infer(pbl__infer_ctx *c)
{
    int64_t act = c->attr[FCA_ACT].i, after = c->attr[FCA_BIAS_AFTER].i;
    if (act < 0 || act >= PBL__ACT_COUNT)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "act is %lld; need 0 (none), 1 (relu), 2 (sigmoid), 3 (tanh) or 4 (gelu)",
                               (long long)act);
    if (after != 0 && after != 1)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "bias_after is %lld; need 0 or 1", (long long)after);
    /* the shapes are fully_connected's */
    return pbl__op_fully_connected.infer(c);
}

/* fully_connected's product; the bias and the activation ride on its write */
static void fca_cost(const pbl__cost_ctx *c, pbl__cost *out) { pbl__op_fully_connected.cost(c, out); }

const pbl__op pbl__op_fully_connected_act = {
    .name = "fully_connected_act", .n_in_min = 2, .n_in_max = 3, .n_out = 1,
    .attrs = fca_attrs, .n_attrs = 2,
    .infer = fca_infer,
    .cost = fca_cost,
    .cpu = pbl__cpu_fully_connected_act,
};

/* ---- fully_connected_grad_wb ------------------------------------------------------------- */

static pbl_status wb_infer(pbl__infer_ctx *c)
{
    char sd[96], sx[96];
    for (int32_t i = 0; i < 2; i++) {
        pbl_status s = pbl__infer_check_f32(c, i, i == 0 ? "dy" : "x");
        if (s != PBL_OK)
            return s;
    }
    const pbl_shape *dy = &c->in[0].shape, *x = &c->in[1].shape;
    if (dy->ndim != 2 || x->ndim != 2 || dy->dim[0] != x->dim[0])
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "dy is %s and x is %s; need dy [N, out] and x [N, in]",
                               pbl_shape_str(dy, sd, sizeof sd), pbl_shape_str(x, sx, sizeof sx));
    c->out[0].dtype = c->out[1].dtype = PBL_F32;
    c->out[0].shape = pbl_shape_make(2, (int64_t[]){ dy->dim[1], x->dim[1] });
    c->out[1].shape = pbl_shape_make(1, (int64_t[]){ dy->dim[1] });
    return PBL_OK;
}

/* dw = dyᵀ·x: 2·|dw|·N; db: one add per element of dy */
static void wb_cost(const pbl__cost_ctx *c, pbl__cost *out)
{
    const pbl_shape *dy = &c->in[0].shape;
    out->flops = 2 * pbl__cost_numel(&c->out[0]) * (dy->ndim >= 1 ? dy->dim[0] : 1) + pbl__cost_numel(&c->in[0]);
}

const pbl__op pbl__op_fully_connected_grad_wb = {
    .name = "fully_connected_grad_wb", .n_in_min = 2, .n_in_max = 2, .n_out = 2,
    .infer = wb_infer,
    .cost = wb_cost,
    .cpu = pbl__cpu_fully_connected_grad_wb,
};

/* ---- matmul_act_grad ---------------------------------------------------------------------- */

enum { MAG_TRANS_A, MAG_TRANS_B, MAG_ACT };
static const pbl__attr_spec mag_attrs[] = {
    { .name = "trans_a", .type = PBL_ATTR_INT }, /* matmul's two slots, in matmul's order */
    { .name = "trans_b", .type = PBL_ATTR_INT },
    { .name = "act", .type = PBL_ATTR_INT, .required = 1 },
};

static pbl_status mag_infer(pbl__infer_ctx *c)
{
    int64_t act = c->attr[MAG_ACT].i;
    if (act < PBL__ACT_RELU || act >= PBL__ACT_COUNT)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "act is %lld; need 1 (relu), 2 (sigmoid), 3 (tanh) or 4 (gelu)",
                               (long long)act);
    /* the product's shape is matmul's, from the same inputs and trans slots */
    pbl__infer_ctx mm = *c;
    mm.n_in = 2;
    pbl_status s = pbl__op_matmul.infer(&mm);
    if (s != PBL_OK)
        return s;
    s = pbl__infer_check_f32(c, 2, "s");
    if (s == PBL_OK && !pbl_shape_equal(&c->in[2].shape, &c->out[0].shape)) {
        char sp[96], ss[96];
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "the product is %s but s is %s; need the same shape",
                               pbl_shape_str(&c->out[0].shape, sp, sizeof sp), pbl_shape_str(&c->in[2].shape, ss, sizeof ss));
    }
    return s;
}

/* matmul's product (the same trans slots) and one operation per element for the gradient */
static void mag_cost(const pbl__cost_ctx *c, pbl__cost *out)
{
    pbl__op_matmul.cost(c, out);
    out->flops += pbl__cost_numel(&c->out[0]);
}

const pbl__op pbl__op_matmul_act_grad = {
    .name = "matmul_act_grad", .n_in_min = 3, .n_in_max = 3, .n_out = 1,
    .attrs = mag_attrs, .n_attrs = 3,
    .infer = mag_infer,
    .cost = mag_cost,
    .cpu = pbl__cpu_matmul_act_grad,
};

/* ---- elementwise_chain -------------------------------------------------------------------- */

static const pbl__attr_spec chain_attrs[] = { { .name = "codes", .type = PBL_ATTR_INTS, .required = 1 } };

static pbl_status chain_infer(pbl__infer_ctx *c)
{
    const pbl__attr_val *codes = &c->attr[0];
    if (codes->n_ints < 1)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "codes is empty; need at least one step");
    int32_t binary = 0;
    for (int32_t k = 0; k < codes->n_ints; k++) {
        if (codes->ints[k] < PBL__CHAIN_RELU || codes->ints[k] >= PBL__CHAIN_END)
            return pbl__infer_fail(c, PBL_ERR_ATTR, "codes[%d] is %lld; need 1..%d (graph/ir/fused_codes.h)", (int)k,
                                   (long long)codes->ints[k], PBL__CHAIN_END - 1);
        binary += pbl__chain_code_binary(codes->ints[k]);
    }
    if (c->n_in != 1 + binary)
        return pbl__infer_fail(c, PBL_ERR_ARITY, "%d inputs for %d binary steps; need x and one operand per binary step",
                               (int)c->n_in, (int)binary);
    for (int32_t i = 0; i < c->n_in; i++) {
        char what[32], first[8] = "x";
        snprintf(what, sizeof what, "input %d", (int)i);
        pbl_status s = pbl__infer_check_f32(c, i, what);
        if (s == PBL_OK && i > 0)
            s = pbl__infer_check_same(c, i, 0, what, first);
        if (s != PBL_OK)
            return s;
    }
    c->out[0] = c->in[0];
    return PBL_OK;
}

/* one operation per step per element: the unfused maps' sum */
static void chain_cost(const pbl__cost_ctx *c, pbl__cost *out)
{
    out->flops = pbl__cost_numel(&c->out[0]) * (c->attr[0].n_ints > 0 ? c->attr[0].n_ints : 1);
}

const pbl__op pbl__op_elementwise_chain = {
    .name = "elementwise_chain", .n_in_min = 1, .n_in_max = PBL__MAX_IN, .n_out = 1,
    .attrs = chain_attrs, .n_attrs = 1,
    .infer = chain_infer,
    /* each element of y is written after every input element at its index was read */
    .inplace = out0_over_in0, .n_inplace = 1,
    .cost = chain_cost,
    .cpu = pbl__cpu_elementwise_chain,
};
