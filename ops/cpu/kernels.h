/* The CPU kernels, one per op, defined in ops/cpu/<family>.c beside the family's descriptors
 * in ops/<family>.c. */
#ifndef PBL_CPU_KERNELS_H
#define PBL_CPU_KERNELS_H

#include <math.h>

#include "graph/base/cpu.h"
#include "graph/ir/registry.h"
#include "ops/shared/formulas.h"

#define PBL__CPU_DECL(n) pbl_status pbl__cpu_##n(const pbl__kargs *a);
PBL__OP_LIST(PBL__CPU_DECL)
#undef PBL__CPU_DECL

/* Scratch sizes (pbl__op.cpu_scratch) of the kernels that need some: the column matrix. */
size_t pbl__cpu_conv2d_scratch(const pbl__kargs *a);
size_t pbl__cpu_conv2d_grad_input_scratch(const pbl__kargs *a);
size_t pbl__cpu_conv2d_grad_weight_scratch(const pbl__kargs *a);

/* C[m,n] = op(A)·op(B) + beta·C, as cblas_sgemm (row-major) computes it, split over par's
 * threads along the rows or columns of C when par carries products and the product is large
 * enough (ops/cpu/linear.c); par may be NULL. The matrix-product kernels (fully_connected,
 * matmul, conv2d and its gradients) all call BLAS through it, since with par->products set
 * BLAS itself runs on one thread. */
void pbl__cpu_sgemm(const pbl__par *par, int ta, int tb, int m, int n, int k, const float *a, int lda,
                    const float *b, int ldb, float beta, float *c, int ldc);

/* y[i] = tanh(x[i]) / sigmoid(x[i]) for i < n (y may be x), vectorised for the kernel level
 * in use (graph/base/cpu.h); within a few ulp of the exact values (ops/cpu/activation.c). */
void pbl__cpu_tanh_n(const float *x, float *y, int64_t n);
void pbl__cpu_sigmoid_n(const float *x, float *y, int64_t n);
/* y[i] = e^x[i] likewise; 0 below ln(FLT_MIN) (x = -inf gives 0). */
void pbl__cpu_exp_n(const float *x, float *y, int64_t n);

/* The softmax rows (ops/cpu/softmax.c) of x[rows, cols]: mx[r], the row's max, and sum[r],
 * Σ_j e^(x[r,j] − mx[r]) added in j order in float, writing each e^(x − mx) to e[r·cols + j]
 * when e is not NULL (e may be x). The exps go a vector at a time through pbl__cpu_exp_n, a
 * run of rows together when they are short (libm's expf is one element per call). */
void pbl__cpu_rows_sum_exp(const float *x, int64_t rows, int64_t cols, float *e, float *mx, float *sum);

/* Hot element-wise loops are compiled for AVX-512 and AVX2 beside the baseline, picked once
 * at load time by the dynamic linker (GCC target_clones), so one binary runs everywhere.
 * Not under ThreadSanitizer: the clones' ifunc resolvers are instrumented and run during
 * relocation, before the TSan runtime is up, and crash the program at load. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(__SANITIZE_THREAD__)
#define PBL__HOT __attribute__((target_clones("default", "avx2", "avx512f")))
#else
#define PBL__HOT
#endif

/* PBL__LEVELS(name, (params), (args)): a void function `name` that runs name##_body (a static
 * always_inline function of those params) compiled once per x86-64 level, AVX-512, AVX2 + FMA
 * and the SSE2 baseline, choosing by pbl__cpu_level() (graph/base/cpu.h) at each call, so
 * PEBBLE_CPU_LEVEL can force a lower one. Elsewhere: name##_body as compiled. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PBL__LEVELS(name, params, args)                                                        \
    __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma"))) static void name##_avx512 params \
    {                                                                                          \
        name##_body args;                                                                      \
    }                                                                                          \
    __attribute__((target("avx2,fma"))) static void name##_avx2 params { name##_body args; }   \
    static void name##_base params { name##_body args; }                                       \
    static void name params                                                                    \
    {                                                                                          \
        int l_ = pbl__cpu_level();                                                             \
        (l_ == PBL__CPU_AVX512 ? name##_avx512 : l_ == PBL__CPU_AVX2 ? name##_avx2 : name##_base)args; \
    }
#else
#define PBL__LEVELS(name, params, args) \
    static void name params { name##_body args; }
#endif
#define PBL__INLINE static inline __attribute__((always_inline))

/* Runs fn(ctx, lo, hi) over [0, n): split over a->par's threads when the loop holds at least
 * two parts of par->min_work units of work (n items of `cost` units each; 1: a streaming
 * pass like relu), else in one call here. Up to 4 parts per thread, claimed by whichever
 * thread is free, so a worker that starts late costs little; splits fall on multiples of
 * `align` items. Every item is computed by the same code either way, so the bits do not
 * depend on the split. */
static inline void pbl__cpu_for_aligned(const pbl__kargs *a, int64_t n, int64_t cost, int64_t align,
                                        pbl__range_fn fn, void *ctx)
{
    const pbl__par *p = a->par;
    if (p && p->threads > 1 && p->min_work > 0) {
        int64_t parts = n * cost / p->min_work, most = 4 * (int64_t)p->threads;
        if (parts >= 2) {
            p->run(p->pool, n, align, (int32_t)(parts < most ? parts : most), fn, ctx);
            return;
        }
    }
    fn(ctx, 0, n);
}

/* The same over elements, split on multiples of 16 (64 bytes): parts never write the same
 * cache line and their vector loops start aligned where the data is. */
static inline void pbl__cpu_for(const pbl__kargs *a, int64_t n, int64_t cost, pbl__range_fn fn, void *ctx)
{
    pbl__cpu_for_aligned(a, n, cost, 16, fn, ctx);
}

/* f32 data of input i / output k */
#define PBL__IN(a, i)  ((const float *)(a)->in[i])
#define PBL__OUT(a, k) ((float *)(a)->out[k])
#define PBL__NUMEL(m)  pbl_shape_numel(&(m).shape)

#endif
