/* CUDA kernel: concat as one 2-D copy per input: y: [outer, Σ d_i, inner] gets x_i:
 * [outer, d_i, inner] as `outer` rows of d_i·inner elements at its column offset.
 *
 * cudaMemcpy2DAsync "returns an error if dpitch or spitch is greater than the maximum allowed"
 * (CUDA runtime API), cudaDeviceProp::memPitch, 2^31 - 1 bytes on current GPUs: y's row is the
 * destination pitch, so a concat along axis 0 of more than 2 GiB, or any y row past it, is
 * copied as one 1-D copy per row instead (one copy in all when outer is 1). */
#include "ops/cuda/common.cuh"

#define PITCH_MAX ((size_t)2147483647)

extern "C" pbl_status pbl__cuda_concat(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
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
    size_t row = (size_t)(ys->dim[axis] * inner) * esize, at = 0;
    for (int32_t i = 0; i < a->n_in; i++) {
        size_t block = (size_t)(a->in_meta[i].shape.dim[axis] * inner) * esize;
        if (block && outer > 1 && row <= PITCH_MAX)
            PBL__CU(cudaMemcpy2DAsync((char *)a->out[0] + at, row, a->in[i], block, block, (size_t)outer,
                                      cudaMemcpyDeviceToDevice, l->stream));
        else if (block)
            for (int64_t r = 0; r < outer; r++)
                PBL__CU(cudaMemcpyAsync((char *)a->out[0] + (size_t)r * row + at, (const char *)a->in[i] + (size_t)r * block,
                                        block, cudaMemcpyDeviceToDevice, l->stream));
        at += block;
    }
done:
    return s;
}
