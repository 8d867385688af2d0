/* CUDA kernel: concat as one 2-D copy per input: y: [outer, Σ d_i, inner] gets x_i:
 * [outer, d_i, inner] as `outer` rows of d_i·inner elements at its column offset. */
#include "ops/cuda/common.cuh"

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
        if (block)
            PBL__CU(cudaMemcpy2DAsync((char *)a->out[0] + at, row, a->in[i], block, block, (size_t)outer,
                                      cudaMemcpyDeviceToDevice, l->stream));
        at += block;
    }
done:
    return s;
}
