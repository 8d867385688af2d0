/*
 * CUDA kernels for fully_connected and matmul: cuBLAS sgemm.
 *
 * pebble tensors are row-major, cuBLAS is column-major. A row-major [r, c] matrix is, read
 * column-major, its transpose [c, r] with the same leading dimension c. So the row-major
 * product C = op(A)·op(B) is computed as the column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: swap the
 * operands, keep each one's transpose flag, and swap m and n. No data is moved.
 */
#include "ops/cuda/common.cuh"
#include "ops/shared/geometry.h"

const char *pbl__cublas_status_str(cublasStatus_t st)
{
    const char *s = cublasGetStatusString(st);
    return s ? s : "unknown cuBLAS status";
}

/* y: [n, out] = b in every row, before the product adds into it */
__global__ static void bias_rows(float *y, const float *b, int64_t n, int64_t out)
{
    PBL__GRID_LOOP(i, n * out)
        y[i] = b[i % out];
}

extern "C" pbl_status pbl__cuda_fully_connected(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    const float *x = PBL__IN(a, 0), *w = PBL__IN(a, 1);
    float *y = PBL__OUT(a, 0);
    int n = (int)a->in_meta[0].shape.dim[0], in = (int)a->in_meta[0].shape.dim[1];
    int out = (int)a->in_meta[1].shape.dim[0];
    float one = 1.0f, beta = 0.0f;
    if (a->n_in == 3) {
        PBL__LAUNCH(bias_rows, pbl__blocks((int64_t)n * out), PBL__THREADS, 0, l->stream)(y, PBL__IN(a, 2), n, out);
        PBL__LAUNCHED();
        beta = 1.0f;
    }
    /* row-major y[n, out] = x[n, in]·wᵀ  <=>  column-major yᵀ[out, n] = (w as [in, out])ᵀ·xᵀ[in, n] */
    PBL__CUBLAS(cublasSgemm(l->blas, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &one, w, in, x, in, &beta, y, out));
done:
    return s;
}

extern "C" pbl_status pbl__cuda_matmul(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    pbl__matmul_geom g = pbl__matmul_geom_of(a);
    float one = 1.0f, zero = 0.0f;
    /* row-major C[m, n] = op(A)·op(B)  <=>  column-major Cᵀ[n, m] = op(B)ᵀ·op(A)ᵀ */
    PBL__CUBLAS(cublasSgemmStridedBatched(l->blas, g.tb ? CUBLAS_OP_T : CUBLAS_OP_N, g.ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                          g.n, g.m, g.k, &one, PBL__IN(a, 1), g.ldb, (long long)g.b_stride,
                                          PBL__IN(a, 0), g.lda, (long long)g.a_stride, &zero, PBL__OUT(a, 0), g.n,
                                          (long long)g.m * g.n, (int)g.batch));
done:
    return s;
}

/* fully_connected_packed (ops/fully_connected_packed.c): y[M, N] = x[M, K]·wᵀ (+ b) with w in
 * 16-column panels, wp[NB, K, 16], wp[p, k, j] = w[16p + j, k]. The layout exists for the CPU's
 * AVX-512 kernel (one 64-byte panel row per k, reused by every row of x); cuBLAS reads it as it
 * is, with no repacking: panel p is a row-major [K, 16] matrix P_p and
 *     y[:, 16p .. 16p+16) = x·P_p,
 * i.e. column-major yᵀ-slice [16, M] (ld N) = P_pᵀ [16, K] (ld 16) · xᵀ [K, M] (ld K), no
 * transposes. The full panels are one strided-batched sgemm (A strides by a panel, 16·K; B is
 * x for every panel, stride 0; C strides by 16 columns inside y's rows, ld N: the batches
 * write disjoint columns, the interleaved-output use of strided batching that multi-head
 * attention makes of it); a last partial panel (N not a multiple of 16) is one sgemm over its
 * first N mod 16 columns, so the zero padding past N is never read. The bias is written
 * first and the products accumulate onto it (beta 1), as in fully_connected. Same op, same
 * result up to the order of the k sums (the CPU kernel fuses its multiply-adds). */
extern "C" pbl_status pbl__cuda_fully_connected_packed(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    const float *x = PBL__IN(a, 0), *wp = PBL__IN(a, 1);
    float *y = PBL__OUT(a, 0);
    int M = (int)a->in_meta[0].shape.dim[0], K = (int)a->in_meta[0].shape.dim[1], N = (int)a->attr[0].i;
    int full = N / 16, rest = N % 16;
    float one = 1.0f, beta = 0.0f;
    if (a->n_in == 3) {
        PBL__LAUNCH(bias_rows, pbl__blocks((int64_t)M * N), PBL__THREADS, 0, l->stream)(y, PBL__IN(a, 2), M, N);
        PBL__LAUNCHED();
        beta = 1.0f;
    }
    if (full)
        PBL__CUBLAS(cublasSgemmStridedBatched(l->blas, CUBLAS_OP_N, CUBLAS_OP_N, 16, M, K, &one, wp, 16,
                                              (long long)16 * K, x, K, 0, &beta, y, N, 16, full));
    if (rest)
        PBL__CUBLAS(cublasSgemm(l->blas, CUBLAS_OP_N, CUBLAS_OP_N, rest, M, K, &one, wp + (size_t)full * 16 * K, 16, x,
                                K, &beta, y + (size_t)full * 16, N));
done:
    return s;
}
