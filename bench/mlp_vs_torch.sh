#!/usr/bin/env bash
# bench/mlp_vs_torch.sh — pebble's MLP training step (bench/mlp_step) against the same step in
# PyTorch on the CPU (bench/mlp_torch.py), same batch and thread count, one side-by-side table.
#
#   bench/mlp_vs_torch.sh [--batches 128,1024] [--threads 1,NPROC] [--hidden 256,128]
#                         [--streams 1] [--blas-threads 0] [--recipe train_mlp|adam] [--format table|json]
#                         [--build-dir DIR | --mlp-step PATH] [--warmup N] [--iters N] [--reps R]
#
# --hidden: the hidden widths, the same for both (784-H1-...-10); the issue's model is
# --hidden 512,512. --streams: a list of pebble stream counts (pbl_exec_options.streams);
# with S > 1 streams pebble runs S worker threads with single-threaded BLAS, so S streams
# are run only beside torch with T >= S threads (streams 1 always); torch has no such
# option and is run once per batch and thread count. --blas-threads: a list of pebble's
# pbl_exec_options.blas_threads (0, the default: with T > 1 threads, products split over
# pebble's own threads; N: each product whole on OpenBLAS's N threads; a value above T is
# run as T), so 0,T puts the two product threadings side by side.
#
# Builds mlp_step first (configuring DIR, default build/, as Release when it has no cache yet;
# with --mlp-step it runs that binary and builds nothing). When bench/.venv cannot import
# torch it creates the venv and installs torch and numpy from PyPI, unless another process is
# installing them right now (its log, $PEBBLE_VENV_LOG, default /tmp/torch.log, exists without
# a line starting with "done"): then it waits for that, up to 30 minutes.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
ncpu=$(nproc)
batches="128,1024"
threads="1,$ncpu"
hidden="256,128"
streams="1"
blas_threads="0"
format=table
build="$root/build"
mlp_step=
pass=()

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -n 's/^# \{0,1\}//p'; }
die() { echo "mlp_vs_torch: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
    case "$1" in
        --batches) batches=${2:?}; shift 2 ;;
        --threads) threads=${2:?}; shift 2 ;;
        --hidden) hidden=${2:?}; shift 2 ;;
        --streams) streams=${2:?}; shift 2 ;;
        --blas-threads) blas_threads=${2:?}; shift 2 ;;
        --format) format=${2:?}; shift 2 ;;
        --build-dir) build=${2:?}; shift 2 ;;
        --mlp-step) mlp_step=${2:?}; shift 2 ;;
        --warmup|--iters|--reps|--recipe) pass+=("$1" "${2:?}"); shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown flag: $1" ;;
    esac
done
case "$format" in table|json) ;; *) die "--format: table or json, got '$format'" ;; esac
[[ "$batches" =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--batches: a list like 128,1024"
[[ "$threads" =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--threads: a list like 1,$ncpu"
[[ "$hidden" =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--hidden: widths like 512,512"
[[ "$streams" =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--streams: a list like 1,2"
[[ "$blas_threads" =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--blas-threads: a list like 0,2"
# drop repeated thread counts (1,1 when nproc is 1)
threads=$(tr ',' '\n' <<<"$threads" | awk '!seen[$0]++' | paste -sd, -)
streams=$(tr ',' '\n' <<<"$streams" | awk '!seen[$0]++' | paste -sd, -)

# ---- pebble -----------------------------------------------------------------------------
if [ -z "$mlp_step" ]; then
    if [ ! -f "$build/CMakeCache.txt" ]; then
        echo "mlp_vs_torch: configuring $build (Release)" >&2
        cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >&2
    elif ! grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' "$build/CMakeCache.txt"; then
        echo "mlp_vs_torch: warning: $build is not a Release build; timings will be off" >&2
    fi
    cmake --build "$build" --target mlp_step -j "$ncpu" >&2
    mlp_step="$build/bench/mlp_step"
fi
[ -x "$mlp_step" ] || die "$mlp_step is not an executable"

# ---- torch ------------------------------------------------------------------------------
venv="$here/.venv"
py="$venv/bin/python"
log=${PEBBLE_VENV_LOG:-/tmp/torch.log}
torch_ok() { [ -x "$py" ] && "$py" -c 'import torch, numpy' >/dev/null 2>&1; }
if ! torch_ok && [ -f "$log" ] && ! grep -q '^done' "$log"; then
    echo "mlp_vs_torch: waiting for the torch install under way (see $log)" >&2
    for _ in $(seq 180); do   # up to 30 minutes
        sleep 10
        torch_ok && break
        grep -q '^done' "$log" && break
    done
fi
if ! torch_ok; then
    echo "mlp_vs_torch: installing torch and numpy into $venv" >&2
    [ -x "$py" ] || python3 -m venv "$venv"
    "$py" -m pip install --quiet torch numpy >&2
    torch_ok || die "$py cannot import torch"
fi

# ---- runs ---------------------------------------------------------------------------------
results=$(mktemp)
trap 'rm -f "$results"' EXIT
IFS=, read -r -a bl <<<"$batches"
IFS=, read -r -a tl <<<"$threads"
IFS=, read -r -a sl <<<"$streams"
IFS=, read -r -a bt <<<"$blas_threads"
for b in "${bl[@]}"; do
    for t in "${tl[@]}"; do
        ps=()
        done_bt=" "
        for s in "${sl[@]}"; do
            [ "$s" -le 1 ] || [ "$s" -le "$t" ] || continue
            for n in "${bt[@]}"; do
                [ "$n" -le "$t" ] || n=$t
                # several streams run BLAS single-threaded: blas_threads does not apply
                [ "$s" -le 1 ] || [ "$n" -eq 0 ] || continue
                case "$done_bt" in *" $s:$n "*) continue ;; esac
                done_bt="$done_bt$s:$n "
                echo "mlp_vs_torch: pebble, batch $b, threads $t, streams $s, blas_threads $n" >&2
                p=$("$mlp_step" --batch "$b" --hidden "$hidden" --threads "$t" --streams "$s" \
                        --blas-threads "$n" --format json ${pass[@]+"${pass[@]}"}) ||
                    die "mlp_step --batch $b --threads $t --streams $s --blas-threads $n failed"
                ps+=("$p")
            done
        done
        echo "mlp_vs_torch: torch, batch $b, threads $t" >&2
        q=$("$py" "$here/mlp_torch.py" --batch "$b" --hidden "$hidden" --threads "$t" \
                ${pass[@]+"${pass[@]}"}) ||
            die "mlp_torch.py --batch $b --threads $t failed"
        for p in "${ps[@]}"; do
            printf '%s\t%s\n' "$p" "$q" >>"$results"
        done
    done
done

cpu=$(grep -m1 '^model name' /proc/cpuinfo | sed 's/^[^:]*: *//' || true)
# the vector extensions the CPU reports, the ones kernels choose between
isa=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE 'sse4_2|avx|avx2|fma|avx512f|avx512bw|avx512vl|avx512_vnni|avx512_bf16' | paste -sd' ' || true)
cpu="${cpu:-unknown}; ${isa:-no AVX}"
date=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
"$py" - "$format" "$date" "$cpu" "$ncpu" "$results" "$hidden" <<'EOF'
import json, sys
fmt, date, cpu, ncpu, path, hidden = sys.argv[1:7]
rows = []
for line in open(path):
    p, t = (json.loads(s) for s in line.rstrip("\n").split("\t"))
    rows.append({
        "batch": p["batch"], "threads": p["threads"], "streams": p["streams_used"],
        "blas_threads": p.get("blas_threads", 0),
        "pebble_samples_per_s": p["step"]["samples_per_s"],
        "torch_samples_per_s": t["samples_per_s"],
        "pebble_over_torch": p["step"]["samples_per_s"] / t["samples_per_s"],
        "pebble_ms_per_step": p["step"]["ms_per_step"],
        "torch_ms_per_step": t["ms_per_step"],
        "pebble_step_over_sgemm": p["step_over_sgemm"],
        "sgemm_ms_per_step": p["sgemm"]["ms_per_step"],
        "pebble": p, "torch": t,
    })
blas = rows[0]["pebble"]["blas_core"] if rows else "?"
tv = rows[0]["torch"]["torch"] if rows else "?"
recipe = rows[0]["pebble"].get("recipe", "adam") if rows else "?"
recipe_text = {"adam": "Adam lr 1e-3 (constant), no clipping",
               "train_mlp": "train_mlp's recipe: AdamW (weight decay 0.01), gradients clipped to global "
                            "norm 1, lr set every step (cosine, 500 warm-up steps, peak 0.002)"}.get(recipe, recipe)
if fmt == "json":
    print(json.dumps({"date": date, "cpu": cpu, "nproc": int(ncpu), "blas_core": blas, "recipe": recipe,
                      "torch": tv, "hidden": [int(h) for h in hidden.split(",")],
                      "results": rows}))
    sys.exit(0)
print(f"date: {date}")
print(f"cpu:  {cpu} ({ncpu} logical CPUs); OpenBLAS core {blas}; torch {tv}")
print(f"model: 784-{hidden.replace(',', '-')}-10, f32; both sides: {recipe_text}")
print("pebble: pbl_exec_set_scalar of the rate + pbl_exec_run of the whole step (input write excluded); "
      "torch: zero_grad, forward, backward, [clip, set rate,] optimizer step")
print("ratio = pebble samples/s / torch samples/s (> 1: pebble faster); "
      "step/sgemm = pebble step time / its sgemm calls alone, the faster of OpenBLAS on `threads` threads "
      "and the products split over `threads` threads as the executor splits them; "
      "blas = pbl_exec_options.blas_threads (0: products split over pebble's threads)\n")
hdr = ("batch", "threads", "streams", "blas", "pebble samples/s", "torch samples/s", "ratio",
       "pebble ms", "torch ms", "sgemm ms", "step/sgemm")
w = (6, 8, 8, 5, 17, 16, 7, 10, 9, 9, 11)
print(" ".join(h.rjust(n) for h, n in zip(hdr, w)))
for r in rows:
    cells = (str(r["batch"]), str(r["threads"]), str(r["streams"]), str(r["blas_threads"]),
             f'{r["pebble_samples_per_s"]:.0f}',
             f'{r["torch_samples_per_s"]:.0f}', f'{r["pebble_over_torch"]:.2f}',
             f'{r["pebble_ms_per_step"]:.3f}', f'{r["torch_ms_per_step"]:.3f}',
             f'{r["sgemm_ms_per_step"]:.3f}', f'{r["pebble_step_over_sgemm"]:.3f}')
    print(" ".join(c.rjust(n) for c, n in zip(cells, w)))
EOF
