/*
 * CUDA kernels: max_pool2d, avg_pool2d, global_avg_pool and their gradients (ops/pool.c), the
 * same arithmetic in the same order as the CPU kernels (ops/cpu/pool.c), so the results are
 * the same bits:
 *
 * - forward: one thread per output, the window's taps inside x in (kh, kw) order; max keeps
 *   a tap when it is strictly greater (from −FLT_MAX), avg divides the float sum by the number
 *   of taps inside x (padding not counted); global_avg_pool sums its plane in double, in order.
 * - gradients GATHER: one thread per input element visits the outputs whose windows cover it
 *   in output order (od, oh, then ow: kd, kh and kw taken from the last to the first, since a larger
 *   tap index means an earlier output) and adds their contributions from 0, which is the
 *   order the CPU adds them into dx. No atomics: race-free and deterministic. max_pool2d_grad
 *   adds dy of an output only when this element is the output's chosen tap, the first in
 *   window order whose x equals y (the CPU's rule).
 */
#include <cfloat>

#include "ops/cuda/common.cuh"

extern "C" {
#include "ops/shared/geometry.h"
#include "ops/shared/resize.h"
}

struct pgeom {
    int64_t NC, in[3], out[3], S, OS; /* S, OS: elements of one plane of x, of y */
    int64_t k[3], s[3], p[3], pe[3], d[3]; /* kernel, stride, pad begin, pad end, dilation */
    int     count_pad;
};

/* Pool attributes are slots 0..5: kernel, stride, pad, dilation, ceil, count_pad; 1-D and 2-D
 * take unit leading spatial dims (ops/shared/geometry.h). */
static pgeom make_pgeom(const pbl__kargs *a, const pbl_shape *xs, const pbl_shape *ys)
{
    pbl__window w;
    pbl__window_of(pbl__window_nsp(xs->ndim), &a->attr[0], &a->attr[1], &a->attr[2], &a->attr[3], &w);
    pgeom g;
    g.NC = xs->dim[0] * xs->dim[1];
    pbl__window_in(xs, g.in);
    pbl__window_in(ys, g.out);
    g.S = g.in[0] * g.in[1] * g.in[2];
    g.OS = g.out[0] * g.out[1] * g.out[2];
    for (int k = 0; k < 3; k++) {
        g.k[k] = w.kernel[k];
        g.s[k] = w.stride[k];
        g.p[k] = w.pad[k];
        g.pe[k] = w.pad[k + 3];
        g.d[k] = w.dilation[k];
    }
    g.count_pad = (int)a->attr[5].i;
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

/* One output's window (the CPU's pool_win): per slot the taps [lo, hi) inside x, the plane
 * offset of tap 0, the step between taps, and the mean's divisor. */
struct pwin {
    int64_t lo[3], hi[3], base, step[3], count;
};

__device__ static void pwin_of(const pgeom &g, const int64_t o[3], pwin *pw)
{
    int64_t plane[3] = { g.in[1] * g.in[2], g.in[2], 1 };
    pw->base = 0;
    pw->count = 1;
    int64_t padded = 1;
    for (int k = 0; k < 3; k++) {
        tap_range(o[k], g.s[k], g.p[k], g.d[k], g.k[k], g.in[k], &pw->lo[k], &pw->hi[k]);
        pw->base += (o[k] * g.s[k] - g.p[k]) * plane[k];
        pw->step[k] = g.d[k] * plane[k];
        pw->count *= pw->hi[k] - pw->lo[k];
        int64_t plo, phi;
        tap_range(o[k], g.s[k], 0, g.d[k], g.k[k], g.in[k] + g.p[k] + g.pe[k], &plo, &phi);
        padded *= phi - plo;
    }
    if (g.count_pad)
        pw->count = padded;
}

__device__ static void unravel(int64_t i, const int64_t dims[3], int64_t o[3])
{
    o[2] = i % dims[2];
    o[1] = (i / dims[2]) % dims[1];
    o[0] = i / (dims[2] * dims[1]);
}

__global__ static void pool_k(float *y, const float *x, pgeom g, int is_max)
{
    PBL__GRID_LOOP(i, g.NC * g.OS) {
        int64_t nc = i / g.OS, o[3];
        unravel(i % g.OS, g.out, o);
        pwin pw;
        pwin_of(g, o, &pw);
        const float *xb = x + nc * g.S + pw.base;
        float m = -FLT_MAX, sum = 0.0f;
        for (int64_t kd = pw.lo[0]; kd < pw.hi[0]; kd++)
            for (int64_t kh = pw.lo[1]; kh < pw.hi[1]; kh++)
                for (int64_t kw = pw.lo[2]; kw < pw.hi[2]; kw++) {
                    float v = xb[kd * pw.step[0] + kh * pw.step[1] + kw * pw.step[2]];
                    if (is_max)
                        m = v > m ? v : m;
                    else
                        sum += v;
                }
        y[i] = is_max ? m : pw.count ? sum / (float)pw.count : 0.0f;
    }
}

/* Whether plane offset t is output o's chosen tap: the first in window order whose x equals
 * y. xp is the (n, c) plane. */
__device__ static int chosen(const float *xp, float yv, const pwin &pw, int64_t t)
{
    for (int64_t kd = pw.lo[0]; kd < pw.hi[0]; kd++)
        for (int64_t kh = pw.lo[1]; kh < pw.hi[1]; kh++)
            for (int64_t kw = pw.lo[2]; kw < pw.hi[2]; kw++) {
                int64_t u = pw.base + kd * pw.step[0] + kh * pw.step[1] + kw * pw.step[2];
                if (xp[u] == yv)
                    return u == t;
            }
    return 0;
}

/* dx[nc, i...] = Σ over the outputs whose windows cover it, in output order: max, dy when it
 * is the chosen tap; avg, dy / the output's count. */
__global__ static void pool_grad_k(float *dx, const float *dy, const float *x, const float *y, pgeom g, int is_max)
{
    PBL__GRID_LOOP(i, g.NC * g.S) {
        int64_t nc = i / g.S, t = i % g.S, in[3];
        unravel(t, g.in, in);
        float acc = 0.0f;
        int64_t o[3];
        for (int64_t kd = g.k[0] - 1; kd >= 0; kd--) {
            int64_t td = in[0] + g.p[0] - kd * g.d[0];
            if (td < 0 || td % g.s[0] != 0 || td / g.s[0] >= g.out[0])
                continue;
            o[0] = td / g.s[0];
            for (int64_t kh = g.k[1] - 1; kh >= 0; kh--) {
                int64_t th = in[1] + g.p[1] - kh * g.d[1];
                if (th < 0 || th % g.s[1] != 0 || th / g.s[1] >= g.out[1])
                    continue;
                o[1] = th / g.s[1];
                for (int64_t kw = g.k[2] - 1; kw >= 0; kw--) {
                    int64_t tw = in[2] + g.p[2] - kw * g.d[2];
                    if (tw < 0 || tw % g.s[2] != 0 || tw / g.s[2] >= g.out[2])
                        continue;
                    o[2] = tw / g.s[2];
                    int64_t oi = nc * g.OS + (o[0] * g.out[1] + o[1]) * g.out[2] + o[2];
                    pwin pw;
                    pwin_of(g, o, &pw);
                    if (is_max) {
                        if (chosen(x + nc * g.S, y[oi], pw, t))
                            acc += dy[oi];
                    } else {
                        acc += pw.count ? dy[oi] / (float)pw.count : 0.0f;
                    }
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
    int64_t n = g.NC * g.OS;
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
    int64_t n = g.NC * g.S;
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

/* ---- resize and resize_grad (ops/pool.c), over the CPU kernels' functions
 * (ops/shared/resize.h): resize one thread per output; resize_grad one thread per plane (an
 * index of the leading dims that map one to one), which adds its outputs' dy into its own dx
 * plane in output order, the CPU's order: race-free and deterministic, no atomics. */

__global__ static void resize_k(float *y, const float *x, pbl__resize_geom g, int64_t n)
{
    PBL__GRID_LOOP(i, n)
        y[i] = pbl__resize_value(&g, x, i);
}

__global__ static void resize_grad_k(float *dx, const float *dy, pbl__resize_geom g, int64_t planes)
{
    PBL__GRID_LOOP(p, planes)
        pbl__resize_grad_plane(&g, dy, dx, p);
}

/* Slots: shape, mode, coord, nearest, scale_bits (ops/pool.c). */
static pbl__resize_geom resize_geom(const pbl__kargs *a, const pbl_shape *x, const pbl_shape *y)
{
    return pbl__resize_geom_of(x, y, a->attr[1].i, a->attr[2].i, a->attr[3].i, a->attr[4].ints, a->attr[4].n_ints);
}

extern "C" pbl_status pbl__cuda_resize(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    pbl__resize_geom g = resize_geom(a, &a->in_meta[0].shape, &a->out_meta[0].shape);
    int64_t n = pbl_shape_numel(&a->out_meta[0].shape);
    PBL__LAUNCH(resize_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0), g, n);
    PBL__LAUNCHED();
done:
    return s;
}

extern "C" pbl_status pbl__cuda_resize_grad(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    pbl__resize_geom g = resize_geom(a, &a->out_meta[0].shape, &a->in_meta[0].shape);
    int64_t planes = pbl__resize_planes(&g);
    PBL__LAUNCH(resize_grad_k, pbl__blocks(planes), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0), g,
                                                                                 planes);
    PBL__LAUNCHED();
done:
    return s;
}
