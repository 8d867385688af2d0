/*
 * ONNX model -> pebble graph (pebble/onnx.h). The ModelProto is decoded by protobuf-c code
 * generated at build time from Debian's onnx.proto; every field the loader reads is checked
 * for presence and range, so a malformed or hostile file gives a status, never a crash.
 *
 * The loader keeps a table from ONNX value names to what they are: a pebble value (a graph
 * input, or a node's output), or a constant (an initializer or a Constant node) whose data
 * becomes a parameter variable only when a node reads it as data — constants read as shapes
 * or axes (Reshape, ReduceSum) never enter the graph. Nodes are converted once all their
 * inputs are known, so an unsorted model still loads and a cyclic one is reported.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "graph/export.h"
#include "graph/onnx_internal.h"
#include "pebble/builder.h"

/* ---- the weights handle ---------------------------------------------------------------------- */

typedef struct weight_item {
    pbl_value v;
    float    *data;
    size_t    bytes;
} weight_item;

struct pbl_onnx_weights {
    pbl__mem     mem;   /* the items array and every data block */
    weight_item *items;
    int32_t      n, cap;
};

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

PBL__API pbl_status pbl_onnx_weights_bind(const pbl_onnx_weights *w, pbl_exec *e, char *err, size_t errlen)
{
    if (!w || !e)
        return PBL_ERR_INVALID_ARG;
    for (int32_t i = 0; i < w->n; i++) {
        pbl_status s = pbl_exec_bind(e, w->items[i].v, w->items[i].data, w->items[i].bytes);
        if (s != PBL_OK) {
            if (err && errlen)
                snprintf(err, errlen, "binding weight %d (value %d): %s", (int)i, (int)w->items[i].v, pbl_exec_errmsg(e));
            return s;
        }
    }
    return PBL_OK;
}

PBL__API void pbl_onnx_weights_destroy(pbl_onnx_weights *w)
{
    if (!w)
        return;
    for (int32_t i = 0; i < w->n; i++)
        pbl__mem_free(&w->mem, w->items[i].data, w->items[i].bytes);
    pbl__mem_free(&w->mem, w->items, (size_t)w->cap * sizeof *w->items);
    pbl__mem m = w->mem;
    pbl__mem_free(&m, w, sizeof *w);
}

PBL__API pbl_onnx_options pbl_onnx_options_default(void)
{
    return (pbl_onnx_options){ .allocator = NULL, .dim_value = 1, .weights = NULL, .pack_weights = 1 };
}

/* ---- the loader's state ---------------------------------------------------------------------- */

typedef struct sym {
    const char    *name;        /* into the unpacked model */
    pbl_value      v;           /* the pebble value, PBL_NONE while a constant is not materialised */
    int            is_const;
    pbl__onnx_data data;        /* a constant's data, owned until it moves to the weights */
    const char    *unsupported; /* a value pebble cannot give (Dropout's mask): why */
} sym;

typedef struct ctx {
    pbl__mem          mem;      /* temporaries: the table, integer constants, the file */
    pbl_onnx_weights *w;
    pbl_graph        *g;
    const pbl_onnx_options *opt;
    int64_t           opset;    /* the default domain's version */
    sym              *syms;
    int32_t           n_syms, cap_syms;
    int32_t          *hash;     /* open addressing over syms: index + 1, 0 empty */
    int32_t           hash_cap;
    const Onnx__NodeProto *node; /* the node being converted */
    int32_t           node_index;
    char             *err;
    size_t            errlen;
} ctx;

static pbl_status fail(ctx *c, pbl_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static pbl_status fail(ctx *c, pbl_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (c->err && c->errlen)
        vsnprintf(c->err, c->errlen, fmt, ap);
    va_end(ap);
    return s;
}

static const char *str(const char *s) { return s ? s : ""; }

/* "node 'fc1' (Gemm)" or "node #3 (Gemm)" for messages */
static const char *node_label(ctx *c, char *buf, size_t n)
{
    const Onnx__NodeProto *nd = c->node;
    if (nd && nd->name && nd->name[0])
        snprintf(buf, n, "node '%s' (%s)", nd->name, str(nd->op_type));
    else
        snprintf(buf, n, "node #%d (%s)", (int)c->node_index, nd ? str(nd->op_type) : "?");
    return buf;
}

#define NODE_FAIL(c, s, fmt, ...)                                                                  \
    do {                                                                                           \
        char nl_[256];                                                                             \
        return fail((c), (s), "%s: " fmt, node_label((c), nl_, sizeof nl_), __VA_ARGS__);          \
    } while (0)

static uint32_t hash_str(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static sym *sym_find(ctx *c, const char *name)
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
static pbl_status sym_add(ctx *c, const char *name, sym **out)
{
    if (sym_find(c, name))
        return fail(c, PBL_ERR_FORMAT, "value '%s' is defined twice (ONNX assigns each value once)", name);
    if (pbl__mem_reserve(&c->mem, (void **)&c->syms, &c->cap_syms, c->n_syms + 1, sizeof *c->syms) != PBL_OK)
        return fail(c, PBL_ERR_NOMEM, "out of memory");
    if ((c->n_syms + 1) * 2 > c->hash_cap) { /* rehash at half load */
        int32_t ncap = c->hash_cap ? c->hash_cap * 2 : 64;
        int32_t *nh = pbl__mem_calloc(&c->mem, (size_t)ncap * sizeof *nh);
        if (!nh)
            return fail(c, PBL_ERR_NOMEM, "out of memory");
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
    sym *s = &c->syms[c->n_syms++];
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
static void unique_name(ctx *c, const char *base, char *buf, size_t n)
{
    snprintf(buf, n, "%s", base);
    for (int k = 2; pbl_graph_find_value(c->g, buf) != PBL_NONE || pbl_graph_find_node(c->g, buf) != PBL_NONE; k++)
        snprintf(buf, n, "%s~%d", base, k);
}

/* Float data -> a parameter variable, its data moved into the weights; on failure *out is
 * PBL_NONE and the data still the caller's. */
static pbl_status add_weight(ctx *c, const char *base, pbl_shape shape, float *data, pbl_value *out)
{
    char name[512];
    pbl_onnx_weights *w = c->w;
    *out = PBL_NONE;
    if (pbl__mem_reserve(&w->mem, (void **)&w->items, &w->cap, w->n + 1, sizeof *w->items) != PBL_OK)
        return fail(c, PBL_ERR_NOMEM, "out of memory");
    unique_name(c, base, name, sizeof name);
    pbl_status s = pbl_graph_add_variable(c->g, name, PBL_VALUE_PARAM, PBL_F32, shape, out);
    if (s != PBL_OK) {
        *out = PBL_NONE;
        return fail(c, s, "initializer '%s': %s", base, pbl_graph_errmsg(c->g));
    }
    w->items[w->n++] = (weight_item){ .v = *out, .data = data, .bytes = (size_t)pbl_shape_numel(&shape) * sizeof(float) };
    return PBL_OK;
}

/* The pebble value of ONNX value `name` (materialising a float constant). */
static pbl_status get(ctx *c, const char *name, pbl_value *out)
{
    sym *s = sym_find(c, name);
    if (!s)
        NODE_FAIL(c, PBL_ERR_FORMAT, "input '%s' names no value", name);
    if (s->unsupported)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "input '%s': %s", name, s->unsupported);
    if (s->v == PBL_NONE) {
        if (s->data.is_int)
            NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "input '%s' is an integer tensor used as data (pebble computes in float32)", name);
        float *f = s->data.f;
        s->data.f = NULL; /* moves to the weights, which free it from now on */
        pbl_status st = add_weight(c, s->name, s->data.shape, f, &s->v);
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
static pbl_status get_ints(ctx *c, const char *name, const int64_t **ints, int64_t *n)
{
    sym *s = sym_find(c, name);
    if (!s)
        NODE_FAIL(c, PBL_ERR_FORMAT, "input '%s' names no value", name);
    if (!s->is_const || !s->data.is_int || !s->data.ints)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "input '%s' must be a constant integer tensor (an initializer or a Constant): "
                  "pebble's shapes are static", name);
    *ints = s->data.ints;
    *n = s->data.numel;
    return PBL_OK;
}

static pbl_shape shape_of(ctx *c, pbl_value v)
{
    pbl_value_info vi;
    if (pbl_graph_value_info(c->g, v, &vi) != PBL_OK)
        return (pbl_shape){ 0 };
    return vi.shape;
}

/* Defines ONNX value `name` as pebble value v. */
static pbl_status define(ctx *c, const char *name, pbl_value v)
{
    if (!name || !name[0])
        return PBL_OK;
    sym *s;
    pbl_status st = sym_add(c, name, &s);
    if (st != PBL_OK)
        return st;
    s->v = v;
    return PBL_OK;
}

/* Emits one pebble node for the current ONNX node: named after its first output, with
 * "/suffix" for helper nodes (a transpose before a softmax). */
static pbl_status emit(ctx *c, const char *op, const pbl_value *in, int32_t n_in, const pbl_attr *attrs,
                       int32_t n_attrs, const char *suffix, pbl_value *out)
{
    const Onnx__NodeProto *nd = c->node;
    char base[400], name[512];
    const char *o0 = nd->n_output > 0 && nd->output[0] && nd->output[0][0] ? nd->output[0] : NULL;
    if (o0)
        snprintf(base, sizeof base, "%s%s%s", o0, suffix ? "/" : "", suffix ? suffix : "");
    else
        snprintf(base, sizeof base, "%s_%d%s%s", str(nd->op_type), (int)c->node_index, suffix ? "/" : "", suffix ? suffix : "");
    unique_name(c, base, name, sizeof name);
    pbl_value outs[4] = { PBL_NONE, PBL_NONE, PBL_NONE, PBL_NONE };
    pbl_node_desc d = { .op = op, .name = name, .inputs = in, .n_inputs = n_in, .attrs = attrs, .n_attrs = n_attrs };
    pbl_status s = pbl_graph_add_node(c->g, &d, NULL, outs);
    if (s != PBL_OK)
        NODE_FAIL(c, s, "pebble op %s: %s", op, pbl_graph_errmsg(c->g));
    *out = outs[0];
    return PBL_OK;
}

/* ---- attributes ------------------------------------------------------------------------------ */

static const Onnx__AttributeProto *attr_find(const Onnx__NodeProto *n, const char *name)
{
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i] && n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0)
            return n->attribute[i];
    return NULL;
}

static pbl_status attr_int(ctx *c, const char *name, int64_t dflt, int64_t *out)
{
    const Onnx__AttributeProto *a = attr_find(c->node, name);
    *out = dflt;
    if (!a)
        return PBL_OK;
    if (!a->has_i && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)
        NODE_FAIL(c, PBL_ERR_FORMAT, "attribute %s is not an int", name);
    *out = a->i;
    return PBL_OK;
}

static pbl_status attr_float(ctx *c, const char *name, double dflt, double *out)
{
    const Onnx__AttributeProto *a = attr_find(c->node, name);
    *out = dflt;
    if (!a)
        return PBL_OK;
    if (!a->has_f && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT)
        NODE_FAIL(c, PBL_ERR_FORMAT, "attribute %s is not a float", name);
    *out = a->f;
    return PBL_OK;
}

/* An ints attribute into buf (at most max); *n = -1 when absent. */
static pbl_status attr_ints(ctx *c, const char *name, int64_t *buf, int32_t max, int32_t *n)
{
    const Onnx__AttributeProto *a = attr_find(c->node, name);
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

static pbl_status attr_string_is(ctx *c, const char *name, const char *dflt, const char **out)
{
    const Onnx__AttributeProto *a = attr_find(c->node, name);
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
static const char *in_name(const Onnx__NodeProto *n, size_t i)
{
    return i < n->n_input && n->input[i] && n->input[i][0] ? n->input[i] : NULL;
}

static pbl_status need_inputs(ctx *c, size_t lo, size_t hi)
{
    const Onnx__NodeProto *n = c->node;
    for (size_t i = 0; i < lo; i++)
        if (!in_name(n, i))
            NODE_FAIL(c, PBL_ERR_FORMAT, "input %zu is required", i);
    if (n->n_input > hi)
        NODE_FAIL(c, PBL_ERR_FORMAT, "has %zu inputs, at most %zu expected", n->n_input, hi);
    if (n->n_output < 1 || !n->output[0] || !n->output[0][0])
        NODE_FAIL(c, PBL_ERR_FORMAT, "has no output%s", "");
    return PBL_OK;
}

/* ---- shapes ---------------------------------------------------------------------------------- */

/* numpy two-way broadcasting of a and b into out; 0 when they do not broadcast. */
static int bcast_shape(const pbl_shape *a, const pbl_shape *b, pbl_shape *out)
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

static pbl_status to_shape(ctx *c, pbl_value x, pbl_shape want, const char *op, const char *suffix, pbl_value *out)
{
    pbl_shape have = shape_of(c, x);
    if (pbl_shape_equal(&have, &want)) {
        *out = x;
        return PBL_OK;
    }
    pbl_attr at = PBL_ATTR_INTS("shape", want.dim, want.ndim);
    return emit(c, op, &x, 1, &at, 1, suffix, out);
}

/* ---- converters: one per ONNX op ------------------------------------------------------------- */

typedef pbl_status (*convert_fn)(ctx *c);

/* out = a (op) b with ONNX's two-way broadcasting; pebble's binary ops broadcast b to a. */
static pbl_status binary(ctx *c, const char *op, int commutative, pbl_value a, pbl_value b, const char *suffix,
                         pbl_value *out)
{
    pbl_shape sa = shape_of(c, a), sb = shape_of(c, b), so;
    if (!bcast_shape(&sa, &sb, &so)) {
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
            if ((s = to_shape(c, a, so, "broadcast_to", sfx, &a)) != PBL_OK)
                return s;
        }
    }
    return emit(c, op, (pbl_value[]){ a, b }, 2, NULL, 0, suffix, out);
}

static pbl_status cv_binary(ctx *c, const char *op, int commutative)
{
    pbl_value a, b, y;
    pbl_status s;
    if ((s = need_inputs(c, 2, 2)) != PBL_OK || (s = get(c, c->node->input[0], &a)) != PBL_OK ||
        (s = get(c, c->node->input[1], &b)) != PBL_OK || (s = binary(c, op, commutative, a, b, NULL, &y)) != PBL_OK)
        return s;
    return define(c, c->node->output[0], y);
}

static pbl_status cv_add(ctx *c) { return cv_binary(c, "add", 1); }
static pbl_status cv_sub(ctx *c) { return cv_binary(c, "sub", 0); }
static pbl_status cv_mul(ctx *c) { return cv_binary(c, "mul", 1); }
static pbl_status cv_div(ctx *c) { return cv_binary(c, "div", 0); }

static pbl_status cv_unary(ctx *c, const char *op)
{
    pbl_value x, y;
    pbl_status s;
    if ((s = need_inputs(c, 1, 1)) != PBL_OK || (s = get(c, c->node->input[0], &x)) != PBL_OK ||
        (s = emit(c, op, &x, 1, NULL, 0, NULL, &y)) != PBL_OK)
        return s;
    return define(c, c->node->output[0], y);
}

static pbl_status cv_relu(ctx *c) { return cv_unary(c, "relu"); }
static pbl_status cv_sigmoid(ctx *c) { return cv_unary(c, "sigmoid"); }
static pbl_status cv_tanh(ctx *c) { return cv_unary(c, "tanh"); }

/* Identity, and Dropout at inference: the output is the input's value (no node). */
static pbl_status cv_identity(ctx *c)
{
    pbl_value x;
    pbl_status s;
    if ((s = need_inputs(c, 1, 1)) != PBL_OK || (s = get(c, c->node->input[0], &x)) != PBL_OK)
        return s;
    return define(c, c->node->output[0], x);
}

static pbl_status cv_dropout(ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value x;
    pbl_status s;
    if ((s = need_inputs(c, 1, 3)) != PBL_OK || (s = get(c, n->input[0], &x)) != PBL_OK)
        return s;
    int64_t is_test = 1;
    if ((s = attr_int(c, "is_test", 1, &is_test)) != PBL_OK) /* opset < 7 */
        return s;
    const char *tm = in_name(n, 2);
    if (tm) {
        const int64_t *v;
        int64_t k;
        sym *ts = sym_find(c, tm);
        if (!ts || !ts->is_const)
            NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "training_mode '%s' must be a constant false (pebble loads models for inference)", tm);
        if (ts->data.is_int) {
            if ((s = get_ints(c, tm, &v, &k)) != PBL_OK)
                return s;
            if (k != 1 || v[0] != 0)
                NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "training_mode '%s' is true; pebble runs Dropout for inference", tm);
        }
    }
    if ((s = define(c, n->output[0], x)) != PBL_OK)
        return s;
    if (n->n_output > 1 && n->output[1] && n->output[1][0]) {
        sym *m;
        if ((s = sym_add(c, n->output[1], &m)) != PBL_OK)
            return s;
        m->unsupported = "Dropout's mask output (a bool tensor) is not supported";
    }
    return PBL_OK;
}

/* w[N, K], a float constant (the caller checked), as fully_connected_packed's panels
 * wp[ceil(N/16), K, 16]: a new parameter "<w>/packed". */
static pbl_status pack_weights(ctx *c, const char *name, pbl_value *out)
{
    sym *s = sym_find(c, name);
    int64_t N = s->data.shape.dim[0], K = s->data.shape.dim[1], NB = (N + 15) / 16;
    if (NB > PBL__ONNX_MAX_NUMEL / (16 * K))
        NODE_FAIL(c, PBL_ERR_FORMAT, "'%s' is absurdly large", name);
    size_t bytes = (size_t)(NB * K * 16) * sizeof(float);
    float *wp = pbl__mem_calloc(&c->w->mem, bytes);
    if (!wp)
        NODE_FAIL(c, PBL_ERR_NOMEM, "out of memory packing '%s'", name);
    const float *w = s->data.f;
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++)
            wp[((n / 16) * K + k) * 16 + n % 16] = w[n * K + k];
    char base[400];
    snprintf(base, sizeof base, "%s/packed", name);
    pbl_status st = add_weight(c, base, pbl_shape_make(3, (int64_t[]){ NB, K, 16 }), wp, out);
    if (st != PBL_OK)
        pbl__mem_free(&c->w->mem, wp, bytes);
    return st;
}

static pbl_status cv_gemm(ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value a, b, cc = PBL_NONE, y;
    int64_t ta, tb;
    double alpha, beta;
    pbl_status s;
    if ((s = need_inputs(c, 2, 3)) != PBL_OK || (s = get(c, n->input[0], &a)) != PBL_OK ||
        (s = attr_int(c, "transA", 0, &ta)) != PBL_OK || (s = attr_int(c, "transB", 0, &tb)) != PBL_OK ||
        (s = attr_float(c, "alpha", 1.0, &alpha)) != PBL_OK || (s = attr_float(c, "beta", 1.0, &beta)) != PBL_OK)
        return s;
    if (in_name(n, 2) && (s = get(c, n->input[2], &cc)) != PBL_OK)
        return s;
    pbl_shape sc = cc != PBL_NONE ? shape_of(c, cc) : (pbl_shape){ 0 };
    /* x·wᵀ + b with w a constant not yet in the graph: fully_connected_packed on w repacked
     * once, here (w itself never becomes a parameter unless another node reads it) */
    sym *ws = sym_find(c, n->input[1]);
    if (c->opt->pack_weights && !ta && tb && alpha == 1.0 && ws && ws->is_const && !ws->data.is_int && ws->data.f &&
        ws->v == PBL_NONE && ws->data.shape.ndim == 2) {
        int64_t N = ws->data.shape.dim[0];
        int c_is_row = cc != PBL_NONE && ((sc.ndim == 1 && sc.dim[0] == N) || (sc.ndim == 2 && sc.dim[0] == 1 && sc.dim[1] == N));
        if (cc == PBL_NONE || (beta == 1.0 && c_is_row)) {
            pbl_value in[3] = { a, PBL_NONE, cc };
            pbl_attr oa[] = { PBL_ATTR_INT("out", N) };
            if ((s = pack_weights(c, n->input[1], &in[1])) != PBL_OK)
                return s;
            if (cc != PBL_NONE && sc.ndim == 2 &&
                (s = to_shape(c, cc, pbl_shape_make(1, &N), "reshape", "bias", &in[2])) != PBL_OK)
                return s;
            if ((s = emit(c, "fully_connected_packed", in, cc != PBL_NONE ? 3 : 2, oa, 1, NULL, &y)) != PBL_OK)
                return s;
            return define(c, n->output[0], y);
        }
    }
    if ((s = get(c, n->input[1], &b)) != PBL_OK)
        return s;
    pbl_shape sa = shape_of(c, a), sb = shape_of(c, b);
    if (sa.ndim != 2 || sb.ndim != 2) {
        char ba[96], bb[96];
        NODE_FAIL(c, PBL_ERR_SHAPE, "A is %s and B is %s; Gemm needs matrices", pbl_shape_str(&sa, ba, sizeof ba),
                  pbl_shape_str(&sb, bb, sizeof bb));
    }
    int64_t N = tb ? sb.dim[0] : sb.dim[1];
    int c_is_row = cc != PBL_NONE && ((sc.ndim == 1 && sc.dim[0] == N) || (sc.ndim == 2 && sc.dim[0] == 1 && sc.dim[1] == N));
    if (!ta && tb && alpha == 1.0 && (cc == PBL_NONE || (beta == 1.0 && c_is_row))) {
        /* x·wᵀ + b: pebble's fully_connected, one sgemm with the bias preloaded */
        pbl_value in[3] = { a, b, cc };
        if (cc != PBL_NONE && sc.ndim == 2 && (s = to_shape(c, cc, pbl_shape_make(1, &N), "reshape", "bias", &in[2])) != PBL_OK)
            return s;
        if ((s = emit(c, "fully_connected", in, cc != PBL_NONE ? 3 : 2, NULL, 0, NULL, &y)) != PBL_OK)
            return s;
        return define(c, n->output[0], y);
    }
    int has_c = cc != PBL_NONE && beta != 0.0;
    pbl_attr mm[] = { PBL_ATTR_INT("trans_a", ta != 0), PBL_ATTR_INT("trans_b", tb != 0) };
    if ((s = emit(c, "matmul", (pbl_value[]){ a, b }, 2, mm, 2, alpha != 1.0 || has_c ? "matmul" : NULL, &y)) != PBL_OK)
        return s;
    if (alpha != 1.0) {
        pbl_attr sa_[] = { PBL_ATTR_FLOAT("alpha", alpha) };
        if ((s = emit(c, "scale", &y, 1, sa_, 1, has_c ? "alpha" : NULL, &y)) != PBL_OK)
            return s;
    }
    if (has_c) {
        if (beta != 1.0) {
            pbl_attr sb_[] = { PBL_ATTR_FLOAT("alpha", beta) };
            if ((s = emit(c, "scale", &cc, 1, sb_, 1, "beta", &cc)) != PBL_OK)
                return s;
        }
        if ((s = binary(c, "add", 1, y, cc, NULL, &y)) != PBL_OK)
            return s;
    }
    return define(c, n->output[0], y);
}

static pbl_status cv_matmul(ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value a, b, y;
    pbl_status s;
    if ((s = need_inputs(c, 2, 2)) != PBL_OK || (s = get(c, n->input[0], &a)) != PBL_OK ||
        (s = get(c, n->input[1], &b)) != PBL_OK)
        return s;
    pbl_shape sa = shape_of(c, a), sb = shape_of(c, b);
    char ba[96], bb[96];
    if (sa.ndim < 1 || sb.ndim < 1)
        NODE_FAIL(c, PBL_ERR_SHAPE, "A is %s and B is %s; MatMul needs at least one dim each",
                  pbl_shape_str(&sa, ba, sizeof ba), pbl_shape_str(&sb, bb, sizeof bb));
    /* numpy.matmul: a 1-D A is [1, k] and a 1-D B is [k, 1], their added dims dropped after */
    pbl_shape a2 = sa, b2 = sb;
    if (sa.ndim == 1)
        a2 = pbl_shape_make(2, (int64_t[]){ 1, sa.dim[0] });
    if (sb.ndim == 1)
        b2 = pbl_shape_make(2, (int64_t[]){ sb.dim[0], 1 });
    int64_t M = a2.dim[a2.ndim - 2], K = a2.dim[a2.ndim - 1], K2 = b2.dim[b2.ndim - 2], Nn = b2.dim[b2.ndim - 1];
    pbl_shape ba_ = { .ndim = a2.ndim - 2 }, bb_ = { .ndim = b2.ndim - 2 }, batch;
    memcpy(ba_.dim, a2.dim, sizeof(int64_t) * (size_t)ba_.ndim);
    memcpy(bb_.dim, b2.dim, sizeof(int64_t) * (size_t)bb_.ndim);
    if (K != K2 || !bcast_shape(&ba_, &bb_, &batch) || batch.ndim + 2 > PBL_MAX_DIMS)
        NODE_FAIL(c, PBL_ERR_SHAPE, "A is %s and B is %s; they do not multiply", pbl_shape_str(&sa, ba, sizeof ba),
                  pbl_shape_str(&sb, bb, sizeof bb));
    /* ONNX's output shape */
    pbl_shape so = batch;
    if (sa.ndim > 1)
        so.dim[so.ndim++] = M;
    if (sb.ndim > 1)
        so.dim[so.ndim++] = Nn;
    if (b2.ndim == 2 && a2.ndim > 2) {
        /* [..., m, k]·[k, n]: one product over the flattened rows (no copies of B) */
        int64_t rows = pbl_shape_numel(&a2) / K;
        if ((s = to_shape(c, a, pbl_shape_make(2, (int64_t[]){ rows, K }), "reshape", "rows", &a)) != PBL_OK ||
            (s = to_shape(c, b, b2, "reshape", "b2", &b)) != PBL_OK ||
            (s = emit(c, "matmul", (pbl_value[]){ a, b }, 2, NULL, 0, "matmul", &y)) != PBL_OK ||
            (s = to_shape(c, y, so, "reshape", NULL, &y)) != PBL_OK)
            return s;
        return define(c, n->output[0], y);
    }
    pbl_shape ta = batch, tb = batch;
    ta.dim[ta.ndim++] = M, ta.dim[ta.ndim++] = K;
    tb.dim[tb.ndim++] = K, tb.dim[tb.ndim++] = Nn;
    /* a 1-D operand is reshaped first, then broadcast over the batch dims */
    if ((s = to_shape(c, a, a2, "reshape", "a2", &a)) != PBL_OK || (s = to_shape(c, b, b2, "reshape", "b2", &b)) != PBL_OK ||
        (s = to_shape(c, a, ta, "broadcast_to", "broadcast_a", &a)) != PBL_OK ||
        (s = to_shape(c, b, tb, "broadcast_to", "broadcast_b", &b)) != PBL_OK)
        return s;
    pbl_shape mo = batch;
    mo.dim[mo.ndim++] = M, mo.dim[mo.ndim++] = Nn;
    int same = pbl_shape_equal(&mo, &so);
    if ((s = emit(c, "matmul", (pbl_value[]){ a, b }, 2, NULL, 0, same ? NULL : "matmul", &y)) != PBL_OK ||
        (s = to_shape(c, y, so, "reshape", NULL, &y)) != PBL_OK)
        return s;
    return define(c, n->output[0], y);
}

/* Softmax / LogSoftmax. Before opset 13 the input is coerced to 2-D at `axis` (default 1)
 * and normalised over the flattened trailing dims; from opset 13 over the one dim `axis`
 * (default -1). pebble normalises the last dim: the first is flatten + reshape back, the
 * second a transpose to the end and back. */
static pbl_status cv_softmax_family(ctx *c, const char *op)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value x, y;
    pbl_status s;
    int64_t axis;
    int before13 = c->opset < 13;
    if ((s = need_inputs(c, 1, 1)) != PBL_OK || (s = get(c, n->input[0], &x)) != PBL_OK ||
        (s = attr_int(c, "axis", before13 ? 1 : -1, &axis)) != PBL_OK)
        return s;
    pbl_shape sx = shape_of(c, x);
    int32_t r = sx.ndim;
    if (axis < -r || axis >= r || r == 0)
        NODE_FAIL(c, PBL_ERR_ATTR, "axis %lld is out of range for rank %d", (long long)axis, (int)r);
    if (axis < 0)
        axis += r;
    if (axis == r - 1) {
        if ((s = emit(c, op, &x, 1, NULL, 0, NULL, &y)) != PBL_OK)
            return s;
    } else if (before13) {
        pbl_attr fa[] = { PBL_ATTR_INT("axis", axis) };
        if ((s = emit(c, "flatten", &x, 1, fa, 1, "2d", &y)) != PBL_OK || (s = emit(c, op, &y, 1, NULL, 0, "op", &y)) != PBL_OK ||
            (s = to_shape(c, y, sx, "reshape", NULL, &y)) != PBL_OK)
            return s;
    } else {
        int64_t perm[PBL_MAX_DIMS];
        for (int32_t k = 0; k < r; k++)
            perm[k] = k;
        perm[axis] = r - 1;
        perm[r - 1] = axis; /* a swap is its own inverse */
        pbl_attr pa[] = { PBL_ATTR_INTS("perm", perm, r) };
        if ((s = emit(c, "transpose", &x, 1, pa, 1, "to_last", &y)) != PBL_OK ||
            (s = emit(c, op, &y, 1, NULL, 0, "op", &y)) != PBL_OK || (s = emit(c, "transpose", &y, 1, pa, 1, NULL, &y)) != PBL_OK)
            return s;
    }
    return define(c, n->output[0], y);
}

static pbl_status cv_softmax(ctx *c) { return cv_softmax_family(c, "softmax"); }
static pbl_status cv_log_softmax(ctx *c) { return cv_softmax_family(c, "log_softmax"); }

static pbl_status cv_flatten(ctx *c)
{
    pbl_value x, y;
    int64_t axis;
    pbl_status s;
    if ((s = need_inputs(c, 1, 1)) != PBL_OK || (s = get(c, c->node->input[0], &x)) != PBL_OK ||
        (s = attr_int(c, "axis", 1, &axis)) != PBL_OK)
        return s;
    int32_t r = shape_of(c, x).ndim;
    if (axis < -r || axis > r)
        NODE_FAIL(c, PBL_ERR_ATTR, "axis %lld is out of range for rank %d", (long long)axis, (int)r);
    if (axis < 0)
        axis += r;
    pbl_attr fa[] = { PBL_ATTR_INT("axis", axis) };
    if ((s = emit(c, "flatten", &x, 1, fa, 1, NULL, &y)) != PBL_OK)
        return s;
    return define(c, c->node->output[0], y);
}

static pbl_status cv_reshape(ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value x, y;
    pbl_status s;
    int64_t allowzero, attr_shape[PBL_MAX_DIMS];
    int32_t n_attr;
    const int64_t *dims;
    int64_t nd;
    if ((s = need_inputs(c, 1, 2)) != PBL_OK || (s = get(c, n->input[0], &x)) != PBL_OK ||
        (s = attr_int(c, "allowzero", 0, &allowzero)) != PBL_OK ||
        (s = attr_ints(c, "shape", attr_shape, PBL_MAX_DIMS, &n_attr)) != PBL_OK)
        return s;
    if (in_name(n, 1)) {
        if ((s = get_ints(c, n->input[1], &dims, &nd)) != PBL_OK)
            return s;
    } else if (n_attr >= 0) { /* opset < 5 */
        dims = attr_shape;
        nd = n_attr;
    } else {
        NODE_FAIL(c, PBL_ERR_FORMAT, "no shape given%s", "");
    }
    if (nd > PBL_MAX_DIMS)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "the new shape has %lld dims; pebble's limit is %d", (long long)nd, PBL_MAX_DIMS);
    pbl_shape sx = shape_of(c, x);
    int64_t want[PBL_MAX_DIMS];
    for (int64_t i = 0; i < nd; i++) {
        want[i] = dims[i];
        if (dims[i] == 0 && !allowzero) {
            if (i >= sx.ndim)
                NODE_FAIL(c, PBL_ERR_SHAPE, "shape dim %lld is 0 (copy the input's) but the input has rank %d",
                          (long long)i, (int)sx.ndim);
            want[i] = sx.dim[i];
        } else if (dims[i] < -1 || dims[i] == 0) {
            NODE_FAIL(c, dims[i] == 0 ? PBL_ERR_UNSUPPORTED : PBL_ERR_SHAPE, "shape dim %lld is %lld", (long long)i,
                      (long long)dims[i]);
        }
    }
    pbl_attr ra[] = { PBL_ATTR_INTS("shape", want, (int32_t)nd) };
    if ((s = emit(c, "reshape", &x, 1, ra, 1, NULL, &y)) != PBL_OK)
        return s;
    return define(c, n->output[0], y);
}

static pbl_status cv_transpose(ctx *c)
{
    pbl_value x, y;
    int64_t perm[PBL_MAX_INTS];
    int32_t np;
    pbl_status s;
    if ((s = need_inputs(c, 1, 1)) != PBL_OK || (s = get(c, c->node->input[0], &x)) != PBL_OK ||
        (s = attr_ints(c, "perm", perm, PBL_MAX_INTS, &np)) != PBL_OK)
        return s;
    pbl_attr pa[] = { PBL_ATTR_INTS("perm", perm, np < 0 ? 0 : np) };
    if ((s = emit(c, "transpose", &x, 1, pa, 1, NULL, &y)) != PBL_OK)
        return s;
    return define(c, c->node->output[0], y);
}

/* ReduceSum / ReduceMean: axes as an attribute (ReduceSum before 13, ReduceMean before 18) or
 * as a constant second input (from then on); noop_with_empty_axes makes empty axes a no-op. */
static pbl_status cv_reduce(ctx *c, const char *op)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value x, y;
    int64_t keep, noop, axes[PBL_MAX_INTS];
    int32_t na;
    pbl_status s;
    if ((s = need_inputs(c, 1, 2)) != PBL_OK || (s = get(c, n->input[0], &x)) != PBL_OK ||
        (s = attr_int(c, "keepdims", 1, &keep)) != PBL_OK || (s = attr_int(c, "noop_with_empty_axes", 0, &noop)) != PBL_OK ||
        (s = attr_ints(c, "axes", axes, PBL_MAX_INTS, &na)) != PBL_OK)
        return s;
    if (na < 0)
        na = 0;
    if (in_name(n, 1)) {
        const int64_t *v;
        int64_t k;
        if ((s = get_ints(c, n->input[1], &v, &k)) != PBL_OK)
            return s;
        if (k > PBL_MAX_INTS)
            NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "%lld axes; pebble takes at most %d", (long long)k, PBL_MAX_INTS);
        for (int64_t i = 0; i < k; i++)
            axes[i] = v[i];
        na = (int32_t)k;
    }
    if (na == 0 && noop)
        return define(c, n->output[0], x);
    pbl_attr ra[] = { PBL_ATTR_INTS("axes", axes, na), PBL_ATTR_INT("keepdims", keep != 0) };
    if ((s = emit(c, op, &x, 1, ra, 2, NULL, &y)) != PBL_OK)
        return s;
    return define(c, n->output[0], y);
}

static pbl_status cv_reduce_sum(ctx *c) { return cv_reduce(c, "sum"); }
static pbl_status cv_reduce_mean(ctx *c) { return cv_reduce(c, "mean"); }

enum { CONCAT_MAX = 16 }; /* pebble's concat takes at most 16 inputs */

static pbl_status cv_concat(ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value in[CONCAT_MAX], y;
    int64_t axis;
    pbl_status s;
    if ((s = need_inputs(c, 1, CONCAT_MAX)) != PBL_OK || (s = attr_int(c, "axis", INT64_MIN, &axis)) != PBL_OK)
        return s;
    if (axis == INT64_MIN)
        NODE_FAIL(c, PBL_ERR_FORMAT, "attribute axis is required%s", "");
    int32_t k = 0;
    for (size_t i = 0; i < n->n_input; i++) {
        if (!in_name(n, i))
            continue;
        if ((s = get(c, n->input[i], &in[k++])) != PBL_OK)
            return s;
    }
    pbl_attr ca[] = { PBL_ATTR_INT("axis", axis) };
    if ((s = emit(c, "concat", in, k, ca, 1, NULL, &y)) != PBL_OK)
        return s;
    return define(c, n->output[0], y);
}

/* A Constant's value attribute (tensor, float(s) or int(s)) becomes a constant. */
static pbl_status cv_constant(ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    pbl_status s;
    if (n->n_output < 1 || !n->output[0] || !n->output[0][0])
        NODE_FAIL(c, PBL_ERR_FORMAT, "has no output%s", "");
    const Onnx__AttributeProto *a = NULL;
    for (size_t i = 0; i < n->n_attribute && !a; i++)
        if (n->attribute[i] && n->attribute[i]->name)
            a = n->attribute[i];
    if (!a)
        NODE_FAIL(c, PBL_ERR_FORMAT, "has no value attribute%s", "");
    pbl__onnx_data d = { 0 };
    const char *an = a->name;
    if (strcmp(an, "value") == 0 && a->t) {
        char what[256];
        snprintf(what, sizeof what, "Constant '%s'", n->output[0]);
        if ((s = pbl__onnx_data_decode(a->t, &c->w->mem, &c->mem, &d, what, c->err, c->errlen)) != PBL_OK)
            return s;
    } else if (strcmp(an, "value_float") == 0 || strcmp(an, "value_floats") == 0) {
        int one = strcmp(an, "value_float") == 0;
        d.numel = one ? 1 : (int64_t)a->n_floats;
        d.shape = one ? PBL_SCALAR : pbl_shape_make(1, &d.numel);
        if (d.numel == 0 || !(d.f = pbl__mem_alloc(&c->w->mem, (size_t)d.numel * sizeof(float))))
            NODE_FAIL(c, d.numel ? PBL_ERR_NOMEM : PBL_ERR_UNSUPPORTED, "%s", d.numel ? "out of memory" : "an empty constant");
        for (int64_t i = 0; i < d.numel; i++)
            d.f[i] = one ? a->f : a->floats[i];
    } else if (strcmp(an, "value_int") == 0 || strcmp(an, "value_ints") == 0) {
        int one = strcmp(an, "value_int") == 0;
        d.is_int = 1;
        d.numel = one ? 1 : (int64_t)a->n_ints;
        d.shape = one ? PBL_SCALAR : pbl_shape_make(1, &d.numel);
        if (d.numel == 0 || !(d.ints = pbl__mem_alloc(&c->mem, (size_t)d.numel * sizeof(int64_t))))
            NODE_FAIL(c, d.numel ? PBL_ERR_NOMEM : PBL_ERR_UNSUPPORTED, "%s", d.numel ? "out of memory" : "an empty constant");
        for (int64_t i = 0; i < d.numel; i++)
            d.ints[i] = one ? a->i : a->ints[i];
    } else {
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "attribute %s is not supported (value, value_float(s), value_int(s) are)", an);
    }
    sym *sm;
    if ((s = sym_add(c, n->output[0], &sm)) != PBL_OK) {
        pbl__onnx_data_free(&d, &c->w->mem, &c->mem);
        return s;
    }
    sm->is_const = 1;
    sm->data = d;
    return PBL_OK;
}

/* BatchNormalization at inference: y = (x − mean)/√(var + ε)·scale + B. With constant
 * statistics it folds into y = x·a + b per channel (a = scale/√(var + ε), b = B − mean·a),
 * two element-wise ops that run on the CPU. */
static pbl_status cv_batch_norm(ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value x, y;
    double eps;
    int64_t training;
    pbl_status s;
    if ((s = need_inputs(c, 5, 5)) != PBL_OK || (s = get(c, n->input[0], &x)) != PBL_OK ||
        (s = attr_float(c, "epsilon", 1e-5, &eps)) != PBL_OK || (s = attr_int(c, "training_mode", 0, &training)) != PBL_OK)
        return s;
    if (training)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "training_mode 1 is not supported (inference only)%s", "");
    for (size_t k = 1; k < n->n_output; k++)
        if (n->output[k] && n->output[k][0])
            NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "output %zu (running statistics) is not supported", k);
    pbl_shape sx = shape_of(c, x);
    if (sx.ndim < 2)
        NODE_FAIL(c, PBL_ERR_SHAPE, "X has rank %d; need [N, C, ...]", (int)sx.ndim);
    int64_t C = sx.dim[1];
    const float *p[4];
    for (int k = 0; k < 4; k++) {
        sym *ps = sym_find(c, n->input[k + 1]);
        if (!ps)
            NODE_FAIL(c, PBL_ERR_FORMAT, "input '%s' names no value", n->input[k + 1]);
        if (!ps->is_const || ps->data.is_int || !ps->data.f)
            NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "input '%s' must be a float constant (statistics are folded at load time)",
                      n->input[k + 1]);
        if (ps->data.numel != C)
            NODE_FAIL(c, PBL_ERR_SHAPE, "input '%s' has %lld elements but X has %lld channels", n->input[k + 1],
                      (long long)ps->data.numel, (long long)C);
        p[k] = ps->data.f;
    }
    /* a, b: [C, 1, ..., 1], broadcasting over [N, C, spatial...] */
    pbl_shape cs = { .ndim = sx.ndim - 1 };
    cs.dim[0] = C;
    for (int32_t k = 1; k < cs.ndim; k++)
        cs.dim[k] = 1;
    float *fa = pbl__mem_alloc(&c->w->mem, (size_t)C * sizeof *fa), *fb = pbl__mem_alloc(&c->w->mem, (size_t)C * sizeof *fb);
    if (!fa || !fb) {
        pbl__mem_free(&c->w->mem, fa, (size_t)C * sizeof *fa);
        pbl__mem_free(&c->w->mem, fb, (size_t)C * sizeof *fb);
        NODE_FAIL(c, PBL_ERR_NOMEM, "out of memory%s", "");
    }
    for (int64_t i = 0; i < C; i++) {
        double a = (double)p[0][i] / sqrt((double)p[3][i] + eps);
        fa[i] = (float)a;
        fb[i] = (float)((double)p[1][i] - (double)p[2][i] * a);
    }
    char base[400];
    pbl_value va, vb;
    snprintf(base, sizeof base, "%s/bn_scale", n->output[0]);
    if ((s = add_weight(c, base, cs, fa, &va)) != PBL_OK) {
        pbl__mem_free(&c->w->mem, fa, (size_t)C * sizeof *fa);
        pbl__mem_free(&c->w->mem, fb, (size_t)C * sizeof *fb);
        return s;
    }
    snprintf(base, sizeof base, "%s/bn_shift", n->output[0]);
    if ((s = add_weight(c, base, cs, fb, &vb)) != PBL_OK) {
        pbl__mem_free(&c->w->mem, fb, (size_t)C * sizeof *fb);
        return s;
    }
    if ((s = emit(c, "mul", (pbl_value[]){ x, va }, 2, NULL, 0, "scaled", &y)) != PBL_OK ||
        (s = emit(c, "add", (pbl_value[]){ y, vb }, 2, NULL, 0, NULL, &y)) != PBL_OK)
        return s;
    return define(c, n->output[0], y);
}

/* Conv / pools: strides, dilations, pads (ONNX's [top, left, bottom, right] is pebble's order),
 * and auto_pad worked out here into explicit pads. */
static pbl_status window_attrs(ctx *c, const pbl_shape *sx, const int64_t kernel[2], pbl_attr *at, int64_t *stride,
                               int64_t *pads, int64_t *dil)
{
    int32_t ns, np, nd;
    pbl_status s;
    const char *auto_pad;
    if ((s = attr_ints(c, "strides", stride, 2, &ns)) != PBL_OK || (s = attr_ints(c, "pads", pads, 4, &np)) != PBL_OK ||
        (s = attr_ints(c, "dilations", dil, 2, &nd)) != PBL_OK || (s = attr_string_is(c, "auto_pad", "NOTSET", &auto_pad)) != PBL_OK)
        return s;
    if (ns < 0)
        ns = 2, stride[0] = stride[1] = 1;
    if (nd < 0)
        nd = 2, dil[0] = dil[1] = 1;
    if (ns != 2 || nd != 2 || (np >= 0 && np != 4))
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "only 2-D windows are supported (strides, dilations 2 ints; pads 4)%s", "");
    if (np < 0)
        pads[0] = pads[1] = pads[2] = pads[3] = 0;
    if (strcmp(auto_pad, "SAME_UPPER") == 0 || strcmp(auto_pad, "SAME_LOWER") == 0) {
        for (int k = 0; k < 2; k++) {
            if (stride[k] < 1)
                NODE_FAIL(c, PBL_ERR_ATTR, "stride %lld is not positive", (long long)stride[k]);
            int64_t in = sx->dim[2 + k], out = (in + stride[k] - 1) / stride[k];
            int64_t total = (out - 1) * stride[k] + (kernel[k] - 1) * dil[k] + 1 - in;
            if (total < 0)
                total = 0;
            int64_t small = total / 2, big = total - small;
            int upper = strcmp(auto_pad, "SAME_UPPER") == 0;
            pads[k] = upper ? small : big;
            pads[k + 2] = upper ? big : small;
        }
    } else if (strcmp(auto_pad, "VALID") == 0) {
        pads[0] = pads[1] = pads[2] = pads[3] = 0;
    }
    at[0] = PBL_ATTR_INTS("stride", stride, 2);
    at[1] = PBL_ATTR_INTS("pad", pads, 4);
    at[2] = PBL_ATTR_INTS("dilation", dil, 2);
    return PBL_OK;
}

static pbl_status cv_conv(ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value in[3], y;
    int64_t groups, stride[2], pads[4], dil[2];
    pbl_attr at[4];
    pbl_status s;
    if ((s = need_inputs(c, 2, 3)) != PBL_OK || (s = get(c, n->input[0], &in[0])) != PBL_OK ||
        (s = get(c, n->input[1], &in[1])) != PBL_OK || (s = attr_int(c, "group", 1, &groups)) != PBL_OK)
        return s;
    int32_t k = 2;
    if (in_name(n, 2) && (s = get(c, n->input[2], &in[k++])) != PBL_OK)
        return s;
    pbl_shape sx = shape_of(c, in[0]), sw = shape_of(c, in[1]);
    if (sx.ndim != 4 || sw.ndim != 4)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "only 2-D convolutions (X rank 4) are supported; X has rank %d", (int)sx.ndim);
    if ((s = window_attrs(c, &sx, &sw.dim[2], at, stride, pads, dil)) != PBL_OK)
        return s;
    at[3] = PBL_ATTR_INT("groups", groups);
    if ((s = emit(c, "conv2d", in, k, at, 4, NULL, &y)) != PBL_OK)
        return s;
    return define(c, n->output[0], y);
}

static pbl_status cv_pool(ctx *c, const char *op)
{
    const Onnx__NodeProto *n = c->node;
    pbl_value x, y;
    int64_t kernel[2], stride[2], pads[4], dil[2], ceil_mode, storage, count_pad;
    int32_t nk;
    pbl_attr at[4];
    pbl_status s;
    if ((s = need_inputs(c, 1, 1)) != PBL_OK || (s = get(c, n->input[0], &x)) != PBL_OK ||
        (s = attr_ints(c, "kernel_shape", kernel, 2, &nk)) != PBL_OK || (s = attr_int(c, "ceil_mode", 0, &ceil_mode)) != PBL_OK ||
        (s = attr_int(c, "storage_order", 0, &storage)) != PBL_OK ||
        (s = attr_int(c, "count_include_pad", 0, &count_pad)) != PBL_OK)
        return s;
    if (nk != 2)
        NODE_FAIL(c, nk < 0 ? PBL_ERR_FORMAT : PBL_ERR_UNSUPPORTED, "kernel_shape must list 2 ints (2-D pooling)%s", "");
    if (ceil_mode || storage)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "ceil_mode 1 and storage_order 1 are not supported%s", "");
    if (count_pad)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "count_include_pad 1 is not supported%s", "");
    if (n->n_output > 1 && n->output[1] && n->output[1][0])
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "the Indices output is not supported%s", "");
    pbl_shape sx = shape_of(c, x);
    if (sx.ndim != 4)
        NODE_FAIL(c, PBL_ERR_UNSUPPORTED, "only 2-D pooling (X rank 4) is supported; X has rank %d", (int)sx.ndim);
    if ((s = window_attrs(c, &sx, kernel, at, stride, pads, dil)) != PBL_OK)
        return s;
    at[3] = PBL_ATTR_INTS("kernel", kernel, 2);
    if ((s = emit(c, op, &x, 1, at, 4, NULL, &y)) != PBL_OK)
        return s;
    return define(c, n->output[0], y);
}

static pbl_status cv_max_pool(ctx *c) { return cv_pool(c, "max_pool2d"); }
static pbl_status cv_avg_pool(ctx *c) { return cv_pool(c, "avg_pool2d"); }
static pbl_status cv_global_avg_pool(ctx *c) { return cv_unary(c, "global_avg_pool"); }

typedef struct onnx_op {
    const char *name;
    convert_fn  fn;
} onnx_op;

static const onnx_op onnx_ops[] = {
    { "Add", cv_add }, { "Sub", cv_sub }, { "Mul", cv_mul }, { "Div", cv_div },
    { "Gemm", cv_gemm }, { "MatMul", cv_matmul },
    { "Relu", cv_relu }, { "Sigmoid", cv_sigmoid }, { "Tanh", cv_tanh },
    { "Softmax", cv_softmax }, { "LogSoftmax", cv_log_softmax },
    { "Flatten", cv_flatten }, { "Reshape", cv_reshape }, { "Identity", cv_identity },
    { "Transpose", cv_transpose }, { "ReduceSum", cv_reduce_sum }, { "ReduceMean", cv_reduce_mean },
    { "Concat", cv_concat }, { "Dropout", cv_dropout }, { "Constant", cv_constant },
    { "BatchNormalization", cv_batch_norm }, { "Conv", cv_conv }, { "MaxPool", cv_max_pool },
    { "AveragePool", cv_avg_pool }, { "GlobalAveragePool", cv_global_avg_pool },
};

static int default_domain(const char *d) { return !d || !d[0] || strcmp(d, "ai.onnx") == 0; }

static convert_fn find_op(const Onnx__NodeProto *n)
{
    if (!n->op_type || !default_domain(n->domain))
        return NULL;
    for (size_t i = 0; i < sizeof onnx_ops / sizeof onnx_ops[0]; i++)
        if (strcmp(onnx_ops[i].name, n->op_type) == 0)
            return onnx_ops[i].fn;
    return NULL;
}

/* ---- the model ------------------------------------------------------------------------------- */

/* Every node's op is known, or one message listing each unknown op type once with a node. */
static pbl_status check_ops(ctx *c, const Onnx__GraphProto *gp)
{
    size_t len = 0;
    int32_t count = 0;
    char *msg = c->err;
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *n = gp->node[i];
        if (!n)
            return fail(c, PBL_ERR_FORMAT, "node #%zu is missing", i);
        if (!n->op_type || !n->op_type[0])
            return fail(c, PBL_ERR_FORMAT, "node #%zu has no op_type", i);
        if (find_op(n))
            continue;
        int seen = 0; /* each op type once: the first node that uses it */
        for (size_t j = 0; j < i && !seen; j++)
            seen = !find_op(gp->node[j]) && strcmp(gp->node[j]->op_type, n->op_type) == 0 &&
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
                             default_domain(n->domain) ? "" : n->domain, default_domain(n->domain) ? "" : "::",
                             n->op_type, who);
            len += w > 0 ? (size_t)w : 0;
        }
    }
    return count ? PBL_ERR_UNSUPPORTED : PBL_OK;
}

static pbl_status add_inputs(ctx *c, const Onnx__GraphProto *gp)
{
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        if (!vi || !vi->name || !vi->name[0])
            return fail(c, PBL_ERR_FORMAT, "graph input #%zu has no name", i);
        if (sym_find(c, vi->name)) /* an initializer listed as an input too (IR < 4): a constant */
            continue;
        const Onnx__TypeProto *tp = vi->type;
        if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
            return fail(c, tp ? PBL_ERR_UNSUPPORTED : PBL_ERR_FORMAT, "graph input '%s': %s", vi->name,
                        tp ? "only tensor inputs are supported" : "no type given");
        const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
        pbl_dtype dt;
        if (tt->elem_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
            dt = PBL_F32;
        else if (tt->elem_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT32)
            dt = PBL_I32;
        else
            return fail(c, PBL_ERR_UNSUPPORTED, "graph input '%s': element type %d is not supported (FLOAT and INT32 are)",
                        vi->name, (int)tt->elem_type);
        if (!tt->shape)
            return fail(c, PBL_ERR_UNSUPPORTED, "graph input '%s' has no shape (pebble's shapes are static)", vi->name);
        if (tt->shape->n_dim > PBL_MAX_DIMS)
            return fail(c, PBL_ERR_UNSUPPORTED, "graph input '%s' has rank %zu; pebble's limit is %d", vi->name,
                        tt->shape->n_dim, PBL_MAX_DIMS);
        pbl_shape sh = { .ndim = (int32_t)tt->shape->n_dim };
        int64_t numel = 1;
        for (size_t k = 0; k < tt->shape->n_dim; k++) {
            const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[k];
            int64_t v = d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ? d->dim_value : -1;
            if (v < 0) /* symbolic or unknown */
                v = c->opt->dim_value;
            if (v <= 0 || v > PBL__ONNX_MAX_NUMEL / numel)
                return fail(c, v == 0 ? PBL_ERR_UNSUPPORTED : PBL_ERR_FORMAT, "graph input '%s': dim %zu is %lld (%s)",
                            vi->name, k, (long long)v, v == 0 ? "empty tensors are not supported" : "absurd");
            numel *= v;
            sh.dim[k] = v;
        }
        pbl_value v;
        pbl_status s = pbl_graph_add_variable(c->g, vi->name, PBL_VALUE_INPUT, dt, sh, &v);
        if (s != PBL_OK)
            return fail(c, s, "graph input '%s': %s", vi->name, pbl_graph_errmsg(c->g));
        if ((s = define(c, vi->name, v)) != PBL_OK)
            return s;
    }
    return PBL_OK;
}

/* The model's declared shape for a value (value_info or a graph output) must agree with
 * pebble's inference in every dim the model states as a number. */
static pbl_status check_declared(ctx *c, const Onnx__ValueInfoProto *vi, const char *what)
{
    if (!vi || !vi->name)
        return PBL_OK;
    sym *s = sym_find(c, vi->name);
    if (!s || s->v == PBL_NONE || !vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
        !vi->type->tensor_type || !vi->type->tensor_type->shape)
        return PBL_OK;
    const Onnx__TensorShapeProto *sp = vi->type->tensor_type->shape;
    pbl_shape have = shape_of(c, s->v);
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
        return fail(c, PBL_ERR_SHAPE, "%s '%s': the model declares the shape %s but pebble infers %s", what, vi->name,
                    decl, pbl_shape_str(&have, sh, sizeof sh));
    }
    return PBL_OK;
}

static pbl_status convert_graph(ctx *c, const Onnx__ModelProto *m)
{
    const Onnx__GraphProto *gp = m->graph;
    pbl_status s;
    if (!gp)
        return fail(c, PBL_ERR_FORMAT, "the model has no graph");
    c->opset = 0;
    for (size_t i = 0; i < m->n_opset_import; i++)
        if (m->opset_import[i] && default_domain(m->opset_import[i]->domain) && m->opset_import[i]->has_version)
            c->opset = m->opset_import[i]->version;
    if (c->opset == 0)
        c->opset = 1; /* IR without an opset import: the first opset */
    if ((s = check_ops(c, gp)) != PBL_OK)
        return s;
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *t = gp->initializer[i];
        if (!t || !t->name || !t->name[0])
            return fail(c, PBL_ERR_FORMAT, "initializer #%zu has no name", i);
        sym *sm;
        if ((s = sym_add(c, t->name, &sm)) != PBL_OK)
            return s;
        char what[300];
        snprintf(what, sizeof what, "initializer '%s'", t->name);
        if ((s = pbl__onnx_data_decode(t, &c->w->mem, &c->mem, &sm->data, what, c->err, c->errlen)) != PBL_OK)
            return s;
        sm->is_const = 1;
    }
    if ((s = add_inputs(c, gp)) != PBL_OK)
        return s;
    /* Convert each node once its inputs are known: one pass for a sorted model. */
    size_t n = gp->n_node, left = n;
    uint8_t *done = pbl__mem_calloc(&c->mem, n ? n : 1);
    if (!done)
        return fail(c, PBL_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) /* every input must name something that exists somewhere */
        for (size_t k = 0; k < gp->node[i]->n_input; k++) {
            const char *in = in_name(gp->node[i], k);
            int found = !in || sym_find(c, in);
            for (size_t j = 0; j < n && !found; j++)
                for (size_t o = 0; o < gp->node[j]->n_output && !found; o++)
                    found = gp->node[j]->output[o] && strcmp(gp->node[j]->output[o], in) == 0;
            if (!found) {
                c->node = gp->node[i];
                c->node_index = (int32_t)i;
                char nl[256];
                s = fail(c, PBL_ERR_FORMAT, "%s: input '%s' names no graph input, initializer or node output",
                         node_label(c, nl, sizeof nl), in);
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
                ready = !in_name(nd, k) || sym_find(c, nd->input[k]);
            if (!ready)
                continue;
            c->node = nd;
            c->node_index = (int32_t)i;
            if ((s = find_op(nd)(c)) != PBL_OK)
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
                    s = fail(c, PBL_ERR_CYCLE, "%s is on a cycle: its inputs depend on its own outputs",
                             node_label(c, nl, sizeof nl));
                    goto done;
                }
        }
    }
    c->node = NULL;
    if (gp->n_output == 0) {
        s = fail(c, PBL_ERR_FORMAT, "the graph has no outputs");
        goto done;
    }
    for (size_t i = 0; i < gp->n_output; i++) {
        const Onnx__ValueInfoProto *vo = gp->output[i];
        pbl_value v;
        if (!vo || !vo->name || !vo->name[0]) {
            s = fail(c, PBL_ERR_FORMAT, "graph output #%zu has no name", i);
            goto done;
        }
        sym *sm = sym_find(c, vo->name);
        if (!sm) {
            s = fail(c, PBL_ERR_FORMAT, "graph output '%s' names no value", vo->name);
            goto done;
        }
        if (sm->unsupported) {
            s = fail(c, PBL_ERR_UNSUPPORTED, "graph output '%s': %s", vo->name, sm->unsupported);
            goto done;
        }
        if ((s = get(c, vo->name, &v)) != PBL_OK)
            goto done;
        if ((s = pbl_graph_set_output(c->g, vo->name, v)) != PBL_OK) {
            s = fail(c, s, "graph output '%s': %s", vo->name, pbl_graph_errmsg(c->g));
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
        s = fail(c, s, "the loaded graph does not validate: %s", pbl_graph_errmsg(c->g));
done:
    pbl__mem_free(&c->mem, done, n ? n : 1);
    return s;
}

PBL__API pbl_status pbl_graph_from_onnx(pbl_graph **out, const void *data, size_t len,
                                        const pbl_onnx_options *opt, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!out)
        return PBL_ERR_INVALID_ARG;
    *out = NULL;
    pbl_onnx_options dflt = pbl_onnx_options_default();
    if (!opt)
        opt = &dflt;
    if (opt->weights)
        *opt->weights = NULL;
    ctx c = { .opt = opt, .err = err, .errlen = errlen };
    if (!data && len)
        return fail(&c, PBL_ERR_INVALID_ARG, "no data given");
    if (opt->dim_value < 1)
        return fail(&c, PBL_ERR_INVALID_ARG, "dim_value is %lld; it must be at least 1", (long long)opt->dim_value);
    pbl__mem_init(&c.mem, opt->allocator);
    pbl__mem wm;
    pbl__mem_init(&wm, opt->allocator);
    c.w = pbl__mem_calloc(&wm, sizeof *c.w);
    if (!c.w)
        return fail(&c, PBL_ERR_NOMEM, "out of memory");
    c.w->mem = wm; /* accounts for the handle itself, freed last through a copy of mem */
    pbl_graph_options go = pbl_graph_options_default();
    go.allocator = opt->allocator;
    pbl_status s = pbl_graph_create(&c.g, &go);
    Onnx__ModelProto *m = NULL;
    pbl__onnx_pb pb = { .m = &c.mem };
    ProtobufCAllocator pa = pbl__onnx_pb_allocator(&pb);
    if (s != PBL_OK) {
        s = fail(&c, s, "out of memory");
        goto done;
    }
    m = onnx__model_proto__unpack(&pa, len, data);
    if (!m) {
        s = pb.failed ? fail(&c, PBL_ERR_NOMEM, "out of memory decoding the model")
                      : fail(&c, PBL_ERR_FORMAT, "not a valid ONNX model (protobuf decoding failed)");
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

PBL__API pbl_status pbl_graph_load_onnx(pbl_graph **out, const char *path, const pbl_onnx_options *opt,
                                        char *err, size_t errlen)
{
    if (!out)
        return PBL_ERR_INVALID_ARG;
    *out = NULL;
    if (!path) {
        if (err && errlen)
            snprintf(err, errlen, "no path given");
        return PBL_ERR_INVALID_ARG;
    }
    pbl__mem m;
    pbl__mem_init(&m, opt ? opt->allocator : NULL);
    uint8_t *data;
    size_t len;
    pbl_status s = pbl__onnx_read_file(path, &m, &data, &len, err, errlen);
    if (s != PBL_OK)
        return s;
    s = pbl_graph_from_onnx(out, data, len, opt, err, errlen);
    if (s != PBL_OK && err && errlen) { /* name the file */
        size_t el = strlen(err), pl = strlen(path);
        if (pl + 2 + el < errlen) {
            memmove(err + pl + 2, err, el + 1);
            memcpy(err, path, pl);
            err[pl] = ':';
            err[pl + 1] = ' ';
        }
    }
    pbl__mem_free(&m, data, len ? len : 1);
    return s;
}
