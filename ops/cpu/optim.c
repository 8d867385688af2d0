/* CPU kernels: optimizer updates, in place over w and the state (out[k] == its input). */
#include <math.h>
#include <string.h>

#include "ops/cpu/kernels.h"
#include "ops/shared/hyper.h"

/* Every update is element-wise over [n], so pbl__cpu_for may split it; each is one loop over
 * [lo, hi) of the kernel's arguments. */

/* A hyper-parameter: its attribute, or the runtime scalar input the "scalars" mask routes it
 * through (ops/shared/hyper.h). */
static double hyper(const pbl__kargs *a, int32_t base, int64_t mask, int64_t bit, double attr)
{
    int32_t k = pbl__hyper_slot(base, mask, bit);
    return k < 0 ? attr : (double)((const float *)a->in[k])[0];
}

/* clip_by_norm's factor min(1, max_norm / (norm + 1e-6)), in double then rounded, as
 * PyTorch's clip_grad_norm_ computes it in its own precision. */
static float clip_factor(double max_norm, double norm)
{
    double f = max_norm / (norm + 1e-6);
    return f < 1.0 ? (float)f : 1.0f;
}

/* The factor an update multiplies g by: clip_by_norm's when the "scalars" mask routes the
 * global norm through an input, else 1 (g·1 is exact: the unclipped update's bits). */
static float update_factor(const pbl__kargs *a, int32_t base, int64_t mask, double max_norm)
{
    int32_t k = pbl__hyper_slot(base, mask, PBL__HYPER_NORM);
    return k < 0 ? 1.0f : clip_factor(max_norm, (double)((const float *)a->in[k])[0]);
}

typedef struct sgd_job {
    float       *w, *m;
    const float *g;
    float        lr, mu, wd, f;
} sgd_job;

static void sgd_range(void *ctx, int64_t lo, int64_t hi)
{
    const sgd_job *j = ctx;
    float *w = j->w;
    const float *g = j->g;
    float lr = j->lr, wd = j->wd, f = j->f;
    for (int64_t i = lo; i < hi; i++)
        w[i] -= lr * (g[i] * f + wd * w[i]);
}

pbl_status pbl__cpu_sgd(const pbl__kargs *a)
{
    int64_t mask = a->attr[2].i;
    sgd_job j = { .w = PBL__OUT(a, 0), .g = PBL__IN(a, 1), .lr = (float)hyper(a, 2, mask, PBL__HYPER_LR, a->attr[0].f),
                  .wd = (float)hyper(a, 2, mask, PBL__HYPER_WD, a->attr[1].f), .f = update_factor(a, 2, mask, a->attr[3].f) };
    pbl__cpu_for(a, PBL__NUMEL(a->in_meta[0]), 1, sgd_range, &j);
    return PBL_OK;
}

static void sgd_momentum_range(void *ctx, int64_t lo, int64_t hi)
{
    const sgd_job *j = ctx;
    float *w = j->w, *m = j->m;
    const float *g = j->g;
    float lr = j->lr, mu = j->mu, wd = j->wd, f = j->f;
    for (int64_t i = lo; i < hi; i++) {
        m[i] = mu * m[i] + (g[i] * f + wd * w[i]);
        w[i] -= lr * m[i];
    }
}

pbl_status pbl__cpu_sgd_momentum(const pbl__kargs *a)
{
    int64_t mask = a->attr[3].i;
    sgd_job j = { .w = PBL__OUT(a, 0), .m = PBL__OUT(a, 1), .g = PBL__IN(a, 1),
                  .lr = (float)hyper(a, 3, mask, PBL__HYPER_LR, a->attr[0].f), .mu = (float)a->attr[1].f,
                  .wd = (float)hyper(a, 3, mask, PBL__HYPER_WD, a->attr[2].f), .f = update_factor(a, 3, mask, a->attr[4].f) };
    pbl__cpu_for(a, PBL__NUMEL(a->in_meta[0]), 1, sgd_momentum_range, &j);
    return PBL_OK;
}

typedef struct adam_coef {
    float b1, b2, c1, c2, step_size, inv_sqrt_bc2, eps, wd, keep, f;
} adam_coef;

/* The same arithmetic twice: with restrict when the four arrays are distinct (the normal
 * case; it vectorises), and without for a graph that passes one value twice. */
#define ADAM_BODY                                                               \
    for (int64_t i = 0; i < n; i++) {                                           \
        float gi = g[i] * k.f + k.wd * w[i];                                    \
        m[i] = k.b1 * m[i] + k.c1 * gi;                                         \
        v[i] = k.b2 * v[i] + k.c2 * gi * gi;                                    \
        w[i] = w[i] * k.keep - k.step_size * m[i] / (sqrtf(v[i]) * k.inv_sqrt_bc2 + k.eps); \
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
 * elements are split). A square root and a division per element: it weighs 4 passes.
 * Adam adds wd·w to the gradient; AdamW (decoupled) shrinks w by lr·wd first instead
 * (keep = 1 otherwise: w·1 is exact, so Adam's bits do not change). With the step routed
 * through a scalar, the bias correction uses it (a step below 1 counts as 1) and t still counts. */
pbl_status pbl__cpu_adam(const pbl__kargs *a)
{
    float *w = PBL__OUT(a, 0), *m = PBL__OUT(a, 1), *v = PBL__OUT(a, 2), *t = PBL__OUT(a, 3);
    const float *g = PBL__IN(a, 1);
    int64_t mask = a->attr[5].i;
    double lr = hyper(a, 5, mask, PBL__HYPER_LR, a->attr[0].f), b1 = a->attr[1].f, b2 = a->attr[2].f;
    double wd = hyper(a, 5, mask, PBL__HYPER_WD, a->attr[4].f);
    int decoupled = a->attr[6].i != 0;
    t[0] += 1.0f;
    double step = mask & PBL__HYPER_STEP ? hyper(a, 5, mask, PBL__HYPER_STEP, 0.0) : (double)t[0];
    step = step < 1.0 ? 1.0 : step; /* the bias correction divides by 1 - beta^step: 0 at step 0 */
    adam_job j = { .w = w, .m = m, .v = v, .g = g,
                   .k = { .b1 = (float)b1, .b2 = (float)b2, .c1 = (float)(1.0 - b1), .c2 = (float)(1.0 - b2),
                          .step_size = (float)(lr / (1.0 - pow(b1, step))),
                          .inv_sqrt_bc2 = (float)(1.0 / sqrt(1.0 - pow(b2, step))),
                          .eps = (float)a->attr[3].f, .wd = decoupled ? 0.0f : (float)wd,
                          .keep = decoupled ? (float)(1.0 - lr * wd) : 1.0f,
                          .f = update_factor(a, 5, mask, a->attr[7].f) },
                   .distinct = w != m && w != v && m != v && g != w && g != m && g != v };
    pbl__cpu_for(a, PBL__NUMEL(a->in_meta[0]), 4, adam_range, &j);
    return PBL_OK;
}

/* x1..xk: any shapes -> n: []. The sum of squares in an order fixed by the inputs' sizes alone,
 * so the bits do not depend on the thread count or the machine:
 * - the inputs are read as one sequence; element i goes into lane i mod NORM_LANES (32
 *   independent chains: the adds overlap instead of waiting on each other);
 * - within a lane, NORM_RUN squares at a time are summed in float, then added to the lane's
 *   double: a float sum of 8 squares of at least FLT_MIN each is within about 8·2^-24 of
 *   exact, relatively, far below what a norm for clipping needs, and it converts to double
 *   once every 8 elements, not every element, which made the pass convert-bound (chunks of
 *   smaller squares are summed again in double: norm_chunks);
 * - the sequence is cut into at most NORM_CHUNKS chunks of a size that is a multiple of
 *   NORM_LANES·NORM_RUN; each chunk sums its lanes from zero (chunks may run on different
 *   threads); the chunks' lanes are added in chunk order, then the lanes in lane order. */
#define NORM_LANES  32
#define NORM_RUN    8
#define NORM_BLOCK  (NORM_LANES * NORM_RUN)
#define NORM_CHUNKS 64
#define NORM_MIN_CHUNK 4096 /* elements: below this a chunk is not worth a part of its own */

/* lane[l] += Σ over runs of (Σ_r x[(b·R + r)·L + l]²) for `blocks` blocks of L·R elements:
 * the lanes in locals, so they stay in registers. */
PBL__HOT static void sum_squares_lanes(const float *restrict x, int64_t blocks, double *restrict lane)
{
    double acc[NORM_LANES];
    for (int l = 0; l < NORM_LANES; l++)
        acc[l] = lane[l];
    for (int64_t b = 0; b < blocks; b++, x += NORM_BLOCK) {
        float run[NORM_LANES];
        for (int l = 0; l < NORM_LANES; l++)
            run[l] = x[l] * x[l];
        for (int r = 1; r < NORM_RUN; r++)
            for (int l = 0; l < NORM_LANES; l++)
                run[l] += x[r * NORM_LANES + l] * x[r * NORM_LANES + l];
        for (int l = 0; l < NORM_LANES; l++)
            acc[l] += (double)run[l];
    }
    for (int l = 0; l < NORM_LANES; l++)
        lane[l] = acc[l];
}

/* The lanes of a piece of one input that starts at element `at` of the sequence: the elements
 * before the first whole block and after the last one singly, in double, the blocks through
 * the vector loop. Where a block lies depends on `at` alone (the sequence's index), so the order
 * is the same whoever computes the piece. `wide`: every element singly, in double (for a chunk
 * whose float runs overflowed: squares past 3.4e38 that a double still holds). */
static void sum_squares_piece(const float *x, int64_t n, int64_t at, double *lane, int wide)
{
    int64_t i = 0;
    for (; i < n && (wide || (at + i) % NORM_BLOCK); i++)
        lane[(at + i) % NORM_LANES] += (double)x[i] * (double)x[i];
    int64_t blocks = (n - i) / NORM_BLOCK;
    sum_squares_lanes(x + i, blocks, lane);
    i += blocks * NORM_BLOCK;
    for (; i < n; i++)
        lane[(at + i) % NORM_LANES] += (double)x[i] * (double)x[i];
}

typedef struct norm_job {
    const pbl__kargs *a;
    int64_t           total;                    /* elements over all inputs */
    int64_t           chunk;                    /* elements per chunk, a multiple of NORM_BLOCK */
    double            lane[NORM_CHUNKS][NORM_LANES]; /* each chunk's sums */
} norm_job;

/* fn over each piece of chunk c (the part of an input that lies in it: x[0..n), element `at`
 * of the sequence) in order, until one returns nonzero; returns that, or 0. */
typedef int (*piece_fn)(void *ctx, const float *x, int64_t n, int64_t at);
static int chunk_pieces(const norm_job *j, int64_t c, piece_fn fn, void *ctx)
{
    int64_t from = c * j->chunk, to = from + j->chunk, at = 0; /* at: the input's first element */
    for (int32_t k = 0; k < j->a->n_in && at < to; k++) {
        int64_t n = PBL__NUMEL(j->a->in_meta[k]);
        int64_t s = from > at ? from : at, e = to < at + n ? to : at + n;
        int r = s < e ? fn(ctx, PBL__IN(j->a, k) + (s - at), e - s, s) : 0;
        if (r)
            return r;
        at += n;
    }
    return 0;
}

typedef struct lanes_of {
    double *lane;
    int     wide;
} lanes_of;

static int piece_squares(void *ctx, const float *x, int64_t n, int64_t at)
{
    const lanes_of *l = ctx;
    sum_squares_piece(x, n, at, l->lane, l->wide);
    return 0;
}

/* The lanes of chunk c from zero, over the inputs it overlaps. */
static void norm_chunk(norm_job *j, int64_t c, int wide)
{
    lanes_of l = { .lane = j->lane[c], .wide = wide };
    for (int i = 0; i < NORM_LANES; i++)
        l.lane[i] = 0.0;
    chunk_pieces(j, c, piece_squares, &l);
}

/* Whether x[0..n) holds an element other than ±0 (by its bits: a denormal counts), a block at a
 * time so the loop vectorises (a chunk of zeros, say the weights of an input that is always 0,
 * costs a pass like the float one, not the double one's). */
PBL__HOT static int any_nonzero(void *ctx, const float *x, int64_t n, int64_t at)
{
    (void)ctx, (void)at;
    uint32_t acc = 0, b;
    int64_t  i = 0;
    for (; i + NORM_BLOCK <= n; i += NORM_BLOCK)
        for (int l = 0; l < NORM_BLOCK; l++) {
            memcpy(&b, x + i + l, sizeof b);
            acc |= b;
        }
    for (; i < n; i++) {
        memcpy(&b, x + i, sizeof b);
        acc |= b;
    }
    return (acc & 0x7FFFFFFFu) != 0;
}

/* Chunks [lo, hi); a chunk again in double throughout (a NaN stays) where its float runs may
 * have overflowed (an infinite lane) or underflowed: a square below FLT_MIN loses bits or
 * flushes to 0 (FTZ), at most 2^-126 each, so a chunk whose sum is under count·2^-100 (squares
 * averaging below 2^-100, |x| ~1e-15) could be off by more than 2^-26 relatively (10000 x 1e-25
 * gave 4e-25, not 1e-23); a chunk of zeros only is exact already. The test reads the chunk's
 * data only, so the bits stay fixed. */
static void norm_chunks(void *ctx, int64_t lo, int64_t hi)
{
    norm_job *j = ctx;
    for (int64_t c = lo; c < hi; c++) {
        norm_chunk(j, c, 0);
        int64_t from = c * j->chunk, count = j->total - from < j->chunk ? j->total - from : j->chunk;
        double sum = 0.0;
        int redo = 0;
        for (int l = 0; l < NORM_LANES; l++) {
            redo |= isinf(j->lane[c][l]);
            sum += j->lane[c][l];
        }
        if (redo || (sum < (double)count * 0x1p-100 && chunk_pieces(j, c, any_nonzero, NULL)))
            norm_chunk(j, c, 1);
    }
}

pbl_status pbl__cpu_global_norm(const pbl__kargs *a)
{
    norm_job j = { .a = a };
    for (int32_t k = 0; k < a->n_in; k++)
        j.total += PBL__NUMEL(a->in_meta[k]);
    j.chunk = (j.total + NORM_CHUNKS - 1) / NORM_CHUNKS;
    if (j.chunk < NORM_MIN_CHUNK)
        j.chunk = NORM_MIN_CHUNK;
    j.chunk = (j.chunk + NORM_BLOCK - 1) / NORM_BLOCK * NORM_BLOCK;
    int64_t chunks = (j.total + j.chunk - 1) / j.chunk;
    pbl__cpu_for_aligned(a, chunks, j.chunk, 1, norm_chunks, &j);
    double lane[NORM_LANES] = { 0 };
    for (int64_t c = 0; c < chunks; c++)
        for (int l = 0; l < NORM_LANES; l++)
            lane[l] += j.lane[c][l];
    double sum = 0.0;
    for (int l = 0; l < NORM_LANES; l++)
        sum += lane[l];
    ((float *)PBL__OUT(a, 0))[0] = (float)sqrt(sum);
    return PBL_OK;
}

/* y = x·factor: clip_by_norm's scaling and global_norm's gradient */
static void scale_range(void *ctx, int64_t lo, int64_t hi)
{
    const sgd_job *j = ctx; /* w: y, g: x, lr: the factor */
    for (int64_t i = lo; i < hi; i++)
        j->w[i] = j->g[i] * j->lr;
}

/* x: [n], norm: [] -> y: [n] (maybe x's storage), y = x·clip_factor. */
pbl_status pbl__cpu_clip_by_norm(const pbl__kargs *a)
{
    sgd_job j = { .w = PBL__OUT(a, 0), .g = PBL__IN(a, 0),
                  .lr = clip_factor(a->attr[0].f, ((const float *)PBL__IN(a, 1))[0]) };
    pbl__cpu_for(a, PBL__NUMEL(a->in_meta[0]), 1, scale_range, &j);
    return PBL_OK;
}

/* (x, norm, dy) -> dx = x·(dy / norm), 0 where norm is 0. */
pbl_status pbl__cpu_global_norm_grad(const pbl__kargs *a)
{
    double norm = PBL__IN(a, 1)[0], dy = PBL__IN(a, 2)[0];
    sgd_job j = { .w = PBL__OUT(a, 0), .g = PBL__IN(a, 0), .lr = norm > 0.0 ? (float)(dy / norm) : 0.0f };
    pbl__cpu_for(a, PBL__NUMEL(a->in_meta[0]), 1, scale_range, &j);
    return PBL_OK;
}

/* (dy, x, norm) -> dnorm = f'(norm)·Σ dy·x: f = max_norm / (norm + 1e-6) where below 1 (clipping),
 * f' = -max_norm / (norm + 1e-6)²; 0 where clip_by_norm left x alone. The sum is in double,
 * serially: the bits do not depend on the thread count. */
pbl_status pbl__cpu_clip_by_norm_grad_norm(const pbl__kargs *a)
{
    const float *dy = PBL__IN(a, 0), *x = PBL__IN(a, 1);
    double max_norm = a->attr[0].f, d = (double)PBL__IN(a, 2)[0] + 1e-6, dot = 0.0;
    int64_t n = PBL__NUMEL(a->in_meta[0]);
    int clipping = max_norm / d < 1.0;
    for (int64_t i = 0; clipping && i < n; i++)
        dot += (double)dy[i] * (double)x[i];
    PBL__OUT(a, 0)[0] = clipping ? (float)(-max_norm / (d * d) * dot) : 0.0f;
    return PBL_OK;
}
