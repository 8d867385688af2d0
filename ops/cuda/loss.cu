/*
 * CUDA kernels: softmax cross-entropy and mean squared error, and their gradients (the
 * formulas of ops/cpu/loss.c).
 *
 * Labels are checked on the device: a row whose label is outside [0, c) claims the launch's
 * failure flag ({tag + 1, row, label}, first claim wins) and contributes nothing; the
 * backend reads the flag at sync and reports PBL_ERR_INVALID_ARG with the CPU's message.
 * The mean is taken in double as on the CPU, summed by one block (a tree, so the order of
 * additions differs from the CPU's sequential sum: results agree to float rounding).
 */
#include <cstring>

#include "ops/cuda/common.cuh"

#define LOSS_THREADS 256

__device__ static int label_ok(int *flag, int tag, int64_t row, int label, int64_t c)
{
    if (label >= 0 && label < c)
        return 1;
    if (atomicCAS(flag, 0, tag + 1) == 0) {
        flag[1] = (int)row;
        flag[2] = label;
    }
    return 0;
}

/* logits: [n, c], labels: [n] -> loss[0] = mean over rows of (logsumexp(row) − row[label]) */
__global__ static void ce_k(float *loss, const float *x, const int32_t *lab, int64_t n, int64_t c, int *flag, int tag)
{
    double total = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += LOSS_THREADS) {
        if (!label_ok(flag, tag, i, lab[i], c))
            continue;
        const float *xr = x + i * c;
        float mx = pbl__row_max(xr, c);
        total += (double)(mx + logf(pbl__row_sum_exp(xr, c, mx, NULL)) - xr[lab[i]]);
    }
    __shared__ double part[LOSS_THREADS];
    total = pbl__block_sum<LOSS_THREADS>(total, part);
    if (threadIdx.x == 0)
        loss[0] = (float)(total / (double)n);
}

/* dlogits = (softmax(logits) − onehot(labels)) · dloss / n, one thread per row */
__global__ static void ce_grad_k(float *dx, const float *x, const int32_t *lab, const float *dloss, int64_t n,
                                 int64_t c, int *flag, int tag)
{
    PBL__GRID_LOOP(i, n) {
        if (!label_ok(flag, tag, i, lab[i], c))
            continue;
        float scale = dloss[0] / (float)n;
        const float *xr = x + i * c;
        float *dr = dx + i * c;
        float mx = pbl__row_max(xr, c);
        float inv = scale / pbl__row_sum_exp(xr, c, mx, dr);
        for (int64_t j = 0; j < c; j++)
            dr[j] *= inv;
        dr[lab[i]] -= scale;
    }
}

extern "C" pbl_status pbl__cuda_softmax_cross_entropy(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    int64_t n = a->in_meta[0].shape.dim[0], c = a->in_meta[0].shape.dim[1];
    PBL__LAUNCH(ce_k, 1, LOSS_THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0), (const int32_t *)a->in[1], n, c, l->flag,
                                            l->tag);
    PBL__LAUNCHED();
done:
    return s;
}

extern "C" pbl_status pbl__cuda_softmax_cross_entropy_grad(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    int64_t n = a->in_meta[0].shape.dim[0], c = a->in_meta[0].shape.dim[1];
    PBL__LAUNCH(ce_grad_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0), (const int32_t *)a->in[1],
                                                              PBL__IN(a, 2), n, c, l->flag, l->tag);
    PBL__LAUNCHED();
done:
    return s;
}

__global__ static void mse_k(float *loss, const float *p, const float *t, int64_t n)
{
    double total = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += LOSS_THREADS) {
        double d = (double)p[i] - (double)t[i];
        total += d * d;
    }
    __shared__ double part[LOSS_THREADS];
    total = pbl__block_sum<LOSS_THREADS>(total, part);
    if (threadIdx.x == 0)
        loss[0] = (float)(total / (double)n);
}

/* dpred = 2·(pred − target)·dloss / n */
__global__ static void mse_grad_k(float *dp, const float *p, const float *t, const float *dloss, int64_t n)
{
    PBL__GRID_LOOP(i, n)
        dp[i] = 2.0f * dloss[0] / (float)n * (p[i] - t[i]);
}

extern "C" pbl_status pbl__cuda_mse_loss(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    int64_t n = PBL__NUMEL(a->in_meta[0]);
    PBL__LAUNCH(mse_k, 1, LOSS_THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0), PBL__IN(a, 1), n);
    PBL__LAUNCHED();
done:
    return s;
}

extern "C" pbl_status pbl__cuda_mse_loss_grad(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    int64_t n = PBL__NUMEL(a->in_meta[0]);
    PBL__LAUNCH(mse_grad_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0), PBL__IN(a, 1),
                                                               PBL__IN(a, 2), n);
    PBL__LAUNCHED();
done:
    return s;
}

extern "C" pbl_status pbl__cuda_flag_message(const pbl__op *op, const pbl__kargs *a, int row, int value)
{
    if (op && strncmp(op->name, "embedding", 9) == 0)
        return pbl__cuda_ids_flag_message(op, a, row, value);
    if (op && strncmp(op->name, "gather", 6) == 0)
        return pbl__cuda_gather_flag_message(op, a, row, value);
    return pbl__cuda_label_flag_message(a, row, value);
}

extern "C" pbl_status pbl__cuda_label_flag_message(const pbl__kargs *a, int row, int value)
{
    /* the cross-entropy pair, whose input 0 is [n, c] */
    snprintf(a->err, a->errlen, "label %d in row %lld is outside [0, %lld)", value, (long long)row,
             (long long)a->in_meta[0].shape.dim[1]);
    return PBL_ERR_INVALID_ARG;
}
