/*
 * resize's arithmetic, shared by its shape rule (ops/pool.c), the CPU kernels
 * (ops/cpu/pool.c) and the CUDA kernels (ops/cuda/pool.cu): one inline function per step,
 * compiled for the host and, under nvcc, for the device too, so both backends compute the
 * same coordinates, weights and sums in the same order (the same bits).
 *
 * Each dim d maps output index o to an input coordinate x (ONNX's
 * coordinate_transformation_mode, with scale s_d and lengths L_in, L_out):
 *   half_pixel (0)          x = (o + ½)/s − ½
 *   pytorch_half_pixel (1)  the same, 0 when L_r ≤ 1
 *   align_corners (2)       x = o·(L_in − 1)/(L_r − 1), 0 when L_r ≤ 1
 * where L_r = L_in·s is the resized length before rounding down (ONNX's reference divides by
 * it, so with scales 0.6 over 4 elements the two outputs read 0 and 3/1.4, not 0 and 3).
 *   asymmetric (3)          x = o/s
 *   tf_half_pixel_for_nearest (4)  x = (o + ½)/s
 * nearest (mode 0) reads one input index, x rounded (nearest_mode: 0 round_prefer_floor,
 * 1 round_prefer_ceil, 2 floor, 3 ceil) and clamped into [0, L_in); linear (mode 1) reads
 * floor(x) and the next index with weights 1 − f and f (x clamped into [0, L_in − 1] first:
 * ONNX's edge padding). A multi-dim linear resize is the product of the dims' weights over
 * the 2^k corners of the k dims with a fractional coordinate, corners in binary order.
 */
#ifndef PBL_OPS_RESIZE_H
#define PBL_OPS_RESIZE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "graph/ir/op.h"
#include "ops/shared/formulas.h"

enum { PBL__RESIZE_NEAREST, PBL__RESIZE_LINEAR };
enum { PBL__RC_HALF_PIXEL, PBL__RC_PYTORCH_HALF_PIXEL, PBL__RC_ALIGN_CORNERS, PBL__RC_ASYMMETRIC,
       PBL__RC_TF_HALF_PIXEL_NEAREST, PBL__RC_COUNT };
enum { PBL__RN_ROUND_PREFER_FLOOR, PBL__RN_ROUND_PREFER_CEIL, PBL__RN_FLOOR, PBL__RN_CEIL, PBL__RN_COUNT };

typedef struct pbl__resize_geom {
    int32_t r;                  /* rank */
    int32_t outer;              /* leading dims mapped one to one (the gradient's planes) */
    int64_t in[PBL_MAX_DIMS], out[PBL_MAX_DIMS];
    double  scale[PBL_MAX_DIMS];
    int     mode, coord, nearest;
} pbl__resize_geom;

/* Output index o of dim d: input indices *i0, *i1 and the weight *w1 of *i1 (0: *i0 alone). */
PBL__HD static inline void pbl__resize_coord(const pbl__resize_geom *g, int32_t d, int64_t o, int64_t *i0,
                                             int64_t *i1, double *w1)
{
    double s = g->scale[d], x;
    int64_t L = g->in[d];
    double  Lr = (double)L * s; /* the resized length before rounding down (ONNX's) */
    switch (g->coord) {
    case PBL__RC_PYTORCH_HALF_PIXEL: x = Lr > 1 ? ((double)o + 0.5) / s - 0.5 : 0.0; break;
    case PBL__RC_ALIGN_CORNERS: x = Lr > 1 ? (double)o * (double)(L - 1) / (Lr - 1) : 0.0; break;
    case PBL__RC_ASYMMETRIC: x = (double)o / s; break;
    case PBL__RC_TF_HALF_PIXEL_NEAREST: x = ((double)o + 0.5) / s; break;
    default: x = ((double)o + 0.5) / s - 0.5; break;
    }
    if (g->mode == PBL__RESIZE_NEAREST) {
        double k;
        switch (g->nearest) {
        case PBL__RN_ROUND_PREFER_CEIL: k = floor(x + 0.5); break;
        case PBL__RN_FLOOR: k = floor(x); break;
        case PBL__RN_CEIL: k = ceil(x); break;
        default: k = ceil(x - 0.5); break;
        }
        int64_t i = k < 0 ? 0 : k > (double)(L - 1) ? L - 1 : (int64_t)k;
        *i0 = *i1 = i;
        *w1 = 0.0;
        return;
    }
    x = x < 0 ? 0.0 : x > (double)(L - 1) ? (double)(L - 1) : x;
    double f = floor(x);
    *i0 = (int64_t)f;
    *i1 = *i0 + 1 < L ? *i0 + 1 : L - 1;
    *w1 = *i1 == *i0 ? 0.0 : x - f;
}

/* The input offsets and weights output element `flat` reads: up to 2^k corners into off[]
 * and w[] (k ≤ 6 dims with a fractional coordinate); returns how many. */
PBL__HD static inline int pbl__resize_taps(const pbl__resize_geom *g, int64_t flat, int64_t off[64], double w[64])
{
    int64_t base = 0, step[PBL_MAX_DIMS], stride = 1, idx[PBL_MAX_DIMS];
    for (int32_t d = g->r - 1; d >= 0; d--) {
        idx[d] = flat % g->out[d];
        flat /= g->out[d];
        step[d] = stride;
        stride *= g->in[d];
    }
    int     n = 1, k;
    off[0] = 0;
    w[0] = 1.0;
    for (int32_t d = 0; d < g->r; d++) {
        int64_t i0, i1;
        double  w1;
        pbl__resize_coord(g, d, idx[d], &i0, &i1, &w1);
        base += i0 * step[d];
        if (w1 == 0.0)
            continue;
        /* each corner so far splits in two: without this dim's step (1 − w1), with it (w1) */
        for (k = 0; k < n; k++) {
            off[n + k] = off[k] + (i1 - i0) * step[d];
            w[n + k] = w[k] * w1;
            w[k] *= 1.0 - w1;
        }
        n *= 2;
    }
    for (k = 0; k < n; k++)
        off[k] += base;
    return n;
}

/* y[flat]: the weighted sum of its taps, in corner order. */
PBL__HD static inline float pbl__resize_value(const pbl__resize_geom *g, const float *x, int64_t flat)
{
    int64_t off[64];
    double  w[64], acc = 0.0;
    int     n = pbl__resize_taps(g, flat, off, w);
    for (int k = 0; k < n; k++)
        acc += w[k] * (double)x[off[k]];
    return (float)acc;
}

/* The gradient of one plane (one index of the `outer` leading dims, which map one to one):
 * dx's plane zeroed, then each output's dy added into its taps, outputs in order. */
PBL__HD static inline void pbl__resize_grad_plane(const pbl__resize_geom *g, const float *dy, float *dx,
                                                  int64_t plane)
{
    int64_t in_n = 1, out_n = 1;
    for (int32_t d = g->outer; d < g->r; d++) {
        in_n *= g->in[d];
        out_n *= g->out[d];
    }
    for (int64_t i = 0; i < in_n; i++)
        dx[plane * in_n + i] = 0.0f;
    int64_t off[64];
    double  w[64];
    for (int64_t o = 0; o < out_n; o++) {
        int64_t flat = plane * out_n + o;
        int     n = pbl__resize_taps(g, flat, off, w);
        for (int k = 0; k < n; k++)
            dx[off[k]] += (float)(w[k] * (double)dy[flat]);
    }
}

/* The number of gradient planes: the product of the `outer` leading dims. */
static inline int64_t pbl__resize_planes(const pbl__resize_geom *g)
{
    int64_t p = 1;
    for (int32_t d = 0; d < g->outer; d++)
        p *= g->in[d];
    return p;
}

/* The geometry from x's and y's shapes and the attributes mode, coord, nearest and
 * scale_bits (each dim's scale as the bits of a binary64, so a saved graph keeps it exactly;
 * empty: out/in). outer counts the leading dims whose every index maps to itself. */
static inline pbl__resize_geom pbl__resize_geom_of(const pbl_shape *x, const pbl_shape *y, int64_t mode, int64_t coord,
                                                   int64_t nearest, const int64_t *scale_bits, int32_t n_scales)
{
    pbl__resize_geom g;
    g.r = x->ndim;
    g.mode = (int)mode;
    g.coord = (int)coord;
    g.nearest = (int)nearest;
    g.outer = 0;
    for (int32_t d = 0; d < g.r; d++) {
        g.in[d] = x->dim[d];
        g.out[d] = y->dim[d];
        if (n_scales == g.r) {
            uint64_t u = (uint64_t)scale_bits[d];
            memcpy(&g.scale[d], &u, sizeof g.scale[d]);
        } else {
            g.scale[d] = x->dim[d] > 0 ? (double)y->dim[d] / (double)x->dim[d] : 1.0;
        }
    }
    for (int32_t d = 0; d < g.r && g.outer == d; d++) {
        int same = g.in[d] == g.out[d];
        for (int64_t o = 0; same && o < g.out[d]; o++) {
            int64_t i0, i1;
            double  w1;
            pbl__resize_coord(&g, d, o, &i0, &i1, &w1);
            same = i0 == o && w1 == 0.0;
        }
        g.outer += same;
    }
    return g;
}

#endif
