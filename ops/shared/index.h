/* The index maps of the indexing ops (ops/index.c), compiled for the host and, under nvcc, for
 * the device, so both backends' kernels (ops/cpu/index.c, ops/cuda/index.cu) compute the same
 * positions and add gradients in the same order (the same bits).
 *
 *   slice   y[i] = x[start + i·step] per dim           slice_grad: dx = dy placed back, zeros elsewhere
 *   pad     y[o] = x[map(o − before)] per dim, or the constant
 *   gather  y[o, k, i] = x[o, ids[k], i]               gather_grad: dx[o, j, i] = Σ_{ids[k] = j} dy[o, k, i]
 */
#ifndef PBL_OPS_INDEX_H
#define PBL_OPS_INDEX_H

#include "ops/shared/formulas.h"
#include "pebble/graph.h"

/* slice: out dims, the first taken position and the step of each dim of x (`in`) */
typedef struct pbl__slice_geom {
    int32_t nd;
    int64_t in[PBL_MAX_DIMS], out[PBL_MAX_DIMS], start[PBL_MAX_DIMS], step[PBL_MAX_DIMS];
} pbl__slice_geom;

/* x's flat index of y's element o */
PBL__HD static inline int64_t pbl__slice_src(const pbl__slice_geom *g, int64_t o)
{
    int64_t src = 0, stride = 1;
    for (int32_t d = g->nd - 1; d >= 0; d--) {
        int64_t i = o % g->out[d];
        o /= g->out[d];
        src += (g->start[d] + i * g->step[d]) * stride;
        stride *= g->in[d];
    }
    return src;
}

/* dy's flat index feeding x's element e, or -1 when the slice skipped it */
PBL__HD static inline int64_t pbl__slice_back(const pbl__slice_geom *g, int64_t e)
{
    int64_t src = 0, stride = 1;
    int hit = 1;
    for (int32_t d = g->nd - 1; d >= 0; d--) {
        int64_t q = e % g->in[d] - g->start[d];
        e /= g->in[d];
        if (q % g->step[d] != 0)
            hit = 0;
        q /= g->step[d];
        if (q < 0 || q >= g->out[d])
            hit = 0;
        src += q * stride;
        stride *= g->out[d];
    }
    return hit ? src : -1;
}

enum { PBL__PAD_CONSTANT = 0, PBL__PAD_REFLECT = 1, PBL__PAD_EDGE = 2 };

/* pad: x's dims (`in`), y's, and the positions added before each dim (negative: cut) */
typedef struct pbl__pad_geom {
    int32_t nd, mode;
    int64_t in[PBL_MAX_DIMS], out[PBL_MAX_DIMS], before[PBL_MAX_DIMS];
} pbl__pad_geom;

/* x's flat index of y's element o, or -1 where y takes the constant. Reflect needs
 * before, after <= n - 1 (the shape rule checks). */
PBL__HD static inline int64_t pbl__pad_src(const pbl__pad_geom *g, int64_t o)
{
    int64_t src = 0, stride = 1;
    for (int32_t d = g->nd - 1; d >= 0; d--) {
        int64_t n = g->in[d], i = o % g->out[d] - g->before[d];
        o /= g->out[d];
        if (i < 0 || i >= n) {
            if (g->mode == PBL__PAD_CONSTANT)
                return -1;
            if (g->mode == PBL__PAD_REFLECT)
                i = i < 0 ? -i : 2 * (n - 1) - i;
            else
                i = i < 0 ? 0 : n - 1;
        }
        src += i * stride;
        stride *= n;
    }
    return src;
}

/* The ranges [lo, hi) of y's positions along dim d that read x's position i (at most 3: the
 * position itself and, reflect, its two mirror images or, edge, the runs it is copied to). */
PBL__HD static inline int pbl__pad_ranges(const pbl__pad_geom *g, int32_t d, int64_t i, int64_t *lo, int64_t *hi)
{
    int64_t n = g->in[d], b = g->before[d], after = g->out[d] - n - b;
    int k = 0;
    if (i + b >= 0 && i + b < g->out[d])
        lo[k] = i + b, hi[k] = i + b + 1, k++;
    if (g->mode == PBL__PAD_REFLECT) {
        if (i >= 1 && i <= b)
            lo[k] = b - i, hi[k] = b - i + 1, k++;
        if (i <= n - 2 && i >= n - 1 - after)
            lo[k] = b + 2 * (n - 1) - i, hi[k] = lo[k] + 1, k++;
    } else if (g->mode == PBL__PAD_EDGE) {
        if (i == 0 && b > 0)
            lo[k] = 0, hi[k] = b, k++;
        if (i == n - 1 && after > 0)
            lo[k] = b + n, hi[k] = g->out[d], k++;
    }
    return k;
}

/* dx's element e: the sum of dy over every y position that read it, in one fixed order */
PBL__HD static inline float pbl__pad_grad_at(const pbl__pad_geom *g, const float *dy, int64_t e)
{
    int64_t lo[PBL_MAX_DIMS][3], hi[PBL_MAX_DIMS][3], o[PBL_MAX_DIMS];
    int nr[PBL_MAX_DIMS], r[PBL_MAX_DIMS];
    for (int32_t d = g->nd - 1; d >= 0; d--) {
        nr[d] = pbl__pad_ranges(g, d, e % g->in[d], lo[d], hi[d]);
        e /= g->in[d];
        if (nr[d] == 0)
            return 0.0f;
        r[d] = 0;
        o[d] = lo[d][0];
    }
    float acc = 0.0f;
    for (;;) {
        int64_t f = 0;
        for (int32_t d = 0; d < g->nd; d++)
            f = f * g->out[d] + o[d];
        acc += dy[f];
        int32_t d = g->nd - 1; /* the next position: an odometer over the ranges */
        for (; d >= 0; d--) {
            if (++o[d] < hi[d][r[d]])
                break;
            if (++r[d] < nr[d]) {
                o[d] = lo[d][r[d]];
                break;
            }
            r[d] = 0;
            o[d] = lo[d][0];
        }
        if (d < 0)
            return acc;
    }
}

/* gather: x as [outer, n, inner], the ids' count k; an id may be negative (from the end) */
typedef struct pbl__gather_geom {
    int64_t outer, n, inner, k;
} pbl__gather_geom;

PBL__HD static inline int64_t pbl__gather_id(const pbl__gather_geom *g, int32_t id) { return id < 0 ? (int64_t)id + g->n : id; }

/* dx's element e: the sum of dy's elements whose id picked it, in increasing id position */
PBL__HD static inline float pbl__gather_grad_at(const pbl__gather_geom *g, const float *dy, const int32_t *ids, int64_t e)
{
    int64_t i = e % g->inner, j = e / g->inner % g->n, o = e / (g->inner * g->n);
    float acc = 0.0f;
    for (int64_t k = 0; k < g->k; k++)
        if (pbl__gather_id(g, ids[k]) == j)
            acc += dy[(o * g->k + k) * g->inner + i];
    return acc;
}

/* cast's f32 -> i32: toward zero, NaN to 0, saturating outside int32 (C leaves those undefined) */
PBL__HD static inline int32_t pbl__f32_to_i32(float v)
{
    if (!(v == v))
        return 0;
    if (v >= 2147483648.0f)
        return 2147483647;
    if (v <= -2147483648.0f)
        return (-2147483647 - 1);
    return (int32_t)v;
}

/* The geometries from the shapes and attributes (host side; the kernels pass them by value). */
static inline pbl__slice_geom pbl__slice_geom_make(const pbl_shape *x, const pbl_shape *y, const int64_t *starts,
                                                   const int64_t *steps)
{
    pbl__slice_geom g;
    g.nd = x->ndim;
    for (int32_t d = 0; d < x->ndim; d++)
        g.in[d] = x->dim[d], g.out[d] = y->dim[d], g.start[d] = starts[d], g.step[d] = steps[d];
    return g;
}

static inline pbl__pad_geom pbl__pad_geom_make(const pbl_shape *x, const pbl_shape *y, const int64_t *pads, int64_t mode)
{
    pbl__pad_geom g;
    g.nd = x->ndim;
    g.mode = (int32_t)mode;
    for (int32_t d = 0; d < x->ndim; d++)
        g.in[d] = x->dim[d], g.out[d] = y->dim[d], g.before[d] = pads[d];
    return g;
}

static inline pbl__gather_geom pbl__gather_geom_make(const pbl_shape *x, const pbl_shape *ids, int64_t axis)
{
    pbl__gather_geom g;
    g.outer = 1, g.n = x->dim[axis], g.inner = 1, g.k = pbl_shape_numel(ids);
    for (int32_t d = 0; d < x->ndim; d++)
        if (d < axis)
            g.outer *= x->dim[d];
        else if (d > axis)
            g.inner *= x->dim[d];
    return g;
}

#endif
