/*
 * CUDA kernels: batch_norm, layer_norm and their gradients, the formulas of ops/cpu/norm.c
 * (training form: biased variance of the set, inv_std = 1/√(var + eps), mean and inv_std
 * saved as outputs 1 and 2).
 *
 * One block per set (a channel of batch_norm, a row of layer_norm; grid-stride over sets): its
 * threads stride over the set's elements and sum in double, then a __shared__ tree adds the
 * partial sums (deterministic: no atomics, the same tree every run). The CPU sums the same
 * doubles sequentially, so the statistics agree to the last double bits, which the rounding
 * to f32 hides but for rare ties. The element-wise parts are the CPU's f32 expressions.
 * layer_norm's dgamma/dbeta are column sums down the rows, in double: 8 warps split the rows
 * of 32 columns and add their partial sums in a fixed order, so they match the CPU's
 * sequential double sums after the rounding to f32 but for rare ties.
 *
 * One block per channel leaves SMs idle when C is small and sets are big (ResNet's early
 * layers: C = 64, 400k elements per channel at batch 32); a two-level reduction would fill
 * them.
 */
#include "ops/cuda/common.cuh"

#define NORM_THREADS 256

/* The sets: set c starts at c·step and holds `groups` runs of `len` floats, gstride apart.
 * batch_norm over x[N, C, S]: C sets, step S, N groups, gstride C·S, len S, the scale per set;
 * layer_norm over rows of D: rows sets, step D, one group of len D, the scale per position. */
struct nset {
    int64_t n, step, groups, gstride, len;
    int     per_set;
};

__device__ static inline int64_t at(const nset &s, int64_t c, int64_t k)
{
    return c * s.step + (k / s.len) * s.gstride + k % s.len;
}

/* run_mean, run_var, training: batch_norm's optional running statistics and switch (NULL:
 * none); the switch is read here, uniformly for the block, so a captured graph obeys it. */
__global__ static void norm_k(float *y, float *mean, float *inv_std, const float *x, const float *g, const float *b,
                              nset s, double eps, const float *run_mean, const float *run_var, const float *training)
{
    __shared__ double part[NORM_THREADS];
    int64_t m = s.groups * s.len;
    const bool eval = training && *training == 0.0f;
    for (int64_t c = blockIdx.x; c < s.n; c += gridDim.x) {
        if (eval) {
            float mf = run_mean[c], is = (float)(1.0 / sqrt((double)run_var[c] + eps));
            if (threadIdx.x == 0) {
                mean[c] = mf;
                inv_std[c] = is;
            }
            for (int64_t k = threadIdx.x; k < m; k += NORM_THREADS) {
                int64_t o = at(s, c, k), p = s.per_set ? c : k % s.len;
                y[o] = ((x[o] - mf) * is) * g[p] + b[p];
            }
            continue;
        }
        double acc = 0.0;
        for (int64_t k = threadIdx.x; k < m; k += NORM_THREADS)
            acc += (double)x[at(s, c, k)];
        double mu = pbl__block_sum<NORM_THREADS>(acc, part) / (double)m;
        acc = 0.0;
        for (int64_t k = threadIdx.x; k < m; k += NORM_THREADS) {
            double d = (double)x[at(s, c, k)] - mu;
            acc += d * d;
        }
        double var = pbl__block_sum<NORM_THREADS>(acc, part) / (double)m;
        float mf = (float)mu, is = (float)(1.0 / sqrt(var + eps));
        if (threadIdx.x == 0) {
            mean[c] = mf;
            inv_std[c] = is;
        }
        for (int64_t k = threadIdx.x; k < m; k += NORM_THREADS) {
            int64_t o = at(s, c, k), p = s.per_set ? c : k % s.len;
            y[o] = ((x[o] - mf) * is) * g[p] + b[p];
        }
    }
}

/* dx of each set; batch_norm's dscale/dbias (per set) too. */
__global__ static void norm_grad_k(float *dx, float *dg, float *db, const float *dy, const float *x, const float *g,
                                   const float *mean, const float *inv_std, nset s, const float *training)
{
    __shared__ double part[NORM_THREADS];
    int64_t m = s.groups * s.len;
    const bool eval = training && *training == 0.0f; /* constant statistics: k1 = k2 = 0 */
    for (int64_t c = blockIdx.x; c < s.n; c += gridDim.x) {
        float mu = mean[c], is = inv_std[c];
        double a1 = 0.0, a2 = 0.0;
        for (int64_t k = threadIdx.x; k < m; k += NORM_THREADS) {
            int64_t o = at(s, c, k);
            float xh = (x[o] - mu) * is, gv = s.per_set ? dy[o] : dy[o] * g[k % s.len];
            a1 += (double)gv;
            a2 += (double)gv * (double)xh;
        }
        a1 = pbl__block_sum<NORM_THREADS>(a1, part);
        a2 = pbl__block_sum<NORM_THREADS>(a2, part);
        if (s.per_set && threadIdx.x == 0) {
            db[c] = (float)a1;
            dg[c] = (float)a2;
        }
        float k1 = eval ? 0.0f : (float)(a1 / (double)m), k2 = eval ? 0.0f : (float)(a2 / (double)m);
        float sc = s.per_set ? g[c] * is : is;
        for (int64_t k = threadIdx.x; k < m; k += NORM_THREADS) {
            int64_t o = at(s, c, k);
            float xh = (x[o] - mu) * is, gv = s.per_set ? dy[o] : dy[o] * g[k % s.len];
            dx[o] = sc * ((gv - k1) - xh * k2);
        }
    }
}

/* layer_norm's dgamma[j] = Σ_r dy·xhat, dbeta[j] = Σ_r dy: block b holds columns
 * [32b, 32b + 32), lane = threadIdx.x % 32 its column (a warp reads 32 neighbouring floats of
 * a row), warp w of 8 the rows w, w + 8, ...; the 8 partial sums (double) are added in warp
 * order. (One thread per column walking every row alone left all but a few multiprocessors
 * idle: a column sum over batch × sequence rows is long.) */
#define LN_LANES 32
#define LN_WARPS (PBL__THREADS / LN_LANES)
__global__ static void ln_param_grad_k(float *dg, float *db, const float *dy, const float *x, const float *mean,
                                       const float *inv_std, int64_t rows, int64_t d)
{
    __shared__ double part_g[LN_WARPS][LN_LANES], part_b[LN_WARPS][LN_LANES];
    int lane = (int)threadIdx.x % LN_LANES, warp = (int)threadIdx.x / LN_LANES;
    int64_t j = (int64_t)blockIdx.x * LN_LANES + lane;
    double sg = 0.0, sb = 0.0;
    if (j < d)
        for (int64_t r = warp; r < rows; r += LN_WARPS) {
            int64_t o = r * d + j;
            float xh = (x[o] - mean[r]) * inv_std[r];
            sg += (double)dy[o] * (double)xh;
            sb += (double)dy[o];
        }
    part_g[warp][lane] = sg;
    part_b[warp][lane] = sb;
    __syncthreads();
    if (warp == 0 && j < d) {
        for (int k = 1; k < LN_WARPS; k++) {
            sg += part_g[k][lane];
            sb += part_b[k][lane];
        }
        dg[j] = (float)sg;
        db[j] = (float)sb;
    }
}

static unsigned set_blocks(int64_t n) { return (unsigned)(n < 65535 * 16 ? (n < 1 ? 1 : n) : 65535 * 16); }

static nset bn_sets(const pbl_shape *x)
{
    int64_t S = 1;
    for (int32_t i = 2; i < x->ndim; i++)
        S *= x->dim[i];
    nset s = { x->dim[1], S, x->dim[0], x->dim[1] * S, S, 1 };
    return s;
}

static nset ln_sets(const pbl_shape *x)
{
    int64_t d = x->dim[x->ndim - 1];
    nset s = { pbl_shape_numel(x) / d, d, 1, 0, d, 0 };
    return s;
}

static pbl_status forward(const pbl__cuda_launch *l, const pbl__kargs *a, nset sets)
{
    pbl_status s = PBL_OK;
    PBL__LAUNCH(norm_k, set_blocks(sets.n), NORM_THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__OUT(a, 1), PBL__OUT(a, 2),
                                                                       PBL__IN(a, 0), PBL__IN(a, 1), PBL__IN(a, 2),
                                                                       sets, a->attr[0].f,
                                                                       a->n_in > 5 ? PBL__IN(a, 3) : NULL,
                                                                       a->n_in > 5 ? PBL__IN(a, 4) : NULL,
                                                                       a->n_in > 5 ? PBL__IN(a, 5) : NULL);
    PBL__LAUNCHED();
done:
    return s;
}

/* (dy, x, scale, mean, inv_std) -> dx, dscale, dbias */
static pbl_status backward(const pbl__cuda_launch *l, const pbl__kargs *a, nset sets)
{
    pbl_status s = PBL_OK;
    PBL__LAUNCH(norm_grad_k, set_blocks(sets.n), NORM_THREADS, 0, l->stream)(
        PBL__OUT(a, 0), PBL__OUT(a, 1), PBL__OUT(a, 2), PBL__IN(a, 0), PBL__IN(a, 1), PBL__IN(a, 2), PBL__IN(a, 3),
        PBL__IN(a, 4), sets, a->n_in > 5 ? PBL__IN(a, 5) : NULL);
    PBL__LAUNCHED();
    if (!sets.per_set) {
        unsigned blocks = (unsigned)(sets.len > 0 ? (sets.len + LN_LANES - 1) / LN_LANES : 1);
        PBL__LAUNCH(ln_param_grad_k, blocks, PBL__THREADS, 0, l->stream)(
            PBL__OUT(a, 1), PBL__OUT(a, 2), PBL__IN(a, 0), PBL__IN(a, 1), PBL__IN(a, 3), PBL__IN(a, 4), sets.n, sets.len);
        PBL__LAUNCHED();
    }
done:
    return s;
}

extern "C" pbl_status pbl__cuda_batch_norm(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    return forward(l, a, bn_sets(&a->in_meta[0].shape));
}

extern "C" pbl_status pbl__cuda_layer_norm(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    return forward(l, a, ln_sets(&a->in_meta[0].shape));
}

extern "C" pbl_status pbl__cuda_batch_norm_grad(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    return backward(l, a, bn_sets(&a->in_meta[1].shape));
}

extern "C" pbl_status pbl__cuda_layer_norm_grad(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    return backward(l, a, ln_sets(&a->in_meta[1].shape));
}

/* mean, inv_std, running_mean, running_var: [C]; count, training: [1]; one thread per channel,
 * the formulas of ops/cpu/norm.c. The count is read by every thread before thread 0 bumps it
 * in a second launch (ordered on the stream). */
__global__ static void bn_update_k(float *rm, float *rv, const float *count, const float *mean, const float *inv_std,
                                   const float *training, int64_t n, double mom, double eps, double m)
{
    if (*training == 0.0f)
        return;
    const bool first = *count == 0.0f;
    PBL__GRID_LOOP(c, n) {
        float var = pbl__bn_running_var(inv_std[c], eps, m);
        rm[c] = first ? mean[c] : (float)((1.0 - mom) * rm[c] + mom * mean[c]);
        rv[c] = first ? var : (float)((1.0 - mom) * rv[c] + mom * var);
    }
}

__global__ static void bn_count_k(float *count, const float *training)
{
    if (*training != 0.0f)
        count[0] += 1.0f;
}

extern "C" pbl_status pbl__cuda_batch_norm_update(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    int64_t n = PBL__NUMEL(a->in_meta[0]);
    PBL__LAUNCH(bn_update_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__OUT(a, 1), PBL__OUT(a, 2),
                                                                         PBL__IN(a, 0), PBL__IN(a, 1), PBL__IN(a, 5), n,
                                                                         a->attr[0].f, a->attr[1].f, (double)a->attr[2].i);
    PBL__LAUNCHED();
    PBL__LAUNCH(bn_count_k, 1, 1, 0, l->stream)(PBL__OUT(a, 2), PBL__IN(a, 5));
    PBL__LAUNCHED();
done:
    return s;
}
