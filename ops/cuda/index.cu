/*
 * CUDA kernels: slice, pad, gather, cast and the gradients (ops/index.c, CPU kernels in
 * ops/cpu/index.c), one thread per output element over the index maps of ops/shared/index.h,
 * so both backends read the same positions and sum gradients in the same order (the same
 * bits, without atomics). gather_grad's thread scans every id for its element (n·k id reads
 * per column; the CPU scatters in one pass): fine for index selects, slow for a large
 * embedding table, which the embedding op serves.
 *
 * An id out of range claims the launch's failure flag ({tag + 1, position, id}, first claim
 * wins) and the backend reports the CPU's message at sync, PBL_ERR_INVALID_ARG.
 */
#include <cstring>

#include "ops/cuda/common.cuh"

extern "C" {
#include "ops/shared/index.h"
}

__global__ static void slice_k(uint32_t *y, const uint32_t *x, pbl__slice_geom g, int64_t n)
{
    PBL__GRID_LOOP(o, n)
    y[o] = x[pbl__slice_src(&g, o)];
}

__global__ static void slice_grad_k(float *dx, const float *dy, pbl__slice_geom g, int64_t n)
{
    PBL__GRID_LOOP(e, n) {
        int64_t k = pbl__slice_back(&g, e);
        dx[e] = k >= 0 ? dy[k] : 0.0f;
    }
}

__global__ static void pad_k(uint32_t *y, const uint32_t *x, pbl__pad_geom g, uint32_t fill, int64_t n)
{
    PBL__GRID_LOOP(o, n) {
        int64_t k = pbl__pad_src(&g, o);
        y[o] = k >= 0 ? x[k] : fill;
    }
}

__global__ static void pad_grad_k(float *dx, const float *dy, pbl__pad_geom g, int64_t n)
{
    PBL__GRID_LOOP(e, n)
    dx[e] = pbl__pad_grad_at(&g, dy, e);
}

__device__ static void claim(int *flag, int tag, int64_t pos, int id)
{
    if (atomicCAS(flag, 0, tag + 1) == 0) {
        flag[1] = (int)pos;
        flag[2] = id;
    }
}

/* y[o, k, i] = x[o, ids[k], i]; a bad id leaves zeros (the run fails at sync) */
__global__ static void gather_k(uint32_t *y, const uint32_t *x, const int32_t *ids, pbl__gather_geom g, int *flag, int tag)
{
    PBL__GRID_LOOP(e, g.outer * g.k * g.inner) {
        int64_t i = e % g.inner, k = e / g.inner % g.k, o = e / (g.inner * g.k);
        int32_t id = ids[k];
        if (id < -g.n || id >= g.n) {
            if (o == 0 && i == 0)
                claim(flag, tag, k, id);
            y[e] = 0;
            continue;
        }
        y[e] = x[(o * g.n + pbl__gather_id(&g, id)) * g.inner + i];
    }
}

/* a bad id matches no position of dx: it only fails the run */
__global__ static void check_ids_k(const int32_t *ids, pbl__gather_geom g, int *flag, int tag)
{
    PBL__GRID_LOOP(k, g.k)
    if (ids[k] < -g.n || ids[k] >= g.n)
        claim(flag, tag, k, ids[k]);
}

__global__ static void gather_grad_k(float *dx, const float *dy, const int32_t *ids, pbl__gather_geom g)
{
    PBL__GRID_LOOP(e, g.outer * g.n * g.inner)
    dx[e] = pbl__gather_grad_at(&g, dy, ids, e);
}

__global__ static void cast_f2i_k(int32_t *y, const float *x, int64_t n)
{
    PBL__GRID_LOOP(i, n)
    y[i] = pbl__f32_to_i32(x[i]);
}

__global__ static void cast_i2f_k(float *y, const int32_t *x, int64_t n)
{
    PBL__GRID_LOOP(i, n)
    y[i] = (float)x[i];
}

extern "C" pbl_status pbl__cuda_slice(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    pbl__slice_geom g = pbl__slice_geom_make(&a->in_meta[0].shape, &a->out_meta[0].shape, a->attr[0].ints, a->attr[1].ints);
    int64_t n = PBL__NUMEL(a->out_meta[0]);
    PBL__LAUNCH(slice_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)((uint32_t *)a->out[0], (const uint32_t *)a->in[0], g, n);
    PBL__LAUNCHED();
done:
    return s;
}

extern "C" pbl_status pbl__cuda_slice_grad(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    pbl__slice_geom g = pbl__slice_geom_make(&a->out_meta[0].shape, &a->in_meta[0].shape, a->attr[0].ints, a->attr[1].ints);
    int64_t n = PBL__NUMEL(a->out_meta[0]);
    PBL__LAUNCH(slice_grad_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0), g, n);
    PBL__LAUNCHED();
done:
    return s;
}

extern "C" pbl_status pbl__cuda_pad(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    pbl__pad_geom g = pbl__pad_geom_make(&a->in_meta[0].shape, &a->out_meta[0].shape, a->attr[0].ints, a->attr[1].i);
    int64_t n = PBL__NUMEL(a->out_meta[0]);
    uint32_t fill;
    if (a->in_meta[0].dtype == PBL_I32) {
        int32_t v = (int32_t)a->attr[2].f;
        memcpy(&fill, &v, 4);
    } else {
        float v = (float)a->attr[2].f;
        memcpy(&fill, &v, 4);
    }
    PBL__LAUNCH(pad_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)((uint32_t *)a->out[0], (const uint32_t *)a->in[0], g, fill, n);
    PBL__LAUNCHED();
done:
    return s;
}

extern "C" pbl_status pbl__cuda_pad_grad(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    pbl__pad_geom g = pbl__pad_geom_make(&a->out_meta[0].shape, &a->in_meta[0].shape, a->attr[0].ints, a->attr[1].i);
    int64_t n = PBL__NUMEL(a->out_meta[0]);
    PBL__LAUNCH(pad_grad_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0), g, n);
    PBL__LAUNCHED();
done:
    return s;
}

extern "C" pbl_status pbl__cuda_gather(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    pbl__gather_geom g = pbl__gather_geom_make(&a->in_meta[0].shape, &a->in_meta[1].shape, a->attr[0].i);
    PBL__LAUNCH(gather_k, pbl__blocks(g.outer * g.k * g.inner), PBL__THREADS, 0, l->stream)(
        (uint32_t *)a->out[0], (const uint32_t *)a->in[0], (const int32_t *)a->in[1], g, l->flag, l->tag);
    PBL__LAUNCHED();
done:
    return s;
}

extern "C" pbl_status pbl__cuda_gather_grad(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    pbl__gather_geom g = pbl__gather_geom_make(&a->out_meta[0].shape, &a->in_meta[1].shape, a->attr[0].i);
    PBL__LAUNCH(check_ids_k, pbl__blocks(g.k), PBL__THREADS, 0, l->stream)((const int32_t *)a->in[1], g, l->flag, l->tag);
    PBL__LAUNCHED();
    PBL__LAUNCH(gather_grad_k, pbl__blocks(g.outer * g.n * g.inner), PBL__THREADS, 0, l->stream)(
        PBL__OUT(a, 0), PBL__IN(a, 0), (const int32_t *)a->in[1], g);
    PBL__LAUNCHED();
done:
    return s;
}

extern "C" pbl_status pbl__cuda_cast(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    int64_t n = PBL__NUMEL(a->in_meta[0]);
    pbl_dtype from = a->in_meta[0].dtype, to = a->out_meta[0].dtype;
    if (from == to)
        PBL__CU(cudaMemcpyAsync(a->out[0], a->in[0], (size_t)n * 4, cudaMemcpyDeviceToDevice, l->stream));
    else if (from == PBL_F32)
        PBL__LAUNCH(cast_f2i_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)((int32_t *)a->out[0], PBL__IN(a, 0), n);
    else
        PBL__LAUNCH(cast_i2f_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), (const int32_t *)a->in[0], n);
    PBL__LAUNCHED();
done:
    return s;
}

/* The message of gather's and gather_grad's failure flag: the CPU's (ops/cpu/index.c). */
extern "C" pbl_status pbl__cuda_gather_flag_message(const pbl__op *op, const pbl__kargs *a, int position, int id)
{
    int grad = strcmp(op->name, "gather_grad") == 0;
    int64_t n = (grad ? a->out_meta[0] : a->in_meta[0]).shape.dim[a->attr[0].i];
    snprintf(a->err, a->errlen, "index %d at position %d is outside [-%lld, %lld)", id, position, (long long)n, (long long)n);
    return PBL_ERR_INVALID_ARG;
}
