/* Helpers shared by the ops' shape rules. */
#include <stdio.h>

#include "ops/op.h"

pbl_status pbl__infer_fail(pbl__infer_ctx *c, pbl_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, c->errlen, fmt, ap);
    va_end(ap);
    return s;
}

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
