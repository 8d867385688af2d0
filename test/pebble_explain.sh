#!/usr/bin/env bash
# `pebble explain`: the table, CSV and JSON it prints on zoo graphs, a JSON graph file, an
# ONNX model (with libonnx-testdata) and a records CSV; the JSON's required keys and that
# its live list sums to the lower bound (with python3); and its errors (exit 2 for a bad
# command line or a malformed file, 1 for a file that cannot be read).
#
# usage: pebble_explain.sh PATH/TO/pebble
set -u

bin=${1:?usage: pebble_explain.sh PATH/TO/pebble}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pebble_explain.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

. "$(dirname "$0")/cli_harness.sh"

# MiniMalloc's five-buffer example: 12 bytes live on steps 0-8
cat >"$tmp/five.csv" <<'EOF'
id,lower,upper,size
b1,0,3,4
b2,3,9,4
b3,0,9,4
b4,9,21,4
b5,0,21,4
EOF

run explain "$tmp/five.csv" --strategy naive
[ "$rc" -eq 0 ] && [ ! -s "$tmp/err" ] || fail "explain five.csv: exit $rc"
grep -q 'lower bound 12 bytes, at step 0 of 21' "$tmp/out" || fail "five.csv: not the peak at step 0 (12 bytes)"
grep -q 'live at the peak: 3 values, 12 bytes' "$tmp/out" || fail "five.csv: not 3 values live at the peak"
grep -q 'arena (naive): 20 bytes, 8 over the lower bound' "$tmp/out" || fail "five.csv: not naive's 20-byte arena"
grep -q 'unused at the peak (step 0): \[4, 8), \[12, 16)' "$tmp/out" || fail "five.csv: not naive's holes at the peak"
pass "explain five.csv --strategy naive: peak step 0, b1 b3 b5, 12 bytes; arena 20 with holes [4, 8), [12, 16)"

run explain "$tmp/five.csv" --format csv
[ "$rc" -eq 0 ] || fail "explain five.csv --format csv: exit $rc"
[ "$(head -1 "$tmp/out")" = "name,shape,bytes,kind,producer,last_reader,first,last,offset" ] || fail "--format csv: header"
[ "$(cut -d, -f1 "$tmp/out" | tail -n +2 | tr '\n' ' ')" = "b1 b3 b5 " ] || fail "--format csv: not b1 b3 b5"
pass "explain --format csv: the header and one row per value live at the peak"

# standard input, told from its content
run explain - <"$tmp/five.csv"
[ "$rc" -eq 0 ] && grep -q '^<stdin>: lower bound 12 bytes' "$tmp/out" || fail "explain - (a CSV on stdin)"
pass "explain - reads standard input"

run explain zoo:mlp_train
[ "$rc" -eq 0 ] || fail "explain zoo:mlp_train: exit $rc"
grep -Eq '^ +802816 +parameter_gradient +fc1/grad_w +\[256, 784\] +fc1/grad_w +fc1/w/update$' "$tmp/out" \
    || fail "zoo:mlp_train: fc1/grad_w is not listed as a parameter gradient read last by its update"
grep -q '^outside the arena' "$tmp/out" || fail "zoo:mlp_train: no line for the variables"
grep -q '^  fusion .*saves' "$tmp/out" || fail "zoo:mlp_train: no fusion estimate"
grep -Eq '^  schedule +saves +64 +\(lower bound 939008\)  pbl_graph_schedule min_peak \(exact .*proven minimal\)' "$tmp/out" \
    || fail "zoo:mlp_train: no schedule line with min_peak's proven 64-byte saving"
pass "explain zoo:mlp_train: fc1/grad_w live at the peak, the variables, fusion and schedule lines"

# JSON: one object with the required keys; the live list sums to the lower bound
have_python=0
command -v python3 >/dev/null 2>&1 && have_python=1
for model in zoo:mlp_train zoo:resnet50_train zoo:bert_base; do
    run explain "$model" --format json
    [ "$rc" -eq 0 ] || fail "explain $model --format json: exit $rc"
    if [ "$have_python" -eq 1 ]; then
        python3 - "$tmp/out" "$model" <<'EOF' || fail "explain $model --format json: wrong shape or values (above)"
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("lower_bound", "peak_step", "arena", "live_at_peak", "strategy", "waste", "suggestions", "outside_arena"):
    assert k in d, "no key " + k
for v in d["live_at_peak"]:
    for k in ("name", "shape", "bytes", "producer", "kind", "last_reader"):
        assert k in v, "a value has no " + k
    assert isinstance(v["shape"], list) and isinstance(v["bytes"], int)
total = sum(v["bytes"] for v in d["live_at_peak"])
assert total == d["lower_bound"], "live at the peak sum to %d, lower bound %d" % (total, d["lower_bound"])
assert d["live_bytes"][d["peak_step"]] == d["lower_bound"]
assert d["arena"] >= d["lower_bound"]
holes = sum(h - l for l, h in d["waste"]["at_peak"]["holes"])
assert holes == d["arena"] - d["lower_bound"], "holes at the peak %d, arena - lower bound %d" % (holes, d["arena"] - d["lower_bound"])
print("  %s: %d values, %d bytes at step %d" % (sys.argv[2], len(d["live_at_peak"]), total, d["peak_step"]))
EOF
    fi
done
if [ "$have_python" -eq 1 ]; then
    pass "--format json: the required keys, and the live list sums to the lower bound (3 zoo graphs)"
else
    echo "skip: python3 not found, JSON not parsed"
fi

# the order: the schedule suggestion saves program's lower bound minus min_peak's, and
# --schedule min_peak explains that order (bert_base_train: 1.275 -> 1.185 GB)
if [ "$have_python" -eq 1 ]; then
    run explain zoo:bert_base_train --format json
    [ "$rc" -eq 0 ] || fail "explain zoo:bert_base_train: exit $rc"
    cp "$tmp/out" "$tmp/prog.json"
    run explain zoo:bert_base_train --format json --schedule min_peak
    [ "$rc" -eq 0 ] || fail "explain zoo:bert_base_train --schedule min_peak: exit $rc"
    python3 - "$tmp/prog.json" "$tmp/out" <<'EOF' || fail "explain --schedule: the saving is not program's lower bound minus min_peak's (above)"
import json, sys
p, m = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert p["schedule"] == "program" and m["schedule"] == "min_peak", (p["schedule"], m["schedule"])
assert m["lower_bound"] < p["lower_bound"], (m["lower_bound"], p["lower_bound"])
assert sum(v["bytes"] for v in m["live_at_peak"]) == m["lower_bound"]
sp = [x for x in p["suggestions"] if x["fix"] == "schedule"][0]
sm = [x for x in m["suggestions"] if x["fix"] == "schedule"][0]
assert sp["lower_bound"] == m["lower_bound"], (sp, m["lower_bound"])
assert sp["saves"] == p["lower_bound"] - m["lower_bound"], sp
assert sm["saves"] == 0 and "this is the min_peak order" in sm["note"], sm
print("  bert_base_train: program %d, min_peak %d, schedule saves %d" % (p["lower_bound"], m["lower_bound"], sp["saves"]))
EOF
    pass "explain --schedule min_peak: bert_base_train's peak is min_peak's, the program order's suggestion saves the difference"
fi
run explain zoo:bert_base_train --schedule min_peak
grep -q '^zoo:bert_base_train: lower bound 1184536640 bytes, .*, nodes in min_peak order$' "$tmp/out" \
    || fail "explain --schedule min_peak: the table's first line does not name the order"

# a JSON graph file says the same as the zoo model it was exported from
run export zoo:mlp_train --json "$tmp/mlp_train.json"
[ "$rc" -eq 0 ] || fail "export zoo:mlp_train: exit $rc"
run explain zoo:mlp_train --format json
cp "$tmp/out" "$tmp/zoo.json"
run explain "$tmp/mlp_train.json" --format json
[ "$rc" -eq 0 ] || fail "explain mlp_train.json: exit $rc"
sed 1d "$tmp/zoo.json" >"$tmp/a"
sed 1d "$tmp/out" >"$tmp/b"
diff -q "$tmp/a" "$tmp/b" >/dev/null || fail "the JSON graph file is explained differently from zoo:mlp_train"
pass "explain of the exported JSON graph file: the same explanation as zoo:mlp_train"

# an ONNX model, where Debian's test data is installed
gemm=/usr/share/libonnx-testdata/data/node/test_gemm_default_no_bias
if [ -f "$gemm/model.onnx" ]; then
    run explain "$gemm/model.onnx" --format json
    [ "$rc" -eq 0 ] && grep -q '"lower_bound": ' "$tmp/out" || fail "explain an ONNX model: exit $rc"
    pass "explain an ONNX model (test_gemm_default_no_bias)"
else
    echo "skip: libonnx-testdata not installed, no ONNX model explained"
fi

# errors: a bad command line or a malformed file exits 2, a file that cannot be read 1
expect() { # STATUS PATTERN ARGS...: exit STATUS and one line on stderr matching PATTERN
    local want=$1 pattern=$2
    shift 2
    run "$@"
    [ "$rc" -eq "$want" ] || fail "pebble $*: exit $rc, expected $want"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "$pattern" "$tmp/err" || fail "pebble $*: message not '$pattern'"
    [ -s "$tmp/out" ] && fail "pebble $*: printed a report on failure"
    return 0
}
expect 2 "unknown option '--bogus'" explain zoo:mlp --bogus
expect 2 "no FILE given" explain
expect 2 "one FILE only" explain zoo:mlp zoo:mlp
expect 2 "unknown strategy 'nah'" explain zoo:mlp --strategy nah
expect 2 "'xml' is not one of table, csv, json" explain zoo:mlp --format xml
expect 2 "no such model" explain zoo:nope
expect 2 "applies to zoo graphs only" explain "$tmp/five.csv" --batch 4
expect 2 "unknown schedule 'nah' (one of: program, min_peak)" explain zoo:mlp --schedule nah
expect 2 "schedule applies to graphs only" explain "$tmp/five.csv" --schedule min_peak
printf '{"nodes": [' >"$tmp/bad.json"
expect 2 "bad.json" explain "$tmp/bad.json"
printf 'id,lower,upper,size\na,0,2,x\n' >"$tmp/bad.csv"
expect 2 "bad.csv:2:" explain "$tmp/bad.csv"
expect 1 "missing.json" explain "$tmp/missing.json"
printf 'id,lower,upper,size\na,0,100000000,4\n' >"$tmp/long.csv" # explain indexes steps: at most 2^26
expect 2 "steps from 0 up to 67108864" explain "$tmp/long.csv"
pass "errors: unknown flag, no FILE, two FILEs, unknown strategy or format or model or schedule, --batch or --schedule on a CSV, malformed JSON and CSV, steps beyond 2^26 exit 2; a missing file exits 1"

# docs/explain.md shows the table for zoo:mlp_train and greedy-by-size's waste as printed
doc=$(dirname "$0")/../docs/explain.md
if [ -f "$doc" ]; then
    run explain zoo:mlp_train
    awk '/^```/ && n { f++; if (f == 3) exit; next } f == 2 { print } /pebble explain zoo:mlp_train$/ { n = 1 }' "$doc" >"$tmp/doc"
    diff "$tmp/doc" "$tmp/out" >"$tmp/diff" || { cat "$tmp/diff"; fail "docs/explain.md's zoo:mlp_train table is not what pebble explain prints"; }
    run explain zoo:mlp_train --strategy greedy_by_size
    awk '/^```/ && n { f++; if (f == 3) exit; next } f == 2 { print } /--strategy greedy_by_size$/ { n = 1 }' "$doc" >"$tmp/doc"
    grep -F -f "$tmp/doc" "$tmp/out" | diff - "$tmp/doc" >"$tmp/diff" || { cat "$tmp/diff"; fail "docs/explain.md's greedy_by_size lines are not what pebble explain prints"; }
    # the order section: bert_base_train's lines, both orders, as printed ("..." stands for the rest)
    for order in program min_peak; do
        if [ "$order" = program ]; then run explain zoo:bert_base_train; end='explain zoo:bert_base_train$'
        else run explain zoo:bert_base_train --schedule min_peak; end='--schedule min_peak$'; fi
        awk -v end="$end" '/^```/ && n { f++; if (f == 3) exit; next } f == 2 && $0 != "..." { print } $0 ~ end { n = 1 }' "$doc" >"$tmp/doc"
        [ -s "$tmp/doc" ] || fail "docs/explain.md: no bert_base_train output in $order order"
        grep -F -x -f "$tmp/doc" "$tmp/out" | diff - "$tmp/doc" >"$tmp/diff" ||
            { cat "$tmp/diff"; fail "docs/explain.md's bert_base_train lines ($order order) are not what pebble explain prints"; }
    done
    pass "docs/explain.md: the zoo:mlp_train table, greedy_by_size's waste and bert_base_train's lines in both orders as printed"
fi

run explain --help
[ "$rc" -eq 0 ] && grep -q '^usage: pebble explain FILE' "$tmp/out" || fail "explain --help"
run --help
grep -q '^  explain ' "$tmp/out" || fail "pebble --help does not list explain"
pass "explain --help, and pebble --help lists it"
echo "$passed passed"
