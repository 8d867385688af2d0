/* CPU kernel: concat. */
#include <string.h>

#include "ops/cpu/kernels.h"

/* y: [outer, Σ d_i, inner] from each x_i: [outer, d_i, inner], one block of d_i·inner per
 * outer index and input. */
pbl_status pbl__cpu_concat(const pbl__kargs *a)
{
    const pbl_shape *ys = &a->out_meta[0].shape;
    int64_t axis = a->attr[0].i < 0 ? a->attr[0].i + ys->ndim : a->attr[0].i;
    size_t esize = pbl_dtype_size(a->out_meta[0].dtype);
    int64_t outer = 1, inner = 1;
    for (int32_t d = 0; d < ys->ndim; d++) {
        if (d < axis)
            outer *= ys->dim[d];
        else if (d > axis)
            inner *= ys->dim[d];
    }
    size_t row = (size_t)(ys->dim[axis] * inner) * esize;
    char *y = a->out[0];
    size_t at = 0;
    for (int32_t i = 0; i < a->n_in; i++) {
        size_t block = (size_t)(a->in_meta[i].shape.dim[axis] * inner) * esize;
        const char *x = a->in[i];
        for (int64_t o = 0; o < outer; o++)
            memcpy(y + (size_t)o * row + at, x + (size_t)o * block, block);
        at += block;
    }
    return PBL_OK;
}
