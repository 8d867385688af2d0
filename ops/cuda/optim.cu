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

__global__ static void sgd_k(float *w, const float *g, float lr, float wd, int64_t n)
{
    PBL__GRID_LOOP(i, n)
        w[i] -= lr * (g[i] + wd * w[i]);
}

extern "C" pbl_status pbl__cuda_sgd(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    int64_t n = PBL__NUMEL(a->in_meta[0]);
    PBL__LAUNCH(sgd_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 1), (float)a->attr[0].f,
                                                          (float)a->attr[1].f, n);
    PBL__LAUNCHED();
done:
    return s;
}

__global__ static void momentum_k(float *w, float *m, const float *g, float lr, float mu, float wd, int64_t n)
{
    PBL__GRID_LOOP(i, n) {
        m[i] = mu * m[i] + (g[i] + wd * w[i]);
        w[i] -= lr * m[i];
    }
}

extern "C" pbl_status pbl__cuda_sgd_momentum(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    int64_t n = PBL__NUMEL(a->in_meta[0]);
    PBL__LAUNCH(momentum_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__OUT(a, 1), PBL__IN(a, 1),
                                                               (float)a->attr[0].f, (float)a->attr[1].f,
                                                               (float)a->attr[2].f, n);
    PBL__LAUNCHED();
done:
    return s;
}

__global__ static void step_k(float *t) { t[0] += 1.0f; }

struct adam_attr {
    double lr, b1, b2, eps, wd;
};

__global__ static void adam_k(float *w, float *m, float *v, const float *g, const float *t, int64_t n, adam_attr at)
{
    __shared__ float k[6]; /* b1, b2, c1, c2, step_size, inv_sqrt_bc2 */
    if (threadIdx.x == 0) {
        double step = (double)t[0];
        k[0] = (float)at.b1;
        k[1] = (float)at.b2;
        k[2] = (float)(1.0 - at.b1);
        k[3] = (float)(1.0 - at.b2);
        k[4] = (float)(at.lr / (1.0 - pow(at.b1, step)));
        k[5] = (float)(1.0 / sqrt(1.0 - pow(at.b2, step)));
    }
    __syncthreads();
    float eps = (float)at.eps, wd = (float)at.wd;
    PBL__GRID_LOOP(i, n) {
        float gi = g[i] + wd * w[i];
        float mi = k[0] * m[i] + k[2] * gi;
        float vi = k[1] * v[i] + k[3] * gi * gi;
        m[i] = mi;
        v[i] = vi;
        w[i] -= k[4] * mi / (sqrtf(vi) * k[5] + eps);
    }
}

/* w, g, m, v: [n]; t: [1], the number of updates so far (incremented here). */
extern "C" pbl_status pbl__cuda_adam(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    int64_t n = PBL__NUMEL(a->in_meta[0]);
    adam_attr at = { a->attr[0].f, a->attr[1].f, a->attr[2].f, a->attr[3].f, a->attr[4].f };
    float *t = PBL__OUT(a, 3);
    PBL__LAUNCH(step_k, 1, 1, 0, l->stream)(t);
    PBL__LAUNCHED();
    PBL__LAUNCH(adam_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__OUT(a, 1), PBL__OUT(a, 2), PBL__IN(a, 1),
                                                           t, n, at);
    PBL__LAUNCHED();
done:
    return s;
}
