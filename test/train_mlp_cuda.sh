#!/usr/bin/env bash
# train_mlp --backend cuda on the host CUDA emulator (test/cuda_emu; docs/cuda.md "The host
# emulator") against the same run on the CPU: 4 epochs of 42 steps (1000 training images,
# batch 24: the last batch of each epoch is partial, 16 rows), dropout, the cosine schedule
# after a warm-up (the learning rate a runtime scalar), AdamW, clipping, a 200-image
# validation split each epoch, --save of the best epoch, --plot. The emulator is deterministic
# but its products are not OpenBLAS's, so the runs agree within a tolerance, not bit for bit:
# every epoch's training and validation loss within 2e-3 and accuracy within 0.005 (5 of
# 1000 images, 1 of 200), the same best epoch, and the test accuracy within 0.006 (3 of 500
# images); measured: the same figures to the 4 decimals printed. The CUDA run's checkpoint,
# loaded on the CPU and on the emulator (--epochs 0), scores what the CPU's own checkpoint
# scores, within 0.006 (a save that missed the device's weights scores about 0.1). And the
# refusals: --backend other than cpu|cuda, --threads with cuda (exit 2), a module that
# cannot be loaded (exit 1, the loader's message on one line).
#
# usage: train_mlp_cuda.sh PATH/TO/train_mlp PATH/TO/libpebble_cuda_emu.so [FASHION_MNIST_DIR]
#
# Data: the first 1200 training and 500 test images of Fashion-MNIST (default
# /usr/share/datasets/fashion-mnist), or, where it is not installed, tiny synthetic IDX files
# (one flat grey image per class, as train_mlp_cli.sh makes). Exit 77 (skipped) without the
# emulator module.
set -u

bin=${1:?usage: train_mlp_cuda.sh PATH/TO/train_mlp PATH/TO/libpebble_cuda_emu.so [DIR]}
emu=${2:-}
src=${3:-/usr/share/datasets/fashion-mnist}
if [ -z "$emu" ] || [ ! -f "$emu" ]; then
    echo "SKIP: no host CUDA emulator module ('$emu'): it is built where a C++17 compiler exists"
    exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/train_mlp_cuda.XXXXXX") || exit 1
[ -n "${KEEP_TMP:-}" ] || trap 'rm -rf "$tmp"' EXIT

harness_logs="cpu.out cuda.out err"
. "$(dirname "$0")/cli_harness.sh" # pass, fail

# ---- data -----------------------------------------------------------------------------------

be32() {
    local h
    h=$(printf '%08x' "$1")
    printf "\\x${h:0:2}\\x${h:2:2}\\x${h:4:2}\\x${h:6:2}"
}
data=$tmp/data
mkdir -p "$data"
if [ -f "$src/train-images-idx3-ubyte.gz" ] && [ -f "$src/t10k-labels-idx1-ubyte.gz" ]; then
    # subset SRC DST COUNT HEADER_WORDS ITEM_BYTES: the first COUNT items, the header's count
    # (its second word) rewritten
    subset() {
        { zcat "$1" | head -c 4; be32 "$3"; zcat "$1" | tail -c +9 | head -c $((($4 - 2) * 4))
          zcat "$1" | tail -c +$(($4 * 4 + 1)) | head -c $(($3 * $5)); } | gzip -n >"$2"
    }
    subset "$src/train-images-idx3-ubyte.gz" "$data/train-images-idx3-ubyte.gz" 1200 4 784
    subset "$src/train-labels-idx1-ubyte.gz" "$data/train-labels-idx1-ubyte.gz" 1200 2 1
    subset "$src/t10k-images-idx3-ubyte.gz" "$data/t10k-images-idx3-ubyte.gz" 500 4 784
    subset "$src/t10k-labels-idx1-ubyte.gz" "$data/t10k-labels-idx1-ubyte.gz" 500 2 1
    echo "# data: the first 1200 training and 500 test images of $src"
else
    for c in 0 1 2 3 4 5 6 7 8 9; do
        head -c 784 /dev/zero | tr '\0' "\\$(printf '%03o' $((c * 25 + 5)))"
    done >"$tmp/cycle.img"
    printf '\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09' >"$tmp/cycle.lab"
    repeat() { for ((k = 0; k < $2 / 10; k++)); do cat "$1"; done; }
    { be32 2051; be32 1200; be32 28; be32 28; repeat "$tmp/cycle.img" 1200; } | gzip -n >"$data/train-images-idx3-ubyte.gz"
    { be32 2049; be32 1200; repeat "$tmp/cycle.lab" 1200; } | gzip -n >"$data/train-labels-idx1-ubyte.gz"
    { be32 2051; be32 500; be32 28; be32 28; repeat "$tmp/cycle.img" 500; } | gzip -n >"$data/t10k-images-idx3-ubyte.gz"
    { be32 2049; be32 500; repeat "$tmp/cycle.lab" 500; } | gzip -n >"$data/t10k-labels-idx1-ubyte.gz"
    echo "# data: no Fashion-MNIST under $src; 1200 + 500 synthetic images"
fi

# ---- CPU against the emulated GPU -------------------------------------------------------------

export PEBBLE_CUDA_MODULE=$emu
flags=(--data "$data" --hidden 64,32 --batch 24 --epochs 4 --val 200 --dropout 0.1 --seed 3)
"$bin" "${flags[@]}" --save "$tmp/cpu.ck" >"$tmp/cpu.out" 2>"$tmp/err" || fail "the CPU run: exit $?"
"$bin" "${flags[@]}" --backend cuda --save "$tmp/cuda.ck" --plot "$tmp/cuda.svg" >"$tmp/cuda.out" 2>"$tmp/err" ||
    fail "the CUDA run: exit $?"
grep -q "^backend: cpu on .*kernels: " "$tmp/cpu.out" || fail "the CPU run does not name its CPU"
grep -Fq "backend: cuda on pebble host CUDA emulator (no GPU) (device 0, compute capability" "$tmp/cuda.out" &&
    grep -Fq "; module $emu" "$tmp/cuda.out" || fail "the CUDA run does not name the emulated device and module"
pass "each run names its backend and device"

# epochs FILE: "loss acc val_loss val_acc" per epoch line
epochs() { sed -n 's/^epoch [0-9]*\/[0-9]*  loss \([0-9.]*\)  acc \([0-9.]*\)  val loss \([0-9.]*\)  val acc \([0-9.]*\) .*/\1 \2 \3 \4/p' "$1"; }
epochs "$tmp/cpu.out" >"$tmp/cpu.ep"
epochs "$tmp/cuda.out" >"$tmp/cuda.ep"
[ "$(wc -l <"$tmp/cpu.ep")" -eq 4 ] && [ "$(wc -l <"$tmp/cuda.ep")" -eq 4 ] || fail "not 4 epoch lines with validation in each run"
grep -q "  42 steps, 1000 examples" "$tmp/cuda.out" || fail "the CUDA run's epoch is not 42 steps over all 1000 images"
paste -d ' ' "$tmp/cpu.ep" "$tmp/cuda.ep" | awk '
    function d(a, b) { return a > b ? a - b : b - a }
    { if (d($1, $5) > 2e-3 || d($3, $7) > 2e-3 || d($2, $6) > 0.005 || d($4, $8) > 0.005) bad = bad " " NR }
    END { if (bad != "") { print "epochs differing beyond the tolerance:" bad; exit 1 } }' ||
    fail "the CUDA run's losses or accuracies differ from the CPU run's"
pass "every epoch's loss and accuracy, training and validation, agree (2e-3, 0.005)"

best() { sed -n 's/^best validation accuracy [0-9.]* at epoch \([0-9]*\).*/\1/p' "$1"; }
[ -n "$(best "$tmp/cpu.out")" ] && [ "$(best "$tmp/cpu.out")" = "$(best "$tmp/cuda.out")" ] ||
    fail "best epochs differ: cpu '$(best "$tmp/cpu.out")', cuda '$(best "$tmp/cuda.out")'"
test_acc() { sed -n 's/^test accuracy: \([0-9.]*\)$/\1/p' "$1"; }
near() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= t) }'; }
near "$(test_acc "$tmp/cpu.out")" "$(test_acc "$tmp/cuda.out")" 0.006 ||
    fail "test accuracy: cpu $(test_acc "$tmp/cpu.out"), cuda $(test_acc "$tmp/cuda.out")"
pass "the same best epoch, test accuracy $(test_acc "$tmp/cpu.out") (cpu) and $(test_acc "$tmp/cuda.out") (cuda)"
[ -s "$tmp/cuda.svg" ] && [ -s "$tmp/cuda.json" ] || fail "--plot with --backend cuda wrote no picture or graph"
pass "--plot with --backend cuda"

# ---- the checkpoint saved from the device -----------------------------------------------------

score() { # BACKEND CHECKPOINT: test accuracy of the checkpoint, evaluated on BACKEND
    "$bin" --data "$data" --hidden 64,32 --epochs 0 --backend "$1" --load "$2" 2>"$tmp/err" | sed -n 's/^test accuracy: //p'
}
own=$(score cpu "$tmp/cpu.ck")
on_cpu=$(score cpu "$tmp/cuda.ck")
on_cuda=$(score cuda "$tmp/cuda.ck")
near "$own" "$on_cpu" 0.006 && near "$own" "$on_cuda" 0.006 ||
    fail "checkpoints: the CPU's scores '$own', the CUDA run's '$on_cpu' on the CPU and '$on_cuda' on the emulator"
pass "the CUDA run's checkpoint scores $on_cpu on the CPU and $on_cuda on the emulator (the CPU's own: $own)"

# ---- refusals -----------------------------------------------------------------------------------

"$bin" --data "$data" --backend gpu >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && grep -q "^train_mlp: --backend: 'gpu' is not cpu or cuda$" "$tmp/err" || fail "--backend gpu: exit $rc"
"$bin" --data "$data" --backend cuda --threads 2 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && grep -q "^train_mlp: --threads sets CPU threads" "$tmp/err" || fail "--threads with cuda: exit $rc"
PEBBLE_CUDA_MODULE=$tmp/no_such_module.so "$bin" --data "$data" --backend cuda --epochs 1 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] &&
    grep -q "^train_mlp: creating the training executor: the CUDA backend is not available: .*no_such_module.so: cannot open" "$tmp/err" ||
    fail "a module that cannot be loaded: exit $rc"
pass "refused: --backend gpu, --threads with cuda (exit 2); no loadable module (exit 1, one line)"

echo "$passed passed, 0 failed"
