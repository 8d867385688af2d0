/*
 * The geometry kernels walk, worked out once from a node's metas and attributes and shared by
 * the shape rules, the CPU kernels (ops/cpu/) and the CUDA kernels (ops/cuda/): sliding
 * windows (conv, pooling), concat's blocks, and batched products' strides.
 *
 * Sliding windows over the two spatial dims of NCHW tensors, shared by the shape rules of
 * ops/conv.c and ops/pool.c. Attributes follow ONNX: `stride` and `dilation` list 1 or 2 ints
 * (one value for both dims, or [h, w]; empty: 1), `pad` lists 1, 2 or 4 ints (all sides,
 * [h, w] for both ends, or [top, left, bottom, right]; empty: 0), `kernel` 1 or 2 ints.
 * An output dim is floor((in + pad_begin + pad_end − dilation·(kernel − 1) − 1) / stride) + 1.
 */
#ifndef PBL_OPS_GEOMETRY_H
#define PBL_OPS_GEOMETRY_H

#include "graph/ir/op.h"

typedef struct pbl__window {
    int64_t kernel[2];    /* kh, kw */
    int64_t stride[2];
    int64_t dilation[2];
    int64_t pad[4];       /* top, left, bottom, right */
} pbl__window;

/* The largest kernel, stride, dilation or pad: far beyond any tensor's dims (2^40 elements at
 * most), and small enough that dilation·(kernel − 1) and in + pads cannot overflow int64. */
#define PBL__WINDOW_MAX INT64_C(2147483647)

/* a->ints as 2 ints (1 value: both), each in lo..PBL__WINDOW_MAX; empty gives `dflt`. Fails
 * with PBL_ERR_ATTR. */
static inline pbl_status pbl__window_pair(pbl__infer_ctx *c, const pbl__attr_val *a, const char *what,
                                          int64_t dflt, int64_t lo, int64_t out[2])
{
    if (a->n_ints > 2)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "%s lists %d ints; give 1 (both dims) or 2 ([h, w])", what,
                               (int)a->n_ints);
    out[0] = a->n_ints == 0 ? dflt : a->ints[0];
    out[1] = a->n_ints == 0 ? dflt : a->ints[a->n_ints - 1];
    for (int k = 0; k < 2; k++)
        if (out[k] < lo || out[k] > PBL__WINDOW_MAX)
            return pbl__infer_fail(c, PBL_ERR_ATTR, "%s is %lld; it must be %lld..%lld", what,
                                   (long long)out[k], (long long)lo, (long long)PBL__WINDOW_MAX);
    return PBL_OK;
}

/* Fills w from the attribute slots; kernel NULL leaves w->kernel for the caller (a weight's
 * shape gives it). dilation NULL means 1. */
static inline pbl_status pbl__window_parse(pbl__infer_ctx *c, const pbl__attr_val *kernel,
                                           const pbl__attr_val *stride, const pbl__attr_val *pad,
                                           const pbl__attr_val *dilation, pbl__window *w)
{
    pbl_status s = PBL_OK;
    w->kernel[0] = w->kernel[1] = 1;
    w->dilation[0] = w->dilation[1] = 1;
    if (kernel) {
        if (kernel->n_ints == 0)
            return pbl__infer_fail(c, PBL_ERR_ATTR, "kernel is required (1 or 2 ints)");
        s = pbl__window_pair(c, kernel, "kernel", 1, 1, w->kernel);
    }
    if (s == PBL_OK)
        s = pbl__window_pair(c, stride, "stride", 1, 1, w->stride);
    if (s == PBL_OK && dilation)
        s = pbl__window_pair(c, dilation, "dilation", 1, 1, w->dilation);
    if (s != PBL_OK)
        return s;
    if (pad->n_ints == 3 || pad->n_ints > 4)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "pad lists %d ints; give 1, 2 ([h, w]) or 4 "
                               "([top, left, bottom, right])", (int)pad->n_ints);
    for (int k = 0; k < 4; k++) {
        int64_t p = pad->n_ints == 0 ? 0 : pad->n_ints == 1 ? pad->ints[0]
                  : pad->n_ints == 2 ? pad->ints[k % 2] : pad->ints[k];
        if (p < 0 || p > PBL__WINDOW_MAX)
            return pbl__infer_fail(c, PBL_ERR_ATTR, "pad is %lld; it must be 0..%lld", (long long)p,
                                   (long long)PBL__WINDOW_MAX);
        w->pad[k] = p;
    }
    return PBL_OK;
}

/* The window of already-validated attributes (what a kernel reads: the node's shape rule
 * checked them when it was built). kernel NULL leaves w->kernel at 1 for the caller. */
static inline void pbl__window_of(const pbl__attr_val *kernel, const pbl__attr_val *stride,
                                  const pbl__attr_val *pad, const pbl__attr_val *dilation, pbl__window *w)
{
    const pbl__attr_val *pairs[3] = { kernel, stride, dilation };
    int64_t *dst[3] = { w->kernel, w->stride, w->dilation };
    for (int k = 0; k < 3; k++) {
        const pbl__attr_val *a = pairs[k];
        dst[k][0] = a && a->n_ints ? a->ints[0] : 1;
        dst[k][1] = a && a->n_ints ? a->ints[a->n_ints - 1] : 1;
    }
    for (int k = 0; k < 4; k++)
        w->pad[k] = pad->n_ints == 0 ? 0 : pad->n_ints == 1 ? pad->ints[0]
                  : pad->n_ints == 2 ? pad->ints[k % 2] : pad->ints[k];
}

/* The spatial output dims of window w over x (rank 4, NCHW) into oh/ow; 0 when the padded
 * input is smaller than the dilated kernel. */
static inline void pbl__window_out(const pbl__window *w, const pbl_shape *x, int64_t out[2])
{
    for (int k = 0; k < 2; k++) {
        int64_t span = x->dim[2 + k] + w->pad[k] + w->pad[k + 2] - w->dilation[k] * (w->kernel[k] - 1) - 1;
        out[k] = span < 0 ? 0 : span / w->stride[k] + 1;
    }
}

/* concat along `axis`: y: [outer, Σ d_i, inner] is, per outer index, one row of `row` bytes
 * made of each x_i: [outer, d_i, inner]'s block of d_i·inner elements, in input order. */
typedef struct pbl__concat_geom {
    int64_t axis, outer, inner;
    size_t  esize, row; /* bytes of one element, of one row of y */
} pbl__concat_geom;

static inline pbl__concat_geom pbl__concat_geom_of(const pbl__kargs *a)
{
    const pbl_shape *ys = &a->out_meta[0].shape;
    pbl__concat_geom g;
    g.axis = a->attr[0].i < 0 ? a->attr[0].i + ys->ndim : a->attr[0].i;
    g.esize = pbl_dtype_size(a->out_meta[0].dtype);
    g.outer = 1;
    g.inner = 1;
    for (int32_t d = 0; d < ys->ndim; d++) {
        if (d < g.axis)
            g.outer *= ys->dim[d];
        else if (d > g.axis)
            g.inner *= ys->dim[d];
    }
    g.row = (size_t)(ys->dim[g.axis] * g.inner) * g.esize;
    return g;
}

/* Bytes of input i's block in each row of y. */
static inline size_t pbl__concat_block(const pbl__concat_geom *g, const pbl__kargs *a, int32_t i)
{
    return (size_t)(a->in_meta[i].shape.dim[g->axis] * g->inner) * g->esize;
}

/* matmul: c [.., m, n] = op(a) [.., m, k] · op(b) [.., k, n] (op: transposed when ta / tb,
 * attributes 0 and 1), over `batch` products of the leading dims; a and b row-major with
 * leading dims lda, ldb and a_stride, b_stride elements between one product's operands and
 * the next (c's: m·n). */
typedef struct pbl__matmul_geom {
    int     ta, tb, m, n, k, lda, ldb;
    int64_t batch, a_stride, b_stride;
} pbl__matmul_geom;

static inline pbl__matmul_geom pbl__matmul_geom_of(const pbl__kargs *a)
{
    const pbl_shape *sa = &a->in_meta[0].shape, *sb = &a->in_meta[1].shape, *sc = &a->out_meta[0].shape;
    int r = sa->ndim;
    pbl__matmul_geom g;
    g.ta = (int)a->attr[0].i;
    g.tb = (int)a->attr[1].i;
    g.m = (int)sc->dim[r - 2];
    g.n = (int)sc->dim[r - 1];
    g.k = (int)(g.ta ? sa->dim[r - 2] : sa->dim[r - 1]);
    g.lda = (int)sa->dim[r - 1];
    g.ldb = (int)sb->dim[r - 1];
    g.batch = 1;
    for (int i = 0; i < r - 2; i++)
        g.batch *= sc->dim[i];
    g.a_stride = sa->dim[r - 2] * sa->dim[r - 1];
    g.b_stride = sb->dim[r - 2] * sb->dim[r - 1];
    return g;
}

#endif
