/*
 * The geometry kernels walk, worked out once from a node's metas and attributes and shared by
 * the shape rules, the CPU kernels (ops/cpu/) and the CUDA kernels (ops/cuda/): sliding
 * windows (conv, pooling), concat's blocks, and batched products' strides.
 *
 * Sliding windows over the 1 to 3 spatial dims of N, C, spatial... tensors (NCW, NCHW, NCDHW),
 * shared by the shape rules of ops/conv.c and ops/pool.c. A window always has three spatial
 * slots (d, h, w): a tensor with fewer spatial dims fills the last ones, and the leading slots
 * are unit dims (kernel 1, stride 1, no pad), so one 3-D kernel serves 1-D and 2-D at the
 * cost of loops of one iteration. Attributes follow ONNX: `stride`, `dilation` and `kernel`
 * list 1 int (every spatial dim) or one per spatial dim (empty: 1); `pad` lists 1 int (all
 * sides), one per spatial dim (both ends), or two per spatial dim (all begins, then all ends:
 * ONNX's pads; for 2-D [top, left, bottom, right]); empty: 0. An output dim is
 * floor((in + pad_begin + pad_end − dilation·(kernel − 1) − 1) / stride) + 1, or with `ceil`
 * (pooling's ceil_mode) the ceiling, less one when that last window would start past the
 * input and its begin padding (PyTorch's and ONNX's rule).
 */
#ifndef PBL_OPS_GEOMETRY_H
#define PBL_OPS_GEOMETRY_H

#include "graph/ir/op.h"

typedef struct pbl__window {
    int64_t kernel[3];    /* kd, kh, kw */
    int64_t stride[3];
    int64_t dilation[3];
    int64_t pad[6];       /* begin d, h, w; end d, h, w */
    int     ceil;         /* output dims round up (pooling's ceil_mode) */
} pbl__window;

/* The largest kernel, stride, dilation or pad: far beyond any tensor's dims (2^40 elements at
 * most), and small enough that dilation·(kernel − 1) and in + pads cannot overflow int64. */
#define PBL__WINDOW_MAX INT64_C(2147483647)

/* The number of spatial dims of a tensor of rank r (N, C first), 1..3; 0 when r is not 3..5. */
static inline int pbl__window_nsp(int32_t r) { return r >= 3 && r <= 5 ? (int)r - 2 : 0; }

/* x's spatial dims in the window's three slots (leading unit dims for 1-D and 2-D). */
static inline void pbl__window_in(const pbl_shape *x, int64_t in[3])
{
    int nsp = pbl__window_nsp(x->ndim);
    for (int k = 0; k < 3; k++)
        in[k] = k >= 3 - nsp ? x->dim[2 + k - (3 - nsp)] : 1;
}

/* Value k of a list of one int per spatial dim (1 int: all of them), empty giving dflt. */
static inline int64_t pbl__window_at(const pbl__attr_val *a, int k, int64_t dflt)
{
    if (!a || a->n_ints == 0)
        return dflt;
    return a->n_ints == 1 ? a->ints[0] : a->ints[k < a->n_ints ? k : a->n_ints - 1];
}

/* Pad k of 2·nsp (begins, then ends) from list a of 1, nsp or 2·nsp ints. */
static inline int64_t pbl__window_pad_at(const pbl__attr_val *a, int nsp, int k)
{
    if (!a || a->n_ints == 0)
        return 0;
    if (a->n_ints == 2 * nsp)
        return a->ints[k];
    if (a->n_ints == nsp)
        return a->ints[k % nsp];
    return a->ints[0];
}

/* The window of already-validated attributes (what a kernel reads: the node's shape rule
 * checked them when it was built) for nsp spatial dims. kernel NULL leaves w->kernel at 1 for
 * the caller (pbl__window_kernel_of sets it from a weight's shape). */
static inline void pbl__window_of(int nsp, const pbl__attr_val *kernel, const pbl__attr_val *stride,
                                  const pbl__attr_val *pad, const pbl__attr_val *dilation, pbl__window *w)
{
    for (int k = 0; k < 3; k++) {
        int i = k - (3 - nsp); /* the attribute's index for slot k; < 0: a unit slot */
        w->kernel[k] = i < 0 ? 1 : pbl__window_at(kernel, i, 1);
        w->stride[k] = i < 0 ? 1 : pbl__window_at(stride, i, 1);
        w->dilation[k] = i < 0 ? 1 : pbl__window_at(dilation, i, 1);
        w->pad[k] = i < 0 ? 0 : pbl__window_pad_at(pad, nsp, i);
        w->pad[k + 3] = i < 0 ? 0 : pbl__window_pad_at(pad, nsp, i + nsp);
    }
    w->ceil = 0;
}

/* The kernel taken from weight shape ws ([Cout, Cin/groups, k...]). */
static inline void pbl__window_kernel_of(pbl__window *w, const pbl_shape *ws)
{
    int nsp = pbl__window_nsp(ws->ndim);
    for (int k = 0; k < 3; k++)
        w->kernel[k] = k >= 3 - nsp ? ws->dim[2 + k - (3 - nsp)] : 1;
}

/* Fails unless list a has 0, 1 or nsp ints (pads: also 2·nsp), each in lo..PBL__WINDOW_MAX. */
static inline pbl_status pbl__window_check(pbl__infer_ctx *c, const pbl__attr_val *a, const char *what, int nsp,
                                           int is_pad, int64_t lo)
{
    int32_t n = a->n_ints;
    if (!(n <= 1 || n == nsp || (is_pad && n == 2 * nsp))) {
        if (is_pad)
            return pbl__infer_fail(c, PBL_ERR_ATTR, "pad lists %d ints; for %d spatial dims give 1, %d (both ends) or "
                                   "%d (begins, then ends)", (int)n, nsp, nsp, 2 * nsp);
        return pbl__infer_fail(c, PBL_ERR_ATTR, "%s lists %d ints; for %d spatial dims give 1 or %d", what, (int)n, nsp,
                               nsp);
    }
    for (int32_t k = 0; k < n; k++)
        if (a->ints[k] < lo || a->ints[k] > PBL__WINDOW_MAX)
            return pbl__infer_fail(c, PBL_ERR_ATTR, "%s is %lld; it must be %lld..%lld", what, (long long)a->ints[k],
                                   (long long)lo, (long long)PBL__WINDOW_MAX);
    return PBL_OK;
}

/* Checks the attribute slots for nsp spatial dims and fills w; kernel NULL leaves w->kernel at
 * 1 for the caller (a weight's shape gives it). dilation NULL means 1. Fails with
 * PBL_ERR_ATTR. */
static inline pbl_status pbl__window_parse(pbl__infer_ctx *c, int nsp, const pbl__attr_val *kernel,
                                           const pbl__attr_val *stride, const pbl__attr_val *pad,
                                           const pbl__attr_val *dilation, pbl__window *w)
{
    pbl_status s = PBL_OK;
    if (kernel && kernel->n_ints == 0)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "kernel is required (1 int or one per spatial dim)");
    if (kernel)
        s = pbl__window_check(c, kernel, "kernel", nsp, 0, 1);
    if (s == PBL_OK)
        s = pbl__window_check(c, stride, "stride", nsp, 0, 1);
    if (s == PBL_OK && dilation)
        s = pbl__window_check(c, dilation, "dilation", nsp, 0, 1);
    if (s == PBL_OK)
        s = pbl__window_check(c, pad, "pad", nsp, 1, 0);
    if (s == PBL_OK)
        pbl__window_of(nsp, kernel, stride, pad, dilation, w);
    return s;
}

/* The spatial output dims of window w over x (rank 3..5) into out's three slots; 0 when the
 * padded input is smaller than the dilated kernel. */
static inline void pbl__window_out(const pbl__window *w, const pbl_shape *x, int64_t out[3])
{
    int64_t in[3];
    pbl__window_in(x, in);
    for (int k = 0; k < 3; k++) {
        int64_t span = in[k] + w->pad[k] + w->pad[k + 3] - w->dilation[k] * (w->kernel[k] - 1) - 1;
        if (span < 0) {
            out[k] = 0;
            continue;
        }
        out[k] = (w->ceil ? (span + w->stride[k] - 1) / w->stride[k] : span / w->stride[k]) + 1;
        if (w->ceil && (out[k] - 1) * w->stride[k] >= in[k] + w->pad[k])
            out[k]--;
    }
}

/* y's shape: x's N and `channels`, then the output dims of window w over x. */
static inline pbl_shape pbl__window_shape(const pbl__window *w, const pbl_shape *x, int64_t channels)
{
    int64_t o[3];
    pbl__window_out(w, x, o);
    pbl_shape y = *x;
    y.dim[1] = channels;
    int nsp = pbl__window_nsp(x->ndim);
    for (int k = 3 - nsp; k < 3; k++)
        y.dim[2 + k - (3 - nsp)] = o[k];
    return y;
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
