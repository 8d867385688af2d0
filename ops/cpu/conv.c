/* CPU kernel: conv2d forward, as im2col + one sgemm per (sample, group). */
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
