/* The math family's formulas (ops/math.c), one table for the CPU kernels (ops/cpu/math.c) and
 * the CUDA ones (ops/cuda/math.cu), compiled for the host and, under nvcc, for the device too.
 * Every op of the family is one row here; the kernels, the descriptors and the gradient ops are
 * generated from the rows, so adding a map is adding a row (and its name to registry.h's list).
 *
 * Unary maps, PBL__MU(name, n_attrs, f(x), f'(x)): p and q are the op's float attributes (the
 * first and second, when it has them: ops/math.c names them); f' is dy/dx, read by <name>_grad.
 * Binary maps, PBL__MB(name, f(a, b), ∂f/∂a, ∂f/∂b): b broadcast to a's shape.
 * Comparisons and logic, PBL__MC(name, test(a, b)): int32 0/1 out. */
#ifndef PBL_OPS_MATH_H
#define PBL_OPS_MATH_H

#include <float.h>

#include "ops/shared/formulas.h"

#define PBL__MU(n, na, fx, dfx)                                                               \
    enum { PBL__MATH_ATTRS_##n = (na) };                                                      \
    PBL__HD static inline float pbl__mf_##n(float x, float p, float q)                        \
    {                                                                                         \
        (void)p, (void)q;                                                                     \
        return (fx);                                                                          \
    }                                                                                         \
    PBL__HD static inline float pbl__md_##n(float x, float p, float q)                        \
    {                                                                                         \
        (void)p, (void)q;                                                                     \
        return (dfx);                                                                         \
    }

#define PBL__SQRT_2_OVER_PI 0.79788456080286535588f
#define PBL__TWO_OVER_SQRT_PI 1.12837916709551257390f

/* gelu with tanh's approximation: 0.5·x·(1 + tanh(u)), u = √(2/π)·(x + 0.044715·x³) */
PBL__HD static inline float pbl__gelu_tanh_u(float x) { return PBL__SQRT_2_OVER_PI * (x + 0.044715f * x * x * x); }

/* softplus without overflow: log(1 + eˣ) = max(x, 0) + log1p(e^−|x|) */
PBL__HD static inline float pbl__softplus(float x) { return fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x))); }

/* clip(min p, max q) = min(max(x, p), q), numpy's clip: q when p > q; NaN stays NaN; the
 * gradient passes inside [p, q] (PyTorch's clamp) */
PBL__HD static inline float pbl__clamp(float x, float p, float q)
{
    float t = x < p ? p : x;
    return t > q ? q : t;
}
PBL__MU(clip, 2, pbl__clamp(x, p, q), x >= p && x <= q ? 1.0f : 0.0f)
/* leaky_relu(alpha p) */
PBL__MU(leaky_relu, 1, x > 0.0f ? x : p * x, x > 0.0f ? 1.0f : p)
/* elu(alpha p) */
PBL__MU(elu, 1, x > 0.0f ? x : p * (expf(x) - 1.0f), x > 0.0f ? 1.0f : p * expf(x))
/* selu(alpha p, gamma q) */
PBL__MU(selu, 2, x > 0.0f ? q * x : q * p * (expf(x) - 1.0f), x > 0.0f ? q : q * p * expf(x))
PBL__MU(softplus, 0, pbl__softplus(x), pbl__act_sigmoid(x))
PBL__MU(softsign, 0, x / (1.0f + fabsf(x)), 1.0f / ((1.0f + fabsf(x)) * (1.0f + fabsf(x))))
/* hard_sigmoid(alpha p, beta q): max(0, min(1, p·x + q)) */
PBL__MU(hard_sigmoid, 2, fmaxf(0.0f, fminf(1.0f, p * x + q)), p * x + q > 0.0f && p * x + q < 1.0f ? p : 0.0f)
/* x · hard_sigmoid(x; 1/6, 1/2) */
PBL__MU(hard_swish, 0, x * fmaxf(0.0f, fminf(1.0f, x / 6.0f + 0.5f)),
        x < -3.0f ? 0.0f : x > 3.0f ? 1.0f : x / 3.0f + 0.5f)
/* thresholded_relu(alpha p) */
PBL__MU(thresholded_relu, 1, x > p ? x : 0.0f, x > p ? 1.0f : 0.0f)
/* shrink(lambd p, bias q) */
PBL__MU(shrink, 2, x < -p ? x + q : x > p ? x - q : 0.0f, x < -p || x > p ? 1.0f : 0.0f)
PBL__MU(gelu_tanh, 0, 0.5f * x * (1.0f + PBL__TANHF(pbl__gelu_tanh_u(x))),
        0.5f * (1.0f + PBL__TANHF(pbl__gelu_tanh_u(x))) +
            0.5f * x * (1.0f - PBL__TANHF(pbl__gelu_tanh_u(x)) * PBL__TANHF(pbl__gelu_tanh_u(x))) * PBL__SQRT_2_OVER_PI *
                (1.0f + 3.0f * 0.044715f * x * x))
PBL__MU(erf, 0, erff(x), PBL__TWO_OVER_SQRT_PI * expf(-x * x))
PBL__MU(exp, 0, expf(x), expf(x))
PBL__MU(log, 0, logf(x), 1.0f / x)
PBL__MU(sqrt, 0, sqrtf(x), 0.5f / sqrtf(x))
PBL__MU(neg, 0, -x, -1.0f)
PBL__MU(abs, 0, fabsf(x), x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : 0.0f)
PBL__MU(reciprocal, 0, 1.0f / x, -1.0f / (x * x))
/* sign, floor, ceil, round: steps, whose derivative is 0 wherever it exists */
PBL__MU(sign, 0, x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x, 0.0f)
PBL__MU(floor, 0, floorf(x), 0.0f)
PBL__MU(ceil, 0, ceilf(x), 0.0f)
/* halves to even (ONNX's Round): rintf in the default rounding mode */
PBL__MU(round, 0, rintf(x), 0.0f)
PBL__MU(sin, 0, sinf(x), cosf(x))
PBL__MU(cos, 0, cosf(x), -sinf(x))
PBL__MU(tan, 0, tanf(x), 1.0f + tanf(x) * tanf(x))
PBL__MU(asin, 0, asinf(x), 1.0f / sqrtf(1.0f - x * x))
PBL__MU(acos, 0, acosf(x), -1.0f / sqrtf(1.0f - x * x))
PBL__MU(atan, 0, atanf(x), 1.0f / (1.0f + x * x))
PBL__MU(sinh, 0, sinhf(x), coshf(x))
PBL__MU(cosh, 0, coshf(x), sinhf(x))
PBL__MU(asinh, 0, asinhf(x), 1.0f / sqrtf(x * x + 1.0f))
PBL__MU(acosh, 0, acoshf(x), 1.0f / sqrtf(x * x - 1.0f))
PBL__MU(atanh, 0, atanhf(x), 1.0f / (1.0f - x * x))
/* celu(alpha p): max(0, x) + min(0, p·(e^(x/p) − 1)) */
PBL__MU(celu, 1, x > 0.0f ? x : p * (expf(x / p) - 1.0f), x > 0.0f ? 1.0f : expf(x / p))

#define PBL__MB(n, f, da, db)                                                                 \
    PBL__HD static inline float pbl__mf_##n(float a, float b) { return (f); }                 \
    PBL__HD static inline float pbl__mda_##n(float a, float b) { return (da); }               \
    PBL__HD static inline float pbl__mdb_##n(float a, float b) { return (db); }

/* pow: ∂/∂b = aᵇ·ln a, defined for a > 0 (as PyTorch's) */
PBL__MB(pow, powf(a, b), b * powf(a, b - 1.0f), powf(a, b) * logf(a))
/* prelu: a the input, b the slope */
PBL__MB(prelu, a > 0.0f ? a : a * b, a > 0.0f ? 1.0f : b, a > 0.0f ? 0.0f : a)
/* fmod: C's remainder, the sign of a; ∂/∂b = −trunc(a / b) */
PBL__MB(fmod, fmodf(a, b), 1.0f, -truncf(a / b))
/* min, max: a tie's gradient goes to a; NaN propagates, as numpy's minimum and maximum */
PBL__MB(min, a != a || a < b ? a : b, a <= b ? 1.0f : 0.0f, a <= b ? 0.0f : 1.0f)
PBL__MB(max, a != a || a > b ? a : b, a >= b ? 1.0f : 0.0f, a >= b ? 0.0f : 1.0f)

/* Comparisons over float or int32 operands, and logic over int32 0/1 (nonzero is true). */
#define PBL__MC(n, t) \
    PBL__HD static inline int32_t pbl__mcf_##n(float a, float b) { return (t) ? 1 : 0; } \
    PBL__HD static inline int32_t pbl__mci_##n(int32_t a, int32_t b) { return (t) ? 1 : 0; }

PBL__MC(equal, a == b)
PBL__MC(less, a < b)
PBL__MC(greater, a > b)
PBL__MC(less_equal, a <= b)
PBL__MC(greater_equal, a >= b)
PBL__MC(logical_and, a != 0 && b != 0)
PBL__MC(logical_or, a != 0 || b != 0)
PBL__MC(logical_xor, (a != 0) != (b != 0))

/* Predicates over floats, int32 0/1 out: PBL__MP(name, n_attrs, test(x; p, q)), p and q the
 * op's int attributes. */
#define PBL__MP(n, na, t)                                                                     \
    enum { PBL__MATH_ATTRS_##n = (na) };                                                      \
    PBL__HD static inline int32_t pbl__mp_##n(float x, int64_t p, int64_t q)                  \
    {                                                                                         \
        (void)p, (void)q;                                                                     \
        return (t) ? 1 : 0;                                                                   \
    }

PBL__MP(is_nan, 0, x != x)
/* is_inf(detect_negative p, detect_positive q) */
PBL__MP(is_inf, 2, fabsf(x) > FLT_MAX && (x > 0.0f ? q != 0 : p != 0))

/* Integer maps, int32 in and out: PBL__MI(name, f(a, b)). mod is Python's (numpy's): the sign
 * of b. A zero divisor gives 0 (numpy's value, without its warning), and so does −1, whose
 * INT32_MIN % −1 would trap. */
#define PBL__MI(n, f) PBL__HD static inline int32_t pbl__mi_##n(int32_t a, int32_t b) { return (f); }

PBL__HD static inline int32_t pbl__int_mod(int32_t a, int32_t b)
{
    if (b == 0 || b == -1)
        return 0;
    int32_t r = a % b;
    return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}
PBL__MI(mod, pbl__int_mod(a, b))

#endif
