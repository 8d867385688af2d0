/* CPU kernels: max_pool2d, avg_pool2d (1 to 3 spatial dims; the padding counted in the mean
 * only with count_pad, ONNX's count_include_pad) and global_avg_pool, and their gradients.
 *
 * max_pool2d_grad sends each output's gradient to ONE tap: the first in window order (depth,
 * rows, then columns) whose x equals y, which is the tap the forward's strict `>` kept (PyTorch's
 * rule too). A window whose taps are all NaN or -inf has y = -FLT_MAX, equal to no tap: its
 * gradient is dropped. Gradients are added into dx in output order (ops/cuda/pool.cu gathers in
 * the same order, so both give the same bits). */
#include <float.h>
#include <string.h>

#include "ops/cpu/kernels.h"
#include "ops/shared/geometry.h"
#include "ops/shared/resize.h"

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

/* What the pooling kernels walk: NC planes of x's spatial dims `in` (three slots, leading
 * unit dims for 1-D and 2-D) pooled to `out`, the window, and count_include_pad. */
typedef struct pool_geom {
    int64_t     NC, in[3], out[3], S, OS; /* S, OS: elements of one plane of x, of y */
    pbl__window w;
    int         count_pad;
} pool_geom;

/* Pool attributes: kernel, stride, pad, dilation, ceil, count_pad (slots 0..5). */
static pool_geom pool_geom_of(const pbl__kargs *a, const pbl_shape *xs, const pbl_shape *ys)
{
    pool_geom g;
    g.NC = xs->dim[0] * xs->dim[1];
    pbl__window_in(xs, g.in);
    pbl__window_in(ys, g.out);
    g.S = g.in[0] * g.in[1] * g.in[2];
    g.OS = g.out[0] * g.out[1] * g.out[2];
    pbl__window_of(pbl__window_nsp(xs->ndim), &a->attr[0], &a->attr[1], &a->attr[2], &a->attr[3], &g.w);
    g.count_pad = (int)a->attr[5].i;
    return g;
}

/* One output's window: per slot the taps [lo, hi) inside x, the input offset of tap 0 (base,
 * relative to the plane) and the step between taps; count is the mean's divisor. */
typedef struct pool_win {
    int64_t lo[3], hi[3], base, step[3], count;
} pool_win;

static void pool_win_of(const pool_geom *g, const int64_t o[3], pool_win *pw)
{
    const pbl__window *w = &g->w;
    int64_t plane[3] = { g->in[1] * g->in[2], g->in[2], 1 };
    pw->base = 0;
    pw->count = 1;
    int64_t padded = 1;
    for (int k = 0; k < 3; k++) {
        tap_range(o[k], w->stride[k], w->pad[k], w->dilation[k], w->kernel[k], g->in[k], &pw->lo[k], &pw->hi[k]);
        pw->base += (o[k] * w->stride[k] - w->pad[k]) * plane[k];
        pw->step[k] = w->dilation[k] * plane[k];
        pw->count *= pw->hi[k] - pw->lo[k];
        /* count_include_pad: the taps inside the padded input (the ceil_mode tail excluded) */
        int64_t plo, phi;
        tap_range(o[k], w->stride[k], 0, w->dilation[k], w->kernel[k], g->in[k] + w->pad[k] + w->pad[k + 3], &plo, &phi);
        padded *= phi - plo;
    }
    if (g->count_pad)
        pw->count = padded;
}

/* n outputs y[0..n) along the last slot whose taps there all lie inside x: pw is the window
 * of the first (its ranges in the other slots and its count hold for all n), s the stride.
 * Each tap in window order is a pass over the row, so the loop over the outputs vectorises
 * (strided loads when s > 1); every output still sees its taps in the same order as one
 * output at a time would: the same max, the same sum bits. */
PBL__INLINE void pool_row_body(const float *xb, const pool_win *pw, int64_t K, int64_t s, int64_t n, int is_max,
                               float *y)
{
    for (int64_t j = 0; j < n; j++)
        y[j] = is_max ? -FLT_MAX : 0.0f;
    for (int64_t kd = pw->lo[0]; kd < pw->hi[0]; kd++)
        for (int64_t kh = pw->lo[1]; kh < pw->hi[1]; kh++)
            for (int64_t kw = 0; kw < K; kw++) {
                const float *xr = xb + kd * pw->step[0] + kh * pw->step[1] + kw * pw->step[2];
                if (is_max)
                    for (int64_t j = 0; j < n; j++) {
                        float v = xr[j * s];
                        y[j] = v > y[j] ? v : y[j];
                    }
                else
                    for (int64_t j = 0; j < n; j++)
                        y[j] += xr[j * s];
            }
    if (!is_max)
        for (int64_t j = 0; j < n; j++)
            y[j] = pw->count ? y[j] / (float)pw->count : 0.0f;
}
PBL__LEVELS(pool_row, (const float *xb, const pool_win *pw, int64_t K, int64_t s, int64_t n, int is_max, float *y),
            (xb, pw, K, s, n, is_max, y))

/* x[N,C,d...] -> y[N,C,o...]: each output the max or mean of the window's taps that fall
 * inside x (the shape rule keeps every window overlapping x). Tap ranges are found per
 * output, so the inner loops have no bounds tests; the outputs of a row whose taps along the
 * last dim all lie inside x go together (pool_row, per CPU level), the edges one by one. */
static pbl_status pool(const pbl__kargs *a, int is_max)
{
    pool_geom g = pool_geom_of(a, &a->in_meta[0].shape, &a->out_meta[0].shape);
    const float *x = PBL__IN(a, 0);
    float *y = PBL__OUT(a, 0);
    /* the interior of the last slot: o·s − pad ≥ 0 and o·s − pad + (K − 1)·d < in */
    const pbl__window *w = &g.w;
    int64_t s = w->stride[2], K = w->kernel[2], last = g.in[2] - 1 - (K - 1) * w->dilation[2] + w->pad[2];
    int64_t in_hi = last < 0 ? 0 : last / s + 1, in_lo = (w->pad[2] + s - 1) / s;
    in_hi = in_hi < g.out[2] ? in_hi : g.out[2];
    in_lo = in_lo < in_hi ? in_lo : in_hi;
    /* every plane has the same windows: each is worked out once (pool_win_of's divisions
     * cost more than a small plane's taps) and applied to all NC planes */
    int64_t o[3], i = 0;
    for (o[0] = 0; o[0] < g.out[0]; o[0]++)
        for (o[1] = 0; o[1] < g.out[1]; o[1]++)
            for (o[2] = 0; o[2] < g.out[2]; o[2]++, i++) {
                pool_win pw;
                pool_win_of(&g, o, &pw);
                if (o[2] == in_lo && in_hi > in_lo) {
                    for (int64_t nc = 0; nc < g.NC; nc++)
                        pool_row(x + nc * g.S + pw.base, &pw, K, s, in_hi - in_lo, is_max, y + nc * g.OS + i);
                    i += in_hi - in_lo - 1;
                    o[2] = in_hi - 1;
                    continue;
                }
                for (int64_t nc = 0; nc < g.NC; nc++) {
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
                    y[nc * g.OS + i] = is_max ? m : pw.count ? sum / (float)pw.count : 0.0f;
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

/* One output index o along slot k, for the gradients: the taps [lo, hi) inside x, the plane
 * offset of tap 0 (base) and the taps the mean counts along k (with count_pad, those inside
 * the padded input, the ceil_mode tail excluded); pool_win_of's per-slot parts, worked out
 * once per index of each slot rather than once per output. */
typedef struct pool_span {
    int64_t lo, hi, base, count;
} pool_span;

static pool_span span_of(const pool_geom *g, int k, int64_t o)
{
    const pbl__window *w = &g->w;
    int64_t plane = k == 0 ? g->in[1] * g->in[2] : k == 1 ? g->in[2] : 1;
    pool_span sp;
    tap_range(o, w->stride[k], w->pad[k], w->dilation[k], w->kernel[k], g->in[k], &sp.lo, &sp.hi);
    sp.base = (o * w->stride[k] - w->pad[k]) * plane;
    sp.count = sp.hi - sp.lo;
    if (g->count_pad) {
        int64_t plo, phi;
        tap_range(o, w->stride[k], 0, w->dilation[k], w->kernel[k], g->in[k] + w->pad[k] + w->pad[k + 3], &plo, &phi);
        sp.count = phi - plo;
    }
    return sp;
}

/* Column spans kept on the stack (32 bytes each) */
#define SPAN_CACHE 256

/* dy[N,C,o...] (x, y for max) -> dx[N,C,d...]: each output's gradient back to its window's
 * taps inside x, output by output. max: to the first tap whose x equals y; avg: dy / count to
 * every tap. */
static pbl_status pool_grad(const pbl__kargs *a, int is_max)
{
    pool_geom g = pool_geom_of(a, &a->out_meta[0].shape, &a->in_meta[0].shape);
    const float *dy = PBL__IN(a, 0), *x = is_max ? PBL__IN(a, 1) : NULL, *y = is_max ? PBL__IN(a, 2) : NULL;
    float *dx = PBL__OUT(a, 0);
    const pbl__window *w = &g.w;
    int64_t st[3] = { w->dilation[0] * g.in[1] * g.in[2], w->dilation[1] * g.in[2], w->dilation[2] };
    /* the column spans are the same in every row: worked out once when they fit on the stack */
    pool_span cols[SPAN_CACHE];
    int cached = g.out[2] <= SPAN_CACHE;
    for (int64_t ow = 0; cached && ow < g.out[2]; ow++)
        cols[ow] = span_of(&g, 2, ow);
    memset(dx, 0, (size_t)(g.NC * g.S) * sizeof *dx);
    for (int64_t nc = 0; nc < g.NC; nc++) {
        float *dxp = dx + nc * g.S;
        const float *xp = is_max ? x + nc * g.S : NULL;
        int64_t i = nc * g.OS;
        for (int64_t od = 0; od < g.out[0]; od++) {
            pool_span sd = span_of(&g, 0, od);
            for (int64_t oh = 0; oh < g.out[1]; oh++) {
                pool_span sh = span_of(&g, 1, oh);
                for (int64_t ow = 0; ow < g.out[2]; ow++, i++) {
                    pool_span sw = cached ? cols[ow] : span_of(&g, 2, ow);
                    int64_t base = sd.base + sh.base + sw.base;
                    if (!is_max) {
                        int64_t count = sd.count * sh.count * sw.count;
                        float gv = count ? dy[i] / (float)count : 0.0f;
                        for (int64_t kd = sd.lo; kd < sd.hi; kd++)
                            for (int64_t kh = sh.lo; kh < sh.hi; kh++) {
                                float *r = dxp + base + kd * st[0] + kh * st[1];
                                for (int64_t kw = sw.lo; kw < sw.hi; kw++)
                                    r[kw * st[2]] += gv;
                            }
                        continue;
                    }
                    int found = 0;
                    for (int64_t kd = sd.lo; kd < sd.hi && !found; kd++)
                        for (int64_t kh = sh.lo; kh < sh.hi && !found; kh++)
                            for (int64_t kw = sw.lo; kw < sw.hi; kw++) {
                                int64_t t = base + kd * st[0] + kh * st[1] + kw * st[2];
                                if (xp[t] == y[i]) {
                                    dxp[t] += dy[i];
                                    found = 1;
                                    break;
                                }
                            }
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

/* ---- resize and resize_grad, over ops/shared/resize.h (the CUDA kernels call the same
 * functions, so both give the same bits). resize: each output its taps' weighted sum;
 * resize_grad: plane by plane (the leading dims that map one to one), each output's dy added
 * into its taps in output order. */

/* Slots: shape, mode, coord, nearest, scale_bits (ops/pool.c). */
static pbl__resize_geom resize_geom(const pbl__kargs *a, const pbl_shape *x, const pbl_shape *y)
{
    return pbl__resize_geom_of(x, y, a->attr[1].i, a->attr[2].i, a->attr[3].i, a->attr[4].ints, a->attr[4].n_ints);
}

typedef struct resize_job {
    const pbl__resize_geom *g;
    const float            *x;
    float                  *y;
} resize_job;

static void resize_range(void *ctx, int64_t lo, int64_t hi)
{
    const resize_job *j = ctx;
    for (int64_t i = lo; i < hi; i++)
        j->y[i] = pbl__resize_value(j->g, j->x, i);
}

pbl_status pbl__cpu_resize(const pbl__kargs *a)
{
    pbl__resize_geom g = resize_geom(a, &a->in_meta[0].shape, &a->out_meta[0].shape);
    resize_job j = { &g, PBL__IN(a, 0), PBL__OUT(a, 0) };
    pbl__cpu_for(a, pbl_shape_numel(&a->out_meta[0].shape), 8, resize_range, &j);
    return PBL_OK;
}

pbl_status pbl__cpu_resize_grad(const pbl__kargs *a)
{
    pbl__resize_geom g = resize_geom(a, &a->out_meta[0].shape, &a->in_meta[0].shape);
    const float *dy = PBL__IN(a, 0);
    float *dx = PBL__OUT(a, 0);
    int64_t planes = pbl__resize_planes(&g);
    for (int64_t p = 0; p < planes; p++)
        pbl__resize_grad_plane(&g, dy, dx, p);
    return PBL_OK;
}
