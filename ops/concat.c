/*
 * concat: joins inputs (f32 or i32, all one dtype) along `axis`; every other dim must agree.
 * ONNX's Concat. Not differentiable (its gradient would need a slice op). Kernel:
 * ops/cpu/concat.c.
 */
#include "ops/cpu/kernels.h"

static const pbl__attr_spec concat_attrs[] = { { .name = "axis", .type = PBL_ATTR_INT, .required = 1 } };

static pbl_status concat_infer(pbl__infer_ctx *c)
{
    const pbl_shape *x0 = &c->in[0].shape;
    int64_t axis = c->attr[0].i;
    if (x0->ndim < 1)
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "input 0 is a scalar; concat needs at least one dim");
    if (axis < 0)
        axis += x0->ndim;
    if (axis < 0 || axis >= x0->ndim)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "axis %lld is out of range for rank %d",
                               (long long)c->attr[0].i, (int)x0->ndim);
    pbl_shape out = *x0;
    for (int32_t i = 1; i < c->n_in; i++) {
        const pbl_shape *xi = &c->in[i].shape;
        char s0[96], si[96];
        if (c->in[i].dtype != c->in[0].dtype)
            return pbl__infer_fail(c, PBL_ERR_DTYPE, "input %d is %s but input 0 is %s", (int)i,
                                   pbl_dtype_name(c->in[i].dtype), pbl_dtype_name(c->in[0].dtype));
        int ok = xi->ndim == x0->ndim;
        for (int32_t d = 0; ok && d < x0->ndim; d++)
            ok = d == axis || xi->dim[d] == x0->dim[d];
        if (!ok)
            return pbl__infer_fail(c, PBL_ERR_SHAPE, "input %d is %s and input 0 is %s; all dims but axis %lld must agree",
                                   (int)i, pbl_shape_str(xi, si, sizeof si), pbl_shape_str(x0, s0, sizeof s0),
                                   (long long)axis);
        out.dim[axis] += xi->dim[axis];
    }
    c->out[0].dtype = c->in[0].dtype;
    c->out[0].shape = out;
    return PBL_OK;
}

const pbl__op pbl__op_concat = {
    .name = "concat", .n_in_min = 1, .n_in_max = PBL__MAX_IN, .n_out = 1,
    .attrs = concat_attrs, .n_attrs = 1,
    .infer = concat_infer,
    .cpu = pbl__cpu_concat,
};
