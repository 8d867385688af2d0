/* reshape and flatten: same bytes, new shape. Offered in place, so a planned executor makes
 * them free views; the kernel copies only when storage differs. Kernels: ops/cpu/shape_ops.c. */
#include "ops/cpu/kernels.h"

static const int8_t out0_over_in0[][2] = { { 0, 0 } };

static pbl_status reshape_infer(pbl__infer_ctx *c)
{
    const pbl__attr_val *s = &c->attr[0];
    char sx[96];
    if (s->n_ints > PBL_MAX_DIMS)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "shape has %d dims, at most %d", (int)s->n_ints, PBL_MAX_DIMS);
    int64_t known = 1, n = pbl_shape_numel(&c->in[0].shape);
    int32_t infer_at = -1;
    for (int32_t i = 0; i < s->n_ints; i++) {
        if (s->ints[i] == -1 && infer_at < 0)
            infer_at = i;
        else if (s->ints[i] <= 0)
            return pbl__infer_fail(c, PBL_ERR_ATTR, "shape dim %d is %lld; dims must be positive (one may be -1)",
                                   (int)i, (long long)s->ints[i]);
        else if (known > n / s->ints[i]) /* more elements than x has: no need to multiply on (overflow) */
            return pbl__infer_fail(c, PBL_ERR_SHAPE, "x is %s (%lld elements); the new shape has more",
                                   pbl_shape_str(&c->in[0].shape, sx, sizeof sx), (long long)n);
        else
            known *= s->ints[i];
    }
    pbl_shape out = pbl_shape_make(s->n_ints, s->ints);
    if (infer_at >= 0) {
        if (known == 0 || n % known != 0)
            return pbl__infer_fail(c, PBL_ERR_SHAPE, "x is %s (%lld elements), which no -1 can fill",
                                   pbl_shape_str(&c->in[0].shape, sx, sizeof sx), (long long)n);
        out.dim[infer_at] = n / known;
    } else if (known != n) {
        char so[96];
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "x is %s (%lld elements) but the new shape %s has %lld",
                               pbl_shape_str(&c->in[0].shape, sx, sizeof sx), (long long)n,
                               pbl_shape_str(&out, so, sizeof so), (long long)known);
    }
    c->out[0].dtype = c->in[0].dtype;
    c->out[0].shape = out;
    return PBL_OK;
}

static pbl_status flatten_infer(pbl__infer_ctx *c)
{
    const pbl_shape *x = &c->in[0].shape;
    int64_t axis = c->attr[0].i;
    if (axis < 0 || axis > x->ndim)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "axis %lld is outside 0..%d", (long long)axis, (int)x->ndim);
    int64_t outer = 1, inner = 1;
    for (int32_t i = 0; i < x->ndim; i++)
        *(i < axis ? &outer : &inner) *= x->dim[i];
    c->out[0].dtype = c->in[0].dtype;
    c->out[0].shape = pbl_shape_make(2, (int64_t[]){ outer, inner });
    return PBL_OK;
}

/* dx = reshape(dy, x's shape) */
static pbl_status back_to_input_shape(pbl__grad_ctx *c)
{
    pbl_value_info xi;
    pbl_graph_value_info(c->g, c->x[0], &xi);
    pbl_attr at = PBL_ATTR_INTS("shape", xi.shape.dim, xi.shape.ndim);
    c->dx[0] = pbl__grad_emit(c, "reshape", "grad", &c->dy[0], 1, &at, 1);
    return c->status;
}

static const pbl__attr_spec reshape_attrs[] = { { .name = "shape", .type = PBL_ATTR_INTS, .required = 1 } };
static const pbl__attr_spec flatten_attrs[] = { { .name = "axis", .type = PBL_ATTR_INT, .i = 1 } };

const pbl__op pbl__op_reshape = {
    .name = "reshape", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .attrs = reshape_attrs, .n_attrs = 1,
    .infer = reshape_infer, .grad = back_to_input_shape,
    .inplace = out0_over_in0, .n_inplace = 1,
    .cpu = pbl__cpu_reshape,
};

const pbl__op pbl__op_flatten = {
    .name = "flatten", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .attrs = flatten_attrs, .n_attrs = 1,
    .infer = flatten_infer, .grad = back_to_input_shape,
    .inplace = out0_over_in0, .n_inplace = 1,
    .cpu = pbl__cpu_flatten,
};
