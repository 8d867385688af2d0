/* CPU kernels: max_pool2d, avg_pool2d (padding not counted, ONNX's count_include_pad = 0) and
 * global_avg_pool, and their gradients.
 *
 * max_pool2d_grad sends each output's gradient to ONE tap: the first in window order (rows,
 * then columns) whose x equals y, which is the tap the forward's strict `>` kept (PyTorch's
 * rule too). A window whose taps are all NaN or -inf has y = -FLT_MAX, equal to no tap: its
 * gradient is dropped. Gradients are added into dx in output order (ops/cuda/pool.cu gathers in
 * the same order, so both give the same bits). */
#include <float.h>
#include <string.h>

#include "ops/cpu/kernels.h"
#include "ops/shared/geometry.h"

/* The taps k (0 ≤ k < K) of output position o whose input o·s − pad + k·d lies in [0, X):
 * [*lo, *hi), an empty range when none does. */
static void tap_range(int64_t o, int64_t s, int64_t pad, int64_t d, int64_t K, int64_t X, int64_t *lo, int64_t *hi)
{
    int64_t base = o * s - pad; /* input = base + k·d */
    int64_t a = base >= 0 ? 0 : (-base + d - 1) / d, b = X - base <= 0 ? 0 : (X - base + d - 1) / d;
    *lo = a < K ? a : K;
    *hi = b < K ? b : K;
    if (*hi < *lo)
        *hi = *lo;
}

/* x[N,C,H,W] -> y[N,C,OH,OW]: each output the max or mean of the window's taps that fall
 * inside x (the shape rule keeps every window overlapping x). Tap ranges are found per
 * output row and column, so the inner loops have no bounds tests. */
static pbl_status pool(const pbl__kargs *a, int is_max)
{
    const pbl_shape *xs = &a->in_meta[0].shape, *ys = &a->out_meta[0].shape;
    int64_t NC = xs->dim[0] * xs->dim[1], H = xs->dim[2], W = xs->dim[3], OH = ys->dim[2], OW = ys->dim[3];
    pbl__window w;
    pbl__window_of(&a->attr[0], &a->attr[1], &a->attr[2], &a->attr[3], &w);
    const float *x = PBL__IN(a, 0);
    float *y = PBL__OUT(a, 0);
    for (int64_t nc = 0; nc < NC; nc++) {
        const float *xp = x + nc * H * W;
        float *yp = y + nc * OH * OW;
        for (int64_t oh = 0; oh < OH; oh++) {
            int64_t h0, h1;
            tap_range(oh, w.stride[0], w.pad[0], w.dilation[0], w.kernel[0], H, &h0, &h1);
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t w0, w1;
                tap_range(ow, w.stride[1], w.pad[1], w.dilation[1], w.kernel[1], W, &w0, &w1);
                const float *xb = xp + (oh * w.stride[0] - w.pad[0]) * W + (ow * w.stride[1] - w.pad[1]);
                if (is_max) {
                    float m = -FLT_MAX;
                    for (int64_t kh = h0; kh < h1; kh++)
                        for (int64_t kw = w0; kw < w1; kw++) {
                            float v = xb[kh * w.dilation[0] * W + kw * w.dilation[1]];
                            m = v > m ? v : m;
                        }
                    yp[oh * OW + ow] = m;
                } else {
                    float sum = 0.0f;
                    for (int64_t kh = h0; kh < h1; kh++)
                        for (int64_t kw = w0; kw < w1; kw++)
                            sum += xb[kh * w.dilation[0] * W + kw * w.dilation[1]];
                    int64_t count = (h1 - h0) * (w1 - w0);
                    yp[oh * OW + ow] = count ? sum / (float)count : 0.0f;
                }
            }
        }
    }
    return PBL_OK;
}

pbl_status pbl__cpu_max_pool2d(const pbl__kargs *a) { return pool(a, 1); }
pbl_status pbl__cpu_avg_pool2d(const pbl__kargs *a) { return pool(a, 0); }

/* x[N,C,...] -> y[N,C,1,...]: the mean of each (n, c) plane */
pbl_status pbl__cpu_global_avg_pool(const pbl__kargs *a)
{
    const pbl_shape *xs = &a->in_meta[0].shape;
    int64_t NC = xs->dim[0] * xs->dim[1], S = pbl_shape_numel(xs) / (NC ? NC : 1);
    const float *x = PBL__IN(a, 0);
    float *y = PBL__OUT(a, 0);
    for (int64_t nc = 0; nc < NC; nc++) {
        double s = 0.0;
        for (int64_t i = 0; i < S; i++)
            s += x[nc * S + i];
        y[nc] = (float)(s / (double)S);
    }
    return PBL_OK;
}

/* dy[N,C,OH,OW] (x, y for max) -> dx[N,C,H,W]: each output's gradient back to its window's
 * taps inside x, output by output. max: to the first tap whose x equals y; avg: dy / count to
 * every tap. */
static pbl_status pool_grad(const pbl__kargs *a, int is_max)
{
    const pbl_shape *ds = &a->in_meta[0].shape, *xs = &a->out_meta[0].shape;
    int64_t NC = xs->dim[0] * xs->dim[1], H = xs->dim[2], W = xs->dim[3], OH = ds->dim[2], OW = ds->dim[3];
    pbl__window w;
    pbl__window_of(&a->attr[0], &a->attr[1], &a->attr[2], &a->attr[3], &w);
    const float *dy = PBL__IN(a, 0), *x = is_max ? PBL__IN(a, 1) : NULL, *y = is_max ? PBL__IN(a, 2) : NULL;
    float *dx = PBL__OUT(a, 0);
    memset(dx, 0, (size_t)(NC * H * W) * sizeof *dx);
    for (int64_t nc = 0; nc < NC; nc++) {
        float *dxp = dx + nc * H * W;
        for (int64_t oh = 0; oh < OH; oh++) {
            int64_t h0, h1;
            tap_range(oh, w.stride[0], w.pad[0], w.dilation[0], w.kernel[0], H, &h0, &h1);
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t w0, w1, o = (nc * OH + oh) * OW + ow;
                tap_range(ow, w.stride[1], w.pad[1], w.dilation[1], w.kernel[1], W, &w0, &w1);
                int64_t base = (oh * w.stride[0] - w.pad[0]) * W + (ow * w.stride[1] - w.pad[1]);
                if (is_max) {
                    const float *xb = x + nc * H * W + base;
                    int found = 0;
                    for (int64_t kh = h0; kh < h1 && !found; kh++)
                        for (int64_t kw = w0; kw < w1; kw++) {
                            int64_t t = kh * w.dilation[0] * W + kw * w.dilation[1];
                            if (xb[t] == y[o]) {
                                dxp[base + t] += dy[o];
                                found = 1;
                                break;
                            }
                        }
                } else {
                    int64_t count = (h1 - h0) * (w1 - w0);
                    float g = count ? dy[o] / (float)count : 0.0f;
                    for (int64_t kh = h0; kh < h1; kh++)
                        for (int64_t kw = w0; kw < w1; kw++)
                            dxp[base + kh * w.dilation[0] * W + kw * w.dilation[1]] += g;
                }
            }
        }
    }
    return PBL_OK;
}

pbl_status pbl__cpu_max_pool2d_grad(const pbl__kargs *a) { return pool_grad(a, 1); }
pbl_status pbl__cpu_avg_pool2d_grad(const pbl__kargs *a) { return pool_grad(a, 0); }

/* dy[N,C,1,...] -> dx[N,C,...]: dy / S in every element of its plane */
pbl_status pbl__cpu_global_avg_pool_grad(const pbl__kargs *a)
{
    const pbl_shape *xs = &a->out_meta[0].shape;
    int64_t NC = xs->dim[0] * xs->dim[1], S = pbl_shape_numel(xs) / (NC ? NC : 1);
    const float *dy = PBL__IN(a, 0);
    float *dx = PBL__OUT(a, 0);
    for (int64_t nc = 0; nc < NC; nc++) {
        float g = dy[nc] / (float)S;
        for (int64_t i = 0; i < S; i++)
            dx[nc * S + i] = g;
    }
    return PBL_OK;
}
