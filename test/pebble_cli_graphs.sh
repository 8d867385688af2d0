#!/usr/bin/env bash
# The pebble command line on graph files: `pebble export zoo:NAME --json OUT` writes a graph
# that `pebble plan OUT --strategy all` plans exactly as it plans zoo:NAME (same records, same
# bytes per strategy), `pebble check OUT` validates it, and a malformed or missing file gives
# one line `pebble: FILE: ...` and a non-zero exit status (2 malformed, 1 unreadable).
#
# usage: pebble_cli_graphs.sh PATH/TO/pebble
set -u
bin=${1:?usage: pebble_cli_graphs.sh PATH/TO/pebble}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pebble_cli_graphs.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

. "$(dirname "$0")/cli_harness.sh"
expect_ok() {
    local desc=$1
    shift
    run "$@"
    [ "$rc" -eq 0 ] || fail "$desc: exit status $rc, expected 0"
    [ ! -s "$tmp/err" ] || fail "$desc: unexpected output on stderr"
}
# expect_error STATUS PATTERN DESCRIPTION ARGS...: exit STATUS, one stderr line matching
# `pebble: (PATTERN)` (an extended regex).
expect_error() {
    local want=$1 pattern=$2 desc=$3
    shift 3
    run "$@"
    [ "$rc" -eq "$want" ] || fail "$desc: exit status $rc, expected $want"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "$desc: $(wc -l <"$tmp/err") lines on stderr, expected 1"
    grep -Eq "^pebble: ($pattern)" "$tmp/err" || fail "$desc: stderr does not match 'pebble: ($pattern)'"
    pass "$desc: exit $rc, $(cat "$tmp/err")"
}

if ! "$bin" export --help >/dev/null 2>&1 || ! "$bin" check zoo:mlp >/dev/null 2>&1; then
    echo "skip: this pebble has no zoo models"
    exit 77
fi

g=$tmp/mlp_train.json
expect_ok "export zoo:mlp_train" export zoo:mlp_train --json "$g"
head -c 60 "$g" | grep -q '"format": "pebble-graph"' || fail "the exported file does not start as a pebble graph"
pass "export zoo:mlp_train --json: $(wc -c <"$g") bytes"

expect_ok "plan the JSON graph with every strategy" plan "$g" --strategy all
grep -q '^best ' "$tmp/out" || fail "plan --strategy all: no row for best"
grep -q '^lower bound: ' "$tmp/out" || fail "plan --strategy all: no lower bound"
pass "plan FILE.json --strategy all: $(grep -c ' yes ' "$tmp/out") strategies valid"

# The same graph, the same records, the same plans: every strategy's bytes match zoo:mlp_train.
for src in zoo:mlp_train "$g"; do
    run plan "$src" --strategy all --format csv
    [ "$rc" -eq 0 ] || fail "plan $src --format csv: exit status $rc"
    cut -d, -f1-6 "$tmp/out" >"$tmp/$(basename "$src" | tr : _).csv"
done
cmp -s "$tmp/zoo_mlp_train.csv" "$tmp/mlp_train.json.csv" || fail "plans of zoo:mlp_train and its JSON differ: $(diff "$tmp/zoo_mlp_train.csv" "$tmp/mlp_train.json.csv" | head -5)"
pass "every strategy plans the JSON graph to the bytes it plans zoo:mlp_train ($(($(wc -l <"$tmp/mlp_train.json.csv") - 1)) strategies)"

expect_ok "plan --format json" plan "$g" --format json
grep -q '"lower_bound": ' "$tmp/out" || fail "plan --format json: no lower_bound"
pass "plan FILE.json --format json"

expect_ok "check the JSON graph" check "$g"
grep -q "ok: a valid graph: 26 variables, 24 nodes (12 backward)" "$tmp/out" || fail "check: $(cat "$tmp/out")"
pass "check FILE.json: $(cat "$tmp/out")"

expect_ok "export to stdout" export "$g" --json -
cmp -s "$tmp/out" "$g" || fail "export FILE.json --json - differs from FILE.json (save -> load -> save)"
pass "export FILE.json --json - gives FILE.json's bytes again"

printf '{"format": "pebble-graph", "version": "1.0", "nodes": [{"name": "a", "op": "relu", "inputs": ["x7"]}]}\n' >"$tmp/bad.json"
expect_error 2 "$tmp/bad.json: \\\$\\.nodes\\[0\\]\\.inputs\\[0\\]: unknown value 'x7'$" "plan: a dangling input" plan "$tmp/bad.json" --strategy all
expect_error 2 "$tmp/bad.json: \\\$\\.nodes\\[0\\]" "check: a dangling input" check "$tmp/bad.json"
head -c 300 "$g" >"$tmp/cut.json"
expect_error 2 "$tmp/cut.json: line [0-9]+, column [0-9]+: " "plan: a truncated file" plan "$tmp/cut.json"
sed 's/"version": "1.0"/"version": "2.0"/' "$g" >"$tmp/v2.json"
expect_error 2 "$tmp/v2.json: \\\$\\.version: version 2.0 is not supported" "plan: a newer major version" plan "$tmp/v2.json"
expect_error 1 "$tmp/none.json: cannot open" "plan: a missing file" plan "$tmp/none.json"
expect_error 2 "$g: --batch applies to zoo graphs only" "plan: --batch with a file" plan "$g" --batch 4
expect_error 1 "$tmp/no/such/dir.json: cannot create" "export: an unwritable OUT" export zoo:mlp --json "$tmp/no/such/dir.json"
expect_error 2 "export: no output given" "export without --json" export zoo:mlp
expect_error 2 "zoo: nope: no such model" "export: an unknown zoo model" export zoo:nope --json "$tmp/x.json"
[ ! -e "$tmp/x.json" ] || fail "a failed export left a file"
# options that would change nothing are refused, not ignored
expect_error 2 "zoo:mlp: --capacity and --align check an assignment file" "check: --capacity on a graph" check zoo:mlp --capacity 5
printf 'id,lower,upper,size\n0,0,2,100\n' >"$tmp/one.csv"
expect_error 2 "$tmp/one.csv: --batch applies to zoo graphs only" "plan: --batch on a records CSV" plan "$tmp/one.csv" --batch 4
# an output naming the input is refused before anything is written (plan --out used to
# replace a graph file with its assignment CSV)
cp "$g" "$tmp/keep.json"
expect_error 2 "--out $tmp/\\./mlp_train\\.json: that is the input FILE" "plan: --out is the input" plan "$g" --out "$tmp/./mlp_train.json"
expect_error 2 "--json $g: that is the input FILE" "export: --json is the input" export "$g" --json "$g"
cmp -s "$g" "$tmp/keep.json" || fail "the input graph file was changed"
pass "the input graph file is unchanged"
# OUT a link: the file it names is replaced and the link stays; OUT a FIFO (as /dev/stdout
# can be): written into, not replaced by a regular file (both used to be replaced)
mkdir "$tmp/real"
echo old >"$tmp/real/g.json"
ln -s real/g.json "$tmp/link.json"
expect_ok "export to a link" export zoo:mlp_train --json "$tmp/link.json"
[ -L "$tmp/link.json" ] && cmp -s "$tmp/real/g.json" "$g" || fail "export --json LINK: the link was replaced, or its target not written"
pass "export --json LINK writes the link's target, the link stays"
echo old >"$tmp/real/a.csv"
ln -s real/a.csv "$tmp/link.csv"
expect_ok "plan --out a link" plan "$g" --out "$tmp/link.csv"
[ -L "$tmp/link.csv" ] && head -1 "$tmp/real/a.csv" | grep -q '^id,lower,upper,size,offset$' \
    || fail "plan --out LINK: the link was replaced, or its target not written"
pass "plan --out LINK writes the link's target, the link stays"
if mkfifo "$tmp/fifo" 2>/dev/null; then
    timeout 60 cat "$tmp/fifo" >"$tmp/from_fifo" &
    reader=$!
    expect_ok "export to a FIFO" export zoo:mlp_train --json "$tmp/fifo"
    wait "$reader"
    [ -p "$tmp/fifo" ] && cmp -s "$tmp/from_fifo" "$g" || fail "export --json FIFO: the FIFO was replaced, or the reader got other bytes"
    pass "export --json FIFO: the reader gets the graph, the FIFO stays"
fi

echo "$passed passed"
