/* CUDA kernels: activations and their gradients, the formulas of ops/cpu/activation.c. All
 * may run in place: each element reads only its own index. */
#include "ops/cuda/common.cuh"

#define INV_SQRT2    0.70710678118654752440f
#define INV_SQRT_2PI 0.39894228040143267794f

/* The forward ops read x (v = x[i]); the gradient ops read (dy, s) -> dx, v = s[i] with s
 * the saved output y (or input x for gelu), and the incoming gradient as gs[i] (a named
 * copy would be unused in the forward kernels, which nvcc's warnings refuse). */
#define ACTIVATION(name, n_in, expr)                                                            \
    __global__ static void name##_k(float *out, const float *gs, const float *vs, int64_t n)    \
    {                                                                                           \
        PBL__GRID_LOOP(i, n) {                                                                  \
            float v = vs[i];                                                                    \
            out[i] = (expr);                                                                    \
        }                                                                                       \
    }                                                                                           \
    extern "C" pbl_status pbl__cuda_##name(const pbl__cuda_launch *l, const pbl__kargs *a)      \
    {                                                                                           \
        pbl_status s = PBL_OK;                                                                  \
        int64_t n = PBL__NUMEL(a->in_meta[0]);                                                  \
        PBL__LAUNCH(name##_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0), \
                                                                 PBL__IN(a, (n_in) - 1), n);    \
        PBL__LAUNCHED();                                                                        \
    done:                                                                                       \
        return s;                                                                               \
    }
#define UNARY(name, expr)  ACTIVATION(name, 1, expr)
#define BINARY(name, expr) ACTIVATION(name, 2, expr)

UNARY(relu, pbl__dact_relu(v))
UNARY(sigmoid, pbl__dact_sigmoid(v))
UNARY(tanh, pbl__dact_tanh(v))
UNARY(gelu, pbl__dact_gelu(v))

BINARY(relu_grad, v > 0.0f ? gs[i] : 0.0f)
BINARY(sigmoid_grad, gs[i] * v * (1.0f - v))
BINARY(tanh_grad, gs[i] * (1.0f - v * v))
/* d/dx [x·Φ(x)] = Φ(x) + x·φ(x) */
BINARY(gelu_grad, gs[i] * (0.5f * (1.0f + erff(v * INV_SQRT2)) + v * INV_SQRT_2PI * expf(-0.5f * v * v)))
