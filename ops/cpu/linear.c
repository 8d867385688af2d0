/* CPU kernels for fully_connected and matmul: cblas_sgemm. */
#include <cblas.h>
#include <string.h>

#include "ops/cpu/kernels.h"
#include "ops/shared/geometry.h"

pbl_status pbl__cpu_fully_connected(const pbl__kargs *a)
{
    const float *x = PBL__IN(a, 0), *w = PBL__IN(a, 1);
    float *y = PBL__OUT(a, 0);
    int n = (int)a->in_meta[0].shape.dim[0], in = (int)a->in_meta[0].shape.dim[1];
    int out = (int)a->in_meta[1].shape.dim[0];
    float beta = 0.0f;
    if (a->n_in == 3) {
        /* y: [n, out] starts as b in every row, then y += x·wᵀ */
        const float *b = PBL__IN(a, 2);
        for (int i = 0; i < n; i++)
            memcpy(y + (size_t)i * out, b, (size_t)out * sizeof *y);
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, x, in, w, in, beta, y, out);
    return PBL_OK;
}

pbl_status pbl__cpu_matmul(const pbl__kargs *a)
{
    pbl__matmul_geom g = pbl__matmul_geom_of(a);
    for (int64_t i = 0; i < g.batch; i++)
        cblas_sgemm(CblasRowMajor, g.ta ? CblasTrans : CblasNoTrans, g.tb ? CblasTrans : CblasNoTrans, g.m, g.n, g.k,
                    1.0f, PBL__IN(a, 0) + i * g.a_stride, g.lda, PBL__IN(a, 1) + i * g.b_stride, g.ldb, 0.0f,
                    PBL__OUT(a, 0) + i * (int64_t)g.m * g.n, g.n);
    return PBL_OK;
}
