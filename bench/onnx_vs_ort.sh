#!/usr/bin/env bash
# bench/onnx_vs_ort.sh — `pebble run` against ONNX Runtime on an MLP (784-512-512-10), a
# small CNN and issue 17's real exports (an MLP with LayerNorm/GELU, torchvision mobilenet_v2,
# resnet18, squeezenet1_1, an nn.TransformerEncoder) exported from PyTorch with torch.onnx:
# same models, inputs and thread count, one table of latency per inference, peak RSS and
# output differences, headed by the CPU and its vector extensions (bench/onnx_vs_ort.py says
# exactly what is measured).
#
#   bench/onnx_vs_ort.sh [--build-dir DIR | --pebble PATH] [--batches 1,64] [--threads 1]
#                        [--models mlp,cnn,...] [--cpu-level baseline|avx2|avx512]
#                        [--warmup N] [--repeat N] [--format table|json] [--keep DIR]
#
# Builds the pebble program first (configuring DIR, default build/, as Release when it has no
# cache yet). Uses the virtual environment $PEBBLE_VENV (default bench/.venv), creating it
# when missing and installing torch, torchvision, numpy, onnx, onnxruntime and onnxscript from
# PyPI into it when they cannot be imported (plain PyPI's torch, with its CUDA libraries:
# several GiB, some minutes).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build="$root/build"
pebble=
pass=()
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -n 's/^# \{0,1\}//p'; }
while [ $# -gt 0 ]; do
    case "$1" in
        --build-dir) build=${2:?}; shift 2 ;;
        --pebble) pebble=${2:?}; shift 2 ;;
        --batches|--threads|--warmup|--repeat|--format|--keep|--models|--cpu-level) pass+=("$1" "${2:?}"); shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; echo "onnx_vs_ort: unknown flag: $1" >&2; exit 2 ;;
    esac
done
if [ -z "$pebble" ]; then
    [ -f "$build/CMakeCache.txt" ] || cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release > /dev/null
    cmake --build "$build" -j2 --target pebble_cli > /dev/null
    pebble="$build/tools/pebble"
fi
venv=${PEBBLE_VENV:-$root/bench/.venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
if ! "$venv/bin/python" -c "import torch, torchvision, numpy, onnx, onnxruntime, onnxscript" 2> /dev/null; then
    echo "onnx_vs_ort: installing torch torchvision numpy onnx onnxruntime onnxscript into $venv" >&2
    "$venv/bin/pip" install -q torch torchvision numpy onnx onnxruntime onnxscript >&2
fi
exec "$venv/bin/python" "$here/onnx_vs_ort.py" --pebble "$pebble" "${pass[@]}"
