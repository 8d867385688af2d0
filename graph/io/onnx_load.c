/*
 * ONNX model -> pebble graph (pebble/onnx.h). The ModelProto is decoded by protobuf-c code
 * generated at build time from Debian's onnx.proto; every field the loader reads is checked
 * for presence and range, so a malformed or hostile file gives a status, never a crash.
 *
 * The loader keeps a table from ONNX value names to what they are: a pebble value (a graph
 * input, or a node's output), or a constant (an initializer or a Constant node) whose data
 * becomes a parameter variable only when a node reads it as data — constants read as shapes
 * or axes (Reshape, ReduceSum) never enter the graph. Nodes are converted once all their
 * inputs are known, so an unsorted model still loads and a cyclic one is reported. Each node
 * is converted by its op's converter in graph/io/onnx_ops.c; the table and the helpers both files
 * use are in graph/io/onnx_internal.h.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "graph/base/errmsg.h"
#include "graph/base/export.h"
#include "graph/io/onnx_internal.h"
#include "pebble/builder.h"

/* ---- the weights handle ---------------------------------------------------------------------- */


PBL__API int32_t pbl_onnx_weights_count(const pbl_onnx_weights *w) { return w ? w->n : 0; }

PBL__API pbl_status pbl_onnx_weights_at(const pbl_onnx_weights *w, int32_t i, pbl_value *v,
                                        void **data, size_t *bytes)
{
    if (!w || i < 0 || i >= w->n)
        return PBL_ERR_INVALID_ARG;
    if (v)
        *v = w->items[i].v;
    if (data)
        *data = w->items[i].data;
    if (bytes)
        *bytes = w->items[i].bytes;
    return PBL_OK;
}

PBL__API int32_t pbl_onnx_weights_file_count(const pbl_onnx_weights *w) { return w ? w->n_files : 0; }

PBL__API const char *pbl_onnx_weights_file_at(const pbl_onnx_weights *w, int32_t i)
{
    return w && i >= 0 && i < w->n_files ? w->files[i] : NULL;
}

PBL__API void pbl_onnx_weights_destroy(pbl_onnx_weights *w)
{
    if (!w)
        return;
    for (int32_t i = 0; i < w->n; i++)
        pbl__mem_free(&w->mem, w->items[i].data, w->items[i].bytes);
    pbl__mem_free(&w->mem, w->items, (size_t)w->cap * sizeof *w->items);
    for (int32_t i = 0; i < w->n_files; i++)
        pbl__mem_strfree(&w->mem, w->files[i]);
    pbl__mem_free(&w->mem, w->files, (size_t)w->cap_files * sizeof *w->files);
    pbl__mem m = w->mem;
    pbl__mem_free(&m, w, sizeof *w);
}

PBL__API pbl_onnx_options pbl_onnx_options_default(void)
{
    return (pbl_onnx_options){ .allocator = NULL, .dim_value = 1, .weights = NULL, .pack_weights = 1 };
}

/* ---- the loader's state ---------------------------------------------------------------------- */



static const char *str(const char *s) { return s ? s : ""; }

/* "node 'fc1' (Gemm)" or "node #3 (Gemm)" for messages */
const char *pbl__onnx_node_label(pbl__onnx_ctx *c, char *buf, size_t n)
{
    const Onnx__NodeProto *nd = c->node;
    if (nd && nd->name && nd->name[0])
        snprintf(buf, n, "node '%s' (%s)", nd->name, str(nd->op_type));
    else
        snprintf(buf, n, "node #%d (%s)", (int)c->node_index, nd ? str(nd->op_type) : "?");
    return buf;
}


static uint32_t hash_str(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

pbl__onnx_sym *pbl__onnx_sym_find(pbl__onnx_ctx *c, const char *name)
{
    if (!c->hash_cap || !name)
        return NULL;
    for (uint32_t i = hash_str(name) & (uint32_t)(c->hash_cap - 1);; i = (i + 1) & (uint32_t)(c->hash_cap - 1)) {
        int32_t k = c->hash[i];
        if (k == 0)
            return NULL;
        if (strcmp(c->syms[k - 1].name, name) == 0)
            return &c->syms[k - 1];
    }
}

/* Adds a name; PBL_ERR_FORMAT when it is already defined (ONNX values are assigned once). */
pbl_status pbl__onnx_sym_add(pbl__onnx_ctx *c, const char *name, pbl__onnx_sym **out)
{
    if (pbl__onnx_sym_find(c, name))
        return pbl__onnx_fail(c, PBL_ERR_FORMAT, "value '%s' is defined twice (ONNX assigns each value once)", name);
    if (pbl__mem_reserve(&c->mem, (void **)&c->syms, &c->cap_syms, c->n_syms + 1, sizeof *c->syms) != PBL_OK)
        return pbl__onnx_fail(c, PBL_ERR_NOMEM, "out of memory");
    if ((c->n_syms + 1) * 2 > c->hash_cap) { /* rehash at half load */
        int32_t ncap = c->hash_cap ? c->hash_cap * 2 : 64;
        int32_t *nh = pbl__mem_calloc(&c->mem, (size_t)ncap * sizeof *nh);
        if (!nh)
            return pbl__onnx_fail(c, PBL_ERR_NOMEM, "out of memory");
        for (int32_t k = 0; k < c->n_syms; k++) {
            uint32_t i = hash_str(c->syms[k].name) & (uint32_t)(ncap - 1);
            while (nh[i])
                i = (i + 1) & (uint32_t)(ncap - 1);
            nh[i] = k + 1;
        }
        pbl__mem_free(&c->mem, c->hash, (size_t)c->hash_cap * sizeof *c->hash);
        c->hash = nh;
        c->hash_cap = ncap;
    }
    pbl__onnx_sym *s = &c->syms[c->n_syms++];
    memset(s, 0, sizeof *s);
    s->name = name;
    s->v = PBL_NONE;
    uint32_t i = hash_str(name) & (uint32_t)(c->hash_cap - 1);
    while (c->hash[i])
        i = (i + 1) & (uint32_t)(c->hash_cap - 1);
    c->hash[i] = c->n_syms;
    *out = s;
    return PBL_OK;
}

/* A pebble name not yet taken by a value or node: base, else base~2, base~3, ... */
static void unique_name(pbl__onnx_ctx *c, const char *base, char *buf, size_t n)
{
    snprintf(buf, n, "%s", base);
    for (int k = 2; pbl_graph_find_value(c->g, buf) != PBL_NONE || pbl_graph_find_node(c->g, buf) != PBL_NONE; k++)
        snprintf(buf, n, "%s~%d", base, k);
}

/* Float data -> a parameter variable, its data moved into the weights; on failure *out is
 * PBL_NONE and the data still the caller's. */
pbl_status pbl__onnx_add_weight(pbl__onnx_ctx *c, const char *base, pbl_shape shape, float *data, pbl_value *out)
{
    char name[512];
    pbl_onnx_weights *w = c->w;
    *out = PBL_NONE;
    if (pbl__mem_reserve(&w->mem, (void **)&w->items, &w->cap, w->n + 1, sizeof *w->items) != PBL_OK)
        return pbl__onnx_fail(c, PBL_ERR_NOMEM, "out of memory");
    unique_name(c, base, name, sizeof name);
    pbl_status s = pbl_graph_add_variable(c->g, name, PBL_VALUE_PARAM, PBL_F32, shape, out);
    if (s != PBL_OK) {
        *out = PBL_NONE;
        return pbl__onnx_fail(c, s, "initializer '%s': %s", base, pbl_graph_errmsg(c->g));
    }
    w->items[w->n++] = (pbl__onnx_weight_item){ .v = *out, .data = data, .bytes = (size_t)pbl_shape_numel(&shape) * sizeof(float) };
    return PBL_OK;
}

/* Integer constant s read as data: an i32 parameter (ONNX's int64 values must fit int32),
 * its ints kept for readers of shapes and axes. */
static pbl_status int_weight(pbl__onnx_ctx *c, pbl__onnx_sym *s, pbl_value *out)
{
    char nl[256];
    for (int64_t i = 0; i < s->data.numel; i++)
        if (s->data.ints[i] < INT32_MIN || s->data.ints[i] > INT32_MAX)
            return pbl__onnx_fail(c, PBL_ERR_UNSUPPORTED, "%s: integer tensor '%s': element %lld is %lld, outside int32 (pebble's "
                                  "integers)", pbl__onnx_node_label(c, nl, sizeof nl), s->name, (long long)i, (long long)s->data.ints[i]);
    size_t bytes = (size_t)s->data.numel * sizeof(int32_t);
    int32_t *v = pbl__mem_alloc(&c->w->mem, bytes);
    if (!v)
        return pbl__onnx_fail(c, PBL_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < s->data.numel; i++)
        v[i] = (int32_t)s->data.ints[i];
    pbl_onnx_weights *w = c->w;
    char name[512];
    if (pbl__mem_reserve(&w->mem, (void **)&w->items, &w->cap, w->n + 1, sizeof *w->items) != PBL_OK) {
        pbl__mem_free(&w->mem, v, bytes);
        return pbl__onnx_fail(c, PBL_ERR_NOMEM, "out of memory");
    }
    unique_name(c, s->name, name, sizeof name);
    pbl_status st = pbl_graph_add_variable(c->g, name, PBL_VALUE_PARAM, PBL_I32, s->data.shape, &s->v);
    if (st != PBL_OK) {
        s->v = PBL_NONE;
        pbl__mem_free(&w->mem, v, bytes);
        return pbl__onnx_fail(c, st, "integer tensor '%s': %s", s->name, pbl_graph_errmsg(c->g));
    }
    /* the weights hold 4-byte elements whatever their type: bound by bytes */
    w->items[w->n++] = (pbl__onnx_weight_item){ .v = s->v, .data = (float *)(void *)v, .bytes = bytes };
    *out = s->v;
    return PBL_OK;
}

/* The pebble value of ONNX value `name` (materialising a float constant). */
pbl_status pbl__onnx_get(pbl__onnx_ctx *c, const char *name, pbl_value *out)
{
    pbl__onnx_sym *s = pbl__onnx_sym_find(c, name);
    if (!s)
        NODE_FAIL(c, PBL_ERR_FORMAT, "input '%s' names no value", name);
    if (s->unsupported)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "input '%s': %s", name, s->unsupported);
    if (s->v == PBL_NONE && s->data.empty)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "input '%s' is an empty tensor, which pebble cannot hold as data", name);
    if (s->v == PBL_NONE && s->data.is_int) /* integers read as data: an i32 parameter */
        return int_weight(c, s, out);
    if (s->v == PBL_NONE) {
        float *f = s->data.f;
        s->data.f = NULL; /* moves to the weights, which free it from now on */
        pbl_status st = pbl__onnx_add_weight(c, s->name, s->data.shape, f, &s->v);
        if (st != PBL_OK) {
            if (s->v == PBL_NONE)
                pbl__mem_free(&c->w->mem, f, (size_t)s->data.numel * sizeof *f);
            return st;
        }
    }
    *out = s->v;
    return PBL_OK;
}

/* The integer data of constant `name` (shapes, axes). */
pbl_status pbl__onnx_get_ints(pbl__onnx_ctx *c, const char *name, const int64_t **ints, int64_t *n)
{
    pbl__onnx_sym *s = pbl__onnx_sym_find(c, name);
    if (!s)
        NODE_FAIL(c, PBL_ERR_FORMAT, "input '%s' names no value", name);
    if (!s->is_const || !s->data.is_int || (!s->data.ints && !s->data.empty))
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "input '%s' must be a constant integer tensor (an initializer or a Constant): "
                  "pebble's shapes are static", name);
    *ints = s->data.ints;
    *n = s->data.numel;
    return PBL_OK;
}

pbl_shape pbl__onnx_shape_of(pbl__onnx_ctx *c, pbl_value v)
{
    pbl_value_info vi;
    if (pbl_graph_value_info(c->g, v, &vi) != PBL_OK)
        return (pbl_shape){ 0 };
    return vi.shape;
}

/* Defines ONNX value `name` as pebble value v. */
pbl_status pbl__onnx_define(pbl__onnx_ctx *c, const char *name, pbl_value v)
{
    if (!name || !name[0])
        return PBL_OK;
    pbl__onnx_sym *s;
    pbl_status st = pbl__onnx_sym_add(c, name, &s);
    if (st != PBL_OK)
        return st;
    s->v = v;
    return PBL_OK;
}

/* Emits one pebble node for the current ONNX node: named after its first output, with
 * "/suffix" for helper nodes (a transpose before a softmax). */
pbl_status pbl__onnx_emit(pbl__onnx_ctx *c, const char *op, const pbl_value *in, int32_t n_in, const pbl_attr *attrs,
                       int32_t n_attrs, const char *suffix, pbl_value *out)
{
    pbl_value outs[4];
    pbl_status s = pbl__onnx_emit_outs(c, op, in, n_in, attrs, n_attrs, suffix, outs);
    *out = outs[0];
    return s;
}

pbl_status pbl__onnx_emit_outs(pbl__onnx_ctx *c, const char *op, const pbl_value *in, int32_t n_in,
                               const pbl_attr *attrs, int32_t n_attrs, const char *suffix, pbl_value outs[4])
{
    const Onnx__NodeProto *nd = c->node;
    char base[400], name[512];
    const char *o0 = nd->n_output > 0 && nd->output[0] && nd->output[0][0] ? nd->output[0] : NULL;
    if (o0)
        snprintf(base, sizeof base, "%s%s%s", o0, suffix ? "/" : "", suffix ? suffix : "");
    else
        snprintf(base, sizeof base, "%s_%d%s%s", str(nd->op_type), (int)c->node_index, suffix ? "/" : "", suffix ? suffix : "");
    unique_name(c, base, name, sizeof name);
    for (int k = 0; k < 4; k++)
        outs[k] = PBL_NONE;
    pbl_node_desc d = { .op = op, .name = name, .inputs = in, .n_inputs = n_in, .attrs = attrs, .n_attrs = n_attrs };
    pbl_status s = pbl_graph_add_node(c->g, &d, NULL, outs);
    if (s != PBL_OK) /* a dtype pebble's op does not take (i32 data into add) is a type pebble cannot run */
        NODE_FAIL(c, s == PBL_ERR_DTYPE ? PBL_ERR_UNSUPPORTED : s, "pebble op %s: %s", op, pbl_graph_errmsg(c->g));
    return PBL_OK;
}

/* ---- the model ------------------------------------------------------------------------------- */

/* Every node's op is known, or one message listing each unknown op type once with a node. */
static pbl_status check_ops(pbl__onnx_ctx *c, const Onnx__GraphProto *gp)
{
    size_t len = 0;
    int32_t count = 0;
    char *msg = c->err;
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *n = gp->node[i];
        if (!n)
            return pbl__onnx_fail(c, PBL_ERR_FORMAT, "node #%zu is missing", i);
        if (!n->op_type || !n->op_type[0])
            return pbl__onnx_fail(c, PBL_ERR_FORMAT, "node #%zu has no op_type", i);
        if (pbl__onnx_known_op(n))
            continue;
        int seen = 0; /* each op type once: the first node that uses it */
        for (size_t j = 0; j < i && !seen; j++)
            seen = !pbl__onnx_known_op(gp->node[j]) && strcmp(gp->node[j]->op_type, n->op_type) == 0 &&
                   strcmp(str(gp->node[j]->domain), str(n->domain)) == 0;
        if (seen)
            continue;
        if (count++ == 0 && msg && c->errlen)
            len = (size_t)snprintf(msg, c->errlen, "unsupported ONNX ops:");
        if (msg && len < c->errlen) {
            char who[160];
            if (n->name && n->name[0])
                snprintf(who, sizeof who, "node '%s'", n->name);
            else
                snprintf(who, sizeof who, "node #%zu", i);
            int w = snprintf(msg + len, c->errlen - len, "%s %s%s%s (%s)", count > 1 ? "," : "",
                             pbl__onnx_default_domain(n->domain) ? "" : n->domain, pbl__onnx_default_domain(n->domain) ? "" : "::",
                             n->op_type, who);
            len += w > 0 ? (size_t)w : 0;
        }
    }
    return count ? PBL_ERR_UNSUPPORTED : PBL_OK;
}

static pbl_status add_inputs(pbl__onnx_ctx *c, const Onnx__GraphProto *gp)
{
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        if (!vi || !vi->name || !vi->name[0])
            return pbl__onnx_fail(c, PBL_ERR_FORMAT, "graph input #%zu has no name", i);
        if (pbl__onnx_sym_find(c, vi->name)) /* an initializer listed as an input too (IR < 4): a constant */
            continue;
        const Onnx__TypeProto *tp = vi->type;
        if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
            return pbl__onnx_fail(c, tp ? PBL_ERR_UNSUPPORTED : PBL_ERR_FORMAT, "graph input '%s': %s", vi->name,
                        tp ? "only tensor inputs are supported" : "no type given");
        const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
        pbl_dtype dt;
        if (tt->elem_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
            dt = PBL_F32;
        else if (tt->elem_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT32 || tt->elem_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 ||
                 tt->elem_type == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL)
            dt = PBL_I32; /* int64 data is fed as int32 (pbl_onnx_tensor_read checks the range); BOOL as 0/1 */
        else
            return pbl__onnx_fail(c, PBL_ERR_UNSUPPORTED, "graph input '%s': element type %s (%d) is not supported (FLOAT, INT32, INT64 and BOOL are)",
                        vi->name, pbl__onnx_type_name(tt->elem_type), (int)tt->elem_type);
        if (!tt->shape)
            return pbl__onnx_fail(c, PBL_ERR_UNSUPPORTED, "graph input '%s' has no shape (pebble's shapes are static)", vi->name);
        if (tt->shape->n_dim > PBL_MAX_DIMS)
            return pbl__onnx_fail(c, PBL_ERR_UNSUPPORTED, "graph input '%s' has rank %zu; pebble's limit is %d", vi->name,
                        tt->shape->n_dim, PBL_MAX_DIMS);
        pbl_shape sh = { .ndim = (int32_t)tt->shape->n_dim };
        int64_t numel = 1;
        for (size_t k = 0; k < tt->shape->n_dim; k++) {
            const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[k];
            int known = d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            int64_t v = known ? d->dim_value : c->opt->dim_value; /* symbolic or unknown: --dim */
            if (known && v < 0) /* a number, but no size: not a symbol to fill in silently */
                return pbl__onnx_fail(c, PBL_ERR_FORMAT, "graph input '%s': dim %zu is %lld (negative; a dim is a size"
                            " >= 1, or a symbolic dim_param)", vi->name, k, (long long)v);
            if (v <= 0 || v > PBL__ONNX_MAX_NUMEL / numel)
                return pbl__onnx_fail(c, v == 0 ? PBL_ERR_UNSUPPORTED : PBL_ERR_FORMAT, "graph input '%s': dim %zu is %lld (%s)",
                            vi->name, k, (long long)v, v == 0 ? "empty tensors are not supported" : "absurd");
            numel *= v;
            sh.dim[k] = v;
        }
        pbl_value v;
        pbl_status s = pbl_graph_add_variable(c->g, vi->name, PBL_VALUE_INPUT, dt, sh, &v);
        if (s != PBL_OK)
            return pbl__onnx_fail(c, s, "graph input '%s': %s", vi->name, pbl_graph_errmsg(c->g));
        if ((s = pbl__onnx_define(c, vi->name, v)) != PBL_OK)
            return s;
    }
    return PBL_OK;
}

/* The model's declared shape for a value (value_info or a graph output) must agree with
 * pebble's inference in every dim the model states as a number. */
static pbl_status check_declared(pbl__onnx_ctx *c, const Onnx__ValueInfoProto *vi, const char *what)
{
    if (!vi || !vi->name)
        return PBL_OK;
    pbl__onnx_sym *s = pbl__onnx_sym_find(c, vi->name);
    if (!s || s->v == PBL_NONE || !vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
        !vi->type->tensor_type || !vi->type->tensor_type->shape)
        return PBL_OK;
    const Onnx__TensorShapeProto *sp = vi->type->tensor_type->shape;
    pbl_shape have = pbl__onnx_shape_of(c, s->v);
    int ok = (int32_t)sp->n_dim == have.ndim;
    for (size_t k = 0; ok && k < sp->n_dim; k++) {
        const Onnx__TensorShapeProto__Dimension *d = sp->dim[k];
        if (d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value > 0)
            ok = d->dim_value == have.dim[k];
    }
    if (!ok) {
        char sh[96], decl[160];
        size_t len = (size_t)snprintf(decl, sizeof decl, "[");
        for (size_t k = 0; k < sp->n_dim && len < sizeof decl; k++) {
            const Onnx__TensorShapeProto__Dimension *d = sp->dim[k];
            int known = d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            len += (size_t)snprintf(decl + len, sizeof decl - len, known ? "%s%lld" : "%s?", k ? ", " : "",
                                    known ? (long long)d->dim_value : 0LL);
        }
        if (len < sizeof decl)
            snprintf(decl + len, sizeof decl - len, "]");
        return pbl__onnx_fail(c, PBL_ERR_SHAPE, "%s '%s': the model declares the shape %s but pebble infers %s", what, vi->name,
                    decl, pbl_shape_str(&have, sh, sizeof sh));
    }
    return PBL_OK;
}

static pbl_status convert_graph(pbl__onnx_ctx *c, const Onnx__ModelProto *m)
{
    const Onnx__GraphProto *gp = m->graph;
    pbl_status s;
    if (!gp)
        return pbl__onnx_fail(c, PBL_ERR_FORMAT, "the model has no graph");
    c->opset = 0;
    for (size_t i = 0; i < m->n_opset_import; i++)
        if (m->opset_import[i] && pbl__onnx_default_domain(m->opset_import[i]->domain)) {
            int64_t v = m->opset_import[i]->has_version ? m->opset_import[i]->version : 0;
            /* an opset pebble does not know may change what an op means: refuse it rather than
             * run the model under another opset's rules */
            if (v < PBL__ONNX_OPSET_MIN || v > PBL__ONNX_OPSET_MAX)
                return pbl__onnx_fail(c, PBL_ERR_UNSUPPORTED,
                                      "opset_import[%zu]: the default domain's opset version is %lld; pebble accepts %d to %d",
                                      i, (long long)v, PBL__ONNX_OPSET_MIN, PBL__ONNX_OPSET_MAX);
            c->opset = v;
        }
    if (c->opset == 0)
        c->opset = 1; /* IR without an opset import: the first opset */
    if ((s = check_ops(c, gp)) != PBL_OK)
        return s;
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *t = gp->initializer[i];
        if (!t || !t->name || !t->name[0])
            return pbl__onnx_fail(c, PBL_ERR_FORMAT, "initializer #%zu has no name", i);
        pbl__onnx_sym *sm;
        if ((s = pbl__onnx_sym_add(c, t->name, &sm)) != PBL_OK)
            return s;
        char what[300];
        snprintf(what, sizeof what, "initializer '%s'", t->name);
        int external = t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
        if ((s = external ? pbl__onnx_external_decode(c, t, &sm->data, what)
                          : pbl__onnx_data_decode(t, &c->w->mem, &c->mem, &sm->data, what, c->err, c->errlen)) != PBL_OK)
            return s;
        sm->is_const = 1;
    }
    if ((s = add_inputs(c, gp)) != PBL_OK)
        return s;
    /* Convert each node once its inputs are known: one pass for a sorted model. */
    size_t n = gp->n_node, left = n;
    uint8_t *done = pbl__mem_calloc(&c->mem, n ? n : 1);
    if (!done)
        return pbl__onnx_fail(c, PBL_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) /* every input must name something that exists somewhere */
        for (size_t k = 0; k < gp->node[i]->n_input; k++) {
            const char *in = pbl__onnx_in_name(gp->node[i], k);
            int found = !in || pbl__onnx_sym_find(c, in);
            for (size_t j = 0; j < n && !found; j++)
                for (size_t o = 0; o < gp->node[j]->n_output && !found; o++)
                    found = gp->node[j]->output[o] && strcmp(gp->node[j]->output[o], in) == 0;
            if (!found) {
                c->node = gp->node[i];
                c->node_index = (int32_t)i;
                char nl[256];
                s = pbl__onnx_fail(c, PBL_ERR_FORMAT, "%s: input '%s' names no graph input, initializer or node output",
                         pbl__onnx_node_label(c, nl, sizeof nl), in);
                goto done;
            }
        }
    while (left > 0) {
        size_t before = left;
        for (size_t i = 0; i < n; i++) {
            if (done[i])
                continue;
            const Onnx__NodeProto *nd = gp->node[i];
            int ready = 1;
            for (size_t k = 0; k < nd->n_input && ready; k++)
                ready = !pbl__onnx_in_name(nd, k) || pbl__onnx_sym_find(c, nd->input[k]);
            if (!ready)
                continue;
            c->node = nd;
            c->node_index = (int32_t)i;
            if ((s = pbl__onnx_convert(c)) != PBL_OK)
                goto done;
            done[i] = 1;
            left--;
        }
        if (left == before) { /* nothing became ready: the rest wait on each other */
            for (size_t i = 0; i < n; i++)
                if (!done[i]) {
                    c->node = gp->node[i];
                    c->node_index = (int32_t)i;
                    char nl[256];
                    s = pbl__onnx_fail(c, PBL_ERR_CYCLE, "%s is on a cycle: its inputs depend on its own outputs",
                             pbl__onnx_node_label(c, nl, sizeof nl));
                    goto done;
                }
        }
    }
    c->node = NULL;
    if (gp->n_output == 0) {
        s = pbl__onnx_fail(c, PBL_ERR_FORMAT, "the graph has no outputs");
        goto done;
    }
    for (size_t i = 0; i < gp->n_output; i++) {
        const Onnx__ValueInfoProto *vo = gp->output[i];
        pbl_value v;
        if (!vo || !vo->name || !vo->name[0]) {
            s = pbl__onnx_fail(c, PBL_ERR_FORMAT, "graph output #%zu has no name", i);
            goto done;
        }
        pbl__onnx_sym *sm = pbl__onnx_sym_find(c, vo->name);
        if (!sm) {
            s = pbl__onnx_fail(c, PBL_ERR_FORMAT, "graph output '%s' names no value", vo->name);
            goto done;
        }
        if (sm->unsupported) {
            s = pbl__onnx_fail(c, PBL_ERR_UNSUPPORTED, "graph output '%s': %s", vo->name, sm->unsupported);
            goto done;
        }
        if ((s = pbl__onnx_get(c, vo->name, &v)) != PBL_OK)
            goto done;
        if ((s = pbl_graph_set_output(c->g, vo->name, v)) != PBL_OK) {
            s = pbl__onnx_fail(c, s, "graph output '%s': %s", vo->name, pbl_graph_errmsg(c->g));
            goto done;
        }
        if ((s = check_declared(c, vo, "graph output")) != PBL_OK)
            goto done;
    }
    for (size_t i = 0; i < gp->n_value_info; i++)
        if ((s = check_declared(c, gp->value_info[i], "value")) != PBL_OK)
            goto done;
    s = pbl_graph_validate(c->g);
    if (s != PBL_OK)
        s = pbl__onnx_fail(c, s, "the loaded graph does not validate: %s", pbl_graph_errmsg(c->g));
done:
    pbl__mem_free(&c->mem, done, n ? n : 1);
    return s;
}

/* The model in data[0..len); dir: its folder, where external tensor data is found (NULL: none). */
static pbl_status from_onnx(pbl_graph **out, const void *data, size_t len, const pbl_onnx_options *opt, const char *dir,
                            char *err, size_t errlen)
{
    pbl__errclear(err, errlen);
    if (!out)
        return PBL_ERR_INVALID_ARG;
    *out = NULL;
    pbl_onnx_options dflt = pbl_onnx_options_default();
    if (!opt)
        opt = &dflt;
    if (opt->weights)
        *opt->weights = NULL;
    pbl__onnx_ctx c = { .opt = opt, .dir = dir, .err = err, .errlen = errlen };
    if (!data && len)
        return pbl__onnx_fail(&c, PBL_ERR_INVALID_ARG, "no data given");
    if (opt->dim_value < 1)
        return pbl__onnx_fail(&c, PBL_ERR_INVALID_ARG, "dim_value is %lld; it must be at least 1", (long long)opt->dim_value);
    pbl__mem_init(&c.mem, opt->allocator);
    pbl__mem wm;
    pbl__mem_init(&wm, opt->allocator);
    c.w = pbl__mem_calloc(&wm, sizeof *c.w);
    if (!c.w)
        return pbl__onnx_fail(&c, PBL_ERR_NOMEM, "out of memory");
    c.w->mem = wm; /* accounts for the handle itself, freed last through a copy of mem */
    pbl_graph_options go = pbl_graph_options_default();
    go.allocator = opt->allocator;
    pbl_status s = pbl_graph_create(&c.g, &go);
    Onnx__ModelProto *m = NULL;
    pbl__onnx_pb pb = { .m = &c.mem };
    ProtobufCAllocator pa = pbl__onnx_pb_allocator(&pb);
    if (s != PBL_OK) {
        s = pbl__onnx_fail(&c, s, "out of memory");
        goto done;
    }
    m = onnx__model_proto__unpack(&pa, len, data);
    if (!m) {
        s = pb.failed ? pbl__onnx_fail(&c, PBL_ERR_NOMEM, "out of memory decoding the model")
                      : pbl__onnx_fail(&c, PBL_ERR_FORMAT, "not a valid ONNX model (protobuf decoding failed)");
        goto done;
    }
    s = convert_graph(&c, m);
done:
    if (m)
        onnx__model_proto__free_unpacked(m, &pa);
    for (int32_t i = 0; i < c.n_syms; i++)
        pbl__onnx_data_free(&c.syms[i].data, &c.w->mem, &c.mem);
    pbl__mem_free(&c.mem, c.syms, (size_t)c.cap_syms * sizeof *c.syms);
    pbl__mem_free(&c.mem, c.hash, (size_t)c.hash_cap * sizeof *c.hash);
    if (s != PBL_OK || !opt->weights) {
        pbl_onnx_weights_destroy(c.w);
        c.w = NULL;
    }
    if (s != PBL_OK) {
        pbl_graph_destroy(c.g);
        return s;
    }
    *out = c.g;
    if (opt->weights)
        *opt->weights = c.w;
    return PBL_OK;
}

PBL__API pbl_status pbl_graph_from_onnx(pbl_graph **out, const void *data, size_t len,
                                        const pbl_onnx_options *opt, char *err, size_t errlen)
{
    return from_onnx(out, data, len, opt, NULL, err, errlen);
}

PBL__API pbl_status pbl_graph_load_onnx(pbl_graph **out, const char *path, const pbl_onnx_options *opt,
                                        char *err, size_t errlen)
{
    if (!out)
        return PBL_ERR_INVALID_ARG;
    *out = NULL;
    if (!path) {
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "no path given");
    }
    pbl__mem m;
    pbl__mem_init(&m, opt ? opt->allocator : NULL);
    uint8_t *data;
    size_t len;
    pbl_status s = pbl__onnx_read_file(path, &m, &data, &len, err, errlen);
    if (s != PBL_OK)
        return s;
    /* the model's folder: external tensor data is found relative to it */
    const char *slash = strrchr(path, '/');
    size_t dl = slash && slash != path ? (size_t)(slash - path) : 1; /* "/m.onnx": "/"; "m.onnx": "." */
    char *dir = pbl__mem_alloc(&m, dl + 1);
    if (!dir) {
        pbl__mem_free(&m, data, len + 1);
        return pbl__errf(err, errlen, PBL_ERR_NOMEM, "%s: out of memory", path);
    }
    memcpy(dir, slash ? path : ".", dl);
    dir[dl] = '\0';
    s = from_onnx(out, data, len, opt, dir, err, errlen);
    pbl__mem_free(&m, dir, dl + 1);
    if (s != PBL_OK && err && errlen) { /* name the file */
        size_t el = strlen(err), pl = strlen(path);
        if (pl + 2 + el < errlen) {
            memmove(err + pl + 2, err, el + 1);
            memcpy(err, path, pl);
            err[pl] = ':';
            err[pl + 1] = ' ';
        }
    }
    pbl__mem_free(&m, data, len + 1);
    return s;
}
