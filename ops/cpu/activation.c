/* CPU kernels: activations and their gradients. All may run in place (y over x, dx over dy):
 * each element reads only its own index. */
#include <math.h>

#include "ops/cpu/kernels.h"

#define UNARY(name, expr)                                        \
    PBL__HOT pbl_status pbl__cpu_##name(const pbl__kargs *a)   \
    {                                                          \
        const float *x = PBL__IN(a, 0);                        \
        float *y = PBL__OUT(a, 0);                             \
        int64_t n = PBL__NUMEL(a->in_meta[0]);                 \
        for (int64_t i = 0; i < n; i++) {                      \
            float v = x[i];                                    \
            y[i] = (expr);                                     \
        }                                                      \
        return PBL_OK;                                         \
    }

/* (dy, s) -> dx, with s the saved output y (or input x for gelu) */
#define BINARY(name, expr)                                       \
    PBL__HOT pbl_status pbl__cpu_##name(const pbl__kargs *a)   \
    {                                                          \
        const float *dy = PBL__IN(a, 0), *s = PBL__IN(a, 1);   \
        float *dx = PBL__OUT(a, 0);                            \
        int64_t n = PBL__NUMEL(a->in_meta[0]);                 \
        for (int64_t i = 0; i < n; i++) {                      \
            float g = dy[i], v = s[i];                         \
            dx[i] = (expr);                                    \
        }                                                      \
        return PBL_OK;                                         \
    }

#define INV_SQRT2    0.70710678118654752440f
#define INV_SQRT_2PI 0.39894228040143267794f

UNARY(relu, pbl__act_relu(v))
UNARY(sigmoid, pbl__act_sigmoid(v))
UNARY(tanh, pbl__act_tanh(v))
UNARY(gelu, pbl__act_gelu(v))

BINARY(relu_grad, v > 0.0f ? g : 0.0f)
BINARY(sigmoid_grad, g * v * (1.0f - v))
BINARY(tanh_grad, g * (1.0f - v * v))
/* d/dx [x·Φ(x)] = Φ(x) + x·φ(x) */
BINARY(gelu_grad, g * (0.5f * (1.0f + erff(v * INV_SQRT2)) + v * INV_SQRT_2PI * expf(-0.5f * v * v)))
