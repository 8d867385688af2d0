/* MobileNet v2, width 1.0, for ImageNet (Sandler et al. 2018, table 2). Relu stands in for
 * relu6: the same shapes and the same memory, and pebble has no relu6. Names: "stem.conv",
 * "block5.expand.conv", "block5.dw.conv", "block5.project.bn", "block5.add", "head.conv",
 * "classifier.fc". */
#include <stdio.h>

#include "layers.h"

static pbl_value conv_bn_relu(zl *b, pbl_value x, const char *part, int64_t cout, int64_t k, int64_t stride,
                              int64_t groups, int relu)
{
    char conv[48], bn[48], act[48];
    snprintf(conv, sizeof conv, "%s.conv", part);
    snprintf(bn, sizeof bn, "%s.bn", part);
    snprintf(act, sizeof act, "%s.relu", part);
    x = zl_batch_norm(b, zl_conv(b, x, conv, cout, k, stride, k / 2, groups), bn);
    return relu ? zl_unary(b, "relu", x, act) : x;
}

// x: [N, cin, H, W] -> expand (1x1, cin·t) -> depthwise 3x3 (stride) -> project (1x1, cout)
static pbl_value inverted_residual(zl *b, pbl_value x, int64_t cin, int64_t t, int64_t cout, int64_t stride)
{
    pbl_value y = x;
    if (t != 1)
        y = conv_bn_relu(b, y, "expand", cin * t, 1, 1, 1, 1);
    y = conv_bn_relu(b, y, "dw", cin * t, 3, stride, cin * t, 1);
    y = conv_bn_relu(b, y, "project", cout, 1, 1, 1, 0);
    return stride == 1 && cin == cout ? zl_binary(b, "add", y, x, "add") : y;
}

void zoo_mobilenet_v2(zl *b, int64_t batch)
{
    /* expansion t, output channels c, repeats n, first stride s */
    static const struct { int64_t t, c, n, s; } table[] = {
        { 1, 16, 1, 1 }, { 6, 24, 2, 2 }, { 6, 32, 3, 2 }, { 6, 64, 4, 2 },
        { 6, 96, 3, 1 }, { 6, 160, 3, 2 }, { 6, 320, 1, 1 },
    };
    b->opt = pbl_optimizer_options_default(PBL_OPTIM_SGD_MOMENTUM);
    b->opt.lr = 0.045;
    b->opt.weight_decay = 4e-5;

    // x: [N, 3, 224, 224] -> stem -> [N, 32, 112, 112]
    pbl_value x = zl_var(b, "x", PBL_VALUE_INPUT, PBL_F32, PBL_SHAPE(batch, 3, 224, 224));
    zl_unscope(b);
    x = conv_bn_relu(b, x, "stem", 32, 3, 2, 1, 1);

    // 17 blocks -> [N, 320, 7, 7]
    int64_t cin = 32;
    int block = 0;
    for (int r = 0; r < (int)(sizeof table / sizeof table[0]); r++)
        for (int64_t i = 0; i < table[r].n; i++) {
            zl_scope(b, "block%d", ++block);
            x = inverted_residual(b, x, cin, table[r].t, table[r].c, i == 0 ? table[r].s : 1);
            cin = table[r].c;
        }
    zl_unscope(b);

    // -> [N, 1280, 7, 7] -> [N, 1280, 1, 1] -> [N, 1280] -> logits [N, 1000]
    x = conv_bn_relu(b, x, "head", 1280, 1, 1, 1, 1);
    x = zl_unary(b, "flatten", zl_unary(b, "global_avg_pool", x, "avgpool"), "flatten");
    x = zl_fc(b, zl_dropout(b, x, "classifier.dropout", 0.2), "classifier.fc", 1000);
    zl_output(b, "logits", x);
    if (b->training)
        zl_cross_entropy(b, x, "labels");
}
