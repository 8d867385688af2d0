/* CPU kernel: transpose, a strided gather of 4-byte elements (f32 and i32 alike). */
#include <string.h>

#include "ops/cpu/kernels.h"

pbl_status pbl__cpu_transpose(const pbl__kargs *a)
{
    const pbl_shape *xs = &a->in_meta[0].shape;
    const pbl__attr_val *perm = &a->attr[0];
    int32_t r = xs->ndim;
    if (r == 0) {
        memcpy(a->out[0], a->in[0], 4);
        return PBL_OK;
    }
    /* step[k]: how far x moves when y's index k grows by one */
    int64_t xstride[PBL_MAX_DIMS], step[PBL_MAX_DIMS], dim[PBL_MAX_DIMS], idx[PBL_MAX_DIMS] = { 0 };
    xstride[r - 1] = 1;
    for (int32_t d = r - 2; d >= 0; d--)
        xstride[d] = xstride[d + 1] * xs->dim[d + 1];
    for (int32_t k = 0; k < r; k++) {
        int64_t p = perm->n_ints ? perm->ints[k] : r - 1 - k;
        step[k] = xstride[p];
        dim[k] = xs->dim[p];
    }
    // x: [d0, ..., d(r-1)] -> y: [dim[0], ..., dim[r-1]], walked in y's order, rows of dim[r-1]
    const unsigned char *x = a->in[0];
    unsigned char *y = a->out[0];
    int64_t rows = pbl_shape_numel(xs) / dim[r - 1], cols = dim[r - 1], inner = step[r - 1], off = 0;
    for (int64_t row = 0; row < rows; row++) {
        for (int64_t j = 0; j < cols; j++, y += 4)
            memcpy(y, x + 4 * (off + j * inner), 4);
        for (int32_t k = r - 2; k >= 0; k--) { /* next row: odometer over y's leading dims */
            off += step[k];
            if (++idx[k] < dim[k])
                break;
            off -= step[k] * dim[k];
            idx[k] = 0;
        }
    }
    return PBL_OK;
}
