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

/* ---- nll_loss (ops/cpu/loss.c's formulas): logp [N, C, D], target [N, D] ----------------------
 * none: one thread per target. sum and mean: one block of LOSS_THREADS sums the terms in double
 * (a tree: the order differs from the CPU's sequential sum, results agree to float rounding). */
__device__ static int nll_take(int *flag, int tag, int64_t i, int t, int64_t c, int64_t ignore)
{
    return t != ignore && label_ok(flag, tag, i, t, c);
}

__global__ static void nll_none_k(float *y, const float *lp, const int32_t *t, const float *w, int64_t nd, int64_t c,
                                  int64_t d, int64_t ignore, int *flag, int tag)
{
    PBL__GRID_LOOP(i, nd) {
        double l = 0.0;
        if (nll_take(flag, tag, i, t[i], c, ignore))
            l = -(w ? (double)w[t[i]] : 1.0) * lp[((i / d) * c + t[i]) * d + i % d];
        y[i] = (float)l;
    }
}

/* sum and mean: one block, each thread a strided share of the terms, then a tree (in double) */
__global__ static void nll_total_k(float *y, const float *lp, const int32_t *t, const float *w, int64_t nd, int64_t c,
                                   int64_t d, int64_t ignore, int mean, int *flag, int tag)
{
    double total = 0.0, wsum = 0.0;
    for (int64_t i = threadIdx.x; i < nd; i += LOSS_THREADS) {
        if (!nll_take(flag, tag, i, t[i], c, ignore))
            continue;
        double wt = w ? (double)w[t[i]] : 1.0;
        total += -wt * lp[((i / d) * c + t[i]) * d + i % d];
        wsum += wt;
    }
    __shared__ double part[LOSS_THREADS];
    total = pbl__block_sum<LOSS_THREADS>(total, part);
    wsum = pbl__block_sum<LOSS_THREADS>(wsum, part);
    if (threadIdx.x == 0)
        y[0] = (float)(mean ? total / wsum : total);
}

__global__ static void nll_wsum_k(double *out, const int32_t *t, const float *w, int64_t nd, int64_t ignore)
{
    double wsum = 0.0;
    for (int64_t i = threadIdx.x; i < nd; i += LOSS_THREADS)
        wsum += t[i] == ignore ? 0.0 : w ? (double)w[t[i]] : 1.0;
    __shared__ double part[LOSS_THREADS];
    wsum = pbl__block_sum<LOSS_THREADS>(wsum, part);
    if (threadIdx.x == 0)
        out[0] = wsum;
}

/* one thread per target: zeroes its C entries and sets the target's */
__global__ static void nll_grad_k(float *dx, const int32_t *t, const float *dy, const float *w, const double *wsum,
                                  int64_t nd, int64_t c, int64_t d, int64_t ignore, int red, int *flag, int tag)
{
    PBL__GRID_LOOP(i, nd) {
        float *col = dx + (i / d) * c * d + i % d;
        for (int64_t k = 0; k < c; k++)
            col[k * d] = 0.0f;
        if (!nll_take(flag, tag, i, t[i], c, ignore))
            continue;
        double g = red == 0 ? dy[i] : red == 1 ? dy[0] : dy[0] / wsum[0];
        col[t[i] * d] = (float)(-(w ? (double)w[t[i]] : 1.0) * g);
    }
}

static void nll_dims(const pbl__kargs *a, int64_t *nd, int64_t *c, int64_t *d)
{
    const pbl_shape *l = &a->in_meta[0].shape;
    *c = l->dim[1];
    *d = 1;
    for (int32_t i = 2; i < l->ndim; i++)
        *d *= l->dim[i];
    *nd = l->dim[0] * *d;
}

extern "C" pbl_status pbl__cuda_nll_loss(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    int64_t nd, c, d, red = a->attr[0].i, ignore = a->attr[1].i;
    nll_dims(a, &nd, &c, &d);
    const float *w = a->n_in > 2 ? PBL__IN(a, 2) : NULL;
    const int32_t *t = (const int32_t *)a->in[1];
    if (red == 0) {
        PBL__LAUNCH(nll_none_k, pbl__blocks(nd), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0), t, w, nd, c, d,
                                                                          ignore, l->flag, l->tag);
    } else {
        PBL__LAUNCH(nll_total_k, 1, LOSS_THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0), t, w, nd, c, d, ignore, red == 2,
                                                    l->flag, l->tag);
    }
    PBL__LAUNCHED();
done:
    return s;
}

extern "C" pbl_status pbl__cuda_nll_loss_grad(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    int64_t nd, c, d, red = a->attr[0].i, ignore = a->attr[1].i;
    nll_dims(a, &nd, &c, &d);
    const float *w = a->n_in > 3 ? PBL__IN(a, 3) : NULL;
    const int32_t *t = (const int32_t *)a->in[1];
    /* the summed weights in the launch's workspace (the stream orders its uses) */
    double *wsum = (double *)l->workspace;
    if (red == 2) {
        PBL__LAUNCH(nll_wsum_k, 1, LOSS_THREADS, 0, l->stream)(wsum, t, w, nd, ignore);
        PBL__LAUNCHED();
    }
    PBL__LAUNCH(nll_grad_k, pbl__blocks(nd), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), t, PBL__IN(a, 2), w, wsum, nd, c, d,
                                                                      ignore, (int)red, l->flag, l->tag);
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
