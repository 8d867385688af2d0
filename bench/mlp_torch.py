#!/usr/bin/env python3
"""The MLP training step of bench/mlp_step.c in PyTorch on the CPU, timed the same way.

x [B,784] f32 -> Linear 784-256 -> ReLU -> Linear 256-128 -> ReLU -> Linear 128-10,
CrossEntropyLoss (mean), and the optimizer of --recipe, as in mlp_step.c:
  train_mlp (default): torch.optim.AdamW(weight_decay=0.01), clip_grad_norm_(max_norm=1), and the
             learning rate set before every step from the same cosine schedule (500 linear
             warm-up steps to 0.002, cosine to 0 at step 4300; pebble/autodiff.h's
             pbl_lr_schedule_at, whose formula lr_at() below repeats);
  adam:      torch.optim.Adam(lr=1e-3).
One step is zero_grad(set_to_none=True), forward, backward, [clip,] [set lr,] optimizer.step().

Inputs come from a pool of pre-generated random batches (the same pool size as mlp_step), so
no input generation or copy is timed. Each timed loop runs --iters steps; it is repeated
--reps times and the median is reported. Prints one JSON object.

    mlp_torch.py [--batch 128] [--hidden 256,128] [--threads 1] [--warmup 10] [--iters N]
                 [--reps 5]
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch

IN_FEATURES = 784
N_CLASSES = 10
POOL = 4            # distinct input batches cycled through, as in mlp_step.c
TARGET_REP_S = 0.5  # default --iters aims at this much step time per repetition
RECIPE_LR, RECIPE_WEIGHT_DECAY, RECIPE_CLIP = 0.002, 0.01, 1.0
RECIPE_WARMUP, RECIPE_STEPS = 500, 4300


def lr_at(step):
    """The train_mlp recipe's rate at `step` (0-based): linear warm-up, then cosine to 0."""
    if step < RECIPE_WARMUP:
        return RECIPE_LR * (step + 1) / RECIPE_WARMUP
    t = min(1.0, (step - RECIPE_WARMUP) / (RECIPE_STEPS - RECIPE_WARMUP))
    return 0.5 * RECIPE_LR * (1 + math.cos(math.pi * t))


def positive(s):
    v = int(s)
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {s}")
    return v


def widths(s):
    try:
        v = [int(t) for t in s.split(",") if t]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected widths like 256,128, got {s}")
    if not v or min(v) < 1:
        raise argparse.ArgumentTypeError(f"expected widths like 256,128, got {s}")
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=positive, default=128)
    ap.add_argument("--hidden", type=widths, default=[256, 128])
    ap.add_argument("--threads", type=positive, default=1)
    ap.add_argument("--warmup", type=int, default=10, help="untimed steps first")
    ap.add_argument("--iters", type=positive, default=None,
                    help=f"steps per timed repetition (default: about {TARGET_REP_S} s)")
    ap.add_argument("--reps", type=positive, default=5)
    ap.add_argument("--recipe", choices=["train_mlp", "adam"], default="train_mlp")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(0x5EED)
    dims = [IN_FEATURES] + a.hidden + [N_CLASSES]
    layers = []
    for i in range(len(dims) - 1):
        layers.append(torch.nn.Linear(dims[i], dims[i + 1]))
        if i + 2 < len(dims):
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers).float()
    loss_fn = torch.nn.CrossEntropyLoss()
    recipe = a.recipe == "train_mlp"
    if recipe:
        opt = torch.optim.AdamW(model.parameters(), lr=RECIPE_LR, weight_decay=RECIPE_WEIGHT_DECAY)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    params = list(model.parameters())

    xs = [torch.rand(a.batch, IN_FEATURES, dtype=torch.float32) * 2 - 1 for _ in range(POOL)]
    ys = [torch.randint(0, N_CLASSES, (a.batch,), dtype=torch.int64) for _ in range(POOL)]
    state = {"next": 0, "step": 0, "loss": torch.tensor(float("nan"))}

    def steps(n):
        t0 = time.perf_counter()  # a monotonic clock (CLOCK_MONOTONIC on Linux)
        loss = None
        for _ in range(n):
            p = state["next"]
            state["next"] = (p + 1) % POOL
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(xs[p]), ys[p])
            loss.backward()
            if recipe:
                torch.nn.utils.clip_grad_norm_(params, RECIPE_CLIP)
                lr = lr_at(state["step"] % RECIPE_STEPS)
                state["step"] += 1
                for g in opt.param_groups:
                    g["lr"] = lr
            opt.step()
        t = time.perf_counter() - t0
        if loss is not None:
            state["loss"] = loss
        return t

    steps(a.warmup)
    iters = a.iters
    if iters is None:
        # calibrate after the warm-up: double a short run until it lasts 0.1 s
        n = 1
        while True:
            t = steps(n)
            if t >= 0.1 or n >= 1 << 20:
                break
            n *= 2
        iters = min(max(int(TARGET_REP_S * n / t) if t > 0 else 1000, 10), 1000000)
    times = [steps(iters) for _ in range(a.reps)]
    step_s = statistics.median(times) / iters
    print(json.dumps({
        "bench": "mlp_torch",
        "torch": torch.__version__,
        "recipe": a.recipe,
        "batch": a.batch,
        "hidden": a.hidden,
        "threads": a.threads,
        "torch_threads": torch.get_num_threads(),
        "warmup": a.warmup,
        "iters": iters,
        "reps": a.reps,
        "steps_per_s": 1.0 / step_s,
        "samples_per_s": a.batch / step_s,
        "ms_per_step": 1e3 * step_s,
        "last_loss": float(state["loss"].detach()),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
