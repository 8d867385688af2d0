/* CPU kernels: softmax cross-entropy and mean squared error, and their gradients. */
#include <math.h>
#include <stdio.h>
#include <string.h>

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

enum { ROW_BLOCK = 256 }; /* rows whose max and sum are held at a time */

/* logits: [n, c], labels: [n] -> loss = mean over rows of (logsumexp(row) − row[label]) */
pbl_status pbl__cpu_softmax_cross_entropy(const pbl__kargs *a)
{
    int64_t n = a->in_meta[0].shape.dim[0], c = a->in_meta[0].shape.dim[1];
    pbl_status s = check_labels(a, n, c);
    if (s != PBL_OK)
        return s;
    const int32_t *lab = (const int32_t *)a->in[1];
    float mx[ROW_BLOCK], sum[ROW_BLOCK];
    double total = 0.0;
    for (int64_t r0 = 0; r0 < n; r0 += ROW_BLOCK) {
        int64_t nr = n - r0 < ROW_BLOCK ? n - r0 : ROW_BLOCK;
        const float *x = PBL__IN(a, 0) + r0 * c;
        pbl__cpu_rows_sum_exp(x, nr, c, NULL, mx, sum);
        for (int64_t r = 0; r < nr; r++)
            total += (double)(mx[r] + logf(sum[r]) - x[r * c + lab[r0 + r]]);
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
    float mx[ROW_BLOCK], sum[ROW_BLOCK];
    for (int64_t r0 = 0; r0 < n; r0 += ROW_BLOCK) {
        int64_t nr = n - r0 < ROW_BLOCK ? n - r0 : ROW_BLOCK;
        float *dx = PBL__OUT(a, 0) + r0 * c;
        pbl__cpu_rows_sum_exp(PBL__IN(a, 0) + r0 * c, nr, c, dx, mx, sum);
        for (int64_t r = 0; r < nr; r++) {
            float inv = scale / sum[r];
            for (int64_t j = 0; j < c; j++)
                dx[r * c + j] *= inv;
            dx[r * c + lab[r0 + r]] -= scale;
        }
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

/* ---- nll_loss ---------------------------------------------------------------------------------
 * logp [N, C, D] (D: the spatial dims flattened), target [N, D]: element (n, d) reads
 * logp[(n·C + t)·D + d]. */
typedef struct nll_dims {
    int64_t n, c, d;
} nll_dims;

static nll_dims nll_dims_of(const pbl__kargs *a)
{
    const pbl_shape *l = &a->in_meta[0].shape;
    nll_dims k = { l->dim[0], l->dim[1], 1 };
    for (int32_t i = 2; i < l->ndim; i++)
        k.d *= l->dim[i];
    return k;
}

/* every target not ignored is a class; the message names the first that is not */
static pbl_status nll_check_targets(const pbl__kargs *a, nll_dims k, int64_t ignore)
{
    const int32_t *t = (const int32_t *)a->in[1];
    for (int64_t i = 0; i < k.n * k.d; i++)
        if (t[i] != ignore && (t[i] < 0 || t[i] >= k.c)) {
            snprintf(a->err, a->errlen, "label %d in row %lld is outside [0, %lld)", (int)t[i], (long long)i, (long long)k.c);
            return PBL_ERR_INVALID_ARG;
        }
    return PBL_OK;
}

pbl_status pbl__cpu_nll_loss(const pbl__kargs *a)
{
    nll_dims k = nll_dims_of(a);
    int64_t red = a->attr[0].i, ignore = a->attr[1].i;
    pbl_status s = nll_check_targets(a, k, ignore);
    if (s != PBL_OK)
        return s;
    const float *lp = PBL__IN(a, 0), *w = a->n_in > 2 ? PBL__IN(a, 2) : NULL;
    const int32_t *t = (const int32_t *)a->in[1];
    float *y = PBL__OUT(a, 0);
    double total = 0.0, wsum = 0.0;
    for (int64_t n = 0; n < k.n; n++)
        for (int64_t d = 0; d < k.d; d++) {
            int64_t i = n * k.d + d;
            double l = 0.0, wt = 0.0;
            if (t[i] != ignore) {
                wt = w ? w[t[i]] : 1.0;
                l = -wt * lp[(n * k.c + t[i]) * k.d + d];
            }
            if (red == 0)
                y[i] = (float)l;
            total += l;
            wsum += wt;
        }
    if (red != 0)
        y[0] = (float)(red == 1 ? total : total / wsum);
    return PBL_OK;
}

/* dlogp[n, t, d] = −weight[t]·dy (dy[n, d] for none, dy / Σ weights for mean), 0 elsewhere */
pbl_status pbl__cpu_nll_loss_grad(const pbl__kargs *a)
{
    nll_dims k = nll_dims_of(a);
    int64_t red = a->attr[0].i, ignore = a->attr[1].i;
    pbl_status s = nll_check_targets(a, k, ignore);
    if (s != PBL_OK)
        return s;
    const float *dy = PBL__IN(a, 2), *w = a->n_in > 3 ? PBL__IN(a, 3) : NULL;
    const int32_t *t = (const int32_t *)a->in[1];
    float *dx = PBL__OUT(a, 0);
    memset(dx, 0, (size_t)(k.n * k.c * k.d) * sizeof *dx);
    double scale = red == 0 ? 1.0 : dy[0];
    if (red == 2) {
        double wsum = 0.0;
        for (int64_t i = 0; i < k.n * k.d; i++)
            wsum += t[i] == ignore ? 0.0 : w ? w[t[i]] : 1.0;
        scale /= wsum;
    }
    for (int64_t n = 0; n < k.n; n++)
        for (int64_t d = 0; d < k.d; d++) {
            int64_t i = n * k.d + d;
            if (t[i] == ignore)
                continue;
            double g = red == 0 ? dy[i] : scale;
            dx[(n * k.c + t[i]) * k.d + d] = (float)(-(w ? w[t[i]] : 1.0) * g);
        }
    return PBL_OK;
}
