/*
 * CUDA kernels: sum, mean, sum_to (reductions over the broadcast dims of a big shape onto a
 * small one, ops/shared/broadcast.h) and broadcast_to.
 *
 * A reduction runs one warp-wide slice of a block per 32 small elements: a small element's
 * coordinates on the kept dims give a base offset in the big tensor, each of the block's 8
 * warps adds every 8th big element over the reduced dims (warp w: reduced indices w, w + 8,
 * ...), and the 8 partial sums are added in warp order. The order is fixed, so the result is
 * deterministic (not the CPU's row-by-row order: within rounding of it). For a bias gradient
 * [n, out] -> [out] a warp reads 32 neighbouring columns of one row per load (coalesced), and
 * the 8 warps walk the rows together. (One thread per small element, adding all n rows alone,
 * was latency-bound: on an H200 the three bias gradients of a 784-512-512-10 MLP at batch
 * 1024 took most of its 1.27 ms training step.) A reduction to one element is summed by one
 * block tree.
 */
#include "ops/cuda/common.cuh"

extern "C" {
#include "ops/shared/reduce.h"
}

struct walk {
    int32_t n_kept, n_red;
    int64_t kept[PBL_MAX_DIMS], kept_stride[PBL_MAX_DIMS]; /* sizes and big strides, outer first */
    int64_t red[PBL_MAX_DIMS], red_stride[PBL_MAX_DIMS];
    int64_t red_numel;
};

static walk make_walk(const pbl_shape *big, const pbl_shape *small)
{
    pbl__bcast bc;
    pbl__bcast_init(&bc, big, small);
    walk w = {};
    w.red_numel = 1;
    int64_t st = 1, bst[PBL_MAX_DIMS];
    for (int32_t i = big->ndim - 1; i >= 0; i--) {
        bst[i] = st;
        st *= big->dim[i];
    }
    for (int32_t i = 0; i < big->ndim; i++) {
        if (bc.stride[i] != 0 || big->dim[i] == 1) {
            w.kept[w.n_kept] = big->dim[i];
            w.kept_stride[w.n_kept++] = bst[i];
        } else {
            w.red[w.n_red] = big->dim[i];
            w.red_stride[w.n_red++] = bst[i];
            w.red_numel *= big->dim[i];
        }
    }
    return w;
}

/* The offset of element idx (< the product of the n sizes) of a walk: the outermost dim needs
 * no remainder (idx is below its size by then), so a walk of one dim divides nothing. */
__device__ static int64_t walk_offset(const int64_t *size, const int64_t *stride, int32_t n, int64_t idx)
{
    int64_t off = 0;
    for (int32_t d = n - 1; d > 0; d--) {
        off += (idx % size[d]) * stride[d];
        idx /= size[d];
    }
    return n > 0 ? off + idx * stride[0] : off;
}

/* y[small] = scale · Σ x[big] over the reduced dims; block b holds small elements
 * [32b, 32b + 32), lane = threadIdx.x % 32 its element, warp = threadIdx.x / 32 its share of
 * the reduced indices (see the top of the file) */
#define SUM_LANES 32
#define SUM_WARPS (PBL__THREADS / SUM_LANES)
__global__ static void sum_k(float *y, const float *x, int64_t small_numel, walk w, float scale)
{
    __shared__ float part[SUM_WARPS][SUM_LANES];
    int lane = (int)threadIdx.x % SUM_LANES, warp = (int)threadIdx.x / SUM_LANES;
    int64_t j = (int64_t)blockIdx.x * SUM_LANES + lane;
    float acc = 0.0f;
    if (j < small_numel) {
        int64_t base = walk_offset(w.kept, w.kept_stride, w.n_kept, j);
        for (int64_t r = warp; r < w.red_numel; r += SUM_WARPS)
            acc += x[base + walk_offset(w.red, w.red_stride, w.n_red, r)];
    }
    part[warp][lane] = acc;
    __syncthreads();
    if (warp == 0 && j < small_numel) {
        for (int k = 1; k < SUM_WARPS; k++)
            acc += part[k][lane];
        y[j] = acc * scale;
    }
}

#define ALL_THREADS 256
__global__ static void sum_all_k(float *y, const float *x, int64_t n, float scale)
{
    __shared__ float part[ALL_THREADS];
    float acc = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += ALL_THREADS)
        acc += x[i];
    acc = pbl__block_sum<ALL_THREADS>(acc, part);
    if (threadIdx.x == 0)
        y[0] = acc * scale;
}

static pbl_status sum_into(const pbl__cuda_launch *l, const pbl__kargs *a, const pbl_shape *big,
                           const pbl_shape *small, int is_mean)
{
    pbl_status s = PBL_OK;
    int64_t n = pbl_shape_numel(big), m = pbl_shape_numel(small);
    /* the CPU scales the sum by keep/total in double, rounded to float */
    float scale = is_mean ? (float)((double)m / (double)n) : 1.0f;
    if (m == 1) {
        PBL__LAUNCH(sum_all_k, 1, ALL_THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0), n, scale);
    } else {
        walk w = make_walk(big, small);
        int64_t blocks = m > 0 ? (m + SUM_LANES - 1) / SUM_LANES : 1; /* below 2^31 for any m < 2^36 */
        PBL__LAUNCH(sum_k, (unsigned)blocks, PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0), m, w, scale);
    }
    PBL__LAUNCHED();
done:
    return s;
}

static pbl_status reduce(const pbl__cuda_launch *l, const pbl__kargs *a, int is_mean)
{
    pbl_shape keep;
    char err[64];
    pbl__reduce_keep_shape(&a->in_meta[0].shape, a->attr, &keep, err, sizeof err);
    return sum_into(l, a, &a->in_meta[0].shape, &keep, is_mean);
}

extern "C" pbl_status pbl__cuda_sum(const pbl__cuda_launch *l, const pbl__kargs *a) { return reduce(l, a, 0); }
extern "C" pbl_status pbl__cuda_mean(const pbl__cuda_launch *l, const pbl__kargs *a) { return reduce(l, a, 1); }

extern "C" pbl_status pbl__cuda_sum_to(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    return sum_into(l, a, &a->in_meta[0].shape, &a->out_meta[0].shape, 0);
}

__global__ static void broadcast_k(float *y, const float *x, int64_t n, pbl__dbcast bc)
{
    PBL__GRID_LOOP(i, n)
        y[i] = x[pbl__dbcast_offset(bc, i)];
}

extern "C" pbl_status pbl__cuda_broadcast_to(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    int64_t n = PBL__NUMEL(a->out_meta[0]);
    pbl__dbcast bc = pbl__dbcast_make(&a->out_meta[0].shape, &a->in_meta[0].shape);
    PBL__LAUNCH(broadcast_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0), n, bc);
    PBL__LAUNCHED();
done:
    return s;
}

/* ---- reduce / reduce_grad / arg_reduce: one thread per group (per element of the reduced
 * shape), reading its group in increasing offset order in double, as the CPU does. */

__device__ static float red_fwd(const float *x, const walk &w, int64_t mode)
{
#define AT(r) x[walk_offset(w.red, w.red_stride, w.n_red, (r))]
    double acc;
    if (mode == PBL__RED_MAX || mode == PBL__RED_MIN || mode == PBL__RED_LOG_SUM_EXP) {
        float m = AT(0);
        for (int64_t r = 1; r < w.red_numel; r++) {
            float v = AT(r);
            if (mode == PBL__RED_MIN ? v < m : v > m)
                m = v;
        }
        if (mode != PBL__RED_LOG_SUM_EXP || isinf(m))
            return m;
        acc = 0;
        for (int64_t r = 0; r < w.red_numel; r++)
            acc += exp((double)AT(r) - m);
        return (float)(m + log(acc));
    }
    acc = mode == PBL__RED_PROD ? 1.0 : 0.0;
    for (int64_t r = 0; r < w.red_numel; r++) {
        double v = AT(r);
        if (mode == PBL__RED_PROD)
            acc *= v;
        else if (mode == PBL__RED_L1)
            acc += fabs(v);
        else
            acc += mode == PBL__RED_LOG_SUM ? v : v * v;
    }
    if (mode == PBL__RED_L2)
        acc = sqrt(acc);
    else if (mode == PBL__RED_LOG_SUM)
        acc = log(acc);
    return (float)acc;
}

__global__ static void reduce_k(float *y, const float *x, int64_t groups, walk w, int64_t mode)
{
    PBL__GRID_LOOP(g, groups)
        y[g] = red_fwd(x + walk_offset(w.kept, w.kept_stride, w.n_kept, g), w, mode);
}

__global__ static void reduce_grad_k(float *dxp, const float *xp, const float *yp, const float *dyp, int64_t groups,
                                     walk w, int64_t mode)
{
    PBL__GRID_LOOP(g, groups) {
        int64_t base = walk_offset(w.kept, w.kept_stride, w.n_kept, g);
        const float *x = xp + base;
        float *dx = dxp + base;
        double y = yp[g], d = dyp[g];
#define DX(r) dx[walk_offset(w.red, w.red_stride, w.n_red, (r))]
        if (mode == PBL__RED_MAX || mode == PBL__RED_MIN) {
            int64_t ties = 0;
            for (int64_t r = 0; r < w.red_numel; r++)
                ties += AT(r) == (float)y;
            for (int64_t r = 0; r < w.red_numel; r++)
                DX(r) = AT(r) == (float)y ? (float)(d / (double)ties) : 0.0f;
        } else if (mode == PBL__RED_PROD) {
            int64_t zeros = 0;
            double nz = 1;
            for (int64_t r = 0; r < w.red_numel; r++) {
                float v = AT(r);
                if (v == 0.0f)
                    zeros++;
                else
                    nz *= v;
            }
            for (int64_t r = 0; r < w.red_numel; r++) {
                float v = AT(r);
                double others = zeros == 0 ? nz / v : zeros == 1 && v == 0.0f ? nz : 0.0;
                DX(r) = (float)(d * others);
            }
        } else {
            for (int64_t r = 0; r < w.red_numel; r++) {
                double v = AT(r), g1;
                if (mode == PBL__RED_L1)
                    g1 = v > 0 ? 1 : v < 0 ? -1 : 0;
                else if (mode == PBL__RED_L2)
                    g1 = y > 0 ? v / y : 0;
                else if (mode == PBL__RED_LOG_SUM_EXP)
                    g1 = exp(v - y);
                else if (mode == PBL__RED_LOG_SUM)
                    g1 = exp(-y);
                else
                    g1 = 2 * v;
                DX(r) = (float)(d * g1);
            }
        }
#undef DX
    }
#undef AT
}

static walk mode_walk(const pbl__kargs *a)
{
    pbl_shape keep;
    char err[64];
    pbl__reduce_keep_shape(&a->in_meta[0].shape, a->attr, &keep, err, sizeof err);
    return make_walk(&a->in_meta[0].shape, &keep);
}

extern "C" pbl_status pbl__cuda_reduce(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    walk w = mode_walk(a);
    int64_t groups = PBL__NUMEL(a->out_meta[0]);
    PBL__LAUNCH(reduce_k, pbl__blocks(groups), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0), groups, w,
                                                                        a->attr[PBL__RED_A_MODE].i);
    PBL__LAUNCHED();
done:
    return s;
}

extern "C" pbl_status pbl__cuda_reduce_grad(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    walk w = mode_walk(a);
    int64_t groups = PBL__NUMEL(a->in_meta[1]);
    PBL__LAUNCH(reduce_grad_k, pbl__blocks(groups), PBL__THREADS, 0, l->stream)(
        PBL__OUT(a, 0), PBL__IN(a, 0), PBL__IN(a, 1), PBL__IN(a, 2), groups, w, a->attr[PBL__RED_A_MODE].i);
    PBL__LAUNCHED();
done:
    return s;
}

__global__ static void arg_reduce_k(int32_t *y, const float *x, int64_t outer, int64_t n, int64_t inner, int is_min,
                                    int last)
{
    PBL__GRID_LOOP(j, outer * inner) {
        const float *xr = x + (j / inner) * n * inner + j % inner;
        int64_t best = 0;
        for (int64_t k = 1; k < n; k++) {
            float v = xr[k * inner], b = xr[best * inner];
            if ((is_min ? v < b : v > b) || (last && v == b))
                best = k;
        }
        y[j] = (int32_t)best;
    }
}

extern "C" pbl_status pbl__cuda_arg_reduce(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    pbl__axis_split sp = pbl__arg_reduce_split(&a->in_meta[0].shape, a->attr);
    PBL__LAUNCH(arg_reduce_k, pbl__blocks(sp.outer * sp.inner), PBL__THREADS, 0, l->stream)(
        (int32_t *)a->out[0], PBL__IN(a, 0), sp.outer, sp.n, sp.inner, (int)a->attr[PBL__ARG_A_MODE].i,
        (int)a->attr[PBL__ARG_A_LAST].i);
    PBL__LAUNCHED();
done:
    return s;
}
