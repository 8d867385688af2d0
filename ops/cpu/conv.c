/* CPU kernels: conv2d and its gradients, as im2col + one sgemm per (sample, group).
 *   conv2d             y_g  = w_g · col_g(x)          (+ b)
 *   conv2d_grad_input  dx_g = col2im(w_gᵀ · dy_g)     (col2im adds each column entry back into
 *                                                      the input element it was copied from)
 *   conv2d_grad_weight dw_g = Σ_n dy_g · col_g(x)ᵀ   (samples added in order, sgemm beta 1) */
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

/* What every conv kernel walks: x[N,C,D,H,W], w[Co,C/g,KD,KH,KW], y[N,Co,OD,OH,OW] in G groups
 * (1-D and 2-D tensors have unit leading spatial dims, ops/shared/geometry.h), the window
 * (attrs stride, pad, dilation; the kernel from w's shape), and the column matrix of one
 * (sample, group): K = C/g·KD·KH·KW rows by P = OD·OH·OW columns. S is D·H·W. */
typedef struct conv_geom {
    int64_t      N, C, D, H, W, S, Co, OD, OH, OW, G, Cg, Cog, P, K;
    pbl__window  win;
} conv_geom;

/* col[c·kd·kh·kw, OD·OH·OW]: for each (channel, kernel tap) the input value each output
 * position reads, 0 in the padding. Each row's in-bounds span is found once, so the copy loop
 * has no branch (a memcpy at stride 1). x is one (sample, group)'s C/g channels. */
PBL__INLINE void im2col_body(const float *x, const conv_geom *g, float *col)
{
    const pbl__window *w = &g->win;
    int64_t P = g->P, OW = g->OW, sw = w->stride[2], H = g->H, W = g->W;
    for (int64_t c = 0; c < g->Cg; c++)
        for (int64_t kd = 0; kd < w->kernel[0]; kd++)
            for (int64_t kh = 0; kh < w->kernel[1]; kh++)
                for (int64_t kw = 0; kw < w->kernel[2]; kw++) {
                    float *row = col + (((c * w->kernel[0] + kd) * w->kernel[1] + kh) * w->kernel[2] + kw) * P;
                    int64_t off = kw * w->dilation[2] - w->pad[2], lo, hi;
                    valid_range(W, OW, sw, off, &lo, &hi);
                    for (int64_t od = 0; od < g->OD; od++) {
                        int64_t id = od * w->stride[0] - w->pad[0] + kd * w->dilation[0];
                        for (int64_t oh = 0; oh < g->OH; oh++) {
                            int64_t ih = oh * w->stride[1] - w->pad[1] + kh * w->dilation[1];
                            float *r = row + (od * g->OH + oh) * OW;
                            if (id < 0 || id >= g->D || ih < 0 || ih >= H) {
                                memset(r, 0, (size_t)OW * sizeof *r);
                                continue;
                            }
                            const float *xr = x + ((c * g->D + id) * H + ih) * W + off;
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
}
/* per CPU level (ops/cpu/kernels.h): the strided copy vectorises */
PBL__LEVELS(im2col, (const float *x, const conv_geom *g, float *col), (x, g, col))

/* A depthwise convolution (one input and one output channel per group: MobileNet's 3x3
 * layers) is no product worth a sgemm call per channel (1 row of 9): each plane directly,
 * y = b, then y[o] += w[tap] · x[o·s + tap·d − pad] tap by tap in (kd, kh, kw) order, a row of
 * valid columns at a time so the loop over ow vectorises. x, wt and y are one channel's. */
PBL__INLINE void depthwise_body(const float *x, const conv_geom *g, const float *wt, float bias, float *y)
{
    const pbl__window *w = &g->win;
    int64_t OW = g->OW, sw = w->stride[2], H = g->H, W = g->W;
    for (int64_t i = 0; i < g->P; i++)
        y[i] = bias;
    for (int64_t kd = 0; kd < w->kernel[0]; kd++)
        for (int64_t kh = 0; kh < w->kernel[1]; kh++)
            for (int64_t kw = 0; kw < w->kernel[2]; kw++) {
                float t = wt[(kd * w->kernel[1] + kh) * w->kernel[2] + kw];
                int64_t off = kw * w->dilation[2] - w->pad[2], lo, hi;
                valid_range(W, OW, sw, off, &lo, &hi);
                for (int64_t od = 0; od < g->OD; od++) {
                    int64_t id = od * w->stride[0] - w->pad[0] + kd * w->dilation[0];
                    if (id < 0 || id >= g->D)
                        continue;
                    for (int64_t oh = 0; oh < g->OH; oh++) {
                        int64_t ih = oh * w->stride[1] - w->pad[1] + kh * w->dilation[1];
                        if (ih < 0 || ih >= H)
                            continue;
                        const float *xr = x + (id * H + ih) * W + off;
                        float *yr = y + (od * g->OH + oh) * OW;
                        if (sw == 1)
                            for (int64_t ow = lo; ow < hi; ow++)
                                yr[ow] += t * xr[ow];
                        else
                            for (int64_t ow = lo; ow < hi; ow++)
                                yr[ow] += t * xr[ow * sw];
                    }
                }
            }
}
PBL__LEVELS(depthwise, (const float *x, const conv_geom *g, const float *wt, float bias, float *y),
            (x, g, wt, bias, y))

static int is_depthwise(const conv_geom *g) { return g->Cg == 1 && g->Cog == 1; }

static conv_geom conv_geom_of(const pbl__kargs *a, const pbl_shape *xs, const pbl_shape *ws, const pbl_shape *ys)
{
    conv_geom g;
    int64_t in[3], out[3];
    pbl__window_in(xs, in);
    pbl__window_in(ys, out);
    g.N = xs->dim[0], g.C = xs->dim[1], g.D = in[0], g.H = in[1], g.W = in[2], g.S = g.D * g.H * g.W;
    g.Co = ws->dim[0], g.OD = out[0], g.OH = out[1], g.OW = out[2], g.G = a->attr[3].i;
    g.Cg = g.C / g.G, g.Cog = g.Co / g.G, g.P = g.OD * g.OH * g.OW;
    pbl__window_of(pbl__window_nsp(xs->ndim), NULL, &a->attr[0], &a->attr[1], &a->attr[2], &g.win);
    pbl__window_kernel_of(&g.win, ws);
    g.K = g.Cg * g.win.kernel[0] * g.win.kernel[1] * g.win.kernel[2];
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
    int plain = g->K == g->Cg;
    for (int k = 0; k < 3; k++)
        plain = plain && w->stride[k] == 1 && !w->pad[k] && !w->pad[k + 3];
    return plain;
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
    return is_direct(&g) || is_depthwise(&g) ? 0 : col_bytes(&g);
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
    int direct = is_direct(&g);
    float *col = NULL;
    pbl_status s;
    if (!direct && !is_depthwise(&g) && (s = col_get(a, "conv2d", &g, &col)) != PBL_OK)
        return s;
    const float *x = PBL__IN(a, 0), *wt = PBL__IN(a, 1), *b = a->n_in == 3 ? PBL__IN(a, 2) : NULL;
    float *y = PBL__OUT(a, 0);
    int64_t Cg = g.Cg, Cog = g.Cog, P = g.P, K = g.K;
    for (int64_t n = 0; n < g.N; n++)
        for (int64_t gi = 0; gi < g.G; gi++) {
            const float *xg = x + (n * g.C + gi * Cg) * g.S;
            float *yg = y + (n * g.Co + gi * Cog) * P;
            if (is_depthwise(&g)) {
                depthwise(xg, &g, wt + gi * K, b ? b[gi] : 0.0f, yg);
                continue;
            }
            if (!direct)
                im2col(xg, &g, col);
            float beta = 0.0f;
            if (b) { /* y starts as the bias in each output channel's plane */
                for (int64_t o = 0; o < Cog; o++)
                    for (int64_t p = 0; p < P; p++)
                        yg[o * P + p] = b[gi * Cog + o];
                beta = 1.0f;
            }
            pbl__cpu_sgemm(a->par, 0, 0, (int)Cog, (int)P, (int)K, wt + gi * Cog * K, (int)K, direct ? xg : col,
                           (int)P, beta, yg, (int)P);
        }
    return PBL_OK;
}

/* The inverse of im2col's copy: each column entry is added into the input element it was read
 * from (padding entries are dropped). x (C/g·D·H·W) must be zeroed first. For each input
 * element the contributions arrive in (kd, kh, kw) order, one per tap at most; the CUDA kernel
 * gathers in that order too. */
static void col2im(const float *col, const conv_geom *g, float *x)
{
    const pbl__window *w = &g->win;
    int64_t P = g->P, OW = g->OW, sw = w->stride[2], H = g->H, W = g->W;
    for (int64_t c = 0; c < g->Cg; c++)
        for (int64_t kd = 0; kd < w->kernel[0]; kd++)
            for (int64_t kh = 0; kh < w->kernel[1]; kh++)
                for (int64_t kw = 0; kw < w->kernel[2]; kw++) {
                    const float *row = col + (((c * w->kernel[0] + kd) * w->kernel[1] + kh) * w->kernel[2] + kw) * P;
                    int64_t off = kw * w->dilation[2] - w->pad[2], lo, hi;
                    valid_range(W, OW, sw, off, &lo, &hi);
                    for (int64_t od = 0; od < g->OD; od++) {
                        int64_t id = od * w->stride[0] - w->pad[0] + kd * w->dilation[0];
                        if (id < 0 || id >= g->D)
                            continue;
                        for (int64_t oh = 0; oh < g->OH; oh++) {
                            int64_t ih = oh * w->stride[1] - w->pad[1] + kh * w->dilation[1];
                            if (ih < 0 || ih >= H)
                                continue;
                            float *xr = x + ((c * g->D + id) * H + ih) * W + off;
                            const float *r = row + (od * g->OH + oh) * OW;
                            for (int64_t ow = lo; ow < hi; ow++)
                                xr[ow * sw] += r[ow];
                        }
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
    memset(dx, 0, (size_t)(g.N * g.C * g.S) * sizeof *dx);
    for (int64_t n = 0; n < g.N; n++)
        for (int64_t gi = 0; gi < g.G; gi++) {
            pbl__cpu_sgemm(a->par, 1, 0, (int)K, (int)P, (int)Cog, wt + gi * Cog * K, (int)K,
                           dy + (n * g.Co + gi * Cog) * P, (int)P, 0.0f, col, (int)P);
            col2im(col, &g, dx + (n * g.C + gi * Cg) * g.S);
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
            im2col(x + (n * g.C + gi * Cg) * g.S, &g, col);
            pbl__cpu_sgemm(a->par, 0, 1, (int)Cog, (int)K, (int)P, dy + (n * g.Co + gi * Cog) * P, (int)P, col, (int)P,
                           n ? 1.0f : 0.0f, dw + gi * Cog * K, (int)K);
        }
    return PBL_OK;
}
