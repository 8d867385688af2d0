/* CPU kernels: activations and their gradients. All may run in place (y over x, dx over dy):
 * each element reads only its own index. */
#include <math.h>
#include <string.h>

#include "graph/base/cpu.h"
#include "ops/cpu/kernels.h"

/* ---- tanh and sigmoid, 8 floats at a time ------------------------------------------------
 * libm's tanhf and expf are one element per call; these are branch-free over GCC/Clang vector
 * types (8 floats: two xmm with SSE2, one ymm with AVX2 or AVX-512), compiled once per level
 * (graph/base/cpu.h) and picked at run time. exp is Cephes' expf scheme: n = round(x·log2 e),
 * r = x − n·ln 2 (ln 2 in two parts), a degree-6 polynomial, then 2^n put in the exponent
 * bits; within 2 ulp. tanh: |x| < 0.625 an odd polynomial (Cephes' tanhf), else
 * 1 − 2/(e^{2|x|} + 1) with x's sign; sigmoid 1/(1 + e^{−x}) for x ≥ 0, e^{x}/(1 + e^{x}) below,
 * so e never overflows. Within a few ulp of the exact values (test/test_cpu_levels.c). */
#if defined(__GNUC__) || defined(__clang__)
#define ACT_VEC 1
#if !defined(__clang__)
/* the helpers below pass 32-byte vectors by value, but are always inlined: no ABI is crossed */
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
typedef float   v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

#define V8(c) ((v8f){ c, c, c, c, c, c, c, c })
#define I8(c) ((v8i){ c, c, c, c, c, c, c, c })

/* m (all bits set or clear per lane) ? a : b */
__attribute__((always_inline)) static inline v8f vsel(v8i m, v8f a, v8f b)
{
    return (v8f)((m & (v8i)a) | (~m & (v8i)b));
}

__attribute__((always_inline)) static inline v8f vexp(v8f x)
{
    x = vsel(x < V8(-87.33654f), V8(-87.33654f), x);
    x = vsel(x > V8(88.37626f), V8(88.37626f), x);
    /* round to nearest: adding 1.5·2^23 leaves n in the low mantissa bits */
    v8f t = x * V8(1.44269504088896341f) + V8(12582912.0f);
    v8i n = (v8i)t - I8(0x4B400000);
    v8f nf = t - V8(12582912.0f);
    v8f r = x - nf * V8(0.693359375f) - nf * V8(-2.12194440e-4f);
    v8f p = V8(1.9875691500e-4f);
    p = p * r + V8(1.3981999507e-3f);
    p = p * r + V8(8.3334519073e-3f);
    p = p * r + V8(4.1665795894e-2f);
    p = p * r + V8(1.6666665459e-1f);
    p = p * r + V8(5.0000001201e-1f);
    v8f y = p * (r * r) + r + V8(1.0f);
    return y * (v8f)((n + I8(127)) << 23);
}

__attribute__((always_inline)) static inline v8f vtanh(v8f x)
{
    v8i sign = (v8i)x & I8((int32_t)0x80000000u);
    v8f a = (v8f)((v8i)x & I8(0x7FFFFFFF));
    v8f z = x * x;
    v8f p = V8(-5.70498872745e-3f);
    p = p * z + V8(2.06390887954e-2f);
    p = p * z + V8(-5.37397155531e-2f);
    p = p * z + V8(1.33314422036e-1f);
    p = p * z + V8(-3.33332819422e-1f);
    v8f small = p * z * x + x;
    v8f e = vexp(V8(2.0f) * vsel(a < V8(9.0f), a, V8(9.0f)));
    v8f big = (v8f)((v8i)(V8(1.0f) - V8(2.0f) / (e + V8(1.0f))) | sign);
    v8f y = vsel(a < V8(0.625f), small, big);
    return vsel(x != x, x, y); /* NaN stays NaN */
}

__attribute__((always_inline)) static inline v8f vsigmoid(v8f x)
{
    v8f a = (v8f)((v8i)x & I8(0x7FFFFFFF));
    v8f e = vexp(-a);
    v8f q = V8(1.0f) / (V8(1.0f) + e);
    return vsel(x >= V8(0.0f), q, e * q);
}

/* y[i] = f(x[i]) for i < n, 8 at a time; the last n % 8 through a buffer. y may be x. */
#define VEC_LOOP(f, x, y, n)                                          \
    do {                                                              \
        int64_t i_ = 0;                                               \
        for (; i_ + 8 <= (n); i_ += 8) {                              \
            v8f v_;                                                   \
            memcpy(&v_, (x) + i_, sizeof v_);                         \
            v_ = f(v_);                                               \
            memcpy((y) + i_, &v_, sizeof v_);                         \
        }                                                             \
        if (i_ < (n)) {                                               \
            float b_[8] = { 0 };                                      \
            memcpy(b_, (x) + i_, (size_t)((n) - i_) * sizeof *b_);    \
            v8f v_;                                                   \
            memcpy(&v_, b_, sizeof v_);                               \
            v_ = f(v_);                                               \
            memcpy(b_, &v_, sizeof v_);                               \
            memcpy((y) + i_, b_, (size_t)((n) - i_) * sizeof *b_);    \
        }                                                             \
    } while (0)

/* one function per level: the same body, compiled for each target */
#if defined(__x86_64__)
#define ACT_LEVELS(name, f)                                                                              \
    __attribute__((target("avx512f,avx2,fma"))) static void name##_avx512(const float *x, float *y, int64_t n) \
    {                                                                                                    \
        VEC_LOOP(f, x, y, n);                                                                            \
    }                                                                                                    \
    __attribute__((target("avx2,fma"))) static void name##_avx2(const float *x, float *y, int64_t n)     \
    {                                                                                                    \
        VEC_LOOP(f, x, y, n);                                                                            \
    }                                                                                                    \
    static void name##_base(const float *x, float *y, int64_t n) { VEC_LOOP(f, x, y, n); }               \
    void pbl__cpu_##name##_n(const float *x, float *y, int64_t n)                                        \
    {                                                                                                    \
        int l = pbl__cpu_level();                                                                        \
        (l == PBL__CPU_AVX512 ? name##_avx512 : l == PBL__CPU_AVX2 ? name##_avx2 : name##_base)(x, y, n); \
    }
#else
#define ACT_LEVELS(name, f) \
    void pbl__cpu_##name##_n(const float *x, float *y, int64_t n) { VEC_LOOP(f, x, y, n); }
#endif
ACT_LEVELS(tanh, vtanh)
ACT_LEVELS(sigmoid, vsigmoid)
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
