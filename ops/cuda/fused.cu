/*
 * CUDA kernels of the fusion pass's ops (ops/fused.c): fully_connected_act,
 * fully_connected_grad_wb and matmul_act_grad (not elementwise_chain yet).
 *
 * fully_connected_act: y = act(x·wᵀ + b).
 *
 * relu and none (with a bias, or relu alone) run as ONE cuBLASLt matmul with a fused
 * epilogue (CUBLASLT_EPILOGUE_RELU_BIAS, _BIAS, _RELU): the bias add and the activation
 * happen as the product's tile is written, with no second pass over y. The bias is added
 * after the product, which is the CPU kernel's bias_after order; with bias_after 0 the CPU
 * starts from b and accumulates the product onto it, which differs by float rounding only.
 * Where cuBLASLt has no algorithm for the configuration (lt_algo below) they take the other
 * acts' path: sigmoid, tanh and gelu use fully_connected's kernel then one element-wise pass
 * (cuBLASLt's GELU epilogue is the tanh approximation, not the erf form pebble's gelu computes).
 *
 * Layouts as in linear.cu: row-major y[n, out] = x[n, in]·wᵀ is column-major
 * yᵀ[out, n] = op_T(w as [in, out])·(x as [in, n]); the bias is per row of yᵀ, which is
 * what cuBLASLt's bias epilogues add (a vector of length m = out).
 */
#include <cstring>

#include "ops/cuda/common.cuh"

extern "C" {
#include "graph/ir/fused_codes.h"
}

__global__ static void epilogue_k(float *y, const float *b, int64_t rows, int64_t cols, int act)
{
    PBL__GRID_LOOP(i, rows * cols) {
        float v = y[i];
        if (b)
            v = v + b[i % cols];
        switch (act) {
        case PBL__ACT_RELU: v = pbl__act_relu(v); break;
        case PBL__ACT_SIGMOID: v = pbl__act_sigmoid(v); break;
        case PBL__ACT_TANH: v = pbl__act_tanh(v); break;
        case PBL__ACT_GELU: v = pbl__act_gelu(v); break;
        default: break;
        }
        y[i] = v;
    }
}

/* ---- cuBLASLt's algorithm, asked for explicitly --------------------------------------------- *
 *
 * Not a NULL algo: cublasLtMatmul then runs an implicit heuristic query "with default search
 * preferences", and those (cublasLt.h, cublasLtMatmulPreferenceAttributes_t) allow no workspace
 * and assume A, B, C and D 256-byte aligned, while the arena aligns tensors to 64 bytes (a
 * kernel chosen for 256 may fail on them: "CUBLAS_STATUS_SUCCESS doesn't fully guarantee algo
 * will run (will fail if e.g. buffers are not correctly aligned)", cublasLtMatmulAlgoCheck).
 * So the preference offers the stream's workspace and declares each pointer's real alignment
 * (the bias pointer the heuristic reads from the descriptor itself), as PyTorch's
 * cublasLt path does. No algorithm (CUBLAS_STATUS_NOT_SUPPORTED, or zero results) is the
 * caller's cue to fall back to sgemm and a kernel. */

static uint32_t lt_align(const void *p)
{
    uint32_t al = 256;
    while (al > 1 && (uintptr_t)p % al != 0)
        al /= 2;
    return al;
}

/* *found 1 and *algo set, or *found 0 when cuBLASLt has no algorithm for this product. */
static pbl_status lt_algo(const pbl__cuda_launch *l, const pbl__kargs *a, cublasLtMatmulDesc_t op,
                          cublasLtMatrixLayout_t la, const void *A, cublasLtMatrixLayout_t lb, const void *B,
                          cublasLtMatrixLayout_t ld, const void *D, cublasLtMatmulAlgo_t *algo, int *found)
{
    pbl_status s = PBL_OK;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t res;
    int n = 0;
    uint64_t ws = l->workspace_bytes;
    uint32_t al_a = lt_align(A), al_b = lt_align(B), al_d = lt_align(D); /* C is D */
    cublasStatus_t st;
    *found = 0;
    memset(&res, 0, sizeof res);
    PBL__CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
    PBL__CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    PBL__CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a));
    PBL__CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b));
    PBL__CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_d, sizeof al_d));
    PBL__CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d, sizeof al_d));
    st = cublasLtMatmulAlgoGetHeuristic(l->lt, op, la, lb, ld, ld, pref, 1, &res, &n);
    if (st == CUBLAS_STATUS_SUCCESS && n > 0 && res.state == CUBLAS_STATUS_SUCCESS) {
        *algo = res.algo;
        *found = 1;
    } else if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED) {
        snprintf(a->err, a->errlen, "cublasLtMatmulAlgoGetHeuristic failed at %s:%d: %s", __FILE__, __LINE__,
                 pbl__cublas_status_str(st));
        s = PBL_ERR_DEVICE;
    }
done:
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    return s;
}

/* y by cuBLASLt; *unsupported set (and nothing enqueued) when it declines. */
static pbl_status lt_fused(const pbl__cuda_launch *l, const pbl__kargs *a, int relu, int *unsupported)
{
    pbl_status s = PBL_OK;
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t lw = NULL, lx = NULL, ly = NULL;
    uint64_t n = (uint64_t)a->in_meta[0].shape.dim[0], in = (uint64_t)a->in_meta[0].shape.dim[1];
    uint64_t out = (uint64_t)a->in_meta[1].shape.dim[0];
    const float *bias = a->n_in == 3 ? PBL__IN(a, 2) : NULL;
    cublasOperation_t tw = CUBLAS_OP_T, tx = CUBLAS_OP_N;
    cublasLtEpilogue_t epi = bias ? (relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS) : CUBLASLT_EPILOGUE_RELU;
    float one = 1.0f, zero = 0.0f;
    cublasLtMatmulAlgo_t algo;
    int found = 0;
    cublasStatus_t st;
    PBL__CUBLAS(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    PBL__CUBLAS(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tw, sizeof tw));
    PBL__CUBLAS(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tx, sizeof tx));
    PBL__CUBLAS(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (bias)
        PBL__CUBLAS(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    /* column-major: w is [in, out] (ld in), x is [in, n] (ld in), y is [out, n] (ld out) */
    PBL__CUBLAS(cublasLtMatrixLayoutCreate(&lw, CUDA_R_32F, in, out, (int64_t)in));
    PBL__CUBLAS(cublasLtMatrixLayoutCreate(&lx, CUDA_R_32F, in, n, (int64_t)in));
    PBL__CUBLAS(cublasLtMatrixLayoutCreate(&ly, CUDA_R_32F, out, n, (int64_t)out));
    if ((s = lt_algo(l, a, op, lw, PBL__IN(a, 1), lx, PBL__IN(a, 0), ly, PBL__OUT(a, 0), &algo, &found)) != PBL_OK)
        goto done;
    if (!found) {
        *unsupported = 1;
        goto done;
    }
    st = cublasLtMatmul(l->lt, op, &one, PBL__IN(a, 1), lw, PBL__IN(a, 0), lx, &zero, PBL__OUT(a, 0), ly,
                        PBL__OUT(a, 0), ly, &algo, l->workspace, l->workspace_bytes, l->stream);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED) {
        *unsupported = 1;
    } else if (st != CUBLAS_STATUS_SUCCESS) {
        snprintf(a->err, a->errlen, "cublasLtMatmul (fused epilogue) failed at %s:%d: %s", __FILE__, __LINE__,
                 pbl__cublas_status_str(st));
        s = PBL_ERR_DEVICE;
    }
done:
    if (ly)
        cublasLtMatrixLayoutDestroy(ly);
    if (lx)
        cublasLtMatrixLayoutDestroy(lx);
    if (lw)
        cublasLtMatrixLayoutDestroy(lw);
    if (op)
        cublasLtMatmulDescDestroy(op);
    return s;
}

extern "C" pbl_status pbl__cuda_fully_connected_act(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    int64_t act = a->attr[0].i, after = a->attr[1].i;
    int64_t rows = a->out_meta[0].shape.dim[0], cols = a->out_meta[0].shape.dim[1];
    if (act == PBL__ACT_RELU || (act == PBL__ACT_NONE && a->n_in == 3)) {
        int unsupported = 0;
        s = lt_fused(l, a, act == PBL__ACT_RELU, &unsupported);
        if (s != PBL_OK || !unsupported)
            return s;
        /* cuBLASLt declined: fully_connected's sgemm and the pass below, as for the other acts */
    }
    pbl__kargs fc = *a;
    if (after && a->n_in == 3)
        fc.n_in = 2;
    s = pbl__cuda_fully_connected(l, &fc);
    if (s != PBL_OK)
        goto done;
    if ((after && a->n_in == 3) || act != PBL__ACT_NONE) {
        PBL__LAUNCH(epilogue_k, pbl__blocks(rows * cols), PBL__THREADS, 0, l->stream)(
            PBL__OUT(a, 0), after && a->n_in == 3 ? PBL__IN(a, 2) : NULL, rows, cols, (int)act);
        PBL__LAUNCHED();
    }
done:
    return s;
}

/* ---- fully_connected_grad_wb: dw = dyᵀ·x, db = Σ_n dy[n, :] -------------------------------- *
 *
 * One cuBLASLt product with the BGRADB epilogue. Row-major dw[out, in] = dyᵀ·x is the
 * column-major dwᵀ[in, out] = A·op_T(B) with A = x read column-major ([in, N], ld in, op N) and
 * B = dy read column-major ([out, N], ld out, op T): m = in, n = out, k = N. cuBLASLt's
 * bias-gradient epilogues reduce an operand over k: BGRADA sums A into a vector of m (the rows
 * of D), BGRADB sums B into a vector of n (the columns of D). The bias gradient is dy summed
 * over the batch, N = k, a vector of out = n: B's, so BGRADB (BGRADA would sum x instead).
 * This is the weight-gradient configuration of llm.c's matmul_backward (A the layer input,
 * op N; B the output gradient, op T; BGRADB) and of Transformer Engine's gemm ("grad output is
 * always input B").
 * cuBLASLt sums in its own order, so db matches the CPU's row-by-row sum within rounding.
 * Where cuBLASLt has no kernel for this configuration (CUBLAS_STATUS_NOT_SUPPORTED, e.g. an
 * fp32 BGRADB on some architecture), matmul's sgemm and sum_to's kernel run instead. */

/* dw and db by cuBLASLt; *unsupported set (and nothing enqueued) when it declines. */
static pbl_status lt_wgrad_bgrad(const pbl__cuda_launch *l, const pbl__kargs *a, int *unsupported)
{
    pbl_status s = PBL_OK;
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t lx = NULL, ldy = NULL, ldw = NULL;
    uint64_t n = (uint64_t)a->in_meta[0].shape.dim[0], out = (uint64_t)a->in_meta[0].shape.dim[1];
    uint64_t in = (uint64_t)a->in_meta[1].shape.dim[1];
    float *db = PBL__OUT(a, 1);
    cublasOperation_t tx = CUBLAS_OP_N, tdy = CUBLAS_OP_T;
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BGRADB;
    float one = 1.0f, zero = 0.0f;
    cublasLtMatmulAlgo_t algo;
    int found = 0;
    cublasStatus_t st;
    PBL__CUBLAS(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    PBL__CUBLAS(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tx, sizeof tx));
    PBL__CUBLAS(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tdy, sizeof tdy));
    PBL__CUBLAS(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    PBL__CUBLAS(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &db, sizeof db));
    /* column-major: x is [in, n] (ld in), dy is [out, n] (ld out), dw is [in, out] (ld in) */
    PBL__CUBLAS(cublasLtMatrixLayoutCreate(&lx, CUDA_R_32F, in, n, (int64_t)in));
    PBL__CUBLAS(cublasLtMatrixLayoutCreate(&ldy, CUDA_R_32F, out, n, (int64_t)out));
    PBL__CUBLAS(cublasLtMatrixLayoutCreate(&ldw, CUDA_R_32F, in, out, (int64_t)in));
    if ((s = lt_algo(l, a, op, lx, PBL__IN(a, 1), ldy, PBL__IN(a, 0), ldw, PBL__OUT(a, 0), &algo, &found)) != PBL_OK)
        goto done;
    if (!found) {
        *unsupported = 1;
        goto done;
    }
    st = cublasLtMatmul(l->lt, op, &one, PBL__IN(a, 1), lx, PBL__IN(a, 0), ldy, &zero, PBL__OUT(a, 0), ldw,
                        PBL__OUT(a, 0), ldw, &algo, l->workspace, l->workspace_bytes, l->stream);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED) {
        *unsupported = 1;
    } else if (st != CUBLAS_STATUS_SUCCESS) {
        snprintf(a->err, a->errlen, "cublasLtMatmul (BGRADB epilogue) failed at %s:%d: %s", __FILE__, __LINE__,
                 pbl__cublas_status_str(st));
        s = PBL_ERR_DEVICE;
    }
done:
    if (ldw)
        cublasLtMatrixLayoutDestroy(ldw);
    if (ldy)
        cublasLtMatrixLayoutDestroy(ldy);
    if (lx)
        cublasLtMatrixLayoutDestroy(lx);
    if (op)
        cublasLtMatmulDescDestroy(op);
    return s;
}

extern "C" pbl_status pbl__cuda_fully_connected_grad_wb(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    static const pbl__attr_val trans_a_only[2] = { { 1, 0.0, { 0 }, 0, 1 }, { 0, 0.0, { 0 }, 0, 1 } };
    int unsupported = 0;
    pbl_status s = lt_wgrad_bgrad(l, a, &unsupported);
    if (s != PBL_OK || !unsupported)
        return s;
    /* the fallback: matmul(dy, x, trans_a = 1), then sum_to(dy, [out]) */
    pbl__kargs mm = *a, st = *a;
    mm.n_out = 1;
    mm.attr = trans_a_only;
    s = pbl__cuda_matmul(l, &mm);
    if (s != PBL_OK)
        return s;
    st.n_in = 1;
    st.n_out = 1;
    st.out = a->out + 1;
    st.out_meta = a->out_meta + 1;
    st.attr = NULL;
    return pbl__cuda_sum_to(l, &st);
}

/* ---- matmul_act_grad: dx = act_grad(op(a)·op(b), s) ---------------------------------------- *
 *
 * matmul's sgemm writes the product into dx, then one pass applies the activation's gradient
 * in place (the formulas of activation.cu's relu_grad ... gelu_grad).
 *
 * No cuBLASLt epilogue here. DRELU / DRELU_BGRAD do not read the saved activation: they read
 * the bit mask a RELU_AUX / RELU_AUX_BIAS forward product wrote (one bit per element, leading
 * dimension a multiple of 128). Using them would give fully_connected_act a second output, a
 * mask held from the forward pass to the backward one — extra arena bytes, while y, which
 * relu_grad reads, stays live anyway because the next layer's weight gradient reads it — and
 * a cuBLASLt-specific layout the CPU backend would have to write too, all to save one
 * element-wise pass over dx. The bias reduction DRELU_BGRAD would add is already done by
 * BGRADB in the weight gradient's product (fully_connected_grad_wb above). DGELU / DGELU_BGRAD
 * cannot apply at all: cuBLASLt's GELU is the tanh approximation, pebble's gelu the erf form. */

__global__ static void act_grad_k(float *dx, const float *sv, int64_t n, int act)
{
    PBL__GRID_LOOP(i, n) {
        float g = dx[i], v = sv[i];
        switch (act) {
        case PBL__ACT_RELU: g = pbl__act_relu_grad(g, v); break;
        case PBL__ACT_SIGMOID: g = pbl__act_sigmoid_grad(g, v); break;
        case PBL__ACT_TANH: g = pbl__act_tanh_grad(g, v); break;
        case PBL__ACT_GELU: g = pbl__act_gelu_grad(g, v); break;
        default: break;
        }
        dx[i] = g;
    }
}

extern "C" pbl_status pbl__cuda_matmul_act_grad(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    int64_t n = PBL__NUMEL(a->out_meta[0]);
    pbl__kargs mm = *a; /* matmul's two attribute slots come first */
    mm.n_in = 2;
    s = pbl__cuda_matmul(l, &mm);
    if (s != PBL_OK)
        goto done;
    PBL__LAUNCH(act_grad_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 2), n,
                                                                       (int)a->attr[2].i);
    PBL__LAUNCHED();
done:
    return s;
}
