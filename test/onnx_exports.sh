#!/usr/bin/env bash
# test/onnx_exports.sh PEBBLE — real PyTorch exports (torchvision mobilenet_v2, resnet18,
# squeezenet1_1, an MLP with LayerNorm/GELU/Dropout, an nn.TransformerEncoder over an
# nn.Embedding) through pebble and ONNX Runtime (bench/onnx_exports.py prints the table).
# Needs the bench venv ($PEBBLE_VENV, default bench/.venv) with torch, torchvision, onnx and
# onnxruntime: skipped (77) without it. Fails when a model pebble runs disagrees with ONNX
# Runtime; a model pebble refuses is listed, and fails only with PEBBLE_EXPORTS_STRICT=1.
set -euo pipefail
pebble=${1:?usage: onnx_exports.sh PEBBLE}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
venv=${PEBBLE_VENV:-$root/bench/.venv}
if ! [ -x "$venv/bin/python" ] ||
   ! "$venv/bin/python" -c "import torch, torchvision, onnx, onnxruntime, numpy" 2> /dev/null; then
    echo "onnx_exports: SKIP: no venv at $venv with torch, torchvision, onnx, onnxruntime and numpy" \
         "(bench/onnx_vs_ort.sh creates it)"
    exit 77
fi
strict=()
[ "${PEBBLE_EXPORTS_STRICT:-0}" = 1 ] && strict=(--strict)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# the exporter's warnings and graph dumps go to stderr; the table to stdout
"$venv/bin/python" "$root/bench/onnx_exports.py" --pebble "$pebble" --keep "$work" "${strict[@]}" 2> "$work/stderr" || {
    rc=$?
    tail -n 20 "$work/stderr" >&2
    exit "$rc"
}
