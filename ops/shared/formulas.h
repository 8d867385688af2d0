/* Formulas the kernels of both backends share (ops/cpu/ and ops/cuda/): the activations and
 * their gradients, and the softmax family's row passes. Each is one inline function compiled
 * for the host and, under nvcc, for the device too. */
#ifndef PBL_OPS_FORMULAS_H
#define PBL_OPS_FORMULAS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define PBL__HD __host__ __device__
#else
#define PBL__HD
#endif

/* tanh for the formulas on the host: the arithmetic of the CPU's vector tanh (ops/cpu/
 * activation.c: Cephes' tanhf polynomial below |x| 0.625, else 1 − 2/(e^{2|x|} + 1) with
 * Cephes' expf scheme), one element at a time and without branches, so a loop over it
 * vectorises (libm's tanhf is one call per element) and gives the tanh kernel's bits; within a
 * few ulp. On the device, CUDA's tanhf. */
#ifndef __CUDA_ARCH__
#include <string.h>
static inline float pbl__exp_poly(float x) /* e^x, x clamped to [-87.34, 88.38]; NaN stays */
{
    x = x < -87.33654f ? -87.33654f : x;
    x = x > 88.37626f ? 88.37626f : x;
    float t = x * 1.44269504088896341f + 12582912.0f; /* adding 1.5·2^23 rounds: n in the low bits */
    uint32_t n, e; /* unsigned: defined for any bits, a NaN's too (its result stays NaN) */
    memcpy(&n, &t, sizeof n);
    n -= 0x4B400000u;
    float nf = t - 12582912.0f, r = x - nf * 0.693359375f - nf * -2.12194440e-4f, p = 1.9875691500e-4f, s;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    e = (n + 127u) << 23; /* 2^n in the exponent bits (n + 127 ≥ 1 after the clamp) */
    memcpy(&s, &e, sizeof s);
    return (p * (r * r) + r + 1.0f) * s;
}
static inline float pbl__tanh_poly(float x)
{
    float a = fabsf(x), x2 = x * x, p = -5.70498872745e-3f;
    p = p * x2 + 2.06390887954e-2f;
    p = p * x2 - 5.37397155531e-2f;
    p = p * x2 + 1.33314422036e-1f;
    p = p * x2 - 3.33332819422e-1f;
    float small = p * x2 * x + x;
    float big = copysignf(1.0f - 2.0f / (pbl__exp_poly(2.0f * (a < 9.0f ? a : 9.0f)) + 1.0f), x);
    float y = a < 0.625f ? small : big;
    return x != x ? x : y; /* NaN stays NaN */
}
#define PBL__TANHF(x) pbl__tanh_poly(x)
#else
#define PBL__TANHF(x) tanhf(x)
#endif

/* The activations' formulas, one place for the activation kernels and the fused ones of both
 * backends (ops/cpu/, ops/cuda/), so fused and unfused results, CPU and GPU, are the same
 * formulas (and the same bits where the math library agrees). */
#define PBL__INV_SQRT2 0.70710678118654752440f
PBL__HD static inline float pbl__act_relu(float v) { return v > 0.0f ? v : 0.0f; }
PBL__HD static inline float pbl__act_sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }
PBL__HD static inline float pbl__act_tanh(float v) { return tanhf(v); }
PBL__HD static inline float pbl__act_gelu(float v) { return 0.5f * v * (1.0f + erff(v * PBL__INV_SQRT2)); }

/* Their gradients: g the incoming gradient, v the saved output y (relu, sigmoid, tanh) or the
 * input x (gelu), one place for the gradient kernels and matmul_act_grad (ops/cpu/fused.c). */
#define PBL__INV_SQRT_2PI 0.39894228040143267794f
PBL__HD static inline float pbl__act_relu_grad(float g, float v) { return v > 0.0f ? g : 0.0f; }
PBL__HD static inline float pbl__act_sigmoid_grad(float g, float v) { return g * v * (1.0f - v); }
PBL__HD static inline float pbl__act_tanh_grad(float g, float v) { return g * (1.0f - v * v); }
/* d/dx [x·Φ(x)] = Φ(x) + x·φ(x) */
PBL__HD static inline float pbl__act_gelu_grad(float g, float v)
{
    return g * (0.5f * (1.0f + erff(v * PBL__INV_SQRT2)) + v * PBL__INV_SQRT_2PI * expf(-0.5f * v * v));
}

/* Row helpers of the softmax family: the max of x[0..n), and Σ exp(x[j] − mx), writing each
 * exp(x[j] − mx) to e[j] when e is not NULL. Subtracting the max keeps exp from overflowing. */
PBL__HD static inline float pbl__row_max(const float *x, int64_t n)
{
    float mx = x[0];
    for (int64_t j = 1; j < n; j++)
        mx = x[j] > mx ? x[j] : mx;
    return mx;
}

PBL__HD static inline float pbl__row_sum_exp(const float *x, int64_t n, float mx, float *e)
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

/* batch_norm_update: a batch's unbiased variance from the inv_std = 1/sqrt(var + eps) it saved
 * over m values (var biased), as the running variance keeps it (PyTorch's convention). */
PBL__HD static inline float pbl__bn_running_var(float inv_std, double eps, double m)
{
    double var = 1.0 / ((double)inv_std * (double)inv_std) - eps;
    var = var > 0.0 ? var : 0.0;
    return (float)(m > 1.0 ? var * m / (m - 1.0) : var);
}

#endif
