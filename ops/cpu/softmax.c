/* CPU kernels: softmax, log_softmax and their gradients, row by row over the last dim.
 * Max-subtracted, so large inputs do not overflow. Each row is read fully before it is
 * written, so in-place runs are safe. */
#include <math.h>
#include <string.h>

#include "ops/cpu/kernels.h"

static void rows_of(const pbl__meta *m, int64_t *rows, int64_t *cols)
{
    *cols = m->shape.dim[m->shape.ndim - 1];
    *rows = pbl_shape_numel(&m->shape) / *cols;
}

enum {
    EXP_SEG = 1024,  /* values per call of the vector exp: a stack buffer of 4 KiB */
    ROW_BLOCK = 256, /* rows whose max and sum the kernels below hold at a time */
};

void pbl__cpu_rows_sum_exp(const float *x, int64_t rows, int64_t cols, float *e, float *mx, float *sum)
{
    float buf[EXP_SEG];
    for (int64_t r = 0; r < rows; r++) {
        mx[r] = pbl__row_max(x + r * cols, cols);
        sum[r] = 0.0f;
    }
    /* short rows `per` at a time, a long row in pieces of EXP_SEG: every pass holds at most
     * EXP_SEG values, read from x before e (maybe x) is written */
    int64_t per = cols < EXP_SEG ? EXP_SEG / cols : 1, piece = cols < EXP_SEG ? cols : EXP_SEG;
    for (int64_t r0 = 0; r0 < rows; r0 += per) {
        int64_t r1 = r0 + per < rows ? r0 + per : rows;
        for (int64_t j0 = 0; j0 < cols; j0 += piece) {
            int64_t len = cols - j0 < piece ? cols - j0 : piece;
            for (int64_t r = r0; r < r1; r++)
                for (int64_t j = 0; j < len; j++)
                    buf[(r - r0) * len + j] = x[r * cols + j0 + j] - mx[r];
            pbl__cpu_exp_n(buf, buf, (r1 - r0) * len);
            for (int64_t r = r0; r < r1; r++) {
                const float *v = buf + (r - r0) * len;
                float acc = sum[r];
                for (int64_t j = 0; j < len; j++)
                    acc += v[j];
                sum[r] = acc;
                if (e)
                    memcpy(e + r * cols + j0, v, (size_t)len * sizeof *v);
            }
        }
    }
}

pbl_status pbl__cpu_softmax(const pbl__kargs *a)
{
    int64_t rows, cols;
    rows_of(&a->in_meta[0], &rows, &cols);
    float mx[ROW_BLOCK], sum[ROW_BLOCK];
    for (int64_t r0 = 0; r0 < rows; r0 += ROW_BLOCK) {
        int64_t nr = rows - r0 < ROW_BLOCK ? rows - r0 : ROW_BLOCK;
        float *y = PBL__OUT(a, 0) + r0 * cols;
        pbl__cpu_rows_sum_exp(PBL__IN(a, 0) + r0 * cols, nr, cols, y, mx, sum);
        for (int64_t r = 0; r < nr; r++) {
            float inv = 1.0f / sum[r];
            for (int64_t j = 0; j < cols; j++)
                y[r * cols + j] *= inv;
        }
    }
    return PBL_OK;
}

pbl_status pbl__cpu_log_softmax(const pbl__kargs *a)
{
    int64_t rows, cols;
    rows_of(&a->in_meta[0], &rows, &cols);
    float mx[ROW_BLOCK], sum[ROW_BLOCK];
    for (int64_t r0 = 0; r0 < rows; r0 += ROW_BLOCK) {
        int64_t nr = rows - r0 < ROW_BLOCK ? rows - r0 : ROW_BLOCK;
        const float *x = PBL__IN(a, 0) + r0 * cols;
        float *y = PBL__OUT(a, 0) + r0 * cols;
        pbl__cpu_rows_sum_exp(x, nr, cols, NULL, mx, sum);
        for (int64_t r = 0; r < nr; r++) {
            float lse = mx[r] + logf(sum[r]);
            for (int64_t j = 0; j < cols; j++)
                y[r * cols + j] = x[r * cols + j] - lse;
        }
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
