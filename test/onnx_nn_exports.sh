#!/usr/bin/env bash
# PyTorch exports of the neural-network layer ops (test/data/onnx_nn/*/model.onnx, made by
# test/data/onnx_nn/export.py): `pebble run --expect` agrees with ONNX Runtime's output on
# each (rtol 1e-3, atol 1e-5: float32 sums in another order).
#
# usage: onnx_nn_exports.sh PATH/TO/pebble
set -u
bin=${1:?usage: onnx_nn_exports.sh PATH/TO/pebble}
data=$(dirname "$0")/data/onnx_nn
tmp=$(mktemp -d "${TMPDIR:-/tmp}/onnx_nn_exports.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

. "$(dirname "$0")/cli_harness.sh"
n=0
for d in "$data"/*/; do
    m=$(basename "$d")
    run run "$d/model.onnx" --input x="$d/x.npy" --expect y="$d/y.npy" --rtol 1e-3 --atol 1e-5
    [ $rc -eq 0 ] && grep -q '^expect y: 0 of [0-9]* elements outside' "$tmp/out" || fail "$m: exit $rc"
    pass "$m agrees with ONNX Runtime"
    n=$((n + 1))
done
[ $n -ge 13 ] || fail "only $n models ran"
echo "$passed passed, 0 failed"
