/*
 * What every ONNX op converter shares: reading the current node's attributes and inputs, ONNX's
 * two-way broadcasting, and the two shapes of converter most ops take (one pebble op over one
 * input; one binary op over two broadcast inputs). The converters themselves are in
 * graph/io/onnx_ops*.c, one file per family, each with its table.
 */
#include <stdio.h>
#include <string.h>

#include "graph/io/onnx_internal.h"
#include "pebble/builder.h"

/* ---- attributes ------------------------------------------------------------------------------ */

const Onnx__AttributeProto *pbl__onnx_attr_find(const Onnx__NodeProto *n, const char *name)
{
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i] && n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0)
            return n->attribute[i];
    return NULL;
}

pbl_status pbl__onnx_attr_int(pbl__onnx_ctx *c, const char *name, int64_t dflt, int64_t *out)
{
    const Onnx__AttributeProto *a = pbl__onnx_attr_find(c->node, name);
    *out = dflt;
    if (!a)
        return PBL_OK;
    if (!a->has_i && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)
        NODE_FAIL(c, PBL_ERR_FORMAT, "attribute %s is not an int", name);
    *out = a->i;
    return PBL_OK;
}

pbl_status pbl__onnx_attr_float(pbl__onnx_ctx *c, const char *name, double dflt, double *out)
{
    const Onnx__AttributeProto *a = pbl__onnx_attr_find(c->node, name);
    *out = dflt;
    if (!a)
        return PBL_OK;
    if (!a->has_f && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT)
        NODE_FAIL(c, PBL_ERR_FORMAT, "attribute %s is not a float", name);
    *out = a->f;
    return PBL_OK;
}

/* An int attribute that is a flag: 0 or 1, anything else refused (transB=7 is a broken model,
 * not "true"). */
pbl_status pbl__onnx_attr_bool(pbl__onnx_ctx *c, const char *name, int64_t dflt, int64_t *out)
{
    pbl_status s = pbl__onnx_attr_int(c, name, dflt, out);
    if (s == PBL_OK && *out != 0 && *out != 1)
        NODE_FAIL(c, PBL_ERR_ATTR, "attribute %s is %lld; it must be 0 or 1", name, (long long)*out);
    return s;
}

/* An ints attribute into buf (at most max); *n = -1 when absent. */
pbl_status pbl__onnx_attr_ints(pbl__onnx_ctx *c, const char *name, int64_t *buf, int32_t max, int32_t *n)
{
    const Onnx__AttributeProto *a = pbl__onnx_attr_find(c->node, name);
    *n = -1;
    if (!a)
        return PBL_OK;
    if (a->n_ints > (size_t)max)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "attribute %s lists %zu ints; pebble takes at most %d", name, a->n_ints, (int)max);
    for (size_t i = 0; i < a->n_ints; i++)
        buf[i] = a->ints[i];
    *n = (int32_t)a->n_ints;
    return PBL_OK;
}

pbl_status pbl__onnx_attr_string_is(pbl__onnx_ctx *c, const char *name, const char *dflt, const char **out)
{
    const Onnx__AttributeProto *a = pbl__onnx_attr_find(c->node, name);
    *out = dflt;
    if (a && a->has_s) {
        /* attribute strings are not NUL-terminated: compare against the known values only */
        static const char *const known[] = { "NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER" };
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            if (a->s.len == strlen(known[k]) && memcmp(a->s.data, known[k], a->s.len) == 0) {
                *out = known[k];
                return PBL_OK;
            }
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "attribute %s has a value pebble does not know", name);
    }
    return PBL_OK;
}

/* Input i's name, or NULL when absent or empty (an omitted optional input). */
const char *pbl__onnx_in_name(const Onnx__NodeProto *n, size_t i)
{
    return i < n->n_input && n->input[i] && n->input[i][0] ? n->input[i] : NULL;
}

pbl_status pbl__onnx_need_inputs(pbl__onnx_ctx *c, size_t lo, size_t hi)
{
    const Onnx__NodeProto *n = c->node;
    for (size_t i = 0; i < lo; i++)
        if (!pbl__onnx_in_name(n, i))
            NODE_FAIL(c, PBL_ERR_FORMAT, "input %zu is required", i);
    if (n->n_input > hi)
        NODE_FAIL(c, PBL_ERR_FORMAT, "has %zu inputs, at most %zu expected", n->n_input, hi);
    if (n->n_output < 1 || !n->output[0] || !n->output[0][0])
        NODE_FAIL(c, PBL_ERR_FORMAT, "has no output%s", "");
    return PBL_OK;
}

/* ---- shapes ---------------------------------------------------------------------------------- */

/* numpy two-way broadcasting of a and b into out; 0 when they do not broadcast. */
int pbl__onnx_bcast_shape(const pbl_shape *a, const pbl_shape *b, pbl_shape *out)
{
    int32_t r = a->ndim > b->ndim ? a->ndim : b->ndim;
    out->ndim = r;
    for (int32_t i = 1; i <= r; i++) {
        int64_t da = i <= a->ndim ? a->dim[a->ndim - i] : 1, db = i <= b->ndim ? b->dim[b->ndim - i] : 1;
        if (da != db && da != 1 && db != 1)
            return 0;
        out->dim[r - i] = da == 1 ? db : da;
    }
    return 1;
}

pbl_status pbl__onnx_to_shape(pbl__onnx_ctx *c, pbl_value x, pbl_shape want, const char *op, const char *suffix, pbl_value *out)
{
    pbl_shape have = pbl__onnx_shape_of(c, x);
    if (pbl_shape_equal(&have, &want)) {
        *out = x;
        return PBL_OK;
    }
    pbl_attr at = PBL_ATTR_INTS("shape", want.dim, want.ndim);
    return pbl__onnx_emit(c, op, &x, 1, &at, 1, suffix, out);
}

/* ---- the two shapes of converter most ops take ---------------------------------------------- */

/* out = a (op) b with ONNX's two-way broadcasting; pebble's binary ops broadcast b to a. */
pbl_status pbl__onnx_binary(pbl__onnx_ctx *c, const char *op, int commutative, pbl_value a, pbl_value b, const char *suffix,
                         pbl_value *out)
{
    pbl_shape sa = pbl__onnx_shape_of(c, a), sb = pbl__onnx_shape_of(c, b), so;
    if (!pbl__onnx_bcast_shape(&sa, &sb, &so)) {
        char ba[96], bb[96];
        NODE_FAIL(c, PBL_ERR_SHAPE, "inputs %s and %s do not broadcast", pbl_shape_str(&sa, ba, sizeof ba),
                  pbl_shape_str(&sb, bb, sizeof bb));
    }
    pbl_status s;
    if (!pbl_shape_equal(&sa, &so)) {
        if (commutative && pbl_shape_equal(&sb, &so)) {
            pbl_value t = a;
            a = b;
            b = t;
        } else {
            char sfx[64];
            snprintf(sfx, sizeof sfx, "%s%sbroadcast_a", suffix ? suffix : "", suffix ? "_" : "");
            if ((s = pbl__onnx_to_shape(c, a, so, "broadcast_to", sfx, &a)) != PBL_OK)
                return s;
        }
    }
    return pbl__onnx_emit(c, op, (pbl_value[]){ a, b }, 2, NULL, 0, suffix, out);
}

pbl_status pbl__onnx_unary(pbl__onnx_ctx *c, const char *op)
{
    pbl_value x, y;
    pbl_status s;
    if ((s = pbl__onnx_need_inputs(c, 1, 1)) != PBL_OK || (s = pbl__onnx_get(c, c->node->input[0], &x)) != PBL_OK ||
        (s = pbl__onnx_emit(c, op, &x, 1, NULL, 0, NULL, &y)) != PBL_OK)
        return s;
    return pbl__onnx_define(c, c->node->output[0], y);
}
