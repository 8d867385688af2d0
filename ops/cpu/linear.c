/* CPU kernels for fully_connected and matmul: cblas_sgemm, through pbl__cpu_sgemm, which the
 * convolutions (ops/cpu/conv.c) call too.
 *
 * With the executor's pool carrying products (pbl__par.products: one stream, threads > 1,
 * blas_threads left to its default), a large product is split over the pool along one of its
 * output dimensions, each part one single-threaded sgemm writing its own block of C: no part
 * shares an output element with another, so no reduction is needed, and each element is
 * computed as one single-threaded call would compute it for its rows or columns. Alone, an
 * MLP step's products split so on 2 threads ran in 0.94-0.96x the time OpenBLAS 0.3.21 takes
 * to thread them itself (2-core EPYC, best of 5); in the step the larger gain is that one
 * set of threads, the pool's, serves the products and the kernels between them, where before
 * OpenBLAS's threads and the pool's took turns on the same cores (bench/README.md).
 *
 * The split runs along the rows of C (for fully_connected: the batch) unless there are too
 * few of them, then along its columns; parts are multiples of 16 rows or columns (OpenBLAS's
 * register blocks are 4 to 16 wide, and 16 floats fill a cache line, so two parts never write
 * one line) and at least GEMM_MIN_SIDE wide, so each part keeps the kernel's full blocks. Each
 * part gets at least GEMM_MADDS x par->min_work multiply-adds (with the backend's min_work,
 * 2^17: some 5 us of one core's sgemm, as long as the least part of a split element-wise
 * loop), so a small product is not split: the hand-off (a few microseconds when the workers
 * are awake) would cost more than the second core gains. */
#include <cblas.h>
#include <string.h>

#include "ops/cpu/kernels.h"
#include "ops/shared/geometry.h"

enum {
    GEMM_MADDS = 8,     /* multiply-adds in sgemm per element of a streaming pass, in time:
                           some 30 G/s on one AVX2 core against some 3 G elements/s */
    GEMM_MIN_SIDE = 32, /* rows or columns per part */
    GEMM_ALIGN = 16,    /* parts start on multiples of this many rows or columns */
};

/* C[m,n] = op(A)·op(B) + beta·C (with a bias: C starts as the bias in every row, beta 1),
 * row-major as cblas_sgemm takes it; a part covers rows [lo, hi) of C, or its columns when
 * by_cols. */
typedef struct gemm {
    int          ta, tb;
    int          m, n, k;
    const float *a, *b, *bias;
    int          lda, ldb, ldc;
    float        beta;
    float       *c;
    int          by_cols;
} gemm;

/* Rows or columns [lo, hi) of C, one single-threaded (or BLAS-threaded) sgemm. */
static void gemm_part(void *ctx, int64_t lo, int64_t hi)
{
    const gemm *g = ctx;
    int rows = g->by_cols ? g->m : (int)(hi - lo), cols = g->by_cols ? (int)(hi - lo) : g->n;
    int r0 = g->by_cols ? 0 : (int)lo, c0 = g->by_cols ? (int)lo : 0;
    /* row r0 of op(A): A's row r0, or, transposed, its column r0; likewise column c0 of op(B) */
    const float *a = g->a + (g->ta ? (size_t)r0 : (size_t)r0 * (size_t)g->lda);
    const float *b = g->b + (g->tb ? (size_t)c0 * (size_t)g->ldb : (size_t)c0);
    float *c = g->c + (size_t)r0 * (size_t)g->ldc + (size_t)c0;
    float beta = g->beta;
    if (g->bias) { /* y starts as b in every row, then y += x·wᵀ */
        for (int i = 0; i < rows; i++)
            memcpy(c + (size_t)i * (size_t)g->ldc, g->bias + c0, (size_t)cols * sizeof *c);
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans, rows, cols,
                g->k, 1.0f, a, g->lda, b, g->ldb, beta, c, g->ldc);
}

/* How many parts g is worth over par (1: run it whole), and along which side (g->by_cols). */
static int32_t gemm_parts(const pbl__par *par, gemm *g)
{
    if (!par || !par->products || par->threads < 2 || par->min_work < 1)
        return 1;
    int64_t work = (int64_t)g->m * g->n * g->k, parts = work / (GEMM_MADDS * par->min_work);
    if (parts > par->threads)
        parts = par->threads;
    int64_t side = g->m / GEMM_MIN_SIDE >= 2 ? g->m : g->n;
    g->by_cols = side != g->m;
    if (parts > side / GEMM_MIN_SIDE)
        parts = side / GEMM_MIN_SIDE;
    return parts >= 2 ? (int32_t)parts : 1;
}

/* Runs g whole or split over the pool. */
static void gemm_run(const pbl__par *par, gemm *g)
{
    int32_t parts = gemm_parts(par, g);
    if (parts < 2)
        gemm_part(g, 0, g->by_cols ? g->n : g->m);
    else
        par->run(par->pool, g->by_cols ? g->n : g->m, GEMM_ALIGN, parts, gemm_part, g);
}

void pbl__cpu_sgemm(const pbl__par *par, int ta, int tb, int m, int n, int k, const float *a, int lda,
                    const float *b, int ldb, float beta, float *c, int ldc)
{
    gemm g = { .ta = ta, .tb = tb, .m = m, .n = n, .k = k, .a = a, .lda = lda, .b = b, .ldb = ldb, .beta = beta,
               .c = c, .ldc = ldc };
    gemm_run(par, &g);
}

pbl_status pbl__cpu_fully_connected(const pbl__kargs *a)
{
    int n = (int)a->in_meta[0].shape.dim[0], in = (int)a->in_meta[0].shape.dim[1];
    int out = (int)a->in_meta[1].shape.dim[0];
    /* y[n, out] = x[n, in] · w[out, in]ᵀ (+ b[out] in every row) */
    gemm g = { .ta = 0, .tb = 1, .m = n, .n = out, .k = in, .a = PBL__IN(a, 0), .lda = in, .b = PBL__IN(a, 1),
               .ldb = in, .bias = a->n_in == 3 ? PBL__IN(a, 2) : NULL, .c = PBL__OUT(a, 0), .ldc = out };
    gemm_run(a->par, &g);
    return PBL_OK;
}

pbl_status pbl__cpu_matmul(const pbl__kargs *a)
{
    pbl__matmul_geom mg = pbl__matmul_geom_of(a);
    for (int64_t i = 0; i < mg.batch; i++) {
        gemm g = { .ta = mg.ta, .tb = mg.tb, .m = mg.m, .n = mg.n, .k = mg.k, .a = PBL__IN(a, 0) + i * mg.a_stride,
                   .lda = mg.lda, .b = PBL__IN(a, 1) + i * mg.b_stride, .ldb = mg.ldb,
                   .c = PBL__OUT(a, 0) + i * (int64_t)mg.m * mg.n, .ldc = mg.n };
        gemm_run(a->par, &g);
    }
    return PBL_OK;
}
