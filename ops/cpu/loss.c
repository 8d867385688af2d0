/* CPU kernels: softmax cross-entropy and mean squared error, and their gradients. */
#include <math.h>
#include <stdio.h>

#include "ops/cpu/kernels.h"

static pbl_status check_labels(const pbl__kargs *a, int64_t n, int64_t c)
{
    const int32_t *lab = (const int32_t *)a->in[1];
    for (int64_t i = 0; i < n; i++) {
        if (lab[i] < 0 || lab[i] >= c) {
            snprintf(a->err, a->errlen, "label %d in row %lld is outside [0, %lld)", (int)lab[i],
                     (long long)i, (long long)c);
            return PBL_ERR_INVALID_ARG;
        }
    }
    return PBL_OK;
}

/* logits: [n, c], labels: [n] -> loss = mean over rows of (logsumexp(row) − row[label]) */
pbl_status pbl__cpu_softmax_cross_entropy(const pbl__kargs *a)
{
    int64_t n = a->in_meta[0].shape.dim[0], c = a->in_meta[0].shape.dim[1];
    pbl_status s = check_labels(a, n, c);
    if (s != PBL_OK)
        return s;
    const int32_t *lab = (const int32_t *)a->in[1];
    double total = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const float *x = PBL__IN(a, 0) + i * c;
        float mx = pbl__row_max(x, c);
        total += (double)(mx + logf(pbl__row_sum_exp(x, c, mx, NULL)) - x[lab[i]]);
    }
    PBL__OUT(a, 0)[0] = (float)(total / (double)n);
    return PBL_OK;
}

/* dlogits = (softmax(logits) − onehot(labels)) · dloss / n */
pbl_status pbl__cpu_softmax_cross_entropy_grad(const pbl__kargs *a)
{
    int64_t n = a->in_meta[0].shape.dim[0], c = a->in_meta[0].shape.dim[1];
    pbl_status s = check_labels(a, n, c);
    if (s != PBL_OK)
        return s;
    const int32_t *lab = (const int32_t *)a->in[1];
    float scale = PBL__IN(a, 2)[0] / (float)n;
    for (int64_t i = 0; i < n; i++) {
        const float *x = PBL__IN(a, 0) + i * c;
        float *dx = PBL__OUT(a, 0) + i * c;
        float inv = scale / pbl__row_sum_exp(x, c, pbl__row_max(x, c), dx);
        for (int64_t j = 0; j < c; j++)
            dx[j] *= inv;
        dx[lab[i]] -= scale;
    }
    return PBL_OK;
}

pbl_status pbl__cpu_mse_loss(const pbl__kargs *a)
{
    const float *p = PBL__IN(a, 0), *t = PBL__IN(a, 1);
    int64_t n = PBL__NUMEL(a->in_meta[0]);
    double total = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)p[i] - (double)t[i];
        total += d * d;
    }
    PBL__OUT(a, 0)[0] = (float)(total / (double)n);
    return PBL_OK;
}

/* dpred = 2·(pred − target)·dloss / n */
pbl_status pbl__cpu_mse_loss_grad(const pbl__kargs *a)
{
    const float *p = PBL__IN(a, 0), *t = PBL__IN(a, 1);
    float *dp = PBL__OUT(a, 0);
    int64_t n = PBL__NUMEL(a->in_meta[0]);
    float scale = 2.0f * PBL__IN(a, 2)[0] / (float)n;
    for (int64_t i = 0; i < n; i++)
        dp[i] = scale * (p[i] - t[i]);
    return PBL_OK;
}
