/* CUDA kernel: concat as one 2-D copy per input: y: [outer, Σ d_i, inner] gets x_i:
 * [outer, d_i, inner] as `outer` rows of d_i·inner elements at its column offset.
 *
 * cudaMemcpy2DAsync "returns an error if dpitch or spitch is greater than the maximum allowed"
 * (CUDA runtime API), cudaDeviceProp::memPitch, 2^31 - 1 bytes on current GPUs: y's row is the
 * destination pitch, so a concat along axis 0 of more than 2 GiB, or any y row past it, is
 * copied as one 1-D copy per row instead (one copy in all when outer is 1). */
#include "ops/cuda/common.cuh"
#include "ops/shared/geometry.h"

#define PITCH_MAX ((size_t)2147483647)

extern "C" pbl_status pbl__cuda_concat(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    pbl__concat_geom g = pbl__concat_geom_of(a);
    size_t at = 0;
    for (int32_t i = 0; i < a->n_in; i++) {
        size_t block = pbl__concat_block(&g, a, i);
        if (block && g.outer > 1 && g.row <= PITCH_MAX)
            PBL__CU(cudaMemcpy2DAsync((char *)a->out[0] + at, g.row, a->in[i], block, block, (size_t)g.outer,
                                      cudaMemcpyDeviceToDevice, l->stream));
        else if (block)
            for (int64_t r = 0; r < g.outer; r++)
                PBL__CU(cudaMemcpyAsync((char *)a->out[0] + (size_t)r * g.row + at, (const char *)a->in[i] + (size_t)r * block,
                                        block, cudaMemcpyDeviceToDevice, l->stream));
        at += block;
    }
done:
    return s;
}
