/*
 * Data parallelism's three ops (graph/passes/data_parallel.c inserts them), with their CPU
 * kernels here rather than in ops/cpu/: two are copies and the third is a call through the
 * communicator, so there is no arithmetic worth a file of its own.
 *
 *   bucket_pack(g_1 .. g_k) -> flat [sum of sizes]   the gradients, one after another
 *   allreduce(flat) -> flat'                          the sum over the ranks (then / ranks)
 *   bucket_unpack(flat') -> g_i                       elements [offset, offset + |g_i|)
 *
 * They are not differentiable: they come after the backward pass. The executor runs them on
 * the communication stream (pbl_exec_options.comm_overlap) and hands allreduce the
 * communicator through pbl__kargs.coll; without one (or with one rank) the sum of one rank is
 * the data itself, so a graph with these nodes also runs, unchanged, in one process.
 */
#include <string.h>

#include "ops/cpu/kernels.h"

/* ---- bucket_pack ------------------------------------------------------------------------ */

static pbl_status pack_infer(pbl__infer_ctx *c)
{
    int64_t total = 0;
    for (int32_t i = 0; i < c->n_in; i++) {
        pbl_status s = pbl__infer_check_f32(c, i, "gradient");
        if (s != PBL_OK)
            return s;
        total += pbl__cost_numel(&c->in[i]);
    }
    c->out[0].dtype = PBL_F32;
    c->out[0].shape = (pbl_shape){ .ndim = 1, .dim = { total } };
    return PBL_OK;
}

pbl_status pbl__cpu_bucket_pack(const pbl__kargs *a)
{
    char *out = a->out[0];
    for (int32_t i = 0; i < a->n_in; i++) { /* flat: [g_0 | g_1 | ... ] */
        size_t n = pbl__meta_bytes(&a->in_meta[i]);
        memcpy(out, a->in[i], n);
        out += n;
    }
    return PBL_OK;
}

const pbl__op pbl__op_bucket_pack = {
    .name = "bucket_pack", .n_in_min = 1, .n_in_max = PBL__MAX_IN, .n_out = 1,
    .infer = pack_infer,
    .cpu = pbl__cpu_bucket_pack,
};

/* ---- allreduce -------------------------------------------------------------------------- */

enum { AR_MEAN };
static const pbl__attr_spec allreduce_attrs[] = {
    { .name = "mean", .type = PBL_ATTR_INT, .i = 1 }, /* 1: divide the sum by the ranks */
};

static pbl_status allreduce_infer(pbl__infer_ctx *c)
{
    pbl_status s = pbl__infer_check_f32(c, 0, "bucket");
    if (s != PBL_OK)
        return s;
    c->out[0] = c->in[0];
    return PBL_OK;
}

static const int8_t allreduce_inplace[][2] = { { 0, 0 } };
/* No cost rule: the default (a map over the bucket) is what the node costs this process;
 * the wire's time is the link's, which bench/ models apart. */

pbl_status pbl__cpu_allreduce(const pbl__kargs *a)
{
    float *y = a->out[0];
    int64_t n = pbl__cost_numel(&a->out_meta[0]);
    if (a->out[0] != a->in[0])
        memcpy(y, a->in[0], (size_t)n * sizeof *y);
    if (!a->coll || a->coll->size <= 1)
        return PBL_OK;
    pbl_status s = a->coll->sum_f32(a->coll->ctx, y, n, 0, a->err, a->errlen);
    if (s != PBL_OK || !a->attr[AR_MEAN].i)
        return s;
    /* every rank scales the same summed bits by the same factor: the ranks stay identical */
    float inv = 1.0f / (float)a->coll->size;
    for (int64_t i = 0; i < n; i++)
        y[i] *= inv;
    return PBL_OK;
}

/* This rank's run failed before the all-reduce: it still takes part (the data is never used),
 * so the other ranks learn of it at this node instead of timing out. */
static pbl_status allreduce_after_failure(const pbl__kargs *a)
{
    if (!a->coll || a->coll->size <= 1)
        return PBL_OK;
    char ignored[256]; /* a->err holds the run's first failure, whose message must stay */
    return a->coll->sum_f32(a->coll->ctx, a->out[0], pbl__cost_numel(&a->out_meta[0]), 1, ignored, sizeof ignored);
}

const pbl__op pbl__op_allreduce = {
    .name = "allreduce", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .attrs = allreduce_attrs, .n_attrs = 1,
    .infer = allreduce_infer,
    .inplace = allreduce_inplace, .n_inplace = 1,
    .cpu = pbl__cpu_allreduce,
    .cpu_after_failure = allreduce_after_failure,
};

/* ---- bucket_unpack ---------------------------------------------------------------------- */

enum { UNPACK_OFFSET, UNPACK_SHAPE };
static const pbl__attr_spec unpack_attrs[] = {
    { .name = "offset", .type = PBL_ATTR_INT, .required = 1 }, /* in elements of flat */
    { .name = "shape", .type = PBL_ATTR_INTS, .required = 1 },
};

static pbl_status unpack_infer(pbl__infer_ctx *c)
{
    pbl_status s = pbl__infer_check_f32(c, 0, "bucket");
    if (s != PBL_OK)
        return s;
    c->out[0].dtype = PBL_F32;
    s = pbl__infer_shape_attr(c, &c->attr[UNPACK_SHAPE], &c->out[0].shape);
    if (s != PBL_OK)
        return s;
    int64_t off = c->attr[UNPACK_OFFSET].i, n = pbl__cost_numel(&c->out[0]), have = pbl__cost_numel(&c->in[0]);
    if (off < 0 || off > have || n > have - off)
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "elements [%lld, %lld) are outside the bucket's %lld", (long long)off,
                               (long long)(off + n), (long long)have);
    return PBL_OK;
}

pbl_status pbl__cpu_bucket_unpack(const pbl__kargs *a)
{
    const float *flat = a->in[0];
    memcpy(a->out[0], flat + a->attr[UNPACK_OFFSET].i, pbl__meta_bytes(&a->out_meta[0]));
    return PBL_OK;
}

const pbl__op pbl__op_bucket_unpack = {
    .name = "bucket_unpack", .n_in_min = 1, .n_in_max = 1, .n_out = 1,
    .attrs = unpack_attrs, .n_attrs = 2,
    .infer = unpack_infer,
    .cpu = pbl__cpu_bucket_unpack,
};
