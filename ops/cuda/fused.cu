/*
 * CUDA kernel of fully_connected_act (ops/fused.c): y = act(x·wᵀ + b).
 *
 * relu and none (with a bias, or relu alone) run as ONE cuBLASLt matmul with a fused
 * epilogue (CUBLASLT_EPILOGUE_RELU_BIAS, _BIAS, _RELU): the bias add and the activation
 * happen as the product's tile is written, with no second pass over y. The bias is added
 * after the product, which is the CPU kernel's bias_after order; with bias_after 0 the CPU
 * starts from b and accumulates the product onto it, which differs by float rounding only.
 * sigmoid, tanh and gelu use fully_connected's kernel then one element-wise pass: cuBLASLt's
 * GELU epilogue is the tanh approximation, not the erf form pebble's gelu computes.
 *
 * Layouts as in linear.cu: row-major y[n, out] = x[n, in]·wᵀ is column-major
 * yᵀ[out, n] = op_T(w as [in, out])·(x as [in, n]); the bias is per row of yᵀ, which is
 * what cuBLASLt's bias epilogues add (a vector of length m = out).
 */
#include "ops/cuda/common.cuh"

extern "C" {
#include "ops/fused.h"
}

__global__ static void epilogue_k(float *y, const float *b, int64_t rows, int64_t cols, int act)
{
    PBL__GRID_LOOP(i, rows * cols) {
        float v = y[i];
        if (b)
            v = v + b[i % cols];
        switch (act) {
        case PBL__ACT_RELU: v = v > 0.0f ? v : 0.0f; break;
        case PBL__ACT_SIGMOID: v = 1.0f / (1.0f + expf(-v)); break;
        case PBL__ACT_TANH: v = tanhf(v); break;
        case PBL__ACT_GELU: v = 0.5f * v * (1.0f + erff(v * 0.70710678118654752440f)); break;
        default: break;
        }
        y[i] = v;
    }
}

static pbl_status lt_fused(const pbl__cuda_launch *l, const pbl__kargs *a, int relu)
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
    /* algo NULL: cuBLASLt picks one by its heuristic, within the workspace given */
    PBL__CUBLAS(cublasLtMatmul(l->lt, op, &one, PBL__IN(a, 1), lw, PBL__IN(a, 0), lx, &zero, PBL__OUT(a, 0), ly,
                               PBL__OUT(a, 0), ly, NULL, l->workspace, l->workspace_bytes, l->stream));
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
    if (act == PBL__ACT_RELU || (act == PBL__ACT_NONE && a->n_in == 3))
        return lt_fused(l, a, act == PBL__ACT_RELU);
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
