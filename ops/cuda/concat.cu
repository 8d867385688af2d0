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

/* ---- data parallelism's ops (CPU kernels: ops/comm/collective.c) -------------------------
 *
 * bucket_pack and bucket_unpack are copies, as concat's, so they live here. allreduce hands
 * the bucket to the communicator's device sum (NCCL, on this launch's stream: the
 * communication stream with comm_overlap), which only enqueues it; the backend waits for the
 * run's sums, with the communicator's timeout, at the end of the run (executor/cuda/backend.c).
 * With no communicator or one rank the sum is the data itself. */

extern "C" pbl_status pbl__cuda_bucket_pack(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    size_t at = 0;
    for (int32_t i = 0; i < a->n_in; i++) { /* flat: [g_0 | g_1 | ...] */
        size_t n = (size_t)PBL__NUMEL(a->in_meta[i]) * sizeof(float);
        if (n)
            PBL__CU(cudaMemcpyAsync((char *)a->out[0] + at, a->in[i], n, cudaMemcpyDeviceToDevice, l->stream));
        at += n;
    }
done:
    return s;
}

extern "C" pbl_status pbl__cuda_bucket_unpack(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    size_t n = (size_t)PBL__NUMEL(a->out_meta[0]) * sizeof(float);
    if (n)
        PBL__CU(cudaMemcpyAsync(a->out[0], PBL__IN(a, 0) + a->attr[0].i, n, cudaMemcpyDeviceToDevice, l->stream));
done:
    return s;
}

__global__ static void scale_in_place_k(float *y, float alpha, int64_t n)
{
    PBL__GRID_LOOP(i, n)
        y[i] *= alpha;
}

extern "C" pbl_status pbl__cuda_allreduce(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    int64_t n = PBL__NUMEL(a->out_meta[0]);
    if (a->out[0] != a->in[0] && n)
        PBL__CU(cudaMemcpyAsync(a->out[0], a->in[0], (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice, l->stream));
    /* one rank: the sum is the data, except through NCCL (a one-rank NCCL all-reduce is the
     * path bench/gpu_check.sh exercises on a machine with one GPU) */
    if (!a->coll || !n || (a->coll->size <= 1 && !a->coll->sum_f32_device))
        goto done;
    if (!a->coll->sum_f32_device) { /* the executor refuses this pairing first; kept as a guard */
        snprintf(a->err, a->errlen, "allreduce: this communicator reaches host memory only (MPI); the CUDA backend "
                                    "needs an NCCL one (pbl_comm_create_nccl)");
        s = PBL_ERR_UNSUPPORTED;
        goto done;
    }
    if (l->run_dev) { /* the device sum's wait for its peers is the host's, at the end of a run */
        snprintf(a->err, a->errlen, "allreduce: an NCCL all-reduce cannot be captured into a CUDA graph yet "
                                    "(set pbl_exec_options.cuda_graph = 0)");
        s = PBL_ERR_UNSUPPORTED;
        goto done;
    }
    s = a->coll->sum_f32_device(a->coll->ctx, PBL__OUT(a, 0), n, (void *)l->stream, a->err, a->errlen);
    if (s != PBL_OK || !a->attr[0].i)
        goto done;
    /* every rank scales the same summed bits by the same factor: the ranks stay identical */
    PBL__LAUNCH(scale_in_place_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), 1.0f / (float)a->coll->size, n);
    PBL__LAUNCHED();
done:
    return s;
}
