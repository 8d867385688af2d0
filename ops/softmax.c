/* softmax and log_softmax over the last dim, and their gradient ops (which read y).
 * Kernels: ops/cpu/softmax.c. */
#include "ops/cpu/kernels.h"

static const int8_t out0_over_in0[][2] = { { 0, 0 } };

static pbl_status softmax_infer(pbl__infer_ctx *c)
{
    if (c->in[0].shape.ndim < 1)
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "x is a scalar; softmax needs at least one dim");
    return pbl__infer_same_as_input(c);
}

static pbl_status softmax_grad(pbl__grad_ctx *c)
{
    c->dx[0] = pbl__grad_emit(c, "softmax_grad", "grad", (pbl_value[]){ c->dy[0], c->y[0] }, 2, NULL, 0);
    return c->status;
}

static pbl_status log_softmax_grad(pbl__grad_ctx *c)
{
    c->dx[0] = pbl__grad_emit(c, "log_softmax_grad", "grad", (pbl_value[]){ c->dy[0], c->y[0] }, 2, NULL, 0);
    return c->status;
}

/* three passes over x: its max, the sum of exponentials, the normalised output */
static void softmax_cost(const pbl__cost_ctx *c, pbl__cost *out) { out->flops = 3 * pbl__cost_numel(&c->in[0]); }

const pbl__op pbl__op_softmax = {
    .name = "softmax", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .infer = softmax_infer, .grad = softmax_grad, .grad_reads_out = 0x1,
    .inplace = out0_over_in0, .n_inplace = 1,
    .cost = softmax_cost,
    .cpu = pbl__cpu_softmax,
};

const pbl__op pbl__op_log_softmax = {
    .name = "log_softmax", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .infer = softmax_infer, .grad = log_softmax_grad, .grad_reads_out = 0x1,
    .inplace = out0_over_in0, .n_inplace = 1,
    .cost = softmax_cost,
    .cpu = pbl__cpu_log_softmax,
};

/* softmax_grad and log_softmax_grad: (dy, y) -> dx, with at least one dim to reduce over */
static pbl_status pair_infer(pbl__infer_ctx *c)
{
    if (c->in[0].shape.ndim < 1)
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "dy is a scalar");
    return pbl__infer_grad_pair(c);
}

const pbl__op pbl__op_softmax_grad = {
    .name = "softmax_grad", .n_in_min = 2, .n_in_max = 2, .n_out = 1,
    .infer = pair_infer, .inplace = out0_over_in0, .n_inplace = 1,
    .cpu = pbl__cpu_softmax_grad,
};

const pbl__op pbl__op_log_softmax_grad = {
    .name = "log_softmax_grad", .n_in_min = 2, .n_in_max = 2, .n_out = 1,
    .infer = pair_infer, .inplace = out0_over_in0, .n_inplace = 1,
    .cpu = pbl__cpu_log_softmax_grad,
};

/* hardmax: 1 at the first max of each row of the last dim, 0 elsewhere. Piecewise constant, so
 * no gradient rule (its derivative is 0 wherever it has one). */
const pbl__op pbl__op_hardmax = {
    .name = "hardmax", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .infer = softmax_infer,
    .cost = pbl__cost_reduce,
    .cpu = pbl__cpu_hardmax,
};
