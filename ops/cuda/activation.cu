/* CUDA kernels: activations and their gradients, the formulas of ops/shared/formulas.h. All
 * may run in place: each element reads only its own index. */
#include "ops/cuda/common.cuh"


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

UNARY(relu, pbl__act_relu(v))
UNARY(sigmoid, pbl__act_sigmoid(v))
UNARY(tanh, pbl__act_tanh(v))
UNARY(gelu, pbl__act_gelu(v))

BINARY(relu_grad, pbl__act_relu_grad(gs[i], v))
BINARY(sigmoid_grad, pbl__act_sigmoid_grad(gs[i], v))
BINARY(tanh_grad, pbl__act_tanh_grad(gs[i], v))
BINARY(gelu_grad, pbl__act_gelu_grad(gs[i], v))
