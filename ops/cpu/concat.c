/* CPU kernel: concat. */
#include <string.h>

#include "ops/cpu/kernels.h"
#include "ops/shared/geometry.h"

/* y: [outer, Σ d_i, inner] from each x_i: [outer, d_i, inner], one block of d_i·inner per
 * outer index and input. */
pbl_status pbl__cpu_concat(const pbl__kargs *a)
{
    pbl__concat_geom g = pbl__concat_geom_of(a);
    char *y = a->out[0];
    size_t at = 0;
    for (int32_t i = 0; i < a->n_in; i++) {
        size_t block = pbl__concat_block(&g, a, i);
        const char *x = a->in[i];
        for (int64_t o = 0; o < g.outer; o++)
            memcpy(y + (size_t)o * g.row + at, x + (size_t)o * block, block);
        at += block;
    }
    return PBL_OK;
}
