/* Multi-layer perceptrons on 28x28 images: the demo MLP and a deep, narrow one. */
#include <stdio.h>

#include "layers.h"

/* x: [batch, 784] -> fc+relu per hidden layer -> logits: [batch, 10]. Names as in
 * examples/train_mlp ("fc1/w", "fc1/b"), so its checkpoints load into this graph. */
static void mlp(zl *b, int64_t batch, const int64_t *hidden, int n_hidden)
{
    pbl_value h = zl_var(b, "x", PBL_VALUE_INPUT, PBL_F32, PBL_SHAPE(batch, 784));
    int64_t in = 784;
    for (int l = 0; l <= n_hidden; l++) {
        int64_t out = l < n_hidden ? hidden[l] : 10;
        char w[32], bias[32], fc[32], relu[32];
        snprintf(w, sizeof w, "fc%d/w", l + 1);
        snprintf(bias, sizeof bias, "fc%d/b", l + 1);
        snprintf(fc, sizeof fc, "fc%d", l + 1);
        snprintf(relu, sizeof relu, "relu%d", l + 1);
        pbl_value in3[] = { h, zl_param(b, w, PBL_SHAPE(out, in)), zl_param(b, bias, PBL_SHAPE(out)) };
        h = zl_node(b, "fully_connected", fc, in3, 3, NULL, 0, NULL);
        if (l < n_hidden)
            h = zl_unary(b, "relu", h, relu);
        in = out;
    }
    zl_output(b, "logits", h);
    if (b->training)
        zl_cross_entropy(b, h, "labels");
}

void zoo_mlp(zl *b, int64_t batch)
{
    static const int64_t hidden[] = { 256, 128 };
    b->opt = pbl_optimizer_options_default(PBL_OPTIM_ADAM);
    b->opt.lr = 1e-3;
    mlp(b, batch, hidden, 2);
}

void zoo_mlp50(zl *b, int64_t batch)
{
    int64_t hidden[49];
    for (int i = 0; i < 49; i++)
        hidden[i] = 512;
    b->opt = pbl_optimizer_options_default(PBL_OPTIM_SGD_MOMENTUM);
    b->opt.lr = 0.01;
    mlp(b, batch, hidden, 49);
}

/* Deep and narrow with a wide batch: activations, not weights, fill its memory (the
 * recomputation benchmark's model: bench/remat_bench.c). */
void zoo_mlp100(zl *b, int64_t batch)
{
    int64_t hidden[99];
    for (int i = 0; i < 99; i++)
        hidden[i] = 128;
    b->opt = pbl_optimizer_options_default(PBL_OPTIM_SGD_MOMENTUM);
    b->opt.lr = 0.01;
    mlp(b, batch, hidden, 99);
}
