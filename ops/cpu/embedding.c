/*
 * CPU kernels: embedding and embedding_grad (ops/embedding.c).
 *
 * An id outside [0, V) fails the run with PBL_ERR_INVALID_ARG naming the first such position
 * (the flat index into ids); the CUDA kernels (ops/cuda/embedding.cu) report the same message
 * through the device failure flag. The gradient adds dy's rows into the zeroed table in
 * increasing position order, f32: the CUDA kernel adds them in the same order, so the two
 * agree bit for bit.
 */
#include <stdio.h>
#include <string.h>

#include "ops/cpu/kernels.h"

static pbl_status check_ids(const pbl__kargs *a, const int32_t *ids, int64_t n, int64_t v)
{
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= v) {
            snprintf(a->err, a->errlen, "id %d at position %lld is outside [0, %lld)", (int)ids[i], (long long)i,
                     (long long)v);
            return PBL_ERR_INVALID_ARG;
        }
    return PBL_OK;
}

/* ids[...], table[V, D] -> y[..., D] */
pbl_status pbl__cpu_embedding(const pbl__kargs *a)
{
    const int32_t *ids = (const int32_t *)a->in[0];
    int64_t n = PBL__NUMEL(a->in_meta[0]), v = a->in_meta[1].shape.dim[0], d = a->in_meta[1].shape.dim[1];
    pbl_status s = check_ids(a, ids, n, v);
    if (s != PBL_OK)
        return s;
    for (int64_t i = 0; i < n; i++)
        memcpy(PBL__OUT(a, 0) + i * d, PBL__IN(a, 1) + ids[i] * d, (size_t)d * sizeof(float));
    return PBL_OK;
}

/* dy[..., D], ids[...] -> dtable[V, D] = Σ over positions i with ids[i] = v of dy[i, :] */
pbl_status pbl__cpu_embedding_grad(const pbl__kargs *a)
{
    const int32_t *ids = (const int32_t *)a->in[1];
    int64_t n = PBL__NUMEL(a->in_meta[1]), v = a->out_meta[0].shape.dim[0], d = a->out_meta[0].shape.dim[1];
    pbl_status s = check_ids(a, ids, n, v);
    if (s != PBL_OK)
        return s;
    float *dt = PBL__OUT(a, 0);
    memset(dt, 0, (size_t)(v * d) * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        const float *dy = PBL__IN(a, 0) + i * d;
        float *row = dt + ids[i] * d;
        for (int64_t j = 0; j < d; j++)
            row[j] += dy[j];
    }
    return PBL_OK;
}
