#!/usr/bin/env bash
# "-" on the pebble command line, as Unix users expect: a FILE, MODEL or SOURCE of "-" reads
# standard input, its format told from its content (a records CSV, a JSON graph, an ONNX
# model; .npy or TensorProto for run's tensors), and gives what the same file gives; an
# output of "-" (plan --out, export --json, viz --html/--svg/--dot) writes standard output and
# creates no file named "-". Standard input can be read once, standard output written by one
# output; a malformed stream is one line naming <stdin>; a stream over the limit is refused.
#
# usage: pebble_cli_stdio.sh PATH/TO/pebble
set -u
bin=${1:?usage: pebble_cli_stdio.sh PATH/TO/pebble}
case $bin in /*) ;; *) bin=$PWD/$bin ;; esac
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pebble_cli_stdio.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# run from an empty directory, so that a file named "-" would be seen
mkdir "$tmp/cwd" && cd "$tmp/cwd" || exit 1
no_dash_file() { [ ! -e "$tmp/cwd/-" ] || fail "$1: created a file named '-'"; }

. "$(dirname "$0")/cli_harness.sh"
expect_ok() {
    local desc=$1
    shift
    run "$@"
    [ "$rc" -eq 0 ] || fail "$desc: exit status $rc, expected 0"
    [ ! -s "$tmp/err" ] || fail "$desc: unexpected output on stderr"
    no_dash_file "$desc"
}
# expect_error STATUS PATTERN DESCRIPTION ARGS...: exit STATUS, one stderr line matching
# `pebble: (PATTERN)` (an extended regex), nothing on stdout.
expect_error() {
    local want=$1 pattern=$2 desc=$3
    shift 3
    run "$@"
    [ "$rc" -eq "$want" ] || fail "$desc: exit status $rc, expected $want"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "$desc: $(wc -l <"$tmp/err") lines on stderr, expected 1"
    grep -Eq "^pebble: ($pattern)" "$tmp/err" || fail "$desc: stderr does not match 'pebble: ($pattern)'"
    [ ! -s "$tmp/out" ] || fail "$desc: output on stdout"
    no_dash_file "$desc"
    pass "$desc: exit $rc, $(cat "$tmp/err")"
}
# The planning report without its timing column (csv: strategy,bytes,lower_bound,ratio,valid,optimal).
untimed() { cut -d, -f1-6 "$1"; }

ex=$tmp/example.csv
printf 'id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\nb3,0,9,4\nb4,9,21,4\nb5,0,21,4\n' >"$ex"

# ---- records CSV ----------------------------------------------------------------------------

expect_ok "plan FILE" plan "$ex" --strategy all --format csv
untimed "$tmp/out" >"$tmp/from_file"
expect_ok "plan - <FILE" plan - --strategy all --format csv <"$ex"
untimed "$tmp/out" >"$tmp/from_stdin"
cmp -s "$tmp/from_file" "$tmp/from_stdin" || fail "plan - differs from plan FILE"
pass "plan - < records.csv: every strategy's bytes, bound and validity as plan FILE ($(wc -l <"$tmp/from_file") lines)"

expect_ok "plan - (table)" plan - <"$ex"
head -1 "$tmp/out" | grep -q '^records: <stdin> (5 records' || fail "plan -: the report does not name <stdin>"
pass "plan -: the report names <stdin>: $(head -1 "$tmp/out")"

run plan "$ex" --strategy naive --out "$tmp/naive.csv"
[ "$rc" -eq 0 ] || fail "plan --out FILE: exit $rc"
run plan "$ex" --strategy naive --out -
[ "$rc" -eq 0 ] || fail "plan --out -: exit $rc"
cmp -s "$tmp/out" "$tmp/naive.csv" || fail "plan --out - wrote other bytes than plan --out FILE"
grep -q '^lower bound: 12 bytes' "$tmp/err" || fail "plan --out -: the report is not on stderr"
grep -q 'lower bound' "$tmp/out" && fail "plan --out -: the report is mixed into the assignment"
no_dash_file "plan --out -"
pass "plan --out -: the assignment on stdout, byte for byte --out FILE's; the report on stderr"

"$bin" plan - --out - <"$ex" 2>/dev/null | "$bin" check - >"$tmp/out" 2>"$tmp/err"
rcs="${PIPESTATUS[*]}"
[ "$rcs" = "0 0" ] || fail "plan - --out - | check -: exit statuses $rcs"
grep -q '^<stdin>: ok: 5 records, arena 12 bytes, lower bound 12 bytes' "$tmp/out" || fail "check -: $(cat "$tmp/out")"
pass "plan - --out - | check -: $(cat "$tmp/out")"

printf 'id,lower,upper,size,offset\na,0,2,4,0\nb,1,3,4,2\n' >"$tmp/overlap.csv"
run check - <"$tmp/overlap.csv"
[ "$rc" -eq 1 ] && grep -q "^pebble: <stdin>: invalid: records 0 (id 'a', line 2) and 1 (id 'b', line 3)" "$tmp/err" \
    || fail "check - on an overlapping assignment: exit $rc"
pass "check - on an overlapping assignment: exit 1, $(cat "$tmp/err")"

# ---- malformed, empty, too much ---------------------------------------------------------------

printf 'id,lower,upper,size\nb1,0,3,4\nb2,3,9,x\n' >"$tmp/bad.csv"
expect_error 2 "<stdin>:3: size: 'x' is not an integer$" "plan - on a malformed CSV" plan - <"$tmp/bad.csv"
expect_error 2 "<stdin>:3: size: 'x' is not an integer$" "check - on a malformed CSV" check - <"$tmp/bad.csv"
expect_error 2 "<stdin>:1: empty file" "plan - on empty input" plan - </dev/null
printf '{"format": "pebble-graph",' >"$tmp/cut.json"
expect_error 2 "<stdin>: line 1, column [0-9]+: " "plan - on a cut JSON graph" plan - <"$tmp/cut.json"
printf '\x08\x07\xff\xff\xff' >"$tmp/junk.bin"
expect_error 2 "<stdin>: " "plan - on binary junk (taken as ONNX)" plan - <"$tmp/junk.bin"
expect_error 2 "<stdin>: not a JSON graph or an ONNX model" "export - on a records CSV" export - --json - <"$ex"

size=$(wc -c <"$ex")
PEBBLE_STDIN_MAX=$((size - 1)) expect_error 2 "<stdin>: more than $((size - 1)) bytes on standard input" \
    "plan - over PEBBLE_STDIN_MAX (one byte)" plan - <"$ex"
PEBBLE_STDIN_MAX=$size expect_ok "plan - at exactly PEBBLE_STDIN_MAX" plan - <"$ex"
pass "plan - at exactly PEBBLE_STDIN_MAX=$size bytes: planned"

# ---- one reader, one writer -------------------------------------------------------------------

expect_error 2 "plan: unexpected argument '-'" "plan - -" plan - - <"$ex"
expect_error 2 "--svg -: --html - already writes to standard output; only one output can" \
    "viz --html - --svg -" viz "$ex" --html - --svg -
expect_error 2 "--output-dir -: a directory of output files cannot be standard output" \
    "run --output-dir -" run "$ex" --output-dir -
expect_error 2 "--expect y=-: standard input is already read by --input x=-" \
    "run with two inputs on stdin" run zoo:mlp --input x=- --expect y=- </dev/null
expect_error 2 "--input x=-: standard input is already read by MODEL -" \
    "run - with an input on stdin" run - --input x=- </dev/null

# writing to a closed standard output: a failure, one line, exit 1
"$bin" plan "$ex" --out - >&- 2>"$tmp/err"
rc=$?
[ "$rc" -eq 1 ] && [ "$(grep -c '^pebble: ' "$tmp/err")" -eq 1 ] &&
    grep -q '^pebble: <stdout>: writing the assignment: ' "$tmp/err" || fail "plan --out - >&-: exit $rc"
pass "plan --out - into a closed stdout: exit 1, the report on stderr, then $(tail -1 "$tmp/err")"
"$bin" viz "$ex" --svg - >&- 2>"$tmp/err"
rc=$?
[ "$rc" -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q '^pebble: <stdout>: ' "$tmp/err" || fail "viz --svg - >&-: exit $rc"
pass "viz --svg - into a closed stdout: exit 1, $(cat "$tmp/err")"

# ---- viz ----------------------------------------------------------------------------------------

expect_ok "viz --html -" viz "$ex" --html -
head -1 "$tmp/out" | grep -q '^<!DOCTYPE html>' && tail -c 20 "$tmp/out" | grep -q '</html>' \
    || fail "viz --html -: stdout is not the page"
cp "$tmp/out" "$tmp/page_stdout.html"
expect_ok "viz --html FILE" viz "$ex" --html "$tmp/page.html"
untimed_page() { sed 's/"ms": [0-9.e+-]*//g' "$1"; }
cmp -s <(untimed_page "$tmp/page.html") <(untimed_page "$tmp/page_stdout.html") ||
    fail "viz --html - differs from --html FILE (timings aside)"
pass "viz --html -: the page on stdout ($(wc -c <"$tmp/page.html") bytes, --html FILE's but for timings), no file '-'"
expect_ok "viz - --svg - <CSV" viz - --svg - <"$ex"
grep -q '<svg' "$tmp/out" && grep -q '</svg>' "$tmp/out" || fail "viz - --svg -: no SVG on stdout"
pass "viz - --svg - < records.csv: an SVG on stdout"

# ---- graphs ------------------------------------------------------------------------------------

if "$bin" check zoo:mlp >/dev/null 2>&1; then
    expect_ok "plan zoo:mlp_train" plan zoo:mlp_train --strategy all --format csv
    untimed "$tmp/out" >"$tmp/zoo"
    "$bin" export zoo:mlp_train --json - | "$bin" plan - --strategy all --format csv >"$tmp/out" 2>"$tmp/err"
    rcs="${PIPESTATUS[*]}"
    [ "$rcs" = "0 0" ] && [ ! -s "$tmp/err" ] || fail "export --json - | plan -: exit statuses $rcs"
    untimed "$tmp/out" | cmp -s - "$tmp/zoo" || fail "export zoo:mlp_train --json - | plan - differs from plan zoo:mlp_train"
    pass "export zoo:mlp_train --json - | plan -: a JSON graph on stdin plans as zoo:mlp_train ($(wc -l <"$tmp/zoo") lines)"

    "$bin" export zoo:mlp_train --json "$tmp/g.json" || fail "export zoo:mlp_train --json FILE"
    expect_ok "check - <graph" check - <"$tmp/g.json"
    grep -q '^<stdin>: ok: a valid graph: 26 variables, 24 nodes (12 backward)' "$tmp/out" || fail "check - <graph: $(cat "$tmp/out")"
    pass "check - < graph.json: $(cat "$tmp/out")"
    expect_ok "export - --json -" export - --json - <"$tmp/g.json"
    cmp -s "$tmp/out" "$tmp/g.json" || fail "export - --json - < g.json: other bytes than g.json"
    pass "export - --json - < graph.json: the same bytes again"
    expect_ok "viz - --dot - --html H" viz - --dot - --html "$tmp/g.html" <"$tmp/g.json"
    head -1 "$tmp/out" | grep -q '^digraph' && [ -s "$tmp/g.html" ] || fail "viz - --dot -: no DOT on stdout or no page"
    pass "viz - --dot - --html FILE < graph.json: standard input read once, used twice (DOT on stdout, the page to FILE)"
    expect_error 2 "<stdin>: \\\$\\.nodes\\[0\\]\\.inputs\\[0\\]: unknown value 'x7'$" "plan - on a graph with a dangling input" \
        plan - <<<'{"format": "pebble-graph", "version": "1.0", "nodes": [{"name": "a", "op": "relu", "inputs": ["x7"]}]}'
else
    echo "skip - zoo graphs are not part of this build"
fi

# ---- ONNX models and tensors ------------------------------------------------------------------

data=/usr/share/libonnx-testdata/data/node
gemm=$data/test_gemm_all_attributes
if [ -f "$gemm/model.onnx" ] && "$bin" check "$gemm/model.onnx" >/dev/null 2>&1; then
    set0=$gemm/test_data_set_0
    expect_ok "plan MODEL.onnx" plan "$gemm/model.onnx" --strategy all --format csv
    untimed "$tmp/out" >"$tmp/onnx"
    expect_ok "plan - <MODEL.onnx" plan - --strategy all --format csv <"$gemm/model.onnx"
    untimed "$tmp/out" | cmp -s - "$tmp/onnx" || fail "plan - < model.onnx differs from plan model.onnx"
    pass "plan - < model.onnx: an ONNX model on stdin plans as the file does"

    ins=(--input a="$set0/input_0.pb" --input b="$set0/input_1.pb" --input c="$set0/input_2.pb")
    expect_ok "run MODEL.onnx" run "$gemm/model.onnx" "${ins[@]}" --expect y="$set0/output_0.pb"
    grep -E '^(output|expect) ' "$tmp/out" >"$tmp/run_file"
    expect_ok "run - <MODEL.onnx" run - "${ins[@]}" --expect y="$set0/output_0.pb" <"$gemm/model.onnx"
    grep -E '^(output|expect) ' "$tmp/out" | cmp -s - "$tmp/run_file" || fail "run - < model.onnx: other outputs"
    grep -q '^model <stdin>: ' "$tmp/out" || fail "run -: the report does not name <stdin>"
    pass "run - < model.onnx: its initializers bound, the outputs of run model.onnx, 'expect y: 0 of 15' alike"
    expect_ok "run --input a=- <.pb" run "$gemm/model.onnx" --input a=- --input b="$set0/input_1.pb" \
        --input c="$set0/input_2.pb" --expect y="$set0/output_0.pb" <"$set0/input_0.pb"
    grep -E '^(output|expect) ' "$tmp/out" | cmp -s - "$tmp/run_file" || fail "run --input a=- < input_0.pb: other outputs"
    pass "run --input a=- < input_0.pb (TensorProto on stdin): the same outputs"
    expect_ok "run --expect y=- <.pb" run "$gemm/model.onnx" "${ins[@]}" --expect y=- <"$set0/output_0.pb"
    grep -E '^(output|expect) ' "$tmp/out" | cmp -s - "$tmp/run_file" || fail "run --expect y=-: another comparison"
    pass "run --expect y=- < output_0.pb: $(grep '^expect' "$tmp/out")"
    expect_ok "write y.npy" run "$gemm/model.onnx" "${ins[@]}" --output-dir "$tmp/o"
    run run "$gemm/model.onnx" "${ins[@]}" --expect y=- --rtol 0 --atol 0 <"$tmp/o/y.npy"
    [ "$rc" -eq 0 ] && grep -q '^expect y: 0 of 15 elements outside rtol 0 atol 0' "$tmp/out" \
        || fail "run --expect y=- < y.npy (.npy on stdin): exit $rc"
    pass "run --expect y=- < y.npy (.npy on stdin, told by its magic): equal exactly"
    expect_error 2 "--input a: <stdin> holds f32 \\[3, 5\\] but the input is f32 \\[4, 3\\]" \
        "run --input a=- with a wrongly shaped .npy" run "$gemm/model.onnx" --input a=- --zero-unbound <"$tmp/o/y.npy"
    head -c 20 "$set0/input_0.pb" >"$tmp/cut.pb"
    expect_error 2 "<stdin>: " "run --input a=- with a cut TensorProto" run "$gemm/model.onnx" --input a=- --zero-unbound <"$tmp/cut.pb"
else
    echo "skip - no ONNX model (libonnx-testdata) or no ONNX support in this build"
fi

echo "$passed passed"
