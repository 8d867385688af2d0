#!/usr/bin/env bash
# Hostile and careless inputs (issue 14, the input side): every reader refuses what is not a
# regular file at once (a FIFO with no writer must not block, /dev/zero must not eat memory),
# caps what it reads, and refuses values it used to accept silently (an .npy of another shape
# or with trailing bytes, a gzip IDX file without its trailer, "lr": "inf"); messages name the
# right thing and never send escape sequences or broken UTF-8 to the terminal; `pebble run`
# accepts the --input its own hint asks for, and the files written to standard output carry
# no ESC, BEL or C1 CSI byte from a hostile name. Each case fails on the code before the fix:
# 43 hostile cases (36 without train_mlp, 4 fewer without libonnx-testdata), besides 3 controls
# (the untouched graph checks, the untouched ONNX model runs, the tiny data set trains) and
# one extra assertion (no ESC byte at all on stderr).
#
# usage: hostile_inputs.sh PATH/TO/pebble [PATH/TO/train_mlp]
set -u
bin=${1:?usage: hostile_inputs.sh PATH/TO/pebble [PATH/TO/train_mlp]}
train=${2:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hostile_inputs.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/cli_harness.sh"

# every run is bounded: a reader that blocks on a FIFO or reads /dev/zero forever is a failure
# (exit 124 from timeout), not a hung suite
run() {
    timeout 20 "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if grep -q Sanitizer "$tmp/out" "$tmp/err"; then fail "pebble $*: a sanitizer reported an error"; fi
    [ "$rc" -ne 124 ] || fail "pebble $*: still running after 20 s (blocked, or reading without a limit)"
    if [ "$rc" -ge 128 ]; then fail "pebble $*: exit status $rc: killed by a signal (crash)"; fi
}
# expect_error STATUS PATTERN DESCRIPTION ARGS...: exit STATUS, one stderr line matching PATTERN
expect_error() {
    local want=$1 pattern=$2 desc=$3
    shift 3
    run "$@"
    [ "$rc" -eq "$want" ] || fail "$desc: exit status $rc, expected $want"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "$desc: not exactly one line on stderr"
    grep -Eq "^pebble: .*($pattern)" "$tmp/err" || fail "$desc: stderr does not match '$pattern'"
    pass "$desc: $(cat "$tmp/err")"
}

# ---- fixtures -------------------------------------------------------------------------------

# npy OUT DESCR SHAPE DATA_BYTES [EXTRA_BYTES]: a .npy v1.0 file of zero data
npy() {
    local dict="{'descr': '$2', 'fortran_order': False, 'shape': $3, }"
    local total=$(((10 + ${#dict} + 1 + 63) / 64 * 64)) hl
    hl=$((total - 10))
    {
        printf '\x93NUMPY\x01\x00'
        printf "\\x$(printf '%02x' $((hl % 256)))\\x$(printf '%02x' $((hl / 256)))"
        printf '%s' "$dict"
        printf '%*s\n' $((hl - ${#dict} - 1)) ''
        head -c $(($4 + ${5:-0})) /dev/zero
    } >"$1"
}
"$bin" export zoo:mlp --json "$tmp/mlp.json" || fail "export zoo:mlp"
"$bin" export zoo:mlp_train --json "$tmp/train.json" || fail "export zoo:mlp_train"
mkfifo "$tmp/fifo.json" "$tmp/fifo.csv" "$tmp/fifo.onnx" "$tmp/fifo.npy" "$tmp/fifo.pb"
for ext in json csv onnx npy pb; do ln -s /dev/zero "$tmp/zero.$ext"; done
# sparse files one byte over each limit: no disk is written
truncate -s $(((1 << 30) + 1)) "$tmp/big.json" "$tmp/big.csv"
truncate -s $(((2 << 30) + 1)) "$tmp/big.onnx" "$tmp/big.pb"

# ---- bounded inputs: no blocking, no unbounded reads ----------------------------------------

expect_error 1 "/dev/zero: is a character device, not a regular file" "check /dev/zero" check /dev/zero
expect_error 1 "zero.json: is a character device, not a regular file" "plan z.json -> /dev/zero" plan "$tmp/zero.json"
expect_error 1 "zero.onnx: is a character device, not a regular file" "plan z.onnx -> /dev/zero" plan "$tmp/zero.onnx"
expect_error 1 "zero.csv: is a character device, not a regular file" "check z.csv -> /dev/zero" check "$tmp/zero.csv"
expect_error 1 "zero.json: is a character device" "run z.json -> /dev/zero" run "$tmp/zero.json"
expect_error 1 "fifo.json: is a FIFO, not a regular file" "plan on a FIFO with no writer" plan "$tmp/fifo.json"
expect_error 1 "fifo.csv: is a FIFO, not a regular file" "check on a FIFO with no writer" check "$tmp/fifo.csv"
expect_error 1 "fifo.onnx: is a FIFO, not a regular file" "run on an ONNX FIFO" run "$tmp/fifo.onnx"
npy "$tmp/x.npy" '<f4' '(128, 784)' $((128 * 784 * 4))
expect_error 1 "zero.npy: is a character device" "run --input x=/dev/zero (.npy)" run "$tmp/mlp.json" --input x="$tmp/zero.npy" --zero-unbound
expect_error 1 "zero.pb: is a character device" "run --input x=/dev/zero (.pb)" run "$tmp/mlp.json" --input x="$tmp/zero.pb" --zero-unbound
expect_error 1 "fifo.npy: is a FIFO" "run --input x=FIFO (.npy)" run "$tmp/mlp.json" --input x="$tmp/fifo.npy" --zero-unbound
expect_error 1 "fifo.pb: is a FIFO" "run --expect y=FIFO (.pb)" run "$tmp/mlp.json" --input x="$tmp/x.npy" --zero-unbound --expect logits="$tmp/fifo.pb"
expect_error 2 "big.json: 1073741825 bytes is more than a JSON graph may hold \(1 GiB\)" "a JSON graph over 1 GiB" check "$tmp/big.json"
expect_error 2 "big.csv: 1073741825 bytes is more than a records CSV may hold \(1 GiB\)" "a records CSV over 1 GiB" plan "$tmp/big.csv"
expect_error 2 "big.onnx: 2147483649 bytes is more than a protobuf file may hold \(2 GiB\)" "an ONNX model over 2 GiB" plan "$tmp/big.onnx"
expect_error 2 "big.pb: 2147483649 bytes is more than a protobuf file may hold \(2 GiB\)" "a .pb tensor over 2 GiB" run "$tmp/mlp.json" --input x="$tmp/big.pb" --zero-unbound

# ---- strict validation ----------------------------------------------------------------------

# .npy: the shape exactly, the data exactly
npy "$tmp/t.npy" '<f4' '(784, 128)' $((128 * 784 * 4))
expect_error 2 "--input x: .*t.npy holds f32 \[784, 128\] but the input is f32 \[128, 784\]" \
    ".npy of the same element count, another shape" run "$tmp/mlp.json" --input x="$tmp/t.npy" --zero-unbound
npy "$tmp/trail.npy" '<f4' '(128, 784)' $((128 * 784 * 4)) 3
expect_error 2 "trail.npy: the data is longer than its shape \[128, 784\] says" ".npy with trailing bytes" \
    run "$tmp/mlp.json" --input x="$tmp/trail.npy" --zero-unbound
npy "$tmp/short.npy" '<f4' '(128, 784)' 100
expect_error 2 "short.npy: the data is shorter than its shape" ".npy with too little data" \
    run "$tmp/mlp.json" --input x="$tmp/short.npy" --zero-unbound
# a header promising 2^40 elements over 32 KB: "shorter", not "out of memory"
npy "$tmp/huge.npy" '<f4' '(1048576, 1048576)' 32768
expect_error 2 "huge.npy: the data is shorter than its shape \[1048576, 1048576\] says" \
    ".npy promising 2^40 elements over 32 KB" run "$tmp/mlp.json" --input x="$tmp/huge.npy" --zero-unbound
# a JSON graph with an infinite learning rate (the format spells infinities "inf")
sed '0,/"lr": 0.001/s//"lr": "inf"/' "$tmp/train.json" >"$tmp/inf.json"
grep -q '"lr": "inf"' "$tmp/inf.json" || fail "the fixture has no \"lr\": \"inf\""
expect_error 2 "inf.json: .*lr \(inf\) and weight_decay \(0\) must be finite and non-negative" '"lr": "inf" in a JSON graph' \
    check "$tmp/inf.json"
run check "$tmp/train.json"
[ "$rc" -eq 0 ] || fail "the unmodified graph does not check"
pass "the same graph with its own lr checks"

# an ONNX model (libonnx-testdata's Gemm test) patched in place, each a byte the same length:
# its opset (the last byte, 13), its transB attribute (offset 91: the name, 98: the value) and
# its alpha
gemm=/usr/share/libonnx-testdata/data/node/test_gemm_all_attributes
if [ -f "$gemm/model.onnx" ] && [ "$(tail -c 6 "$gemm/model.onnx" | od -An -tx1 | tr -d ' \n')" = 42040a00100d ] &&
    [ "$(dd if="$gemm/model.onnx" bs=1 skip=91 count=8 2>/dev/null)" = "$(printf 'transB\x18\x01')" ] &&
    [ "$(dd if="$gemm/model.onnx" bs=1 skip=43 count=5 2>/dev/null)" = alpha ]; then
    set0=$gemm/test_data_set_0
    ins=(--input a="$set0/input_0.pb" --input b="$set0/input_1.pb" --input c="$set0/input_2.pb")
    # patch OUT OFFSET BYTE: the model with one byte replaced
    patch() {
        cp "$gemm/model.onnx" "$1"
        printf "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
    }
    run run "$gemm/model.onnx" "${ins[@]}"
    [ "$rc" -eq 0 ] || fail "the unpatched Gemm model does not run"
    end=$(($(stat -c %s "$gemm/model.onnx") - 1))
    patch "$tmp/opset0.onnx" $end '\x00'
    expect_error 2 "opset0.onnx: opset_import\[0\]: the default domain's opset version is 0; pebble accepts 1 to 22" \
        "an ONNX model importing opset 0" run "$tmp/opset0.onnx" "${ins[@]}"
    patch "$tmp/opset127.onnx" $end '\x7f'
    expect_error 2 "opset127.onnx: .*opset version is 127; pebble accepts 1 to 22" "an ONNX model importing opset 127" \
        run "$tmp/opset127.onnx" "${ins[@]}"
    patch "$tmp/transb7.onnx" 98 '\x07'
    expect_error 2 "transb7.onnx: node #0 \(Gemm\): attribute transB is 7; it must be 0 or 1" "Gemm transB=7" \
        run "$tmp/transb7.onnx" "${ins[@]}"
    # "alpha" (offset 43) renamed "alphx": ignored, the product would silently lose its 0.25
    patch "$tmp/alphx.onnx" 47 'x'
    expect_error 2 "alphx.onnx: node #0 \(Gemm\): attribute 'alphx' is not one pebble knows for Gemm" \
        "Gemm with an attribute it does not have (alphx)" run "$tmp/alphx.onnx" "${ins[@]}"
else
    echo "note: $gemm/model.onnx is missing or not the expected bytes: its 4 ONNX cases are not run"
fi

# ---- messages -------------------------------------------------------------------------------

# untrusted names reach the terminal escaped: an escape sequence (a title change, a screen
# clear) and bytes that are not UTF-8, in a file name and in a value's name from a file
esc=$'\e]0;pwned\a\e[2J'
expect_error 1 'no-such\\x1b\]0;pwned\\x07\\x1b\[2J.csv: cannot open' "a file name with escape sequences" \
    plan "$tmp/no-such$esc.csv"
grep -q $'\e' "$tmp/err" && fail "an ESC byte reached stderr"
pass "no ESC or BEL byte on stderr"
expect_error 1 'no-such-\\xff\\xfe-é\.csv: cannot open' "a file name with invalid UTF-8 (valid é kept)" \
    plan "$tmp/no-such-"$'\xff\xfe'"-é.csv"
sed 's/"fc1\/w"/"fc1\/w\\u001b[31m\\u009b"/g' "$tmp/mlp.json" >"$tmp/evil.json"
run run "$tmp/evil.json" --input x="$tmp/x.npy"
[ "$rc" -eq 2 ] && grep -q 'fc1/w\\x1b\[31m\\xc2\\x9b' "$tmp/err" && ! grep -q $'\e' "$tmp/err" ||
    fail "a value's name with ESC and C1 CSI from a JSON graph: not escaped"
pass "a value's name from a graph file is escaped: $(cat "$tmp/err")"
# ... and on stdout, where run prints each output by name
sed 's/"logits"/"lo\\u001b[2Jgits"/g' "$tmp/mlp.json" >"$tmp/evil2.json"
run run "$tmp/evil2.json" --zero-unbound
[ "$rc" -eq 0 ] && grep -q '^output lo\\x1b\[2Jgits \[128, 10\]' "$tmp/out" && ! grep -q $'\e' "$tmp/out" ||
    fail "an output's name with ESC: not escaped on stdout"
pass "an output's name from a graph file is escaped on stdout: $(grep '^output' "$tmp/out" | cut -c1-40)"
# ... and in every file a command writes to standard output (`-`), which is a terminal as
# often as a pipe: ESC, BEL and the C1 CSI (U+009B) in every name, written escaped
sed 's/"\(x\|fc1\|fc1\/w\|logits\)"/"\1\\u001b]0;t\\u0007\\u009b2J"/g' "$tmp/mlp.json" >"$tmp/evil3.json"
grep -q 'fc1/w\\u001b' "$tmp/evil3.json" || fail "the fixture evil3.json has no hostile names"
for c in "plan --out -" "viz --svg -" "viz --dot -" "viz --html -" "export --json -" \
    "run --zero-unbound --format json"; do
    set -- $c
    cmd=$1
    shift
    run "$cmd" "$tmp/evil3.json" "$@"
    [ "$rc" -eq 0 ] || fail "pebble $cmd evil3.json $*: exit $rc"
    if grep -q $'\e\|\a\|\xc2\x9b' "$tmp/out" "$tmp/err"; then
        fail "pebble $cmd evil3.json $*: ESC, BEL or C1 CSI bytes reach standard output"
    fi
    pass "pebble $cmd evil3.json $*: hostile names written escaped"
done
# pebble run's hint names --input for a parameter; that flag is then accepted
run run "$tmp/mlp.json" --input x="$tmp/x.npy"
[ "$rc" -eq 2 ] && grep -q "param 'fc1/w' \[256, 784\] has no data (give --input fc1/w=FILE" "$tmp/err" ||
    fail "run without fc1/w's data: no hint naming --input fc1/w=FILE"
npy "$tmp/w1.npy" '<f4' '(256, 784)' $((256 * 784 * 4))
run run "$tmp/mlp.json" --input x="$tmp/x.npy" --input fc1/w="$tmp/w1.npy"
[ "$rc" -eq 2 ] && grep -q "param 'fc1/b' .* has no data (give --input fc1/b=FILE" "$tmp/err" ||
    fail "--input fc1/w=FILE, as the hint says, is refused"
pass "--input PARAM=FILE, the hint's own advice, is accepted (the next hint: $(cat "$tmp/err"))"

# ---- train_mlp: checkpoints and IDX files ---------------------------------------------------

if [ -n "$train" ]; then
    bin=$train
    expect_train_error() {
        local pattern=$1 desc=$2
        shift 2
        run "$@"
        [ "$rc" -eq 1 ] || fail "$desc: exit status $rc, expected 1"
        grep -Eq "^train_mlp: .*($pattern)" "$tmp/err" || fail "$desc: stderr does not match '$pattern'"
        pass "$desc: $(cat "$tmp/err")"
    }
    mkfifo "$tmp/fifo.ckpt"
    expect_train_error "fifo.ckpt: is a FIFO, not a regular file" "train_mlp --load FIFO" --load "$tmp/fifo.ckpt"
    expect_train_error "/dev/zero: is a character device, not a regular file" "train_mlp --load /dev/zero" --load /dev/zero
    be32() {
        local h
        h=$(printf '%08x' "$1")
        printf "\\x${h:0:2}\\x${h:2:2}\\x${h:4:2}\\x${h:6:2}"
    }
    d=$tmp/data
    mkdir "$d"
    { be32 2051; be32 16; be32 28; be32 28; head -c $((16 * 784)) /dev/zero | tr '\0' '\100'; } | gzip -n >"$d/train-images-idx3-ubyte.gz"
    { be32 2049; be32 16; printf '\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x00\x01\x02\x03\x04\x05'; } |
        gzip -n >"$d/train-labels-idx1-ubyte.gz"
    cp "$d/train-images-idx3-ubyte.gz" "$d/t10k-images-idx3-ubyte.gz"
    cp "$d/train-labels-idx1-ubyte.gz" "$d/t10k-labels-idx1-ubyte.gz"
    run --data "$d" --epochs 1 --batch 8
    [ "$rc" -eq 0 ] || fail "train_mlp on the whole tiny data set: exit $rc"
    pass "train_mlp trains on the tiny data set with whole gzip files"
    # without the 8-byte trailer (CRC-32 and length), or only its last 4 bytes: truncated
    for cut in 8 4 1; do
        f=$d/train-images-idx3-ubyte.gz
        cp "$f" "$tmp/whole.gz"
        head -c -$cut "$tmp/whole.gz" >"$f"
        expect_train_error "train-images-idx3-ubyte.gz: truncated: the gzip stream ends before its trailer" \
            "a gzip IDX file missing the last $cut byte(s) of its trailer" --data "$d" --epochs 1 --batch 8
        cp "$tmp/whole.gz" "$f"
    done
    # a whole trailer whose CRC-32 does not match the data
    f=$d/train-images-idx3-ubyte.gz
    cp "$f" "$tmp/whole.gz"
    n=$(stat -c %s "$f")
    printf '\x00\x00\x00\x00' | dd of="$f" bs=1 seek=$((n - 8)) conv=notrunc 2>/dev/null
    cmp -s "$f" "$tmp/whole.gz" && fail "the CRC fixture is unchanged"
    expect_train_error "train-images-idx3-ubyte.gz: corrupt gzip data: incorrect data check" \
        "a gzip IDX file whose CRC-32 is wrong (the message names the file, not <fd:N>)" --data "$d" --epochs 1 --batch 8
    cp "$tmp/whole.gz" "$f"
    rm "$d/train-labels-idx1-ubyte.gz"
    mkfifo "$d/train-labels-idx1-ubyte.gz"
    expect_train_error "train-labels-idx1-ubyte.gz: is a FIFO, not a regular file" "an IDX file that is a FIFO" \
        --data "$d" --epochs 1 --batch 8
else
    echo "note: no train_mlp given: its checkpoint and IDX cases are not run"
fi

echo "$passed passed"
