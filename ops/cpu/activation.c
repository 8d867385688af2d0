/* CPU kernels: activations and their gradients. All may run in place (y over x, dx over dy):
 * each element reads only its own index. */
#include <math.h>
#include <string.h>

#include "graph/base/cpu.h"
#include "ops/cpu/kernels.h"

/* ---- tanh and sigmoid, a vector at a time ------------------------------------------------
 * libm's tanhf and expf are one element per call; these are branch-free over GCC/Clang vector
 * types as wide as each level's registers (4 floats with SSE2, 8 with AVX2, 16 with AVX-512),
 * compiled once per level (graph/base/cpu.h) and picked at run time. exp is Cephes' expf
 * scheme: n = round(x·log2 e), r = x − n·ln 2 (ln 2 in two parts), a degree-6 polynomial,
 * then 2^n put in the exponent bits; within 2 ulp (exp itself, for the softmax rows, gives 0
 * below ln(FLT_MIN), where the true value is at most a denormal). tanh: |x| < 0.625 an odd polynomial
 * (Cephes' tanhf), else 1 − 2/(e^{2|x|} + 1) with x's sign; sigmoid 1/(1 + e^{−x}) for x ≥ 0,
 * e^{x}/(1 + e^{x}) below, so e never overflows. Every level computes the same expressions
 * (no contraction into FMAs under -std=c11), so all give the same bits; within a few ulp of
 * the exact values (test/test_cpu_levels.c). */
#if defined(__GNUC__) || defined(__clang__)

/* One level's functions, suffix S, over vectors of W floats (VF) and ints (VI); ATTR holds
 * the level's target attribute, so no vector crosses a function boundary of a narrower ISA. */
#define ACT_VECTOR_LEVEL(S, W, ATTR)                                                              \
    typedef float   vf##S __attribute__((vector_size(4 * (W))));                                  \
    typedef int32_t vi##S __attribute__((vector_size(4 * (W))));                                  \
    ATTR __attribute__((always_inline)) static inline vf##S vsel##S(vi##S m, vf##S a, vf##S b)    \
    {                                                                                             \
        return (vf##S)((m & (vi##S)a) | (~m & (vi##S)b));                                        \
    }                                                                                             \
    ATTR __attribute__((always_inline)) static inline vf##S vexp##S(vf##S x)                      \
    {                                                                                             \
        const vf##S z = { 0 };                                                                    \
        x = vsel##S(x < z - 87.33654f, z - 87.33654f, x);                                         \
        x = vsel##S(x > z + 88.37626f, z + 88.37626f, x);                                         \
        /* round to nearest: adding 1.5·2^23 leaves n in the low mantissa bits */                 \
        vf##S t = x * 1.44269504088896341f + 12582912.0f;                                         \
        vi##S n = (vi##S)t - 0x4B400000;                                                          \
        vf##S nf = t - 12582912.0f;                                                               \
        vf##S r = x - nf * 0.693359375f - nf * -2.12194440e-4f;                                   \
        vf##S p = z + 1.9875691500e-4f;                                                           \
        p = p * r + 1.3981999507e-3f;                                                             \
        p = p * r + 8.3334519073e-3f;                                                             \
        p = p * r + 4.1665795894e-2f;                                                             \
        p = p * r + 1.6666665459e-1f;                                                             \
        p = p * r + 5.0000001201e-1f;                                                             \
        vf##S y = p * (r * r) + r + 1.0f;                                                         \
        return y * (vf##S)((n + 127) << 23);                                                      \
    }                                                                                             \
    ATTR __attribute__((always_inline)) static inline vf##S vtanh##S(vf##S x)                     \
    {                                                                                             \
        const vf##S z = { 0 };                                                                    \
        vi##S sign = (vi##S)x & (int32_t)0x80000000u;                                             \
        vf##S a = (vf##S)((vi##S)x & 0x7FFFFFFF);                                                 \
        vf##S x2 = x * x;                                                                         \
        vf##S p = z - 5.70498872745e-3f;                                                          \
        p = p * x2 + 2.06390887954e-2f;                                                           \
        p = p * x2 - 5.37397155531e-2f;                                                           \
        p = p * x2 + 1.33314422036e-1f;                                                           \
        p = p * x2 - 3.33332819422e-1f;                                                           \
        vf##S small = p * x2 * x + x;                                                             \
        vf##S e = vexp##S(2.0f * vsel##S(a < z + 9.0f, a, z + 9.0f));                             \
        vf##S big = (vf##S)((vi##S)(1.0f - 2.0f / (e + 1.0f)) | sign);                            \
        vf##S y = vsel##S(a < z + 0.625f, small, big);                                            \
        return vsel##S(x != x, x, y); /* NaN stays NaN */                                         \
    }                                                                                             \
    ATTR __attribute__((always_inline)) static inline vf##S vsigmoid##S(vf##S x)                  \
    {                                                                                             \
        const vf##S z = { 0 };                                                                    \
        vf##S a = (vf##S)((vi##S)x & 0x7FFFFFFF);                                                 \
        vf##S e = vexp##S(-a);                                                                    \
        vf##S q = 1.0f / (1.0f + e);                                                              \
        return vsel##S(x >= z, q, e * q);                                                         \
    }                                                                                             \
    /* y[i] = f(x[i]) for i < n, W at a time; the last n % W through a buffer. y may be x. */     \
    ATTR static void tanh##S(const float *x, float *y, int64_t n)                                 \
    {                                                                                             \
        ACT_LOOP(vtanh##S, vf##S, W);                                                             \
    }                                                                                             \
    ATTR static void sigmoid##S(const float *x, float *y, int64_t n)                              \
    {                                                                                             \
        ACT_LOOP(vsigmoid##S, vf##S, W);                                                          \
    }                                                                                             \
    /* e^x over all floats: 0 below ln(FLT_MIN) (the softmax rows' masked -inf logits give      \
     * exact zeros); past vexp's clamp, e^(x − c)·e^c with c = 0.693359375 (x − c is exact       \
     * there, e^c rounded once), and inf past ln(FLT_MAX) */                                     \
    ATTR __attribute__((always_inline)) static inline vf##S vexp0##S(vf##S x)                     \
    {                                                                                             \
        const vf##S z = { 0 };                                                                    \
        vi##S high = x > z + 88.37626f;                                                           \
        vf##S y = vexp##S(vsel##S(high, x - 0.693359375f, x));                                    \
        y = vsel##S(high, y * 2.000424385f, y);                                                   \
        y = vsel##S(x > z + 88.72283906f, z + INFINITY, y);                                       \
        return vsel##S(x < z - 87.33654f, z, y);                                                  \
    }                                                                                             \
    ATTR static void exp##S(const float *x, float *y, int64_t n)                                  \
    {                                                                                             \
        ACT_LOOP(vexp0##S, vf##S, W);                                                             \
    }

#define ACT_LOOP(f, VF, W)                                                \
    int64_t i_ = 0;                                                       \
    for (; i_ + (W) <= n; i_ += (W)) {                                    \
        VF v_;                                                            \
        memcpy(&v_, x + i_, sizeof v_);                                   \
        v_ = f(v_);                                                       \
        memcpy(y + i_, &v_, sizeof v_);                                   \
    }                                                                     \
    if (i_ < n) {                                                         \
        float b_[W] = { 0 };                                              \
        memcpy(b_, x + i_, (size_t)(n - i_) * sizeof *b_);                \
        VF v_;                                                            \
        memcpy(&v_, b_, sizeof v_);                                       \
        v_ = f(v_);                                                       \
        memcpy(b_, &v_, sizeof v_);                                       \
        memcpy(y + i_, b_, (size_t)(n - i_) * sizeof *b_);                \
    }

#define ACT_NO_ATTR
ACT_VECTOR_LEVEL(_base, 4, ACT_NO_ATTR)
#if defined(__x86_64__)
ACT_VECTOR_LEVEL(_avx2, 8, __attribute__((target("avx2,fma"))))
ACT_VECTOR_LEVEL(_avx512, 16, __attribute__((target("avx512f,avx2,fma"))))
#define ACT_PICK(name) \
    (pbl__cpu_level() == PBL__CPU_AVX512 ? name##_avx512 : pbl__cpu_level() == PBL__CPU_AVX2 ? name##_avx2 : name##_base)
#else
#define ACT_PICK(name) name##_base
#endif

void pbl__cpu_tanh_n(const float *x, float *y, int64_t n) { ACT_PICK(tanh)(x, y, n); }
void pbl__cpu_sigmoid_n(const float *x, float *y, int64_t n) { ACT_PICK(sigmoid)(x, y, n); }
void pbl__cpu_exp_n(const float *x, float *y, int64_t n) { ACT_PICK(exp)(x, y, n); }
#else
void pbl__cpu_tanh_n(const float *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = pbl__act_tanh(x[i]);
}
void pbl__cpu_sigmoid_n(const float *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = pbl__act_sigmoid(x[i]);
}
void pbl__cpu_exp_n(const float *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] < -87.33654f ? 0.0f : expf(x[i]); /* 0 below ln(FLT_MIN), as the vector one */
}
#endif

#define VECTOR_ACTIVATION(name)                                              \
    static void name##_range(void *ctx, int64_t lo, int64_t hi)              \
    {                                                                        \
        const pbl__kargs *a = ctx;                                           \
        pbl__cpu_##name##_n(PBL__IN(a, 0) + lo, PBL__OUT(a, 0) + lo, hi - lo); \
    }                                                                        \
    pbl_status pbl__cpu_##name(const pbl__kargs *a)                          \
    {                                                                        \
        pbl__cpu_for(a, PBL__NUMEL(a->in_meta[0]), 8, name##_range, (void *)a); \
        return PBL_OK;                                                       \
    }

/* Each kernel is a loop over [lo, hi) (PBL__HOT: vectorised) that pbl__cpu_for may split
 * over threads; `cost` weighs an element against a plain streaming pass (pbl__cpu_for). The
 * forward ops read x (v = x[i]); the gradient ops read (dy, s) -> dx, g = dy[i] and v = s[i],
 * with s the saved output y (or input x for gelu). */
#define ACTIVATION(name, cost, n_in, expr)                                   \
    PBL__HOT static void name##_range(void *ctx, int64_t lo, int64_t hi)    \
    {                                                                        \
        const pbl__kargs *a = ctx;                                           \
        const float *gs = PBL__IN(a, 0), *vs = PBL__IN(a, (n_in) - 1);       \
        float *out = PBL__OUT(a, 0);                                         \
        for (int64_t i = lo; i < hi; i++) {                                  \
            float g = gs[i], v = vs[i];                                      \
            (void)g;                                                         \
            out[i] = (expr);                                                 \
        }                                                                    \
    }                                                                        \
    pbl_status pbl__cpu_##name(const pbl__kargs *a)                          \
    {                                                                        \
        pbl__cpu_for(a, PBL__NUMEL(a->in_meta[0]), cost, name##_range, (void *)a); \
        return PBL_OK;                                                       \
    }
#define UNARY(name, cost, expr)  ACTIVATION(name, cost, 1, expr)
#define BINARY(name, cost, expr) ACTIVATION(name, cost, 2, expr)

UNARY(relu, 1, pbl__act_relu(v))
VECTOR_ACTIVATION(sigmoid)
VECTOR_ACTIVATION(tanh)
UNARY(gelu, 8, pbl__act_gelu(v))

BINARY(relu_grad, 1, pbl__act_relu_grad(g, v))
BINARY(sigmoid_grad, 1, pbl__act_sigmoid_grad(g, v))
BINARY(tanh_grad, 1, pbl__act_tanh_grad(g, v))
BINARY(gelu_grad, 8, pbl__act_gelu_grad(g, v))
