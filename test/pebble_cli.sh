#!/usr/bin/env bash
# The pebble command line's plan and check: results on MiniMalloc's instances and a zoo graph,
# every output format, --out then check round trips, and the exit status and one-line message
# for each bad command line (2), malformed CSV (2, `pebble: FILE:LINE: ...`) and failure (1).
#
# usage: pebble_cli.sh PATH/TO/pebble [MINIMALLOC_DIR]
#
# MINIMALLOC_DIR (shared/minimalloc_benchmarks beside the repository) is optional: without it
# the 5-record example is written here and the tests on the challenging instances are skipped,
# with a message.
set -u

bin=${1:?usage: pebble_cli.sh PATH/TO/pebble [MINIMALLOC_DIR]}
mm=${2:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pebble_cli.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

. "$(dirname "$0")/cli_harness.sh"
skipped=0
skip() {
    skipped=$((skipped + 1))
    echo "skip - $*"
}

# expect_error STATUS PATTERN DESCRIPTION ARGS...: exit STATUS and exactly one stderr line,
# `pebble: ...`, matching the extended regex PATTERN.
expect_error() {
    local want=$1 pattern=$2 desc=$3
    shift 3
    run "$@"
    [ "$rc" -eq "$want" ] || fail "$desc: exit status $rc, expected $want"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "$desc: $(wc -l <"$tmp/err") lines on stderr, expected 1"
    grep -Eq "^pebble: ($pattern)" "$tmp/err" || fail "$desc: stderr does not match 'pebble: ($pattern)'"
    pass "$desc: exit $rc, $(cat "$tmp/err")"
}

# expect_ok DESCRIPTION ARGS...: exit 0 and nothing on stderr.
expect_ok() {
    local desc=$1
    shift
    run "$@"
    [ "$rc" -eq 0 ] || fail "$desc: exit status $rc, expected 0"
    [ ! -s "$tmp/err" ] || fail "$desc: unexpected output on stderr"
}

have_python=0
command -v python3 >/dev/null 2>&1 && have_python=1

# ---- inputs ---------------------------------------------------------------------------------

if [ -n "$mm" ] && [ -f "$mm/input.12.csv" ]; then
    example=$mm/input.12.csv
    echo "# MiniMalloc instances from $mm"
else
    echo "# no MiniMalloc instances at '${mm:-<none given>}': using the 5-record example written here;"
    echo "# the challenging instances A-K are skipped"
    mm=
    example=$tmp/input.12.csv
    printf 'id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\nb3,0,9,4\nb4,9,21,4\nb5,0,21,4\n' >"$example"
fi

# The strategies, as the program lists them (the last line of `plan --help` that starts with
# "strategies:").
run plan --help
[ "$rc" -eq 0 ] || fail "plan --help: exit $rc"
strategies=$(sed -n 's/^strategies: *//p' "$tmp/out")
[ -n "$strategies" ] || fail "plan --help does not list the strategies"
n_strategies=$(echo "$strategies" | wc -w)
echo "$strategies" | grep -qw best || fail "plan --help: 'best' is not among the strategies: $strategies"
pass "plan --help: exit 0, $n_strategies strategies: $strategies"

# ---- help, version, bad command lines -------------------------------------------------------

run --help
[ "$rc" -eq 0 ] && grep -q "plan" "$tmp/out" && grep -q "check" "$tmp/out" || fail "--help: exit $rc or no commands listed"
pass "--help: exit 0, lists plan and check"
# --version: include/pebble/version.h's version (CMake's project version is read from it) and
# the commit; every subcommand says the same
want=$(sed -n 's/^#define PBL_VERSION_\(MAJOR\|MINOR\|PATCH\) \+\([0-9]\+\).*/\2/p' \
    "$(dirname "$0")/../include/pebble/version.h" | paste -sd.)
[ -n "$want" ] || fail "no PBL_VERSION_* in include/pebble/version.h"
run --version
[ "$rc" -eq 0 ] && [ ! -s "$tmp/err" ] && grep -Eq "^pebble ${want//./\\.} \(commit [0-9A-Za-z._+-]+\)$" "$tmp/out" ||
    fail "--version: exit $rc, '$(cat "$tmp/out")', expected 'pebble $want (commit ...)'"
version=$(cat "$tmp/out")
pass "--version: $version"
for cmd in plan check export viz explain run; do
    run "$cmd" --version
    [ "$rc" -eq 0 ] && [ "$(cat "$tmp/out")" = "$version" ] && [ ! -s "$tmp/err" ] || fail "$cmd --version: exit $rc, '$(cat "$tmp/out")'"
    run "$cmd" --help
    [ "$rc" -eq 0 ] && head -1 "$tmp/out" | grep -q "^usage: pebble $cmd" && [ ! -s "$tmp/err" ] ||
        fail "$cmd --help: exit $rc or no usage on stdout"
    cp "$tmp/out" "$tmp/help"
    run "$cmd" -h
    [ "$rc" -eq 0 ] && cmp -s "$tmp/out" "$tmp/help" || fail "$cmd -h: exit $rc or not --help's text"
done
pass "plan, check, export, viz, explain, run: --version prints '$version', --help and -h the usage on stdout, exit 0"
run check --help
[ "$rc" -eq 0 ] && grep -q -- "--capacity" "$tmp/out" || fail "check --help: exit $rc or no usage"
pass "check --help: exit 0"
run
[ "$rc" -eq 2 ] && grep -q usage "$tmp/err" || fail "no command: exit $rc (expected 2) or no usage on stderr"
pass "no command: exit 2, usage on stderr"

expect_error 2 "unknown command 'frobnicate'" "unknown subcommand" frobnicate
expect_error 2 "unknown option '--frobnicate'" "unknown top-level flag" --frobnicate
expect_error 2 "unknown option '--frobnicate' for 'pebble plan'" "unknown plan flag" plan "$example" --frobnicate
expect_error 2 "unknown option '-x' for 'pebble check'" "unknown check flag" check "$example" -x
expect_error 2 "--align needs a value" "--align without a value" plan "$example" --align
expect_error 2 "--out needs a value" "--out without a value" plan "$example" --out
expect_error 2 "--align: 'x' is not an integer" "--align x" plan "$example" --align x
expect_error 2 "--align: '8k' is not an integer" "--align 8k" plan "$example" --align 8k
expect_error 2 "--align: 0 is out of range" "--align 0" plan "$example" --align 0
expect_error 2 "--capacity: 'lots' is not an integer" "--capacity lots" plan "$example" --capacity lots
expect_error 2 "--capacity: -5 is out of range" "--capacity -5" check "$example" --capacity -5
expect_error 2 "--capacity: 99999999999999999999 is out of range" "--capacity overflowing" \
    plan "$example" --capacity 99999999999999999999
expect_error 2 "--capacity: 0 bytes holds nothing; give C >= 1, or none" \
    "--capacity 0 is not 'no limit'" plan "$example" --capacity 0
expect_error 2 "--capacity: 0 bytes holds nothing" "check --capacity 0" check "$example" --capacity 0
expect_ok "--capacity none: no limit" plan "$example" --strategy naive --capacity none
grep -q "capacity none)" "$tmp/out" || fail "--capacity none: $(cat "$tmp/out")"
pass "--capacity none spells no limit"
expect_error 2 "--time-limit: 'soon' is not a number" "--time-limit soon" plan "$example" --time-limit soon
expect_error 2 "--time-limit: 0 is out of range" "--time-limit 0" plan "$example" --time-limit 0
expect_error 2 "--strategy: unknown strategy 'nope'" "unknown strategy" plan "$example" --strategy nope
expect_error 2 "--format: 'xml' is not one of" "unknown format" plan "$example" --format xml
expect_error 2 "--help takes no value" "--help=x" plan --help=x
expect_error 2 "--version takes no value" "--version=x" check --version=x
expect_error 2 "--align: 'x' is not an integer" "--align=x" plan "$example" --align=x
expect_error 2 "plan: unexpected argument" "two files" plan "$example" "$example"
expect_error 2 "plan: no FILE given" "plan without a file" plan --strategy all
expect_error 2 "check: no FILE given" "check without a file" check

# --flag=value is --flag value; after --, an argument is a FILE even if it starts with '-'
run plan "$example" --strategy all --format csv --align 4 --capacity 64
[ "$rc" -eq 0 ] || fail "plan --flag value: exit $rc"
cut -d, -f1-6 "$tmp/out" >"$tmp/spaced"
run plan "$example" --strategy=all --format=csv --align=4 --capacity=64
[ "$rc" -eq 0 ] && cut -d, -f1-6 "$tmp/out" | cmp -s - "$tmp/spaced" || fail "plan --flag=value: exit $rc or another result"
pass "plan --strategy=all --format=csv --align=4 --capacity=64: the result of the spaced forms"
cp "$example" "$tmp/-example.csv"
(cd "$tmp" && "$bin" plan -example.csv >/dev/null 2>"$tmp/err"; [ $? -eq 2 ] && grep -q "unknown option '-example.csv'" "$tmp/err") ||
    fail "plan -example.csv: not refused as an unknown option"
(cd "$tmp" && "$bin" plan -- -example.csv >"$tmp/out" 2>"$tmp/err") && grep -q "^records: -example.csv (5 records" "$tmp/out" ||
    fail "plan -- -example.csv: not taken as a file"
pass "-- ends the options: 'plan -- -example.csv' plans the file, without -- it is an unknown option"

# ---- plan on the 5-record example -----------------------------------------------------------

expect_ok "plan example" plan "$example"
grep -q "^lower bound: 12 bytes" "$tmp/out" || fail "plan example: no 'lower bound: 12 bytes' line"
grep -Eq "^best +[0-9]+ +[0-9.]+ +yes" "$tmp/out" || fail "plan example: no valid 'best' row"
pass "plan example (default strategy best): $(grep '^best' "$tmp/out" | tr -s ' ')"

expect_ok "plan example --strategy all --format json" plan "$example" --strategy all --format json
cp "$tmp/out" "$tmp/all.json"
if [ "$have_python" -eq 1 ]; then
    python3 -m json.tool "$tmp/all.json" >/dev/null || fail "--format json: python3 -m json.tool rejects the output"
    python3 - "$tmp/all.json" "$strategies" <<'EOF' || fail "--format json: wrong shape or values (above)"
import json, sys
doc = json.load(open(sys.argv[1]))
want = sys.argv[2].split()
assert doc["lower_bound"] == 12, doc["lower_bound"]
names = [s["name"] for s in doc["strategies"]]
assert names == want, (names, want)
for s in doc["strategies"]:
    assert isinstance(s["valid"], bool) and isinstance(s["ms"], (int, float)) and s["ms"] >= 0, s
    if s["valid"]:
        assert s["bytes"] >= 12 and abs(s["ratio"] - s["bytes"] / 12) < 1e-4, s
    else:
        assert "error" in s, s
best = [s for s in doc["strategies"] if s["name"] == "best"][0]
assert best["valid"] and best["bytes"] == min(s["bytes"] for s in doc["strategies"] if s["valid"]), best
EOF
    pass "--strategy all --format json: valid JSON (json.tool), lower_bound 12, all $n_strategies strategies in order, best is the smallest valid"
else
    skip "--format json: python3 not found, JSON not parsed"
    for s in $strategies; do grep -q "\"name\": \"$s\"" "$tmp/all.json" || fail "--format json: no entry for $s"; done
    pass "--strategy all --format json: an entry for each of the $n_strategies strategies"
fi

expect_ok "plan example --strategy all --format csv" plan "$example" --strategy all --format csv
head -n 1 "$tmp/out" | grep -q '^strategy,bytes,lower_bound,ratio,valid,optimal,cut_off,ms,error,note$' ||
    fail "--format csv: bad header '$(head -n 1 "$tmp/out")'"
[ "$(tail -n +2 "$tmp/out" | wc -l)" -eq "$n_strategies" ] || fail "--format csv: not one row per strategy"
pass "--strategy all --format csv: header and $n_strategies rows"

expect_ok "plan example --strategy all" plan "$example" --strategy all
[ "$(grep -cE '^[a-z0-9_]+ +([0-9]+|-) ' "$tmp/out")" -eq "$n_strategies" ] || fail "table: not one row per strategy"
pass "--strategy all (table): one row per strategy"

# Every strategy: --out, then check reads the file back and finds the same arena.
for s in $strategies; do
    run plan "$example" --strategy "$s" --format json --out "$tmp/plan-$s.csv"
    if [ "$rc" -ne 0 ]; then
        [ "$rc" -eq 1 ] && [ ! -e "$tmp/plan-$s.csv" ] || fail "--strategy $s --out: exit $rc, or a file written anyway"
        pass "--strategy $s: no valid plan ($(cat "$tmp/err")), exit 1, no file written"
        continue
    fi
    bytes=$(sed -n 's/.*"bytes": \([0-9]*\),.*/\1/p' "$tmp/out")
    [ -s "$tmp/plan-$s.csv" ] || fail "--strategy $s --out: no file"
    head -n 1 "$tmp/plan-$s.csv" | grep -q '^id,lower,upper,size,offset$' || fail "--out $s: bad header"
    expect_ok "check plan-$s.csv" check "$tmp/plan-$s.csv"
    grep -q "ok: 5 records, arena $bytes bytes, lower bound 12 bytes" "$tmp/out" ||
        fail "check after --strategy $s: '$(cat "$tmp/out")' does not say arena $bytes"
    pass "--strategy $s --out, then check: ok, arena $bytes bytes"
done

expect_ok "plan --strategy all --out" plan "$example" --strategy all --format json --out "$tmp/plan-all.csv"
expect_ok "check plan-all.csv" check "$tmp/plan-all.csv"
best=$(sed -n 's/.*"name": "best", "bytes": \([0-9]*\),.*/\1/p' "$tmp/all.json")
grep -q "arena $best bytes" "$tmp/out" || fail "--strategy all --out: arena is not best's $best: $(cat "$tmp/out")"
pass "--strategy all --out writes the smallest valid plan (arena $best = best's), check ok"

# Capacity: a plan is valid only if it fits.
run plan "$example" --strategy all --capacity 12 --format json
[ "$rc" -le 1 ] || fail "--capacity 12: exit $rc"
if [ "$have_python" -eq 1 ]; then
    python3 - "$tmp/out" <<'EOF' || fail "--capacity 12: a valid plan above the capacity"
import json, sys
for s in json.load(open(sys.argv[1]))["strategies"]:
    assert not s["valid"] or s["bytes"] <= 12, s
EOF
fi
pass "--capacity 12 --strategy all: exit $rc; no plan above 12 bytes is called valid"
expect_error 1 "strategy 'naive': rejected by the verifier: the arena needs 20 bytes, more than the capacity 19" \
    "naive over --capacity 19" plan "$example" --strategy naive --capacity 19

# A plan the verifier rejects is never called optimal, even one at the lower bound (12 bytes
# here) rejected for a capacity below it.
run plan "$example" --strategy mxnet --capacity 11 --format json
[ "$rc" -eq 1 ] || fail "mxnet --capacity 11: exit $rc, expected 1"
grep -q '"valid": false, "ms": [0-9.]*, "optimal": false' "$tmp/out" ||
    fail "mxnet --capacity 11: a rejected plan is called optimal: $(cat "$tmp/out")"
pass "--format json: a rejected plan at the lower bound is not optimal"

# exact reports the lower bound it proved (issue 15 item 3): between the peak and its arena,
# equal to the arena when it says optimal.
expect_ok "plan --strategy exact --format json" plan "$example" --strategy exact --format json
if command -v python3 >/dev/null; then
    python3 - "$tmp/out" <<'EOF' || fail "exact --format json: proven_bound missing or out of range: $(cat "$tmp/out")"
import json, sys
d = json.load(open(sys.argv[1]))
e = d["strategies"][0]
b = e["proven_bound"]
assert d["lower_bound"] <= b <= e["bytes"], (b, e)
assert not e["optimal"] or b == e["bytes"], (b, e)
EOF
    pass "exact --format json: proven_bound between the lower bound and the arena"
else
    grep -q '"proven_bound": [0-9]' "$tmp/out" || fail "exact --format json: no proven_bound: $(cat "$tmp/out")"
    pass "exact --format json: a proven_bound"
fi

# Alignment applies to the plan and to check.
expect_ok "plan --align 16 --out" plan "$example" --strategy naive --align 16 --out "$tmp/aligned.csv"
expect_ok "check --align 16" check "$tmp/aligned.csv" --align 16
pass "--align 16: naive's plan verifies with check --align 16"
expect_error 1 "$tmp/plan-naive.csv: invalid: record 1 \(id 'b2', line 3\): offset 4 is not a non-negative multiple of 8" \
    "check --align 8 on an unaligned plan" check "$tmp/plan-naive.csv" --align 8

# ---- check on bad assignments ---------------------------------------------------------------

printf 'id,lower,upper,size,offset\na,0,2,4,0\nb,1,3,4,2\n' >"$tmp/overlap.csv"
expect_error 1 "$tmp/overlap.csv: invalid: records 0 \(id 'a', line 2\) and 1 \(id 'b', line 3\) are both live" \
    "check on overlapping records" check "$tmp/overlap.csv"
printf 'id,lower,upper,size,offset\na,0,2,4,0\nb,2,3,4,0\n' >"$tmp/reuse.csv"
expect_ok "check on reuse after a lifetime ends" check "$tmp/reuse.csv"
grep -q "ok: 2 records, arena 4 bytes, lower bound 4 bytes" "$tmp/out" || fail "check reuse: $(cat "$tmp/out")"
pass "check: [0,2) and [2,3) may share bytes (half-open lifetimes): ok, arena 4"
expect_error 1 "$tmp/plan-naive.csv: invalid: the arena needs 20 bytes, more than the capacity 19" \
    "check over capacity" check "$tmp/plan-naive.csv" --capacity 19
expect_error 2 "$example:1: no offset column" "check on records without offsets" check "$example"
printf 'id,lower,upper,size,offset\n' >"$tmp/empty-plan.csv"
expect_ok "check on an empty assignment" check "$tmp/empty-plan.csv"
pass "check on a header-only assignment: $(cat "$tmp/out")"

# ---- malformed CSV: exit 2, one line `pebble: FILE:LINE: ...` ----------------------------------

H='id,lower,upper,size\n'
bad_csv() { # NAME LINE PATTERN PRINTF-FORMAT
    local f=$tmp/$1.csv
    printf "$4" >"$f"
    expect_error 2 "$f:$2: $3" "plan on $1" plan "$f"
    expect_error 2 "$f:$2: $3" "check on $1" check "$f"
}
bad_csv zero-bytes 1 "empty file" ''
bad_csv no-header 1 "missing header" 'b1,0,3,4\n'
bad_csv missing-column 1 "missing column 'upper'" 'id,lower,size\na,0,8\n'
bad_csv gaps-column 1 "column 'gaps' is not supported" 'id,lower,upper,size,gaps\n'
bad_csv old-header 1 "old MiniMalloc header" 'buffer,start,end,size\n0,0,1,8\n'
bad_csv too-few-fields 3 "expected 4 fields" "${H}a,0,1,8\nb,0,1\n"
bad_csv too-many-fields 2 "expected 4 fields" "${H}a,0,1,8,0\n"
bad_csv not-an-integer 2 "lower: 'abc' is not an integer" "${H}a,abc,1,8\n"
bad_csv fraction 2 "size: '1.5' is not an integer" "${H}a,0,1,1.5\n"
bad_csv overflow 2 "size: '99999999999999999999' is out of range" "${H}a,0,1,99999999999999999999\n"
bad_csv zero-size 3 "size must be positive" "${H}a,0,1,8\nb,0,1,0\n"
bad_csv negative-size 2 "size must be positive" "${H}a,0,1,-8\n"
bad_csv negative-lower 2 "lower must not be negative" "${H}a,-1,1,8\n"
bad_csv empty-lifetime 2 "upper \(3\) must be greater than lower \(3\)" "${H}a,3,3,8\n"
bad_csv duplicate-id 4 "duplicate id 'b1' \(first on line 2\)" "${H}b1,0,1,8\nb2,0,1,8\nb1,1,2,8\n"
bad_csv crlf-bad-line 3 "upper: 'x' is not an integer" 'id,lower,upper,size\r\na,0,1,8\r\nb,0,x,8\r\n'
bad_csv nul-byte 2 "NUL byte at column 4" "${H}a,0\\000,1,8\n"
bad_csv empty-id 2 "empty id" "${H},0,1,8\n"
{
    printf 'id,lower,upper,size\na,0,1,8\n'
    head -c 5000 /dev/zero | tr '\0' 'x'
    printf ',0,1,8\n'
} >"$tmp/long-line.csv"
expect_error 2 "$tmp/long-line.csv:3: line is longer than 4096 bytes" "plan on a 5006-byte line" plan "$tmp/long-line.csv"
head -c 100000 /dev/urandom >"$tmp/random.csv"
run plan "$tmp/random.csv"
[ "$rc" -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -Eq "^pebble: $tmp/random.csv:[0-9]+: " "$tmp/err" ||
    fail "plan on 100 KB of random bytes: exit $rc"
pass "plan on 100 KB of random bytes: exit 2, $(cat "$tmp/err")"

printf 'id,lower,upper,size\r\nb1,0,3,4\r\nb2,3,9,4\r\n\r\n' >"$tmp/crlf.csv"
expect_ok "plan on a CRLF file" plan "$tmp/crlf.csv"
grep -q "^lower bound: 4 bytes" "$tmp/out" || fail "CRLF file: wrong lower bound"
pass "plan on a CRLF file with a blank line: exit 0, lower bound 4"
printf 'id,lower,upper,size\n' >"$tmp/header-only.csv"
expect_ok "plan on a header-only file" plan "$tmp/header-only.csv" --format json
grep -q '"lower_bound": 0' "$tmp/out" || fail "header-only: lower bound is not 0"
pass "plan on a header-only file (no records): exit 0, lower bound 0"

# ---- other failures: exit 1 ------------------------------------------------------------------

expect_error 1 "$tmp/missing.csv: cannot open: No such file or directory" "plan on a missing file" plan "$tmp/missing.csv"
expect_error 1 "$tmp: is a directory, not a regular file" "plan on a directory" plan "$tmp"
expect_error 1 "$tmp/nowhere/plan.csv: cannot create" "--out into a missing directory" \
    plan "$example" --out "$tmp/nowhere/plan.csv"
[ ! -e "$tmp/nowhere" ] || fail "--out into a missing directory created it"
echo keep >"$tmp/keep.csv"
run plan "$example" --strategy naive --capacity 19 --out "$tmp/keep.csv"
[ "$rc" -eq 1 ] && [ "$(cat "$tmp/keep.csv")" = keep ] || fail "a plan over capacity with --out: exit $rc or the file changed"
pass "--out with a plan that does not fit: exit 1, the existing file is untouched"
if [ -w /dev/full ]; then
    "$bin" plan "$example" >/dev/full 2>"$tmp/err"
    rc=$?
    [ "$rc" -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^pebble: writing the output: No space left" "$tmp/err" ||
        fail "plan > /dev/full: exit $rc, stderr '$(cat "$tmp/err")'"
    pass "plan > /dev/full: exit 1, $(cat "$tmp/err")"
else
    skip "/dev/full is not available: output write errors not tested"
fi
mkdir "$tmp/adir"
expect_error 1 "$tmp/adir: is a directory" "--out over a directory" plan "$example" --out "$tmp/adir"
[ -z "$(find "$tmp" -name '*.tmp.*')" ] || fail "a temporary file was left behind"
pass "no temporary files left behind"

# ---- MiniMalloc's challenging instances ------------------------------------------------------

if [ -n "$mm" ] && [ -f "$mm/A.1048576.csv" ]; then
    expect_ok "plan A --strategy all" plan "$mm/A.1048576.csv" --strategy all --time-limit 2 --format json \
        --out "$tmp/A.csv"
    grep -q '"lower_bound": 1048576' "$tmp/out" || fail "A: lower bound is not 1048576"
    if [ "$have_python" -eq 1 ]; then
        python3 - "$tmp/out" "$strategies" <<'EOF' || fail "A --strategy all: wrong shape or values (above)"
import json, sys
doc = json.load(open(sys.argv[1]))
assert [s["name"] for s in doc["strategies"]] == sys.argv[2].split()
for s in doc["strategies"]:
    assert s["valid"] or "error" in s, s
    if s["valid"]:
        assert s["bytes"] >= 1048576, s
print("   " + ", ".join("%s %s" % (s["name"], s["bytes"] if s["valid"] else "error") for s in doc["strategies"]))
EOF
    fi
    expect_ok "check A's plan" check "$tmp/A.csv" --capacity 100000000
    pass "A.1048576: every strategy valid or reporting an error, lower bound 1048576; --out then check: $(cat "$tmp/out")"
    for x in B C D E F G H I J K; do
        expect_ok "plan $x" plan "$mm/$x.1048576.csv" --time-limit 1 --format csv
    done
    pass "B-K: plan (best) exits 0 on each"
else
    skip "MiniMalloc challenging instances: not found next to the repository"
fi

# ---- zoo graphs --------------------------------------------------------------------------------

run plan zoo:mlp_train
if grep -q "zoo graphs are not part of this build" "$tmp/err"; then
    skip "zoo:mlp_train: this pebble was built without the zoo library"
else
    [ "$rc" -eq 0 ] || fail "plan zoo:mlp_train: exit $rc"
    grep -Eq "align 64" "$tmp/out" || fail "zoo:mlp_train: default alignment is not 64"
    lb=$(sed -n 's/^lower bound: \([0-9]*\) bytes/\1/p' "$tmp/out")
    [ "${lb:-0}" -gt 0 ] || fail "zoo:mlp_train: lower bound is not positive"
    pass "plan zoo:mlp_train: exit 0, align 64, lower bound $lb bytes"
    expect_ok "plan zoo:mlp_train --strategy all --out" plan zoo:mlp_train --strategy all --format json \
        --out "$tmp/mlp.csv"
    expect_ok "check mlp plan --align 64" check "$tmp/mlp.csv" --align 64
    pass "zoo:mlp_train --strategy all --out, then check --align 64: $(cat "$tmp/out")"
    expect_ok "plan zoo:mlp_train --align 256 --out" plan zoo:mlp_train --align 256 --out "$tmp/mlp256.csv"
    lb=$(sed -n 's/^lower bound: \([0-9]*\) bytes/\1/p' "$tmp/out")
    [ $((lb % 256)) -eq 0 ] || fail "zoo:mlp_train --align 256: lower bound $lb is not a multiple of 256"
    expect_ok "check mlp plan --align 256" check "$tmp/mlp256.csv" --align 256
    pass "zoo:mlp_train --align 256: record sizes rounded to 256 (lower bound $lb), check --align 256 ok"
    expect_error 2 "zoo: nosuchmodel: no such model" "unknown zoo model" plan zoo:nosuchmodel
    expect_error 2 "--batch: 0 is out of range" "--batch 0" plan zoo:mlp --batch 0
    expect_ok "plan zoo:mlp --batch 7" plan zoo:mlp --batch 7
    pass "plan zoo:mlp --batch 7: $(grep '^lower bound' "$tmp/out")"
fi

if [ "$skipped" -gt 0 ]; then
    echo "$passed passed, 0 failed ($skipped skipped, see above)"
else
    echo "$passed passed, 0 failed"
fi
