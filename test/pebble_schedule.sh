#!/usr/bin/env bash
# `--schedule` on pebble plan, viz and run: both lower bounds in the table and the JSON, the
# same outputs from either order, exit 2 with the names for an unknown schedule or a records
# CSV, and a graph whose dependencies cannot all hold named by its cycle.
#
# usage: pebble_schedule.sh PATH/TO/pebble
set -u
bin=${1:?usage: pebble_schedule.sh PATH/TO/pebble}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pebble_schedule.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/cli_harness.sh"

run plan zoo:mlp_train --batch 16 --schedule both --format json
[ "$rc" -eq 0 ] || fail "plan --schedule both: exit $rc"
prog=$(sed -n 's/.*"program_lower_bound": \([0-9]*\).*/\1/p' "$tmp/out")
minp=$(sed -n 's/.*"min_peak_lower_bound": \([0-9]*\).*/\1/p' "$tmp/out")
lb=$(sed -n 's/^{"lower_bound": \([0-9]*\),.*/\1/p' "$tmp/out")
[ -n "$prog" ] && [ -n "$minp" ] && [ "$minp" -le "$prog" ] && [ "$lb" = "$minp" ] ||
    fail "plan --schedule both --format json: program $prog, min_peak $minp, lower_bound $lb"
pass "plan --schedule both --format json: program order $prog, min_peak $minp bytes"

run plan zoo:mlp_train --batch 16 --schedule both
grep -q "lower bound $prog bytes in program order, $minp in min_peak order" "$tmp/out" ||
    fail "plan --schedule both: the table does not show both bounds"
pass "plan --schedule both: the table shows both bounds"

run plan zoo:mlp_train --batch 16
grep -q "^schedule:" "$tmp/out" && fail "plan without --schedule mentions a schedule"
grep -q "^lower bound: $prog bytes" "$tmp/out" || fail "plan: program order's bound is not $prog"
pass "plan: program order by default ($prog bytes)"

for cmd in "plan zoo:mlp" "viz zoo:mlp --html $tmp/p.html" "run zoo:mlp --zero-unbound"; do
    run $cmd --schedule fastest
    [ "$rc" -eq 2 ] && grep -q "unknown schedule 'fastest' (one of: program, min_peak" "$tmp/err" ||
        fail "$cmd --schedule fastest: exit $rc"
done
run viz zoo:mlp --svg "$tmp/p.svg" --schedule both
[ "$rc" -eq 2 ] && grep -q "schedule both applies to --html only" "$tmp/err" ||
    fail "viz --svg --schedule both: exit $rc (both orders only in a page)"
run run zoo:mlp --zero-unbound --schedule both
[ "$rc" -eq 2 ] || fail "run --schedule both: exit $rc (plan and viz --html only)"
pass "an unknown --schedule exits 2 listing the names"

printf 'id,lower,upper,size\na,0,2,8\nb,1,3,8\n' >"$tmp/r.csv"
run plan "$tmp/r.csv" --schedule min_peak
[ "$rc" -eq 2 ] && grep -q "applies to graphs only" "$tmp/err" || fail "plan CSV --schedule min_peak: exit $rc"
run plan "$tmp/r.csv" --schedule program
[ "$rc" -eq 0 ] || fail "plan CSV --schedule program: exit $rc"
pass "a records CSV takes --schedule program only"

run run zoo:mlp_train --zero-unbound
[ "$rc" -eq 0 ] || fail "run: exit $rc"
grep '^output' "$tmp/out" >"$tmp/prog.txt"
run run zoo:mlp_train --zero-unbound --schedule min_peak
[ "$rc" -eq 0 ] || fail "run --schedule min_peak: exit $rc"
grep '^output' "$tmp/out" >"$tmp/minp.txt"
cmp -s "$tmp/prog.txt" "$tmp/minp.txt" || fail "run: min_peak's outputs differ from program order's"
pass "run --schedule min_peak: the same outputs"

run viz zoo:mlp_train --schedule min_peak --html "$tmp/v.html" --dot "$tmp/v.dot" --streams 2
[ "$rc" -eq 0 ] && [ -s "$tmp/v.html" ] && [ -s "$tmp/v.dot" ] || fail "viz --schedule min_peak: exit $rc"
pass "viz --schedule min_peak: page and DOT on two streams"

# u1 overwrites w1, which d reads after u2; u2 overwrites w2, which e reads after u1
cat >"$tmp/war.json" <<'JSON'
{"format": "pebble-graph", "version": "1.0",
 "variables": [{"name": "w1", "kind": "param", "dtype": "f32", "shape": [4]},
               {"name": "w2", "kind": "param", "dtype": "f32", "shape": [4]},
               {"name": "g", "kind": "input", "dtype": "f32", "shape": [4]}],
 "nodes": [{"name": "u1", "op": "sgd", "inputs": ["w1", "g"], "attrs": {"lr": 0.1}},
           {"name": "u2", "op": "sgd", "inputs": ["w2", "g"], "attrs": {"lr": 0.1}},
           {"name": "d", "op": "add", "inputs": ["u2", "w1"]},
           {"name": "e", "op": "add", "inputs": ["u1", "w2"]}],
 "outputs": [{"name": "out", "value": "d"}, {"name": "out2", "value": "e"}]}
JSON
run plan "$tmp/war.json" --schedule min_peak
[ "$rc" -eq 2 ] && grep -q "no order can run the graph: 'u1' -> 'e' (reads 'u1') -> 'u2' (overwrites 'w2', which 'e' reads) -> 'd' (reads 'u2') -> 'u1' (overwrites 'w1', which 'd' reads)" "$tmp/err" ||
    fail "a cycle of write-after-read dependencies: exit $rc"
pass "a cycle through two updates: exit 2, the cycle named edge by edge"
echo "$passed passed"
