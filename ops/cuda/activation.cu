/* CUDA kernels: activations and their gradients, the formulas of ops/cpu/activation.c. All
 * may run in place: each element reads only its own index. */
#include "ops/cuda/common.cuh"

#define INV_SQRT2    0.70710678118654752440f
#define INV_SQRT_2PI 0.39894228040143267794f

#define UNARY(name, expr)                                                                       \
    __global__ static void name##_k(float *y, const float *x, int64_t n)                        \
    {                                                                                           \
        PBL__GRID_LOOP(i, n) {                                                                  \
            float v = x[i];                                                                     \
            y[i] = (expr);                                                                      \
        }                                                                                       \
    }                                                                                           \
    extern "C" pbl_status pbl__cuda_##name(const pbl__cuda_launch *l, const pbl__kargs *a)      \
    {                                                                                           \
        pbl_status s = PBL_OK;                                                                  \
        int64_t n = PBL__NUMEL(a->in_meta[0]);                                                  \
        PBL__LAUNCH(name##_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0), n); \
        PBL__LAUNCHED();                                                                        \
    done:                                                                                       \
        return s;                                                                               \
    }

/* (dy, s) -> dx, with s the saved output y (or input x for gelu) */
#define BINARY(name, expr)                                                                      \
    __global__ static void name##_k(float *dx, const float *dy, const float *sv, int64_t n)     \
    {                                                                                           \
        PBL__GRID_LOOP(i, n) {                                                                  \
            float g = dy[i], v = sv[i];                                                         \
            dx[i] = (expr);                                                                     \
        }                                                                                       \
    }                                                                                           \
    extern "C" pbl_status pbl__cuda_##name(const pbl__cuda_launch *l, const pbl__kargs *a)      \
    {                                                                                           \
        pbl_status s = PBL_OK;                                                                  \
        int64_t n = PBL__NUMEL(a->in_meta[0]);                                                  \
        PBL__LAUNCH(name##_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0), \
                                                                 PBL__IN(a, 1), n);             \
        PBL__LAUNCHED();                                                                        \
    done:                                                                                       \
        return s;                                                                               \
    }

UNARY(relu, pbl__dact_relu(v))
UNARY(sigmoid, pbl__dact_sigmoid(v))
UNARY(tanh, pbl__dact_tanh(v))
UNARY(gelu, pbl__dact_gelu(v))

BINARY(relu_grad, v > 0.0f ? g : 0.0f)
BINARY(sigmoid_grad, g * v * (1.0f - v))
BINARY(tanh_grad, g * (1.0f - v * v))
/* d/dx [x·Φ(x)] = Φ(x) + x·φ(x) */
BINARY(gelu_grad, g * (0.5f * (1.0f + erff(v * INV_SQRT2)) + v * INV_SQRT_2PI * expf(-0.5f * v * v)))
