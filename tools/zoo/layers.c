/* The zoo's builder: sticky errors, name scopes, parameters, and the layers the models share. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "layers.h"

pbl_value zl_fail(zl *b, pbl_status s, const char *fmt, ...)
{
    if (b->status == PBL_OK) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(b->msg, sizeof b->msg, fmt, ap);
        va_end(ap);
        b->status = s;
    }
    return PBL_NONE;
}

void zl_scope(zl *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->scope, sizeof b->scope, fmt, ap);
    va_end(ap);
}

void zl_unscope(zl *b) { b->scope[0] = '\0'; }

const char *zl_name(zl *b, const char *local)
{
    char *n = b->name[b->which];
    b->which ^= 1;
    if (b->scope[0])
        snprintf(n, sizeof b->name[0], "%s.%s", b->scope, local);
    else
        snprintf(n, sizeof b->name[0], "%s", local);
    return n;
}

pbl_shape zl_shape(zl *b, pbl_value v)
{
    pbl_value_info vi;
    if (b->status != PBL_OK || pbl_graph_value_info(b->g, v, &vi) != PBL_OK)
        return pbl_shape_make(0, NULL);
    return vi.shape;
}

/* Copies the graph's message after a failed call. */
static pbl_value graph_fail(zl *b, pbl_status s)
{
    return zl_fail(b, s, "%s", pbl_graph_errmsg(b->g));
}

pbl_value zl_var(zl *b, const char *name, pbl_value_kind kind, pbl_dtype dtype, pbl_shape shape)
{
    if (b->status != PBL_OK)
        return PBL_NONE;
    pbl_value v;
    pbl_status s = pbl_graph_add_variable(b->g, name, kind, dtype, shape, &v);
    return s == PBL_OK ? v : graph_fail(b, s);
}

pbl_value zl_param(zl *b, const char *local, pbl_shape shape)
{
    pbl_value v = zl_var(b, zl_name(b, local), PBL_VALUE_PARAM, PBL_F32, shape);
    if (v == PBL_NONE)
        return PBL_NONE;
    if (b->n_params == b->cap_params) {
        int32_t cap = b->cap_params ? 2 * b->cap_params : 64;
        pbl_value *p = realloc(b->params, (size_t)cap * sizeof *p);
        if (!p)
            return zl_fail(b, PBL_ERR_NOMEM, "out of memory");
        b->params = p;
        b->cap_params = cap;
    }
    b->params[b->n_params++] = v;
    return v;
}

pbl_value zl_node(zl *b, const char *op, const char *local, const pbl_value *in, int32_t n_in,
                  const pbl_attr *attrs, int32_t n_attrs, pbl_value *outs)
{
    if (b->status != PBL_OK)
        return PBL_NONE;
    pbl_value o[4];
    pbl_node_desc d = { .op = op, .name = zl_name(b, local), .inputs = in, .n_inputs = n_in,
                        .attrs = attrs, .n_attrs = n_attrs };
    pbl_status s = pbl_graph_add_node(b->g, &d, NULL, outs ? outs : o);
    if (s != PBL_OK)
        return graph_fail(b, s);
    return outs ? outs[0] : o[0];
}

void zl_output(zl *b, const char *name, pbl_value v)
{
    if (b->status != PBL_OK)
        return;
    pbl_status s = pbl_graph_set_output(b->g, name, v);
    if (s != PBL_OK)
        graph_fail(b, s);
}

/* "<local>.<what>" */
static const char *sub(char *buf, size_t n, const char *local, const char *what)
{
    snprintf(buf, n, "%s.%s", local, what);
    return buf;
}

pbl_value zl_conv(zl *b, pbl_value x, const char *local, int64_t cout, int64_t k, int64_t stride,
                  int64_t pad, int64_t groups)
{
    char nm[128];
    pbl_shape xs = zl_shape(b, x);
    if (b->status != PBL_OK)
        return PBL_NONE;
    if (xs.ndim != 4 || groups < 1 || xs.dim[1] % groups)
        return zl_fail(b, PBL_ERR_SHAPE, "%s: conv input of rank %d with %lld channels, groups %lld",
                       zl_name(b, local), (int)xs.ndim, (long long)(xs.ndim > 1 ? xs.dim[1] : 0), (long long)groups);
    pbl_value w = zl_param(b, sub(nm, sizeof nm, local, "weight"), PBL_SHAPE(cout, xs.dim[1] / groups, k, k));
    pbl_attr at[] = {
        PBL_ATTR_INTS("stride", &stride, 1),
        PBL_ATTR_INTS("pad", &pad, 1),
        PBL_ATTR_INT("groups", groups),
    };
    return zl_node(b, "conv2d", local, (pbl_value[]){ x, w }, 2, at, 3, NULL);
}

pbl_value zl_batch_norm(zl *b, pbl_value x, const char *local)
{
    char nm[128];
    pbl_shape xs = zl_shape(b, x);
    if (b->status != PBL_OK)
        return PBL_NONE;
    pbl_value scale = zl_param(b, sub(nm, sizeof nm, local, "weight"), PBL_SHAPE(xs.dim[1]));
    pbl_value bias = zl_param(b, sub(nm, sizeof nm, local, "bias"), PBL_SHAPE(xs.dim[1]));
    pbl_value outs[3];
    return zl_node(b, "batch_norm", local, (pbl_value[]){ x, scale, bias }, 3, NULL, 0, outs);
}

pbl_value zl_fc(zl *b, pbl_value x, const char *local, int64_t out)
{
    char nm[128];
    pbl_shape xs = zl_shape(b, x);
    if (b->status != PBL_OK)
        return PBL_NONE;
    pbl_value w = zl_param(b, sub(nm, sizeof nm, local, "weight"), PBL_SHAPE(out, xs.dim[xs.ndim - 1]));
    pbl_value bias = zl_param(b, sub(nm, sizeof nm, local, "bias"), PBL_SHAPE(out));
    return zl_node(b, "fully_connected", local, (pbl_value[]){ x, w, bias }, 3, NULL, 0, NULL);
}

pbl_value zl_layer_norm(zl *b, pbl_value x, const char *local, double eps)
{
    char nm[128];
    pbl_shape xs = zl_shape(b, x);
    if (b->status != PBL_OK)
        return PBL_NONE;
    pbl_value gamma = zl_param(b, sub(nm, sizeof nm, local, "weight"), PBL_SHAPE(xs.dim[xs.ndim - 1]));
    pbl_value beta = zl_param(b, sub(nm, sizeof nm, local, "bias"), PBL_SHAPE(xs.dim[xs.ndim - 1]));
    pbl_value outs[3];
    pbl_attr at = PBL_ATTR_FLOAT("eps", eps);
    return zl_node(b, "layer_norm", local, (pbl_value[]){ x, gamma, beta }, 3, &at, 1, outs);
}

pbl_value zl_unary(zl *b, const char *op, pbl_value x, const char *local)
{
    return zl_node(b, op, local, &x, 1, NULL, 0, NULL);
}

pbl_value zl_binary(zl *b, const char *op, pbl_value x, pbl_value y, const char *local)
{
    return zl_node(b, op, local, (pbl_value[]){ x, y }, 2, NULL, 0, NULL);
}

pbl_value zl_reshape(zl *b, pbl_value x, const char *local, pbl_shape shape)
{
    pbl_attr at = PBL_ATTR_INTS("shape", shape.dim, shape.ndim);
    return zl_node(b, "reshape", local, &x, 1, &at, 1, NULL);
}

pbl_value zl_transpose(zl *b, pbl_value x, const char *local, const int64_t *perm, int32_t n)
{
    pbl_attr at = PBL_ATTR_INTS("perm", perm, n);
    return zl_node(b, "transpose", local, &x, 1, &at, 1, NULL);
}

pbl_value zl_dropout(zl *b, pbl_value x, const char *local, double p)
{
    if (!b->training || p <= 0)
        return x;
    pbl_attr at[] = { PBL_ATTR_FLOAT("p", p), PBL_ATTR_INT("seed", ++b->next_seed) };
    pbl_value outs[2];
    return zl_node(b, "dropout", local, &x, 1, at, 2, outs);
}

void zl_cross_entropy(zl *b, pbl_value logits, const char *label_name)
{
    pbl_shape ls = zl_shape(b, logits);
    zl_unscope(b);
    pbl_value labels = zl_var(b, label_name, PBL_VALUE_LABEL, PBL_I32, PBL_SHAPE(ls.dim[0]));
    b->loss = zl_binary(b, "softmax_cross_entropy", logits, labels, "loss");
    zl_output(b, "loss", b->loss);
}
