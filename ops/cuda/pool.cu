/*
 * CUDA kernels: max_pool2d, avg_pool2d, global_avg_pool and their gradients (ops/pool.c), the
 * same arithmetic in the same order as the CPU kernels (ops/cpu/pool.c), so the results are
 * the same bits:
 *
 * - forward: one thread per output, the window's taps inside x in (kh, kw) order; max keeps
 *   a tap when it is strictly greater (from −FLT_MAX), avg divides the float sum by the number
 *   of taps inside x (padding not counted); global_avg_pool sums its plane in double, in order.
 * - gradients GATHER: one thread per input element visits the outputs whose windows cover it
 *   in output order (oh, then ow: kh and kw taken from the last to the first, since a larger
 *   tap index means an earlier output) and adds their contributions from 0, which is the
 *   order the CPU adds them into dx. No atomics: race-free and deterministic. max_pool2d_grad
 *   adds dy of an output only when this element is the output's chosen tap, the first in
 *   window order whose x equals y (the CPU's rule).
 */
#include <cfloat>

#include "ops/cuda/common.cuh"

extern "C" {
#include "ops/shared/geometry.h"
}

struct pgeom {
    int64_t NC, H, W, OH, OW;
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
};

/* Pool attributes are slots 0..3: kernel, stride, pad, dilation. */
static pgeom make_pgeom(const pbl__kargs *a, const pbl_shape *xs, const pbl_shape *ys)
{
    pbl__window w;
    pbl__window_of(&a->attr[0], &a->attr[1], &a->attr[2], &a->attr[3], &w);
    pgeom g;
    g.NC = xs->dim[0] * xs->dim[1];
    g.H = xs->dim[2];
    g.W = xs->dim[3];
    g.OH = ys->dim[2];
    g.OW = ys->dim[3];
    g.kh = w.kernel[0];
    g.kw = w.kernel[1];
    g.sh = w.stride[0];
    g.sw = w.stride[1];
    g.ph = w.pad[0];
    g.pw = w.pad[1];
    g.dh = w.dilation[0];
    g.dw = w.dilation[1];
    return g;
}

/* The taps [*lo, *hi) of output position o whose input o·s − pad + k·d lies in [0, X) (the
 * CPU's tap_range). */
__device__ static void tap_range(int64_t o, int64_t s, int64_t pad, int64_t d, int64_t K, int64_t X, int64_t *lo,
                                 int64_t *hi)
{
    int64_t base = o * s - pad;
    int64_t a = base >= 0 ? 0 : (-base + d - 1) / d, b = X - base <= 0 ? 0 : (X - base + d - 1) / d;
    *lo = a < K ? a : K;
    *hi = b < K ? b : K;
    if (*hi < *lo)
        *hi = *lo;
}

__global__ static void pool_k(float *y, const float *x, pgeom g, int is_max)
{
    PBL__GRID_LOOP(i, g.NC * g.OH * g.OW) {
        int64_t ow = i % g.OW, oh = (i / g.OW) % g.OH, nc = i / (g.OW * g.OH);
        int64_t h0, h1, w0, w1;
        tap_range(oh, g.sh, g.ph, g.dh, g.kh, g.H, &h0, &h1);
        tap_range(ow, g.sw, g.pw, g.dw, g.kw, g.W, &w0, &w1);
        const float *xb = x + nc * g.H * g.W + (oh * g.sh - g.ph) * g.W + (ow * g.sw - g.pw);
        if (is_max) {
            float m = -FLT_MAX;
            for (int64_t kh = h0; kh < h1; kh++)
                for (int64_t kw = w0; kw < w1; kw++) {
                    float v = xb[kh * g.dh * g.W + kw * g.dw];
                    m = v > m ? v : m;
                }
            y[i] = m;
        } else {
            float sum = 0.0f;
            for (int64_t kh = h0; kh < h1; kh++)
                for (int64_t kw = w0; kw < w1; kw++)
                    sum += xb[kh * g.dh * g.W + kw * g.dw];
            int64_t count = (h1 - h0) * (w1 - w0);
            y[i] = count ? sum / (float)count : 0.0f;
        }
    }
}

/* Whether input (ih, iw) is output (oh, ow)'s chosen tap: the first in window order whose x
 * equals y. xp is the (n, c) plane. */
__device__ static int chosen(const float *xp, float yv, const pgeom &g, int64_t oh, int64_t ow, int64_t ih, int64_t iw)
{
    int64_t h0, h1, w0, w1;
    tap_range(oh, g.sh, g.ph, g.dh, g.kh, g.H, &h0, &h1);
    tap_range(ow, g.sw, g.pw, g.dw, g.kw, g.W, &w0, &w1);
    for (int64_t kh = h0; kh < h1; kh++)
        for (int64_t kw = w0; kw < w1; kw++) {
            int64_t th = oh * g.sh - g.ph + kh * g.dh, tw = ow * g.sw - g.pw + kw * g.dw;
            if (xp[th * g.W + tw] == yv)
                return th == ih && tw == iw;
        }
    return 0;
}

/* dx[nc, ih, iw] = Σ over the outputs whose windows cover it, in output order: max, dy when
 * it is the chosen tap; avg, dy / the output's count of taps inside x. */
__global__ static void pool_grad_k(float *dx, const float *dy, const float *x, const float *y, pgeom g, int is_max)
{
    PBL__GRID_LOOP(i, g.NC * g.H * g.W) {
        int64_t iw = i % g.W, ih = (i / g.W) % g.H, nc = i / (g.W * g.H);
        const float *dyp = dy + nc * g.OH * g.OW;
        float acc = 0.0f;
        for (int64_t kh = g.kh - 1; kh >= 0; kh--) {
            int64_t th = ih + g.ph - kh * g.dh;
            if (th < 0 || th % g.sh != 0 || th / g.sh >= g.OH)
                continue;
            int64_t oh = th / g.sh;
            for (int64_t kw = g.kw - 1; kw >= 0; kw--) {
                int64_t tw = iw + g.pw - kw * g.dw;
                if (tw < 0 || tw % g.sw != 0 || tw / g.sw >= g.OW)
                    continue;
                int64_t ow = tw / g.sw, o = oh * g.OW + ow;
                if (is_max) {
                    if (chosen(x + nc * g.H * g.W, y[nc * g.OH * g.OW + o], g, oh, ow, ih, iw))
                        acc += dyp[o];
                } else {
                    int64_t h0, h1, w0, w1;
                    tap_range(oh, g.sh, g.ph, g.dh, g.kh, g.H, &h0, &h1);
                    tap_range(ow, g.sw, g.pw, g.dw, g.kw, g.W, &w0, &w1);
                    int64_t count = (h1 - h0) * (w1 - w0);
                    acc += count ? dyp[o] / (float)count : 0.0f;
                }
            }
        }
        dx[i] = acc;
    }
}

static pbl_status pool(const pbl__cuda_launch *l, const pbl__kargs *a, int is_max)
{
    pbl_status s = PBL_OK;
    pgeom g = make_pgeom(a, &a->in_meta[0].shape, &a->out_meta[0].shape);
    int64_t n = g.NC * g.OH * g.OW;
    PBL__LAUNCH(pool_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0), g, is_max);
    PBL__LAUNCHED();
done:
    return s;
}

/* dy is input 0 (x and y follow for max); dx's shape is the output's */
static pbl_status pool_grad(const pbl__cuda_launch *l, const pbl__kargs *a, int is_max)
{
    pbl_status s = PBL_OK;
    pgeom g = make_pgeom(a, &a->out_meta[0].shape, &a->in_meta[0].shape);
    int64_t n = g.NC * g.H * g.W;
    const float *x = is_max ? PBL__IN(a, 1) : NULL, *y = is_max ? PBL__IN(a, 2) : NULL;
    PBL__LAUNCH(pool_grad_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0), x, y, g,
                                                                          is_max);
    PBL__LAUNCHED();
done:
    return s;
}

extern "C" pbl_status pbl__cuda_max_pool2d(const pbl__cuda_launch *l, const pbl__kargs *a) { return pool(l, a, 1); }
extern "C" pbl_status pbl__cuda_avg_pool2d(const pbl__cuda_launch *l, const pbl__kargs *a) { return pool(l, a, 0); }
extern "C" pbl_status pbl__cuda_max_pool2d_grad(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    return pool_grad(l, a, 1);
}
extern "C" pbl_status pbl__cuda_avg_pool2d_grad(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    return pool_grad(l, a, 0);
}

/* ---- global_avg_pool: the mean of each (n, c) plane of S elements --------------------------- */

__global__ static void global_pool_k(float *y, const float *x, int64_t NC, int64_t S)
{
    PBL__GRID_LOOP(nc, NC) {
        double acc = 0.0;
        for (int64_t i = 0; i < S; i++)
            acc += x[nc * S + i];
        y[nc] = (float)(acc / (double)S);
    }
}

__global__ static void global_pool_grad_k(float *dx, const float *dy, int64_t n, int64_t S)
{
    PBL__GRID_LOOP(i, n)
        dx[i] = dy[i / S] / (float)S;
}

extern "C" pbl_status pbl__cuda_global_avg_pool(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    const pbl_shape *xs = &a->in_meta[0].shape;
    int64_t NC = xs->dim[0] * xs->dim[1], S = pbl_shape_numel(xs) / (NC ? NC : 1);
    PBL__LAUNCH(global_pool_k, pbl__blocks(NC), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0), NC, S);
    PBL__LAUNCHED();
done:
    return s;
}

extern "C" pbl_status pbl__cuda_global_avg_pool_grad(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    const pbl_shape *xs = &a->out_meta[0].shape;
    int64_t n = pbl_shape_numel(xs), NC = xs->dim[0] * xs->dim[1], S = n / (NC ? NC : 1);
    PBL__LAUNCH(global_pool_grad_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0), n, S);
    PBL__LAUNCHED();
done:
    return s;
}
