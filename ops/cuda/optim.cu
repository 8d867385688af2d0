/*
 * CUDA kernels: optimizer updates in place over w and the state, the formulas of
 * ops/cpu/optim.c element by element.
 *
 * Adam's step counter t lives on the device (t[0] += 1 per update), so a captured CUDA graph
 * replays it correctly: one thread bumps it first (a separate launch, ordered on the
 * stream; or, for a tensor small enough for one block, that block's thread 0 before it
 * reads it), then every block derives the bias corrections from the new t in double, as the
 * CPU does once per update.
 */
#include "ops/cuda/common.cuh"
#include "ops/shared/hyper.h"

/* A hyper-parameter read on the device: the runtime scalar when the "scalars" mask routes it
 * through an input (ops/shared/hyper.h), else the attribute passed by value. Reading the
 * scalar in the kernel keeps a captured CUDA graph right after pbl_exec_set_scalar. */
struct hyper_arg {
    const float *p;
    double       v; /* the attribute, unrounded, as the CPU reads it */
};

static hyper_arg hyper(const pbl__kargs *a, int32_t base, int64_t mask, int64_t bit, double attr)
{
    int32_t k = pbl__hyper_slot(base, mask, bit);
    hyper_arg h = { k < 0 ? NULL : (const float *)a->in[k], attr };
    return h;
}

__device__ static inline double hyper_get(hyper_arg h) { return h.p ? (double)*h.p : h.v; }

/* clip_by_norm's factor min(1, max_norm / (norm + 1e-6)), in double then rounded (as the CPU). */
__device__ static inline float clip_factor(double max_norm, double norm)
{
    double f = max_norm / (norm + 1e-6);
    return f < 1.0 ? (float)f : 1.0f;
}

/* The factor an update multiplies g by: clip_by_norm's with the norm input (bit
 * PBL__HYPER_NORM), else 1 (exact: the unclipped bits). norm.v holds max_norm. */
__device__ static inline float update_factor(hyper_arg norm) { return norm.p ? clip_factor(norm.v, (double)*norm.p) : 1.0f; }

__global__ static void sgd_k(float *w, const float *g, hyper_arg lr_h, hyper_arg wd_h, hyper_arg norm_h, int64_t n)
{
    float lr = (float)hyper_get(lr_h), wd = (float)hyper_get(wd_h), f = update_factor(norm_h);
    PBL__GRID_LOOP(i, n)
        w[i] -= lr * (g[i] * f + wd * w[i]);
}

extern "C" pbl_status pbl__cuda_sgd(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    int64_t n = PBL__NUMEL(a->in_meta[0]);
    int64_t mask = a->attr[2].i;
    PBL__LAUNCH(sgd_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 1),
                                                                   hyper(a, 2, mask, PBL__HYPER_LR, a->attr[0].f),
                                                                   hyper(a, 2, mask, PBL__HYPER_WD, a->attr[1].f),
                                                                   hyper(a, 2, mask, PBL__HYPER_NORM, a->attr[3].f), n);
    PBL__LAUNCHED();
done:
    return s;
}

__global__ static void momentum_k(float *w, float *m, const float *g, hyper_arg lr_h, float mu, hyper_arg wd_h,
                                  hyper_arg norm_h, int64_t n)
{
    float lr = (float)hyper_get(lr_h), wd = (float)hyper_get(wd_h), f = update_factor(norm_h);
    PBL__GRID_LOOP(i, n) {
        m[i] = mu * m[i] + (g[i] * f + wd * w[i]);
        w[i] -= lr * m[i];
    }
}

extern "C" pbl_status pbl__cuda_sgd_momentum(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    int64_t n = PBL__NUMEL(a->in_meta[0]);
    int64_t mask = a->attr[3].i;
    PBL__LAUNCH(momentum_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__OUT(a, 1), PBL__IN(a, 1),
                                                                        hyper(a, 3, mask, PBL__HYPER_LR, a->attr[0].f),
                                                                        (float)a->attr[1].f,
                                                                        hyper(a, 3, mask, PBL__HYPER_WD, a->attr[2].f),
                                                                        hyper(a, 3, mask, PBL__HYPER_NORM, a->attr[4].f), n);
    PBL__LAUNCHED();
done:
    return s;
}

__global__ static void step_k(float *t) { t[0] += 1.0f; }

struct adam_attr {
    double b1, b2, eps;
    hyper_arg lr, wd, norm;
    const float *step; /* the step scalar, or NULL: t */
    int decoupled;
};

/* bump: a grid of one block counts the update itself (t[0] += 1 before its one reader, thread
 * 0, uses it); larger grids find t already counted by step_k. */
__global__ static void adam_k(float *w, float *m, float *v, const float *g, float *t, int64_t n, adam_attr at, int bump)
{
    __shared__ float k[9]; /* b1, b2, c1, c2, step_size, inv_sqrt_bc2, wd (coupled), keep, clip factor */
    if (threadIdx.x == 0) {
        if (bump)
            t[0] += 1.0f;
        double step = at.step ? (double)*at.step : (double)t[0];
        step = step < 1.0 ? 1.0 : step; /* as the CPU: a step below 1 counts as 1 */
        double lr = hyper_get(at.lr), wd = hyper_get(at.wd);
        k[0] = (float)at.b1;
        k[1] = (float)at.b2;
        k[2] = (float)(1.0 - at.b1);
        k[3] = (float)(1.0 - at.b2);
        k[4] = (float)(lr / (1.0 - pow(at.b1, step)));
        k[5] = (float)(1.0 / sqrt(1.0 - pow(at.b2, step)));
        k[6] = at.decoupled ? 0.0f : (float)wd;
        k[7] = at.decoupled ? (float)(1.0 - lr * wd) : 1.0f;
        k[8] = update_factor(at.norm);
    }
    __syncthreads();
    float eps = (float)at.eps;
    PBL__GRID_LOOP(i, n) {
        float gi = g[i] * k[8] + k[6] * w[i];
        float mi = k[0] * m[i] + k[2] * gi;
        float vi = k[1] * v[i] + k[3] * gi * gi;
        m[i] = mi;
        v[i] = vi;
        w[i] = w[i] * k[7] - k[4] * mi / (sqrtf(vi) * k[5] + eps);
    }
}

/* w, g, m, v: [n]; t: [1], the number of updates so far (incremented here). Up to 4096
 * elements run as one block, 16 per thread, which also counts t: one launch instead of two
 * (biases and small layers; a launch costs about 2 µs on an H200). */
#define ADAM_ONE_BLOCK 4096
extern "C" pbl_status pbl__cuda_adam(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    int64_t n = PBL__NUMEL(a->in_meta[0]);
    int64_t mask = a->attr[5].i;
    int32_t step_slot = pbl__hyper_slot(5, mask, PBL__HYPER_STEP);
    adam_attr at = { a->attr[1].f, a->attr[2].f, a->attr[3].f, hyper(a, 5, mask, PBL__HYPER_LR, a->attr[0].f),
                     hyper(a, 5, mask, PBL__HYPER_WD, a->attr[4].f), hyper(a, 5, mask, PBL__HYPER_NORM, a->attr[7].f),
                     step_slot < 0 ? NULL : (const float *)a->in[step_slot], a->attr[6].i != 0 };
    float *t = PBL__OUT(a, 3);
    int one = n <= ADAM_ONE_BLOCK;
    if (!one) {
        PBL__LAUNCH(step_k, 1, 1, 0, l->stream)(t);
        PBL__LAUNCHED();
    }
    PBL__LAUNCH(adam_k, one ? 1 : pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__OUT(a, 1), PBL__OUT(a, 2),
                                                                       PBL__IN(a, 1), t, n, at, one);
    PBL__LAUNCHED();
done:
    return s;
}

/* ---- clipping by global norm -------------------------------------------------------------- */

#define NORM_THREADS    256
#define NORM_MAX_IN     16
#define NORM_MAX_BLOCKS 256  /* the total's block adds one partial per thread */
#define NORM_MIN_PER    4096 /* elements a block takes at least: 16 per thread */

/* The inputs as one virtual array: input k holds elements [start[k], start[k + 1]). */
struct norm_inputs {
    const float *x[NORM_MAX_IN];
    int64_t      start[NORM_MAX_IN + 1];
    int32_t      k;
};

/* Block b sums the squares of elements [b·per, (b + 1)·per) of the virtual array, each thread
 * its strided share in double, then a tree (pbl__block_sum). One block writes the norm
 * itself; several write their partial sums to part[b], which norm_total_k adds. Which element
 * each thread adds, and in which order, depends only on the sizes: the same bits on every
 * launch, every GPU (no atomics). */
__global__ static void norm_part_k(float *out, double *part, norm_inputs in, int64_t per)
{
    __shared__ double red[NORM_THREADS];
    int64_t lo = (int64_t)blockIdx.x * per, hi = lo + per < in.start[in.k] ? lo + per : in.start[in.k];
    double acc = 0.0;
    for (int32_t k = 0; k < in.k; k++) {
        int64_t a = lo > in.start[k] ? lo : in.start[k], b = hi < in.start[k + 1] ? hi : in.start[k + 1];
        for (int64_t i = a + threadIdx.x; i < b; i += NORM_THREADS) {
            double v = (double)in.x[k][i - in.start[k]];
            acc += v * v;
        }
    }
    double total = pbl__block_sum<NORM_THREADS>(acc, red);
    if (threadIdx.x == 0) {
        if (gridDim.x == 1)
            out[0] = (float)sqrt(total);
        else
            part[blockIdx.x] = total;
    }
}

__global__ static void norm_total_k(float *out, const double *part, int32_t n_part)
{
    __shared__ double red[NORM_THREADS];
    double total = pbl__block_sum<NORM_THREADS>((int32_t)threadIdx.x < n_part ? part[threadIdx.x] : 0.0, red);
    if (threadIdx.x == 0)
        out[0] = (float)sqrt(total);
}

/* x1..xk (k <= 16: the optimizer builder nests larger sets): any shapes -> n: []. Up to 256
 * blocks of at least 4096 elements each (a single block covered all of them before: 28 µs
 * for the 235k gradients of train_mlp's model on an H200, under ncu); their partial sums go
 * to the front of the stream's cuBLAS workspace, which the stream orders like any other use. */
extern "C" pbl_status pbl__cuda_global_norm(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    norm_inputs in;
    in.k = a->n_in < NORM_MAX_IN ? a->n_in : NORM_MAX_IN;
    in.start[0] = 0;
    for (int32_t k = 0; k < in.k; k++) {
        in.x[k] = (const float *)a->in[k];
        in.start[k + 1] = in.start[k] + PBL__NUMEL(a->in_meta[k]);
    }
    int64_t n = in.start[in.k], per = (n + NORM_MAX_BLOCKS - 1) / NORM_MAX_BLOCKS;
    per = per < NORM_MIN_PER ? NORM_MIN_PER : (per + NORM_THREADS - 1) / NORM_THREADS * NORM_THREADS;
    int64_t blocks = n > 0 ? (n + per - 1) / per : 1;
    if (l->workspace == NULL || l->workspace_bytes < (size_t)blocks * sizeof(double)) { /* one block then */
        blocks = 1;
        per = n;
    }
    double *part = (double *)l->workspace;
    PBL__LAUNCH(norm_part_k, (unsigned)blocks, NORM_THREADS, 0, l->stream)((float *)PBL__OUT(a, 0), part, in, per);
    PBL__LAUNCHED();
    if (blocks > 1) {
        PBL__LAUNCH(norm_total_k, 1, NORM_THREADS, 0, l->stream)((float *)PBL__OUT(a, 0), part, (int32_t)blocks);
        PBL__LAUNCHED();
    }
done:
    return s;
}

__global__ static void clip_k(float *y, const float *x, const float *norm, double max_norm, int64_t n)
{
    float c = clip_factor(max_norm, (double)norm[0]);
    PBL__GRID_LOOP(i, n)
        y[i] = x[i] * c;
}

/* x: [n], norm: [] -> y: [n] (maybe x's storage). */
extern "C" pbl_status pbl__cuda_clip_by_norm(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    int64_t n = PBL__NUMEL(a->in_meta[0]);
    PBL__LAUNCH(clip_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0),
                                                                    (const float *)PBL__IN(a, 1), a->attr[0].f, n);
    PBL__LAUNCHED();
done:
    return s;
}

__global__ static void global_norm_grad_k(float *dx, const float *x, const float *norm, const float *dy, int64_t n)
{
    double nv = (double)norm[0];
    float f = nv > 0.0 ? (float)((double)dy[0] / nv) : 0.0f;
    PBL__GRID_LOOP(i, n)
        dx[i] = x[i] * f;
}

/* (x, norm, dy) -> dx = x·(dy / norm), 0 where norm is 0. */
extern "C" pbl_status pbl__cuda_global_norm_grad(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    int64_t n = PBL__NUMEL(a->in_meta[0]);
    PBL__LAUNCH(global_norm_grad_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(
        PBL__OUT(a, 0), PBL__IN(a, 0), (const float *)PBL__IN(a, 1), (const float *)PBL__IN(a, 2), n);
    PBL__LAUNCHED();
done:
    return s;
}

/* One block of 1024 threads (only a graph that differentiates through the clipping runs it):
 * Σ dy·x in double, strided per thread, then the fixed tree. */
#define DOT_THREADS 1024
__global__ static void clip_grad_norm_k(float *out, const float *dy, const float *x, const float *norm, double max_norm,
                                        int64_t n)
{
    __shared__ double part[DOT_THREADS];
    double d = (double)norm[0] + 1e-6, acc = 0.0;
    int clipped = max_norm / d < 1.0;
    if (clipped)
        for (int64_t i = threadIdx.x; i < n; i += DOT_THREADS)
            acc += (double)dy[i] * (double)x[i];
    double dot = pbl__block_sum<DOT_THREADS>(acc, part);
    if (threadIdx.x == 0)
        out[0] = clipped ? (float)(-max_norm / (d * d) * dot) : 0.0f;
}

/* (dy, x, norm) -> dnorm = f'(norm)·Σ dy·x (ops/cpu/optim.c says why). */
extern "C" pbl_status pbl__cuda_clip_by_norm_grad_norm(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    PBL__LAUNCH(clip_grad_norm_k, 1, DOT_THREADS, 0, l->stream)((float *)PBL__OUT(a, 0), PBL__IN(a, 0), PBL__IN(a, 1),
                                                                 (const float *)PBL__IN(a, 2), a->attr[0].f,
                                                                 PBL__NUMEL(a->in_meta[0]));
    PBL__LAUNCHED();
done:
    return s;
}
