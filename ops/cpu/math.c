/* CPU kernels of the math family (ops/math.c): the formulas of ops/shared/math.h over each
 * element. Every element reads only its own index of the full-shape operands, so the maps may
 * run in place (a gradient over dy). Every dtype pebble has is 4 bytes wide, so the broadcast
 * walk below moves 4-byte elements whatever they hold. */
#include <string.h>

#include "ops/shared/broadcast.h"
#include "ops/shared/math.h"
#include "ops/cpu/kernels.h"

/* The op's float attribute k (p, q of the formulas), 0 when it has fewer */
#define ATTR_F(a, na, k) ((na) > (k) ? (float)(a)->attr[k].f : 0.0f)

/* ---- unary: y = f(x), dx = dy·f'(x) ------------------------------------------------------- */

#define UNARY(n)                                                                                    \
    PBL__HOT static void n##_range(void *ctx, int64_t lo, int64_t hi)                              \
    {                                                                                               \
        const pbl__kargs *a = ctx;                                                                  \
        const float *x = PBL__IN(a, 0);                                                             \
        float *y = PBL__OUT(a, 0);                                                                  \
        float p = ATTR_F(a, PBL__MATH_ATTRS_##n, 0), q = ATTR_F(a, PBL__MATH_ATTRS_##n, 1);         \
        for (int64_t i = lo; i < hi; i++)                                                           \
            y[i] = pbl__mf_##n(x[i], p, q);                                                         \
    }                                                                                               \
    PBL__HOT static void n##_grad_range(void *ctx, int64_t lo, int64_t hi)                         \
    {                                                                                               \
        const pbl__kargs *a = ctx;                                                                  \
        const float *dy = PBL__IN(a, 0), *x = PBL__IN(a, 1);                                        \
        float *dx = PBL__OUT(a, 0);                                                                 \
        float p = ATTR_F(a, PBL__MATH_ATTRS_##n, 0), q = ATTR_F(a, PBL__MATH_ATTRS_##n, 1);         \
        for (int64_t i = lo; i < hi; i++)                                                           \
            dx[i] = dy[i] * pbl__md_##n(x[i], p, q);                                                \
    }                                                                                               \
    pbl_status pbl__cpu_##n(const pbl__kargs *a)                                                    \
    {                                                                                               \
        pbl__cpu_for(a, PBL__NUMEL(a->in_meta[0]), 8, n##_range, (void *)a);                        \
        return PBL_OK;                                                                              \
    }                                                                                               \
    pbl_status pbl__cpu_##n##_grad(const pbl__kargs *a)                                             \
    {                                                                                               \
        pbl__cpu_for(a, PBL__NUMEL(a->in_meta[0]), 8, n##_grad_range, (void *)a);                   \
        return PBL_OK;                                                                              \
    }
PBL__MATH_UNARY_LIST(UNARY, )

/* ---- broadcast binary: y[rows, cols] from full-shape operands and one broadcast operand b ---- */

/* One row: y[j] = f(full[0][j], ..., b[j·bstride]) for j < cols; `wrt` picks a gradient's side. */
typedef void (*row_fn)(void *y, const void *const *full, const void *b, int64_t cols, int64_t bstride, int64_t wrt);

/* y and the n_full operands have the shape of input `big`; input ib broadcasts to it. */
static void walk(const pbl__kargs *a, int32_t big, int32_t ib, int32_t n_full, const int32_t *full, int64_t wrt, row_fn row)
{
    pbl__bcast bc;
    pbl__bcast_init(&bc, &a->in_meta[big].shape, &a->in_meta[ib].shape);
    const char *b = a->in[ib];
    char *y = a->out[0];
    const void *f[3];
    if (bc.small_numel == PBL__NUMEL(a->in_meta[big])) { /* no broadcast: one long row */
        for (int32_t k = 0; k < n_full; k++)
            f[k] = a->in[full[k]];
        row(y, f, b, bc.rows * bc.cols, 1, wrt);
        return;
    }
    for (int64_t r = 0; r < bc.rows; r++) {
        int64_t at = r * bc.cols * 4;
        for (int32_t k = 0; k < n_full; k++)
            f[k] = (const char *)a->in[full[k]] + at;
        row(y + at, f, b + pbl__bcast_row_offset(&bc, r) * 4, bc.cols, bc.col_stride, wrt);
    }
}

/* y = f(a, b); dx = dy·∂f/∂a or dy·∂f/∂b (wrt 0 or 1), inputs (dy, a, b) */
#define BINARY(n)                                                                                   \
    static void n##_row(void *y, const void *const *f, const void *b, int64_t cols, int64_t bs, int64_t wrt) \
    {                                                                                               \
        const float *x = f[0], *v = b;                                                              \
        float *o = y;                                                                               \
        (void)wrt;                                                                                  \
        for (int64_t j = 0; j < cols; j++)                                                          \
            o[j] = pbl__mf_##n(x[j], v[j * bs]);                                                    \
    }                                                                                               \
    static void n##_grad_row(void *y, const void *const *f, const void *b, int64_t cols, int64_t bs, int64_t wrt) \
    {                                                                                               \
        const float *dy = f[0], *x = f[1], *v = b;                                                  \
        float *o = y;                                                                               \
        if (wrt == 0)                                                                               \
            for (int64_t j = 0; j < cols; j++)                                                      \
                o[j] = dy[j] * pbl__mda_##n(x[j], v[j * bs]);                                       \
        else                                                                                        \
            for (int64_t j = 0; j < cols; j++)                                                      \
                o[j] = dy[j] * pbl__mdb_##n(x[j], v[j * bs]);                                       \
    }                                                                                               \
    pbl_status pbl__cpu_##n(const pbl__kargs *a)                                                    \
    {                                                                                               \
        walk(a, 0, 1, 1, (const int32_t[]){ 0 }, 0, n##_row);                                       \
        return PBL_OK;                                                                              \
    }                                                                                               \
    pbl_status pbl__cpu_##n##_grad(const pbl__kargs *a)                                             \
    {                                                                                               \
        walk(a, 1, 2, 2, (const int32_t[]){ 0, 1 }, a->attr[0].i, n##_grad_row);                    \
        return PBL_OK;                                                                              \
    }
PBL__MATH_BINARY_LIST(BINARY, )

/* ---- comparisons and logic: int32 0/1 ----------------------------------------------------- */

#define COMPARE(n)                                                                                  \
    static void n##_f_row(void *y, const void *const *f, const void *b, int64_t cols, int64_t bs, int64_t wrt) \
    {                                                                                               \
        const float *x = f[0], *v = b;                                                              \
        int32_t *o = y;                                                                             \
        (void)wrt;                                                                                  \
        for (int64_t j = 0; j < cols; j++)                                                          \
            o[j] = pbl__mcf_##n(x[j], v[j * bs]);                                                   \
    }                                                                                               \
    static void n##_i_row(void *y, const void *const *f, const void *b, int64_t cols, int64_t bs, int64_t wrt) \
    {                                                                                               \
        const int32_t *x = f[0], *v = b;                                                            \
        int32_t *o = y;                                                                             \
        (void)wrt;                                                                                  \
        for (int64_t j = 0; j < cols; j++)                                                          \
            o[j] = pbl__mci_##n(x[j], v[j * bs]);                                                   \
    }                                                                                               \
    pbl_status pbl__cpu_##n(const pbl__kargs *a)                                                    \
    {                                                                                               \
        walk(a, 0, 1, 1, (const int32_t[]){ 0 }, 0, a->in_meta[0].dtype == PBL_F32 ? n##_f_row : n##_i_row); \
        return PBL_OK;                                                                              \
    }
PBL__MATH_COMPARE_LIST(COMPARE)
PBL__MATH_LOGIC_LIST(COMPARE)

#define PREDICATE(n)                                                                                \
    pbl_status pbl__cpu_##n(const pbl__kargs *a)                                                    \
    {                                                                                               \
        const float *x = PBL__IN(a, 0);                                                             \
        int32_t *y = a->out[0];                                                                     \
        int64_t p = PBL__MATH_ATTRS_##n > 0 ? a->attr[0].i : 0, q = PBL__MATH_ATTRS_##n > 1 ? a->attr[1].i : 0; \
        int64_t cnt = PBL__NUMEL(a->in_meta[0]);                                                    \
        for (int64_t i = 0; i < cnt; i++)                                                           \
            y[i] = pbl__mp_##n(x[i], p, q);                                                         \
        return PBL_OK;                                                                              \
    }
PBL__MATH_PREDICATE_LIST(PREDICATE)

#define INT_MAP(n)                                                                                  \
    static void n##_row(void *y, const void *const *f, const void *b, int64_t cols, int64_t bs, int64_t wrt) \
    {                                                                                               \
        const int32_t *x = f[0], *v = b;                                                            \
        int32_t *o = y;                                                                             \
        (void)wrt;                                                                                  \
        for (int64_t j = 0; j < cols; j++)                                                          \
            o[j] = pbl__mi_##n(x[j], v[j * bs]);                                                    \
    }                                                                                               \
    pbl_status pbl__cpu_##n(const pbl__kargs *a)                                                    \
    {                                                                                               \
        walk(a, 0, 1, 1, (const int32_t[]){ 0 }, 0, n##_row);                                       \
        return PBL_OK;                                                                              \
    }
PBL__MATH_INT_LIST(INT_MAP)

pbl_status pbl__cpu_logical_not(const pbl__kargs *a)
{
    const int32_t *x = a->in[0];
    int32_t *y = a->out[0];
    int64_t n = PBL__NUMEL(a->in_meta[0]);
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] == 0;
    return PBL_OK;
}

/* cond ? x : y, element by element; x and y of any (4-byte) dtype */
pbl_status pbl__cpu_where(const pbl__kargs *a)
{
    const int32_t *c = a->in[0];
    const uint32_t *x = a->in[1], *y = a->in[2];
    uint32_t *o = a->out[0];
    int64_t n = PBL__NUMEL(a->in_meta[0]);
    for (int64_t i = 0; i < n; i++)
        o[i] = c[i] ? x[i] : y[i];
    return PBL_OK;
}
