#!/usr/bin/env bash
# "naive" means one thing on every command line: the naive strategy's arena on a graph's
# records (in-place sharing taken), and "unshared" the other baseline, every node output in its
# own bytes. For zoo:mlp_train — the model of examples/train_mlp — `pebble plan --strategy
# naive` (on the zoo graph and on its JSON export), `pebble run` (text and JSON) and
# `train_mlp --plan` must all print the same naive figure, and the two programs that run the
# graph the same unshared figure, above it.
#
# usage: baselines_cli.sh PATH/TO/pebble [PATH/TO/train_mlp]
set -u

pebble=${1:?usage: baselines_cli.sh PATH/TO/pebble [PATH/TO/train_mlp]}
train=${2:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/baselines_cli.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

passed=0
fail() {
    echo "FAIL: $*"
    [ -s "$tmp/out" ] && { echo "--- output:"; cat "$tmp/out"; }
    echo "$passed passed, 1 failed"
    exit 1
}
pass() {
    passed=$((passed + 1))
    echo "ok $passed - $*"
}
# field NAME: the number after "NAME " (text) or "\"NAME\": " (JSON) in $tmp/out
field() {
    grep -o -E "(\"$1\": |$1 )[0-9]+" "$tmp/out" | head -n 1 | grep -o -E '[0-9]+$'
}

"$pebble" plan zoo:mlp_train --strategy naive --format json >"$tmp/out" 2>&1 || fail "pebble plan zoo:mlp_train"
naive=$(grep -o -E '"name": "naive", "bytes": [0-9]+' "$tmp/out" | grep -o -E '[0-9]+$')
[ -n "$naive" ] || fail "pebble plan --strategy naive --format json: no naive bytes"
pass "pebble plan zoo:mlp_train --strategy naive: $naive bytes"

"$pebble" export zoo:mlp_train --json "$tmp/mlp_train.json" >"$tmp/out" 2>&1 || fail "pebble export"
"$pebble" plan "$tmp/mlp_train.json" --strategy naive >"$tmp/out" 2>&1 || fail "pebble plan mlp_train.json"
got=$(awk '$1 == "naive" { print $2 }' "$tmp/out")
[ "$got" = "$naive" ] || fail "pebble plan on the exported JSON says naive $got, the zoo graph $naive"
pass "pebble plan on the JSON export: naive $got"

"$pebble" run "$tmp/mlp_train.json" --zero-unbound >"$tmp/out" 2>&1 || fail "pebble run mlp_train.json"
got=$(field naive)
unshared=$(field unshared)
[ "$got" = "$naive" ] || fail "pebble run says naive ${got:-(none)}, pebble plan --strategy naive $naive"
[ -n "$unshared" ] && [ "$unshared" -gt "$naive" ] ||
    fail "pebble run: unshared ${unshared:-(none)} is not above naive $naive (mlp_train takes 4 in-place offers)"
pass "pebble run: naive $got, unshared $unshared"

"$pebble" run zoo:mlp_train --zero-unbound --format json >"$tmp/out" 2>&1 || fail "pebble run --format json"
[ "$(field naive_bytes)" = "$naive" ] && [ "$(field unshared_bytes)" = "$unshared" ] ||
    fail "pebble run --format json: naive_bytes $(field naive_bytes), unshared_bytes $(field unshared_bytes)"
pass "pebble run --format json: \"naive_bytes\": $naive, \"unshared_bytes\": $unshared"

if [ -z "$train" ]; then
    echo "$passed passed (train_mlp not built: not compared)"
    exit 0
fi
# a tiny data set of blank images (train_mlp --epochs 0 only builds the nets and evaluates)
be32() {
    local h
    h=$(printf '%08x' "$1")
    printf "\\x${h:0:2}\\x${h:2:2}\\x${h:4:2}\\x${h:6:2}"
}
idx() { # idx OUT MAGIC COUNT BYTES_PER_ITEM [28 28]
    { be32 "$2"; be32 "$3"; [ "$4" -gt 1 ] && { be32 28; be32 28; }; head -c $(($3 * $4)) /dev/zero; } |
        gzip -n >"$1"
}
idx "$tmp/train-images-idx3-ubyte.gz" 2051 256 784
idx "$tmp/train-labels-idx1-ubyte.gz" 2049 256 1
idx "$tmp/t10k-images-idx3-ubyte.gz" 2051 16 784
idx "$tmp/t10k-labels-idx1-ubyte.gz" 2049 16 1
# zoo:mlp_train is train_mlp's model with plain Adam at a constant rate (train_mlp's default
# adds the clipping nodes and AdamW's runtime lr), so those flags make the two graphs one
"$train" --data "$tmp" --epochs 0 --plan --lr 0.001 --lr-schedule none --warmup 0 --weight-decay 0 --clip 0 \
    >"$tmp/out" 2>&1 || fail "train_mlp --epochs 0 --plan"
line=$(grep '^memory:' "$tmp/out")
dump=$(grep '^arena ' "$tmp/out")
[[ $line == *", naive $naive ("*", unshared $unshared ("* ]] ||
    fail "train_mlp --plan: '$line', want naive $naive and unshared $unshared"
[[ $dump == *", naive $naive, unshared $unshared,"* ]] ||
    fail "train_mlp --plan's plan (pbl_exec_dump_plan): '$dump', want naive $naive, unshared $unshared"
pass "train_mlp --plan: naive $naive, unshared $unshared, in its summary and in pbl_exec_dump_plan's line"
echo "$passed passed, 0 failed"
