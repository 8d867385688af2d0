/* CPU kernel: fully_connected_packed (layout in ops/fully_connected_packed.c). With AVX-512
 * (checked once per call with __builtin_cpu_supports) a register-blocked kernel keeps 8 rows
 * × 48 columns of y in 24 zmm accumulators and, per k, loads 48 weights and broadcasts 8
 * inputs into 24 fused multiply-adds (11 loads per 24 FMAs; 8 × 32 with 10 per 16 measured
 * the same here); elsewhere a plain loop over the same layout. */
#include <string.h>

#include "ops/cpu/kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define FCP_AVX512 1

/* The store mask of the panel starting at column c: its columns below N. */
__attribute__((target("avx512f"))) static inline __mmask16 panel_mask(int64_t N, int64_t c)
{
    return N - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (N - c)) - 1);
}

/* y[r, 16p .. 16(p+P)) for the R rows at x (row stride K), the P panels from wp's panel p
 * (R ≤ 8, P ≤ 3: 3R accumulators, P weight rows and one broadcast fit the 32 zmm). Columns
 * past N are masked off at the loads of b and the stores. */
__attribute__((target("avx512f"), always_inline)) static inline void
block(int R, int P, const float *x, int64_t K, const float *wp, int64_t p, const float *b, float *y, int64_t N)
{
    __m512 acc[3][8];
    const float *w[3];
    __mmask16 mask[3];
#pragma GCC unroll 3
    for (int q = 0; q < P; q++) {
        mask[q] = panel_mask(N, 16 * (p + q));
        w[q] = wp + (p + q) * K * 16;
        __m512 init = b ? _mm512_maskz_loadu_ps(mask[q], b + 16 * (p + q)) : _mm512_setzero_ps();
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
            acc[q][r] = init;
    }
    for (int64_t k = 0; k < K; k++) {
        __m512 v[3];
#pragma GCC unroll 3
        for (int q = 0; q < P; q++)
            v[q] = _mm512_loadu_ps(w[q] + 16 * k);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            __m512 xv = _mm512_set1_ps(x[r * K + k]);
#pragma GCC unroll 3
            for (int q = 0; q < P; q++)
                acc[q][r] = _mm512_fmadd_ps(xv, v[q], acc[q][r]);
        }
    }
#pragma GCC unroll 3
    for (int q = 0; q < P; q++)
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
            _mm512_mask_storeu_ps(y + r * N + 16 * (p + q), mask[q], acc[q][r]);
}

/* R rows of x (an 8-row block of x is 8·K floats: it stays in L1 while the panels of w
 * stream past from L2) through all panels, three at a time. */
__attribute__((target("avx512f"), always_inline)) static inline void
row_block(int R, const float *x, int64_t K, const float *wp, int64_t N, const float *b, float *y)
{
    int64_t NB = (N + 15) / 16, p = 0;
    for (; p + 3 <= NB; p += 3)
        block(R, 3, x, K, wp, p, b, y, N);
    if (NB - p == 2)
        block(R, 2, x, K, wp, p, b, y, N);
    else if (NB - p == 1)
        block(R, 1, x, K, wp, p, b, y, N);
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
