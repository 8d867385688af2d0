/* dropout: y = x·mask, mask = 0 with probability p, else 1/(1−p); with a second input, the
 * runtime scalar "training" (0: evaluate, y = x and mask = 1), read at each run. The mask is a second output
 * kept for the backward pass (dx = dy·mask). It is a pure function of (seed, run counter,
 * element index) — see ops/cpu/dropout.c — so two runs of the same graph repeat exactly. */
#include "ops/cpu/kernels.h"

enum { DROP_P, DROP_SEED };
static const pbl__attr_spec dropout_attrs[] = {
    { .name = "p", .type = PBL_ATTR_FLOAT, .f = 0.5 },
    { .name = "seed", .type = PBL_ATTR_INT },
};

static pbl_status dropout_infer(pbl__infer_ctx *c)
{
    double p = c->attr[DROP_P].f;
    if (!(p >= 0.0 && p < 1.0))
        return pbl__infer_fail(c, PBL_ERR_ATTR, "p is %g; it must be in [0, 1)", p);
    pbl_status s = pbl__infer_check_f32(c, 0, "x");
    if (s == PBL_OK && c->n_in > 1)
        s = pbl__infer_check_f32(c, 1, "training");
    if (s == PBL_OK && c->n_in > 1 && pbl_shape_numel(&c->in[1].shape) != 1) {
        char st[96];
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "training is %s; the switch must hold one element",
                               pbl_shape_str(&c->in[1].shape, st, sizeof st));
    }
    if (s == PBL_OK)
        c->out[0] = c->out[1] = c->in[0];
    return s;
}

static pbl_status dropout_grad(pbl__grad_ctx *c)
{
    if (c->dy[0] == PBL_NONE) /* only the mask was used: it does not vary with x */
        return c->status;
    c->dx[0] = pbl__grad_emit(c, "mul", "grad", (pbl_value[]){ c->dy[0], c->y[1] }, 2, NULL, 0);
    return c->status;
}

/* per element: the draw (splitmix64's finaliser: three xor-shifts and two multiplies, eight
 * operations) and the two writes */
static void dropout_cost(const pbl__cost_ctx *c, pbl__cost *out) { out->flops = 10 * pbl__cost_numel(&c->in[0]); }

const pbl__op pbl__op_dropout = {
    .name = "dropout", .n_in_min = 1, .n_in_max = 2, .n_out = 2,
    .attrs = dropout_attrs, .n_attrs = 2,
    .infer = dropout_infer, .grad = dropout_grad,
    .grad_reads_out = 0x2, /* the mask */
    .cost = dropout_cost,
    .cpu = pbl__cpu_dropout,
};
