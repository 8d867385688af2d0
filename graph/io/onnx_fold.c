/*
 * Shape arithmetic folded at load time. Exporters compute static shapes at run time
 * (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, ConstantOfShape, Range, Cast, Mod...);
 * pebble's shapes are static, so the shape of any value is a constant, and an op whose inputs
 * are all constants has a constant result: computed here, it never becomes a node, and the
 * planner sees a static graph. Integers are computed in int64 as ONNX does (they become i32 only
 * if a node reads them as data: graph/io/onnx_load.c checks the range), floats in float32 as the
 * kernels would. An op the folder knows whose inputs come from data goes to its converter, or,
 * where no family converts it, is refused naming the node.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph/io/onnx_internal.h"
#include "pebble/builder.h"

static const char *const fold_ops[] = {
    "Shape", "Size", "ConstantOfShape", "Cast", "Mod", "Range", "Unsqueeze", "Squeeze", "Concat", "Gather", "Slice",
    "Add", "Sub", "Mul", "Div", "Equal", "Less", "Greater", "Where", "Expand", "Reshape", "Identity", "Neg",
};

int pbl__onnx_foldable(const Onnx__NodeProto *n)
{
    if (!n->op_type || !pbl__onnx_default_domain(n->domain))
        return 0;
    for (size_t i = 0; i < sizeof fold_ops / sizeof fold_ops[0]; i++)
        if (strcmp(fold_ops[i], n->op_type) == 0)
            return 1;
    return 0;
}

/* input i's constant data, or NULL (absent, computed at run time, or already a weight) */
static const pbl__onnx_data *cin(pbl__onnx_ctx *c, size_t i)
{
    const char *name = pbl__onnx_in_name(c->node, i);
    pbl__onnx_sym *s = name ? pbl__onnx_sym_find(c, name) : NULL;
    if (!s || !s->is_const || (!s->data.f && !s->data.ints && !s->data.empty))
        return NULL;
    return &s->data;
}

static double num(const pbl__onnx_data *d, int64_t i) { return d->is_int ? (double)d->ints[i] : (double)d->f[i]; }

/* A new constant of `shape`, integers or floats, zeroed. */
static pbl_status out_new(pbl__onnx_ctx *c, pbl__onnx_data *d, int is_int, pbl_shape shape)
{
    memset(d, 0, sizeof *d);
    int64_t n = 1;
    for (int32_t k = 0; k < shape.ndim; k++) {
        /* integers may fold to nothing (Shape sliced past its end, then concatenated: the
         * TorchScript exporter's attention reshapes); an empty float tensor would be data */
        if (shape.dim[k] < (is_int ? 0 : 1) || (n > 0 && shape.dim[k] > PBL__ONNX_MAX_NUMEL / n))
            NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "it folds to a tensor with dim %d of %lld (pebble has no empty tensors)", (int)k,
                      (long long)shape.dim[k]);
        n *= shape.dim[k];
    }
    d->shape = shape;
    d->numel = n;
    d->is_int = is_int;
    if (n == 0) {
        d->empty = 1;
        return PBL_OK;
    }
    if (is_int)
        d->ints = pbl__mem_calloc(&c->mem, (size_t)n * sizeof *d->ints);
    else
        d->f = pbl__mem_calloc(&c->w->mem, (size_t)n * sizeof *d->f);
    if (!d->ints && !d->f)
        NODE_FAIL(c, PBL_ERR_NOMEM, "out of memory folding it%s", "");
    return PBL_OK;
}

/* Output k becomes constant d (freed on failure). */
static pbl_status out_define(pbl__onnx_ctx *c, size_t k, pbl__onnx_data *d)
{
    const char *name = k < c->node->n_output ? c->node->output[k] : NULL;
    pbl__onnx_sym *sm;
    pbl_status s = name && name[0] ? pbl__onnx_sym_add(c, name, &sm) : PBL_OK;
    if (s != PBL_OK || !name || !name[0]) {
        pbl__onnx_data_free(d, &c->w->mem, &c->mem);
        return s;
    }
    sm->is_const = 1;
    sm->data = *d;
    return PBL_OK;
}

/* dst[i] = src[j] (same kind) */
static void put(pbl__onnx_data *dst, int64_t i, const pbl__onnx_data *src, int64_t j)
{
    if (dst->is_int)
        dst->ints[i] = src->is_int ? src->ints[j] : (int64_t)src->f[j];
    else
        dst->f[i] = src->is_int ? (float)src->ints[j] : src->f[j];
}

/* The flat index into s (broadcast to o) of o's element e. */
static int64_t bidx(const pbl_shape *s, const pbl_shape *o, int64_t e)
{
    int64_t off = 0, stride = 1;
    for (int32_t d = o->ndim - 1, k = s->ndim - 1; d >= 0; d--, k--) {
        int64_t i = e % o->dim[d];
        e /= o->dim[d];
        if (k >= 0) {
            if (s->dim[k] != 1)
                off += i * stride;
            stride *= s->dim[k];
        }
    }
    return off;
}

/* A copy of x reshaped (same data). */
static pbl_status fold_reshaped(pbl__onnx_ctx *c, const pbl__onnx_data *x, pbl_shape to)
{
    pbl__onnx_data y;
    pbl_status s = out_new(c, &y, x->is_int, to);
    if (s != PBL_OK)
        return s;
    for (int64_t i = 0; i < x->numel; i++)
        put(&y, i, x, i);
    return out_define(c, 0, &y);
}

static pbl_status fold_binary(pbl__onnx_ctx *c, const char *op, const pbl__onnx_data *a, const pbl__onnx_data *b)
{
    pbl_shape so;
    int64_t fmod_ = 0;
    pbl_status s;
    if (!pbl__onnx_bcast_shape(&a->shape, &b->shape, &so))
        NODE_FAIL(c, PBL_ERR_SHAPE, "its constant inputs do not broadcast%s", "");
    if ((s = pbl__onnx_attr_bool(c, "fmod", 0, &fmod_)) != PBL_OK)
        return s;
    int cmp = strcmp(op, "Equal") == 0 || strcmp(op, "Less") == 0 || strcmp(op, "Greater") == 0;
    int ints = a->is_int && b->is_int;
    pbl__onnx_data y;
    if ((s = out_new(c, &y, ints || cmp, so)) != PBL_OK)
        return s;
    for (int64_t e = 0; e < y.numel; e++) {
        int64_t ia = bidx(&a->shape, &so, e), ib = bidx(&b->shape, &so, e);
        if (cmp) {
            double u = num(a, ia), v = num(b, ib);
            y.ints[e] = op[0] == 'E' ? u == v : op[0] == 'L' ? u < v : u > v;
        } else if (ints) {
            int64_t u = a->ints[ia], v = b->ints[ib], r;
            if ((op[0] == 'D' || op[0] == 'M') && v == 0) {
                pbl__onnx_data_free(&y, &c->w->mem, &c->mem);
                NODE_FAIL(c, PBL_ERR_FORMAT, "it divides by the integer 0%s", "");
            }
            switch (op[0]) {
            case 'A': r = u + v; break;
            case 'S': r = u - v; break;
            case 'M':
                if (op[1] == 'u') {
                    r = u * v;
                } else {
                    r = u % v;
                    if (!fmod_ && r != 0 && (r < 0) != (v < 0))
                        r += v;
                }
                break;
            default: r = u / v; break;
            }
            y.ints[e] = r;
        } else {
            float u = (float)num(a, ia), v = (float)num(b, ib), r;
            switch (op[0]) {
            case 'A': r = u + v; break;
            case 'S': r = u - v; break;
            case 'M':
                if (op[1] == 'u') {
                    r = u * v;
                } else {
                    r = fmodf(u, v);
                    if (!fmod_ && r != 0 && (r < 0) != (v < 0))
                        r += v;
                }
                break;
            default: r = u / v; break;
            }
            y.f[e] = r;
        }
    }
    return out_define(c, 0, &y);
}

static pbl_status fold_shape(pbl__onnx_ctx *c)
{
    const char *in = pbl__onnx_in_name(c->node, 0);
    pbl__onnx_sym *sx = in ? pbl__onnx_sym_find(c, in) : NULL;
    if (!sx || sx->unsupported || (sx->v == PBL_NONE && !sx->is_const))
        NODE_FAIL(c, PBL_ERR_FORMAT, "input 0 names no value pebble has%s", "");
    pbl_shape x = sx->v != PBL_NONE ? pbl__onnx_shape_of(c, sx->v) : sx->data.shape;
    pbl__onnx_data y;
    pbl_status s;
    if (strcmp(c->node->op_type, "Size") == 0) {
        if ((s = out_new(c, &y, 1, PBL_SCALAR)) != PBL_OK)
            return s;
        y.ints[0] = pbl_shape_numel(&x);
        return out_define(c, 0, &y);
    }
    int64_t start, end, r = x.ndim;
    if ((s = pbl__onnx_attr_int(c, "start", 0, &start)) != PBL_OK || (s = pbl__onnx_attr_int(c, "end", r, &end)) != PBL_OK)
        return s;
    start = start < 0 ? start + r : start, end = end < 0 ? end + r : end;
    start = start < 0 ? 0 : start > r ? r : start, end = end < 0 ? 0 : end > r ? r : end;
    int64_t n = end - start;
    if ((s = out_new(c, &y, 1, pbl_shape_make(1, &n))) != PBL_OK)
        return s;
    for (int64_t i = 0; i < n; i++)
        y.ints[i] = x.dim[start + i];
    return out_define(c, 0, &y);
}

/* ConstantOfShape: the value attribute (a one-element tensor; float 0 when absent) */
static pbl_status fold_constant_of_shape(pbl__onnx_ctx *c, const pbl__onnx_data *sh)
{
    const Onnx__AttributeProto *a = pbl__onnx_attr_find(c->node, "value");
    pbl__onnx_data v = { 0 };
    pbl_status s;
    if (a && a->t) {
        if ((s = pbl__onnx_data_decode(a->t, &c->w->mem, &c->mem, &v, "attribute value", c->err, c->errlen)) != PBL_OK)
            return s;
        if (v.numel != 1) {
            pbl__onnx_data_free(&v, &c->w->mem, &c->mem);
            NODE_FAIL(c, PBL_ERR_ATTR, "attribute value holds %lld elements; it must hold one", (long long)v.numel);
        }
    }
    if (!sh->is_int || sh->numel > PBL_MAX_DIMS) {
        pbl__onnx_data_free(&v, &c->w->mem, &c->mem);
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "its shape input must list at most %d integers", PBL_MAX_DIMS);
    }
    pbl_shape to = pbl_shape_make((int32_t)sh->numel, sh->ints);
    pbl__onnx_data y;
    if ((s = out_new(c, &y, a && a->t ? v.is_int : 0, to)) == PBL_OK)
        for (int64_t i = 0; a && a->t && i < y.numel; i++)
            put(&y, i, &v, 0);
    pbl__onnx_data_free(&v, &c->w->mem, &c->mem);
    return s == PBL_OK ? out_define(c, 0, &y) : s;
}

static pbl_status fold_cast(pbl__onnx_ctx *c, const pbl__onnx_data *x)
{
    int64_t to;
    pbl_status s = pbl__onnx_attr_int(c, "to", -1, &to);
    if (s != PBL_OK)
        return s;
    int is_bool = to == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    int dt = pbl__onnx_dtype_of(to);
    if (dt < 0 && !is_bool)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "attribute to is %lld; pebble casts to FLOAT, DOUBLE, INT32, INT64 and BOOL", (long long)to);
    pbl__onnx_data y;
    if ((s = out_new(c, &y, is_bool || dt == PBL_I32, x->shape)) != PBL_OK)
        return s;
    for (int64_t i = 0; i < x->numel; i++) {
        double v = num(x, i);
        if (is_bool)
            y.ints[i] = v != 0;
        else if (!y.is_int)
            y.f[i] = x->is_int ? (float)x->ints[i] : x->f[i];
        else if (!x->is_int && !(fabs(v) < 9.2e18)) {
            pbl__onnx_data_free(&y, &c->w->mem, &c->mem);
            NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "element %lld is %g, which no integer holds", (long long)i, v);
        } else {
            y.ints[i] = x->is_int ? x->ints[i] : (int64_t)v; /* toward zero */
        }
    }
    return out_define(c, 0, &y);
}

static pbl_status fold_range(pbl__onnx_ctx *c, const pbl__onnx_data *st, const pbl__onnx_data *li, const pbl__onnx_data *de)
{
    if (st->numel != 1 || li->numel != 1 || de->numel != 1)
        NODE_FAIL(c, PBL_ERR_FORMAT, "start, limit and delta must be scalars%s", "");
    int ints = st->is_int && li->is_int && de->is_int;
    double a = num(st, 0), b = num(li, 0), d = num(de, 0);
    if (d == 0)
        NODE_FAIL(c, PBL_ERR_ATTR, "delta is 0%s", "");
    double k = ceil((b - a) / d);
    int64_t n = k > 0 ? (int64_t)k : 0;
    pbl__onnx_data y;
    pbl_status s = out_new(c, &y, ints, pbl_shape_make(1, &n));
    if (s != PBL_OK)
        return s;
    for (int64_t i = 0; i < n; i++)
        if (ints)
            y.ints[i] = st->ints[0] + i * de->ints[0];
        else
            y.f[i] = (float)num(st, 0) + (float)i * (float)num(de, 0);
    return out_define(c, 0, &y);
}

static pbl_status fold_reshape(pbl__onnx_ctx *c, const pbl__onnx_data *x, const pbl__onnx_data *sh)
{
    int64_t allowzero;
    pbl_status s = pbl__onnx_attr_bool(c, "allowzero", 0, &allowzero);
    if (s != PBL_OK)
        return s;
    if (!sh->is_int || sh->numel > PBL_MAX_DIMS)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "the new shape must list at most %d integers", PBL_MAX_DIMS);
    pbl_shape to = { .ndim = (int32_t)sh->numel };
    int64_t known = 1;
    int32_t infer = -1;
    for (int32_t i = 0; i < to.ndim; i++) {
        int64_t v = sh->ints[i];
        if (v == 0 && !allowzero && i < x->shape.ndim)
            v = x->shape.dim[i];
        if (v == -1 && infer < 0)
            infer = i, v = 1;
        else if (v < 1)
            NODE_FAIL(c, PBL_ERR_SHAPE, "shape dim %d is %lld", (int)i, (long long)sh->ints[i]);
        to.dim[i] = v;
        known *= v;
    }
    if (infer >= 0 && known > 0 && x->numel % known == 0)
        to.dim[infer] = x->numel / known, known = x->numel;
    if (known != x->numel)
        NODE_FAIL(c, PBL_ERR_SHAPE, "the new shape does not hold the input's %lld elements", (long long)x->numel);
    return fold_reshaped(c, x, to);
}

static pbl_status fold_concat(pbl__onnx_ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    int64_t axis;
    pbl_status s = pbl__onnx_attr_int(c, "axis", 0, &axis);
    if (s != PBL_OK)
        return s;
    const pbl__onnx_data *first = NULL;
    int ints = 1;
    pbl_shape so = { 0 };
    for (size_t i = 0; i < n->n_input; i++) {
        const pbl__onnx_data *d = cin(c, i);
        if (!d)
            continue;
        if (!first) {
            first = d, so = d->shape;
            if (axis < -so.ndim || axis >= so.ndim)
                NODE_FAIL(c, PBL_ERR_ATTR, "attribute axis %lld is out of range for rank %d", (long long)axis, (int)so.ndim);
            axis = axis < 0 ? axis + so.ndim : axis;
            so.dim[axis] = 0;
        }
        int ok = d->shape.ndim == so.ndim;
        for (int32_t k = 0; ok && k < so.ndim; k++)
            ok = k == axis || d->shape.dim[k] == so.dim[k];
        if (!ok)
            NODE_FAIL(c, PBL_ERR_SHAPE, "input %zu's shape does not concatenate with input 0's", i);
        so.dim[axis] += d->shape.dim[axis];
        ints &= d->is_int;
    }
    if (!first)
        NODE_FAIL(c, PBL_ERR_FORMAT, "it has no inputs%s", "");
    pbl__onnx_data y;
    if ((s = out_new(c, &y, ints, so)) != PBL_OK)
        return s;
    int64_t inner = 1, outer = 1, at = 0;
    for (int32_t k = 0; k < so.ndim; k++) {
        if (k < axis)
            outer *= so.dim[k];
        else if (k > axis)
            inner *= so.dim[k];
    }
    for (size_t i = 0; i < n->n_input; i++) {
        const pbl__onnx_data *d = cin(c, i);
        if (!d)
            continue;
        int64_t len = d->shape.dim[axis];
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < len * inner; j++)
                put(&y, (o * so.dim[axis] + at) * inner + j, d, o * len * inner + j);
        at += len;
    }
    return out_define(c, 0, &y);
}

static pbl_status fold_gather(pbl__onnx_ctx *c, const pbl__onnx_data *x, const pbl__onnx_data *ids)
{
    int64_t axis;
    pbl_status s = pbl__onnx_attr_int(c, "axis", 0, &axis);
    if (s != PBL_OK)
        return s;
    if (axis < -x->shape.ndim || axis >= x->shape.ndim)
        NODE_FAIL(c, PBL_ERR_ATTR, "attribute axis %lld is out of range for rank %d", (long long)axis, (int)x->shape.ndim);
    axis = axis < 0 ? axis + x->shape.ndim : axis;
    if (!ids->is_int || x->shape.ndim - 1 + ids->shape.ndim > PBL_MAX_DIMS)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "indices must be integers and the result at most rank %d", PBL_MAX_DIMS);
    int64_t n = x->shape.dim[axis], outer = 1, inner = 1;
    pbl_shape so = { 0 };
    for (int32_t d = 0; d < axis; d++)
        so.dim[so.ndim++] = x->shape.dim[d], outer *= x->shape.dim[d];
    for (int32_t d = 0; d < ids->shape.ndim; d++)
        so.dim[so.ndim++] = ids->shape.dim[d];
    for (int32_t d = (int32_t)axis + 1; d < x->shape.ndim; d++)
        so.dim[so.ndim++] = x->shape.dim[d], inner *= x->shape.dim[d];
    for (int64_t k = 0; k < ids->numel; k++)
        if (ids->ints[k] < -n || ids->ints[k] >= n)
            NODE_FAIL(c, PBL_ERR_ATTR, "index %lld is outside [-%lld, %lld)", (long long)ids->ints[k], (long long)n, (long long)n);
    pbl__onnx_data y;
    if ((s = out_new(c, &y, x->is_int, so)) != PBL_OK)
        return s;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < ids->numel; k++) {
            int64_t j = ids->ints[k] < 0 ? ids->ints[k] + n : ids->ints[k];
            for (int64_t i = 0; i < inner; i++)
                put(&y, (o * ids->numel + k) * inner + i, x, (o * n + j) * inner + i);
        }
    return out_define(c, 0, &y);
}

static pbl_status fold_slice(pbl__onnx_ctx *c, const pbl__onnx_data *x)
{
    int64_t first[PBL_MAX_DIMS], step[PBL_MAX_DIMS], count[PBL_MAX_DIMS];
    pbl_status s = pbl__onnx_slice_params(c, &x->shape, first, step, count);
    if (s != PBL_OK)
        return s;
    pbl__onnx_data y;
    if ((s = out_new(c, &y, x->is_int, pbl_shape_make(x->shape.ndim, count))) != PBL_OK)
        return s;
    for (int64_t e = 0; e < y.numel; e++) {
        int64_t src = 0, stride = 1, o = e;
        for (int32_t d = x->shape.ndim - 1; d >= 0; d--) {
            src += (first[d] + (o % count[d]) * step[d]) * stride;
            o /= count[d];
            stride *= x->shape.dim[d];
        }
        put(&y, e, x, src);
    }
    return out_define(c, 0, &y);
}

/* Where (three operands) and Expand (x to a shape): broadcast copies */
static pbl_status fold_where(pbl__onnx_ctx *c, const pbl__onnx_data *cond, const pbl__onnx_data *a, const pbl__onnx_data *b)
{
    pbl_shape s1, so;
    if (!pbl__onnx_bcast_shape(&cond->shape, &a->shape, &s1) || !pbl__onnx_bcast_shape(&s1, &b->shape, &so))
        NODE_FAIL(c, PBL_ERR_SHAPE, "its constant inputs do not broadcast%s", "");
    pbl__onnx_data y;
    pbl_status s = out_new(c, &y, a->is_int && b->is_int, so);
    if (s != PBL_OK)
        return s;
    for (int64_t e = 0; e < y.numel; e++) {
        int take_a = num(cond, bidx(&cond->shape, &so, e)) != 0;
        put(&y, e, take_a ? a : b, bidx(take_a ? &a->shape : &b->shape, &so, e));
    }
    return out_define(c, 0, &y);
}

static pbl_status fold_expand(pbl__onnx_ctx *c, const pbl__onnx_data *x, const pbl__onnx_data *sh)
{
    if (!sh->is_int || sh->numel > PBL_MAX_DIMS)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "its shape input must list at most %d integers", PBL_MAX_DIMS);
    pbl_shape want = pbl_shape_make((int32_t)sh->numel, sh->ints), so;
    if (!pbl__onnx_bcast_shape(&x->shape, &want, &so))
        NODE_FAIL(c, PBL_ERR_SHAPE, "its input does not broadcast to the shape given%s", "");
    pbl__onnx_data y;
    pbl_status s = out_new(c, &y, x->is_int, so);
    if (s != PBL_OK)
        return s;
    for (int64_t e = 0; e < y.numel; e++)
        put(&y, e, x, bidx(&x->shape, &so, e));
    return out_define(c, 0, &y);
}

pbl_status pbl__onnx_fold(pbl__onnx_ctx *c, int *done)
{
    const Onnx__NodeProto *n = c->node;
    const char *op = n->op_type;
    *done = 0;
    int shape_op = strcmp(op, "Shape") == 0 || strcmp(op, "Size") == 0;
    for (size_t i = shape_op ? 1 : 0; i < n->n_input; i++)
        if (pbl__onnx_in_name(n, i) && !cin(c, i))
            return PBL_OK; /* computed at run time: the converter's */
    if (n->n_input < 1 || !pbl__onnx_in_name(n, 0) || n->n_output < 1 || !n->output[0] || !n->output[0][0])
        return PBL_OK; /* malformed: the converter explains */
    *done = 1;
    const pbl__onnx_data *x = cin(c, 0), *b = cin(c, 1), *d2 = cin(c, 2);
    if (shape_op)
        return fold_shape(c);
    if (strcmp(op, "ConstantOfShape") == 0)
        return fold_constant_of_shape(c, x);
    if (strcmp(op, "Cast") == 0)
        return fold_cast(c, x);
    if (strcmp(op, "Identity") == 0)
        return fold_reshaped(c, x, x->shape);
    if (strcmp(op, "Neg") == 0) {
        pbl__onnx_data y;
        pbl_status s = out_new(c, &y, x->is_int, x->shape);
        for (int64_t i = 0; s == PBL_OK && i < x->numel; i++)
            if (y.is_int)
                y.ints[i] = -x->ints[i];
            else
                y.f[i] = -x->f[i];
        return s == PBL_OK ? out_define(c, 0, &y) : s;
    }
    if (strcmp(op, "Unsqueeze") == 0 || strcmp(op, "Squeeze") == 0) {
        pbl_shape to;
        pbl_status s = pbl__onnx_unsqueeze_shape(c, &x->shape, op[0] == 'S', &to);
        return s == PBL_OK ? fold_reshaped(c, x, to) : s;
    }
    if (strcmp(op, "Concat") == 0)
        return fold_concat(c);
    if (strcmp(op, "Slice") == 0)
        return fold_slice(c, x);
    if (strcmp(op, "Reshape") == 0 && b)
        return fold_reshape(c, x, b);
    if (strcmp(op, "Range") == 0 && b && d2)
        return fold_range(c, x, b, d2);
    if (strcmp(op, "Where") == 0 && b && d2)
        return fold_where(c, x, b, d2);
    if (strcmp(op, "Gather") == 0 && b)
        return fold_gather(c, x, b);
    if (strcmp(op, "Expand") == 0 && b)
        return fold_expand(c, x, b);
    if (b && n->n_input == 2)
        return fold_binary(c, op, x, b); /* Add Sub Mul Div Mod Equal Less Greater */
    *done = 0; /* missing operands: the converter explains */
    return PBL_OK;
}
