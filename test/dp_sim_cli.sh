#!/usr/bin/env bash
# bench/dp_sim (issue 19): with --flops (no timing, so the figures are exact) the 1-rank row is
# the graph's cost over the rate, the no-overlap row's communication is the ring formula on
# all the gradient bytes, every rank count gets a pick (the fastest overlapped row, never slower
# than no overlap); the cap of 16 gradients a bucket; zoo models; a JSON graph file (written by
# `pebble export`) giving the same rows as the zoo graph it came from; the usage errors (exit 2)
# and graphs without updates (exit 1).
#
# usage: dp_sim_cli.sh PATH/TO/dp_sim [PATH/TO/pebble]
set -u

bin=${1:?usage: dp_sim_cli.sh PATH/TO/dp_sim [PATH/TO/pebble]}
cli=${2:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dp_sim_cli.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

. "$(dirname "$0")/cli_harness.sh"

run --flops 1e10 --link eth100
[ "$rc" -eq 0 ] || fail "dp_sim --flops: exit $rc"
grep -q '^model mlp 784-512-512-10 adam, batch 128 per rank: 24 nodes, 6 gradients' "$tmp/out" ||
    fail "not the 784-512-512-10 MLP at batch 128 with 6 gradients"
grep -q '^pick: 8 ranks: .*; 64 ranks: .*; 512 ranks: ' "$tmp/out" || fail "no pick for 8, 64 and 512 ranks"
pass "table: the MLP, and a pick per rank count"

run --flops 1e10 --link eth100,nvlink --algo ring --format json
[ "$rc" -eq 0 ] || fail "dp_sim --format json: exit $rc"
if command -v python3 >/dev/null 2>&1; then
    python3 - "$tmp/out" <<'EOF' || fail "dp_sim --format json: wrong shape or values (above)"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["rate"]["source"] == "flops" and d["gradients"] == 6, d["rate"]
alpha = {"eth100": 15e-6, "nvlink": 3e-6}
beta = {"eth100": 12.5e9, "nvlink": 150e9}
assert [l["link"] for l in d["links"]] == ["eth100", "nvlink"]
for l in d["links"]:
    rows = l["rows"]
    one = [r for r in rows if r["ranks"] == 1]
    assert len(one) == 1 and abs(one[0]["step_ms"] - d["cost_units"] / 1e10 * 1e3) < 1e-6 * one[0]["step_ms"], one
    for n in (8, 64, 512):
        rs = {r["buckets"]: r for r in rows if r["ranks"] == n}
        no = rs["no overlap"]
        ring = (2 * (n - 1) * alpha[l["link"]] + 2 * (n - 1) / n * d["gradient_bytes"] / beta[l["link"]]) * 1e3
        assert abs(no["comm_ms"] - ring) < 1e-6 * ring and no["hidden"] == 0 and no["count"] == 1, (no, ring)
        # the MLP's last gradient comes from its last backward node: one bucket cannot overlap
        assert abs(rs["no byte limit"]["step_ms"] - no["step_ms"]) < 1e-9 * no["step_ms"]
        assert rs["per gradient"]["count"] == 6
        for r in rs.values():
            assert 0 <= r["hidden"] <= 1, r
        # small buckets may lose to one (latency per bucket), but the pick never loses to no overlap
        pick = [p for p in l["picks"] if p["ranks"] == n][0]
        assert pick["step_ms"] == min(r["step_ms"] for r in rs.values() if r["overlap"]), pick
        assert pick["step_ms"] <= no["step_ms"], (pick, no)
print("json ok")
EOF
    pass "json: 1 rank = cost / rate, no overlap = ring formula, the pick is the minimum and beats no overlap"
else
    echo "skip: python3 not found, JSON not parsed"
fi

run --flops 1e10 --alpha 0 --beta 1e9 --ranks 2 --buckets 1M
[ "$rc" -eq 0 ] && grep -q '^link custom' "$tmp/out" || fail "--alpha/--beta: no custom link"
pass "--alpha/--beta make a custom link"

run --model mobilenet_v2_train --flops 1e12 --ranks 8 --link ib100
[ "$rc" -eq 0 ] && grep -q 'batch 32 per rank: .* 158 gradients' "$tmp/out" || fail "mobilenet_v2_train: exit $rc"
# 158 gradients, at most 16 a bucket (pbl_graph_data_parallel's cap): 10 buckets without a byte limit
grep -Eq '^ +8  no byte limit +10 ' "$tmp/out" || fail "mobilenet_v2_train: not 10 buckets of at most 16 gradients"
run --model mobilenet_v2_train --flops 1e12 --ranks 8 --link ib100 --max-grads 0
grep -Eq '^ +8  no byte limit +1 ' "$tmp/out" || fail "mobilenet_v2_train --max-grads 0: not one bucket"
pass "a zoo CNN (mobilenet_v2_train, the model's batch), 16 gradients a bucket at most unless --max-grads 0"

if [ -n "$cli" ]; then
    "$cli" export zoo:mlp_train --json "$tmp/mlp.json" >"$tmp/out" 2>"$tmp/err" || fail "pebble export zoo:mlp_train"
    run --model mlp_train --flops 1e10 --list
    sed 1d "$tmp/out" >"$tmp/zoo.txt"
    run --model "$tmp/mlp.json" --flops 1e10 --list
    [ "$rc" -eq 0 ] || fail "dp_sim --model FILE.json: exit $rc"
    sed 1d "$tmp/out" | diff "$tmp/zoo.txt" - || fail "the JSON graph's rows differ from the zoo graph's"
    pass "a JSON graph file: the same rows as the zoo graph it was exported from"
fi

for bad in "--link foo" "--ranks 0" "--max-grads -1" "--buckets 12Q" "--format xml" "--algo tree" "--flops -1" "--nope"; do
    # shellcheck disable=SC2086
    run $bad
    [ "$rc" -eq 2 ] && grep -q '^usage: dp_sim' "$tmp/err" || fail "dp_sim $bad: exit $rc, not 2 with the usage"
done
pass "bad options: exit 2 with the usage"

run --model mlp --batch 0
[ "$rc" -eq 2 ] || fail "--batch 0 for the MLP: exit $rc"
run --model mlp50 --flops 1e10
[ "$rc" -eq 1 ] && grep -q 'no optimizer updates' "$tmp/err" || fail "an inference graph: exit $rc, not 1"
run --model no_such_model --flops 1e10
[ "$rc" -eq 1 ] || fail "an unknown model: exit $rc, not 1"
pass "graphs it cannot use: exit 1 with a message"
echo "$passed passed"
