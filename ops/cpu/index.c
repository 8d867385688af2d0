/*
 * CPU kernels: slice, pad, gather, cast and the gradients (ops/index.c), over the index maps of
 * ops/shared/index.h that the CUDA kernels (ops/cuda/index.cu) use too. Data is moved as
 * 32-bit words, so f32 and i32 share the forward kernels. An id out of range fails the run with
 * the CUDA kernel's message.
 */
#include <stdio.h>
#include <string.h>

#include "ops/cpu/kernels.h"
#include "ops/shared/index.h"

/* y[sizes] = x[start + i·step] */
pbl_status pbl__cpu_slice(const pbl__kargs *a)
{
    pbl__slice_geom g = pbl__slice_geom_make(&a->in_meta[0].shape, &a->out_meta[0].shape, a->attr[0].ints, a->attr[1].ints);
    const uint32_t *x = a->in[0];
    uint32_t *y = a->out[0];
    int64_t n = PBL__NUMEL(a->out_meta[0]);
    for (int64_t o = 0; o < n; o++)
        y[o] = x[pbl__slice_src(&g, o)];
    return PBL_OK;
}

/* dx[shape]: dy where the slice took from, 0 elsewhere */
pbl_status pbl__cpu_slice_grad(const pbl__kargs *a)
{
    pbl__slice_geom g = pbl__slice_geom_make(&a->out_meta[0].shape, &a->in_meta[0].shape, a->attr[0].ints, a->attr[1].ints);
    const float *dy = PBL__IN(a, 0);
    float *dx = PBL__OUT(a, 0);
    int64_t n = PBL__NUMEL(a->out_meta[0]);
    for (int64_t e = 0; e < n; e++) {
        int64_t k = pbl__slice_back(&g, e);
        dx[e] = k >= 0 ? dy[k] : 0.0f;
    }
    return PBL_OK;
}

/* y = x padded: constant, reflected or edge positions */
pbl_status pbl__cpu_pad(const pbl__kargs *a)
{
    pbl__pad_geom g = pbl__pad_geom_make(&a->in_meta[0].shape, &a->out_meta[0].shape, a->attr[0].ints, a->attr[1].i);
    uint32_t fill;
    if (a->in_meta[0].dtype == PBL_I32) {
        int32_t v = (int32_t)a->attr[2].f;
        memcpy(&fill, &v, 4);
    } else {
        float v = (float)a->attr[2].f;
        memcpy(&fill, &v, 4);
    }
    const uint32_t *x = a->in[0];
    uint32_t *y = a->out[0];
    int64_t n = PBL__NUMEL(a->out_meta[0]);
    for (int64_t o = 0; o < n; o++) {
        int64_t k = pbl__pad_src(&g, o);
        y[o] = k >= 0 ? x[k] : fill;
    }
    return PBL_OK;
}

/* dx[shape]: the sum of dy over the positions that read each x position */
pbl_status pbl__cpu_pad_grad(const pbl__kargs *a)
{
    pbl__pad_geom g = pbl__pad_geom_make(&a->out_meta[0].shape, &a->in_meta[0].shape, a->attr[0].ints, a->attr[1].i);
    int64_t n = PBL__NUMEL(a->out_meta[0]);
    for (int64_t e = 0; e < n; e++)
        PBL__OUT(a, 0)[e] = pbl__pad_grad_at(&g, PBL__IN(a, 0), e);
    return PBL_OK;
}

static pbl_status check_ids(const pbl__kargs *a, const int32_t *ids, const pbl__gather_geom *g)
{
    for (int64_t k = 0; k < g->k; k++)
        if (ids[k] < -g->n || ids[k] >= g->n) {
            snprintf(a->err, a->errlen, "index %d at position %lld is outside [-%lld, %lld)", (int)ids[k], (long long)k,
                     (long long)g->n, (long long)g->n);
            return PBL_ERR_INVALID_ARG;
        }
    return PBL_OK;
}

/* x[outer, n, inner], ids[k] -> y[outer, k, inner] */
pbl_status pbl__cpu_gather(const pbl__kargs *a)
{
    pbl__gather_geom g = pbl__gather_geom_make(&a->in_meta[0].shape, &a->in_meta[1].shape, a->attr[0].i);
    const int32_t *ids = a->in[1];
    pbl_status s = check_ids(a, ids, &g);
    if (s != PBL_OK)
        return s;
    const uint32_t *x = a->in[0];
    uint32_t *y = a->out[0];
    for (int64_t o = 0; o < g.outer; o++)
        for (int64_t k = 0; k < g.k; k++)
            memcpy(y + (o * g.k + k) * g.inner, x + (o * g.n + pbl__gather_id(&g, ids[k])) * g.inner,
                   (size_t)g.inner * sizeof *y);
    return PBL_OK;
}

/* dy[outer, k, inner] added into a zeroed dx[outer, n, inner] at the ids, in increasing
 * position: the order pbl__gather_grad_at (the CUDA kernel) sums them in */
pbl_status pbl__cpu_gather_grad(const pbl__kargs *a)
{
    pbl__gather_geom g = pbl__gather_geom_make(&a->out_meta[0].shape, &a->in_meta[1].shape, a->attr[0].i);
    const int32_t *ids = a->in[1];
    pbl_status s = check_ids(a, ids, &g);
    if (s != PBL_OK)
        return s;
    float *dx = PBL__OUT(a, 0);
    memset(dx, 0, (size_t)(g.outer * g.n * g.inner) * sizeof *dx);
    for (int64_t o = 0; o < g.outer; o++)
        for (int64_t k = 0; k < g.k; k++) {
            const float *dy = PBL__IN(a, 0) + (o * g.k + k) * g.inner;
            float *row = dx + (o * g.n + pbl__gather_id(&g, ids[k])) * g.inner;
            for (int64_t i = 0; i < g.inner; i++)
                row[i] += dy[i];
        }
    return PBL_OK;
}

pbl_status pbl__cpu_cast(const pbl__kargs *a)
{
    int64_t n = PBL__NUMEL(a->in_meta[0]);
    pbl_dtype from = a->in_meta[0].dtype, to = a->out_meta[0].dtype;
    if (from == to)
        memcpy(a->out[0], a->in[0], (size_t)n * 4);
    else if (from == PBL_F32)
        for (int64_t i = 0; i < n; i++)
            ((int32_t *)a->out[0])[i] = pbl__f32_to_i32(PBL__IN(a, 0)[i]);
    else
        for (int64_t i = 0; i < n; i++)
            PBL__OUT(a, 0)[i] = (float)((const int32_t *)a->in[0])[i];
    return PBL_OK;
}
