/* CPU kernel: fully_connected_packed (layout in ops/fully_connected_packed.c), one
 * register-blocked kernel per x86-64 level (graph/base/cpu.h picks, once per process):
 *   avx512    8 rows × 48 columns of y in 24 zmm accumulators; per k, 3 panel loads and 8
 *             broadcasts feed 24 fused multiply-adds;
 *   avx2      6 rows × 16 columns (one panel) in 12 ymm; per k, 2 loads and 6 broadcasts
 *             feed 12 FMAs (16 ymm registers in all); fewer rows take more panels;
 *   baseline  3 rows × 16 columns in 12 xmm (SSE2: multiply, then add); 1 row × 48;
 * and a plain loop elsewhere than x86-64. The columns are split over threads a panel at a
 * time (pbl__cpu_for); each y element is one dot product over k in order, so the bits do not
 * depend on the split (they do depend on the level: FMA or not). */
#include <string.h>

#include "graph/base/cpu.h"
#include "ops/cpu/kernels.h"

/* one call's operands: x [M, K], wp [ceil(N/16), K, 16], b [N] or NULL -> y [M, N] */
typedef struct fcp_args {
    const float *x, *wp, *b;
    float       *y;
    int64_t      M, K, N;
} fcp_args;

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define FCP_X86 1

/* ---- AVX-512 ---------------------------------------------------------------------------- */

/* The store mask of the panel starting at column c: its columns below N. */
__attribute__((target("avx512f"))) static inline __mmask16 panel_mask(int64_t N, int64_t c)
{
    return N - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (N - c)) - 1);
}

/* y[r, 16p .. 16(p+P)) for the R rows at x (row stride K), the P panels from wp's panel p
 * (R ≤ 8, P ≤ 3: 3R accumulators, P weight rows and one broadcast fit the 32 zmm). Columns
 * past N are masked off at the loads of b and the stores. */
__attribute__((target("avx512f"), always_inline)) static inline void
block512(int R, int P, const float *x, int64_t K, const float *wp, int64_t p, const float *b, float *y, int64_t N)
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
 * stream past from L2) through panels [p0, p1), three at a time. */
__attribute__((target("avx512f"), always_inline)) static inline void
rows512(int R, const fcp_args *f, int64_t m, int64_t p0, int64_t p1)
{
    const float *x = f->x + m * f->K;
    float *y = f->y + m * f->N;
    int64_t p = p0;
    for (; p + 3 <= p1; p += 3)
        block512(R, 3, x, f->K, f->wp, p, f->b, y, f->N);
    if (p1 - p == 2)
        block512(R, 2, x, f->K, f->wp, p, f->b, y, f->N);
    else if (p1 - p == 1)
        block512(R, 1, x, f->K, f->wp, p, f->b, y, f->N);
}

__attribute__((target("avx512f"))) static void fcp_avx512(const fcp_args *f, int64_t p0, int64_t p1)
{
    int64_t m = 0, M = f->M;
    for (; m + 8 <= M; m += 8)
        rows512(8, f, m, p0, p1);
    if (M - m >= 4) {
        rows512(4, f, m, p0, p1);
        m += 4;
    }
    if (M - m >= 2) {
        rows512(2, f, m, p0, p1);
        m += 2;
    }
    if (M - m >= 1)
        rows512(1, f, m, p0, p1);
}

/* ---- AVX2 + FMA and SSE2: R rows × P panels, through 16-float buffers at the edges ---- */

/* The panel's bias (0 without one, and past N) as 16 floats. */
static inline void panel_bias(const fcp_args *f, int64_t p, float out[16])
{
    int64_t n = f->N - 16 * p < 16 ? f->N - 16 * p : 16;
    memset(out, 0, 16 * sizeof *out);
    if (f->b)
        memcpy(out, f->b + 16 * p, (size_t)n * sizeof *out);
}

/* y[m .. m+R, 16p .. 16p+16) from R rows of 16 floats: the columns below N */
static inline void panel_store(const fcp_args *f, int64_t m, int64_t p, int R, const float *acc)
{
    int64_t n = f->N - 16 * p < 16 ? f->N - 16 * p : 16;
    for (int r = 0; r < R; r++)
        memcpy(f->y + (m + r) * f->N + 16 * p, acc + 16 * r, (size_t)n * sizeof *acc);
}

/* y[m .. m+R, panels p .. p+P) with R·P ≤ 6: 2·R·P ymm accumulators (12 at most), 2·P weight
 * rows and one broadcast in the 16 ymm. Few rows take more panels, so a batch of 1 still has
 * 12 independent FMA chains instead of 2 waiting on each other's latency. */
__attribute__((target("avx2,fma"), always_inline)) static inline void
block256(int R, int P, const fcp_args *f, int64_t m, int64_t p)
{
    float buf[6 * 16];
    __m256 acc[6][12];
    const float *w[6];
    int64_t K = f->K;
#pragma GCC unroll 6
    for (int q = 0; q < P; q++) {
        panel_bias(f, p + q, buf);
        w[q] = f->wp + (p + q) * K * 16;
        __m256 b0 = _mm256_loadu_ps(buf), b1 = _mm256_loadu_ps(buf + 8);
#pragma GCC unroll 6
        for (int r = 0; r < R; r++)
            acc[r][2 * q] = b0, acc[r][2 * q + 1] = b1;
    }
    const float *x = f->x + m * K;
    for (int64_t k = 0; k < K; k++) {
        __m256 v[12];
#pragma GCC unroll 6
        for (int q = 0; q < P; q++)
            v[2 * q] = _mm256_loadu_ps(w[q] + 16 * k), v[2 * q + 1] = _mm256_loadu_ps(w[q] + 16 * k + 8);
#pragma GCC unroll 6
        for (int r = 0; r < R; r++) {
            __m256 xv = _mm256_broadcast_ss(x + r * K + k);
#pragma GCC unroll 12
            for (int j = 0; j < 2 * P; j++)
                acc[r][j] = _mm256_fmadd_ps(xv, v[j], acc[r][j]);
        }
    }
#pragma GCC unroll 6
    for (int q = 0; q < P; q++) {
#pragma GCC unroll 6
        for (int r = 0; r < R; r++) {
            _mm256_storeu_ps(buf + 16 * r, acc[r][2 * q]);
            _mm256_storeu_ps(buf + 16 * r + 8, acc[r][2 * q + 1]);
        }
        panel_store(f, m, p + q, R, buf);
    }
}

/* rows [m, m+R) through panels [p0, p1), P at a time, then one at a time */
__attribute__((target("avx2,fma"), always_inline)) static inline void
rows256(int R, int P, const fcp_args *f, int64_t m, int64_t p0, int64_t p1)
{
    int64_t p = p0;
    if (P > 1)
        for (; p + P <= p1; p += P)
            block256(R, P, f, m, p);
    for (; p < p1; p++)
        block256(R, 1, f, m, p);
}

__attribute__((target("avx2,fma"))) static void fcp_avx2(const fcp_args *f, int64_t p0, int64_t p1)
{
    int64_t m = 0;
    for (; m + 6 <= f->M; m += 6)
        rows256(6, 1, f, m, p0, p1);
    switch (f->M - m) {
    case 5: rows256(5, 1, f, m, p0, p1); break;
    case 4: rows256(4, 1, f, m, p0, p1); break;
    case 3: rows256(3, 2, f, m, p0, p1); break;
    case 2: rows256(2, 3, f, m, p0, p1); break;
    case 1: rows256(1, 6, f, m, p0, p1); break;
    default: break;
    }
}

/* SSE2: R·P ≤ 3, 4·R·P xmm accumulators (12 at most); multiply, then add */
__attribute__((always_inline)) static inline void block128(int R, int P, const fcp_args *f, int64_t m, int64_t p)
{
    float buf[3 * 16];
    __m128 acc[3][12];
    const float *w[3];
    int64_t K = f->K;
#pragma GCC unroll 3
    for (int q = 0; q < P; q++) {
        panel_bias(f, p + q, buf);
        w[q] = f->wp + (p + q) * K * 16;
#pragma GCC unroll 3
        for (int r = 0; r < R; r++)
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++)
                acc[r][4 * q + j] = _mm_loadu_ps(buf + 4 * j);
    }
    const float *x = f->x + m * K;
    for (int64_t k = 0; k < K; k++) {
#pragma GCC unroll 12
        for (int j = 0; j < 4 * P; j++) {
            __m128 v = _mm_loadu_ps(w[j / 4] + 16 * k + 4 * (j % 4));
#pragma GCC unroll 3
            for (int r = 0; r < R; r++)
                acc[r][j] = _mm_add_ps(acc[r][j], _mm_mul_ps(_mm_set1_ps(x[r * K + k]), v));
        }
    }
#pragma GCC unroll 3
    for (int q = 0; q < P; q++) {
#pragma GCC unroll 3
        for (int r = 0; r < R; r++)
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++)
                _mm_storeu_ps(buf + 16 * r + 4 * j, acc[r][4 * q + j]);
        panel_store(f, m, p + q, R, buf);
    }
}

__attribute__((always_inline)) static inline void rows128(int R, int P, const fcp_args *f, int64_t m, int64_t p0,
                                                          int64_t p1)
{
    int64_t p = p0;
    if (P > 1)
        for (; p + P <= p1; p += P)
            block128(R, P, f, m, p);
    for (; p < p1; p++)
        block128(R, 1, f, m, p);
}

static void fcp_sse2(const fcp_args *f, int64_t p0, int64_t p1)
{
    int64_t m = 0;
    for (; m + 3 <= f->M; m += 3)
        rows128(3, 1, f, m, p0, p1);
    if (f->M - m == 2)
        rows128(2, 1, f, m, p0, p1);
    else if (f->M - m == 1)
        rows128(1, 3, f, m, p0, p1);
}
#endif

#ifndef FCP_X86
/* elsewhere: one dot product per element, over the same layout */
static void fcp_plain(const fcp_args *f, int64_t p0, int64_t p1)
{
    int64_t n1 = 16 * p1 < f->N ? 16 * p1 : f->N, K = f->K;
    for (int64_t m = 0; m < f->M; m++)
        for (int64_t n = 16 * p0; n < n1; n++) {
            const float *w = f->wp + (n / 16) * K * 16 + n % 16;
            float s = f->b ? f->b[n] : 0.0f;
            for (int64_t k = 0; k < K; k++)
                s += f->x[m * K + k] * w[16 * k];
            f->y[m * f->N + n] = s;
        }
}
#endif

typedef void (*fcp_fn)(const fcp_args *f, int64_t p0, int64_t p1);

typedef struct fcp_job {
    fcp_args f;
    fcp_fn   fn;
} fcp_job;

/* columns [lo, hi) (pbl__cpu_for splits at multiples of 16: whole panels) */
static void fcp_range(void *ctx, int64_t lo, int64_t hi)
{
    const fcp_job *j = ctx;
    j->fn(&j->f, lo / 16, (hi + 15) / 16);
}

static fcp_fn fcp_pick(void)
{
#ifdef FCP_X86
    switch (pbl__cpu_level()) {
    case PBL__CPU_AVX512: return fcp_avx512;
    case PBL__CPU_AVX2: return fcp_avx2;
    default: return fcp_sse2;
    }
#else
    return fcp_plain;
#endif
}

pbl_status pbl__cpu_fully_connected_packed(const pbl__kargs *a)
{
    fcp_job j = { .f = { .x = PBL__IN(a, 0), .wp = PBL__IN(a, 1), .b = a->n_in == 3 ? PBL__IN(a, 2) : NULL,
                         .y = PBL__OUT(a, 0), .M = a->in_meta[0].shape.dim[0], .K = a->in_meta[0].shape.dim[1],
                         .N = a->attr[0].i },
                  .fn = fcp_pick() };
    /* a column costs 2·M·K flops */
    pbl__cpu_for(a, j.f.N, 2 * j.f.M * j.f.K, fcp_range, &j);
    return PBL_OK;
}
