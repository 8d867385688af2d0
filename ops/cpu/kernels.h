/* The CPU kernels, one per op, defined in ops/cpu/<family>.c beside the family's descriptors
 * in ops/<family>.c. */
#ifndef PBL_CPU_KERNELS_H
#define PBL_CPU_KERNELS_H

#include <math.h>

#include "graph/ir/registry.h"

#define PBL__CPU_DECL(n) pbl_status pbl__cpu_##n(const pbl__kargs *a);
PBL__OP_LIST(PBL__CPU_DECL)
#undef PBL__CPU_DECL

/* Scratch sizes (pbl__op.cpu_scratch) of the kernels that need some: the column matrix. */
size_t pbl__cpu_conv2d_scratch(const pbl__kargs *a);
size_t pbl__cpu_conv2d_grad_input_scratch(const pbl__kargs *a);
size_t pbl__cpu_conv2d_grad_weight_scratch(const pbl__kargs *a);

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

/* Runs fn(ctx, lo, hi) over [0, n): split over a->par's threads when the loop holds at least
 * two parts of par->min_work units of work (n elements of `cost` units each; 1: a streaming
 * pass like relu), else in one call here. Up to 4 parts per thread, claimed by whichever
 * thread is free, so a worker that starts late costs little. Splits fall on multiples of 16
 * elements (64 bytes): parts never write the same cache line and their vector loops start
 * aligned where the data is. Every element is computed by the same code either way, so the
 * bits do not depend on the split. */
static inline void pbl__cpu_for(const pbl__kargs *a, int64_t n, int64_t cost, pbl__range_fn fn, void *ctx)
{
    const pbl__par *p = a->par;
    if (p && p->threads > 1 && p->min_work > 0) {
        int64_t parts = n * cost / p->min_work, most = 4 * (int64_t)p->threads;
        if (parts >= 2) {
            p->run(p->pool, n, 16, (int32_t)(parts < most ? parts : most), fn, ctx);
            return;
        }
    }
    fn(ctx, 0, n);
}

/* f32 data of input i / output k */
#define PBL__IN(a, i)  ((const float *)(a)->in[i])
#define PBL__OUT(a, k) ((float *)(a)->out[k])
#define PBL__NUMEL(m)  pbl_shape_numel(&(m).shape)

/* The activations' formulas, one place for the activation kernels (ops/cpu/activation.c)
 * and the fused ones (ops/cpu/fused.c), so fused and unfused results are the same bits. */
#define PBL__INV_SQRT2 0.70710678118654752440f
static inline float pbl__act_relu(float v) { return v > 0.0f ? v : 0.0f; }
static inline float pbl__act_sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }
static inline float pbl__act_tanh(float v) { return tanhf(v); }
static inline float pbl__act_gelu(float v) { return 0.5f * v * (1.0f + erff(v * PBL__INV_SQRT2)); }

/* Their gradients: g the incoming gradient, v the saved output y (relu, sigmoid, tanh) or the
 * input x (gelu), one place for the gradient kernels and matmul_act_grad (ops/cpu/fused.c). */
#define PBL__INV_SQRT_2PI 0.39894228040143267794f
static inline float pbl__act_relu_grad(float g, float v) { return v > 0.0f ? g : 0.0f; }
static inline float pbl__act_sigmoid_grad(float g, float v) { return g * v * (1.0f - v); }
static inline float pbl__act_tanh_grad(float g, float v) { return g * (1.0f - v * v); }
/* d/dx [x·Φ(x)] = Φ(x) + x·φ(x) */
static inline float pbl__act_gelu_grad(float g, float v)
{
    return g * (0.5f * (1.0f + erff(v * PBL__INV_SQRT2)) + v * PBL__INV_SQRT_2PI * expf(-0.5f * v * v));
}

/* Row helpers of the softmax family: the max of x[0..n), and Σ exp(x[j] − mx), writing each
 * exp(x[j] − mx) to e[j] when e is not NULL. Subtracting the max keeps exp from overflowing. */
static inline float pbl__row_max(const float *x, int64_t n)
{
    float mx = x[0];
    for (int64_t j = 1; j < n; j++)
        mx = x[j] > mx ? x[j] : mx;
    return mx;
}

static inline float pbl__row_sum_exp(const float *x, int64_t n, float mx, float *e)
{
    float sum = 0.0f;
    for (int64_t j = 0; j < n; j++) {
        float v = expf(x[j] - mx);
        if (e)
            e[j] = v;
        sum += v;
    }
    return sum;
}

#endif
