/*
 * transpose: permutes the dims of x (f32 or i32). y.dim[k] = x.dim[perm[k]]; an empty perm
 * reverses the dims (ONNX's default). The gradient is the transpose by the inverse perm, so
 * it reads neither x nor y. Kernel: ops/cpu/transpose.c.
 */
#include "ops/cpu/kernels.h"

static const pbl__attr_spec transpose_attrs[] = { { .name = "perm", .type = PBL_ATTR_INTS } };

/* The effective perm (empty: reversed dims) into out; 0 when perm is not one of ndim axes. */
static int transpose_perm(const pbl__attr_val *perm, int32_t ndim, int64_t *out)
{
    if (perm->n_ints == 0) {
        for (int32_t k = 0; k < ndim; k++)
            out[k] = ndim - 1 - k;
        return 1;
    }
    if (perm->n_ints != ndim)
        return 0;
    int32_t seen = 0;
    for (int32_t k = 0; k < ndim; k++) {
        int64_t p = perm->ints[k];
        if (p < 0 || p >= ndim || (seen & (1 << p)))
            return 0;
        seen |= 1 << p;
        out[k] = p;
    }
    return 1;
}

static pbl_status transpose_infer(pbl__infer_ctx *c)
{
    const pbl_shape *x = &c->in[0].shape;
    const pbl__attr_val *perm = &c->attr[0];
    int64_t p[PBL_MAX_DIMS];
    if (!transpose_perm(perm, x->ndim, p)) {
        char sx[96], sp[96];
        pbl_shape ps = { .ndim = perm->n_ints < PBL_MAX_DIMS ? perm->n_ints : PBL_MAX_DIMS }; /* printed as a list */
        for (int32_t k = 0; k < ps.ndim; k++)
            ps.dim[k] = perm->ints[k];
        return pbl__infer_fail(c, perm->n_ints != x->ndim ? PBL_ERR_SHAPE : PBL_ERR_ATTR,
                               "x is %s but perm is %s; perm must list each of x's %d axes once",
                               pbl_shape_str(x, sx, sizeof sx), pbl_shape_str(&ps, sp, sizeof sp), (int)x->ndim);
    }
    c->out[0].dtype = c->in[0].dtype;
    c->out[0].shape.ndim = x->ndim;
    for (int32_t k = 0; k < x->ndim; k++)
        c->out[0].shape.dim[k] = x->dim[p[k]];
    return PBL_OK;
}

static pbl_status transpose_grad(pbl__grad_ctx *c)
{
    pbl_value_info xi;
    if (pbl_graph_value_info(c->g, c->x[0], &xi) != PBL_OK)
        return PBL_ERR_INVALID_ARG;
    int64_t p[PBL_MAX_DIMS], inv[PBL_MAX_DIMS];
    transpose_perm(&c->attr[0], xi.shape.ndim, p);
    for (int32_t k = 0; k < xi.shape.ndim; k++)
        inv[p[k]] = k;
    pbl_attr at = PBL_ATTR_INTS("perm", inv, xi.shape.ndim);
    c->dx[0] = pbl__grad_emit(c, "transpose", "grad", &c->dy[0], 1, &at, 1);
    return c->status;
}

const pbl__op pbl__op_transpose = {
    .name = "transpose", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .attrs = transpose_attrs, .n_attrs = 1,
    .infer = transpose_infer, .grad = transpose_grad,
    .cpu = pbl__cpu_transpose,
};
