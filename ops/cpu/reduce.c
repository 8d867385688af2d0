/* CPU kernels: reductions and broadcasts, all as walks of the big shape's rows (broadcast.h). */
#include <string.h>

#include "ops/shared/broadcast.h"
#include "ops/cpu/kernels.h"
#include "ops/shared/reduce.h"

/* A bias gradient: y[cols] = Σ over rows of x[rows, cols], split by columns. */
typedef struct col_sum {
    float       *y;
    const float *x;
    int64_t      rows, cols;
} col_sum;

/* y[lo, hi) summed row after row, as sum_into's loop does for each column: the same order */
PBL__HOT static void col_sum_range(void *ctx, int64_t lo, int64_t hi)
{
    const col_sum *c = ctx;
    float *y = c->y;
    memset(y + lo, 0, (size_t)(hi - lo) * sizeof *y);
    for (int64_t r = 0; r < c->rows; r++) {
        const float *xr = c->x + r * c->cols;
        for (int64_t j = lo; j < hi; j++)
            y[j] += xr[j];
    }
}

/* y[small] = Σ x[big] over the broadcast dims; y is zeroed first. */
static void sum_into(const pbl__kargs *a, float *y, const float *x, const pbl_shape *big, const pbl_shape *small)
{
    pbl__bcast bc;
    pbl__bcast_init(&bc, big, small);
    if (bc.tiled && bc.small_numel == bc.cols && bc.col_stride == 1) {
        col_sum c = { .y = y, .x = x, .rows = bc.rows, .cols = bc.cols };
        /* each column costs a pass over its rows */
        pbl__cpu_for(a, bc.cols, bc.rows, col_sum_range, &c);
        return;
    }
    memset(y, 0, (size_t)bc.small_numel * sizeof *y);
    for (int64_t r = 0; r < bc.rows; r++) {
        const float *xr = x + r * bc.cols;
        float *yr = y + pbl__bcast_row_offset(&bc, r);
        if (bc.col_stride) {
            for (int64_t j = 0; j < bc.cols; j++)
                yr[j] += xr[j];
        } else {
            float s = 0.0f;
            for (int64_t j = 0; j < bc.cols; j++)
                s += xr[j];
            yr[0] += s;
        }
    }
}

static pbl_status reduce(const pbl__kargs *a, int is_mean)
{
    pbl_shape keep;
    char err[64];
    pbl__reduce_keep_shape(&a->in_meta[0].shape, a->attr, &keep, err, sizeof err);
    float *y = PBL__OUT(a, 0);
    sum_into(a, y, PBL__IN(a, 0), &a->in_meta[0].shape, &keep);
    if (is_mean) {
        int64_t n = pbl_shape_numel(&keep);
        float inv = (float)((double)n / (double)PBL__NUMEL(a->in_meta[0]));
        for (int64_t i = 0; i < n; i++)
            y[i] *= inv;
    }
    return PBL_OK;
}

pbl_status pbl__cpu_sum(const pbl__kargs *a) { return reduce(a, 0); }
pbl_status pbl__cpu_mean(const pbl__kargs *a) { return reduce(a, 1); }

pbl_status pbl__cpu_sum_to(const pbl__kargs *a)
{
    sum_into(a, PBL__OUT(a, 0), PBL__IN(a, 0), &a->in_meta[0].shape, &a->out_meta[0].shape);
    return PBL_OK;
}

pbl_status pbl__cpu_broadcast_to(const pbl__kargs *a)
{
    pbl__bcast bc;
    pbl__bcast_init(&bc, &a->out_meta[0].shape, &a->in_meta[0].shape);
    const float *x = PBL__IN(a, 0);
    float *y = PBL__OUT(a, 0);
    for (int64_t r = 0; r < bc.rows; r++) {
        const float *xr = x + pbl__bcast_row_offset(&bc, r);
        float *yr = y + r * bc.cols;
        if (bc.col_stride)
            memcpy(yr, xr, (size_t)bc.cols * sizeof *yr);
        else
            for (int64_t j = 0; j < bc.cols; j++)
                yr[j] = xr[0];
    }
    return PBL_OK;
}

/* ---- reduce / reduce_grad / arg_reduce ------------------------------------------------------
 * x split into groups, one per element of the reduced ("keep") shape: a group's elements lie at
 * its base offset (from its coordinates on the kept dims) plus an offset over the reduced dims.
 * Both offsets come from an index by division, dims outer first, so a group is read in
 * increasing offset order. */
typedef struct red_walk {
    int32_t n_kept, n_red;
    int64_t kept[PBL_MAX_DIMS], kept_stride[PBL_MAX_DIMS];
    int64_t red[PBL_MAX_DIMS], red_stride[PBL_MAX_DIMS];
    int64_t groups, per_group;
} red_walk;

static void red_walk_init(red_walk *w, const pbl_shape *x, const pbl_shape *keep)
{
    int64_t st = 1, xst[PBL_MAX_DIMS];
    for (int32_t i = x->ndim - 1; i >= 0; i--) {
        xst[i] = st;
        st *= x->dim[i];
    }
    w->n_kept = w->n_red = 0;
    w->groups = w->per_group = 1;
    /* adjacent dims of the same kind merge into one (row-major: the outer one's stride is the
     * inner one's times its size), so reducing the trailing dims, or all, walks one run */
    int prev = -1; /* 0 kept, 1 reduced */
    for (int32_t i = 0; i < x->ndim; i++) {
        int red = keep->dim[i] != x->dim[i];
        int64_t *size = red ? w->red : w->kept, *stride = red ? w->red_stride : w->kept_stride;
        int32_t *n = red ? &w->n_red : &w->n_kept;
        if (red == prev) {
            size[*n - 1] *= x->dim[i];
            stride[*n - 1] = xst[i];
        } else {
            size[*n] = x->dim[i];
            stride[(*n)++] = xst[i];
        }
        prev = red;
        if (red)
            w->per_group *= x->dim[i];
        else
            w->groups *= x->dim[i];
    }
}

static int64_t walk_at(const int64_t *size, const int64_t *stride, int32_t n, int64_t idx)
{
    int64_t off = 0;
    for (int32_t d = n - 1; d >= 0; d--) {
        off += (idx % size[d]) * stride[d];
        idx /= size[d];
    }
    return off;
}

typedef struct red_job {
    red_walk     w;
    const float *x, *y, *dy;
    float       *out;
    int64_t      mode;
} red_job;

static void red_fwd_range(void *ctx, int64_t lo, int64_t hi)
{
    const red_job *j = ctx;
    const red_walk *w = &j->w;
    for (int64_t g = lo; g < hi; g++) {
        const float *x = j->x + walk_at(w->kept, w->kept_stride, w->n_kept, g);
#define AT(r) x[walk_at(w->red, w->red_stride, w->n_red, (r))]
        double acc;
        switch (j->mode) {
        case PBL__RED_MAX:
        case PBL__RED_MIN:
        case PBL__RED_LOG_SUM_EXP: {
            float m = AT(0);
            for (int64_t r = 1; r < w->per_group; r++) {
                float v = AT(r);
                if (j->mode == PBL__RED_MIN ? v < m : v > m)
                    m = v;
            }
            if (j->mode != PBL__RED_LOG_SUM_EXP || isinf(m)) {
                j->out[g] = m;
                continue;
            }
            acc = 0;
            for (int64_t r = 0; r < w->per_group; r++)
                acc += exp((double)AT(r) - m);
            j->out[g] = (float)(m + log(acc));
            continue;
        }
        case PBL__RED_PROD:
            acc = 1;
            for (int64_t r = 0; r < w->per_group; r++)
                acc *= AT(r);
            break;
        case PBL__RED_L1:
            acc = 0;
            for (int64_t r = 0; r < w->per_group; r++)
                acc += fabs((double)AT(r));
            break;
        default: /* L2, log-sum, sum of squares: sums first */
            acc = 0;
            for (int64_t r = 0; r < w->per_group; r++) {
                double v = AT(r);
                acc += j->mode == PBL__RED_LOG_SUM ? v : v * v;
            }
            if (j->mode == PBL__RED_L2)
                acc = sqrt(acc);
            else if (j->mode == PBL__RED_LOG_SUM)
                acc = log(acc);
        }
        j->out[g] = (float)acc;
    }
}

/* dx of one group: what each mode's derivative is, given the group's y and dy */
static void red_bwd_range(void *ctx, int64_t lo, int64_t hi)
{
    const red_job *j = ctx;
    const red_walk *w = &j->w;
    for (int64_t g = lo; g < hi; g++) {
        int64_t base = walk_at(w->kept, w->kept_stride, w->n_kept, g);
        const float *x = j->x + base;
        float *dx = j->out + base;
        double y = j->y[g], d = j->dy[g];
#define DX(r) dx[walk_at(w->red, w->red_stride, w->n_red, (r))]
        if (j->mode == PBL__RED_MAX || j->mode == PBL__RED_MIN) {
            /* ties share dy equally: the sum of dx is dy, as for any one of them */
            int64_t ties = 0;
            for (int64_t r = 0; r < w->per_group; r++)
                ties += AT(r) == (float)y;
            for (int64_t r = 0; r < w->per_group; r++)
                DX(r) = AT(r) == (float)y ? (float)(d / (double)ties) : 0.0f;
            continue;
        }
        if (j->mode == PBL__RED_PROD) {
            /* the product of the others, without dividing by a zero */
            int64_t zeros = 0;
            double nz = 1;
            for (int64_t r = 0; r < w->per_group; r++) {
                float v = AT(r);
                if (v == 0.0f)
                    zeros++;
                else
                    nz *= v;
            }
            for (int64_t r = 0; r < w->per_group; r++) {
                float v = AT(r);
                double others = zeros == 0 ? nz / v : zeros == 1 && v == 0.0f ? nz : 0.0;
                DX(r) = (float)(d * others);
            }
            continue;
        }
        for (int64_t r = 0; r < w->per_group; r++) {
            double v = AT(r), g1;
            switch (j->mode) {
            case PBL__RED_L1: g1 = v > 0 ? 1 : v < 0 ? -1 : 0; break;
            case PBL__RED_L2: g1 = y > 0 ? v / y : 0; break;
            case PBL__RED_LOG_SUM_EXP: g1 = exp(v - y); break;
            case PBL__RED_LOG_SUM: g1 = exp(-y); break;
            default: g1 = 2 * v; break; /* sum of squares */
            }
            DX(r) = (float)(d * g1);
        }
#undef DX
#undef AT
    }
}

static void red_job_init(red_job *j, const pbl__kargs *a)
{
    pbl_shape keep;
    char err[64];
    pbl__reduce_keep_shape(&a->in_meta[0].shape, a->attr, &keep, err, sizeof err);
    red_walk_init(&j->w, &a->in_meta[0].shape, &keep);
    j->x = PBL__IN(a, 0);
    j->mode = a->attr[PBL__RED_A_MODE].i;
}

pbl_status pbl__cpu_reduce(const pbl__kargs *a)
{
    red_job j;
    red_job_init(&j, a);
    j.out = PBL__OUT(a, 0);
    pbl__cpu_for(a, j.w.groups, j.w.per_group, red_fwd_range, &j);
    return PBL_OK;
}

pbl_status pbl__cpu_reduce_grad(const pbl__kargs *a)
{
    red_job j;
    red_job_init(&j, a);
    j.y = PBL__IN(a, 1);
    j.dy = PBL__IN(a, 2);
    j.out = PBL__OUT(a, 0);
    pbl__cpu_for(a, j.w.groups, 2 * j.w.per_group, red_bwd_range, &j);
    return PBL_OK;
}

/* y[outer, inner] = the index along axis (n long) of the first (or last) max (or min) */
typedef struct arg_job {
    const float *x;
    int32_t     *y;
    int64_t      n, inner;
    int          is_min, last;
} arg_job;

static void arg_range(void *ctx, int64_t lo, int64_t hi)
{
    const arg_job *j = ctx;
    for (int64_t o = lo; o < hi; o++) {
        const float *xr = j->x + (o / j->inner) * j->n * j->inner + o % j->inner;
        int64_t best = 0;
        for (int64_t k = 1; k < j->n; k++) {
            float v = xr[k * j->inner], b = xr[best * j->inner];
            if ((j->is_min ? v < b : v > b) || (j->last && v == b))
                best = k;
        }
        j->y[o] = (int32_t)best;
    }
}

pbl_status pbl__cpu_arg_reduce(const pbl__kargs *a)
{
    pbl__axis_split sp = pbl__arg_reduce_split(&a->in_meta[0].shape, a->attr);
    arg_job j = { .x = PBL__IN(a, 0), .y = (int32_t *)a->out[0], .n = sp.n, .inner = sp.inner,
                  .is_min = a->attr[PBL__ARG_A_MODE].i != 0, .last = a->attr[PBL__ARG_A_LAST].i != 0 };
    /* one output per (outer, inner) pair, each a pass of n reads */
    pbl__cpu_for(a, sp.outer * sp.inner, sp.n, arg_range, &j);
    return PBL_OK;
}
