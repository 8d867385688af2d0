/* relu, sigmoid, tanh, gelu and their gradient ops. Kernels: ops/cpu/activation.c.
 * relu/sigmoid/tanh gradients read the output y (so x may die, or be overwritten in place);
 * gelu's reads x. */
#include "ops/cpu/kernels.h"

static const int8_t out0_over_in0[][2] = { { 0, 0 } };

/* dx = <name>_grad(dy, y or x) */
static pbl_status act_grad(pbl__grad_ctx *c, const char *op, pbl_value saved)
{
    c->dx[0] = pbl__grad_emit(c, op, "grad", (pbl_value[]){ c->dy[0], saved }, 2, NULL, 0);
    return c->status;
}

static pbl_status relu_grad(pbl__grad_ctx *c) { return act_grad(c, "relu_grad", c->y[0]); }
static pbl_status sigmoid_grad(pbl__grad_ctx *c) { return act_grad(c, "sigmoid_grad", c->y[0]); }
static pbl_status tanh_grad(pbl__grad_ctx *c) { return act_grad(c, "tanh_grad", c->y[0]); }
static pbl_status gelu_grad(pbl__grad_ctx *c) { return act_grad(c, "gelu_grad", c->x[0]); }

#define ACTIVATION(n, reads_in, reads_out, has_inplace)                               \
    const pbl__op pbl__op_##n = {                                                   \
        .name = #n, .n_in_min = 1, .n_in_max = 1, .n_out = 1,                       \
        .infer = pbl__infer_same_as_input, .grad = n##_grad,                        \
        .grad_reads_in = (reads_in), .grad_reads_out = (reads_out),                 \
        .inplace = (has_inplace) ? out0_over_in0 : NULL, .n_inplace = (has_inplace), \
        .cpu = pbl__cpu_##n,                                                        \
    };

ACTIVATION(relu, 0, 1, 1)
ACTIVATION(sigmoid, 0, 1, 1)
ACTIVATION(tanh, 0, 1, 1)
ACTIVATION(gelu, 1, 0, 0) /* its gradient needs x, so y must not overwrite it */

/* The gradient ops: (dy, saved) -> dx, dx may overwrite dy. */
#define ACTIVATION_GRAD(n)                                                            \
    const pbl__op pbl__op_##n = {                                                   \
        .name = #n, .n_in_min = 2, .n_in_max = 2, .n_out = 1,                       \
        .infer = pbl__infer_grad_pair,                                              \
        .inplace = out0_over_in0, .n_inplace = 1,                                   \
        .cpu = pbl__cpu_##n,                                                        \
    };

ACTIVATION_GRAD(relu_grad)
ACTIVATION_GRAD(sigmoid_grad)
ACTIVATION_GRAD(tanh_grad)
ACTIVATION_GRAD(gelu_grad)
