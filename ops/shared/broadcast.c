#include "ops/shared/broadcast.h"

int pbl__bcast_ok(const pbl_shape *big, const pbl_shape *small)
{
    if (small->ndim > big->ndim)
        return 0;
    for (int32_t i = 1; i <= small->ndim; i++) {
        int64_t s = small->dim[small->ndim - i], b = big->dim[big->ndim - i];
        if (s != b && s != 1)
            return 0;
    }
    return 1;
}

void pbl__bcast_init(pbl__bcast *b, const pbl_shape *big, const pbl_shape *small)
{
    b->ndim = big->ndim;
    int64_t st = 1;
    for (int32_t i = big->ndim - 1; i >= 0; i--) {
        int32_t j = i - (big->ndim - small->ndim);
        int64_t sd = j >= 0 ? small->dim[j] : 1;
        b->dim[i] = big->dim[i];
        b->stride[i] = sd == 1 ? 0 : st;
        st *= sd;
    }
    b->small_numel = st;
    b->cols = big->ndim ? big->dim[big->ndim - 1] : 1;
    b->rows = pbl_shape_numel(big) / b->cols;
    b->col_stride = big->ndim ? b->stride[big->ndim - 1] : 0;
    /* Tiled: small, without its leading 1s, is exactly big's trailing dims (a bias). */
    int32_t lead = 0;
    while (lead < small->ndim && small->dim[lead] == 1)
        lead++;
    b->tiled = lead < small->ndim;
    for (int32_t j = lead; j < small->ndim && b->tiled; j++)
        b->tiled = small->dim[j] == big->dim[big->ndim - small->ndim + j];
}

int64_t pbl__bcast_row_offset(const pbl__bcast *b, int64_t row)
{
    if (b->tiled)
        return (row * b->cols) % b->small_numel;
    int64_t off = 0;
    for (int32_t i = b->ndim - 2; i >= 0; i--) {
        off += (row % b->dim[i]) * b->stride[i];
        row /= b->dim[i];
    }
    return off;
}
