/* The model table and zoo_build: forward pass from the model, then for the training form the
 * gradient with respect to every parameter and the optimizer updates. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"

typedef struct model {
    const char *name;
    int64_t     batch;  /* default */
    void      (*build)(zl *b, int64_t batch);
    const char *describe, *describe_train;
} model;

static const model models[] = {
    { "mlp", 128, zoo_mlp,
      "MLP 784-256-128-10 with relu, batch 128: the model of examples/train_mlp; output logits",
      "mlp + softmax cross-entropy, backward, Adam (lr 1e-3); runs on the CPU executor" },
    { "mlp50", 128, zoo_mlp50,
      "deep MLP: 784 -> 49 hidden layers of 512 (relu) -> 10, 50 fully connected layers, batch 128",
      "mlp50 + softmax cross-entropy, backward, SGD with momentum 0.9 (lr 0.01)" },
    { "mlp100", 1024, zoo_mlp100,
      "deep MLP with a wide batch: 784 -> 99 hidden layers of 128 (relu) -> 10, 100 fully connected layers, "
      "batch 1024 (activations outweigh weights 8x)",
      "mlp100 + softmax cross-entropy, backward, SGD with momentum 0.9 (lr 0.01)" },
    { "resnet50", 32, zoo_resnet50,
      "ResNet-50 v1.5 (stride on the 3x3 conv), 224x224x3, bottlenecks [3,4,6,3], batch_norm + relu, batch 32",
      "resnet50 + softmax cross-entropy, backward, SGD with momentum 0.9 (lr 0.1, weight decay 1e-4)" },
    { "mobilenet_v2", 32, zoo_mobilenet_v2,
      "MobileNet v2 1.0, 224x224x3, inverted residuals (relu stands in for relu6), batch 32",
      "mobilenet_v2 + dropout 0.2 + softmax cross-entropy, backward, SGD with momentum 0.9 (lr 0.045, weight "
      "decay 4e-5)" },
    { "bert_base", 8, zoo_bert_base,
      "BERT-base encoder: 12 layers, hidden 768, 12 heads, FFN 3072 (gelu), sequence 128, batch 8; "
      "output the last hidden states",
      "bert_base + dropout 0.1 + masked-LM head (dense, gelu, layer_norm, decoder tied to the word "
      "embeddings) over all 30522 tokens with softmax cross-entropy, backward, Adam (lr 1e-4, weight decay 0.01)" },
};

enum { N_MODELS = (int)(sizeof models / sizeof models[0]) };

int zoo_count(void) { return 2 * N_MODELS; }

const char *zoo_name(int i)
{
    static const char *const names[2 * N_MODELS] = {
        "mlp", "mlp_train", "mlp50", "mlp50_train", "mlp100", "mlp100_train", "resnet50", "resnet50_train",
        "mobilenet_v2", "mobilenet_v2_train", "bert_base", "bert_base_train",
    };
    return i >= 0 && i < 2 * N_MODELS ? names[i] : NULL;
}

const char *zoo_describe(int i)
{
    if (i < 0 || i >= 2 * N_MODELS)
        return NULL;
    return i % 2 ? models[i / 2].describe_train : models[i / 2].describe;
}

/* Writes "zoo: <name>: <message>" into err. */
static pbl_status fail(char *err, size_t errlen, const char *name, pbl_status s, const char *msg)
{
    if (err && errlen)
        snprintf(err, errlen, "zoo: %s: %s", name ? name : "(null)", msg);
    return s;
}

/* Appends the backward pass and the optimizer updates for every parameter. */
static void add_training_step(zl *b)
{
    if (b->status != PBL_OK)
        return;
    pbl_value *grads = malloc((size_t)(b->n_params ? b->n_params : 1) * sizeof *grads);
    if (!grads) {
        zl_fail(b, PBL_ERR_NOMEM, "out of memory");
        return;
    }
    pbl_status s = pbl_graph_gradient(b->g, b->loss, b->params, b->n_params, grads);
    if (s == PBL_OK)
        s = pbl_graph_add_optimizer(b->g, &b->opt, b->params, grads, b->n_params);
    if (s != PBL_OK)
        zl_fail(b, s, "%s", pbl_graph_errmsg(b->g));
    free(grads);
}

pbl_status zoo_build(const char *name, int64_t batch, pbl_graph **out, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (out)
        *out = NULL;
    if (!name || !out)
        return fail(err, errlen, name, PBL_ERR_INVALID_ARG, "name and out must not be NULL");
    if (batch < 0)
        return fail(err, errlen, name, PBL_ERR_INVALID_ARG, "batch must be positive (or 0 for the default)");
    const model *m = NULL;
    int training = 0;
    for (int i = 0; i < 2 * N_MODELS && !m; i++)
        if (strcmp(zoo_name(i), name) == 0)
            m = &models[i / 2], training = i % 2;
    if (!m) {
        char have[256] = "";
        for (int i = 0; i < 2 * N_MODELS; i++)
            snprintf(have + strlen(have), sizeof have - strlen(have), "%s%s", i ? ", " : "", zoo_name(i));
        char msg[320];
        snprintf(msg, sizeof msg, "no such model (have: %s)", have);
        return fail(err, errlen, name, PBL_ERR_NOT_FOUND, msg);
    }

    zl b = { .training = training, .loss = PBL_NONE };
    pbl_status s = pbl_graph_create(&b.g, NULL);
    if (s != PBL_OK)
        return fail(err, errlen, name, s, "out of memory");
    m->build(&b, batch ? batch : m->batch);
    if (training && b.status == PBL_OK && b.loss == PBL_NONE)
        zl_fail(&b, PBL_ERR_INVALID_ARG, "the model made no loss");
    if (training)
        add_training_step(&b);
    if (b.status == PBL_OK && (s = pbl_graph_validate(b.g)) != PBL_OK)
        zl_fail(&b, s, "%s", pbl_graph_errmsg(b.g));
    free(b.params);
    if (b.status != PBL_OK) {
        pbl_graph_destroy(b.g);
        return fail(err, errlen, name, b.status, b.msg);
    }
    *out = b.g;
    return PBL_OK;
}
