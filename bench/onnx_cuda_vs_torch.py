#!/usr/bin/env python3
"""Real PyTorch exports on the GPU: `pebble run --backend cuda` beside PyTorch on the same GPU.

Reads the work directory that `bench/onnx_exports.py --keep DIR` leaves (MODEL_EXPORTER.onnx,
its input MODEL_EXPORTER_x.npy and ONNX Runtime's output MODEL_EXPORTER_ort.npy). For each
model found there:

  - pebble: `pebble run MODEL --backend cuda [--cuda-graph] --expect y=ORT` (rtol 1e-3, atol
    1e-4 x max|y_ORT|, as onnx_exports.py on the CPU), eager and replayed as a CUDA Graph, the
    median latency of --repeat runs (each run ends with a device synchronisation);
  - torch: the same architecture built again here (onnx_exports.build: the seeded weights
    need not match, a latency does not depend on them), on the GPU in eval mode, eager and
    captured with torch.cuda.graphs, the median of --repeat timed runs, each synchronised.

One table (and --format json). Without a CUDA device for torch, its columns say so; pebble's
refusal (no device, no CUDA build) is printed as its first error line.

    bench/onnx_cuda_vs_torch.py --pebble build/tools/pebble --dir DIR [--repeat 100]
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import time


def first_line(text):
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:160]
    return ""


def pebble_row(pebble, model, x, want, repeat, graph, np):
    atol = 1e-4 * float(np.max(np.abs(np.load(want))))
    cmd = [pebble, "run", model, "--input", "x=" + x, "--expect", "y=" + want, "--rtol", "1e-3",
           "--atol", repr(atol), "--backend", "cuda", "--repeat", str(repeat), "--warmup", "5", "--format", "json"]
    if graph:
        cmd.append("--cuda-graph")
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        # "no" only for --expect's verdict ("differ from --expect"); a run that could not start
        # (no GPU, no module: also exit 1) or was refused agrees with nothing
        differs = p.returncode == 1 and "differ from --expect" in p.stderr
        return {"ms": None, "agree": "no" if differs else "-", "error": first_line(p.stderr) or f"exit {p.returncode}"}
    j = json.loads(p.stdout.strip().splitlines()[-1])
    return {"ms": j["latency_ms"]["median"], "agree": "yes", "error": "", "arena_bytes": j["arena_bytes"]}


def torch_ms(torch, model, x, repeat, graph):
    with torch.no_grad():
        for _ in range(5):
            model(x)
        torch.cuda.synchronize()
        run = lambda: model(x)
        if graph:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    model(x)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                model(x)
            run = g.replay
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            run()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pebble", required=True, help="the pebble program (built with CUDA)")
    ap.add_argument("--dir", required=True, help="bench/onnx_exports.py --keep's directory")
    ap.add_argument("--repeat", type=int, default=100)
    ap.add_argument("--format", choices=["table", "json"], default="table")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    import numpy as np
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        import torch
        import onnx_exports
        have_torch = torch.cuda.is_available()
        device = torch.cuda.get_device_name(0) if have_torch else "no CUDA device for torch"
    except ImportError as e:
        torch, have_torch, device = None, False, f"no torch ({e})"
    rows = []
    for model in sorted(glob.glob(os.path.join(args.dir, "*.onnx"))):
        stem = model[:-len(".onnx")]
        x, want = stem + "_x.npy", stem + "_ort.npy"
        if not (os.path.exists(x) and os.path.exists(want)):
            continue
        name, exporter = os.path.basename(stem).rsplit("_", 1)
        row = {"model": name, "exporter": exporter}
        for graph in (0, 1):
            r = pebble_row(args.pebble, model, x, want, args.repeat, graph, np)
            row["pebble_graph" if graph else "pebble_eager"] = r["ms"]
            row["agree"] = r["agree"] if not graph or row.get("agree") == "yes" else row["agree"]
            row["error"] = row.get("error") or r["error"]
        row["torch_eager"] = row["torch_graph"] = None
        if have_torch:
            m, xt = onnx_exports.build(name, torch)
            m, xt = m.cuda(), xt.cuda()
            row["torch_eager"] = torch_ms(torch, m, xt, args.repeat, 0)
            row["torch_graph"] = torch_ms(torch, m, xt, args.repeat, 1)
        rows.append(row)
    if args.format == "json":
        print(json.dumps({"device": device, "torch": torch.__version__ if torch else None, "rows": rows}))
        return 0
    fmt = lambda v: f"{v:.4f}" if isinstance(v, float) else "-"
    print(f"ONNX exports on the GPU ({device}; torch {torch.__version__ if torch else '-'}), batch as exported, "
          f"median of {args.repeat} runs, ms")
    print(f"{'model':<14} {'pebble eager':>12} {'pebble graph':>12} {'torch eager':>11} {'torch graph':>11} {'agree':<5}  first error")
    for r in rows:
        print(f"{r['model']:<14} {fmt(r['pebble_eager']):>12} {fmt(r['pebble_graph']):>12} {fmt(r['torch_eager']):>11} "
              f"{fmt(r['torch_graph']):>11} {r['agree']:<5}  {r['error']}")
    return 1 if any(r["agree"] == "no" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
