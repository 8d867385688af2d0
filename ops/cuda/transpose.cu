/* CUDA kernel: transpose, a strided gather of 4-byte elements (f32 and i32 alike), one
 * thread per output element: its coordinates in y times x's strides give its source. */
#include "ops/cuda/common.cuh"

struct perm_walk {
    int32_t r;
    int64_t dim[PBL_MAX_DIMS];  /* y's shape */
    int64_t step[PBL_MAX_DIMS]; /* how far x moves when y's index k grows by one */
};

__global__ static void transpose_k(uint32_t *y, const uint32_t *x, int64_t n, perm_walk w)
{
    PBL__GRID_LOOP(i, n) {
        int64_t rest = i, off = 0;
        for (int32_t k = w.r - 1; k >= 0; k--) {
            off += (rest % w.dim[k]) * w.step[k];
            rest /= w.dim[k];
        }
        y[i] = x[off];
    }
}

extern "C" pbl_status pbl__cuda_transpose(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    const pbl_shape *xs = &a->in_meta[0].shape;
    const pbl__attr_val *perm = &a->attr[0];
    perm_walk w = {};
    w.r = xs->ndim;
    int64_t xstride[PBL_MAX_DIMS], n = pbl_shape_numel(xs);
    if (w.r == 0) {
        PBL__CU(cudaMemcpyAsync(a->out[0], a->in[0], 4, cudaMemcpyDeviceToDevice, l->stream));
        goto done;
    }
    xstride[w.r - 1] = 1;
    for (int32_t d = w.r - 2; d >= 0; d--)
        xstride[d] = xstride[d + 1] * xs->dim[d + 1];
    for (int32_t k = 0; k < w.r; k++) {
        int64_t p = perm->n_ints ? perm->ints[k] : w.r - 1 - k;
        w.step[k] = xstride[p];
        w.dim[k] = xs->dim[p];
    }
    PBL__LAUNCH(transpose_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)((uint32_t *)a->out[0], (const uint32_t *)a->in[0], n, w);
    PBL__LAUNCHED();
done:
    return s;
}
