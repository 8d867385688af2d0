#!/usr/bin/env python3
"""Real PyTorch exports through pebble and ONNX Runtime: do they load, and do they agree?

Exports, with seeded random weights (batch-norm running statistics and affine parameters
randomised too, so activations neither vanish nor blow up), in eval mode, with each of
torch.onnx.export's two exporters (--exporters): `torchscript` (dynamo=False, opset 17: the
Shape/Gather/Concat chains, Erf-form GELU, inline weights) and `dynamo` (the torch.export-based
exporter, PyTorch's default since 2.9: opset 18+, Gelu and LayerNormalization ops, weights as
external data in MODEL.onnx.data beside the model):

  mobilenet_v2    torchvision, x [1, 3, 224, 224]
  resnet18        torchvision, x [1, 3, 224, 224]
  squeezenet1_1   torchvision, x [1, 3, 224, 224]
  mlp             Linear 784-512-256-10 with LayerNorm, GELU (exact) and Dropout, x [4, 784]
  transformer     nn.Embedding(1000, 64) + 2-layer nn.TransformerEncoder (4 heads, ff 128,
                  batch_first), tokens [2, 16] int64

then runs each through ONNX Runtime (CPU) and `pebble run MODEL --input ... --expect OUT=ORT`
with rtol 1e-3 and atol 1e-4 × max|ORT output| (pebble's own compare; its output is also read
back and compared with torch's). One table: export, ORT vs torch, pebble load, agreement,
and the first error line of whatever failed.

Exit status: 1 when a model that pebble loads and runs disagrees (or, with --strict, when any
model fails to load or run), 2 on bad usage, 0 otherwise.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

MODELS = ("mobilenet_v2", "resnet18", "squeezenet1_1", "mlp", "transformer")


def randomise(model, torch):
    """Seeded weights everywhere, and batch-norm statistics that are not 0/1."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
                m.running_mean.copy_(0.1 * torch.randn(m.running_mean.shape, generator=g))
                m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=g))
                m.weight.copy_(0.5 + torch.rand(m.weight.shape, generator=g))
                m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=g))
    return model.eval()


def build(name, torch):
    torch.manual_seed(0)
    if name in ("mobilenet_v2", "resnet18", "squeezenet1_1"):
        import torchvision
        model = getattr(torchvision.models, name)(weights=None)
        x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(2))
        return randomise(model, torch), x
    if name == "mlp":
        nn = torch.nn
        model = nn.Sequential(nn.Linear(784, 512), nn.LayerNorm(512), nn.GELU(), nn.Dropout(0.1),
                              nn.Linear(512, 256), nn.LayerNorm(256), nn.GELU(), nn.Dropout(0.1),
                              nn.Linear(256, 10))
        x = torch.randn(4, 784, generator=torch.Generator().manual_seed(2))
        return model.eval(), x
    if name == "transformer":
        nn = torch.nn

        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(1000, 64)
                layer = nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.1, batch_first=True)
                self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

            def forward(self, tokens):
                return self.enc(self.emb(tokens))

        x = torch.randint(0, 1000, (2, 16), generator=torch.Generator().manual_seed(2))
        return Encoder().eval(), x
    raise ValueError(name)


def first_line(text):
    for line in (text or "").splitlines():
        if line.strip():
            line = line.strip()
            return line[len("pebble: "):] if line.startswith("pebble: ") else line
    return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pebble", required=True, help="the pebble program")
    ap.add_argument("--models", default=",".join(MODELS), help="a comma-separated subset of " + ",".join(MODELS))
    ap.add_argument("--exporters", default="torchscript,dynamo",
                    help="a comma-separated subset of torchscript,dynamo (default both; dynamo needs onnxscript)")
    ap.add_argument("--keep", help="write the models and tensors here (default: a temporary directory)")
    ap.add_argument("--strict", action="store_true", help="fail unless every model loads and agrees")
    ap.add_argument("--format", choices=["table", "json"], default="table")
    args = ap.parse_args()
    names = [m for m in args.models.split(",") if m]
    bad = [m for m in names if m not in MODELS]
    if bad:
        print(f"onnx_exports: unknown model(s) {', '.join(bad)}; known: {', '.join(MODELS)}", file=sys.stderr)
        return 2
    exporters = [e for e in args.exporters.split(",") if e]
    if not exporters or any(e not in ("torchscript", "dynamo") for e in exporters):
        print(f"onnx_exports: --exporters: a list of torchscript,dynamo, got '{args.exporters}'", file=sys.stderr)
        return 2

    import numpy as np
    import onnxruntime as ort
    import torch

    torch.set_num_threads(1)
    work = args.keep or tempfile.mkdtemp(prefix="pebble_onnx_exports_")
    os.makedirs(work, exist_ok=True)
    rows = []
    for name, exporter in [(n, e) for n in names for e in exporters]:
        row = {"model": name, "exporter": exporter, "export": "-", "ort_vs_torch": None, "pebble": "-", "agree": "-", "max_err": None,
               "allowed": None, "error": ""}
        rows.append(row)
        stem = f"{name}_{exporter}"
        path = os.path.join(work, stem + ".onnx")
        try:
            model, x = build(name, torch)
            with torch.no_grad():
                ref = model(x).numpy()
            # outside no_grad, and with the fused fast path off: nn.TransformerEncoder's eval
            # fast path (aten::_transformer_encoder_layer_fwd) has no ONNX export
            if hasattr(torch.backends, "mha"):
                torch.backends.mha.set_fastpath_enabled(False)
            if exporter == "torchscript":
                torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["y"], opset_version=17,
                                  dynamo=False)
            else:
                torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["y"], dynamo=True,
                                  external_data=True, verbose=False)
            row["export"] = "ok"
        except Exception as e:  # an exporter failure is reported, not fatal
            row["export"] = "failed"
            row["error"] = f"export: {type(e).__name__}: {first_line(str(e))}"
            continue
        xp, yp = os.path.join(work, stem + "_x.npy"), os.path.join(work, stem + "_ort.npy")
        np.save(xp, x.numpy())
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        want = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0]
        np.save(yp, want)
        row["ort_vs_torch"] = float(np.max(np.abs(want - ref)))
        atol = 1e-4 * float(np.max(np.abs(want)))
        row["allowed"] = f"1e-3·|y| + {atol:.3g}"
        out = os.path.join(work, stem + "_pebble")
        cmd = [args.pebble, "run", path, "--input", "x=" + xp, "--threads", "1", "--expect", "y=" + yp,
               "--rtol", "1e-3", "--atol", repr(atol), "--output-dir", out]
        p = subprocess.run(cmd, capture_output=True, text=True)
        got_path = os.path.join(out, "y.npy")
        if not os.path.exists(got_path):
            row["pebble"] = "refused" if p.returncode == 2 else "failed"
            row["error"] = "pebble: " + (first_line(p.stderr) or f"exit {p.returncode}")
            continue
        row["pebble"] = "ok"
        got = np.load(got_path)
        row["max_err"] = float(np.max(np.abs(got.astype(np.float64) - want))) if got.shape == want.shape else None
        row["agree"] = "yes" if p.returncode == 0 else "NO"
        if p.returncode != 0:
            row["error"] = "pebble: " + (first_line(p.stderr) or first_line(p.stdout) or f"exit {p.returncode}")
    loaded_bad = [r for r in rows if r["pebble"] == "ok" and r["agree"] != "yes"]
    not_run = [r for r in rows if r["pebble"] != "ok"]
    if args.format == "json":
        print(json.dumps({"torch": torch.__version__, "onnxruntime": ort.__version__, "work": work, "rows": rows},
                         indent=1))
    else:
        print(f"real exports: torch {torch.__version__}, ONNX Runtime {ort.__version__}; pebble run --expect with "
              f"rtol 1e-3, atol 1e-4 x max|y_ORT|; work files: {work}")
        print(f"{'model':<14} {'exporter':<11} {'export':<7} {'ORT-torch':>9} {'pebble':<8} {'agree':<5} {'max|peb-ORT|':>12}  first error")
        for r in rows:
            ot = f"{r['ort_vs_torch']:.2g}" if r["ort_vs_torch"] is not None else "-"
            me = f"{r['max_err']:.3g}" if r["max_err"] is not None else "-"
            print(f"{r['model']:<14} {r['exporter']:<11} {r['export']:<7} {ot:>9} {r['pebble']:<8} {r['agree']:<5} {me:>12}  "
                  f"{r['error'][:160]}")
        print(f"{sum(r['agree'] == 'yes' for r in rows)} of {len(rows)} agree; {len(not_run)} not run by pebble; "
              f"{len(loaded_bad)} run but disagree")
    if loaded_bad or (args.strict and (not_run or any(r["agree"] != "yes" for r in rows))):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
