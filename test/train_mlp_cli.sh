#!/usr/bin/env bash
# Command-line behaviour of examples/train_mlp on bad input: every failure is one line on
# stderr and a clean exit status (1, or 2 for a bad command line), never a crash; and
# checkpoints round-trip, while a failed save leaves the previous file as it was.
#
# Its command line follows the pebble tool's convention (tools/args): --flag=value, --help and
# --version on stdout with exit 0, exit 2 and the same words for the same mistakes; "-" is
# refused where it names no stream train_mlp can use.
#
# usage: train_mlp_cli.sh PATH/TO/train_mlp [PATH/TO/pebble]
#
# The data sets are tiny IDX files made here with bash, printf and gzip (no Python), so the
# test runs anywhere the program builds.
set -u

bin=${1:?usage: train_mlp_cli.sh PATH/TO/train_mlp [PATH/TO/pebble]}
pebble=${2:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/train_mlp_cli.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

. "$(dirname "$0")/cli_harness.sh" # pass, fail (run is train_mlp's own, below)

# ---- tiny IDX data sets ---------------------------------------------------------------------

# Writes $1 as a big-endian u32.
be32() {
    local h
    h=$(printf '%08x' "$1")
    printf "\\x${h:0:2}\\x${h:2:2}\\x${h:4:2}\\x${h:6:2}"
}

# One 28x28 image per class, each a flat grey of its own brightness, so a model can learn
# them; the data set cycles through the classes. $tmp/cycle.img holds 10 images, .lab 10 labels.
for c in 0 1 2 3 4 5 6 7 8 9; do
    head -c 784 /dev/zero | tr '\0' "\\$(printf '%03o' $((c * 25 + 5)))"
done >"$tmp/cycle.img"
printf '\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09' >"$tmp/cycle.lab"

# repeat FILE BYTES: FILE's bytes over and over, cut to BYTES.
repeat() {
    local n=$(($2 / $(stat -c %s "$1") + 1))
    for ((k = 0; k < n; k++)); do cat "$1"; done | head -c "$2"
}
# images OUT COUNT [MAGIC [STORED_COUNT]]: an images file; STORED_COUNT is what the header claims.
images() {
    { be32 "${3:-2051}"; be32 "${4:-$2}"; be32 28; be32 28; repeat "$tmp/cycle.img" $(($2 * 784)); } |
        gzip -n >"$1"
}
# labels OUT COUNT [MAGIC]
labels() {
    { be32 "${3:-2049}"; be32 "$2"; repeat "$tmp/cycle.lab" "$2"; } | gzip -n >"$1"
}
# dataset DIR: 256 training and 100 test samples, all valid.
dataset() {
    mkdir -p "$1"
    images "$1/train-images-idx3-ubyte.gz" 256
    labels "$1/train-labels-idx1-ubyte.gz" 256
    images "$1/t10k-images-idx3-ubyte.gz" 100
    labels "$1/t10k-labels-idx1-ubyte.gz" 100
}

good=$tmp/good
dataset "$good"

# ---- running the program --------------------------------------------------------------------

rc=0
run() {
    "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
}

no_crash() {
    if grep -q Sanitizer "$tmp/out" "$tmp/err"; then fail "$1: a sanitizer reported an error"; fi
    if [ "$rc" -ge 128 ]; then fail "$1: exit status $rc: killed by a signal (crash)"; fi
}

# expect_error STATUS PATTERN DESCRIPTION ARGS...: the run must exit with STATUS and print
# exactly one stderr line, `train_mlp: ...`, matching the extended regex PATTERN.
expect_error() {
    local want=$1 pattern=$2 desc=$3
    shift 3
    run "$@"
    no_crash "$desc"
    local lines
    lines=$(wc -l <"$tmp/err")
    [ "$rc" -eq "$want" ] || fail "$desc: exit status $rc, expected $want"
    [ "$lines" -eq 1 ] || fail "$desc: $lines lines on stderr, expected exactly 1"
    grep -Eq "^train_mlp: .*($pattern)" "$tmp/err" ||
        fail "$desc: stderr does not match 'train_mlp: ...($pattern)'"
    pass "$desc: exit $rc (expected $want), one stderr line matching /$pattern/: $(cat "$tmp/err")"
}

# expect_ok DESCRIPTION ARGS...: exit 0, nothing on stderr, last line "test accuracy: 0.dddd".
expect_ok() {
    local desc=$1
    shift
    run "$@"
    no_crash "$desc"
    [ "$rc" -eq 0 ] || fail "$desc: exit status $rc, expected 0"
    [ ! -s "$tmp/err" ] || fail "$desc: unexpected output on stderr"
    tail -n 1 "$tmp/out" | grep -Eq '^test accuracy: [01]\.[0-9]{4}$' ||
        fail "$desc: last line is not 'test accuracy: X.XXXX'"
}

# broken DIR: a copy of the good data set, for one file to be spoiled.
broken() {
    rm -rf "$1"
    cp -r "$good" "$1"
}

# ---- the command line -----------------------------------------------------------------------

expect_error 2 "unknown option" "nonsense flag" --frobnicate
expect_error 2 "unexpected argument 'extra'" "stray argument" extra
expect_error 2 "out of range" "--batch 0" --batch 0
expect_error 2 "not an integer" "--batch 12x" --batch 12x
expect_error 2 "not an integer" "--hidden abc" --hidden abc
expect_error 2 "not a comma-separated" "--hidden 16,,8" --hidden 16,,8
expect_error 2 "out of range" "--hidden 0" --hidden 0
expect_error 2 "needs a value" "--epochs without a value" --epochs
expect_error 2 "out of range" "--epochs -1" --epochs -1
expect_error 2 "out of range" "--lr -1" --lr -1
expect_error 2 "not a number" "--lr abc" --lr abc
expect_error 2 "not a non-negative" "--seed -5" --seed -5
expect_error 2 "out of range" "--threads 99999" --threads 99999
expect_error 2 "larger than the training set" "--batch over the training set size" \
    --data "$good" --batch 1000

run --help
[ "$rc" -eq 0 ] && grep -q -- '--hidden' "$tmp/out" && [ ! -s "$tmp/err" ] || fail "--help: exit $rc or no usage text"
cp "$tmp/out" "$tmp/help"
run -h
[ "$rc" -eq 0 ] && cmp -s "$tmp/out" "$tmp/help" || fail "-h: exit $rc or not --help's text"
pass "--help and -h: exit 0 and usage text on stdout, nothing on stderr"

# ---- the command-line convention (tools/args), shared with the pebble tool ------------------

run --version
[ "$rc" -eq 0 ] && [ ! -s "$tmp/err" ] && grep -Eq '^train_mlp [0-9]+\.[0-9]+\.[0-9]+ \(commit [0-9A-Za-z._+-]+\)$' "$tmp/out" ||
    fail "--version: exit $rc, '$(cat "$tmp/out")'"
pass "--version: exit 0, $(cat "$tmp/out")"
version=$(sed 's/^train_mlp //' "$tmp/out")

expect_error 2 "--epochs: 'abc' is not an integer" "--epochs=abc" --epochs=abc
expect_error 2 "--lr: 'x' is not a number" "--lr=x" --lr=x
expect_error 2 "--plan takes no value" "--plan=yes" --plan=yes
expect_error 2 "--version takes no value" "--version=1" --version=1
expect_error 2 "--batch: ' 12' is not an integer" "--batch ' 12' (a leading blank)" --batch " 12"
expect_error 2 "--hidden: '' is not a comma-separated" "--hidden= (empty)" --hidden=
expect_error 2 "unexpected argument '-x'" "-x after --" -- -x
for flag in --data --save --load --plot; do
    expect_error 2 "$flag -: " "$flag - (no standard stream fits)" --data "$good" --epochs 0 "$flag" -
    [ ! -e ./- ] && [ ! -e "$tmp/-" ] || fail "$flag -: a file named '-' was created"
done

if [ -n "$pebble" ]; then
    # the same version, and the same words for the same mistakes (after the program's name)
    [ "$("$pebble" --version)" = "pebble $version" ] || fail "pebble --version '$("$pebble" --version)' is not 'pebble $version'"
    pass "pebble --version and train_mlp --version report the same: $version"
    # same_words DESCRIPTION 'TRAIN_MLP ARGS' 'PEBBLE ARGS' [FLAG OTHER_FLAG]: stderr and exit
    # status alike, the programs' names (and pebble's FLAG for train_mlp's) set aside
    same_words() {
        local t p
        t=$("$bin" $2 2>&1 >/dev/null; echo "exit $?")
        p=$("$pebble" $3 2>&1 >/dev/null; echo "exit $?")
        t=${t//train_mlp/PROGRAM}
        p=${p//pebble/PROGRAM}
        [ $# -lt 5 ] || p=${p//$5/$4}
        [ "$t" = "$p" ] || fail "$1: train_mlp says '$t', pebble says '$p'"
        pass "$1: both say '${t//$'\n'/ }'"
    }
    same_words "unknown option" "--frobnicate" "--frobnicate"
    same_words "a missing value" "--threads" "run x.onnx --threads"
    same_words "a value to a flag that takes none" "--help=x" "plan --help=x"
    same_words "--version=x" "--version=x" "run --version=x"
    same_words "not an integer (--flag=value)" "--threads=x" "run x.onnx --threads=x"
    same_words "out of range" "--batch=0" "plan x.csv --batch=0"
    same_words "not a number" "--lr=abc" "run x.onnx --rtol=abc" --lr --rtol
else
    echo "# no pebble program given: the comparison with its convention is skipped"
fi

# ---- bad data -------------------------------------------------------------------------------

expect_error 1 "No such file" "missing data directory" --data "$tmp/nowhere"

broken "$tmp/d1"
full=$(stat -c %s "$good/train-images-idx3-ubyte.gz")
head -c $((full / 2)) "$good/train-images-idx3-ubyte.gz" >"$tmp/d1/train-images-idx3-ubyte.gz"
expect_error 1 "truncated" "train images .gz cut to $((full / 2)) of $full bytes" --data "$tmp/d1"

broken "$tmp/d2"
images "$tmp/d2/train-images-idx3-ubyte.gz" 200 2051 256 # header claims 256, data holds 200
expect_error 1 "truncated" "images header claims 256, data holds 200" --data "$tmp/d2"

broken "$tmp/d3"
images "$tmp/d3/train-images-idx3-ubyte.gz" 256 2052 # 0x00000804: rank 4
expect_error 1 "bad magic" "images magic 0x00000804" --data "$tmp/d3"

broken "$tmp/d4"
labels "$tmp/d4/t10k-labels-idx1-ubyte.gz" 100 2051 # an images magic on a labels file
expect_error 1 "bad magic" "labels magic 0x00000803" --data "$tmp/d4"

broken "$tmp/d5"
labels "$tmp/d5/train-labels-idx1-ubyte.gz" 255
expect_error 1 "255 labels for 256 images" "labels count mismatch (255 vs 256)" --data "$tmp/d5"

broken "$tmp/d6"
{ be32 2049; be32 256; repeat "$tmp/cycle.lab" 255; printf '\x0a'; } | gzip -n \
    >"$tmp/d6/train-labels-idx1-ubyte.gz"
expect_error 1 "label 255 is 10" "a label of 10" --data "$tmp/d6"

broken "$tmp/d7"
echo "not an idx file" >"$tmp/d7/t10k-images-idx3-ubyte.gz"
expect_error 1 "bad magic" "test images file of plain text" --data "$tmp/d7"

# ---- training options: schedules, AdamW, clipping -------------------------------------------

small=(--data "$good" --hidden 16 --batch 64)
expect_error 2 "--lr-schedule: 'linear' is not none, step or cosine" "--lr-schedule linear" --lr-schedule linear
expect_error 2 "out of range" "--warmup -1" --warmup -1
expect_error 2 "out of range" "--weight-decay 2" --weight-decay 2
expect_error 2 "not a number" "--clip abc" --clip abc
expect_error 2 "total_steps \\(4\\) must be greater than warmup_steps \\(9\\)" \
    "cosine with a warm-up longer than the run (256 images / 64 = 4 steps)" "${small[@]}" --val 0 --epochs 1 --lr-schedule cosine --warmup 9
# step and none have no end of their own, but the run has one: a warm-up past it never
# reaches --lr (a warm-up exactly as long reaches it at the last step)
for sched in step none; do
    expect_error 2 "--warmup: 5 steps outlast the run \\(4 steps in all\\)" \
        "--lr-schedule $sched with a warm-up longer than the run" "${small[@]}" --val 0 --epochs 1 --lr-schedule $sched --warmup 5
done
expect_ok "a warm-up as long as the run" "${small[@]}" --val 0 --epochs 1 --lr-schedule none --warmup 4
expect_ok "cosine schedule with warm-up, AdamW and clipping" "${small[@]}" --epochs 2 --lr-schedule cosine \
    --warmup 2 --weight-decay 0.01 --clip 1
expect_ok "step schedule" "${small[@]}" --epochs 1 --lr-schedule step
expect_ok "warm-up alone (a constant rate after it)" "${small[@]}" --epochs 1 --lr-schedule none --warmup 3
# every training example is used: 256 images at batch 100 are 3 steps, the last of 56 run
# through the same executor (pbl_exec_set_batch), not 2 steps with 56 images dropped
expect_ok "a partial last batch" --data "$good" --hidden 16 --batch 100 --epochs 2 --val 0
[ "$(grep -c '^epoch [12]/2  loss [0-9.]*  acc [0-9.]*  3 steps, 256 examples  ' "$tmp/out")" -eq 2 ] ||
    fail "a partial last batch: no 'epoch N/2  loss X  3 steps, 256 examples' lines"
pass "--batch 100 on 256 images: every epoch 3 steps over all 256 examples"

# ---- validation split, per-epoch report, --plot, best checkpoint -----------------------------

expect_error 2 "--val: 256 leaves no training images" "--val as large as the training set" "${small[@]}" --val 256
expect_error 2 "out of range" "--val -1" --val -1
expect_error 2 "out of range" "--dropout 1" --dropout 1
expect_error 2 "larger than the training set \(200 images after the validation split\)" \
    "--batch over what the validation split leaves" --data "$good" --val 56 --batch 201
expect_error 2 "--save .*: --plot names the same file" "--plot and --save one name" "${small[@]}" --save "$tmp/same" --plot "$tmp/same"
expect_error 2 "--plot .*/c.svg: its training graph .*/c.json would be written over the --save checkpoint" \
    "--plot c.svg with --save c.json" "${small[@]}" --save "$tmp/c.json" --plot "$tmp/c.svg"
expect_error 1 "$tmp/nodir/c.svg: .*No such file" "--plot into a missing folder" "${small[@]}" --epochs 1 --plot "$tmp/nodir/c.svg"
grep -q '^epoch' "$tmp/out" && fail "--plot into a missing folder: it trained before failing"
pass "--plot into a missing folder fails before the first epoch"

expect_ok "default validation split" "${small[@]}" --epochs 1
grep -Eq '^model .* train 235  validation 21  test 100$' "$tmp/out" ||
    fail "default --val: not a twelfth of 256 images (21) held out"
grep -Eq '^epoch 1/1  loss [0-9.]+  acc [0-9.]+  val loss [0-9.]+  val acc [0-9.]+  4 steps, 235 examples  [0-9.]+ s  [0-9]+ samples/s$' "$tmp/out" ||
    fail "default --val: the epoch line lacks loss, acc, val loss, val acc, time or samples/s"
pass "default --val: 21 of 256 images held out; $(grep '^epoch' "$tmp/out")"

expect_ok "--val 0" "${small[@]}" --epochs 1 --val 0
grep -Eq '^model .* train 256  validation 0  test 100$' "$tmp/out" && ! grep -q 'val acc' "$tmp/out" ||
    fail "--val 0: not every image trains, or a validation figure is printed"
pass "--val 0: all 256 images train, no validation figures"

svg=$tmp/curve.svg
best=$tmp/best.bin
# (Adam at a constant rate 0.01, batch 16: the validation accuracy rises and falls back in these
# 8 epochs here; a constant rate so that a shorter run trains its first epochs the same)
curve=(--data "$good" --hidden 16 --batch 16 --lr 0.01 --lr-schedule none --warmup 0 --weight-decay 0 --clip 0
       --val 56 --dropout 0.1)
expect_ok "--plot and --save with validation" "${curve[@]}" --epochs 8 --plot "$svg" --save "$best"
cp "$tmp/out" "$tmp/plot.out"
[ "$(grep -c '^epoch [1-8]/8 .* val acc ' "$tmp/out")" -eq 8 ] || fail "--plot run: not 8 epoch lines with val acc"
[ -s "$svg" ] || fail "--plot: no picture at $svg"
if command -v python3 >/dev/null; then
    python3 -c 'import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); sys.exit(r.tag != "{http://www.w3.org/2000/svg}svg")' "$svg" ||
        fail "--plot: $svg is not a well-formed SVG document"
elif command -v xmllint >/dev/null; then
    xmllint --noout "$svg" || fail "--plot: $svg is not well-formed XML"
else
    echo "# neither python3 nor xmllint: the SVG's well-formedness is not checked"
fi
for word in '>training<' '>validation<' '>epoch<' '>Loss<' '>Accuracy<' 'loss (mean cross-entropy, nats)' 'accuracy (fraction of images right)'; do
    grep -qF "$word" "$svg" || fail "--plot: the picture has no '$word' (legend, axis or panel title)"
done
[ "$(grep -c '<polyline' "$svg")" -eq 4 ] || fail "--plot: not 4 curves (training and validation, loss and accuracy)"
[ -s "$tmp/curve.json" ] && grep -q "^plot: $svg; memory view of the training step: pebble viz $tmp/curve.json --html $tmp/curve.html$" "$tmp/out" ||
    fail "--plot: no training graph beside the picture, or no 'pebble viz' line"
if [ -n "$pebble" ]; then
    "$pebble" viz "$tmp/curve.json" --html "$tmp/curve.html" >/dev/null 2>&1 && grep -q '<html' "$tmp/curve.html" ||
        fail "pebble viz on train_mlp's graph: no page"
fi
pass "--plot: well-formed SVG with two panels, 4 curves, legend and axis labels; the 'pebble viz' line's graph makes a page"

# --save at the epochs that improve validation accuracy, and only at those; the last of them is
# the one reported, and the checkpoint is that epoch's model: the same seed trained for
# exactly that many epochs (a constant rate, so the first epochs are the same) saves the same bytes
awk '/^epoch / { for (i = 1; i <= NF; i++) if ($i == "val" && $(i + 1) == "acc") a = $(i + 2) + 0;
                 saved = / saved \(best val acc\)$/; split($2, e, "/");
                 if (saved != (a > best)) { print "epoch " e[1] ": val acc " a ", best before " best ", saved " saved; bad = 1 }
                 if (saved) { best = a; last = e[1] } }
     END { if (bad || !last) exit 1; print last }' best=-1 "$tmp/plot.out" >"$tmp/best_epoch" ||
    { cat "$tmp/best_epoch"; fail "--save: a save at an epoch that did not improve validation accuracy, or none at one that did"; }
k=$(cat "$tmp/best_epoch")
grep -q "^best validation accuracy [0-9.]* at epoch $k: its model is saved in $best$" "$tmp/plot.out" ||
    fail "--save: the report does not name epoch $k, the last improving one"
expect_ok "train only to the best epoch" "${curve[@]}" --epochs "$k" --save "$tmp/best_k.bin"
cmp -s "$best" "$tmp/best_k.bin" || fail "--save: the checkpoint is not the model of epoch $k"
pass "--save kept epoch $k of 8, saved at epochs $(grep -n 'saved (best val acc)$' "$tmp/plot.out" | sed 's/^.*epoch \([0-9]*\)\/.*/\1/' | tr '\n' ' ')and no other (val acc: $(grep -o 'val acc [0-9.]*' "$tmp/plot.out" | cut -d' ' -f3 | tr '\n' ' ')); the same bytes as a run stopped at epoch $k"

# ---- checkpoints ----------------------------------------------------------------------------

ck=$tmp/ck.bin

expect_ok "train 1 epoch and save" "${small[@]}" --epochs 1 --save "$ck"
[ -s "$ck" ] || fail "train 1 epoch and save: no checkpoint at $ck"
trained=$(tail -n 1 "$tmp/out")
pass "train 1 epoch, --batch 64 --hidden 16 --save: exit 0, '$trained', checkpoint of $(stat -c %s "$ck") bytes"
expect_ok "train with --flag=value" --data="$good" --hidden=16 --batch=64 --epochs=1 --save="$tmp/ck.eq"
[ "$(tail -n 1 "$tmp/out")" = "$trained" ] && cmp -s "$tmp/ck.eq" "$ck" || fail "--flag=value: another result than --flag value"
pass "--data=D --hidden=16 --batch=64 --epochs=1 --save=F: '$trained' and the same checkpoint bytes as the spaced forms"

cp "$ck" "$tmp/ck.orig"
expect_ok "load and evaluate" "${small[@]}" --epochs 0 --load "$ck"
loaded=$(tail -n 1 "$tmp/out")
[ "$loaded" = "$trained" ] || fail "load: '$loaded' differs from the trained model's '$trained'"
pass "--load with --epochs 0: '$loaded', the same as right after training"

expect_ok "load and save again" "${small[@]}" --epochs 0 --load "$ck" --save "$tmp/ck.again"
cmp -s "$tmp/ck.again" "$ck" || fail "load then save: the new file differs from the loaded one"
pass "--load then --save with no training: the two checkpoints are byte-identical"

size=$(stat -c %s "$ck")
flip_at=$((size / 2))
cp "$ck" "$tmp/ck.flipped"
byte=$(od -An -tu1 -j "$flip_at" -N1 "$ck" | tr -d ' ')
printf "\\x$(printf '%02x' $((byte ^ 0xff)))" |
    dd of="$tmp/ck.flipped" bs=1 seek="$flip_at" conv=notrunc status=none
cmp -s "$ck" "$tmp/ck.flipped" && fail "flipping a byte did not change the file"
expect_error 1 "CRC-32 mismatch" "checkpoint with byte $flip_at of $size flipped" \
    "${small[@]}" --epochs 0 --load "$tmp/ck.flipped"

head -c $((size - 1000)) "$ck" >"$tmp/ck.short"
expect_error 1 "truncated" "checkpoint cut to $((size - 1000)) of $size bytes" \
    "${small[@]}" --epochs 0 --load "$tmp/ck.short"
head -c 10 "$ck" >"$tmp/ck.tiny"
expect_error 1 "too short" "checkpoint cut to 10 bytes" \
    "${small[@]}" --epochs 0 --load "$tmp/ck.tiny"
: >"$tmp/ck.empty"
expect_error 1 "too short" "empty checkpoint" "${small[@]}" --epochs 0 --load "$tmp/ck.empty"

expect_error 1 "fc1/w.*\[16, 784\].*\[32, 784\]" "checkpoint from --hidden 16 loaded with --hidden 32" \
    --data "$good" --hidden 32 --epochs 0 --load "$ck"
expect_error 1 "fc2/w.*\[10, 16\].*\[8, 16\]" "checkpoint from --hidden 16 loaded with --hidden 16,8" \
    --data "$good" --hidden 16,8 --epochs 0 --load "$ck"
expect_error 1 "bad magic" "a gzip file as checkpoint" \
    "${small[@]}" --epochs 0 --load "$good/t10k-labels-idx1-ubyte.gz"
expect_error 1 "No such file" "missing checkpoint" "${small[@]}" --epochs 0 --load "$tmp/nothing"
expect_error 1 "not a regular file" "a directory as checkpoint" \
    "${small[@]}" --epochs 0 --load "$tmp"

# --load resumes the run its checkpoint came from: 2 epochs saved, then --epochs 4 --load trains
# epochs 3 and 4 only, the schedule and the shuffling going on where they stopped (Adam's step
# is the runtime scalar "step" the checkpoint holds), and ends with the bytes of 4 epochs
# straight. A step schedule with a set warm-up, so the first run's rates are the straight run's.
resume=(--data "$good" --hidden 16 --batch 16 --lr 0.01 --lr-schedule step --warmup 5 --val 0 --dropout 0.1
        --threads 1)
expect_ok "2 epochs, saved" "${resume[@]}" --epochs 2 --save "$tmp/r2.bin"
expect_ok "--epochs 4 --load the 2-epoch checkpoint" "${resume[@]}" --epochs 4 --load "$tmp/r2.bin" --save "$tmp/r4.bin" \
    --plot "$tmp/resumed.svg"
cp "$tmp/out" "$tmp/resumed.out"
# its picture shows epochs 3 and 4 under their own numbers (it once numbered them 1 and 2)
grep -q '<title>epoch 3 training loss ' "$tmp/resumed.svg" && grep -q '<title>epoch 4 training loss ' "$tmp/resumed.svg" &&
    ! grep -q '<title>epoch [12] ' "$tmp/resumed.svg" && grep -q 'text-anchor="middle">3</text>' "$tmp/resumed.svg" ||
    fail "--load --plot: the picture does not number the resumed epochs 3 and 4"
grep -q '^resuming after epoch 2 (step 32)$' "$tmp/resumed.out" && ! grep -q '^epoch [12]/4' "$tmp/resumed.out" &&
    [ "$(grep -c '^epoch [34]/4 ' "$tmp/resumed.out")" -eq 2 ] ||
    fail "--load: the resumed run does not say it resumes after epoch 2, or does not train epochs 3 and 4 only"
expect_ok "4 epochs straight" "${resume[@]}" --epochs 4 --save "$tmp/s4.bin"
cmp -s "$tmp/r4.bin" "$tmp/s4.bin" || fail "--load: 2 epochs + 2 resumed do not save the bytes of 4 straight"
[ "$(tail -n 1 "$tmp/resumed.out")" = "$(tail -n 1 "$tmp/out")" ] || fail "--load: the resumed run's test accuracy differs"
pass "--load resumes: 2 epochs + --epochs 4 --load trains epochs 3-4, the checkpoint byte-identical to 4 straight ($(tail -n 1 "$tmp/out"))"
expect_ok "--load a finished run" "${resume[@]}" --epochs 2 --load "$tmp/r2.bin"
grep -q '^resuming after epoch 2 (step 32): every epoch of --epochs is done$' "$tmp/out" && ! grep -q '^epoch ' "$tmp/out" ||
    fail "--load of a run that did every epoch: it trained again"
expect_error 2 "after step 32, inside an epoch of 6 steps" "--load with another --batch" \
    "${resume[@]}" --batch 48 --epochs 4 --load "$tmp/r2.bin"
# a checkpoint whose last scalar (the 4 bytes before the CRC) is NaN, with a CRC that matches
# (gzip's trailer holds the CRC-32 of its input, little-endian, as the checkpoint stores it)
size=$(stat -c %s "$tmp/r2.bin")
{ head -c $((size - 8)) "$tmp/r2.bin"; printf '\x00\x00\xc0\x7f'; } >"$tmp/nan.body"
{ cat "$tmp/nan.body"; gzip -c "$tmp/nan.body" | tail -c 8 | head -c 4; } >"$tmp/nan.bin"
expect_error 1 "nan.bin': scalar '[a-z]*' is NaN" "a checkpoint with a NaN scalar" \
    "${resume[@]}" --epochs 4 --load "$tmp/nan.bin"
# the same place holding a finite "step" that is no step count: 1e30 (its conversion to an
# integer overflowed), 16.5 (was truncated to step 16, a resume at the wrong step) and -3 (was
# taken for a fresh run); each is refused as a bad checkpoint, exit 1
for bits in 'ca f2 49 71:1e\+30' '00 00 84 41:16.5' '00 00 40 c0:-3'; do
    hex=${bits%%:*} shown=${bits#*:}
    { head -c $((size - 8)) "$tmp/r2.bin"; printf "\\x${hex// /\\x}"; } >"$tmp/step.body"
    { cat "$tmp/step.body"; gzip -c "$tmp/step.body" | tail -c 8 | head -c 4; } >"$tmp/step.bin"
    expect_error 1 "step.bin: its 'step' scalar is $shown, not a step count" "a checkpoint whose step is $shown" \
        "${resume[@]}" --epochs 4 --load "$tmp/step.bin"
done

# ---- saves that fail leave what was there ---------------------------------------------------

leftovers() { find "$tmp" -name '*.tmp.*' | wc -l; }

expect_error 1 "No such file" "save into a missing directory" \
    "${small[@]}" --epochs 0 --save "$tmp/missing/ck.bin"
[ ! -e "$tmp/missing" ] || fail "save into a missing directory created it"

mkdir "$tmp/adir"
echo keep >"$tmp/adir/inside"
expect_error 1 "$tmp/adir: is a directory" "save over a directory" "${small[@]}" --epochs 0 --save "$tmp/adir"
[ -d "$tmp/adir" ] && [ "$(cat "$tmp/adir/inside")" = keep ] ||
    fail "save over a directory: the directory or its contents changed"
[ "$(leftovers)" -eq 0 ] || fail "save over a directory left a temporary file behind"
pass "save over a directory: the directory and its file are intact, no temporary file left"

# A real write failure part-way through the new file: with a file-size limit of 8 KiB the
# kernel refuses the checkpoint's writes with EFBIG (SIGXFSZ is ignored so the write returns
# an error instead of killing the process; an ignored signal stays ignored across exec).
# The existing checkpoint must come through byte for byte.
cp "$tmp/ck.orig" "$ck"
(
    trap '' XFSZ
    ulimit -f 8
    exec "$bin" "${small[@]}" --epochs 1 --seed 7 --save "$ck"
) >"$tmp/out" 2>"$tmp/err"
rc=$?
no_crash "save under a file-size limit"
[ "$rc" -eq 1 ] || fail "save under a file-size limit: exit status $rc, expected 1"
[ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "File too large" "$tmp/err" ||
    fail "save under a file-size limit: stderr is not one 'File too large' line"
cmp -s "$ck" "$tmp/ck.orig" || fail "save under a file-size limit: the old checkpoint changed"
[ "$(leftovers)" -eq 0 ] || fail "save under a file-size limit left a temporary file behind"
pass "save failing with EFBIG after training: exit 1, '$(cat "$tmp/err")'; old checkpoint ($size bytes) byte-identical, no temporary file left"

expect_ok "save over an existing checkpoint" "${small[@]}" --epochs 1 --seed 7 --save "$ck"
cmp -s "$ck" "$tmp/ck.orig" && fail "save over an existing checkpoint: the file did not change"
[ "$(leftovers)" -eq 0 ] || fail "successful save left a temporary file behind"
pass "save over an existing checkpoint (another seed) replaces it, no temporary file left"

# ---- saves go where the path leads ----------------------------------------------------------

ln -s ck.bin "$tmp/ck.link"
expect_ok "save through a symbolic link" "${small[@]}" --epochs 0 --load "$tmp/ck.orig" --save "$tmp/ck.link"
[ -L "$tmp/ck.link" ] && [ "$(readlink "$tmp/ck.link")" = ck.bin ] ||
    fail "save through a symbolic link: the link was replaced"
cmp -s "$ck" "$tmp/ck.orig" || fail "save through a symbolic link: its target does not hold the saved model"
pass "save through ck.link -> ck.bin: the link stays, ck.bin holds the saved model"

mkfifo "$tmp/ck.fifo"
timeout 20 cat "$tmp/ck.fifo" >"$tmp/from.fifo" &
reader=$!
expect_ok "save onto a FIFO" "${small[@]}" --epochs 0 --load "$tmp/ck.orig" --save "$tmp/ck.fifo"
wait "$reader" || fail "save onto a FIFO: its reader ended with status $? (124: it never saw the writer)"
[ -p "$tmp/ck.fifo" ] || fail "save onto a FIFO: it is no longer a FIFO"
cmp -s "$tmp/from.fifo" "$tmp/ck.orig" || fail "save onto a FIFO: the reader got other bytes than the model"
pass "save onto a FIFO: the reader got the $(stat -c %s "$tmp/from.fifo")-byte checkpoint, the FIFO is still a FIFO"

chmod 600 "$ck"
(umask 022 && exec "$bin" "${small[@]}" --epochs 1 --seed 7 --save "$ck") >"$tmp/out" 2>"$tmp/err"
rc=$?
no_crash "save over a 0600 checkpoint"
[ "$rc" -eq 0 ] || fail "save over a 0600 checkpoint: exit status $rc"
[ "$(stat -c %a "$ck")" = 600 ] || fail "save over a 0600 checkpoint: its mode is now $(stat -c %a "$ck")"
[ "$(leftovers)" -eq 0 ] || fail "save over a 0600 checkpoint left a temporary file behind"
pass "save over a 0600 checkpoint (umask 022): still 0600"

echo "$passed passed, 0 failed"
