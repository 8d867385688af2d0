/* CUDA kernels: softmax, log_softmax and their gradients over the last dim, one thread per
 * row (each row read fully before it is written, so in-place runs are safe), with the CPU's
 * max subtraction and order of additions within a row. */
#include "ops/cuda/common.cuh"

static void rows_of(const pbl__meta *m, int64_t *rows, int64_t *cols)
{
    *cols = m->shape.dim[m->shape.ndim - 1];
    *rows = pbl_shape_numel(&m->shape) / *cols;
}

/* x: [rows, cols] */
__global__ static void softmax_k(float *y, const float *x, int64_t rows, int64_t cols, int logarithm)
{
    PBL__GRID_LOOP(r, rows) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float mx = pbl__row_max(xr, cols);
        float sum = pbl__row_sum_exp(xr, cols, mx, logarithm ? NULL : yr);
        if (logarithm) {
            float lse = mx + logf(sum);
            for (int64_t j = 0; j < cols; j++)
                yr[j] = xr[j] - lse;
        } else {
            float inv = 1.0f / sum;
            for (int64_t j = 0; j < cols; j++)
                yr[j] *= inv;
        }
    }
}

/* softmax: dx = y·(dy − Σ dy·y); log_softmax: dx = dy − exp(y)·Σ dy */
__global__ static void softmax_grad_k(float *dx, const float *dy, const float *y, int64_t rows, int64_t cols,
                                      int logarithm)
{
    PBL__GRID_LOOP(r, rows) {
        const float *dyr = dy + r * cols, *yr = y + r * cols;
        float *dxr = dx + r * cols;
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; j++)
            acc += logarithm ? dyr[j] : dyr[j] * yr[j];
        for (int64_t j = 0; j < cols; j++)
            dxr[j] = logarithm ? dyr[j] - expf(yr[j]) * acc : yr[j] * (dyr[j] - acc);
    }
}

static pbl_status forward(const pbl__cuda_launch *l, const pbl__kargs *a, int logarithm)
{
    pbl_status s = PBL_OK;
    int64_t rows, cols;
    rows_of(&a->in_meta[0], &rows, &cols);
    PBL__LAUNCH(softmax_k, pbl__blocks(rows), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0), rows, cols, logarithm);
    PBL__LAUNCHED();
done:
    return s;
}

static pbl_status backward(const pbl__cuda_launch *l, const pbl__kargs *a, int logarithm)
{
    pbl_status s = PBL_OK;
    int64_t rows, cols;
    rows_of(&a->in_meta[0], &rows, &cols);
    PBL__LAUNCH(softmax_grad_k, pbl__blocks(rows), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0), PBL__IN(a, 1),
                                                                      rows, cols, logarithm);
    PBL__LAUNCHED();
done:
    return s;
}

extern "C" pbl_status pbl__cuda_softmax(const pbl__cuda_launch *l, const pbl__kargs *a) { return forward(l, a, 0); }
extern "C" pbl_status pbl__cuda_log_softmax(const pbl__cuda_launch *l, const pbl__kargs *a) { return forward(l, a, 1); }
extern "C" pbl_status pbl__cuda_softmax_grad(const pbl__cuda_launch *l, const pbl__kargs *a) { return backward(l, a, 0); }
extern "C" pbl_status pbl__cuda_log_softmax_grad(const pbl__cuda_launch *l, const pbl__kargs *a) { return backward(l, a, 1); }

/* hardmax: one thread per row of the last dim */
__global__ static void hardmax_k(float *y, const float *x, int64_t rows, int64_t cols)
{
    PBL__GRID_LOOP(r, rows) {
        const float *xr = x + r * cols;
        int64_t best = 0;
        for (int64_t j = 1; j < cols; j++)
            if (xr[j] > xr[best])
                best = j;
        for (int64_t j = 0; j < cols; j++)
            y[r * cols + j] = j == best ? 1.0f : 0.0f;
    }
}

extern "C" pbl_status pbl__cuda_hardmax(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    const pbl_shape *xs = &a->in_meta[0].shape;
    int64_t cols = xs->dim[xs->ndim - 1], rows = pbl_shape_numel(xs) / cols;
    PBL__LAUNCH(hardmax_k, pbl__blocks(rows), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0), rows, cols);
    PBL__LAUNCHED();
done:
    return s;
}
