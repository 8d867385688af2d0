/* fully_connected and matmul: shape rules and gradient rules. Kernels: ops/cpu/linear.c. */
#include "ops/cpu/kernels.h"

/* ---- fully_connected: x[N,in] w[out,in] b?[out] -> y[N,out] = x·wᵀ + b ---------------------- */

static pbl_status fc_infer(pbl__infer_ctx *c)
{
    char sx[96], sw[96], sb[96];
    for (int32_t i = 0; i < c->n_in; i++) {
        pbl_status s = pbl__infer_check_f32(c, i, i == 0 ? "x" : i == 1 ? "w" : "b");
        if (s != PBL_OK)
            return s;
    }
    const pbl_shape *x = &c->in[0].shape, *w = &c->in[1].shape;
    if (x->ndim != 2 || w->ndim != 2 || x->dim[1] != w->dim[1])
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "x is %s and w is %s; need x [N, in] and w [out, in]",
                               pbl_shape_str(x, sx, sizeof sx), pbl_shape_str(w, sw, sizeof sw));
    if (c->n_in == 3) {
        const pbl_shape *b = &c->in[2].shape;
        if (b->ndim != 1 || b->dim[0] != w->dim[0])
            return pbl__infer_fail(c, PBL_ERR_SHAPE, "b is %s but w is %s; need b [out]",
                                   pbl_shape_str(b, sb, sizeof sb), pbl_shape_str(w, sw, sizeof sw));
    }
    c->out[0].dtype = PBL_F32;
    c->out[0].shape = pbl_shape_make(2, (int64_t[]){ x->dim[0], w->dim[0] });
    return PBL_OK;
}

static pbl_status fc_grad(pbl__grad_ctx *c)
{
    pbl_value dy = c->dy[0];
    if (c->need[0])
        c->dx[0] = pbl__grad_emit(c, "matmul", "grad_x", (pbl_value[]){ dy, c->x[1] }, 2, NULL, 0);
    if (c->need[1])
        c->dx[1] = pbl__grad_emit(c, "matmul", "grad_w", (pbl_value[]){ dy, c->x[0] }, 2,
                                  (pbl_attr[]){ PBL_ATTR_INT("trans_a", 1) }, 1);
    if (c->n_in == 3 && c->need[2])
        c->dx[2] = pbl__grad_emit(c, "sum", "grad_b", &dy, 1,
                                  (pbl_attr[]){ PBL_ATTR_INTS("axes", (int64_t[]){ 0 }, 1) }, 1);
    return c->status;
}

/* 2·|y|·in: every element of y is a dot product of length in (the bias add rides on it) */
static void fc_cost(const pbl__cost_ctx *c, pbl__cost *out)
{
    const pbl_shape *w = &c->in[1].shape;
    out->flops = 2 * pbl__cost_numel(&c->out[0]) * (w->ndim >= 2 ? w->dim[1] : 1);
}

const pbl__op pbl__op_fully_connected = {
    .name = "fully_connected", .n_in_min = 2, .n_in_max = 3, .n_out = 1,
    .infer = fc_infer, .grad = fc_grad,
    .grad_reads_in = 0x3, /* x for dw, w for dx; b's data is never read */
    .cost = fc_cost,
    .cpu = pbl__cpu_fully_connected,
};

/* ---- matmul: c[...,m,n] = op(a)[...,m,k] · op(b)[...,k,n] ----------------------------------- */

enum { MM_TRANS_A, MM_TRANS_B };
static const pbl__attr_spec mm_attrs[] = {
    { .name = "trans_a", .type = PBL_ATTR_INT },
    { .name = "trans_b", .type = PBL_ATTR_INT },
};

static pbl_status mm_infer(pbl__infer_ctx *c)
{
    char sa[96], sb[96];
    pbl_status s = pbl__infer_check_f32(c, 0, "a");
    if (s == PBL_OK)
        s = pbl__infer_check_f32(c, 1, "b");
    if (s != PBL_OK)
        return s;
    int64_t ta = c->attr[MM_TRANS_A].i, tb = c->attr[MM_TRANS_B].i;
    if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1))
        return pbl__infer_fail(c, PBL_ERR_ATTR, "trans_a and trans_b must be 0 or 1");
    const pbl_shape *a = &c->in[0].shape, *b = &c->in[1].shape;
    int32_t r = a->ndim;
    if (r < 2 || b->ndim != r)
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "a is %s and b is %s; need equal ranks of at least 2",
                               pbl_shape_str(a, sa, sizeof sa), pbl_shape_str(b, sb, sizeof sb));
    for (int32_t i = 0; i < r - 2; i++)
        if (a->dim[i] != b->dim[i])
            return pbl__infer_fail(c, PBL_ERR_SHAPE, "a is %s and b is %s; batch dims must match",
                                   pbl_shape_str(a, sa, sizeof sa), pbl_shape_str(b, sb, sizeof sb));
    int64_t m = a->dim[r - 2 + ta], ka = a->dim[r - 1 - ta];
    int64_t kb = b->dim[r - 2 + tb], n = b->dim[r - 1 - tb];
    if (ka != kb)
        return pbl__infer_fail(c, PBL_ERR_SHAPE, "a is %s%s and b is %s%s; inner dims %lld and %lld differ",
                               pbl_shape_str(a, sa, sizeof sa), ta ? " (transposed)" : "",
                               pbl_shape_str(b, sb, sizeof sb), tb ? " (transposed)" : "",
                               (long long)ka, (long long)kb);
    c->out[0].dtype = PBL_F32;
    c->out[0].shape = *a;
    c->out[0].shape.dim[r - 2] = m;
    c->out[0].shape.dim[r - 1] = n;
    return PBL_OK;
}

/* One product in a gradient: op(p)·op(q). */
static pbl_value mm(pbl__grad_ctx *c, const char *suffix, pbl_value p, pbl_value q, int tp, int tq)
{
    pbl_attr at[] = { PBL_ATTR_INT("trans_a", tp), PBL_ATTR_INT("trans_b", tq) };
    return pbl__grad_emit(c, "matmul", suffix, (pbl_value[]){ p, q }, 2, at, 2);
}

static pbl_status mm_grad(pbl__grad_ctx *c)
{
    int ta = (int)c->attr[MM_TRANS_A].i, tb = (int)c->attr[MM_TRANS_B].i;
    pbl_value a = c->x[0], b = c->x[1], dc = c->dy[0];
    /* C = op(A)·op(B). With A, B untransposed: dA = dC·Bᵀ, dB = Aᵀ·dC; a transposed operand
     * takes the transpose of that product, which swaps the factors. */
    if (c->need[0])
        c->dx[0] = !ta ? mm(c, "grad_a", dc, b, 0, !tb) : mm(c, "grad_a", b, dc, tb, 1);
    if (c->need[1])
        c->dx[1] = !tb ? mm(c, "grad_b", a, dc, !ta, 0) : mm(c, "grad_b", dc, a, 1, ta);
    return c->status;
}

/* 2·|c|·k, k the inner dim of op(a) [..., m, k] */
static void mm_cost(const pbl__cost_ctx *c, pbl__cost *out)
{
    const pbl_shape *a = &c->in[0].shape;
    int64_t k = 1;
    if (a->ndim >= 2)
        k = c->attr[MM_TRANS_A].i ? a->dim[a->ndim - 2] : a->dim[a->ndim - 1];
    else if (a->ndim == 1)
        k = a->dim[0];
    out->flops = 2 * pbl__cost_numel(&c->out[0]) * k;
}

const pbl__op pbl__op_matmul = {
    .name = "matmul", .n_in_min = 2, .n_in_max = 2, .n_out = 1,
    .attrs = mm_attrs, .n_attrs = 2,
    .infer = mm_infer, .grad = mm_grad,
    .grad_reads_in = 0x3,
    .cost = mm_cost,
    .cpu = pbl__cpu_matmul,
};
