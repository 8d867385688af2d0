/* CPU kernels: softmax, log_softmax and their gradients, row by row over the last dim.
 * Max-subtracted, so large inputs do not overflow. Each row is read fully before it is
 * written, so in-place runs are safe. */
#include <math.h>

#include "ops/cpu/kernels.h"

static void rows_of(const pbl__meta *m, int64_t *rows, int64_t *cols)
{
    *cols = m->shape.dim[m->shape.ndim - 1];
    *rows = pbl_shape_numel(&m->shape) / *cols;
}

pbl_status pbl__cpu_softmax(const pbl__kargs *a)
{
    int64_t rows, cols;
    rows_of(&a->in_meta[0], &rows, &cols);
    for (int64_t r = 0; r < rows; r++) {
        const float *x = PBL__IN(a, 0) + r * cols;
        float *y = PBL__OUT(a, 0) + r * cols;
        float inv = 1.0f / pbl__row_sum_exp(x, cols, pbl__row_max(x, cols), y);
        for (int64_t j = 0; j < cols; j++)
            y[j] *= inv;
    }
    return PBL_OK;
}

pbl_status pbl__cpu_log_softmax(const pbl__kargs *a)
{
    int64_t rows, cols;
    rows_of(&a->in_meta[0], &rows, &cols);
    for (int64_t r = 0; r < rows; r++) {
        const float *x = PBL__IN(a, 0) + r * cols;
        float *y = PBL__OUT(a, 0) + r * cols;
        float mx = pbl__row_max(x, cols);
        float lse = mx + logf(pbl__row_sum_exp(x, cols, mx, NULL));
        for (int64_t j = 0; j < cols; j++)
            y[j] = x[j] - lse;
    }
    return PBL_OK;
}

/* dx = y·(dy − Σ dy·y) */
pbl_status pbl__cpu_softmax_grad(const pbl__kargs *a)
{
    int64_t rows, cols;
    rows_of(&a->in_meta[0], &rows, &cols);
    for (int64_t r = 0; r < rows; r++) {
        const float *dy = PBL__IN(a, 0) + r * cols, *y = PBL__IN(a, 1) + r * cols;
        float *dx = PBL__OUT(a, 0) + r * cols;
        float dot = 0.0f;
        for (int64_t j = 0; j < cols; j++)
            dot += dy[j] * y[j];
        for (int64_t j = 0; j < cols; j++)
            dx[j] = y[j] * (dy[j] - dot);
    }
    return PBL_OK;
}

/* dx = dy − exp(y)·Σ dy */
pbl_status pbl__cpu_log_softmax_grad(const pbl__kargs *a)
{
    int64_t rows, cols;
    rows_of(&a->in_meta[0], &rows, &cols);
    for (int64_t r = 0; r < rows; r++) {
        const float *dy = PBL__IN(a, 0) + r * cols, *y = PBL__IN(a, 1) + r * cols;
        float *dx = PBL__OUT(a, 0) + r * cols;
        float sum = 0.0f;
        for (int64_t j = 0; j < cols; j++)
            sum += dy[j];
        for (int64_t j = 0; j < cols; j++)
            dx[j] = dy[j] - expf(y[j]) * sum;
    }
    return PBL_OK;
}

pbl_status pbl__cpu_hardmax(const pbl__kargs *a)
{
    int64_t rows, cols;
    rows_of(&a->in_meta[0], &rows, &cols);
    for (int64_t r = 0; r < rows; r++) {
        const float *x = PBL__IN(a, 0) + r * cols;
        float *y = PBL__OUT(a, 0) + r * cols;
        int64_t best = 0;
        for (int64_t j = 1; j < cols; j++)
            if (x[j] > x[best])
                best = j;
        for (int64_t j = 0; j < cols; j++)
            y[j] = j == best ? 1.0f : 0.0f;
    }
    return PBL_OK;
}
