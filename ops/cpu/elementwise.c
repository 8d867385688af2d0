/* CPU kernels: add, sub, mul, div with broadcasting (add, sub, mul over i32 too); scale, add_n, fill, copy. */
#include <string.h>

#include "ops/shared/broadcast.h"
#include "ops/cpu/kernels.h"

typedef enum { BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV } bin_kind;

/* y[rows, cols] = a (op) b, b read along each row with stride 0 or 1 */
static void binary_row(bin_kind k, float *y, const float *a, const float *b,
                       int64_t cols, int64_t bstride)
{
    if (bstride == 1) {
        switch (k) {
        case BIN_ADD: for (int64_t j = 0; j < cols; j++) y[j] = a[j] + b[j]; break;
        case BIN_SUB: for (int64_t j = 0; j < cols; j++) y[j] = a[j] - b[j]; break;
        case BIN_MUL: for (int64_t j = 0; j < cols; j++) y[j] = a[j] * b[j]; break;
        case BIN_DIV: for (int64_t j = 0; j < cols; j++) y[j] = a[j] / b[j]; break;
        }
    } else {
        float s = b[0];
        switch (k) {
        case BIN_ADD: for (int64_t j = 0; j < cols; j++) y[j] = a[j] + s; break;
        case BIN_SUB: for (int64_t j = 0; j < cols; j++) y[j] = a[j] - s; break;
        case BIN_MUL: for (int64_t j = 0; j < cols; j++) y[j] = a[j] * s; break;
        case BIN_DIV: for (int64_t j = 0; j < cols; j++) y[j] = a[j] / s; break;
        }
    }
}

/* The i32 form of add, sub, mul: wrapping (computed unsigned, so overflow is defined) */
static int32_t int_op(bin_kind k, int32_t u, int32_t v)
{
    uint32_t x = (uint32_t)u, y = (uint32_t)v;
    return (int32_t)(k == BIN_ADD ? x + y : k == BIN_SUB ? x - y : x * y);
}

static pbl_status binary_int(const pbl__kargs *a, bin_kind k)
{
    const int32_t *x = a->in[0], *b = a->in[1];
    int32_t *y = a->out[0];
    pbl__bcast bc;
    pbl__bcast_init(&bc, &a->in_meta[0].shape, &a->in_meta[1].shape);
    for (int64_t r = 0; r < bc.rows; r++) {
        const int32_t *br = b + pbl__bcast_row_offset(&bc, r);
        for (int64_t j = 0; j < bc.cols; j++)
            y[r * bc.cols + j] = int_op(k, x[r * bc.cols + j], br[j * bc.col_stride]);
    }
    return PBL_OK;
}

/* May run in place (y is a): each y element reads only the a element at its own index.
 * No restrict on purpose, for that reason. */
static pbl_status binary(const pbl__kargs *a, bin_kind k)
{
    if (a->in_meta[0].dtype == PBL_I32)
        return binary_int(a, k);
    const float *x = PBL__IN(a, 0), *b = PBL__IN(a, 1);
    float *y = PBL__OUT(a, 0);
    pbl__bcast bc;
    pbl__bcast_init(&bc, &a->in_meta[0].shape, &a->in_meta[1].shape);
    if (bc.small_numel == PBL__NUMEL(a->in_meta[0])) {
        binary_row(k, y, x, b, bc.rows * bc.cols, 1);
        return PBL_OK;
    }
    for (int64_t r = 0; r < bc.rows; r++)
        binary_row(k, y + r * bc.cols, x + r * bc.cols, b + pbl__bcast_row_offset(&bc, r), bc.cols, bc.col_stride);
    return PBL_OK;
}

pbl_status pbl__cpu_add(const pbl__kargs *a) { return binary(a, BIN_ADD); }
pbl_status pbl__cpu_sub(const pbl__kargs *a) { return binary(a, BIN_SUB); }
pbl_status pbl__cpu_mul(const pbl__kargs *a) { return binary(a, BIN_MUL); }
pbl_status pbl__cpu_div(const pbl__kargs *a) { return binary(a, BIN_DIV); }

pbl_status pbl__cpu_scale(const pbl__kargs *a)
{
    const float *x = PBL__IN(a, 0);
    float *y = PBL__OUT(a, 0);
    float alpha = (float)a->attr[0].f;
    int64_t n = PBL__NUMEL(a->in_meta[0]);
    for (int64_t i = 0; i < n; i++)
        y[i] = alpha * x[i];
    return PBL_OK;
}

pbl_status pbl__cpu_add_n(const pbl__kargs *a)
{
    float *y = PBL__OUT(a, 0);
    int64_t n = PBL__NUMEL(a->in_meta[0]);
    if (y != PBL__IN(a, 0))
        memcpy(y, PBL__IN(a, 0), (size_t)n * sizeof *y);
    for (int32_t k = 1; k < a->n_in; k++) {
        const float *x = PBL__IN(a, k);
        for (int64_t i = 0; i < n; i++)
            y[i] += x[i];
    }
    return PBL_OK;
}

pbl_status pbl__cpu_fill(const pbl__kargs *a)
{
    float *y = PBL__OUT(a, 0);
    float v = (float)a->attr[1].f;
    int64_t n = PBL__NUMEL(a->out_meta[0]);
    for (int64_t i = 0; i < n; i++)
        y[i] = v;
    return PBL_OK;
}

pbl_status pbl__cpu_copy(const pbl__kargs *a)
{
    if (a->out[0] != a->in[0])
        memcpy(a->out[0], a->in[0], pbl__meta_bytes(&a->in_meta[0]));
    return PBL_OK;
}
