/* CPU kernels of the fused ops (ops/fused.c): fully_connected_act, elementwise_chain,
 * fully_connected_grad_wb and matmul_act_grad. Each computes, element by element, the same
 * f32 expressions as the kernels of the ops it replaces, in the same order (the products are
 * the very sgemm calls of those kernels), so fused and unfused graphs give the same bits. */
#include "ops/cpu/kernels.h"
#include "graph/ir/fused_codes.h"

/* y[i] = act(y[i] (+ b[i % cols])), one pass over the product */
static PBL__HOT void epilogue(float *y, const float *b, int64_t rows, int64_t cols, int64_t act)
{
    for (int64_t r = 0; r < rows; r++) {
        float *row = y + r * cols;
        if (b)
            for (int64_t j = 0; j < cols; j++)
                row[j] = row[j] + b[j];
        switch (act) {
        case PBL__ACT_RELU: for (int64_t j = 0; j < cols; j++) row[j] = pbl__act_relu(row[j]); break;
        case PBL__ACT_SIGMOID: pbl__cpu_sigmoid_n(row, row, cols); break;
        case PBL__ACT_TANH: pbl__cpu_tanh_n(row, row, cols); break;
        case PBL__ACT_GELU: for (int64_t j = 0; j < cols; j++) row[j] = pbl__act_gelu(row[j]); break;
        default: break;
        }
    }
}

pbl_status pbl__cpu_fully_connected_act(const pbl__kargs *a)
{
    int64_t act = a->attr[0].i, after = a->attr[1].i;
    /* the product (with b folded in unless it comes after) is fully_connected's own kernel */
    pbl__kargs fc = *a;
    if (after && a->n_in == 3)
        fc.n_in = 2;
    pbl_status s = pbl__cpu_fully_connected(&fc);
    if (s != PBL_OK)
        return s;
    const float *b = after && a->n_in == 3 ? PBL__IN(a, 2) : NULL;
    if (b || act != PBL__ACT_NONE)
        epilogue(PBL__OUT(a, 0), b, a->out_meta[0].shape.dim[0], a->out_meta[0].shape.dim[1], act);
    return PBL_OK;
}

/* One step over a block of the running value v, with b the step's operand (binary steps). */
static inline void chain_step(int64_t code, float *v, const float *b, int64_t n)
{
    switch (code) {
    case PBL__CHAIN_RELU: for (int64_t j = 0; j < n; j++) v[j] = pbl__act_relu(v[j]); break;
    case PBL__CHAIN_SIGMOID: pbl__cpu_sigmoid_n(v, v, n); break;
    case PBL__CHAIN_TANH: pbl__cpu_tanh_n(v, v, n); break;
    case PBL__CHAIN_GELU: for (int64_t j = 0; j < n; j++) v[j] = pbl__act_gelu(v[j]); break;
    case PBL__CHAIN_ADD: for (int64_t j = 0; j < n; j++) v[j] = v[j] + b[j]; break;
    case PBL__CHAIN_SUB: for (int64_t j = 0; j < n; j++) v[j] = v[j] - b[j]; break;
    case PBL__CHAIN_MUL: for (int64_t j = 0; j < n; j++) v[j] = v[j] * b[j]; break;
    case PBL__CHAIN_DIV: for (int64_t j = 0; j < n; j++) v[j] = v[j] / b[j]; break;
    case PBL__CHAIN_RADD: for (int64_t j = 0; j < n; j++) v[j] = b[j] + v[j]; break;
    case PBL__CHAIN_RSUB: for (int64_t j = 0; j < n; j++) v[j] = b[j] - v[j]; break;
    case PBL__CHAIN_RMUL: for (int64_t j = 0; j < n; j++) v[j] = b[j] * v[j]; break;
    case PBL__CHAIN_RDIV: for (int64_t j = 0; j < n; j++) v[j] = b[j] / v[j]; break;
    default: break; /* the shape rule admitted only the codes above */
    }
}

/* The chain runs over blocks small enough to stay in L1: each step is a plain vectorisable
 * loop over the block, and y is written once per element, after every input at that index
 * was read (so y may share x's bytes). */
enum { CHAIN_BLOCK = 512 };

PBL__HOT pbl_status pbl__cpu_elementwise_chain(const pbl__kargs *a)
{
    const pbl__attr_val *codes = &a->attr[0];
    int64_t n = PBL__NUMEL(a->in_meta[0]);
    float v[CHAIN_BLOCK];
    for (int64_t i0 = 0; i0 < n; i0 += CHAIN_BLOCK) {
        int64_t len = n - i0 < CHAIN_BLOCK ? n - i0 : CHAIN_BLOCK;
        const float *x = PBL__IN(a, 0) + i0;
        for (int64_t j = 0; j < len; j++)
            v[j] = x[j];
        int32_t operand = 1;
        for (int32_t k = 0; k < codes->n_ints; k++) {
            const float *b = pbl__chain_code_binary(codes->ints[k]) ? PBL__IN(a, operand++) + i0 : NULL;
            chain_step(codes->ints[k], v, b, len);
        }
        float *y = PBL__OUT(a, 0) + i0;
        for (int64_t j = 0; j < len; j++)
            y[j] = v[j];
    }
    return PBL_OK;
}

/* ---- backward ----------------------------------------------------------------------------- */

/* matmul's (trans_a, trans_b) slots for dw = dyᵀ·x */
static const pbl__attr_val trans_a_only[2] = { { .i = 1, .set = 1 }, { .i = 0, .set = 1 } };

pbl_status pbl__cpu_fully_connected_grad_wb(const pbl__kargs *a)
{
    /* dw: matmul(dy, x, trans_a = 1)'s kernel */
    pbl__kargs mm = *a;
    mm.n_out = 1;
    mm.attr = trans_a_only;
    pbl_status s = pbl__cpu_matmul(&mm);
    if (s != PBL_OK)
        return s;
    /* db: sum_to's kernel, dy [N, out] -> [out]: the walk sum(dy, axes [0]) takes too (a zeroed
     * row, then each row of dy added in turn) */
    pbl__kargs st = *a;
    st.n_in = 1;
    st.n_out = 1;
    st.out = a->out + 1;
    st.out_meta = a->out_meta + 1;
    st.attr = NULL;
    return pbl__cpu_sum_to(&st);
}

static PBL__HOT void act_grad_inplace(float *dx, const float *sv, int64_t n, int64_t act)
{
    switch (act) {
    case PBL__ACT_RELU: for (int64_t i = 0; i < n; i++) dx[i] = pbl__act_relu_grad(dx[i], sv[i]); break;
    case PBL__ACT_SIGMOID: for (int64_t i = 0; i < n; i++) dx[i] = pbl__act_sigmoid_grad(dx[i], sv[i]); break;
    case PBL__ACT_TANH: for (int64_t i = 0; i < n; i++) dx[i] = pbl__act_tanh_grad(dx[i], sv[i]); break;
    case PBL__ACT_GELU: for (int64_t i = 0; i < n; i++) dx[i] = pbl__act_gelu_grad(dx[i], sv[i]); break;
    default: break; /* the shape rule admitted only the codes above */
    }
}

pbl_status pbl__cpu_matmul_act_grad(const pbl__kargs *a)
{
    /* the product: matmul's kernel (its two attribute slots come first), written into dx */
    pbl__kargs mm = *a;
    mm.n_in = 2;
    pbl_status s = pbl__cpu_matmul(&mm);
    if (s != PBL_OK)
        return s;
    act_grad_inplace(PBL__OUT(a, 0), PBL__IN(a, 2), PBL__NUMEL(a->out_meta[0]), a->attr[2].i);
    return PBL_OK;
}
