#!/usr/bin/env bash
# The pebble command line on ONNX models (libonnx-testdata's node tests): `pebble run` takes
# .pb and .npy inputs, prints each output and the timing, writes outputs, and --expect checks
# an output against ONNX's expected file (and fails on a wrong one); `pebble plan MODEL.onnx --strategy all`
# plans it; missing inputs, unsupported ops and malformed files give one line and exit 2.
#
# usage: pebble_cli_onnx.sh PATH/TO/pebble
set -u
bin=${1:?usage: pebble_cli_onnx.sh PATH/TO/pebble}
data=/usr/share/libonnx-testdata/data/node
[ -d "$data" ] || { echo "SKIP: $data is missing (install libonnx-testdata)"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pebble_cli_onnx.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

. "$(dirname "$0")/cli_harness.sh"
rc=0
run() {
    "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if grep -q Sanitizer "$tmp/out" "$tmp/err"; then fail "pebble $*: a sanitizer reported an error"; fi
}

gemm=$data/test_gemm_all_attributes
run run "$gemm/model.onnx" --input a="$gemm/test_data_set_0/input_0.pb" --input b="$gemm/test_data_set_0/input_1.pb" \
    --input c="$gemm/test_data_set_0/input_2.pb" --repeat 3 --output-dir "$tmp/o" --output-format pb
[ $rc -eq 0 ] || fail "pebble run gemm: exit $rc"
grep -q '^output y \[3, 5\] f32:' "$tmp/out" || fail "pebble run gemm: no output line"
grep -q '^latency per run over 3 runs' "$tmp/out" || fail "pebble run gemm: no latency line"
grep -q 'peak RSS [0-9]* KiB' "$tmp/out" || fail "pebble run gemm: no peak RSS"
# the OpenBLAS kernel family (the build requires OpenBLAS): timings depend on it
grep -q '^blas: OpenBLAS [A-Za-z0-9]* kernels' "$tmp/out" || fail "pebble run gemm: no blas line"
[ -s "$tmp/o/y.pb" ] || fail "pebble run gemm: --output-dir wrote no y.pb"
pass "pebble run on .pb inputs prints outputs, latency, peak RSS, the BLAS kernels and writes y.pb"

set0="$gemm/test_data_set_0"
run run "$gemm/model.onnx" --input a="$set0/input_0.pb" --input b="$set0/input_1.pb" --input c="$set0/input_2.pb" \
    --expect y="$set0/output_0.pb"
[ $rc -eq 0 ] && grep -q '^expect y: 0 of 15 elements outside' "$tmp/out" || fail "pebble run --expect (right): exit $rc"
run run "$gemm/model.onnx" --input a="$set0/input_0.pb" --input b="$set0/input_1.pb" --input c="$set0/input_2.pb" \
    --expect y="$set0/input_2.pb"
[ $rc -eq 1 ] || fail "pebble run --expect (a file of another shape): exit $rc"
run run "$gemm/model.onnx" --input a="$set0/input_0.pb" --input b="$set0/input_1.pb" --input c="$set0/input_2.pb" \
    --expect y="$tmp/o/y.pb" --rtol 0 --atol 0
[ $rc -eq 0 ] || fail "pebble run --expect its own written output, exactly: exit $rc"
pass "pebble run --expect: ONNX's expected output matches, another file does not, its own .pb exactly"

run run "$gemm/model.onnx" --input a="$gemm/test_data_set_0/input_0.pb" --output-dir "$tmp/n" --zero-unbound
[ $rc -eq 0 ] || fail "pebble run --zero-unbound: exit $rc"
head -c 6 "$tmp/n/y.npy" | od -c | grep -q 'N   U   M   P   Y' || fail "pebble run: y.npy has no NUMPY magic"
run run "$gemm/model.onnx" --input a="$tmp/n/y.npy"
[ $rc -eq 2 ] && grep -q "holds f32 \[3, 5\] but the input is f32 \[4, 3\]" "$tmp/err" || fail "pebble run: a wrong-shaped .npy: exit $rc"
pass "pebble run writes .npy outputs and refuses a wrongly shaped .npy input"

run run "$gemm/model.onnx" --input a="$gemm/test_data_set_0/input_0.pb"
[ $rc -eq 2 ] && grep -q "input 'b' \[5, 4\] has no data" "$tmp/err" || fail "pebble run with a missing input: exit $rc"
pass "pebble run names a missing input"

run run "$data/test_lstm_defaults/model.onnx"
[ $rc -eq 2 ] && grep -q "unsupported ONNX ops: LSTM" "$tmp/err" || fail "pebble run on LSTM: exit $rc"
[ "$(wc -l < "$tmp/err")" -eq 1 ] || fail "pebble run on LSTM: more than one line"
pass "an unsupported op is one line, exit 2"

abc=(--input a="$set0/input_0.pb" --input b="$set0/input_1.pb" --input c="$set0/input_2.pb")
run run "$gemm/model.onnx" "${abc[@]}" --expect y_nope="$set0/output_0.pb"
[ $rc -eq 2 ] && grep -q "^pebble: --expect y_nope: not an output of .*model.onnx (outputs: y)$" "$tmp/err" ||
    fail "pebble run --expect on a name that is no output: exit $rc"
[ "$(wc -l < "$tmp/err")" -eq 1 ] || fail "pebble run --expect y_nope: not one line"
run run "$gemm/model.onnx" "${abc[@]}" --expect y="$set0/input_2.pb"
[ $rc -eq 1 ] && grep -q "^pebble: --expect y: .*input_2.pb is f32 .*, the output f32 \[3, 5\]$" "$tmp/err" ||
    fail "pebble run --expect of another shape: exit $rc"
[ "$(wc -l < "$tmp/err")" -eq 1 ] || fail "pebble run --expect of another shape: not one line"
run run "$gemm/model.onnx" "${abc[@]}" --strategy nope
[ $rc -eq 2 ] && grep -q "^pebble: --strategy: unknown strategy 'nope' (one of: .*best" "$tmp/err" ||
    fail "pebble run --strategy nope: exit $rc"
run run "$gemm/model.onnx" "${abc[@]}" --input a="$set0/input_0.pb"
[ $rc -eq 2 ] && grep -q "^pebble: --input: 'a' is given twice$" "$tmp/err" || fail "pebble run with --input a twice: exit $rc"
pass "pebble run refuses --expect on no output, --strategy nope and a doubled --input (exit 2, one line)"

# outputs go through the whole-or-nothing writer: a symlink's target is replaced and the link
# stays, a FIFO is written in place, and nothing is left beside them
mkdir "$tmp/ln" "$tmp/fifo"
echo old > "$tmp/target.npy"
echo old > "$tmp/target.pb"
ln -s "$tmp/target.npy" "$tmp/ln/y.npy"
ln -s "$tmp/target.pb" "$tmp/ln/y.pb"
for fmt in npy pb; do
    run run "$gemm/model.onnx" "${abc[@]}" --output-dir "$tmp/ln" --output-format $fmt
    [ $rc -eq 0 ] && [ -L "$tmp/ln/y.$fmt" ] && [ "$(cat "$tmp/target.$fmt")" != old ] ||
        fail "pebble run --output-dir over a symlink (.$fmt): exit $rc, the link replaced or its target unwritten"
done
[ "$(ls -A "$tmp/ln" | wc -l)" -eq 2 ] || fail "pebble run --output-dir: files left beside the outputs: $(ls -A "$tmp/ln")"
run run "$gemm/model.onnx" "${abc[@]}" --expect y="$tmp/target.pb" --rtol 0 --atol 0
[ $rc -eq 0 ] || fail "pebble run --expect the .pb written through a symlink: exit $rc"
mkfifo "$tmp/fifo/y.npy"
timeout 20 cat "$tmp/fifo/y.npy" > "$tmp/fromfifo" &
reader=$!
run run "$gemm/model.onnx" "${abc[@]}" --output-dir "$tmp/fifo"
[ $rc -eq 0 ] && [ -p "$tmp/fifo/y.npy" ] || { kill $reader 2>/dev/null; fail "pebble run --output-dir onto a FIFO: exit $rc, or the FIFO replaced"; }
wait $reader
head -c 6 "$tmp/fromfifo" | od -c | grep -q 'N   U   M   P   Y' || fail "pebble run: nothing came through the FIFO"
echo text > "$tmp/x.txt"
run run "$gemm/model.onnx" "${abc[@]}" --output-dir "$tmp/x.txt"
[ $rc -eq 2 ] && grep -q "^pebble: --output-dir .*x.txt: exists and is not a directory$" "$tmp/err" ||
    fail "pebble run --output-dir on a regular file: exit $rc"
[ ! -s "$tmp/out" ] || fail "pebble run --output-dir on a regular file: ran before refusing"
pass "pebble run --output-dir: symlinks kept, FIFOs written in place, a regular file refused before running"

for m in test_gemm_all_attributes test_conv_with_strides_padding test_softmax_axis_1; do
    run plan "$data/$m/model.onnx" --strategy all
    [ $rc -eq 0 ] && grep -q '^best ' "$tmp/out" || fail "pebble plan $m --strategy all: exit $rc"
done
pass "pebble plan MODEL.onnx --strategy all"

printf 'not a protobuf \377\377\377' > "$tmp/bad.onnx"
run plan "$tmp/bad.onnx"
[ $rc -eq 2 ] && grep -q "bad.onnx: not a valid ONNX model" "$tmp/err" || fail "pebble plan on garbage: exit $rc"
run run "$tmp/missing.onnx"
[ $rc -eq 1 ] || fail "pebble run on a missing file: exit $rc"
pass "malformed (exit 2) and missing (exit 1) model files"

# --backend: bad values refused before loading; on the CUDA backend (the host emulator module
# in $PEBBLE_TEST_CUDA_EMU, where it is built) a model with initializers (written to the device, not bound) gives
# PyTorch's expected output, eager and replayed as a CUDA Graph
run run "$gemm/model.onnx" "${abc[@]}" --backend gpu
[ $rc -eq 2 ] && grep -q "^pebble: --backend: 'gpu' is not cpu or cuda$" "$tmp/err" || fail "pebble run --backend gpu: exit $rc"
run run "$gemm/model.onnx" "${abc[@]}" --cuda-graph
[ $rc -eq 2 ] && grep -q "^pebble: --cuda-graph: only with --backend cuda$" "$tmp/err" || fail "pebble run --cuda-graph alone: exit $rc"
pass "pebble run refuses --backend gpu and --cuda-graph without --backend cuda (exit 2, one line)"
# --threads sets BLAS threads, which a run on the GPU does not use: refused, as train_mlp does,
# rather than reported in the JSON as if it applied
run run "$gemm/model.onnx" "${abc[@]}" --backend cuda --threads 2
[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^pebble: --threads: .*--backend cuda" "$tmp/err" ||
    fail "pebble run --backend cuda --threads 2: exit $rc: $(head -c 300 "$tmp/err")"
pass "pebble run refuses --threads with --backend cuda (exit 2, one line)"
# no loadable CUDA module is the machine's failure, not a bad command line: exit 1, as
# train_mlp --backend cuda, with the loader's reason on one line, and no output file written
PEBBLE_CUDA_MODULE=$tmp/no_such_module.so run run "$gemm/model.onnx" "${abc[@]}" --backend cuda --output-dir "$tmp/nocuda"
[ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^pebble: .*: the CUDA backend is not available: " "$tmp/err" &&
    [ -z "$(ls -A "$tmp/nocuda" 2>/dev/null)" ] || fail "pebble run --backend cuda without a loadable module: exit $rc: $(head -c 300 "$tmp/err")"
pass "pebble run --backend cuda without a loadable module: exit 1, the loader's reason on one line"
conv=/usr/share/libonnx-testdata/data/pytorch-converted/test_Conv2d
emu=${PEBBLE_TEST_CUDA_EMU:-}
if [ -n "$emu" ] && [ -f "$emu" ] && [ -d "$conv" ]; then
    for graph in "" --cuda-graph; do
        PEBBLE_CUDA_MODULE=$emu run run "$conv/model.onnx" --input 0="$conv/test_data_set_0/input_0.pb" \
            --expect 3="$conv/test_data_set_0/output_0.pb" --backend cuda $graph --repeat 2
        [ $rc -eq 0 ] && grep -q '^expect 3: 0 of 160 elements outside' "$tmp/out" && grep -q '^backend: cuda' "$tmp/out" ||
            fail "pebble run --backend cuda $graph on test_Conv2d (emulator): exit $rc: $(head -c 300 "$tmp/err")"
    done
    pass "pebble run --backend cuda [--cuda-graph]: test_Conv2d's weights on the device, PyTorch's output (host emulator)"
fi

echo "$passed passed, 0 failed"
