/* ResNet-50 v1.5 for ImageNet (He et al. 2016; v1.5 strides the 3x3 conv of a bottleneck, not
 * the first 1x1, as torchvision does). Names follow torchvision ("layer3.2.conv1",
 * "layer2.0.downsample.0"); torchvision's shared relu module becomes relu1..relu3 here. */
#include "layers.h"

static pbl_value conv_bn(zl *b, pbl_value x, const char *conv, const char *bn, int64_t cout, int64_t k,
                         int64_t stride)
{
    return zl_batch_norm(b, zl_conv(b, x, conv, cout, k, stride, k / 2, 1), bn);
}

// x: [N, cin, H, W] -> [N, 4·planes, H/stride, W/stride]
static pbl_value bottleneck(zl *b, pbl_value x, int64_t planes, int64_t stride, int downsample)
{
    pbl_value y = zl_unary(b, "relu", conv_bn(b, x, "conv1", "bn1", planes, 1, 1), "relu1");
    y = zl_unary(b, "relu", conv_bn(b, y, "conv2", "bn2", planes, 3, stride), "relu2");
    y = conv_bn(b, y, "conv3", "bn3", 4 * planes, 1, 1);
    pbl_value id = downsample ? conv_bn(b, x, "downsample.0", "downsample.1", 4 * planes, 1, stride) : x;
    return zl_unary(b, "relu", zl_binary(b, "add", y, id, "add"), "relu3");
}

void zoo_resnet50(zl *b, int64_t batch)
{
    static const struct { int64_t planes, blocks, stride; } stages[] = {
        { 64, 3, 1 }, { 128, 4, 2 }, { 256, 6, 2 }, { 512, 3, 2 },
    };
    b->opt = pbl_optimizer_options_default(PBL_OPTIM_SGD_MOMENTUM);
    b->opt.lr = 0.1;
    b->opt.weight_decay = 1e-4;

    // x: [N, 3, 224, 224] -> [N, 64, 112, 112] -> max pool -> [N, 64, 56, 56]
    pbl_value x = zl_var(b, "x", PBL_VALUE_INPUT, PBL_F32, PBL_SHAPE(batch, 3, 224, 224));
    x = zl_unary(b, "relu", conv_bn(b, x, "conv1", "bn1", 64, 7, 2), "relu");
    pbl_attr pool[] = { PBL_ATTR_INTS("kernel", ((int64_t[]){ 3 }), 1), PBL_ATTR_INTS("stride", ((int64_t[]){ 2 }), 1),
                        PBL_ATTR_INTS("pad", ((int64_t[]){ 1 }), 1) };
    x = zl_node(b, "max_pool2d", "maxpool", &x, 1, pool, 3, NULL);

    // four stages: [N, 256, 56, 56] -> [N, 512, 28, 28] -> [N, 1024, 14, 14] -> [N, 2048, 7, 7]
    for (int s = 0; s < 4; s++)
        for (int64_t k = 0; k < stages[s].blocks; k++) {
            zl_scope(b, "layer%d.%lld", s + 1, (long long)k);
            x = bottleneck(b, x, stages[s].planes, k == 0 ? stages[s].stride : 1, k == 0);
        }
    zl_unscope(b);

    // [N, 2048, 7, 7] -> [N, 2048, 1, 1] -> [N, 2048] -> logits [N, 1000]
    x = zl_unary(b, "flatten", zl_unary(b, "global_avg_pool", x, "avgpool"), "flatten");
    x = zl_fc(b, x, "fc", 1000);
    zl_output(b, "logits", x);
    if (b->training)
        zl_cross_entropy(b, x, "labels");
}
