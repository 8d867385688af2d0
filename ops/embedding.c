/*
 * embedding: a table lookup, and its gradient op. Kernels in ops/cpu/embedding.c and
 * ops/cuda/embedding.cu; an id outside [0, V) fails the run with PBL_ERR_INVALID_ARG.
 *
 *   embedding       ids[...] i32, table[V,D]  ->  y[..., D]     y[i, :] = table[ids[i], :]
 *   embedding_grad  dy[..., D], ids[...] i32  ->  dtable[V,D]   num_embeddings = V
 *
 * The gradient scatters dy's rows into a zeroed [V, D] (summing repeats); it reads the ids,
 * never the table.
 */
#include "ops/cpu/kernels.h"

/* ids (input i) must be i32 and y's shape ids + [d], at most PBL_MAX_DIMS dims. */
static pbl_status ids_check(pbl__infer_ctx *c, int32_t i)
{
    if (c->in[i].dtype != PBL_I32)
        return pbl__infer_fail(c, PBL_ERR_DTYPE, "ids are %s, expected i32 row indices", pbl_dtype_name(c->in[i].dtype));
    if (c->in[i].shape.ndim >= PBL_MAX_DIMS) {
        char si[96];
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "ids are %s; the output would have more than %d dims",
                               pbl_shape_str(&c->in[i].shape, si, sizeof si), PBL_MAX_DIMS);
    }
    return PBL_OK;
}

static pbl_shape ids_plus(const pbl_shape *ids, int64_t d)
{
    pbl_shape s = *ids;
    s.dim[s.ndim++] = d;
    return s;
}

static pbl_status embedding_infer(pbl__infer_ctx *c)
{
    pbl_status s = ids_check(c, 0);
    if (s == PBL_OK)
        s = pbl__infer_check_f32(c, 1, "table");
    if (s != PBL_OK)
        return s;
    const pbl_shape *ids = &c->in[0].shape, *t = &c->in[1].shape;
    if (t->ndim != 2) {
        char si[96], st[96];
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "ids are %s and table is %s; need table [V, D]",
                               pbl_shape_str(ids, si, sizeof si), pbl_shape_str(t, st, sizeof st));
    }
    c->out[0].dtype = PBL_F32;
    c->out[0].shape = ids_plus(ids, t->dim[1]);
    return PBL_OK;
}

static pbl_status embedding_grad(pbl__grad_ctx *c)
{
    if (!c->need[1])
        return c->status;
    pbl_value_info ti;
    if (pbl_graph_value_info(c->g, c->x[1], &ti) != PBL_OK)
        return PBL_ERR_INVALID_ARG;
    pbl_attr at = PBL_ATTR_INT("num_embeddings", ti.shape.dim[0]);
    c->dx[1] = pbl__grad_emit(c, "embedding_grad", "grad_table", (pbl_value[]){ c->dy[0], c->x[0] }, 2, &at, 1);
    return c->status;
}

const pbl__op pbl__op_embedding = {
    .name = "embedding", .n_in_min = 2, .n_in_max = 2, .n_out = 1,
    .infer = embedding_infer, .grad = embedding_grad,
    .grad_reads_in = 0x1, /* the ids */
    .cpu = pbl__cpu_embedding,
};

static const pbl__attr_spec grad_attrs[] = { { .name = "num_embeddings", .type = PBL_ATTR_INT, .required = 1 } };

static pbl_status embedding_grad_infer(pbl__infer_ctx *c)
{
    pbl_status s = pbl__infer_check_f32(c, 0, "dy");
    if (s == PBL_OK)
        s = ids_check(c, 1);
    if (s != PBL_OK)
        return s;
    int64_t v = c->attr[0].i;
    if (v < 1)
        return pbl__infer_fail(c, PBL_ERR_ATTR, "num_embeddings is %lld; it must be at least 1", (long long)v);
    const pbl_shape *dy = &c->in[0].shape, *ids = &c->in[1].shape;
    int ok = dy->ndim == ids->ndim + 1;
    for (int32_t i = 0; ok && i < ids->ndim; i++)
        ok = dy->dim[i] == ids->dim[i];
    if (!ok) {
        char sd[96], si[96];
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "dy is %s and ids are %s; need dy [ids..., D]",
                               pbl_shape_str(dy, sd, sizeof sd), pbl_shape_str(ids, si, sizeof si));
    }
    c->out[0].dtype = PBL_F32;
    c->out[0].shape = pbl_shape_make(2, (int64_t[]){ v, dy->dim[dy->ndim - 1] });
    return PBL_OK;
}

const pbl__op pbl__op_embedding_grad = {
    .name = "embedding_grad", .n_in_min = 2, .n_in_max = 2, .n_out = 1,
    .attrs = grad_attrs, .n_attrs = 1,
    .infer = embedding_grad_infer,
    .cpu = pbl__cpu_embedding_grad,
};
