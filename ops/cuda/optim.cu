/*
 * CUDA kernels: optimizer updates in place over w and the state, the formulas of
 * ops/cpu/optim.c element by element.
 *
 * Adam's step counter t lives on the device (t[0] += 1 per update), so a captured CUDA graph
 * replays it correctly: one thread bumps it first (a separate launch, ordered on the
 * stream), then every block derives the bias corrections from the new t in double, as the
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

__global__ static void adam_k(float *w, float *m, float *v, const float *g, const float *t, int64_t n, adam_attr at)
{
    __shared__ float k[9]; /* b1, b2, c1, c2, step_size, inv_sqrt_bc2, wd (coupled), keep, clip factor */
    if (threadIdx.x == 0) {
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

/* w, g, m, v: [n]; t: [1], the number of updates so far (incremented here). */
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
    PBL__LAUNCH(step_k, 1, 1, 0, l->stream)(t);
    PBL__LAUNCHED();
    PBL__LAUNCH(adam_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__OUT(a, 1), PBL__OUT(a, 2), PBL__IN(a, 1),
                                                           t, n, at);
    PBL__LAUNCHED();
done:
    return s;
}

/* ---- clipping by global norm -------------------------------------------------------------- */

#define NORM_THREADS 1024
#define NORM_MAX_IN 16

struct norm_inputs {
    const float *x[NORM_MAX_IN];
    int64_t      n[NORM_MAX_IN];
    int32_t      k;
};

/* One block: each thread sums its strided elements of every input in double, then a tree
 * (pbl__block_sum): the same additions in the same order on every launch, so the same bits. */
__global__ static void global_norm_k(float *out, norm_inputs in)
{
    __shared__ double part[NORM_THREADS];
    double acc = 0.0;
    for (int32_t k = 0; k < in.k; k++)
        for (int64_t i = threadIdx.x; i < in.n[k]; i += NORM_THREADS)
            acc += (double)in.x[k][i] * (double)in.x[k][i];
    double total = pbl__block_sum<NORM_THREADS>(acc, part);
    if (threadIdx.x == 0)
        out[0] = (float)sqrt(total);
}

/* x1..xk: any shapes -> n: []. */
extern "C" pbl_status pbl__cuda_global_norm(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    norm_inputs in;
    in.k = a->n_in;
    for (int32_t k = 0; k < a->n_in && k < NORM_MAX_IN; k++) {
        in.x[k] = (const float *)a->in[k];
        in.n[k] = PBL__NUMEL(a->in_meta[k]);
    }
    PBL__LAUNCH(global_norm_k, 1, NORM_THREADS, 0, l->stream)((float *)PBL__OUT(a, 0), in);
    PBL__LAUNCHED();
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

/* One block, as global_norm_k: Σ dy·x in double, strided per thread, then the fixed tree. */
__global__ static void clip_grad_norm_k(float *out, const float *dy, const float *x, const float *norm, double max_norm,
                                        int64_t n)
{
    __shared__ double part[NORM_THREADS];
    double d = (double)norm[0] + 1e-6, acc = 0.0;
    int clipped = max_norm / d < 1.0;
    if (clipped)
        for (int64_t i = threadIdx.x; i < n; i += NORM_THREADS)
            acc += (double)dy[i] * (double)x[i];
    double dot = pbl__block_sum<NORM_THREADS>(acc, part);
    if (threadIdx.x == 0)
        out[0] = clipped ? (float)(-max_norm / (d * d) * dot) : 0.0f;
}

/* (dy, x, norm) -> dnorm = f'(norm)·Σ dy·x (ops/cpu/optim.c says why). */
extern "C" pbl_status pbl__cuda_clip_by_norm_grad_norm(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    PBL__LAUNCH(clip_grad_norm_k, 1, NORM_THREADS, 0, l->stream)((float *)PBL__OUT(a, 0), PBL__IN(a, 0), PBL__IN(a, 1),
                                                                 (const float *)PBL__IN(a, 2), a->attr[0].f,
                                                                 PBL__NUMEL(a->in_meta[0]));
    PBL__LAUNCHED();
done:
    return s;
}
