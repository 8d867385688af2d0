/* CPU kernels for fully_connected and matmul: cblas_sgemm. */
#include <cblas.h>
#include <string.h>

#include "ops/cpu/kernels.h"

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
    const pbl_shape *sa = &a->in_meta[0].shape, *sb = &a->in_meta[1].shape, *sc = &a->out_meta[0].shape;
    int r = sa->ndim;
    int ta = (int)a->attr[0].i, tb = (int)a->attr[1].i;
    int m = (int)sc->dim[r - 2], n = (int)sc->dim[r - 1];
    int k = (int)(ta ? sa->dim[r - 2] : sa->dim[r - 1]);
    int lda = (int)sa->dim[r - 1], ldb = (int)sb->dim[r - 1];
    int64_t batch = 1;
    for (int i = 0; i < r - 2; i++)
        batch *= sc->dim[i];
    size_t as = (size_t)sa->dim[r - 2] * sa->dim[r - 1], bs = (size_t)sb->dim[r - 2] * sb->dim[r - 1];
    for (int64_t i = 0; i < batch; i++)
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k,
                    1.0f, PBL__IN(a, 0) + i * as, lda, PBL__IN(a, 1) + i * bs, ldb, 0.0f,
                    PBL__OUT(a, 0) + i * (size_t)m * n, n);
    return PBL_OK;
}
