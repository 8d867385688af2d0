/* CPU kernels: conv2d and its gradients, as im2col + one sgemm per (sample, group).
 *   conv2d             y_g  = w_g · col_g(x)          (+ b)
 *   conv2d_grad_input  dx_g = col2im(w_gᵀ · dy_g)     (col2im adds each column entry back into
 *                                                      the input element it was copied from)
 *   conv2d_grad_weight dw_g = Σ_n dy_g · col_g(x)ᵀ   (samples added in order, sgemm beta 1) */
#include <cblas.h>
#include <string.h>

#include "ops/cpu/kernels.h"
#include "ops/shared/geometry.h"

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

/* What every conv kernel walks: x[N,C,H,W], w[Co,C/g,KH,KW], y[N,Co,OH,OW] in G groups, the
 * window (attrs stride, pad, dilation; the kernel from w's shape), and the column matrix of
 * one (sample, group): K = C/g·KH·KW rows by P = OH·OW columns. */
typedef struct conv_geom {
    int64_t      N, C, H, W, Co, OH, OW, G, Cg, Cog, P, K;
    pbl__window  win;
} conv_geom;

static conv_geom conv_geom_of(const pbl__kargs *a, const pbl_shape *xs, const pbl_shape *ws, const pbl_shape *ys)
{
    conv_geom g;
    g.N = xs->dim[0], g.C = xs->dim[1], g.H = xs->dim[2], g.W = xs->dim[3];
    g.Co = ws->dim[0], g.OH = ys->dim[2], g.OW = ys->dim[3], g.G = a->attr[3].i;
    g.Cg = g.C / g.G, g.Cog = g.Co / g.G, g.P = g.OH * g.OW;
    pbl__window_of(NULL, &a->attr[0], &a->attr[1], &a->attr[2], &g.win);
    g.win.kernel[0] = ws->dim[2];
    g.win.kernel[1] = ws->dim[3];
    g.K = g.Cg * g.win.kernel[0] * g.win.kernel[1];
    return g;
}

/* The geometries of the three kernels: the same unpacking, from the shapes each one has. */
static conv_geom geom_conv2d(const pbl__kargs *a)
{
    return conv_geom_of(a, &a->in_meta[0].shape, &a->in_meta[1].shape, &a->out_meta[0].shape);
}
static conv_geom geom_grad_input(const pbl__kargs *a)
{
    return conv_geom_of(a, &a->out_meta[0].shape, &a->in_meta[1].shape, &a->in_meta[0].shape);
}
static conv_geom geom_grad_weight(const pbl__kargs *a)
{
    return conv_geom_of(a, &a->in_meta[1].shape, &a->out_meta[0].shape, &a->in_meta[0].shape);
}

/* a 1x1 kernel with stride 1 and no padding reads x as it lies: no im2col */
static int is_direct(const conv_geom *g)
{
    const pbl__window *w = &g->win;
    return g->K == g->Cg && w->stride[0] == 1 && w->stride[1] == 1 && !w->pad[0] && !w->pad[1] && !w->pad[2] &&
           !w->pad[3];
}

static size_t col_bytes(const conv_geom *g) { return (size_t)(g->K * g->P) * sizeof(float); }

/* The column matrix of one (sample, group), in the executor's scratch (op->cpu_scratch sized
 * it at create), so a kernel allocates nothing. */
static pbl_status col_get(const pbl__kargs *a, const char *op, const conv_geom *g, float **col)
{
    *col = a->scratch;
    if (a->scratch && a->scratch_bytes >= col_bytes(g))
        return PBL_OK;
    snprintf(a->err, a->errlen, "%s: no scratch for the column buffer (%zu bytes given, %zu needed)", op,
             a->scratch ? a->scratch_bytes : 0, col_bytes(g));
    return PBL_ERR_NOMEM;
}

size_t pbl__cpu_conv2d_scratch(const pbl__kargs *a)
{
    conv_geom g = geom_conv2d(a);
    return is_direct(&g) ? 0 : col_bytes(&g);
}

size_t pbl__cpu_conv2d_grad_input_scratch(const pbl__kargs *a)
{
    conv_geom g = geom_grad_input(a);
    return col_bytes(&g);
}

size_t pbl__cpu_conv2d_grad_weight_scratch(const pbl__kargs *a)
{
    conv_geom g = geom_grad_weight(a);
    return col_bytes(&g);
}

/* x[N,C,H,W] w[Co,C/g,KH,KW] b?[Co] -> y[N,Co,OH,OW]; per sample and group
 * y_g[Co/g, OH·OW] = w_g[Co/g, C/g·KH·KW] · col_g[C/g·KH·KW, OH·OW] (+ b). */
pbl_status pbl__cpu_conv2d(const pbl__kargs *a)
{
    conv_geom g = geom_conv2d(a);
    const pbl__window *win = &g.win;
    int direct = is_direct(&g);
    float *col = NULL;
    pbl_status s;
    if (!direct && (s = col_get(a, "conv2d", &g, &col)) != PBL_OK)
        return s;
    const float *x = PBL__IN(a, 0), *wt = PBL__IN(a, 1), *b = a->n_in == 3 ? PBL__IN(a, 2) : NULL;
    float *y = PBL__OUT(a, 0);
    int64_t Cg = g.Cg, Cog = g.Cog, P = g.P, K = g.K;
    for (int64_t n = 0; n < g.N; n++)
        for (int64_t gi = 0; gi < g.G; gi++) {
            const float *xg = x + (n * g.C + gi * Cg) * g.H * g.W;
            float *yg = y + (n * g.Co + gi * Cog) * P;
            if (!direct)
                im2col(xg, Cg, g.H, g.W, win, g.OH, g.OW, col);
            float beta = 0.0f;
            if (b) { /* y starts as the bias in each output channel's plane */
                for (int64_t o = 0; o < Cog; o++)
                    for (int64_t p = 0; p < P; p++)
                        yg[o * P + p] = b[gi * Cog + o];
                beta = 1.0f;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)Cog, (int)P, (int)K, 1.0f, wt + gi * Cog * K,
                        (int)K, direct ? xg : col, (int)P, beta, yg, (int)P);
        }
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

/* dy[N,Co,OH,OW] w[Co,C/g,KH,KW] -> dx[N,C,H,W]: per sample and group
 * col[C/g·KH·KW, OH·OW] = w_gᵀ · dy_g, then col2im into dx_g. */
pbl_status pbl__cpu_conv2d_grad_input(const pbl__kargs *a)
{
    conv_geom g = geom_grad_input(a);
    float *col;
    pbl_status s = col_get(a, "conv2d_grad_input", &g, &col);
    if (s != PBL_OK)
        return s;
    const float *dy = PBL__IN(a, 0), *wt = PBL__IN(a, 1);
    float *dx = PBL__OUT(a, 0);
    int64_t Cg = g.Cg, Cog = g.Cog, P = g.P, K = g.K;
    memset(dx, 0, (size_t)(g.N * g.C * g.H * g.W) * sizeof *dx);
    for (int64_t n = 0; n < g.N; n++)
        for (int64_t gi = 0; gi < g.G; gi++) {
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)K, (int)P, (int)Cog, 1.0f, wt + gi * Cog * K,
                        (int)K, dy + (n * g.Co + gi * Cog) * P, (int)P, 0.0f, col, (int)P);
            col2im(col, Cg, g.H, g.W, &g.win, g.OH, g.OW, dx + (n * g.C + gi * Cg) * g.H * g.W);
        }
    return PBL_OK;
}

/* dy[N,Co,OH,OW] x[N,C,H,W] -> dw[Co,C/g,KH,KW]: per group dw_g = Σ_n dy_g[Co/g, OH·OW] ·
 * col_g(x_n)ᵀ, the samples added in order (sgemm with beta 1 after the first). */
pbl_status pbl__cpu_conv2d_grad_weight(const pbl__kargs *a)
{
    conv_geom g = geom_grad_weight(a);
    float *col;
    pbl_status s = col_get(a, "conv2d_grad_weight", &g, &col);
    if (s != PBL_OK)
        return s;
    const float *dy = PBL__IN(a, 0), *x = PBL__IN(a, 1);
    float *dw = PBL__OUT(a, 0);
    int64_t Cg = g.Cg, Cog = g.Cog, P = g.P, K = g.K;
    if (g.N == 0)
        memset(dw, 0, (size_t)(g.Co * K) * sizeof *dw);
    for (int64_t n = 0; n < g.N; n++)
        for (int64_t gi = 0; gi < g.G; gi++) {
            im2col(x + (n * g.C + gi * Cg) * g.H * g.W, Cg, g.H, g.W, &g.win, g.OH, g.OW, col);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)Cog, (int)K, (int)P, 1.0f,
                        dy + (n * g.Co + gi * Cog) * P, (int)P, col, (int)P, n ? 1.0f : 0.0f, dw + gi * Cog * K, (int)K);
        }
    return PBL_OK;
}
