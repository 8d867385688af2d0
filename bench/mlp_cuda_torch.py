#!/usr/bin/env python3
"""The MLP of bench/mlp_cuda.c in PyTorch on the GPU, eager and with CUDA graphs, printed
side by side with pebble's results (the JSON that `mlp_cuda --format json` wrote).

x [B,784] f32 -> Linear 784-512 -> ReLU -> Linear 512-512 -> ReLU -> Linear 512-10,
CrossEntropyLoss (mean), torch.optim.Adam(lr=1e-3) (capturable=True for the graph); one
step is zero_grad(set_to_none=True), forward, backward, step. The batch stays on the device.
Eager steps are synchronised once per timed loop (PyTorch's usual mode: the host runs
ahead); the graph is replayed with torch.cuda.graph / CUDAGraph.replay (PyTorch's
"whole network capture" recipe). Peak memory: torch.cuda.max_memory_allocated.

    mlp_cuda_torch.py --pebble PEBBLE.json [--warmup 20] [--iters 200] [--reps 5] [--json OUT.json]

--json also writes the table's rows to OUT.json (bench/gpu_check.sh reads it):
{"device": ..., "torch": ..., "rows": [{"batch": B, "runner": "torch eager", "step_ms": ...,
"samples_per_s": ..., "device_bytes": ...}, ...]}.
"""
import argparse
import json
import statistics
import time

import torch


def build(batch, capturable):
    torch.manual_seed(0x5EED)
    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda().float()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=capturable)
    x = torch.rand(batch, 784, device="cuda") * 2 - 1
    y = torch.randint(0, 10, (batch,), device="cuda")
    return model, opt, x, y


def measure(batch, graph, warmup, iters, reps):
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    model, opt, x, y = build(batch, graph)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    if graph:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(g):
            static_loss = loss_fn(model(x), y)
            static_loss.backward()
            opt.step()
        run = g.replay
    else:
        run = step
    for _ in range(warmup):
        run()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(iters):
            run()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    t = statistics.median(times)
    return {"batch": batch, "step_ms": 1e3 * t / iters, "samples_per_s": batch * iters / t,
            "device_bytes": torch.cuda.max_memory_allocated()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pebble", required=True)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", help="also write the rows as JSON to this file")
    a = ap.parse_args()
    with open(a.pebble) as f:
        peb = json.load(f)["results"]
    print(f"MLP 784-512-512-10, Adam, f32 on {torch.cuda.get_device_name()} "
          f"(median of {a.reps} x {a.iters} steps; torch {torch.__version__})")
    print(f"{'batch':>6} {'runner':<22} {'step ms':>10} {'samples/s':>14} {'device MiB':>12}")
    out = []
    for batch in sorted({r["batch"] for r in peb}):
        rows = []
        for r in peb:
            if r["batch"] == batch:
                fused = " fused" if r.get("fused") else ""  # mlp_cuda --fuse
                name = f"pebble {'graph' if r['cuda_graph'] else 'eager'}{fused} ({r['streams']} str)"
                rows.append((name, r["step_ms"], r["samples_per_s"], r["device_bytes"]))
        for graph in (0, 1):
            t = measure(batch, graph, a.warmup, a.iters, a.reps)
            rows.append((f"torch {'cuda graph' if graph else 'eager'}", t["step_ms"], t["samples_per_s"],
                         t["device_bytes"]))
        for name, ms, sps, mem in rows:
            print(f"{batch:>6} {name:<22} {ms:>10.4f} {sps:>14.1f} {mem / 1048576:>12.2f}")
            out.append({"batch": batch, "runner": name, "step_ms": round(ms, 4), "samples_per_s": round(sps, 1),
                        "device_bytes": mem})
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": out}, f)
            f.write("\n")


if __name__ == "__main__":
    main()
