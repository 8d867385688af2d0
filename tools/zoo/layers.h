/*
 * What the zoo's models share: a builder with a sticky first error and a name scope, and
 * layer helpers (convolution, normalisation, fully connected, ...) that create their
 * parameters and name everything "<scope>.<layer>" ("layer3.2.conv1", weight
 * "layer3.2.conv1.weight"). Once a call fails every later call returns PBL_NONE and does
 * nothing, so a model is written straight through and checked once.
 */
#ifndef PEBBLE_ZOO_LAYERS_H
#define PEBBLE_ZOO_LAYERS_H

#include "zoo.h"

typedef struct zl {
    pbl_graph  *g;
    int         training;     /* build the training form: dropout, loss */
    pbl_status  status;       /* the first failure, else PBL_OK */
    char        msg[512];     /* what failed */
    char        scope[96];    /* name prefix ("" for none) */
    char        name[2][192]; /* the last two names made (a node and its parameter) */
    int         which;
    pbl_value  *params;       /* every parameter, in creation order */
    int32_t     n_params, cap_params;
    int64_t     next_seed;    /* dropout seeds: one per node */
    pbl_value   loss;         /* the training form's scalar loss */
    pbl_optimizer_options opt;
} zl;

/* Records the first failure (printf-style); returns PBL_NONE. */
pbl_value zl_fail(zl *b, pbl_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Sets the name scope (printf-style); zl_unscope clears it. */
void zl_scope(zl *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void zl_unscope(zl *b);
/* "<scope>.<local>" (or local alone outside a scope), valid until two more names are made. */
const char *zl_name(zl *b, const char *local);

pbl_shape zl_shape(zl *b, pbl_value v);

/* A variable with the name as given (not scoped). */
pbl_value zl_var(zl *b, const char *name, pbl_value_kind kind, pbl_dtype dtype, pbl_shape shape);
/* A parameter "<scope>.<local>", remembered for the gradient and the optimizer. */
pbl_value zl_param(zl *b, const char *local, pbl_shape shape);
/* One node "<scope>.<local>"; returns its first output, and all of them in outs (may be NULL). */
pbl_value zl_node(zl *b, const char *op, const char *local, const pbl_value *in, int32_t n_in,
                  const pbl_attr *attrs, int32_t n_attrs, pbl_value *outs);
void      zl_output(zl *b, const char *name, pbl_value v);

/* Layers. Parameters of layer L are "L.weight" and "L.bias". */
/* x: [N, C, H, W] -> [N, cout, H', W']: a k×k convolution without bias */
pbl_value zl_conv(zl *b, pbl_value x, const char *local, int64_t cout, int64_t k, int64_t stride,
                  int64_t pad, int64_t groups);
pbl_value zl_batch_norm(zl *b, pbl_value x, const char *local);
/* x: [N, in] -> [N, out], with bias */
pbl_value zl_fc(zl *b, pbl_value x, const char *local, int64_t out);
/* over the last dim, with gamma ("L.weight") and beta ("L.bias") */
pbl_value zl_layer_norm(zl *b, pbl_value x, const char *local, double eps);
pbl_value zl_unary(zl *b, const char *op, pbl_value x, const char *local);
pbl_value zl_binary(zl *b, const char *op, pbl_value x, pbl_value y, const char *local);
pbl_value zl_reshape(zl *b, pbl_value x, const char *local, pbl_shape shape);
pbl_value zl_transpose(zl *b, pbl_value x, const char *local, const int64_t *perm, int32_t n);
/* dropout with probability p in the training form; x itself in the inference form */
pbl_value zl_dropout(zl *b, pbl_value x, const char *local, double p);
/* the training form's loss: mean cross-entropy of logits [N, C] against labels [N] i32 named
 * label_name; sets b->loss and the output "loss" */
void      zl_cross_entropy(zl *b, pbl_value logits, const char *label_name);

/* The models: each builds its forward pass (and in the training form its loss, setting
 * b->loss and b->opt), and names its outputs. */
void zoo_mlp(zl *b, int64_t batch);
void zoo_mlp50(zl *b, int64_t batch);
void zoo_mlp100(zl *b, int64_t batch);
void zoo_resnet50(zl *b, int64_t batch);
void zoo_mobilenet_v2(zl *b, int64_t batch);
void zoo_bert_base(zl *b, int64_t batch);

#endif
