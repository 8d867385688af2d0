# How test/data/onnx_nn/ was made: small PyTorch modules of the neural-network layer ops
# (ConvTranspose, 1-D/3-D conv and pooling with ceil_mode and count_include_pad, Upsample
# nearest/bilinear/trilinear, InstanceNorm, LayerNorm, GroupNorm, global max pooling) with
# seeded random weights, exported by torch.onnx.export (TorchScript exporter, opset 17) and run
# through ONNX Runtime, whose output is y.npy. test/onnx_nn_exports.sh checks pebble against it.
#   python3 export.py [NAME ...]    (torch, onnxruntime, numpy; run from this folder; with no
#   NAME it remakes every case from one seeded stream, a NAME alone draws other numbers)
import os, torch, torch.nn as nn, numpy as np, onnxruntime as ort, sys
torch.manual_seed(0)
class M(nn.Module):
    def __init__(s, f): super().__init__(); s.f = f
    def forward(s, x): return s.f(x)
cases = {
 'convT2d': (nn.Sequential(nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1), nn.ReLU()), (1,4,7,6)),
 'convT1d_groups': (nn.ConvTranspose1d(4, 6, 3, stride=2, groups=2, dilation=2), (2,4,9)),
 'conv3d_pool3d': (nn.Sequential(nn.Conv3d(2, 4, 3, padding=1, stride=(1,2,1)), nn.MaxPool3d(2, ceil_mode=True)), (1,2,5,7,6)),
 'conv1d_avg': (nn.Sequential(nn.Conv1d(3, 5, 3, padding=2, dilation=2), nn.AvgPool1d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=True)), (2,3,11)),
 'avg2d_ceil': (nn.AvgPool2d(3, stride=2, ceil_mode=True, count_include_pad=False, padding=1), (1,3,8,9)),
 'up_nearest': (nn.Upsample(scale_factor=2, mode='nearest'), (1,3,5,4)),
 'up_bilinear': (nn.Upsample(scale_factor=2, mode='bilinear', align_corners=False), (1,3,5,4)),
 'up_bilinear_ac': (nn.Upsample(size=(7,9), mode='bilinear', align_corners=True), (1,3,5,4)),
 'up_trilinear': (nn.Upsample(scale_factor=(1.5,2,2), mode='trilinear'), (1,2,4,3,5)),
 'instnorm': (nn.InstanceNorm2d(3, affine=True), (2,3,5,6)),
 'layernorm': (nn.LayerNorm([5,6]), (2,3,5,6)),
 'groupnorm': (nn.GroupNorm(2, 4), (2,4,5,6)),
 'gmaxpool': (nn.AdaptiveMaxPool2d(1), (2,3,5,6)),
}
for name, (mod, shape) in cases.items():
    if name in sys.argv[1:] or len(sys.argv) == 1:
        mod.eval()
        for p in mod.parameters():
            with torch.no_grad(): p.add_(torch.randn_like(p) * 0.3)
        x = torch.randn(*shape)
        os.makedirs(name, exist_ok=True)
        path = f'{name}/model.onnx'
        torch.onnx.export(M(mod), (x,), path, input_names=['x'], output_names=['y'], opset_version=17, dynamo=False)
        y = ort.InferenceSession(path).run(None, {'x': x.numpy()})[0]
        np.save(f'{name}/x.npy', x.numpy())
        np.save(f'{name}/y.npy', y)
        print(name, 'exported', y.shape)
