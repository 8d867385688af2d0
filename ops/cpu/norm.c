/*
 * CPU kernels: batch_norm and layer_norm (training form; batch_norm also the evaluation form
 * over running statistics) and their gradients, and batch_norm_update (ops/norm.c).
 *
 * Both normalise "sets" of x: batch_norm one set per channel c (every n and every spatial
 * position s of x[N, C, S...]: N groups of S contiguous floats, C·S apart), layer_norm one set
 * per row of the last dim D. For a set of m values:
 *
 *   mean = Σx / m, var = Σ(x − mean)² / m (biased, as in training: PyTorch and ONNX likewise),
 *   both summed in double (two passes: no cancellation), inv_std = 1 / √(var + eps) in double;
 *   mean and inv_std are rounded to f32 and saved. Then, in f32,
 *   xhat = (x − mean)·inv_std, y = xhat·scale + bias.
 *
 * Gradients, with g the incoming dy times the scale (layer_norm: per position; batch_norm: the
 * channel's scale is factored out), a1 = Σg and a2 = Σ g·xhat summed in double over the set:
 *
 *   dx = s·((g − a1/m) − xhat·(a2/m)),  s = inv_std (layer_norm) or scale·inv_std (batch_norm)
 *   dscale = Σ dy·xhat, dbias = Σ dy   (batch_norm: a2 and a1 of the set; layer_norm: down the
 *                                        rows, per position, also in double)
 *
 * The CUDA kernels (ops/cuda/norm.cu) compute the same f32 expressions in the same order and
 * the same double sums in another order (a block tree): results agree to the rounding of the
 * sums' last double bits.
 */
#include <math.h>

#include "ops/cpu/kernels.h"

/* One set: `groups` runs of `len` contiguous floats, `gstride` apart, from base. */
typedef struct nset {
    int64_t groups, gstride, len;
} nset;

static void stats(const float *x, nset s, double eps, float *mean, float *inv_std)
{
    double m = (double)(s.groups * s.len), sum = 0.0, sq = 0.0;
    for (int64_t gi = 0; gi < s.groups; gi++)
        for (int64_t j = 0; j < s.len; j++)
            sum += (double)x[gi * s.gstride + j];
    double mu = sum / m;
    for (int64_t gi = 0; gi < s.groups; gi++)
        for (int64_t j = 0; j < s.len; j++) {
            double d = (double)x[gi * s.gstride + j] - mu;
            sq += d * d;
        }
    *mean = (float)mu;
    *inv_std = (float)(1.0 / sqrt(sq / m + eps));
}

/* batch_norm: x[N, C, S...] as N, C, S */
static void bn_dims(const pbl_shape *x, int64_t *n, int64_t *c, int64_t *sp)
{
    *n = x->dim[0];
    *c = x->dim[1];
    *sp = 1;
    for (int32_t i = 2; i < x->ndim; i++)
        *sp *= x->dim[i];
}

pbl_status pbl__cpu_batch_norm(const pbl__kargs *a)
{
    int64_t N, C, S;
    bn_dims(&a->in_meta[0].shape, &N, &C, &S);
    const float *x = PBL__IN(a, 0), *g = PBL__IN(a, 1), *b = PBL__IN(a, 2);
    float *y = PBL__OUT(a, 0), *mean = PBL__OUT(a, 1), *inv_std = PBL__OUT(a, 2);
    nset s = { N, C * S, S };
    /* with running statistics and the switch at 0: evaluation, the running statistics */
    const int eval = a->n_in > 5 && PBL__IN(a, 5)[0] == 0.0f;
    for (int64_t c = 0; c < C; c++) {
        if (eval) {
            mean[c] = PBL__IN(a, 3)[c];
            inv_std[c] = (float)(1.0 / sqrt((double)PBL__IN(a, 4)[c] + a->attr[0].f));
        } else {
            stats(x + c * S, s, a->attr[0].f, &mean[c], &inv_std[c]);
        }
        float m = mean[c], is = inv_std[c];
        for (int64_t n = 0; n < N; n++)
            for (int64_t j = 0; j < S; j++) {
                int64_t o = (n * C + c) * S + j;
                y[o] = ((x[o] - m) * is) * g[c] + b[c];
            }
    }
    return PBL_OK;
}

pbl_status pbl__cpu_layer_norm(const pbl__kargs *a)
{
    int64_t D = a->in_meta[0].shape.dim[a->in_meta[0].shape.ndim - 1], rows = PBL__NUMEL(a->in_meta[0]) / D;
    const float *x = PBL__IN(a, 0), *g = PBL__IN(a, 1), *b = PBL__IN(a, 2);
    float *y = PBL__OUT(a, 0), *mean = PBL__OUT(a, 1), *inv_std = PBL__OUT(a, 2);
    nset s = { 1, 0, D };
    for (int64_t r = 0; r < rows; r++) {
        stats(x + r * D, s, a->attr[0].f, &mean[r], &inv_std[r]);
        float m = mean[r], is = inv_std[r];
        for (int64_t j = 0; j < D; j++) {
            int64_t o = r * D + j;
            y[o] = ((x[o] - m) * is) * g[j] + b[j];
        }
    }
    return PBL_OK;
}

/* (dy, x, scale, mean, inv_std) -> dx, dscale, dbias */
pbl_status pbl__cpu_batch_norm_grad(const pbl__kargs *a)
{
    int64_t N, C, S;
    bn_dims(&a->in_meta[1].shape, &N, &C, &S);
    const float *dy = PBL__IN(a, 0), *x = PBL__IN(a, 1), *g = PBL__IN(a, 2), *mean = PBL__IN(a, 3),
                *inv_std = PBL__IN(a, 4);
    float *dx = PBL__OUT(a, 0), *dg = PBL__OUT(a, 1), *db = PBL__OUT(a, 2);
    double m = (double)(N * S);
    const int eval = a->n_in > 5 && PBL__IN(a, 5)[0] == 0.0f;
    for (int64_t c = 0; c < C; c++) {
        float mu = mean[c], is = inv_std[c];
        double a1 = 0.0, a2 = 0.0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t j = 0; j < S; j++) {
                int64_t o = (n * C + c) * S + j;
                float xh = (x[o] - mu) * is;
                a1 += (double)dy[o];
                a2 += (double)dy[o] * (double)xh;
            }
        db[c] = (float)a1;
        dg[c] = (float)a2;
        float k1 = (float)(a1 / m), k2 = (float)(a2 / m), sc = g[c] * is;
        if (eval) /* constant statistics: no path from x through them */
            k1 = k2 = 0.0f;
        for (int64_t n = 0; n < N; n++)
            for (int64_t j = 0; j < S; j++) {
                int64_t o = (n * C + c) * S + j;
                float xh = (x[o] - mu) * is;
                dx[o] = sc * ((dy[o] - k1) - xh * k2);
            }
    }
    return PBL_OK;
}

pbl_status pbl__cpu_layer_norm_grad(const pbl__kargs *a)
{
    int64_t D = a->in_meta[1].shape.dim[a->in_meta[1].shape.ndim - 1], rows = PBL__NUMEL(a->in_meta[1]) / D;
    const float *dy = PBL__IN(a, 0), *x = PBL__IN(a, 1), *g = PBL__IN(a, 2), *mean = PBL__IN(a, 3),
                *inv_std = PBL__IN(a, 4);
    float *dx = PBL__OUT(a, 0), *dg = PBL__OUT(a, 1), *db = PBL__OUT(a, 2);
    for (int64_t r = 0; r < rows; r++) {
        float mu = mean[r], is = inv_std[r];
        double a1 = 0.0, a2 = 0.0;
        for (int64_t j = 0; j < D; j++) {
            int64_t o = r * D + j;
            float xh = (x[o] - mu) * is, gv = dy[o] * g[j];
            a1 += (double)gv;
            a2 += (double)gv * (double)xh;
        }
        float k1 = (float)(a1 / (double)D), k2 = (float)(a2 / (double)D);
        for (int64_t j = 0; j < D; j++) {
            int64_t o = r * D + j;
            float xh = (x[o] - mu) * is, gv = dy[o] * g[j];
            dx[o] = is * ((gv - k1) - xh * k2);
        }
    }
    /* the parameters' gradients: per position, down the rows */
    for (int64_t j = 0; j < D; j++) {
        double sg = 0.0, sb = 0.0;
        for (int64_t r = 0; r < rows; r++) {
            int64_t o = r * D + j;
            float xh = (x[o] - mean[r]) * inv_std[r];
            sg += (double)dy[o] * (double)xh;
            sb += (double)dy[o];
        }
        dg[j] = (float)sg;
        db[j] = (float)sb;
    }
    return PBL_OK;
}

/* mean, inv_std, running_mean, running_var: [C]; count, training: [1]. Only in training:
 * the batch's variance from inv_std, unbiased; the first update copies, later ones average. */
pbl_status pbl__cpu_batch_norm_update(const pbl__kargs *a)
{
    if (PBL__IN(a, 5)[0] == 0.0f)
        return PBL_OK;
    const float *mean = PBL__IN(a, 0), *inv_std = PBL__IN(a, 1);
    float *rm = PBL__OUT(a, 0), *rv = PBL__OUT(a, 1), *count = PBL__OUT(a, 2);
    double mom = a->attr[0].f, eps = a->attr[1].f, m = (double)a->attr[2].i;
    int64_t C = PBL__NUMEL(a->in_meta[0]);
    for (int64_t c = 0; c < C; c++) {
        float var = pbl__bn_running_var(inv_std[c], eps, m);
        rm[c] = count[0] == 0.0f ? mean[c] : (float)((1.0 - mom) * rm[c] + mom * mean[c]);
        rv[c] = count[0] == 0.0f ? var : (float)((1.0 - mom) * rv[c] + mom * var);
    }
    count[0] += 1.0f;
    return PBL_OK;
}
