/* Helpers shared by the ops' shape rules. */
#include <stdio.h>

#include "graph/base/errmsg.h"
#include "graph/ir/op.h"


pbl_status pbl__infer_check_f32(pbl__infer_ctx *c, int32_t i, const char *what)
{
    if (c->in[i].dtype != PBL_F32)
        return pbl__infer_fail(c, PBL_ERR_DTYPE, "%s is %s, expected f32", what, pbl_dtype_name(c->in[i].dtype));
    return PBL_OK;
}

pbl_status pbl__infer_check_same(pbl__infer_ctx *c, int32_t i, int32_t j, const char *a, const char *b)
{
    if (!pbl_shape_equal(&c->in[i].shape, &c->in[j].shape)) {
        char sa[96], sb[96];
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "%s is %s but %s is %s; they must be equal", a,
                               pbl_shape_str(&c->in[i].shape, sa, sizeof sa), b,
                               pbl_shape_str(&c->in[j].shape, sb, sizeof sb));
    }
    return PBL_OK;
}

pbl_status pbl__infer_same_as_input(pbl__infer_ctx *c)
{
    pbl_status s = pbl__infer_check_f32(c, 0, "x");
    if (s == PBL_OK)
        c->out[0] = c->in[0];
    return s;
}

pbl_status pbl__infer_grad_pair(pbl__infer_ctx *c)
{
    pbl_status s = pbl__infer_check_f32(c, 0, "dy");
    if (s == PBL_OK)
        s = pbl__infer_check_f32(c, 1, "the saved value");
    if (s == PBL_OK)
        s = pbl__infer_check_same(c, 0, 1, "dy", "the saved value");
    if (s == PBL_OK)
        c->out[0] = c->in[0];
    return s;
}

pbl_status pbl__infer_shape_attr(pbl__infer_ctx *c, const pbl__attr_val *a, pbl_shape *out)
{
    if (a->n_ints > PBL_MAX_DIMS)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "shape has %d dims, at most %d", (int)a->n_ints, PBL_MAX_DIMS);
    for (int32_t i = 0; i < a->n_ints; i++)
        if (a->ints[i] <= 0)
            return pbl__infer_fail(c, PBL_ERR_ATTR, "shape dim %d is %lld; dims must be positive", (int)i,
                                   (long long)a->ints[i]);
    *out = pbl_shape_make(a->n_ints, a->ints);
    return PBL_OK;
}
