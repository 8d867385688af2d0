/* CPU kernel: fully_connected_packed (layout in ops/fully_connected_packed.c). With AVX-512
 * (checked once per call with __builtin_cpu_supports) a register-blocked kernel keeps R rows
 * × 32 columns of y in 2R zmm accumulators and, per k, loads 32 weights and broadcasts R
 * inputs into fused multiply-adds; elsewhere a plain loop over the same layout. */
#include <string.h>

#include "ops/cpu/kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define FCP_AVX512 1

/* y[r, 16p .. 16p+32) for the R rows at x (row stride K), panels p and p+1 (p+1 may be
 * absent: two = 0). Columns past N are masked off at the store. */
__attribute__((target("avx512f"), always_inline)) static inline void
block(int R, const float *x, int64_t K, const float *w0, const float *w1, int two, const float *b0, const float *b1,
      __mmask16 m0, __mmask16 m1, float *y, int64_t N)
{
    __m512 a0[8], a1[8];
    __m512 i0 = b0 ? _mm512_maskz_loadu_ps(m0, b0) : _mm512_setzero_ps();
    __m512 i1 = b1 ? _mm512_maskz_loadu_ps(m1, b1) : _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        a0[r] = i0, a1[r] = i1;
    for (int64_t k = 0; k < K; k++) {
        __m512 v0 = _mm512_loadu_ps(w0 + 16 * k);
        __m512 v1 = two ? _mm512_loadu_ps(w1 + 16 * k) : v0;
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            __m512 xv = _mm512_set1_ps(x[r * K + k]);
            a0[r] = _mm512_fmadd_ps(xv, v0, a0[r]);
            a1[r] = _mm512_fmadd_ps(xv, v1, a1[r]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        _mm512_mask_storeu_ps(y + r * N, m0, a0[r]);
        if (two)
            _mm512_mask_storeu_ps(y + r * N + 16, m1, a1[r]);
    }
}

/* R rows of x (an 8-row block of x is 8·K floats: it stays in L1 while every panel pair of
 * w streams past from L2) through all panels. */
__attribute__((target("avx512f"), always_inline)) static inline void
row_block(int R, const float *x, int64_t K, const float *wp, int64_t N, const float *b, float *y)
{
    int64_t NB = (N + 15) / 16, p = 0;
    for (; p + 2 <= NB; p += 2) {
        int64_t c0 = 16 * p, c1 = c0 + 16;
        __mmask16 m1 = N - c1 >= 16 ? 0xFFFF : (__mmask16)((1u << (N - c1)) - 1);
        block(R, x, K, wp + p * K * 16, wp + (p + 1) * K * 16, 1, b ? b + c0 : NULL, b ? b + c1 : NULL, 0xFFFF, m1,
              y + c0, N);
    }
    if (p < NB) { /* the last, odd panel */
        int64_t c0 = 16 * p;
        __mmask16 m0 = N - c0 >= 16 ? 0xFFFF : (__mmask16)((1u << (N - c0)) - 1);
        block(R, x, K, wp + p * K * 16, NULL, 0, b ? b + c0 : NULL, NULL, m0, 0, y + c0, N);
    }
}

__attribute__((target("avx512f"))) static void fcp_avx512(const float *x, int64_t M, int64_t K, const float *wp,
                                                           int64_t N, const float *b, float *y)
{
    int64_t m = 0;
    for (; m + 8 <= M; m += 8)
        row_block(8, x + m * K, K, wp, N, b, y + m * N);
    if (M - m >= 4) {
        row_block(4, x + m * K, K, wp, N, b, y + m * N);
        m += 4;
    }
    if (M - m >= 2) {
        row_block(2, x + m * K, K, wp, N, b, y + m * N);
        m += 2;
    }
    if (M - m >= 1)
        row_block(1, x + m * K, K, wp, N, b, y + m * N);
}
#endif

/* x: [M, K], wp: [ceil(N/16), K, 16], b: [N] or NULL  ->  y: [M, N] */
static void fcp_plain(const float *x, int64_t M, int64_t K, const float *wp, int64_t N, const float *b, float *y)
{
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            const float *w = wp + (n / 16) * K * 16 + n % 16;
            float s = b ? b[n] : 0.0f;
            for (int64_t k = 0; k < K; k++)
                s += x[m * K + k] * w[16 * k];
            y[m * N + n] = s;
        }
}

pbl_status pbl__cpu_fully_connected_packed(const pbl__kargs *a)
{
    int64_t M = a->in_meta[0].shape.dim[0], K = a->in_meta[0].shape.dim[1], N = a->attr[0].i;
    const float *b = a->n_in == 3 ? PBL__IN(a, 2) : NULL;
#ifdef FCP_AVX512
    if (__builtin_cpu_supports("avx512f")) {
        fcp_avx512(PBL__IN(a, 0), M, K, PBL__IN(a, 1), N, b, PBL__OUT(a, 0));
        return PBL_OK;
    }
#endif
    fcp_plain(PBL__IN(a, 0), M, K, PBL__IN(a, 1), N, b, PBL__OUT(a, 0));
    return PBL_OK;
}
