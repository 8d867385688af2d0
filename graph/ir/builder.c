/* The one-line helpers of pebble/builder.h: pbl_graph_add_node with a sticky first error. */
#include <stdio.h>

#include "graph/ir/graph_internal.h"
#include "pebble/builder.h"

PBL__API pbl_status pbl_graph_build_status(const pbl_graph *g)
{
    return g ? g->build_status : PBL_ERR_INVALID_ARG;
}

PBL__API void pbl_graph_build_reset(pbl_graph *g)
{
    if (g)
        g->build_status = PBL_OK;
}

static int stopped(pbl_graph *g)
{
    return !g || g->build_status != PBL_OK;
}

static pbl_value note(pbl_graph *g, pbl_status s, pbl_value v)
{
    if (s != PBL_OK) {
        g->build_status = s;
        return PBL_NONE;
    }
    return v;
}

static pbl_value node(pbl_graph *g, const char *op, const pbl_value *in, int32_t n_in,
                      const pbl_attr *at, int32_t n_at)
{
    if (stopped(g))
        return PBL_NONE;
    pbl_value out[4] = { PBL_NONE, PBL_NONE, PBL_NONE, PBL_NONE };
    pbl_node_desc d = { .op = op, .inputs = in, .n_inputs = n_in, .attrs = at, .n_attrs = n_at };
    pbl_status s = pbl_graph_add_node(g, &d, NULL, out);
    return note(g, s, out[0]);
}

static pbl_value variable(pbl_graph *g, const char *name, pbl_value_kind kind, pbl_dtype dtype, pbl_shape shape)
{
    if (stopped(g))
        return PBL_NONE;
    pbl_value v = PBL_NONE;
    pbl_status s = pbl_graph_add_variable(g, name, kind, dtype, shape, &v);
    return note(g, s, v);
}

PBL__API pbl_value pbl_input(pbl_graph *g, const char *name, pbl_shape shape)
{
    return variable(g, name, PBL_VALUE_INPUT, PBL_F32, shape);
}

PBL__API pbl_value pbl_param(pbl_graph *g, const char *name, pbl_shape shape)
{
    return variable(g, name, PBL_VALUE_PARAM, PBL_F32, shape);
}

PBL__API pbl_value pbl_label(pbl_graph *g, const char *name, pbl_dtype dtype, pbl_shape shape)
{
    return variable(g, name, PBL_VALUE_LABEL, dtype, shape);
}

PBL__API pbl_value pbl_fully_connected(pbl_graph *g, pbl_value x, pbl_value w, pbl_value b)
{
    pbl_value in[] = { x, w, b };
    return node(g, "fully_connected", in, b == PBL_NONE ? 2 : 3, NULL, 0);
}

PBL__API pbl_value pbl_matmul(pbl_graph *g, pbl_value a, pbl_value b, int trans_a, int trans_b)
{
    pbl_attr at[] = { PBL_ATTR_INT("trans_a", trans_a), PBL_ATTR_INT("trans_b", trans_b) };
    return node(g, "matmul", (pbl_value[]){ a, b }, 2, at, 2);
}

#define BINARY(fn, op)                                                        \
    PBL__API pbl_value fn(pbl_graph *g, pbl_value a, pbl_value b)             \
    {                                                                         \
        return node(g, op, (pbl_value[]){ a, b }, 2, NULL, 0);                \
    }
#define UNARY(fn, op)                                                         \
    PBL__API pbl_value fn(pbl_graph *g, pbl_value x)                          \
    {                                                                         \
        return node(g, op, &x, 1, NULL, 0);                                   \
    }

BINARY(pbl_add, "add")
BINARY(pbl_sub, "sub")
BINARY(pbl_mul, "mul")
BINARY(pbl_softmax_cross_entropy, "softmax_cross_entropy")
BINARY(pbl_mse_loss, "mse_loss")
UNARY(pbl_relu, "relu")
UNARY(pbl_sigmoid, "sigmoid")
UNARY(pbl_tanh, "tanh")
UNARY(pbl_gelu, "gelu")
UNARY(pbl_softmax, "softmax")
UNARY(pbl_log_softmax, "log_softmax")
UNARY(pbl_copy, "copy")

static pbl_value reduction(pbl_graph *g, const char *op, pbl_value x, const int64_t *axes, int32_t n_axes, int keepdims)
{
    pbl_attr at[] = { PBL_ATTR_INTS("axes", axes, n_axes), PBL_ATTR_INT("keepdims", keepdims != 0) };
    return node(g, op, &x, 1, at, 2);
}

PBL__API pbl_value pbl_sum(pbl_graph *g, pbl_value x, const int64_t *axes, int32_t n_axes, int keepdims)
{
    return reduction(g, "sum", x, axes, n_axes, keepdims);
}

PBL__API pbl_value pbl_mean(pbl_graph *g, pbl_value x, const int64_t *axes, int32_t n_axes, int keepdims)
{
    return reduction(g, "mean", x, axes, n_axes, keepdims);
}

PBL__API pbl_value pbl_reshape(pbl_graph *g, pbl_value x, pbl_shape shape)
{
    if (shape.ndim < 0 || shape.ndim > PBL_MAX_DIMS) {
        if (!stopped(g))
            note(g, pbl__graph_fail(g, PBL_ERR_ATTR, "reshape: rank must be 0..%d", PBL_MAX_DIMS), PBL_NONE);
        return PBL_NONE;
    }
    pbl_attr at = PBL_ATTR_INTS("shape", shape.dim, shape.ndim);
    return node(g, "reshape", &x, 1, &at, 1);
}

PBL__API pbl_value pbl_flatten(pbl_graph *g, pbl_value x, int32_t axis)
{
    pbl_attr at = PBL_ATTR_INT("axis", axis);
    return node(g, "flatten", &x, 1, &at, 1);
}

static pbl_value dropout(pbl_graph *g, pbl_value x, double p, uint64_t seed, pbl_value training, pbl_value *mask)
{
    if (mask)
        *mask = PBL_NONE;
    if (stopped(g))
        return PBL_NONE;
    pbl_attr at[] = { PBL_ATTR_FLOAT("p", p), PBL_ATTR_INT("seed", (int64_t)seed) };
    pbl_value out[2] = { PBL_NONE, PBL_NONE }, in[2] = { x, training };
    pbl_node_desc d = { .op = "dropout", .inputs = in, .n_inputs = training == PBL_NONE ? 1 : 2, .attrs = at,
                        .n_attrs = 2 };
    pbl_status s = pbl_graph_add_node(g, &d, NULL, out);
    if (s == PBL_OK && mask)
        *mask = out[1];
    return note(g, s, out[0]);
}

PBL__API pbl_value pbl_dropout(pbl_graph *g, pbl_value x, double p, uint64_t seed, pbl_value *mask)
{
    return dropout(g, x, p, seed, PBL_NONE, mask);
}

PBL__API pbl_value pbl_dropout_switched(pbl_graph *g, pbl_value x, double p, uint64_t seed, pbl_value training,
                                        pbl_value *mask)
{
    if (training == PBL_NONE) { /* would silently build an always-training dropout */
        if (mask)
            *mask = PBL_NONE;
        return note(g, pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "dropout: no training scalar given"), PBL_NONE);
    }
    return dropout(g, x, p, seed, training, mask);
}

/* The state variable "<name>/<what>" of `shape`. */
static pbl_status bn_state(pbl_graph *g, const char *name, const char *what, pbl_shape shape, pbl_value *out)
{
    char full[192];
    snprintf(full, sizeof full, "%s/%s", name, what);
    return pbl_graph_add_variable(g, full, PBL_VALUE_STATE, PBL_F32, shape, out);
}

static pbl_status batch_norm_switched(pbl_graph *g, const char *name, pbl_value x, pbl_value scale, pbl_value bias,
                                      pbl_value training, double momentum, double eps, pbl_value *y)
{
    if (!name || !*name)
        return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "batch_norm: a name is needed (it names the running statistics)");
    if (x < 0 || x >= g->n_values || g->values[x].meta.shape.ndim < 2)
        return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "batch_norm '%s': x must be a value [N, C, ...]", name);
    if (training == PBL_NONE)
        return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "batch_norm '%s': no training scalar given", name);
    pbl_shape c = PBL_SHAPE(g->values[x].meta.shape.dim[1]);
    int64_t set = pbl_shape_numel(&g->values[x].meta.shape) / c.dim[0];
    pbl_value rm, rv, count;
    pbl_status s = bn_state(g, name, "running_mean", c, &rm);
    if (s == PBL_OK)
        s = bn_state(g, name, "running_var", c, &rv);
    if (s == PBL_OK)
        s = bn_state(g, name, "count", PBL_SHAPE(1), &count);
    if (s != PBL_OK)
        return s;
    pbl_attr eps_at[] = { PBL_ATTR_FLOAT("eps", eps) };
    pbl_value in[6] = { x, scale, bias, rm, rv, training }, out[3];
    pbl_node_desc d = { .op = "batch_norm", .name = name, .inputs = in, .n_inputs = 6, .attrs = eps_at, .n_attrs = 1 };
    if ((s = pbl_graph_add_node(g, &d, NULL, out)) != PBL_OK)
        return s;
    char uname[192];
    snprintf(uname, sizeof uname, "%s/update", name);
    pbl_attr at[] = { PBL_ATTR_FLOAT("momentum", momentum), PBL_ATTR_FLOAT("eps", eps), PBL_ATTR_INT("set_size", set) };
    pbl_value uin[6] = { out[1], out[2], rm, rv, count, training };
    pbl_node_desc u = { .op = "batch_norm_update", .name = uname, .inputs = uin, .n_inputs = 6, .attrs = at, .n_attrs = 3 };
    if ((s = pbl_graph_add_node(g, &u, NULL, NULL)) != PBL_OK)
        return s;
    *y = out[0];
    return PBL_OK;
}

PBL__API pbl_value pbl_batch_norm_switched(pbl_graph *g, const char *name, pbl_value x, pbl_value scale, pbl_value bias,
                                           pbl_value training, double momentum, double eps)
{
    if (stopped(g))
        return PBL_NONE;
    int32_t nv0 = g->n_values, nn0 = g->n_nodes;
    pbl_value y = PBL_NONE;
    pbl_status s = batch_norm_switched(g, name, x, scale, bias, training, momentum, eps, &y);
    if (s != PBL_OK)
        pbl__graph_truncate(g, nv0, nn0);
    return note(g, s, y);
}
