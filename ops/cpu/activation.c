/* CPU kernels: activations and their gradients. All may run in place (y over x, dx over dy):
 * each element reads only its own index. */
#include <math.h>

#include "ops/cpu/kernels.h"

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
UNARY(sigmoid, 8, pbl__act_sigmoid(v))
UNARY(tanh, 8, pbl__act_tanh(v))
UNARY(gelu, 8, pbl__act_gelu(v))

BINARY(relu_grad, 1, pbl__act_relu_grad(g, v))
BINARY(sigmoid_grad, 1, pbl__act_sigmoid_grad(g, v))
BINARY(tanh_grad, 1, pbl__act_tanh_grad(g, v))
BINARY(gelu_grad, 8, pbl__act_gelu_grad(g, v))
