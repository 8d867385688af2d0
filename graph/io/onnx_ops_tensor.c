/*
 * ONNX ops -> pebble ops, the tensor family: indexing and shapes (Gather, Slice, Split, Pad,
 * Unsqueeze, Squeeze, Expand, Tile, Cast, DepthToSpace, SpaceToDepth) and the shape arithmetic
 * that only ever runs folded at load time (Shape, Size, ConstantOfShape, Range: see
 * graph/io/onnx_fold.c). A reshape-like op is a pebble reshape, Tile a broadcast between two
 * reshapes per repeated dim, DepthToSpace/SpaceToDepth a reshape, transpose and reshape.
 */
#include <stdio.h>
#include <string.h>

#include "graph/io/onnx_internal.h"
#include "pebble/builder.h"

/* ---- what the folder shares ------------------------------------------------------------------ */

/* ONNX's clamped slice of one dim of n: the first position and how many (0: empty). */
void pbl__onnx_slice_dim(int64_t n, int64_t start, int64_t end, int64_t step, int64_t *first, int64_t *count)
{
    if (step > 0) {
        start = start < 0 ? start + n : start;
        end = end < 0 ? end + n : end;
        start = start < 0 ? 0 : start > n ? n : start;
        end = end < 0 ? 0 : end > n ? n : end;
        *first = start;
        *count = end > start ? (end - start + step - 1) / step : 0;
    } else {
        start = start < 0 ? start + n : start;
        end = end < 0 ? end + n : end;
        start = start < 0 ? -1 : start > n - 1 ? n - 1 : start;
        end = end < -1 ? -1 : end > n - 1 ? n - 1 : end;
        *first = start;
        *count = start > end ? (start - end + (-step) - 1) / (-step) : 0;
    }
}

/* An int list from input i (a constant) or, when that is absent, attribute `attr`; *n = -1
 * when neither is given. */
static pbl_status ints_from(pbl__onnx_ctx *c, size_t i, const char *attr, int64_t *buf, int32_t max, int32_t *n)
{
    const char *in = pbl__onnx_in_name(c->node, i);
    if (!in)
        return pbl__onnx_attr_ints(c, attr, buf, max, n);
    const int64_t *v;
    int64_t k;
    pbl_status s = pbl__onnx_get_ints(c, in, &v, &k);
    if (s != PBL_OK)
        return s;
    if (k > max)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "input '%s' lists %lld values; pebble takes at most %d", in, (long long)k, (int)max);
    memcpy(buf, v, (size_t)k * sizeof *buf);
    *n = (int32_t)k;
    return PBL_OK;
}

/* Axis a of rank r, normalised into [0, r); what names it in messages. */
static pbl_status norm_axis(pbl__onnx_ctx *c, const char *what, int64_t a, int32_t r, int64_t *out)
{
    if (a < -r || a >= r)
        NODE_FAIL(c, PBL_ERR_ATTR, "%s %lld is out of range for rank %d", what, (long long)a, (int)r);
    *out = a < 0 ? a + r : a;
    return PBL_OK;
}

pbl_status pbl__onnx_slice_params(pbl__onnx_ctx *c, const pbl_shape *x, int64_t *first, int64_t *step, int64_t *count)
{
    int64_t st[PBL_MAX_DIMS], en[PBL_MAX_DIMS], ax[PBL_MAX_DIMS], sp[PBL_MAX_DIMS];
    int32_t ns, ne, na, np = -1;
    pbl_status s;
    if (c->opset < 10) {
        if ((s = pbl__onnx_attr_ints(c, "starts", st, PBL_MAX_DIMS, &ns)) != PBL_OK ||
            (s = pbl__onnx_attr_ints(c, "ends", en, PBL_MAX_DIMS, &ne)) != PBL_OK ||
            (s = pbl__onnx_attr_ints(c, "axes", ax, PBL_MAX_DIMS, &na)) != PBL_OK)
            return s;
    } else if ((s = ints_from(c, 1, "", st, PBL_MAX_DIMS, &ns)) != PBL_OK || (s = ints_from(c, 2, "", en, PBL_MAX_DIMS, &ne)) != PBL_OK ||
               (s = ints_from(c, 3, "", ax, PBL_MAX_DIMS, &na)) != PBL_OK || (s = ints_from(c, 4, "", sp, PBL_MAX_DIMS, &np)) != PBL_OK) {
        return s;
    }
    if (ns < 0 || ne != ns || (na >= 0 && na != ns) || (np >= 0 && np != ns))
        NODE_FAIL(c, PBL_ERR_FORMAT, "starts, ends, axes and steps must list as many values (%d starts, %d ends)", (int)ns, (int)ne);
    for (int32_t d = 0; d < x->ndim; d++)
        first[d] = 0, step[d] = 1, count[d] = x->dim[d];
    uint32_t seen = 0;
    for (int32_t k = 0; k < ns; k++) {
        int64_t a = na >= 0 ? ax[k] : k, p = np >= 0 ? sp[k] : 1;
        if ((s = norm_axis(c, "axes value", a, x->ndim, &a)) != PBL_OK)
            return s;
        if (seen & (1u << a))
            NODE_FAIL(c, PBL_ERR_ATTR, "axis %lld is sliced twice", (long long)a);
        seen |= 1u << a;
        if (p == 0)
            NODE_FAIL(c, PBL_ERR_ATTR, "step %d is 0", (int)k);
        step[a] = p;
        pbl__onnx_slice_dim(x->dim[a], st[k], en[k], p, &first[a], &count[a]);
    }
    return PBL_OK;
}

pbl_status pbl__onnx_unsqueeze_shape(pbl__onnx_ctx *c, const pbl_shape *x, int squeeze, pbl_shape *out)
{
    int64_t ax[PBL_MAX_INTS];
    int32_t na;
    pbl_status s = c->opset < 13 ? pbl__onnx_attr_ints(c, "axes", ax, PBL_MAX_INTS, &na) : ints_from(c, 1, "axes", ax, PBL_MAX_INTS, &na);
    if (s != PBL_OK)
        return s;
    uint32_t mark = 0;
    if (squeeze) {
        for (int32_t k = 0; k < na; k++) {
            int64_t a = 0;
            if ((s = norm_axis(c, "axes value", ax[k], x->ndim, &a)) != PBL_OK)
                return s;
            if (x->dim[a] != 1)
                NODE_FAIL(c, PBL_ERR_ATTR, "axis %lld has size %lld; Squeeze removes only dims of size 1", (long long)ax[k],
                          (long long)x->dim[a]);
            mark |= 1u << a;
        }
        out->ndim = 0;
        for (int32_t d = 0; d < x->ndim; d++)
            if (na > 0 ? !(mark & (1u << d)) : x->dim[d] != 1)
                out->dim[out->ndim++] = x->dim[d];
        return PBL_OK;
    }
    if (na < 1)
        NODE_FAIL(c, PBL_ERR_FORMAT, "axes are required%s", "");
    int32_t r = x->ndim + na;
    if (r > PBL_MAX_DIMS)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "the result would have rank %d; pebble's limit is %d", (int)r, PBL_MAX_DIMS);
    for (int32_t k = 0; k < na; k++) {
        int64_t a = 0;
        if ((s = norm_axis(c, "axes value", ax[k], r, &a)) != PBL_OK)
            return s;
        if (mark & (1u << a))
            NODE_FAIL(c, PBL_ERR_ATTR, "axis %lld is listed twice", (long long)ax[k]);
        mark |= 1u << a;
    }
    out->ndim = r;
    for (int32_t d = 0, j = 0; d < r; d++)
        out->dim[d] = mark & (1u << d) ? 1 : x->dim[j++];
    return PBL_OK;
}

/* ---- converters ------------------------------------------------------------------------------ */

static pbl_status cv_gather(pbl__onnx_ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value x, ids, y;
    int64_t axis;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 2, 2)) != PBL_OK || (s = pbl__onnx_get(c, n->input[0], &x)) != PBL_OK ||
        (s = pbl__onnx_get(c, n->input[1], &ids)) != PBL_OK || (s = pbl__onnx_attr_int(c, "axis", 0, &axis)) != PBL_OK)
        return s;
    pbl_shape sx = pbl__onnx_shape_of(c, x);
    if ((s = norm_axis(c, "attribute axis", axis, sx.ndim, &axis)) != PBL_OK)
        return s;
    pbl__onnx_sym *is = pbl__onnx_sym_find(c, n->input[1]);
    if (is && is->is_const && is->data.is_int && is->data.ints) /* known ids: checked now */
        for (int64_t k = 0; k < is->data.numel; k++)
            if (is->data.ints[k] < -sx.dim[axis] || is->data.ints[k] >= sx.dim[axis])
                NODE_FAIL(c, PBL_ERR_ATTR, "index %lld of '%s' is outside [-%lld, %lld)", (long long)is->data.ints[k], n->input[1],
                          (long long)sx.dim[axis], (long long)sx.dim[axis]);
    pbl_attr at[] = { PBL_ATTR_INT("axis", axis) };
    if ((s = pbl__onnx_emit(c, "gather", (pbl_value[]){ x, ids }, 2, at, 1, NULL, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, n->output[0], y);
}

/* Unsqueeze / Squeeze: a reshape */
static pbl_status cv_squeeze_family(pbl__onnx_ctx *c, int squeeze)
{
    pbl_value x, y;
    pbl_shape to;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 1, 2)) != PBL_OK || (s = pbl__onnx_get(c, c->node->input[0], &x)) != PBL_OK)
        return s;
    pbl_shape sx = pbl__onnx_shape_of(c, x);
    if ((s = pbl__onnx_unsqueeze_shape(c, &sx, squeeze, &to)) != PBL_OK || (s = pbl__onnx_to_shape(c, x, to, "reshape", NULL, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, c->node->output[0], y);
}

static pbl_status cv_unsqueeze(pbl__onnx_ctx *c) { return cv_squeeze_family(c, 0); }
static pbl_status cv_squeeze(pbl__onnx_ctx *c) { return cv_squeeze_family(c, 1); }

static pbl_status cv_expand(pbl__onnx_ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value x, y;
    const int64_t *v;
    int64_t k;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 2, 2)) != PBL_OK || (s = pbl__onnx_get(c, n->input[0], &x)) != PBL_OK ||
        (s = pbl__onnx_get_ints(c, n->input[1], &v, &k)) != PBL_OK)
        return s;
    if (k > PBL_MAX_DIMS)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "shape has %lld dims; pebble's limit is %d", (long long)k, PBL_MAX_DIMS);
    pbl_shape sx = pbl__onnx_shape_of(c, x), want = { .ndim = (int32_t)k }, to;
    for (int64_t i = 0; i < k; i++) {
        if (v[i] < 1)
            NODE_FAIL(c, PBL_ERR_ATTR, "shape dim %lld is %lld; it must be at least 1", (long long)i, (long long)v[i]);
        want.dim[i] = v[i];
    }
    if (!pbl__onnx_bcast_shape(&sx, &want, &to)) {
        char a[96], b[96];
        NODE_FAIL(c, PBL_ERR_SHAPE, "input %s does not broadcast to %s", pbl_shape_str(&sx, a, sizeof a), pbl_shape_str(&want, b, sizeof b));
    }
    if ((s = pbl__onnx_to_shape(c, x, to, "broadcast_to", NULL, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, n->output[0], y);
}

/* One slice of x (first/step/count per dim) as output `name`: x itself when it takes all. */
static pbl_status emit_slice(pbl__onnx_ctx *c, pbl_value x, const int64_t *first, const int64_t *step, const int64_t *count,
                             const char *name, const char *suffix)
{
    pbl_shape sx = pbl__onnx_shape_of(c, x);
    int whole = 1;
    for (int32_t d = 0; d < sx.ndim; d++) {
        if (count[d] < 1)
            NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "the slice of dim %d is empty (pebble has no empty tensors)", (int)d);
        whole &= first[d] == 0 && step[d] == 1 && count[d] == sx.dim[d];
    }
    pbl_value y = x;
    pbl_attr at[] = { PBL_ATTR_INTS("starts", first, sx.ndim), PBL_ATTR_INTS("steps", step, sx.ndim),
                      PBL_ATTR_INTS("sizes", count, sx.ndim) };
    pbl_status s;
    if (!whole && (s = pbl__onnx_emit(c, "slice", &x, 1, at, 3, suffix, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, name, y);
}

static pbl_status cv_slice(pbl__onnx_ctx *c)
{
    pbl_value x;
    int64_t first[PBL_MAX_DIMS], step[PBL_MAX_DIMS], count[PBL_MAX_DIMS];
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 1, 5)) != PBL_OK || (s = pbl__onnx_get(c, c->node->input[0], &x)) != PBL_OK)
        return s;
    pbl_shape sx = pbl__onnx_shape_of(c, x);
    if ((s = pbl__onnx_slice_params(c, &sx, first, step, count)) != PBL_OK)
        return s;
    return emit_slice(c, x, first, step, count, c->node->output[0], NULL);
}

/* Split: the sizes from `split` (attribute before 13, input from 13), else num_outputs (18) or
 * the outputs' count, equal parts (the last smaller when they do not divide) */
static pbl_status cv_split(pbl__onnx_ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value x;
    int64_t axis, parts[64], nout_attr;
    int32_t np;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 1, 2)) != PBL_OK || (s = pbl__onnx_get(c, n->input[0], &x)) != PBL_OK ||
        (s = pbl__onnx_attr_int(c, "axis", 0, &axis)) != PBL_OK || (s = pbl__onnx_attr_int(c, "num_outputs", 0, &nout_attr)) != PBL_OK)
        return s;
    pbl_shape sx = pbl__onnx_shape_of(c, x);
    if ((s = norm_axis(c, "attribute axis", axis, sx.ndim, &axis)) != PBL_OK)
        return s;
    if ((s = (c->opset < 13 ? pbl__onnx_attr_ints(c, "split", parts, 64, &np) : ints_from(c, 1, "split", parts, 64, &np))) != PBL_OK)
        return s;
    int64_t outs = (int64_t)n->n_output, len = sx.dim[axis];
    if (outs > 64)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "%lld outputs; pebble takes at most 64", (long long)outs);
    if (np < 0) {
        if (nout_attr && nout_attr != outs)
            NODE_FAIL(c, PBL_ERR_ATTR, "num_outputs is %lld but the node has %lld outputs", (long long)nout_attr, (long long)outs);
        int64_t each = (len + outs - 1) / outs;
        for (int64_t k = 0; k < outs; k++)
            parts[k] = k < outs - 1 ? each : len - each * (outs - 1);
        np = (int32_t)outs;
    }
    int64_t total = 0;
    for (int32_t k = 0; k < np; k++)
        total += parts[k] < 0 ? len + 1 : parts[k];
    if (np != outs || total != len)
        NODE_FAIL(c, PBL_ERR_ATTR, "split lists %d sizes adding to %lld; the node has %lld outputs and the axis %lld positions",
                  (int)np, (long long)total, (long long)outs, (long long)len);
    int64_t first[PBL_MAX_DIMS], step[PBL_MAX_DIMS], count[PBL_MAX_DIMS], at = 0;
    for (int32_t k = 0; k < np; k++) {
        for (int32_t d = 0; d < sx.ndim; d++)
            first[d] = 0, step[d] = 1, count[d] = sx.dim[d];
        first[axis] = at, count[axis] = parts[k];
        at += parts[k];
        char sfx[32];
        snprintf(sfx, sizeof sfx, "part%d", (int)k);
        if (n->output[k] && n->output[k][0] && (s = emit_slice(c, x, first, step, count, n->output[k], sfx)) != PBL_OK)
            return s;
    }
    return PBL_OK;
}

/* A string attribute equal to s (attribute strings are not NUL-terminated) */
static int attr_str_is(const Onnx__AttributeProto *a, const char *s)
{
    return a && a->has_s && a->s.len == strlen(s) && memcmp(a->s.data, s, a->s.len) == 0;
}

static pbl_status cv_pad(pbl__onnx_ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value x, y;
    int64_t pads[2 * PBL_MAX_DIMS], ax[PBL_MAX_DIMS];
    int32_t np, na = -1;
    double value = 0;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 1, 4)) != PBL_OK || (s = pbl__onnx_get(c, n->input[0], &x)) != PBL_OK)
        return s;
    pbl_shape sx = pbl__onnx_shape_of(c, x);
    int32_t r = sx.ndim;
    const Onnx__AttributeProto *ma = pbl__onnx_attr_find(n, "mode");
    int64_t mode = 0;
    if (ma && !attr_str_is(ma, "constant")) {
        if (attr_str_is(ma, "reflect"))
            mode = 1;
        else if (attr_str_is(ma, "edge"))
            mode = 2;
        else
            NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "attribute mode is not one pebble knows (constant, reflect, edge)%s", "");
    }
    if (c->opset < 11) {
        if ((s = pbl__onnx_attr_ints(c, c->opset < 2 ? "paddings" : "pads", pads, 2 * PBL_MAX_DIMS, &np)) != PBL_OK ||
            (s = pbl__onnx_attr_float(c, "value", 0.0, &value)) != PBL_OK)
            return s;
    } else {
        if ((s = ints_from(c, 1, "", pads, 2 * PBL_MAX_DIMS, &np)) != PBL_OK || (s = ints_from(c, 3, "", ax, PBL_MAX_DIMS, &na)) != PBL_OK)
            return s;
        const char *vn = pbl__onnx_in_name(n, 2);
        if (vn) {
            pbl__onnx_sym *vs = pbl__onnx_sym_find(c, vn);
            if (!vs || !vs->is_const || vs->data.numel != 1 || (!vs->data.f && !vs->data.ints))
                NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "constant_value '%s' must be a one-element constant", vn);
            value = vs->data.is_int ? (double)vs->data.ints[0] : (double)vs->data.f[0];
        }
    }
    int32_t k = na >= 0 ? na : r; /* the padded axes: all, or those listed (opset 18) */
    if (np != 2 * k)
        NODE_FAIL(c, PBL_ERR_ATTR, "pads lists %d values; %d expected (2 per padded axis)", (int)np, (int)(2 * k));
    int64_t full[2 * PBL_MAX_DIMS] = { 0 };
    for (int32_t i = 0; i < k; i++) {
        int64_t a = i;
        if (na >= 0 && (s = norm_axis(c, "axes value", ax[i], r, &a)) != PBL_OK)
            return s;
        full[a] = pads[i], full[r + a] = pads[k + i];
    }
    for (int32_t d = 0; d < r; d++) {
        int64_t b = full[d], e = full[r + d], len = sx.dim[d];
        if (len + b + e < 1 || (mode && (b < 0 || e < 0)) || (mode == 1 && (b > len - 1 || e > len - 1)))
            NODE_FAIL(c, PBL_ERR_ATTR, "pads %lld and %lld of axis %d (size %lld) are out of range for mode %s", (long long)b,
                      (long long)e, (int)d, (long long)len, mode == 0 ? "constant" : mode == 1 ? "reflect" : "edge");
    }
    /* pebble's pads hold 2 entries per dim, at most PBL_MAX_INTS: the unpadded leading dims
     * become one */
    int32_t lead = 0;
    while (lead < r - 1 && full[lead] == 0 && full[r + lead] == 0)
        lead++;
    pbl_shape inner = { .ndim = r - lead + (lead > 0) };
    int64_t ip[PBL_MAX_INTS];
    int32_t off = lead > 0;
    if (lead > 0) {
        inner.dim[0] = 1;
        for (int32_t d = 0; d < lead; d++)
            inner.dim[0] *= sx.dim[d];
    }
    if (2 * inner.ndim > PBL_MAX_INTS)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "pads over %d dims; pebble pads at most %d", (int)(r - lead), PBL_MAX_INTS / 2 - 1);
    for (int32_t d = lead; d < r; d++) {
        inner.dim[d - lead + off] = sx.dim[d];
        ip[d - lead + off] = full[d], ip[inner.ndim + d - lead + off] = full[r + d];
    }
    if (off)
        ip[0] = ip[inner.ndim] = 0;
    pbl_shape so = sx;
    for (int32_t d = 0; d < r; d++)
        so.dim[d] += full[d] + full[r + d];
    pbl_attr at[] = { PBL_ATTR_INTS("pads", ip, 2 * inner.ndim), PBL_ATTR_INT("mode", mode), PBL_ATTR_FLOAT("value", value) };
    if ((s = pbl__onnx_to_shape(c, x, inner, "reshape", "lead", &x)) != PBL_OK ||
        (s = pbl__onnx_emit(c, "pad", &x, 1, at, 3, off ? "pad" : NULL, &y)) != PBL_OK ||
        (s = pbl__onnx_to_shape(c, y, so, "reshape", NULL, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, n->output[0], y);
}

/* ONNX element type -> pebble dtype (int64 and int32 are i32, double is f32), or -1 */
int pbl__onnx_dtype_of(int64_t t)
{
    if (t == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || t == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE)
        return PBL_F32;
    if (t == ONNX__TENSOR_PROTO__DATA_TYPE__INT32 || t == ONNX__TENSOR_PROTO__DATA_TYPE__INT64)
        return PBL_I32;
    return -1;
}

static pbl_status cv_cast(pbl__onnx_ctx *c)
{
    pbl_value x, y;
    int64_t to;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 1, 1)) != PBL_OK || (s = pbl__onnx_get(c, c->node->input[0], &x)) != PBL_OK ||
        (s = pbl__onnx_attr_int(c, "to", -1, &to)) != PBL_OK)
        return s;
    int dt = pbl__onnx_dtype_of(to);
    if (dt < 0)
        NODE_FAIL(c, to < 0 ? PBL_ERR_FORMAT : PBL_ERR_UNSUPPORTED, "attribute to is %lld; pebble casts to FLOAT, DOUBLE, INT32 and INT64 "
                  "(as f32 and i32)", (long long)to);
    pbl_value_info vi;
    pbl_graph_value_info(c->g, x, &vi);
    y = x;
    pbl_attr at[] = { PBL_ATTR_INT("to", dt) };
    if ((int)vi.dtype != dt && (s = pbl__onnx_emit(c, "cast", &x, 1, at, 1, NULL, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, c->node->output[0], y);
}

/* Tile: per repeated dim, x as [outer, 1, d, inner] broadcast to [outer, r, d, inner] */
static pbl_status cv_tile(pbl__onnx_ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value x;
    const int64_t *rep;
    int64_t k;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 2, 3)) != PBL_OK || (s = pbl__onnx_get(c, n->input[0], &x)) != PBL_OK ||
        (s = pbl__onnx_get_ints(c, n->input[1], &rep, &k)) != PBL_OK)
        return s;
    pbl_shape sx = pbl__onnx_shape_of(c, x);
    if (k != sx.ndim)
        NODE_FAIL(c, PBL_ERR_SHAPE, "repeats lists %lld values for rank %d", (long long)k, (int)sx.ndim);
    for (int32_t d = 0; d < sx.ndim; d++) {
        if (rep[d] < 1)
            NODE_FAIL(c, rep[d] == 0 ? PBL_ERR_UNSUPPORTED : PBL_ERR_ATTR, "repeats[%d] is %lld", (int)d, (long long)rep[d]);
        if (rep[d] == 1)
            continue;
        int64_t outer = 1, inner = 1;
        for (int32_t j = 0; j < sx.ndim; j++)
            *(j < d ? &outer : &inner) *= j == d ? 1 : sx.dim[j];
        char sfx[32];
        snprintf(sfx, sizeof sfx, "tile%d", (int)d);
        pbl_shape four = pbl_shape_make(4, (int64_t[]){ outer, 1, sx.dim[d], inner });
        pbl_shape wide = pbl_shape_make(4, (int64_t[]){ outer, rep[d], sx.dim[d], inner });
        sx.dim[d] *= rep[d];
        if ((s = pbl__onnx_to_shape(c, x, four, "reshape", sfx, &x)) != PBL_OK ||
            (s = pbl__onnx_to_shape(c, x, wide, "broadcast_to", sfx, &x)) != PBL_OK ||
            (s = pbl__onnx_to_shape(c, x, sx, "reshape", sfx, &x)) != PBL_OK)
            return s;
    }
    return pbl__onnx_define(c, n->output[0], x);
}

/* DepthToSpace (DCR or CRD) and SpaceToDepth: a reshape, a transpose and a reshape */
static pbl_status cv_depth_space(pbl__onnx_ctx *c, int to_space)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value x, y;
    int64_t b;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 1, 1)) != PBL_OK || (s = pbl__onnx_get(c, n->input[0], &x)) != PBL_OK ||
        (s = pbl__onnx_attr_int(c, "blocksize", 0, &b)) != PBL_OK)
        return s;
    const Onnx__AttributeProto *ma = pbl__onnx_attr_find(n, "mode");
    int crd = attr_str_is(ma, "CRD");
    if (ma && !crd && !attr_str_is(ma, "DCR"))
        NODE_FAIL(c, PBL_ERR_ATTR, "attribute mode is neither DCR nor CRD%s", "");
    pbl_shape sx = pbl__onnx_shape_of(c, x);
    if (sx.ndim != 4)
        NODE_FAIL(c, PBL_ERR_SHAPE, "input has rank %d; [N, C, H, W] expected", (int)sx.ndim);
    int64_t N = sx.dim[0], C = sx.dim[1], H = sx.dim[2], W = sx.dim[3];
    if (b < 1 || (to_space ? C % (b * b) != 0 : H % b != 0 || W % b != 0))
        NODE_FAIL(c, PBL_ERR_ATTR, "attribute blocksize %lld does not divide the input's %s", (long long)b, to_space ? "channels" : "height and width");
    pbl_shape six, out;
    int64_t perm[6];
    if (to_space) {
        int64_t cc = C / (b * b);
        six = crd ? pbl_shape_make(6, (int64_t[]){ N, cc, b, b, H, W }) : pbl_shape_make(6, (int64_t[]){ N, b, b, cc, H, W });
        memcpy(perm, crd ? (int64_t[]){ 0, 1, 4, 2, 5, 3 } : (int64_t[]){ 0, 3, 4, 1, 5, 2 }, sizeof perm);
        out = pbl_shape_make(4, (int64_t[]){ N, cc, H * b, W * b });
    } else {
        six = pbl_shape_make(6, (int64_t[]){ N, C, H / b, b, W / b, b });
        memcpy(perm, (int64_t[]){ 0, 3, 5, 1, 2, 4 }, sizeof perm);
        out = pbl_shape_make(4, (int64_t[]){ N, C * b * b, H / b, W / b });
    }
    pbl_attr pa[] = { PBL_ATTR_INTS("perm", perm, 6) };
    if ((s = pbl__onnx_to_shape(c, x, six, "reshape", "blocks", &x)) != PBL_OK ||
        (s = pbl__onnx_emit(c, "transpose", &x, 1, pa, 1, "moved", &y)) != PBL_OK ||
        (s = pbl__onnx_to_shape(c, y, out, "reshape", NULL, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, n->output[0], y);
}

static pbl_status cv_depth_to_space(pbl__onnx_ctx *c) { return cv_depth_space(c, 1); }
static pbl_status cv_space_to_depth(pbl__onnx_ctx *c) { return cv_depth_space(c, 0); }

/* Shape arithmetic the folder (graph/io/onnx_fold.c) did not fold: its inputs come from data */
static pbl_status cv_fold_only(pbl__onnx_ctx *c)
{
    NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "its inputs are computed at run time; pebble runs %s only on constants, folded at load "
              "time (its shapes are static)", c->node->op_type);
}

static const pbl__onnx_op tensor_ops[] = {
    { "Gather", cv_gather, "axis" }, { "Unsqueeze", cv_unsqueeze, "axes" }, { "Squeeze", cv_squeeze, "axes" },
    { "Expand", cv_expand, "" }, { "Slice", cv_slice, "starts ends axes" }, { "Split", cv_split, "axis split num_outputs" },
    { "Pad", cv_pad, "mode pads paddings value" }, { "Cast", cv_cast, "to saturate" }, { "Tile", cv_tile, "" },
    { "DepthToSpace", cv_depth_to_space, "blocksize mode" }, { "SpaceToDepth", cv_space_to_depth, "blocksize" },
    { "Shape", cv_fold_only, "start end" }, { "Size", cv_fold_only, "" }, { "ConstantOfShape", cv_fold_only, "value" },
    { "Range", cv_fold_only, "" },
};

const pbl__onnx_op_table pbl__onnx_ops_tensor = { tensor_ops, sizeof tensor_ops / sizeof tensor_ops[0] };
