/* Writing a graph as JSON (pebble/json.h): one variable, node or output per line, floats in
 * the fewest digits that read back to the same double, and the file replaced atomically.
 * The text is formatted here rather than by jansson's dumper, which can only put every array
 * element on its own line or everything on one, and prints 0.1 as 0.10000000000000001. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph/base/errmsg.h"
#include "graph/base/file_out.h"
#include "graph/ir/graph_internal.h"
#include "graph/ir/registry.h"
#include "pebble/json.h"

/* The text handed out sits after a header that says how to free it: it comes from the
 * graph's allocator, and pbl_json_free gets only the pointer. */
typedef struct text_head {
    pbl_allocator hook;   /* zeroed: malloc/free */
    size_t        bytes;  /* the whole block, header included */
} text_head;

/* A growing text; `failed` is sticky so a whole document can be written and checked once. */
typedef struct text {
    pbl__mem m;        /* the graph's hook, counted here: the graph is only read */
    char  *block;      /* a text_head, then cap bytes of text */
    char  *p;
    size_t len, cap;
    int    failed;     /* out of memory */
    const char *bad;   /* a string that is not UTF-8, else NULL */
} text;

static void text_drop(text *t)
{
    pbl__mem_free(&t->m, t->block, sizeof(text_head) + t->cap);
    t->block = t->p = NULL;
}

static void put(text *t, const char *s, size_t n)
{
    if (t->failed)
        return;
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 4096;
        while (cap < t->len + n + 1)
            cap *= 2;
        char *q = pbl__mem_resize(&t->m, t->block, t->block ? sizeof(text_head) + t->cap : 0, sizeof(text_head) + cap);
        if (!q) {
            t->failed = 1;
            return;
        }
        t->block = q;
        t->p = q + sizeof(text_head);
        t->cap = cap;
    }
    memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = '\0';
}

static void puts_(text *t, const char *s) { put(t, s, strlen(s)); }

static void putf(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(text *t, const char *fmt, ...)
{
    char buf[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0)
        put(t, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* Length of the UTF-8 sequence starting at s (as JSON requires: no overlongs, no surrogates,
 * nothing past U+10FFFF), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t n;
    unsigned cp;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    for (size_t k = 1; k < n; k++) {
        if ((s[k] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[k] & 0x3f);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return n;
}

static void put_string(text *t, const char *s)
{
    put(t, "\"", 1);
    const unsigned char *u = (const unsigned char *)s;
    while (*u) {
        unsigned char c = *u;
        if (c == '"' || c == '\\') {
            char e[2] = { '\\', (char)c };
            put(t, e, 2);
            u++;
        } else if (c < 0x20) {
            static const char *const short_esc[0x20] = { ['\b'] = "\\b", ['\f'] = "\\f", ['\n'] = "\\n",
                                                         ['\r'] = "\\r", ['\t'] = "\\t" };
            if (short_esc[c])
                puts_(t, short_esc[c]);
            else
                putf(t, "\\u%04x", c);
            u++;
        } else {
            size_t n = utf8_len(u);
            if (n == 0) {
                if (!t->bad)
                    t->bad = s;
                u++;
                continue;
            }
            if (n == 2 && u[0] == 0xc2 && u[1] < 0xa0) /* a C1 control (U+009B is CSI): escaped, */
                putf(t, "\\u%04x", u[1]);              /* so `export --json -` is terminal-safe */
            else
                put(t, (const char *)u, n);
            u += n;
        }
    }
    put(t, "\"", 1);
}

/* The shortest %g form that reads back as exactly x (bit for bit, so -0.0 stays -0.0), with
 * ".0" added when it would otherwise read as an integer. JSON has no infinities or NaN:
 * those are the strings "inf", "-inf", "nan". */
static void put_double(text *t, double x)
{
    if (isnan(x)) {
        puts_(t, "\"nan\"");
        return;
    }
    if (isinf(x)) {
        puts_(t, x > 0 ? "\"inf\"" : "\"-inf\"");
        return;
    }
    char buf[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, x);
        double back = strtod(buf, NULL);
        if (memcmp(&back, &x, sizeof x) == 0)
            break;
    }
    /* under a locale whose decimal point is not '.', %g wrote that; JSON wants '.' */
    for (char *c = buf; *c; c++)
        if (!((*c >= '0' && *c <= '9') || *c == 'e' || *c == 'E' || *c == '+' || *c == '-'))
            *c = '.';
    puts_(t, buf);
    if (!strpbrk(buf, ".eE"))
        puts_(t, ".0");
}

static void put_shape(text *t, const pbl_shape *s)
{
    put(t, "[", 1);
    for (int32_t d = 0; d < s->ndim; d++)
        putf(t, "%s%lld", d ? ", " : "", (long long)s->dim[d]);
    put(t, "]", 1);
}

static void put_variable(text *t, const pbl_graph *g, const pbl__value *v, int32_t after_nodes)
{
    puts_(t, "{\"name\": ");
    put_string(t, v->name);
    putf(t, ", \"kind\": \"%s\", \"dtype\": \"%s\", \"shape\": ", pbl_value_kind_name(v->kind),
         pbl_dtype_name(v->meta.dtype));
    put_shape(t, &v->meta.shape);
    if (v->kind == PBL_VALUE_SCALAR)
        putf(t, ", \"value\": %.17g", v->initial);
    if (after_nodes > 0)
        putf(t, ", \"after_nodes\": %d", (int)after_nodes);
    if (v->is_backward)
        puts_(t, ", \"backward\": true");
    put(t, "}", 1);
}

static void put_node(text *t, const pbl_graph *g, const pbl__node *n)
{
    const pbl__op *op = pbl__op_get(n->op);
    puts_(t, "{\"name\": ");
    put_string(t, n->name);
    putf(t, ", \"op\": \"%s\", \"inputs\": [", op->name);
    for (int32_t i = 0; i < n->n_in; i++) {
        if (i)
            puts_(t, ", ");
        put_string(t, g->values[n->in[i]].name);
    }
    put(t, "]", 1);
    /* Only the attributes the builder was given: the others keep following the op's
     * defaults, and a reload marks the same ones as given. */
    int any = 0;
    for (int32_t k = 0; k < op->n_attrs; k++) {
        const pbl__attr_val *a = &n->attr[k];
        if (!a->set)
            continue;
        puts_(t, any ? ", " : ", \"attrs\": {");
        any = 1;
        put_string(t, op->attrs[k].name);
        puts_(t, ": ");
        if (op->attrs[k].type == PBL_ATTR_INT) {
            putf(t, "%lld", (long long)a->i);
        } else if (op->attrs[k].type == PBL_ATTR_FLOAT) {
            put_double(t, a->f);
        } else {
            put(t, "[", 1);
            for (int32_t j = 0; j < a->n_ints; j++)
                putf(t, "%s%lld", j ? ", " : "", (long long)a->ints[j]);
            put(t, "]", 1);
        }
    }
    if (any)
        put(t, "}", 1);
    puts_(t, ", \"shapes\": [");
    for (int32_t k = 0; k < n->n_out; k++) {
        if (k)
            puts_(t, ", ");
        put_shape(t, &g->values[n->out[k]].meta.shape);
    }
    puts_(t, "], \"dtypes\": [");
    for (int32_t k = 0; k < n->n_out; k++)
        putf(t, "%s\"%s\"", k ? ", " : "", pbl_dtype_name(g->values[n->out[k]].meta.dtype));
    put(t, "]", 1);
    if (n->is_backward)
        puts_(t, ", \"backward\": true");
    put(t, "}", 1);
}

PBL__API pbl_status pbl_graph_to_json(const pbl_graph *g, char **out, size_t *len, char *err, size_t errlen)
{
    if (out)
        *out = NULL;
    if (len)
        *len = 0;
    if (!g || !out)
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "pbl_graph_to_json: no graph or no place for the text");
    text t = { 0 };
    pbl__mem_init(&t.m, &g->mem.hook);
    putf(&t, "{\n  \"format\": \"pebble-graph\",\n  \"version\": \"%d.%d\",\n", PBL_JSON_VERSION_MAJOR,
         PBL_JSON_VERSION_MINOR);
    if (g->has_gradient)
        puts_(&t, "  \"gradient\": true,\n");

    /* Variables in id order; each remembers how many nodes existed when it was made (the
     * nodes whose outputs come before it), so a reload gives every value its old id. */
    puts_(&t, "  \"variables\": [");
    int32_t nodes_before = 0, n_vars = 0;
    for (pbl_value v = 0; v < g->n_values; v++) {
        const pbl__value *x = &g->values[v];
        if (x->producer != PBL_NONE) {
            nodes_before = x->producer + 1;
            continue;
        }
        puts_(&t, n_vars++ ? ",\n    " : "\n    ");
        put_variable(&t, g, x, nodes_before);
    }
    puts_(&t, n_vars ? "\n  ],\n" : "],\n");

    puts_(&t, "  \"nodes\": [");
    for (pbl_node i = 0; i < g->n_nodes; i++) {
        puts_(&t, i ? ",\n    " : "\n    ");
        put_node(&t, g, &g->nodes[i]);
    }
    puts_(&t, g->n_nodes ? "\n  ],\n" : "],\n");

    puts_(&t, "  \"outputs\": [");
    for (int32_t i = 0; i < g->n_outputs; i++) {
        puts_(&t, i ? ",\n    {\"name\": " : "\n    {\"name\": ");
        put_string(&t, g->outputs[i].name);
        puts_(&t, ", \"value\": ");
        put_string(&t, g->values[g->outputs[i].value].name);
        put(&t, "}", 1);
    }
    puts_(&t, g->n_outputs ? "\n  ]\n}\n" : "]\n}\n");

    if (t.failed) {
        text_drop(&t);
        return pbl__errf(err, errlen, PBL_ERR_NOMEM, "graph to JSON: out of memory (%zu bytes of text written)", t.len);
    }
    if (t.bad) {
        char shown[48];
        size_t k = 0;
        for (; t.bad[k] && k < 40; k++)
            shown[k] = (unsigned char)t.bad[k] >= 0x20 && (unsigned char)t.bad[k] < 0x7f ? t.bad[k] : '?';
        shown[k] = '\0';
        text_drop(&t);
        return pbl__errf(err, errlen, PBL_ERR_UNSUPPORTED, "graph to JSON: the name '%s' is not valid UTF-8, which JSON cannot hold",
                   shown);
    }
    text_head *h = (text_head *)t.block;
    h->hook = t.m.hook;
    h->bytes = sizeof *h + t.cap;
    *out = t.p;
    if (len)
        *len = t.len;
    return PBL_OK;
}

PBL__API void pbl_json_free(char *text_)
{
    if (!text_)
        return;
    text_head *h = (text_head *)(text_ - sizeof(text_head));
    pbl__mem m;
    pbl__mem_init(&m, &h->hook);
    m.live = h->bytes; /* a fresh count that holds just this block */
    pbl__mem_free(&m, h, h->bytes);
}

PBL__API pbl_status pbl_graph_save_json(const pbl_graph *g, const char *path, char *err, size_t errlen)
{
    if (!path || !*path)
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "save JSON: no file name");
    char *body = NULL;
    size_t n = 0;
    pbl_status s = pbl_graph_to_json(g, &body, &n, err, errlen);
    if (s != PBL_OK)
        return s;
    pbl__file_out o;
    s = pbl__file_out_open(&o, path, NULL, err, errlen);
    if (s == PBL_OK) {
        errno = 0;
        int ok = fwrite(body, 1, n, o.f) == n;
        if (!ok)
            s = pbl__errf(err, errlen, PBL_ERR_IO, "%s: writing: %s", path, strerror(errno ? errno : EIO));
        pbl_status c = pbl__file_out_close(&o, ok, err, errlen);
        if (s == PBL_OK)
            s = c;
    }
    pbl_json_free(body);
    return s;
}
