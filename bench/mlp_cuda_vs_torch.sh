#!/usr/bin/env bash
# MLP training on the GPU: pebble's CUDA executor (eager and CUDA Graph, bench/mlp_cuda)
# beside PyTorch (eager and torch.cuda.graphs, bench/mlp_cuda_torch.py), same model, batch
# sizes and dtype, in one run. Prints "no CUDA device" and exits 0 without one.
#
#     bench/mlp_cuda_vs_torch.sh [BUILD_DIR] [mlp_cuda options...]
#
# With MLP_TORCH_JSON=FILE set, the rows are also written to FILE as JSON (mlp_cuda_torch.py --json).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
shift || true
bin=$build/bench/mlp_cuda
py=${PYTHON:-$here/.venv/bin/python3}
[ -x "$bin" ] || { echo "mlp_cuda_vs_torch: $bin not built" >&2; exit 1; }
out=$("$bin" --format json "$@")
if [[ $out == "no CUDA device"* ]]; then
  echo "$out"
  exit 0
fi
if ! "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "no CUDA device for PyTorch ($py); pebble alone:"
  "$bin" "$@"
  exit 0
fi
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
printf '%s\n' "$out" > "$tmp"
"$py" "$here/mlp_cuda_torch.py" --pebble "$tmp" ${MLP_TORCH_JSON:+--json "$MLP_TORCH_JSON"}
