#!/usr/bin/env python3
"""pebble run against ONNX Runtime on the same ONNX models, inputs and thread count.

Exports an MLP (784-512-512-10, Linear+ReLU) and a small CNN (two Conv3x3+ReLU+MaxPool2
blocks, then Linear), and issue 17's real exports (bench/onnx_exports.py: mlp_ln, the MLP with
LayerNorm/GELU/Dropout; torchvision mobilenet_v2, resnet18, squeezenet1_1 at [1, 3, 224, 224];
a 2-layer nn.TransformerEncoder) with torch.onnx at fixed batch sizes (the MLPs at every
--batches, the others at 1), writes one seeded input per model and batch, then runs each
engine in its own process:

  pebble   `pebble run MODEL --input NAME=x.npy --threads T --warmup W --repeat R --format json`:
           latency is pbl_exec_run's wall time per call (C, clock_gettime), peak memory the
           process's VmHWM (/proc/self/status).
  ORT      this script with --ort-worker: an InferenceSession (default graph optimizations,
           intra_op_num_threads=T, inter_op 1, sequential), input and output pre-bound with
           io_binding so each timed call is run_with_iobinding only (Python call overhead
           included, a few microseconds); peak memory the VmHWM of that Python process, and
           the same figure read just before the session was created (the interpreter + numpy
           + onnxruntime import floor), so the session's own cost shows.

Peak memory is VmHWM, not getrusage's ru_maxrss: on Linux ru_maxrss keeps the peak of the
process that exec'd the program (this driver, with torch loaded: ~600 MiB), VmHWM only the
program's own address space.

Outputs are compared (max |pebble - ORT|, max |pebble - torch|). Prints one table, headed by the
CPU, its vector extensions and the kernel level pebble used (`path`: pbl_cpu_kernels; --cpu-level
forces a lower one through PEBBLE_CPU_LEVEL). A model pebble refuses is listed with its message.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time


ALL_MODELS = ("mlp", "cnn", "mlp_ln", "mobilenet_v2", "resnet18", "squeezenet1_1", "transformer")


def export_models(out_dir, batches, names):
    """The models of `names` as ONNX files with one seeded input each. mlp and cnn are this
    script's own; the others are bench/onnx_exports.py's (issue 17's real exports: mlp_ln is its
    MLP with LayerNorm/GELU/Dropout). The MLPs run at every batch of `batches`, the others at 1."""
    import numpy as np
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import onnx_exports

    torch.manual_seed(0)
    own = {
        "mlp": (torch.nn.Sequential(
            torch.nn.Linear(784, 512), torch.nn.ReLU(),
            torch.nn.Linear(512, 512), torch.nn.ReLU(),
            torch.nn.Linear(512, 10)).eval(), (784,)),
        "cnn": (torch.nn.Sequential(
            torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Flatten(), torch.nn.Linear(16 * 7 * 7, 10)).eval(), (1, 28, 28)),
    }
    if hasattr(torch.backends, "mha"):  # nn.TransformerEncoder's fused eval path has no export
        torch.backends.mha.set_fastpath_enabled(False)
    cases = []
    rng = np.random.default_rng(1234)
    for name in names:
        if name in own:
            model, shape = own[name]
            runs = [(b, rng.standard_normal((b,) + shape).astype(np.float32)) for b in batches]
        else:
            model, x0 = onnx_exports.build("mlp" if name == "mlp_ln" else name, torch)
            if name == "mlp_ln":
                runs = [(b, rng.standard_normal((b, 784)).astype(np.float32)) for b in batches]
            else:
                runs = [(int(x0.shape[0]), x0.numpy())]
        for b, x in runs:
            path = os.path.join(out_dir, f"{name}_b{b}.onnx")
            with torch.no_grad():
                ref = model(torch.from_numpy(x)).numpy()
            torch.onnx.export(model, (torch.from_numpy(x),), path, input_names=["x"],
                              output_names=["y"], opset_version=17, dynamo=False)
            xp = os.path.join(out_dir, f"{name}_b{b}_x.npy")
            np.save(xp, x)
            cases.append({"model": name, "batch": b, "onnx": path, "x": xp, "torch": ref})
    return cases


def vm_hwm_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def ort_worker(args):
    import numpy as np
    import onnxruntime as ort

    x = np.load(args.x)
    floor_kib = vm_hwm_kib()
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(args.onnx, so, providers=["CPUExecutionProvider"])
    out_meta = sess.get_outputs()[0]
    y = np.empty([x.shape[0]] + list(out_meta.shape[1:]), dtype=np.float32)
    io = sess.io_binding()
    io.bind_ortvalue_input(sess.get_inputs()[0].name, ort.OrtValue.ortvalue_from_numpy(x))
    io.bind_ortvalue_output(out_meta.name, ort.OrtValue.ortvalue_from_numpy(y))
    for _ in range(args.warmup):
        sess.run_with_iobinding(io)
    ms = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        sess.run_with_iobinding(io)
        ms.append((time.perf_counter() - t0) * 1e3)
    np.save(args.y, y)
    ms.sort()
    n = len(ms)
    print(json.dumps({"latency_ms": {"mean": sum(ms) / n, "median": ms[n // 2] if n % 2 else 0.5 * (ms[n // 2 - 1] + ms[n // 2]),
                                     "min": ms[0]},
                      "peak_rss_kib": vm_hwm_kib(),
                      "floor_rss_kib": floor_kib, "ort_version": ort.__version__}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pebble", required=False, help="the pebble program")
    ap.add_argument("--batches", default="1,64", help="the MLPs' batch sizes (the others run at batch 1)")
    ap.add_argument("--models", default=",".join(ALL_MODELS), help="a subset of " + ",".join(ALL_MODELS))
    ap.add_argument("--cpu-level", help="PEBBLE_CPU_LEVEL for pebble's runs (baseline, avx2, avx512)")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--format", choices=["table", "json"], default="table")
    ap.add_argument("--keep", help="write models and outputs here (default: a temporary directory)")
    ap.add_argument("--ort-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--onnx"), ap.add_argument("--x"), ap.add_argument("--y")
    args = ap.parse_args()
    if args.ort_worker:
        args.threads = int(args.threads)
        return ort_worker(args)

    import numpy as np
    import onnxruntime as ort

    batches = [int(b) for b in args.batches.split(",")]
    threads = [int(t) for t in args.threads.split(",")]
    work = args.keep or tempfile.mkdtemp(prefix="pebble_onnx_vs_ort_")
    os.makedirs(work, exist_ok=True)
    names = [m for m in args.models.split(",") if m]
    unknown = [m for m in names if m not in ALL_MODELS]
    if unknown:
        raise SystemExit(f"onnx_vs_ort: unknown model(s) {', '.join(unknown)}; known: {', '.join(ALL_MODELS)}")
    cases = export_models(work, batches, names)
    penv = dict(os.environ)
    if args.cpu_level:
        penv["PEBBLE_CPU_LEVEL"] = args.cpu_level
    cpu = "?"
    rows = []
    for c in cases:
        for t in threads:
            tag = f"{c['model']}_b{c['batch']}_t{t}"
            row = {"model": c["model"], "batch": c["batch"], "threads": t}
            # pebble
            pdir = os.path.join(work, tag + "_pebble")
            cmd = [args.pebble, "run", c["onnx"], "--input", "x=" + c["x"], "--threads", str(t),
                   "--warmup", str(args.warmup), "--repeat", str(args.repeat), "--output-dir", pdir, "--format", "json"]
            p = subprocess.run(cmd, capture_output=True, text=True, env=penv)
            if p.returncode == 0:
                pj = json.loads(p.stdout)
                py = np.load(os.path.join(pdir, "y.npy"))
                row["pebble"] = {"latency_ms": pj["latency_ms"], "peak_rss_kib": pj["peak_rss_kib"],
                                 "arena_bytes": pj["arena_bytes"], "kernels": pj.get("cpu_kernels", "?")}
                cpu = pj.get("cpu", cpu)
            else:
                py = None
                msg = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"
                row["pebble"] = {"error": msg, "planned_only": "no kernel" in msg or "planned" in msg}
            # ONNX Runtime, in its own process
            oy = os.path.join(work, tag + "_ort_y.npy")
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--ort-worker", "--onnx", c["onnx"], "--x", c["x"],
                                "--y", oy, "--threads", str(t), "--warmup", str(args.warmup), "--repeat", str(args.repeat)],
                               capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS=str(t)))
            if p.returncode != 0:
                raise SystemExit("ORT worker failed: " + p.stderr)
            row["ort"] = json.loads(p.stdout)
            ory = np.load(oy)
            row["ort_vs_torch"] = float(np.max(np.abs(ory - c["torch"])))
            if py is not None:
                row["pebble_vs_ort"] = float(np.max(np.abs(py - ory)))
                row["pebble_vs_torch"] = float(np.max(np.abs(py - c["torch"])))
            rows.append(row)
    if args.format == "json":
        print(json.dumps({"onnxruntime": ort.__version__, "cpu": cpu, "rows": rows}, indent=1))
        return
    print(f"pebble run vs ONNX Runtime {ort.__version__} (CPU), warmup {args.warmup}, {args.repeat} timed runs; "
          "latency = median (min) per inference; peak = VmHWM of each process")
    print(f"CPU: {cpu}")
    print(f"{'model':<13} {'batch':>5} {'thr':>3} {'path':<8} | {'pebble ms':>18} {'ORT ms':>18} {'speedup':>7} | "
          f"{'pebble MiB':>10} {'ORT MiB':>8} {'ORT-floor':>9} | {'max|peb-ORT|':>12} {'max|peb-torch|':>14}")
    for r in rows:
        o = r["ort"]
        om, orss, ofl = o["latency_ms"]["median"], o["peak_rss_kib"] / 1024, (o["peak_rss_kib"] - o["floor_rss_kib"]) / 1024
        ot = f"{om:.4f} ({o['latency_ms']['min']:.4f})"
        if "error" in r["pebble"]:
            state = "planned only" if r["pebble"]["planned_only"] else "error"
            print(f"{r['model']:<13} {r['batch']:>5} {r['threads']:>3} {'-':<8} | {state:>18} {ot:>18} {'-':>7} | "
                  f"{'-':>10} {orss:>8.1f} {ofl:>9.1f} | {'-':>12} {'-':>14}   ({r['pebble']['error'][:90]})")
            continue
        p = r["pebble"]
        pm, prss = p["latency_ms"]["median"], p["peak_rss_kib"] / 1024
        pt = f"{pm:.4f} ({p['latency_ms']['min']:.4f})"
        print(f"{r['model']:<13} {r['batch']:>5} {r['threads']:>3} {p['kernels']:<8} | {pt:>18} {ot:>18} {om / pm:>6.2f}x | "
              f"{prss:>10.1f} {orss:>8.1f} {ofl:>9.1f} | {r['pebble_vs_ort']:>12.3g} {r['pebble_vs_torch']:>14.3g}")
    print("speedup: ORT median / pebble median (above 1: pebble faster). ORT-floor: ORT's peak minus its process's peak before the session was created (interpreter, numpy, "
          "onnxruntime import). Work files: " + work)


if __name__ == "__main__":
    main()
