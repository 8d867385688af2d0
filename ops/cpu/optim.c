/* CPU kernels: optimizer updates, in place over w and the state (out[k] == its input). */
#include <math.h>

#include "ops/cpu/kernels.h"

/* Every update is element-wise over [n], so pbl__cpu_for may split it; each is one loop over
 * [lo, hi) of the kernel's arguments. */

static void sgd_range(void *ctx, int64_t lo, int64_t hi)
{
    const pbl__kargs *a = ctx;
    float *w = PBL__OUT(a, 0);
    const float *g = PBL__IN(a, 1);
    float lr = (float)a->attr[0].f, wd = (float)a->attr[1].f;
    for (int64_t i = lo; i < hi; i++)
        w[i] -= lr * (g[i] + wd * w[i]);
}

pbl_status pbl__cpu_sgd(const pbl__kargs *a)
{
    pbl__cpu_for(a, PBL__NUMEL(a->in_meta[0]), 1, sgd_range, (void *)a);
    return PBL_OK;
}

static void sgd_momentum_range(void *ctx, int64_t lo, int64_t hi)
{
    const pbl__kargs *a = ctx;
    float *w = PBL__OUT(a, 0), *m = PBL__OUT(a, 1);
    const float *g = PBL__IN(a, 1);
    float lr = (float)a->attr[0].f, mu = (float)a->attr[1].f, wd = (float)a->attr[2].f;
    for (int64_t i = lo; i < hi; i++) {
        m[i] = mu * m[i] + (g[i] + wd * w[i]);
        w[i] -= lr * m[i];
    }
}

pbl_status pbl__cpu_sgd_momentum(const pbl__kargs *a)
{
    pbl__cpu_for(a, PBL__NUMEL(a->in_meta[0]), 1, sgd_momentum_range, (void *)a);
    return PBL_OK;
}

typedef struct adam_coef {
    float b1, b2, c1, c2, step_size, inv_sqrt_bc2, eps, wd;
} adam_coef;

/* The same arithmetic twice: with restrict when the four arrays are distinct (the normal
 * case; it vectorises), and without for a graph that passes one value twice. */
#define ADAM_BODY                                                               \
    for (int64_t i = 0; i < n; i++) {                                           \
        float gi = g[i] + k.wd * w[i];                                          \
        m[i] = k.b1 * m[i] + k.c1 * gi;                                         \
        v[i] = k.b2 * v[i] + k.c2 * gi * gi;                                    \
        w[i] -= k.step_size * m[i] / (sqrtf(v[i]) * k.inv_sqrt_bc2 + k.eps);    \
    }

PBL__HOT static void adam_distinct(float *restrict w, float *restrict m, float *restrict v,
                                   const float *restrict g, int64_t n, adam_coef k)
{
    ADAM_BODY
}

static void adam_aliased(float *w, float *m, float *v, const float *g, int64_t n, adam_coef k)
{
    ADAM_BODY
}

typedef struct adam_job {
    float       *w, *m, *v;
    const float *g;
    adam_coef    k;
    int          distinct;
} adam_job;

static void adam_range(void *ctx, int64_t lo, int64_t hi)
{
    const adam_job *j = ctx;
    if (j->distinct)
        adam_distinct(j->w + lo, j->m + lo, j->v + lo, j->g + lo, hi - lo, j->k);
    else
        adam_aliased(j->w + lo, j->m + lo, j->v + lo, j->g + lo, hi - lo, j->k);
}

/* w, g, m, v: [n]; t: [1], the number of updates so far (incremented here, once, before the
 * elements are split). A square root and a division per element: it weighs 4 passes. */
pbl_status pbl__cpu_adam(const pbl__kargs *a)
{
    float *w = PBL__OUT(a, 0), *m = PBL__OUT(a, 1), *v = PBL__OUT(a, 2), *t = PBL__OUT(a, 3);
    const float *g = PBL__IN(a, 1);
    double lr = a->attr[0].f, b1 = a->attr[1].f, b2 = a->attr[2].f;
    t[0] += 1.0f;
    double step = (double)t[0];
    adam_job j = { .w = w, .m = m, .v = v, .g = g,
                   .k = { .b1 = (float)b1, .b2 = (float)b2, .c1 = (float)(1.0 - b1), .c2 = (float)(1.0 - b2),
                          .step_size = (float)(lr / (1.0 - pow(b1, step))),
                          .inv_sqrt_bc2 = (float)(1.0 / sqrt(1.0 - pow(b2, step))),
                          .eps = (float)a->attr[3].f, .wd = (float)a->attr[4].f },
                   .distinct = w != m && w != v && m != v && g != w && g != m && g != v };
    pbl__cpu_for(a, PBL__NUMEL(a->in_meta[0]), 4, adam_range, &j);
    return PBL_OK;
}
