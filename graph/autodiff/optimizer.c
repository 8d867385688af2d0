/* pbl_graph_add_optimizer: one update node per parameter, with its state variables. */
#include <stdio.h>

#include "graph/ir/graph_internal.h"
#include "pebble/autodiff.h"

PBL__API pbl_optimizer_options pbl_optimizer_options_default(pbl_optimizer_kind kind)
{
    pbl_optimizer_options o = { .kind = kind, .lr = kind == PBL_OPTIM_ADAM ? 1e-3 : 1e-2, .momentum = 0.9,
                                .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.0 };
    return o;
}

/* A zeroed state variable "<param>/<what>" shaped like the parameter (or [1] for t). */
static pbl_status add_state(pbl_graph *g, pbl_value param, const char *what, int scalar, pbl_value *out)
{
    char name[160];
    snprintf(name, sizeof name, "%s/%s", g->values[param].name, what);
    pbl_shape shape = scalar ? PBL_SHAPE(1) : g->values[param].meta.shape;
    return pbl_graph_add_variable(g, name, PBL_VALUE_STATE, PBL_F32, shape, out);
}

static pbl_status add_update(pbl_graph *g, const pbl_optimizer_options *o, pbl_value p, pbl_value gr)
{
    pbl_value in[5] = { p, gr };
    int32_t n_in = 2;
    pbl_attr at[5];
    int32_t n_at = 0;
    const char *op = "sgd";
    pbl_status s = PBL_OK;
    at[n_at++] = PBL_ATTR_FLOAT("lr", o->lr);
    switch (o->kind) {
    case PBL_OPTIM_SGD:
        break;
    case PBL_OPTIM_SGD_MOMENTUM:
        op = "sgd_momentum";
        s = add_state(g, p, "m", 0, &in[n_in++]);
        at[n_at++] = PBL_ATTR_FLOAT("momentum", o->momentum);
        break;
    case PBL_OPTIM_ADAM:
        op = "adam";
        s = add_state(g, p, "m", 0, &in[n_in++]);
        if (s == PBL_OK)
            s = add_state(g, p, "v", 0, &in[n_in++]);
        if (s == PBL_OK)
            s = add_state(g, p, "t", 1, &in[n_in++]);
        at[n_at++] = PBL_ATTR_FLOAT("beta1", o->beta1);
        at[n_at++] = PBL_ATTR_FLOAT("beta2", o->beta2);
        at[n_at++] = PBL_ATTR_FLOAT("eps", o->eps);
        break;
    default:
        return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "optimizer: unknown kind %d", (int)o->kind);
    }
    if (s != PBL_OK)
        return s;
    at[n_at++] = PBL_ATTR_FLOAT("weight_decay", o->weight_decay);
    char name[160];
    snprintf(name, sizeof name, "%s/update", g->values[p].name);
    pbl_node_desc d = { .op = op, .name = name, .inputs = in, .n_inputs = n_in, .attrs = at, .n_attrs = n_at };
    return pbl_graph_add_node(g, &d, NULL, NULL);
}

PBL__API pbl_status pbl_graph_add_optimizer(pbl_graph *g, const pbl_optimizer_options *opt,
                                            const pbl_value *params, const pbl_value *grads, int32_t n)
{
    if (!g)
        return PBL_ERR_INVALID_ARG;
    if (!opt || n < 0 || (n > 0 && (!params || !grads)))
        return pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "optimizer: bad arguments");
    int32_t nv0 = g->n_values, nn0 = g->n_nodes;
    pbl_status s = PBL_OK;
    for (int32_t i = 0; i < n && s == PBL_OK; i++) {
        if (params[i] < 0 || params[i] >= g->n_values)
            s = pbl__graph_fail(g, PBL_ERR_DANGLING, "optimizer: params[%d] = %d names no value", (int)i, (int)params[i]);
        else if (g->values[params[i]].kind != PBL_VALUE_PARAM)
            s = pbl__graph_fail(g, PBL_ERR_INVALID_ARG, "optimizer: '%s' is a %s, not a parameter",
                                g->values[params[i]].name, pbl_value_kind_name(g->values[params[i]].kind));
        else if (grads[i] != PBL_NONE)
            s = add_update(g, opt, params[i], grads[i]);
    }
    if (s != PBL_OK)
        pbl__graph_truncate(g, nv0, nn0);
    return s;
}
