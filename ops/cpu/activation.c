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

UNARY(relu, pbl__act_relu(v))
UNARY(sigmoid, pbl__act_sigmoid(v))
UNARY(tanh, pbl__act_tanh(v))
UNARY(gelu, pbl__act_gelu(v))

BINARY(relu_grad, pbl__act_relu_grad(g, v))
BINARY(sigmoid_grad, pbl__act_sigmoid_grad(g, v))
BINARY(tanh_grad, pbl__act_tanh_grad(g, v))
BINARY(gelu_grad, pbl__act_gelu_grad(g, v))
