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
