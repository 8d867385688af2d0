/* CPU kernels: conv2d and its gradients, as im2col + one sgemm per (sample, group).
 *   conv2d             y_g  = w_g · col_g(x)          (+ b)
 *   conv2d_grad_input  dx_g = col2im(w_gᵀ · dy_g)     (col2im adds each column entry back into
 *                                                      the input element it was copied from)
 *   conv2d_grad_weight dw_g = Σ_n dy_g · col_g(x)ᵀ   (samples added in order, sgemm beta 1) */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cpu/kernels.h"
#include "ops/window.h"

/* The output columns [*lo, *hi) whose input column ow·s − pad + tap lies inside [0, W). */
static void valid_range(int64_t W, int64_t OW, int64_t s, int64_t off, int64_t *lo, int64_t *hi)
{
    /* iw = ow·s + off; iw ≥ 0 from ow ≥ ceil(−off / s); iw < W up to ow < ceil((W − off) / s) */
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s, b = W - off <= 0 ? 0 : (W - off + s - 1) / s;
    *lo = a < OW ? a : OW;
    *hi = b < OW ? b : OW;
    if (*hi < *lo)
        *hi = *lo;
}

/* col[c·kh·kw, OH·OW]: for each (channel, kernel tap) the input value each output position
 * reads, 0 in the padding. Each row's in-bounds span is found once, so the copy loop has no
 * branch (a memcpy at stride 1). */
static void im2col(const float *x, int64_t C, int64_t H, int64_t W, const pbl__window *w, int64_t OH, int64_t OW,
                   float *col)
{
    int64_t P = OH * OW, sw = w->stride[1];
    for (int64_t c = 0; c < C; c++)
        for (int64_t kh = 0; kh < w->kernel[0]; kh++)
            for (int64_t kw = 0; kw < w->kernel[1]; kw++) {
                float *row = col + ((c * w->kernel[0] + kh) * w->kernel[1] + kw) * P;
                int64_t off = kw * w->dilation[1] - w->pad[1], lo, hi;
                valid_range(W, OW, sw, off, &lo, &hi);
                for (int64_t oh = 0; oh < OH; oh++) {
                    int64_t ih = oh * w->stride[0] - w->pad[0] + kh * w->dilation[0];
                    float *r = row + oh * OW;
                    if (ih < 0 || ih >= H) {
                        memset(r, 0, (size_t)OW * sizeof *r);
                        continue;
                    }
                    const float *xr = x + (c * H + ih) * W + off;
                    memset(r, 0, (size_t)lo * sizeof *r);
                    if (sw == 1)
                        memcpy(r + lo, xr + lo, (size_t)(hi - lo) * sizeof *r);
                    else
                        for (int64_t ow = lo; ow < hi; ow++)
                            r[ow] = xr[ow * sw];
                    memset(r + hi, 0, (size_t)(OW - hi) * sizeof *r);
                }
            }
}

/* x[N,C,H,W] w[Co,C/g,KH,KW] b?[Co] -> y[N,Co,OH,OW]; per sample and group
 * y_g[Co/g, OH·OW] = w_g[Co/g, C/g·KH·KW] · col_g[C/g·KH·KW, OH·OW] (+ b). The executor has no
 * per-kernel scratch memory yet: col comes from malloc, and its failure is PBL_ERR_NOMEM. */
pbl_status pbl__cpu_conv2d(const pbl__kargs *a)
{
    const pbl_shape *xs = &a->in_meta[0].shape, *ws = &a->in_meta[1].shape, *ys = &a->out_meta[0].shape;
    int64_t N = xs->dim[0], C = xs->dim[1], H = xs->dim[2], W = xs->dim[3];
    int64_t Co = ws->dim[0], OH = ys->dim[2], OW = ys->dim[3], G = a->attr[3].i;
    int64_t Cg = C / G, Cog = Co / G, P = OH * OW;
    pbl__window win;
    pbl__window_of(NULL, &a->attr[0], &a->attr[1], &a->attr[2], &win);
    win.kernel[0] = ws->dim[2];
    win.kernel[1] = ws->dim[3];
    int64_t K = Cg * win.kernel[0] * win.kernel[1];
    /* a 1x1 kernel with stride 1 and no padding reads x as it lies: no im2col */
    int direct = K == Cg && win.stride[0] == 1 && win.stride[1] == 1 && !win.pad[0] && !win.pad[1] && !win.pad[2] &&
                 !win.pad[3];
    float *col = NULL;
    if (!direct && !(col = malloc((size_t)(K * P) * sizeof *col))) {
        snprintf(a->err, a->errlen, "conv2d: out of memory for the im2col buffer (%lld floats)", (long long)(K * P));
        return PBL_ERR_NOMEM;
    }
    const float *x = PBL__IN(a, 0), *wt = PBL__IN(a, 1), *b = a->n_in == 3 ? PBL__IN(a, 2) : NULL;
    float *y = PBL__OUT(a, 0);
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++) {
            const float *xg = x + (n * C + g * Cg) * H * W;
            float *yg = y + (n * Co + g * Cog) * P;
            if (!direct)
                im2col(xg, Cg, H, W, &win, OH, OW, col);
            float beta = 0.0f;
            if (b) { /* y starts as the bias in each output channel's plane */
                for (int64_t o = 0; o < Cog; o++)
                    for (int64_t p = 0; p < P; p++)
                        yg[o * P + p] = b[g * Cog + o];
                beta = 1.0f;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)Cog, (int)P, (int)K, 1.0f, wt + g * Cog * K,
                        (int)K, direct ? xg : col, (int)P, beta, yg, (int)P);
        }
    free(col);
    return PBL_OK;
}

/* The inverse of im2col's copy: each column entry is added into the input element it was read
 * from (padding entries are dropped). x (C·H·W) must be zeroed first. For each input element
 * the contributions arrive in (kh, kw) order, one per tap at most; the CUDA kernel gathers in
 * that order too. */
static void col2im(const float *col, int64_t C, int64_t H, int64_t W, const pbl__window *w, int64_t OH, int64_t OW,
                   float *x)
{
    int64_t P = OH * OW, sw = w->stride[1];
    for (int64_t c = 0; c < C; c++)
        for (int64_t kh = 0; kh < w->kernel[0]; kh++)
            for (int64_t kw = 0; kw < w->kernel[1]; kw++) {
                const float *row = col + ((c * w->kernel[0] + kh) * w->kernel[1] + kw) * P;
                int64_t off = kw * w->dilation[1] - w->pad[1], lo, hi;
                valid_range(W, OW, sw, off, &lo, &hi);
                for (int64_t oh = 0; oh < OH; oh++) {
                    int64_t ih = oh * w->stride[0] - w->pad[0] + kh * w->dilation[0];
                    if (ih < 0 || ih >= H)
                        continue;
                    float *xr = x + (c * H + ih) * W + off;
                    const float *r = row + oh * OW;
                    for (int64_t ow = lo; ow < hi; ow++)
                        xr[ow * sw] += r[ow];
                }
            }
}

/* The window of a conv gradient op (attrs stride, pad, dilation, groups, shape) for weight shape ws. */
static pbl__window conv_window(const pbl__kargs *a, const pbl_shape *ws)
{
    pbl__window win;
    pbl__window_of(NULL, &a->attr[0], &a->attr[1], &a->attr[2], &win);
    win.kernel[0] = ws->dim[2];
    win.kernel[1] = ws->dim[3];
    return win;
}

/* dy[N,Co,OH,OW] w[Co,C/g,KH,KW] -> dx[N,C,H,W]: per sample and group
 * col[C/g·KH·KW, OH·OW] = w_gᵀ · dy_g, then col2im into dx_g. */
pbl_status pbl__cpu_conv2d_grad_input(const pbl__kargs *a)
{
    const pbl_shape *ds = &a->in_meta[0].shape, *ws = &a->in_meta[1].shape, *xs = &a->out_meta[0].shape;
    int64_t N = xs->dim[0], C = xs->dim[1], H = xs->dim[2], W = xs->dim[3];
    int64_t Co = ws->dim[0], OH = ds->dim[2], OW = ds->dim[3], G = a->attr[3].i;
    int64_t Cg = C / G, Cog = Co / G, P = OH * OW;
    pbl__window win = conv_window(a, ws);
    int64_t K = Cg * win.kernel[0] * win.kernel[1];
    float *col = malloc((size_t)(K * P) * sizeof *col);
    if (!col) {
        snprintf(a->err, a->errlen, "conv2d_grad_input: out of memory for the column buffer (%lld floats)",
                 (long long)(K * P));
        return PBL_ERR_NOMEM;
    }
    const float *dy = PBL__IN(a, 0), *wt = PBL__IN(a, 1);
    float *dx = PBL__OUT(a, 0);
    memset(dx, 0, (size_t)(N * C * H * W) * sizeof *dx);
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++) {
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)K, (int)P, (int)Cog, 1.0f, wt + g * Cog * K,
                        (int)K, dy + (n * Co + g * Cog) * P, (int)P, 0.0f, col, (int)P);
            col2im(col, Cg, H, W, &win, OH, OW, dx + (n * C + g * Cg) * H * W);
        }
    free(col);
    return PBL_OK;
}

/* dy[N,Co,OH,OW] x[N,C,H,W] -> dw[Co,C/g,KH,KW]: per group dw_g = Σ_n dy_g[Co/g, OH·OW] ·
 * col_g(x_n)ᵀ, the samples added in order (sgemm with beta 1 after the first). */
pbl_status pbl__cpu_conv2d_grad_weight(const pbl__kargs *a)
{
    const pbl_shape *ds = &a->in_meta[0].shape, *xs = &a->in_meta[1].shape, *ws = &a->out_meta[0].shape;
    int64_t N = xs->dim[0], C = xs->dim[1], H = xs->dim[2], W = xs->dim[3];
    int64_t Co = ws->dim[0], OH = ds->dim[2], OW = ds->dim[3], G = a->attr[3].i;
    int64_t Cg = C / G, Cog = Co / G, P = OH * OW;
    pbl__window win = conv_window(a, ws);
    int64_t K = Cg * win.kernel[0] * win.kernel[1];
    float *col = malloc((size_t)(K * P) * sizeof *col);
    if (!col) {
        snprintf(a->err, a->errlen, "conv2d_grad_weight: out of memory for the im2col buffer (%lld floats)",
                 (long long)(K * P));
        return PBL_ERR_NOMEM;
    }
    const float *dy = PBL__IN(a, 0), *x = PBL__IN(a, 1);
    float *dw = PBL__OUT(a, 0);
    if (N == 0)
        memset(dw, 0, (size_t)(Co * K) * sizeof *dw);
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++) {
            im2col(x + (n * C + g * Cg) * H * W, Cg, H, W, &win, OH, OW, col);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)Cog, (int)K, (int)P, 1.0f,
                        dy + (n * Co + g * Cog) * P, (int)P, col, (int)P, n ? 1.0f : 0.0f, dw + g * Cog * K, (int)K);
        }
    free(col);
    return PBL_OK;
}
