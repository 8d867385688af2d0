#!/usr/bin/env bash
# train_mlp under mpirun (docs/data_parallel.md): 2 ranks train one small epoch, rank 0 alone
# prints (one model line, one test accuracy, above 0.7); 3 ranks refuse a batch of 128 (exit 2
# from the rank, a message saying why); --backend cuda is refused likewise. Skipped (77) without mpirun or the data set.
#
# usage: train_mlp_mpi.sh MPIEXEC TRAIN_MLP
set -u
mpiexec=${1:?usage: train_mlp_mpi.sh MPIEXEC TRAIN_MLP}
train=${2:?usage: train_mlp_mpi.sh MPIEXEC TRAIN_MLP}
data=/usr/share/datasets/fashion-mnist
[ -x "$mpiexec" ] || { echo "skipped: no mpiexec"; exit 77; }
[ -r "$data/train-images-idx3-ubyte.gz" ] || { echo "skipped: no $data"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/train_mlp_mpi.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
run() { "$mpiexec" -np "$1" --oversubscribe --allow-run-as-root "$train" "${@:2}" >"$tmp/out" 2>"$tmp/err"; }
failed=0
fail() {
    echo "FAIL: $*"
    sed 's/^/  stdout: /' "$tmp/out"
    sed 's/^/  stderr: /' "$tmp/err"
    failed=1
}

if ! run 2 --epochs 1 --hidden 16 --val 1000 --threads 1; then
    fail "2 ranks: exit status not 0"
else
    [ "$(grep -c '^data-parallel: 2 ranks, 64 samples each' "$tmp/out")" = 1 ] || fail "2 ranks: one 'data-parallel' line"
    [ "$(grep -c '^test accuracy' "$tmp/out")" = 1 ] || fail "2 ranks: rank 0 alone reports the test accuracy"
    acc=$(sed -n 's/^test accuracy: //p' "$tmp/out")
    awk -v a="${acc:-0}" 'BEGIN { exit !(a > 0.7) }' || fail "2 ranks: test accuracy ${acc:-none} not above 0.7"
    echo "ok - 2 ranks: test accuracy $acc"
fi

if run 3 --epochs 1 --batch 128; then
    fail "3 ranks, batch 128: exit status 0"
else
    grep -q 'cannot be shared evenly by 3 ranks' "$tmp/err" || fail "3 ranks, batch 128: no message saying why"
    echo "ok - 3 ranks refuse a batch of 128: $(head -1 "$tmp/err")"
fi

# MPI sums host memory: --backend cuda under mpirun is refused, by rank 0 alone, before the data
if run 2 --epochs 1 --backend cuda; then
    fail "2 ranks, --backend cuda: exit status 0"
else
    [ "$(grep -c 'data-parallel training under an MPI launcher runs on the CPU only' "$tmp/err")" = 1 ] ||
        fail "2 ranks, --backend cuda: not one message saying why"
    echo "ok - 2 ranks refuse --backend cuda: $(head -1 "$tmp/err")"
fi
exit $failed
