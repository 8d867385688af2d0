/* Reading a graph from JSON (pebble/json.h): jansson parses the text; every variable and node
 * then goes through the builder (pbl_graph_add_variable, pbl_graph_add_node), so a file meets
 * exactly the checks a program building the graph would, and the result is validated.
 * Messages carry the JSON path of what is wrong ("$.nodes[3].inputs[1]"). */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "graph/base/errmsg.h"
#include "graph/base/file_in.h"
#include "graph/ir/graph_internal.h"
#include "graph/ir/schedule.h"
#include "graph/ir/registry.h"
#include "pebble/json.h"

#define MAX_ATTRS 32                 /* more than any op has; more is refused before copying */
#define MAX_ITEMS (INT32_MAX / 8)    /* variables or nodes; keeps node*PBL__MAX_OUT+slot in int32 */

typedef struct jvar {
    const char    *name;
    pbl_value_kind kind;
    pbl_dtype      dtype;
    pbl_shape      shape;
    int64_t        after_nodes;
    int            backward;
    double         value;    /* kind scalar: the initial value */
} jvar;

typedef struct jnode {
    json_t     *obj;
    const char *name;
    int32_t     n_out;
    json_t     *inputs;  /* array of strings, or NULL */
    json_t     *attrs;   /* object, or NULL */
    int         backward;
} jnode;

typedef struct loader {
    pbl__mem    mem;        /* the loader's own bookkeeping, through the caller's allocator */
    const char *prefix;     /* "FILE: " or "" */
    char       *err;
    size_t      errlen;
    int         strict;     /* a 1.0 file: unknown fields are mistakes */
    pbl_graph  *g;
    jvar       *vars;
    int32_t     n_vars;
    jnode      *nodes;
    int32_t     n_nodes;
    pbl__names  var_names;  /* name -> index in vars */
    pbl__names  out_names;  /* value name -> node * PBL__MAX_OUT + slot */
    char      **extra;      /* the "name:k" keys of out_names, owned here */
    int32_t     n_extra;
    int32_t    *order;      /* nodes in the order they are added */
    int32_t     vars_added;
} loader;

static pbl_status fail(loader *L, pbl_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static pbl_status fail(loader *L, pbl_status s, const char *fmt, ...)
{
    pbl__errf(L->err, L->errlen, s, "%s", L->prefix);
    va_list ap;
    va_start(ap, fmt);
    pbl__verrf_append(L->err, L->errlen, s, fmt, ap);
    va_end(ap);
    return s;
}

/* A string from the file for a message: at most 60 bytes, unprintable bytes as '?'. */
static const char *shown(char *dst, const char *s)
{
    size_t k = 0;
    for (; s[k] && k < 60; k++)
        dst[k] = (unsigned char)s[k] >= 0x20 && (unsigned char)s[k] != 0x7f ? s[k] : '?';
    if (s[k]) {
        memcpy(dst + k, "...", 3);
        k += 3;
    }
    dst[k] = '\0';
    return dst;
}

static const char *type_name(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* Refuses fields this version does not define (only in files of this very version: a newer
 * minor version may add fields, which an older reader skips). */
static pbl_status check_keys(loader *L, json_t *obj, const char *path, const char *const *allowed)
{
    if (!L->strict)
        return PBL_OK;
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int known = 0;
        for (int k = 0; allowed[k] && !known; k++)
            known = strcmp(allowed[k], key) == 0;
        if (!known) {
            char sk[72];
            return fail(L, PBL_ERR_FORMAT, "%s: unknown field '%s'", path, shown(sk, key));
        }
    }
    return PBL_OK;
}

/* obj[key] of the JSON type wanted, or NULL when absent and optional. */
static pbl_status field(loader *L, json_t *obj, const char *path, const char *key, json_type want, int required,
                        json_t **out)
{
    json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v) {
        if (required)
            return fail(L, PBL_ERR_FORMAT, "%s: missing field '%s'", path, key);
        return PBL_OK;
    }
    int ok = json_typeof(v) == want || (want == JSON_TRUE && json_is_boolean(v));
    if (!ok) {
        static const char *const wanted[] = { [JSON_OBJECT] = "an object", [JSON_ARRAY] = "an array",
                                              [JSON_STRING] = "a string", [JSON_INTEGER] = "an integer",
                                              [JSON_REAL] = "a number", [JSON_TRUE] = "a boolean",
                                              [JSON_FALSE] = "a boolean", [JSON_NULL] = "null" };
        return fail(L, PBL_ERR_FORMAT, "%s.%s: must be %s, not %s", path, key, wanted[want], type_name(v));
    }
    *out = v;
    return PBL_OK;
}

static pbl_status name_field(loader *L, json_t *obj, const char *path, const char *key, const char **out)
{
    json_t *v;
    pbl_status s = field(L, obj, path, key, JSON_STRING, 1, &v);
    if (s != PBL_OK)
        return s;
    *out = json_string_value(v);
    if (!**out)
        return fail(L, PBL_ERR_FORMAT, "%s.%s: must not be empty", path, key);
    return PBL_OK;
}

static pbl_status bool_field(loader *L, json_t *obj, const char *path, const char *key, int *out)
{
    json_t *v;
    pbl_status s = field(L, obj, path, key, JSON_TRUE, 0, &v);
    *out = v && json_is_true(v);
    return s;
}

/* A JSON array of 0..PBL_MAX_DIMS integers as a shape (the builder checks the dims). */
static pbl_status parse_shape(loader *L, json_t *a, const char *path, pbl_shape *out)
{
    if (!json_is_array(a))
        return fail(L, PBL_ERR_FORMAT, "%s: a shape must be an array of integers, not %s", path, type_name(a));
    size_t n = json_array_size(a);
    if (n > PBL_MAX_DIMS)
        return fail(L, PBL_ERR_INVALID_ARG, "%s: rank %zu; at most %d dims", path, n, PBL_MAX_DIMS);
    memset(out, 0, sizeof *out);
    out->ndim = (int32_t)n;
    for (size_t d = 0; d < n; d++) {
        json_t *e = json_array_get(a, d);
        if (!json_is_integer(e))
            return fail(L, PBL_ERR_FORMAT, "%s[%zu]: a dim must be an integer, not %s", path, d, type_name(e));
        out->dim[d] = (int64_t)json_integer_value(e);
    }
    return PBL_OK;
}

static pbl_status parse_dtype(loader *L, json_t *v, const char *path, pbl_dtype *out)
{
    const char *s = json_string_value(v);
    if (s && strcmp(s, "f32") == 0)
        *out = PBL_F32;
    else if (s && strcmp(s, "i32") == 0)
        *out = PBL_I32;
    else {
        char sv[72];
        return fail(L, PBL_ERR_FORMAT, "%s: dtype '%s' is not f32 or i32", path, s ? shown(sv, s) : type_name(v));
    }
    return PBL_OK;
}

/* ---- the first pass: read every variable and node, name every value -------------------------- */

static pbl_status read_variable(loader *L, json_t *o, int32_t i, int64_t *last_after)
{
    static const char *const keys[] = { "name", "kind", "dtype", "shape", "after_nodes", "backward", "value", NULL };
    char path[48];
    snprintf(path, sizeof path, "$.variables[%d]", (int)i);
    if (!json_is_object(o))
        return fail(L, PBL_ERR_FORMAT, "%s: must be an object, not %s", path, type_name(o));
    jvar *v = &L->vars[i];
    json_t *kind, *dtype, *shape, *after;
    pbl_status s = check_keys(L, o, path, keys);
    if (s == PBL_OK)
        s = name_field(L, o, path, "name", &v->name);
    if (s == PBL_OK)
        s = field(L, o, path, "kind", JSON_STRING, 1, &kind);
    if (s == PBL_OK)
        s = field(L, o, path, "dtype", JSON_STRING, 1, &dtype);
    if (s == PBL_OK)
        s = field(L, o, path, "shape", JSON_ARRAY, 1, &shape);
    if (s == PBL_OK)
        s = field(L, o, path, "after_nodes", JSON_INTEGER, 0, &after);
    if (s == PBL_OK)
        s = bool_field(L, o, path, "backward", &v->backward);
    if (s != PBL_OK)
        return s;
    static const char *const kinds[] = { "input", "param", "label", "state", "scalar" };
    static const pbl_value_kind kind_of[] = { PBL_VALUE_INPUT, PBL_VALUE_PARAM, PBL_VALUE_LABEL, PBL_VALUE_STATE,
                                              PBL_VALUE_SCALAR };
    const char *k = json_string_value(kind);
    int32_t ki = 0;
    while (ki < 5 && strcmp(kinds[ki], k) != 0)
        ki++;
    if (ki == 5) {
        char sk[72];
        return fail(L, PBL_ERR_FORMAT, "%s.kind: '%s' is not one of input, param, label, state, scalar", path, shown(sk, k));
    }
    v->kind = kind_of[ki];
    json_t *value = json_object_get(o, "value");
    if (value && v->kind != PBL_VALUE_SCALAR)
        return fail(L, PBL_ERR_FORMAT, "%s.value: only a scalar has a value", path);
    if (value && !json_is_number(value))
        return fail(L, PBL_ERR_FORMAT, "%s.value: must be a number, not %s", path, type_name(value));
    v->value = value ? json_number_value(value) : 0.0;
    if (!(fabs(v->value) <= FLT_MAX)) /* executors store it as one f32 */
        return fail(L, PBL_ERR_FORMAT, "%s.value: %g is beyond f32's range", path, v->value);
    char sub[64];
    snprintf(sub, sizeof sub, "%s.dtype", path);
    if ((s = parse_dtype(L, dtype, sub, &v->dtype)) != PBL_OK)
        return s;
    snprintf(sub, sizeof sub, "%s.shape", path);
    if ((s = parse_shape(L, shape, sub, &v->shape)) != PBL_OK)
        return s;
    v->after_nodes = after ? (int64_t)json_integer_value(after) : 0;
    if (v->after_nodes < *last_after || v->after_nodes > L->n_nodes)
        return fail(L, PBL_ERR_FORMAT, "%s.after_nodes: %lld; must be %lld..%d (variables are listed in the order they were made)",
                    path, (long long)v->after_nodes, (long long)*last_after, (int)L->n_nodes);
    *last_after = v->after_nodes;
    if (pbl__names_get(&L->var_names, v->name) < 0 && pbl__names_put(&L->var_names, &L->mem, v->name, i) != PBL_OK)
        return fail(L, PBL_ERR_NOMEM, "%s: out of memory", path);
    return PBL_OK;
}

static pbl_status read_node(loader *L, json_t *o, int32_t i)
{
    static const char *const keys[] = { "name", "op", "inputs", "attrs", "shapes", "dtypes", "backward", NULL };
    char path[48];
    snprintf(path, sizeof path, "$.nodes[%d]", (int)i);
    if (!json_is_object(o))
        return fail(L, PBL_ERR_FORMAT, "%s: must be an object, not %s", path, type_name(o));
    jnode *n = &L->nodes[i];
    n->obj = o;
    const char *op_name;
    json_t *shapes, *dtypes;
    pbl_status s = check_keys(L, o, path, keys);
    if (s == PBL_OK)
        s = name_field(L, o, path, "name", &n->name);
    if (s == PBL_OK)
        s = name_field(L, o, path, "op", &op_name);
    if (s == PBL_OK)
        s = field(L, o, path, "inputs", JSON_ARRAY, 0, &n->inputs);
    if (s == PBL_OK)
        s = field(L, o, path, "attrs", JSON_OBJECT, 0, &n->attrs);
    if (s == PBL_OK)
        s = field(L, o, path, "shapes", JSON_ARRAY, 0, &shapes);
    if (s == PBL_OK)
        s = field(L, o, path, "dtypes", JSON_ARRAY, 0, &dtypes);
    if (s == PBL_OK)
        s = bool_field(L, o, path, "backward", &n->backward);
    if (s != PBL_OK)
        return s;
    const pbl__op *op = pbl__op_get(pbl__op_find(op_name));
    if (!op) {
        char so[72];
        return fail(L, PBL_ERR_UNKNOWN_OP, "%s.op: unknown op '%s'", path, shown(so, op_name));
    }
    n->n_out = op->n_out;
    size_t n_in = n->inputs ? json_array_size(n->inputs) : 0;
    if (n_in > PBL__MAX_IN)
        return fail(L, PBL_ERR_ARITY, "%s.inputs: %zu inputs; no op takes more than %d", path, n_in, PBL__MAX_IN);
    for (size_t k = 0; k < n_in; k++)
        if (!json_is_string(json_array_get(n->inputs, k)))
            return fail(L, PBL_ERR_FORMAT, "%s.inputs[%zu]: must be a value's name, not %s", path, k,
                        type_name(json_array_get(n->inputs, k)));
    if (n->attrs && json_object_size(n->attrs) > MAX_ATTRS)
        return fail(L, PBL_ERR_ATTR, "%s.attrs: %zu attributes; op '%s' has %d", path, json_object_size(n->attrs),
                    op->name, (int)op->n_attrs);

    /* Name the node's outputs as the builder will ("drop1", "drop1:1"). The first definition
     * of a name wins here; the builder refuses the second one when it comes to it. */
    for (int32_t k = 0; k < n->n_out; k++) {
        const char *key = n->name;
        if (k > 0) {
            size_t len = (size_t)snprintf(NULL, 0, "%s:%d", n->name, (int)k) + 1; /* freed by strfree */
            char *e = pbl__mem_alloc(&L->mem, len);
            if (!e)
                return fail(L, PBL_ERR_NOMEM, "%s: out of memory", path);
            snprintf(e, len, "%s:%d", n->name, (int)k);
            L->extra[L->n_extra++] = e;
            key = e;
        }
        if (pbl__names_get(&L->out_names, key) < 0 &&
            pbl__names_put(&L->out_names, &L->mem, key, i * PBL__MAX_OUT + k) != PBL_OK)
            return fail(L, PBL_ERR_NOMEM, "%s: out of memory", path);
    }
    return PBL_OK;
}

/* The node whose output input k of node i names; -1 for a variable, -2 for no value. */
static int32_t producer_of(const loader *L, int32_t i, size_t k)
{
    const char *name = json_string_value(json_array_get(L->nodes[i].inputs, k));
    if (pbl__names_get(&L->var_names, name) >= 0)
        return -1;
    int32_t id = pbl__names_get(&L->out_names, name);
    return id >= 0 ? id / PBL__MAX_OUT : -2;
}

static size_t n_inputs(const jnode *n) { return n->inputs ? json_array_size(n->inputs) : 0; }

/* ---- the order nodes are added in ------------------------------------------------------------- */

static pbl_status plan_order(loader *L)
{
    int32_t n = L->n_nodes;
    int in_file_order = 1;
    for (int32_t i = 0; i < n; i++) {
        for (size_t k = 0; k < n_inputs(&L->nodes[i]); k++) {
            int32_t p = producer_of(L, i, k);
            if (p == -2) {
                char sv[72];
                return fail(L, PBL_ERR_DANGLING, "$.nodes[%d].inputs[%zu]: unknown value '%s'", (int)i, k,
                            shown(sv, json_string_value(json_array_get(L->nodes[i].inputs, k))));
            }
            if (p >= i)
                in_file_order = 0;
        }
    }
    for (int32_t i = 0; i < n; i++)
        L->order[i] = i;
    if (in_file_order)
        return PBL_OK;

    /* Kahn's algorithm over edges producer -> consumer (one per input slot), with a min-heap of
     * node indices: among the nodes ready to add, the earliest in the file first, so a file in
     * topological order is added exactly in file order. */
    pbl_status s = PBL_ERR_NOMEM;
    size_t cells = (size_t)n + 1;
    int32_t *indeg = pbl__mem_calloc(&L->mem, cells * sizeof *indeg);
    int32_t *start = pbl__mem_calloc(&L->mem, cells * sizeof *start);
    int32_t *heap = pbl__mem_alloc(&L->mem, cells * sizeof *heap);
    int32_t *edge = NULL;
    size_t n_edges = 0;
    if (!indeg || !start || !heap)
        goto done;
    for (int32_t i = 0; i < n; i++)
        for (size_t k = 0; k < n_inputs(&L->nodes[i]); k++) {
            int32_t p = producer_of(L, i, k);
            if (p >= 0) {
                start[p + 1]++;
                indeg[i]++;
                n_edges++;
            }
        }
    for (int32_t i = 0; i < n; i++)
        start[i + 1] += start[i];
    edge = pbl__mem_alloc(&L->mem, (n_edges ? n_edges : 1) * sizeof *edge);
    if (!edge)
        goto done;
    {
        int32_t *fill = L->order; /* borrowed as a cursor per producer until the order is made */
        for (int32_t i = 0; i < n; i++)
            fill[i] = start[i];
        for (int32_t i = 0; i < n; i++)
            for (size_t k = 0; k < n_inputs(&L->nodes[i]); k++) {
                int32_t p = producer_of(L, i, k);
                if (p >= 0)
                    edge[fill[p]++] = i;
            }
    }
    int32_t n_heap = 0, n_done = 0;
    for (int32_t i = 0; i < n; i++)
        if (indeg[i] == 0)
            pbl__heap_push(heap, &n_heap, i);
    while (n_heap > 0) {
        int32_t i = pbl__heap_pop(heap, &n_heap);
        L->order[n_done++] = i;
        for (int32_t e = start[i]; e < start[i + 1]; e++)
            if (--indeg[edge[e]] == 0)
                pbl__heap_push(heap, &n_heap, edge[e]);
    }
    if (n_done < n) {
        /* Every node left waits for another node left; walking back n steps along such
         * inputs must end on a cycle. */
        int32_t at = 0;
        while (indeg[at] == 0)
            at++;
        for (int32_t step = 0; step < n; step++) {
            int32_t next = -1;
            for (size_t k = 0; k < n_inputs(&L->nodes[at]) && next < 0; k++) {
                int32_t p = producer_of(L, at, k);
                if (p >= 0 && indeg[p] > 0)
                    next = p;
            }
            at = next;
        }
        char sn[72];
        s = fail(L, PBL_ERR_CYCLE, "$.nodes[%d]: node '%s' lies on a cycle: it depends on its own output", (int)at,
                 shown(sn, L->nodes[at].name));
        goto done;
    }
    s = PBL_OK;
done:
    if (s == PBL_ERR_NOMEM)
        fail(L, s, "$.nodes: out of memory");
    pbl__mem_free(&L->mem, edge, (n_edges ? n_edges : 1) * sizeof *edge);
    pbl__mem_free(&L->mem, heap, cells * sizeof *heap);
    pbl__mem_free(&L->mem, start, cells * sizeof *start);
    pbl__mem_free(&L->mem, indeg, cells * sizeof *indeg);
    return s;
}

/* ---- the second pass: build through the builder --------------------------------------------- */

static pbl_status add_variables_through(loader *L, int32_t last)
{
    for (; L->vars_added <= last; L->vars_added++) {
        const jvar *v = &L->vars[L->vars_added];
        L->g->in_backward = v->backward;
        pbl_value id = PBL_NONE;
        pbl_status s = pbl_graph_add_variable(L->g, v->name, v->kind, v->dtype, v->shape, &id);
        if (s == PBL_OK && v->kind == PBL_VALUE_SCALAR)
            L->g->values[id].initial = v->value;
        L->g->in_backward = 0;
        if (s != PBL_OK)
            return fail(L, s, "$.variables[%d]: %s", (int)L->vars_added, pbl_graph_errmsg(L->g));
    }
    return PBL_OK;
}

/* One attribute from the file as the builder takes it. */
static pbl_status read_attr(loader *L, const char *path, const char *key, json_t *v, pbl_attr *a, int64_t *ints)
{
    char sk[72];
    *a = (pbl_attr){ .name = key };
    if (json_is_integer(v)) {
        a->type = PBL_ATTR_INT;
        a->i = (int64_t)json_integer_value(v);
    } else if (json_is_real(v)) {
        a->type = PBL_ATTR_FLOAT;
        a->f = json_real_value(v);
    } else if (json_is_string(v) && (strcmp(json_string_value(v), "inf") == 0 || strcmp(json_string_value(v), "-inf") == 0 ||
                                     strcmp(json_string_value(v), "nan") == 0)) {
        a->type = PBL_ATTR_FLOAT;
        a->f = strtod(json_string_value(v), NULL);
    } else if (json_is_array(v)) {
        size_t n = json_array_size(v);
        if (n > PBL_MAX_INTS)
            return fail(L, PBL_ERR_ATTR, "%s.%s: %zu ints; a list holds at most %d", path, shown(sk, key), n, PBL_MAX_INTS);
        for (size_t k = 0; k < n; k++) {
            json_t *e = json_array_get(v, k);
            if (!json_is_integer(e))
                return fail(L, PBL_ERR_FORMAT, "%s.%s[%zu]: must be an integer, not %s", path, shown(sk, key), k,
                            type_name(e));
            ints[k] = (int64_t)json_integer_value(e);
        }
        a->type = PBL_ATTR_INTS;
        a->ints = ints;
        a->n_ints = (int32_t)n;
    } else {
        return fail(L, PBL_ERR_FORMAT, "%s.%s: must be a number, an array of integers, or \"inf\", \"-inf\" or \"nan\"; not %s",
                    path, shown(sk, key), type_name(v));
    }
    return PBL_OK;
}

/* The optional "shapes" and "dtypes" must say what the builder inferred. */
static pbl_status check_outputs(loader *L, int32_t i, const pbl_value *outs)
{
    const jnode *n = &L->nodes[i];
    json_t *shapes = json_object_get(n->obj, "shapes"), *dtypes = json_object_get(n->obj, "dtypes");
    char path[64];
    for (int pass = 0; pass < 2; pass++) {
        json_t *list = pass ? dtypes : shapes;
        if (!list)
            continue;
        const char *what = pass ? "dtypes" : "shapes";
        if (json_array_size(list) != (size_t)n->n_out)
            return fail(L, pass ? PBL_ERR_DTYPE : PBL_ERR_SHAPE, "$.nodes[%d].%s: lists %zu outputs; the op has %d",
                        (int)i, what, json_array_size(list), (int)n->n_out);
        for (int32_t k = 0; k < n->n_out; k++) {
            pbl_value_info info;
            pbl_graph_value_info(L->g, outs[k], &info);
            snprintf(path, sizeof path, "$.nodes[%d].%s[%d]", (int)i, what, (int)k);
            json_t *e = json_array_get(list, (size_t)k);
            pbl_status s;
            if (pass) {
                pbl_dtype t;
                if ((s = parse_dtype(L, e, path, &t)) != PBL_OK)
                    return s;
                if (t != info.dtype)
                    return fail(L, PBL_ERR_DTYPE, "%s: the op gives %s, the file says %s", path, pbl_dtype_name(info.dtype),
                                pbl_dtype_name(t));
            } else {
                pbl_shape sh;
                if ((s = parse_shape(L, e, path, &sh)) != PBL_OK)
                    return s;
                if (!pbl_shape_equal(&sh, &info.shape)) {
                    char a[96], b[96];
                    return fail(L, PBL_ERR_SHAPE, "%s: the op gives %s, the file says %s", path,
                                pbl_shape_str(&info.shape, a, sizeof a), pbl_shape_str(&sh, b, sizeof b));
                }
            }
        }
    }
    return PBL_OK;
}

static pbl_status add_node(loader *L, int32_t i)
{
    const jnode *n = &L->nodes[i];
    char path[48];
    snprintf(path, sizeof path, "$.nodes[%d]", (int)i);
    pbl_value in[PBL__MAX_IN];
    int32_t n_in = (int32_t)n_inputs(n);
    for (int32_t k = 0; k < n_in; k++) {
        const char *name = json_string_value(json_array_get(n->inputs, (size_t)k));
        in[k] = pbl_graph_find_value(L->g, name);
        int32_t var = pbl__names_get(&L->var_names, name);
        if (in[k] == PBL_NONE && var >= L->vars_added) {
            /* read before its after_nodes says it was made (a rewired graph): make it now */
            pbl_status s = add_variables_through(L, var);
            if (s != PBL_OK)
                return s;
            in[k] = pbl_graph_find_value(L->g, name);
        }
        if (in[k] == PBL_NONE) {
            char sv[72];
            return fail(L, PBL_ERR_DANGLING, "%s.inputs[%d]: unknown value '%s'", path, (int)k, shown(sv, name));
        }
    }
    pbl_attr attrs[MAX_ATTRS];
    int64_t ints[MAX_ATTRS][PBL_MAX_INTS];
    int32_t n_attrs = 0;
    if (n->attrs) {
        char apath[64];
        snprintf(apath, sizeof apath, "%s.attrs", path);
        const char *key;
        json_t *v;
        json_object_foreach(n->attrs, key, v) {
            pbl_status s = read_attr(L, apath, key, v, &attrs[n_attrs], ints[n_attrs]);
            if (s != PBL_OK)
                return s;
            n_attrs++;
        }
    }
    pbl_node_desc d = { .op = json_string_value(json_object_get(n->obj, "op")), .name = n->name, .inputs = in,
                        .n_inputs = n_in, .attrs = attrs, .n_attrs = n_attrs };
    pbl_value outs[PBL__MAX_OUT];
    L->g->in_backward = n->backward;
    pbl_status s = pbl_graph_add_node(L->g, &d, NULL, outs);
    L->g->in_backward = 0;
    if (s != PBL_OK) {
        const char *where = s == PBL_ERR_ATTR ? ".attrs" : s == PBL_ERR_ARITY ? ".inputs" : "";
        return fail(L, s, "%s%s: %s", path, where, pbl_graph_errmsg(L->g));
    }
    return check_outputs(L, i, outs);
}

static pbl_status add_outputs(loader *L, json_t *outputs)
{
    static const char *const keys[] = { "name", "value", NULL };
    for (size_t i = 0; outputs && i < json_array_size(outputs); i++) {
        char path[48], sv[72];
        snprintf(path, sizeof path, "$.outputs[%zu]", i);
        json_t *o = json_array_get(outputs, i);
        if (!json_is_object(o))
            return fail(L, PBL_ERR_FORMAT, "%s: must be an object, not %s", path, type_name(o));
        const char *name, *value;
        pbl_status s = check_keys(L, o, path, keys);
        if (s == PBL_OK)
            s = name_field(L, o, path, "name", &name);
        if (s == PBL_OK)
            s = name_field(L, o, path, "value", &value);
        if (s != PBL_OK)
            return s;
        pbl_value v = pbl_graph_find_value(L->g, value);
        if (v == PBL_NONE)
            return fail(L, PBL_ERR_DANGLING, "%s.value: unknown value '%s'", path, shown(sv, value));
        if (pbl_graph_output(L->g, name) != PBL_NONE)
            return fail(L, PBL_ERR_INVALID_ARG, "%s.name: output '%s' is listed twice", path, shown(sv, name));
        s = pbl_graph_set_output(L->g, name, v);
        if (s != PBL_OK)
            return fail(L, s, "%s: %s", path, pbl_graph_errmsg(L->g));
    }
    return PBL_OK;
}

/* ---- the document ----------------------------------------------------------------------------- */

static pbl_status check_header(loader *L, json_t *root)
{
    json_t *format, *version;
    pbl_status s = field(L, root, "$", "format", JSON_STRING, 1, &format);
    if (s != PBL_OK)
        return s;
    char sv[72];
    if (strcmp(json_string_value(format), "pebble-graph") != 0)
        return fail(L, PBL_ERR_FORMAT, "$.format: '%s'; a pebble graph says \"pebble-graph\"",
                    shown(sv, json_string_value(format)));
    if ((s = field(L, root, "$", "version", JSON_STRING, 1, &version)) != PBL_OK)
        return s;
    const char *v = json_string_value(version);
    unsigned long major = 0, minor = 0;
    char *end;
    int ok = v[0] >= '0' && v[0] <= '9';
    if (ok) {
        major = strtoul(v, &end, 10);
        ok = *end == '.' && end[1] >= '0' && end[1] <= '9';
        if (ok) {
            minor = strtoul(end + 1, &end, 10);
            ok = *end == '\0';
        }
    }
    if (!ok)
        return fail(L, PBL_ERR_FORMAT, "$.version: '%s' is not MAJOR.MINOR", shown(sv, v));
    if (major != PBL_JSON_VERSION_MAJOR)
        return fail(L, PBL_ERR_FORMAT, "$.version: version %s is not supported (this reader reads %d.x)", shown(sv, v),
                    PBL_JSON_VERSION_MAJOR);
    L->strict = minor <= PBL_JSON_VERSION_MINOR;
    static const char *const keys[] = { "format", "version", "gradient", "variables", "nodes", "outputs", NULL };
    return check_keys(L, root, "$", keys);
}

static pbl_status load_document(loader *L, json_t *root, const pbl_allocator *a)
{
    if (!json_is_object(root))
        return fail(L, PBL_ERR_FORMAT, "$: a graph is a JSON object, not %s", type_name(root));
    pbl_status s = check_header(L, root);
    json_t *vars, *nodes, *outputs;
    int gradient = 0;
    if (s == PBL_OK)
        s = field(L, root, "$", "variables", JSON_ARRAY, 0, &vars);
    if (s == PBL_OK)
        s = field(L, root, "$", "nodes", JSON_ARRAY, 0, &nodes);
    if (s == PBL_OK)
        s = field(L, root, "$", "outputs", JSON_ARRAY, 0, &outputs);
    if (s == PBL_OK)
        s = bool_field(L, root, "$", "gradient", &gradient);
    if (s != PBL_OK)
        return s;
    size_t nv = vars ? json_array_size(vars) : 0, nn = nodes ? json_array_size(nodes) : 0;
    if (nv > MAX_ITEMS || nn > MAX_ITEMS)
        return fail(L, PBL_ERR_FORMAT, "$: %zu variables and %zu nodes; at most %d of each", nv, nn, (int)MAX_ITEMS);
    L->n_vars = (int32_t)nv;
    L->n_nodes = (int32_t)nn;
    L->vars = pbl__mem_calloc(&L->mem, (nv ? nv : 1) * sizeof *L->vars);
    L->nodes = pbl__mem_calloc(&L->mem, (nn ? nn : 1) * sizeof *L->nodes);
    L->extra = pbl__mem_alloc(&L->mem, (nn ? nn : 1) * (PBL__MAX_OUT - 1) * sizeof *L->extra);
    L->order = pbl__mem_alloc(&L->mem, (nn ? nn : 1) * sizeof *L->order);
    if (!L->vars || !L->nodes || !L->extra || !L->order)
        return fail(L, PBL_ERR_NOMEM, "$: out of memory");

    int64_t last_after = 0;
    for (int32_t i = 0; i < L->n_vars; i++)
        if ((s = read_variable(L, json_array_get(vars, (size_t)i), i, &last_after)) != PBL_OK)
            return s;
    for (int32_t i = 0; i < L->n_nodes; i++)
        if ((s = read_node(L, json_array_get(nodes, (size_t)i), i)) != PBL_OK)
            return s;
    if ((s = plan_order(L)) != PBL_OK)
        return s;

    pbl_graph_options go = pbl_graph_options_default();
    go.allocator = a;
    if (pbl_graph_create(&L->g, &go) != PBL_OK)
        return fail(L, PBL_ERR_NOMEM, "$: out of memory");
    for (int32_t t = 0; t < L->n_nodes; t++) {
        int32_t last = L->vars_added - 1;
        while (last + 1 < L->n_vars && L->vars[last + 1].after_nodes <= t)
            last++;
        if ((s = add_variables_through(L, last)) != PBL_OK)
            return s;
        if ((s = add_node(L, L->order[t])) != PBL_OK)
            return s;
    }
    if ((s = add_variables_through(L, L->n_vars - 1)) != PBL_OK)
        return s;
    if ((s = add_outputs(L, outputs)) != PBL_OK)
        return s;
    L->g->has_gradient = gradient;
    if ((s = pbl_graph_validate(L->g)) != PBL_OK)
        return fail(L, s, "$: %s", pbl_graph_errmsg(L->g));
    return PBL_OK;
}

static pbl_status load_text(pbl_graph **out, const char *text, size_t len, const pbl_allocator *a, const char *prefix,
                            char *err, size_t errlen)
{
    loader L = { .prefix = prefix, .err = err, .errlen = errlen };
    pbl__mem_init(&L.mem, a);
    pbl__errclear(err, errlen);
    if (!out)
        return fail(&L, PBL_ERR_INVALID_ARG, "load JSON: no place for the graph");
    *out = NULL;
    if (!text && len)
        return fail(&L, PBL_ERR_INVALID_ARG, "load JSON: no text");
    json_error_t je;
    json_t *root = json_loadb(text ? text : "", len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        pbl_status s = json_error_code(&je) == json_error_out_of_memory ? PBL_ERR_NOMEM : PBL_ERR_FORMAT;
        return fail(&L, s, "line %d, column %d: %s", je.line, je.column, je.text);
    }
    pbl_status s = load_document(&L, root, a);
    for (int32_t i = 0; i < L.n_extra; i++)
        pbl__mem_strfree(&L.mem, L.extra[i]);
    size_t nn = L.n_nodes ? (size_t)L.n_nodes : 1, nv = L.n_vars ? (size_t)L.n_vars : 1;
    pbl__mem_free(&L.mem, L.extra, nn * (PBL__MAX_OUT - 1) * sizeof *L.extra);
    pbl__mem_free(&L.mem, L.order, nn * sizeof *L.order);
    pbl__mem_free(&L.mem, L.nodes, nn * sizeof *L.nodes);
    pbl__mem_free(&L.mem, L.vars, nv * sizeof *L.vars);
    pbl__names_free(&L.var_names, &L.mem);
    pbl__names_free(&L.out_names, &L.mem);
    json_decref(root);
    if (s != PBL_OK) {
        pbl_graph_destroy(L.g);
        return s;
    }
    *out = L.g;
    return PBL_OK;
}

PBL__API pbl_status pbl_graph_from_json(pbl_graph **out, const char *text, size_t len, const pbl_allocator *a,
                                        char *err, size_t errlen)
{
    return load_text(out, text, len, a, "", err, errlen);
}

PBL__API pbl_status pbl_graph_load_json(pbl_graph **out, const char *path, const pbl_allocator *a, char *err,
                                        size_t errlen)
{
    if (out)
        *out = NULL;
    if (!path || !out) {
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "load JSON: no file name or no place for the graph");
    }
    pbl__mem m;
    pbl__mem_init(&m, a);
    unsigned char *text = NULL;
    size_t len = 0;
    pbl_status s = pbl__file_in_read(path, "a JSON graph", PBL__FILE_IN_MAX_TEXT, &m, &text, &len, err, errlen);
    if (s != PBL_OK)
        return s;
    {
        size_t plen = strlen(path) + 3;
        char *prefix = pbl__mem_alloc(&m, plen);
        if (!prefix) {
            s = pbl__errf(err, errlen, PBL_ERR_NOMEM, "%s: out of memory", path);
            goto done;
        }
        snprintf(prefix, plen, "%s: ", path);
        s = load_text(out, (const char *)text, len, a, prefix, err, errlen);
        pbl__mem_free(&m, prefix, plen);
    }
done:
    pbl__mem_free(&m, text, len + 1);
    return s;
}
