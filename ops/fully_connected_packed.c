/*
 * fully_connected_packed: y[M,N] = x[M,K]·wᵀ (+ b) with w stored as 16-column panels,
 *
 *     wp[NB, K, 16],  wp[p, k, j] = w[16p + j, k]  (0 past N),  NB = ceil(N / 16),
 *
 * the layout the CPU kernel (ops/cpu/fully_connected_packed.c) streams: one 64-byte row of a
 * panel per k, loaded once and used by every row of x. The ONNX loader repacks a Gemm's
 * constant weights into it at load time (ONNX Runtime's MLAS prepacks its weights likewise),
 * so an inference never repacks w the way a BLAS sgemm call does on every call; it does so
 * only where the packed kernel beat sgemm when measured on the kernel level in use
 * (pack_wins in graph/io/onnx_ops.c).
 * Attribute `out` is N. Inference only: not differentiable.
 */
#include "ops/cpu/kernels.h"

static const pbl__attr_spec fcp_attrs[] = { { .name = "out", .type = PBL_ATTR_INT, .required = 1 } };

static pbl_status fcp_infer(pbl__infer_ctx *c)
{
    char sx[96], sw[96];
    static const char *const what[] = { "x", "wp", "b" };
    for (int32_t i = 0; i < c->n_in; i++) {
        pbl_status s = pbl__infer_check_f32(c, i, what[i]);
        if (s != PBL_OK)
            return s;
    }
    const pbl_shape *x = &c->in[0].shape, *w = &c->in[1].shape;
    int64_t N = c->attr[0].i;
    if (x->ndim != 2 || w->ndim != 3 || w->dim[2] != 16 || w->dim[1] != x->dim[1])
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "x is %s and wp is %s; need x [M, K] and wp [ceil(N/16), K, 16]",
                               pbl_shape_str(x, sx, sizeof sx), pbl_shape_str(w, sw, sizeof sw));
    if (N < 1 || (N + 15) / 16 != w->dim[0])
        return pbl__infer_fail(c, PBL_ERR_ATTR, "out is %lld but wp holds %lld panels of 16 columns", (long long)N,
                               (long long)w->dim[0]);
    if (c->n_in == 3 && (c->in[2].shape.ndim != 1 || c->in[2].shape.dim[0] != N))
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "b is %s; need b [%lld]", pbl_shape_str(&c->in[2].shape, sx, sizeof sx),
                               (long long)N);
    c->out[0].dtype = PBL_F32;
    c->out[0].shape = pbl_shape_make(2, (int64_t[]){ x->dim[0], N });
    return PBL_OK;
}

/* 2·|y|·K: fully_connected's product, K the last dim of x */
static void fcp_cost(const pbl__cost_ctx *c, pbl__cost *out)
{
    const pbl_shape *x = &c->in[0].shape;
    out->flops = 2 * pbl__cost_numel(&c->out[0]) * (x->ndim >= 1 ? x->dim[x->ndim - 1] : 1);
}

const pbl__op pbl__op_fully_connected_packed = {
    .name = "fully_connected_packed", .n_in_min = 2, .n_in_max = 3, .n_out = 1,
    .attrs = fcp_attrs, .n_attrs = 1,
    .infer = fcp_infer,
    .cost = fcp_cost,
    .cpu = pbl__cpu_fully_connected_packed,
};
