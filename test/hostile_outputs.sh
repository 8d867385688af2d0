#!/usr/bin/env bash
# Hostile and careless outputs (issue 14): no file pebble writes may lose or clobber a user's
# file. Devices and FIFOs are written in place, links lead to their target (a dangling one
# creates it, a loop is refused) and a file keeps its mode, /dev/stdout and /dev/fd/N write
# through the descriptor (`>> log` appends), links planted at temporary names do nothing, a
# 250-byte name still fits its temporary, kill -9 and SIGTERM during a write leave the old
# file whole (and no temporary once the next write has run, or at once after SIGTERM), a full
# or read-only filesystem gives a clean error, no output may be a file the same run reads
# (pebble run's --input/--expect/MODEL, train_mlp's data set and --load, the file behind
# standard input for `-`), two outputs may not collide (after their names are made file
# names, through a dangling link, or as `-` and the file standard output fills), and every
# command finds an unwritable output before its work (train_mlp before its first epoch).
# Each case prints one line; the summary counts them.
#
# usage: hostile_outputs.sh PATH/TO/pebble PATH/TO/train_mlp
#
# Cases that need root (private device nodes made with mknod, a 64 KiB tmpfs, a read-only
# mount, a fresh pid namespace) are skipped with a message otherwise. The data set is a tiny
# IDX set made here (no installed data set needed). Every failed case is listed, and the
# script goes on, so that it can be run against an older build to see which cases it fails.
set -u

pebble=${1:?usage: hostile_outputs.sh PATH/TO/pebble PATH/TO/train_mlp}
train=${2:?usage: hostile_outputs.sh PATH/TO/pebble PATH/TO/train_mlp}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pebble_outputs_test.XXXXXX") || exit 1
mounts=()
main_shell=$BASHPID
cleanup() {
    # a background child that is signalled before it execs its command runs this EXIT trap
    # too (bash): only the script itself may remove the folder
    [ "$BASHPID" = "$main_shell" ] || return 0
    for m in "${mounts[@]}"; do umount "$m" 2>/dev/null; done
    chmod -R u+w "$tmp" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

passed=0 failed=0 skipped=0
failures=()
pass() {
    passed=$((passed + 1))
    echo "ok $((passed + failed)) - $*"
}
fail() {
    failed=$((failed + 1))
    failures+=("$*")
    echo "FAIL $((passed + failed)) - $*"
    for f in out err; do
        [ -s "$tmp/$f" ] && { echo "  --- std$f:"; head -n 5 "$tmp/$f" | sed 's/^/  /'; }
    done
}
skip() {
    skipped=$((skipped + 1))
    echo "SKIP - $*"
}
# check DESCRIPTION COMMAND...: the case passes when COMMAND succeeds
check() {
    local desc=$1
    shift
    if "$@"; then pass "$desc"; else fail "$desc"; fi
}

is_root=0
[ "$(id -u)" -eq 0 ] && is_root=1

rc=0
run() { # run PROGRAM ARGS...: stdout, stderr in $tmp/out, $tmp/err; status in rc
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
}
one_line() { [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -Eq "$1" "$tmp/err"; }
temps_in() { find "$1" -name '*.tmp.*' ! -type l | wc -l; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# ---- inputs: a tiny IDX data set (as train_mlp_cli.sh makes it) and records ----------------

be32() {
    local h
    h=$(printf '%08x' "$1")
    printf "\\x${h:0:2}\\x${h:2:2}\\x${h:4:2}\\x${h:6:2}"
}
for c in 0 1 2 3 4 5 6 7 8 9; do
    head -c 784 /dev/zero | tr '\0' "\\$(printf '%03o' $((c * 25 + 5)))"
done >"$tmp/cycle.img"
printf '\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09' >"$tmp/cycle.lab"
data=$tmp/data
mkdir "$data"
for set in train:20 t10k:10; do
    n=${set#*:}
    { be32 2051; be32 "$n"; be32 28; be32 28; for ((k = 0; k < (n + 9) / 10; k++)); do cat "$tmp/cycle.img"; done |
        head -c $((n * 784)); } | gzip -n >"$data/${set%:*}-images-idx3-ubyte.gz"
    { be32 2049; be32 "$n"; for ((k = 0; k < (n + 9) / 10; k++)); do cat "$tmp/cycle.lab"; done | head -c "$n"; } |
        gzip -n >"$data/${set%:*}-labels-idx1-ubyte.gz"
done
small=(--data "$data" --hidden 16 --batch 10 --epochs 0)
# a checkpoint of about 10 MB (784 x 1024 weights, with Adam's two moments), for the kill loops
big=(--data "$data" --hidden 1024 --batch 10 --epochs 0)

# records: a small instance and one whose assignment is about 1.5 MB (what the kill loop writes)
records() { # records N SEED
    awk -v n="$1" -v seed="$2" 'BEGIN { srand(seed); print "id,lower,upper,size";
        for (i = 0; i < n; i++) { l = int(rand() * 20000); printf "%d,%d,%d,%d\n", i, l, l + 1 + int(rand() * 40), 1 + int(rand() * 4000) } }'
}
records 20 1 >"$tmp/small.csv"
records 50000 2 >"$tmp/big.csv"

# ---- devices, links and modes ---------------------------------------------------------------

if [ "$is_root" -eq 1 ] && mknod "$tmp/full" c 1 7 2>/dev/null && mknod "$tmp/null" c 1 3 2>/dev/null; then
    # private nodes for /dev/full and /dev/null, so that a failing build replaces these, not /dev's
    run "$train" "${small[@]}" --save "$tmp/full"
    check "train_mlp --save onto a full device: exit 1 'No space left', the node is still a character device" \
        eval '[ $rc -eq 1 ] && [ -c "$tmp/full" ] && one_line "No space left on device"'
    run "$train" "${small[@]}" --save "$tmp/null"
    check "train_mlp --save onto a null device: exit 0, the node is still a character device" \
        eval '[ $rc -eq 0 ] && [ -c "$tmp/null" ]'
    run "$pebble" plan "$tmp/small.csv" --out "$tmp/full"
    check "pebble plan --out onto a full device: exit 1 'No space left', the node is still a character device" \
        eval '[ $rc -eq 1 ] && [ -c "$tmp/full" ] && one_line "No space left on device"'
    run "$pebble" export zoo:mlp --json "$tmp/null"
    check "pebble export --json onto a null device: exit 0, the node is still a character device" \
        eval '[ $rc -eq 0 ] && [ -c "$tmp/null" ]'
    [ "$(temps_in "$tmp")" -eq 0 ] || fail "device writes left temporary files: $(find "$tmp" -name '*.tmp.*')"
else
    skip "device nodes (not root, or mknod failed): 4 cases"
fi

mkdir "$tmp/links"
echo old >"$tmp/links/ck.real"
chmod 600 "$tmp/links/ck.real"
ln -s ck.real "$tmp/links/ck"
(umask 022 && exec "$train" "${small[@]}" --save "$tmp/links/ck") >"$tmp/out" 2>"$tmp/err"
rc=$?
check "train_mlp --save through a link to a 0600 file: the link stays, the target holds the checkpoint, mode 0600" \
    eval '[ $rc -eq 0 ] && [ -L "$tmp/links/ck" ] && [ "$(stat -c %a "$tmp/links/ck.real")" = 600 ] &&
          [ "$(head -c 3 "$tmp/links/ck.real")" != old ] && [ "$(temps_in "$tmp/links")" -eq 0 ]'
echo old >"$tmp/links/out.real"
chmod 600 "$tmp/links/out.real"
ln -s out.real "$tmp/links/out.csv"
(umask 022 && exec "$pebble" plan "$tmp/small.csv" --out "$tmp/links/out.csv") >"$tmp/out" 2>"$tmp/err"
rc=$?
check "pebble plan --out through a link to a 0600 file: the link stays, the target holds the plan, mode 0600" \
    eval '[ $rc -eq 0 ] && [ -L "$tmp/links/out.csv" ] && [ "$(stat -c %a "$tmp/links/out.real")" = 600 ] &&
          head -n 1 "$tmp/links/out.real" | grep -q offset && [ "$(temps_in "$tmp/links")" -eq 0 ]'
# a link that leads nowhere (yet): the file is created where it points, the link stays
ln -s made.json "$tmp/links/dangling.json"
run "$pebble" export zoo:mlp --json "$tmp/links/dangling.json"
check "pebble export --json onto a dangling link: the link stays a link, its target is created" \
    eval '[ $rc -eq 0 ] && [ -L "$tmp/links/dangling.json" ] && [ -f "$tmp/links/made.json" ] && [ "$(temps_in "$tmp/links")" -eq 0 ]'
ln -s loop.b "$tmp/links/loop.a"
ln -s loop.a "$tmp/links/loop.b"
run "$pebble" viz "$tmp/small.csv" --svg "$tmp/links/loop.a"
check "pebble viz --svg onto a loop of links: exit 1 'Too many levels of symbolic links', both links intact" \
    eval '[ $rc -eq 1 ] && one_line "loop.a: cannot open: Too many levels" && [ -L "$tmp/links/loop.a" ] && [ -L "$tmp/links/loop.b" ]'
# /dev/stdout (and /dev/fd/N) name the descriptor the shell opened: `>> log` must append to
# log, not replace it with a new file holding only the output
echo "earlier line" >"$tmp/log"
"$pebble" export zoo:mlp --json /dev/stdout >>"$tmp/log" 2>"$tmp/err"
rc=$?
check "pebble export --json /dev/stdout >> log: log keeps its earlier line, the graph appended" \
    eval '[ $rc -eq 0 ] && [ "$(head -n 1 "$tmp/log")" = "earlier line" ] && grep -q "pebble-graph" "$tmp/log"'
echo "earlier line" >"$tmp/log"
"$pebble" plan "$tmp/small.csv" --format csv --out /dev/fd/3 3>>"$tmp/log" >/dev/null 2>"$tmp/err"
rc=$?
check "pebble plan --out /dev/fd/3 3>> log: log keeps its earlier line, the assignment appended" \
    eval '[ $rc -eq 0 ] && [ "$(head -n 1 "$tmp/log")" = "earlier line" ] && sed -n 2p "$tmp/log" | grep -q "^id,lower,upper,size,offset"'
echo "earlier line" >"$tmp/log"
"$train" "${small[@]}" --save /dev/stderr >/dev/null 2>>"$tmp/log"
rc=$?
check "train_mlp --save /dev/stderr 2>> log: log keeps its earlier line, the checkpoint appended" \
    eval '[ $rc -eq 0 ] && [ "$(head -n 1 "$tmp/log")" = "earlier line" ] && [ "$(stat -c %s "$tmp/log")" -gt 1000 ]'

# ---- links planted at temporary names -------------------------------------------------------

# plant DIR NAME FROM TO: links DIR/NAME.tmp.<pid> for pid FROM..TO (the old predictable
# names) toward DIR/victim
plant() {
    echo precious >"$1/victim"
    for ((p = $3; p <= $4; p++)); do ln -sf victim "$1/$2.tmp.$p"; done
}
intact() { [ "$(cat "$1/victim")" = precious ] && [ "$(find "$1" -type l | wc -l)" -eq "$2" ]; }
if [ "$is_root" -eq 1 ] && unshare --pid --fork true 2>/dev/null; then
    # in a fresh pid namespace the program is pid 1: the old names were certain
    for mode in 0 1; do
        d=$tmp/plant$mode
        mkdir "$d"
        plant "$d" out.csv 1 8
        plant "$d" ck 1 8
        PEBBLE_NO_O_TMPFILE=$mode unshare --pid --fork "$pebble" plan "$tmp/small.csv" --out "$d/out.csv" >"$tmp/out" 2>"$tmp/err"
        rc=$?
        check "pebble plan --out with links planted at out.csv.tmp.1..8 in a new pid namespace (PEBBLE_NO_O_TMPFILE=$mode): the victim is untouched" \
            eval '[ $rc -eq 0 ] && intact "$d" 16 && head -n 1 "$d/out.csv" | grep -q offset'
        PEBBLE_NO_O_TMPFILE=$mode unshare --pid --fork "$train" "${small[@]}" --save "$d/ck" >"$tmp/out" 2>"$tmp/err"
        rc=$?
        check "train_mlp --save with links planted at ck.tmp.1..8 in a new pid namespace (PEBBLE_NO_O_TMPFILE=$mode): the victim is untouched" \
            eval '[ $rc -eq 0 ] && intact "$d" 16 && [ -s "$d/ck" ]'
    done
else
    skip "planted links in a fresh pid namespace (not root, or unshare failed): 4 cases"
fi
# without a namespace: 300 pids a little ahead of the last one given out, and then pids are
# used up (each /bin/true takes one) until the next is the first planted one
d=$tmp/plantpids
mkdir "$d"
last=$(cat /proc/sys/kernel/ns_last_pid 2>/dev/null || echo $$)
first=$((last + 400))
plant "$d" out.csv $first $((first + 300))
for ((k = 0; k < 1000; k++)); do # at most 1000: pids wrap around at pid_max
    [ "$(cat /proc/sys/kernel/ns_last_pid 2>/dev/null || echo "$first")" -lt $((first - 2)) ] || break
    /bin/true
done
PEBBLE_NO_O_TMPFILE=1 "$pebble" plan "$tmp/small.csv" --out "$d/out.csv" >"$tmp/out" 2>"$tmp/err"
rc=$?
check "pebble plan --out with links planted at the next 300 pids' temporary names (PEBBLE_NO_O_TMPFILE=1): the victim is untouched" \
    eval '[ $rc -eq 0 ] && intact "$d" 301'

# ---- kill -9 and SIGTERM during writes ------------------------------------------------------

# kill_loop SIGNAL N DESCRIPTION DIR FILE OLD NEW COMMAND...: N times, puts OLD at DIR/FILE,
# starts COMMAND (which writes NEW there) and sends SIGNAL after a random part of one run's
# time. After each, DIR/FILE must be OLD or NEW byte for byte (both are known loadable); with
# SIGTERM no temporary may be left even before the next run; after the next complete run none
# may be left at all.
kill_loop() {
    local sig=$1 n=$2 desc=$3 dir=$4 file=$5 old=$6 new=$7
    shift 7
    local t0 t bad="" killed=0 left=0 left_9=0
    cp "$old" "$dir/$file"
    t0=$(now_ms)
    "$@" >/dev/null 2>&1
    t=$(($(now_ms) - t0 + 5))
    for ((i = 0; i < n; i++)); do
        cp "$old" "$dir/$file"
        "$@" >/dev/null 2>&1 &
        local pid=$!
        sleep "$(printf '0.%03d' $((RANDOM % t)))"
        kill -"$sig" $pid 2>/dev/null
        { wait $pid; } 2>/dev/null
        [ $? -ge 128 ] && killed=$((killed + 1))
        cmp -s "$dir/$file" "$old" || cmp -s "$dir/$file" "$new" || bad="$bad $i"
        left=$((left + $(temps_in "$dir")))
    done
    "$@" >/dev/null 2>&1
    local after=$(temps_in "$dir")
    # kill -9 leaves a named temporary (counted, not failed: the next write removes it); SIGTERM none
    if [ "$sig" != TERM ]; then
        left_9=$left
        left=0
    fi
    if [ -z "$bad" ] && [ "$left" -eq 0 ] && [ "$after" -eq 0 ] && cmp -s "$dir/$file" "$new"; then
        pass "$desc: $n kills ($killed during the run, one run ~${t} ms), the file always whole (old or new), ${left_9:-0} temporaries left at the kills, none after the next run"
    else
        fail "$desc: damaged after kills [$bad ], $left temporaries left by SIGTERM, $after after the next run"
    fi
}

mkdir "$tmp/kill"
"$train" "${big[@]}" --seed 1 --save "$tmp/kill/ck.old" >/dev/null 2>&1
"$train" "${big[@]}" --seed 2 --save "$tmp/kill/ck.new" >/dev/null 2>&1
"$pebble" plan "$tmp/small.csv" --strategy naive --out "$tmp/kill/out.old" >/dev/null 2>&1
"$pebble" plan "$tmp/big.csv" --strategy naive --out "$tmp/kill/out.new" >/dev/null 2>&1
"$train" --data "$data" --hidden 1024 --epochs 0 --load "$tmp/kill/ck.old" >/dev/null 2>&1 &&
    "$train" --data "$data" --hidden 1024 --epochs 0 --load "$tmp/kill/ck.new" >/dev/null 2>&1 &&
    "$pebble" check "$tmp/kill/out.old" >/dev/null 2>&1 && "$pebble" check "$tmp/kill/out.new" >/dev/null 2>&1 ||
    fail "the kill loops' reference files do not load"
for mode in 0 1; do
    m="PEBBLE_NO_O_TMPFILE=$mode"
    kill_loop 9 30 "kill -9 during train_mlp --save ($m)" "$tmp/kill" ck "$tmp/kill/ck.old" "$tmp/kill/ck.new" \
        env $m "$train" "${big[@]}" --seed 2 --save "$tmp/kill/ck"
    kill_loop 9 30 "kill -9 during pebble plan --out ($m)" "$tmp/kill" out.csv "$tmp/kill/out.old" "$tmp/kill/out.new" \
        env $m "$pebble" plan "$tmp/big.csv" --strategy naive --out "$tmp/kill/out.csv"
done
# SIGTERM on the named path (the one that has a temporary on disk all through the write)
kill_loop TERM 30 "SIGTERM during train_mlp --save (named temporary)" "$tmp/kill" ck "$tmp/kill/ck.old" \
    "$tmp/kill/ck.new" env PEBBLE_NO_O_TMPFILE=1 "$train" "${big[@]}" --seed 2 --save "$tmp/kill/ck"
kill_loop TERM 30 "SIGTERM during pebble plan --out (named temporary)" "$tmp/kill" out.csv "$tmp/kill/out.old" \
    "$tmp/kill/out.new" env PEBBLE_NO_O_TMPFILE=1 "$pebble" plan "$tmp/big.csv" --strategy naive --out "$tmp/kill/out.csv"

# a long file name (250 bytes: the limit is 255) leaves no room for a temporary's suffix
# unless the temporary cuts the name; a killed writer's leftover of that cut form is removed
mkdir "$tmp/long"
long250=$(head -c 246 /dev/zero | tr '\0' L).csv
for mode in 0 1; do
    PEBBLE_NO_O_TMPFILE=$mode "$pebble" plan "$tmp/small.csv" --out "$tmp/long/$long250" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    check "pebble plan --out a 250-byte file name (PEBBLE_NO_O_TMPFILE=$mode): exit 0, written, no temporary" \
        eval '[ $rc -eq 0 ] && head -n 1 "$tmp/long/$long250" | grep -q offset && [ "$(temps_in "$tmp/long")" -eq 0 ]'
done
stale="$tmp/long/${long250:0:200}.tmp.99999999.abcdefghijkl"
echo stale >"$stale"
run "$train" "${small[@]}" --save "$tmp/long/$long250"
check "train_mlp --save a 250-byte file name: exit 0, saved, a dead writer's leftover (its cut name) removed" \
    eval '[ $rc -eq 0 ] && [ ! -e "$stale" ] && [ "$(temps_in "$tmp/long")" -eq 0 ] && [ "$(stat -c %s "$tmp/long/$long250")" -gt 1000 ]'

# ---- full and read-only filesystems ---------------------------------------------------------

if [ "$is_root" -eq 1 ] && mkdir "$tmp/fullfs" && mount -t tmpfs -o size=64k tmpfs "$tmp/fullfs" 2>/dev/null; then
    mounts+=("$tmp/fullfs")
    for mode in 0 1; do
        cp "$tmp/kill/out.old" "$tmp/fullfs/out.csv"
        PEBBLE_NO_O_TMPFILE=$mode "$pebble" plan "$tmp/big.csv" --strategy naive --out "$tmp/fullfs/out.csv" >"$tmp/out" 2>"$tmp/err"
        rc=$?
        check "pebble plan --out onto a full 64 KiB tmpfs (PEBBLE_NO_O_TMPFILE=$mode): exit 1, one 'No space left' line, old file intact, no temporary" \
            eval '[ $rc -eq 1 ] && one_line "No space left on device" && cmp -s "$tmp/fullfs/out.csv" "$tmp/kill/out.old" &&
                  [ "$(temps_in "$tmp/fullfs")" -eq 0 ]'
    done
    cp "$tmp/kill/out.old" "$tmp/fullfs/ck"
    run "$train" "${big[@]}" --save "$tmp/fullfs/ck"
    check "train_mlp --save onto a full 64 KiB tmpfs: exit 1, one 'No space left' line, old file intact, no temporary" \
        eval '[ $rc -eq 1 ] && one_line "No space left on device" && cmp -s "$tmp/fullfs/ck" "$tmp/kill/out.old" &&
              [ "$(temps_in "$tmp/fullfs")" -eq 0 ]'
else
    skip "full filesystem (not root, or mounting a 64 KiB tmpfs failed): 3 cases"
fi

# a read-only folder: a read-only mount as root (root writes through 0555), else chmod 0555
ro=$tmp/ro
mkdir "$ro"
echo keep >"$ro/out.csv"
if [ "$is_root" -eq 1 ]; then
    if mount -t tmpfs -o size=64k tmpfs "$ro" 2>/dev/null; then
        mounts+=("$ro")
        echo keep >"$ro/out.csv"
        mount -o remount,ro "$ro" 2>/dev/null || { umount "$ro"; ro=""; }
    else
        ro=""
    fi
else
    chmod 555 "$ro"
fi
if [ -n "$ro" ]; then
    run "$pebble" plan "$tmp/small.csv" --out "$ro/out.csv"
    check "pebble plan --out into a read-only folder: exit 1, one clean line, the old file intact" \
        eval '[ $rc -eq 1 ] && one_line "^pebble: .*out.csv: cannot create a temporary file beside it: (Read-only file system|Permission denied)$" &&
              [ "$(cat "$ro/out.csv")" = keep ]'
    run "$train" --data "$data" --hidden 16 --batch 10 --epochs 1 --save "$ro/ck"
    check "train_mlp --save into a read-only folder: exit 1 before the first epoch (no epoch line), one clean line" \
        eval '[ $rc -eq 1 ] && one_line "^train_mlp: saving .*ck: cannot create a temporary file beside it: (Read-only file system|Permission denied)$" &&
              ! grep -q "^epoch" "$tmp/out"'
else
    skip "read-only folder (the read-only mount failed): 2 cases"
fi
# pebble's own outputs too: a missing folder or a directory is found before planning (the
# big instance with every strategy takes seconds; the check takes none)
t0=$(now_ms)
run "$pebble" plan "$tmp/big.csv" --strategy all --out "$tmp/missing/out.csv"
t1=$(now_ms)
check "pebble plan --strategy all --out into a missing folder: exit 1 before planning (no table, $((t1 - t0)) ms)" \
    eval '[ $rc -eq 1 ] && one_line "missing/out.csv: cannot create a temporary file beside it: No such file" && [ ! -s "$tmp/out" ]'
mkdir "$tmp/vdir"
run "$pebble" viz "$tmp/small.csv" --svg "$tmp/v.svg" --html "$tmp/vdir"
check "pebble viz --svg F --html DIR: exit 1 'is a directory', nothing written (not even F)" \
    eval '[ $rc -eq 1 ] && one_line "vdir: is a directory" && [ ! -e "$tmp/v.svg" ]'
run "$pebble" export zoo:mlp --json "$tmp/missing/"
check "pebble export --json MISSING/: exit 1, one clean line" \
    eval '[ $rc -eq 1 ] && one_line "missing/: cannot create a temporary file beside it"'
run "$train" --data "$data" --hidden 16 --batch 10 --epochs 1 --save "$tmp/missing/ck"
check "train_mlp --save into a missing folder: exit 1 before the first epoch, one clean line" \
    eval '[ $rc -eq 1 ] && one_line "No such file or directory" && ! grep -q "^epoch" "$tmp/out"'
mkdir "$tmp/adir"
run "$train" --data "$data" --hidden 16 --batch 10 --epochs 1 --save "$tmp/adir"
check "train_mlp --save onto a directory: exit 1 before the first epoch, 'is a directory'" \
    eval '[ $rc -eq 1 ] && one_line "adir: is a directory" && ! grep -q "^epoch" "$tmp/out" && [ -d "$tmp/adir" ]'
mkdir "$tmp/pdir.json"
run "$train" --data "$data" --hidden 16 --batch 10 --epochs 1 --plot "$tmp/pdir.svg"
check "train_mlp --plot P.svg where P.json is a directory: exit 1 before the first epoch, no P.svg" \
    eval '[ $rc -eq 1 ] && one_line "pdir.json: is a directory" && ! grep -q "^epoch" "$tmp/out" && [ ! -e "$tmp/pdir.svg" ]'

# ---- no output may be an input --------------------------------------------------------------

cp -r "$data" "$tmp/data2"
sum_data=$(cat "$tmp/data2"/* | cksum)
run "$train" --data "$tmp/data2" --hidden 16 --batch 10 --epochs 1 --save "$tmp/data2/train-images-idx3-ubyte.gz"
check "train_mlp --save onto the data set's own file: exit 2 before any epoch, the data set intact" \
    eval '[ $rc -eq 2 ] && one_line "that is the data set.s file" && [ "$(cat "$tmp/data2"/* | cksum)" = "$sum_data" ]'
ln -s data2/t10k-labels-idx1-ubyte.gz "$tmp/labels.link"
run "$train" --data "$tmp/data2" --hidden 16 --batch 10 --epochs 1 --save "$tmp/labels.link"
check "train_mlp --save onto a link to a data set file: exit 2, the data set intact" \
    eval '[ $rc -eq 2 ] && one_line "that is the data set.s file" && [ "$(cat "$tmp/data2"/* | cksum)" = "$sum_data" ]'
ln -s data2/t10k-images-idx3-ubyte.gz "$tmp/plot.json"
run "$train" --data "$tmp/data2" --hidden 16 --batch 10 --epochs 1 --plot "$tmp/plot.svg"
check "train_mlp --plot P.svg where P.json links to a data set file: exit 2, the data set intact" \
    eval '[ $rc -eq 2 ] && one_line "training graph .*plot.json would be written over the data set.s file" &&
          [ "$(cat "$tmp/data2"/* | cksum)" = "$sum_data" ]'
"$train" "${small[@]}" --save "$tmp/ck.same" >/dev/null 2>&1
cp "$tmp/ck.same" "$tmp/ck.same.orig"
run "$train" --data "$data" --hidden 16 --batch 10 --epochs 1 --load "$tmp/ck.same" --save "$tmp/ck.same"
check "train_mlp --load F --save F: exit 2 before training, F intact" \
    eval '[ $rc -eq 2 ] && one_line "that is the checkpoint --load reads" && cmp -s "$tmp/ck.same" "$tmp/ck.same.orig"'

# --save and --plot (or the graph --plot writes beside it) as one file that does not exist yet,
# named two ways: the plot written after training would replace the checkpoint
mkdir "$tmp/SP"
run "$train" --data "$data" --hidden 16 --batch 10 --epochs 1 --plot "$tmp/SP/p.svg" --save "$tmp/SP/./p.json"
check "train_mlp --plot D/p.svg --save D/./p.json (neither exists): exit 2 before training, nothing written" \
    eval '[ $rc -eq 2 ] && one_line "its training graph .*p.json would be written over the --save checkpoint" && [ -z "$(ls -A "$tmp/SP")" ]'
run "$train" --data "$data" --hidden 16 --batch 10 --epochs 1 --plot "$tmp/SP/./q.svg" --save "$tmp/SP/q.svg"
check "train_mlp --plot D/./q.svg --save D/q.svg (neither exists): exit 2 before training, nothing written" \
    eval '[ $rc -eq 2 ] && one_line "q.svg: --plot names the same file" && [ -z "$(ls -A "$tmp/SP")" ]'
mkdir "$tmp/SPL"
ln -s r.json "$tmp/SPL/ck.link"
run "$train" --data "$data" --hidden 16 --batch 10 --epochs 1 --plot "$tmp/SPL/r.svg" --save "$tmp/SPL/ck.link"
check "train_mlp --plot D/r.svg --save D/LINK (a dangling link to D/r.json): exit 2 before training" \
    eval '[ $rc -eq 2 ] && one_line "its training graph .*r.json would be written over the --save checkpoint" && [ ! -e "$tmp/SPL/r.json" ]'

# pebble run: a graph whose outputs are y and z; with --output-dir D they go to D/y.npy, D/z.npy
cat >"$tmp/yz.json" <<'EOF'
{"format": "pebble-graph", "version": "1.0",
 "variables": [{"name": "x", "kind": "input", "dtype": "f32", "shape": [1, 4]}],
 "nodes": [{"name": "r", "op": "relu", "inputs": ["x"], "shapes": [[1, 4]], "dtypes": ["f32"]},
           {"name": "s", "op": "sigmoid", "inputs": ["x"], "shapes": [[1, 4]], "dtypes": ["f32"]}],
 "outputs": [{"name": "y", "value": "r"}, {"name": "z", "value": "s"}]}
EOF
D=$tmp/D
mkdir "$D"
"$pebble" run "$tmp/yz.json" --zero-unbound --output-dir "$D" >/dev/null 2>&1 # D/y.npy, D/z.npy: zeros, halves
cp "$D/y.npy" "$tmp/y.ref"
cp "$D/z.npy" "$D/x.npy" # an input file beside the outputs
printf 'changed' >>"$D/y.npy"  # a reference the run's output would not match
cp "$D/y.npy" "$tmp/y.changed"
run "$pebble" run "$tmp/yz.json" --input x="$D/x.npy" --expect y="$D/y.npy" --output-dir "$D"
check "pebble run --expect y=D/y.npy --output-dir D: exit 2 before running, the reference intact" \
    eval '[ $rc -eq 2 ] && one_line "which is --expect y=" && cmp -s "$D/y.npy" "$tmp/y.changed" && ! grep -q "^output" "$tmp/out"'
cp "$tmp/y.ref" "$D/y.npy"
cp "$D/x.npy" "$tmp/x.orig"
run "$pebble" run "$tmp/yz.json" --input x="$D/z.npy" --output-dir "$D"
check "pebble run --input x=D/z.npy --output-dir D (z is an output): exit 2, the input intact" \
    eval '[ $rc -eq 2 ] && one_line "which is --input x=" && cmp -s "$D/z.npy" "$tmp/x.orig"'
ln -sf "$tmp/y.changed" "$D/y.npy"
cp "$tmp/y.changed" "$tmp/y.changed.orig"
run "$pebble" run "$tmp/yz.json" --input x="$D/x.npy" --expect y="$tmp/y.changed" --output-dir "$D"
check "pebble run --expect y=REF --output-dir D where D/y.npy is a link to REF: exit 2, REF intact" \
    eval '[ $rc -eq 2 ] && one_line "which is --expect y=" && cmp -s "$tmp/y.changed" "$tmp/y.changed.orig"'
ln "$tmp/yz.json" "$tmp/D2.model" 2>/dev/null || cp "$tmp/yz.json" "$tmp/D2.model"
mkdir "$tmp/D2"
cp "$tmp/yz.json" "$tmp/D2/m.json"
ln -s m.json "$tmp/D2/z.npy"
run "$pebble" run "$tmp/D2/m.json" --zero-unbound --output-dir "$tmp/D2"
check "pebble run MODEL --output-dir D where D/z.npy is a link to MODEL: exit 2, MODEL intact" \
    eval '[ $rc -eq 2 ] && one_line "which is MODEL" && cmp -s "$tmp/D2/m.json" "$tmp/yz.json"'

# an ONNX model whose weight W (MatMul x·W, output y) is external data in y.npy beside it:
# --output-dir there would replace the model's weights with the output y.npy
mkdir "$tmp/EXT"
m_onnx='\x08\x08\x12\x01\x74\x3a\x64\x0a\x15\x0a\x01\x78\x0a\x01\x57\x12\x01\x79\x1a\x02\x6d\x6d\x22\x06'
m_onnx+='\x4d\x61\x74\x4d\x75\x6c\x12\x01\x67\x2a\x1e\x08\x04\x08\x04\x10\x01\x42\x01\x57\x6a\x11\x0a\x08'
m_onnx+='\x6c\x6f\x63\x61\x74\x69\x6f\x6e\x12\x05\x79\x2e\x6e\x70\x79\x70\x01\x5a\x13\x0a\x01\x78\x12\x0e'
m_onnx+='\x0a\x0c\x08\x01\x12\x08\x0a\x02\x08\x01\x0a\x02\x08\x04\x62\x13\x0a\x01\x79\x12\x0e\x0a\x0c\x08'
m_onnx+='\x01\x12\x08\x0a\x02\x08\x01\x0a\x02\x08\x04\x42\x02\x10\x0d'
printf "$m_onnx" >"$tmp/EXT/m.onnx"
head -c 64 /dev/zero >"$tmp/EXT/y.npy"
run "$pebble" run "$tmp/EXT/m.onnx" --zero-unbound --output-dir "$tmp/EXT/."
check "pebble run M.onnx --output-dir D where D/y.npy holds M's external weights: exit 2, the weights intact" \
    eval '[ $rc -eq 2 ] && one_line "which holds MODEL.s external weights" && cmp -s "$tmp/EXT/y.npy" <(head -c 64 /dev/zero)'
run "$pebble" run "$tmp/EXT/m.onnx" --zero-unbound --output-dir "$tmp/EXT/out"
check "... and with another --output-dir it runs: exit 0, D2/y.npy written" \
    eval '[ $rc -eq 0 ] && [ -s "$tmp/EXT/out/y.npy" ]'
# ... and every other command's output, named as that file (the weights are known once loaded)
for c in "export --json" "plan --out" "viz --html" "viz --svg" "viz --dot"; do
    run "$pebble" ${c% *} "$tmp/EXT/m.onnx" ${c#* } "$tmp/EXT/./y.npy"
    check "pebble $c D/./y.npy for M.onnx whose weights are D/y.npy: exit 2, the weights intact" \
        eval '[ $rc -eq 2 ] && one_line "y.npy, which holds .*m.onnx.s external weights" && cmp -s "$tmp/EXT/y.npy" <(head -c 64 /dev/zero)'
done

# a dangling link names the file it would create: two outputs meeting there collide
mkdir "$tmp/L"
ln -s a.html "$tmp/L/link.svg"
run "$pebble" viz "$tmp/small.csv" --html "$tmp/L/a.html" --svg "$tmp/L/link.svg"
check "pebble viz --html D/a.html --svg D/link.svg (a dangling link to a.html): exit 2, nothing written" \
    eval '[ $rc -eq 2 ] && one_line "link.svg: the same file as --html" && [ ! -e "$tmp/L/a.html" ] && [ -L "$tmp/L/link.svg" ]'
mkdir "$tmp/D5"
ln -s z.npy "$tmp/D5/y.npy"
run "$pebble" run "$tmp/yz.json" --zero-unbound --output-dir "$tmp/D5"
check "pebble run --output-dir D where D/y.npy is a dangling link to D/z.npy: exit 2 naming both outputs, nothing written" \
    eval "[ \$rc -eq 2 ] && one_line \"outputs 'y' and 'z' would both be written\" && [ ! -e \"\$tmp/D5/z.npy\" ]"

# `--svg -` with `> F` beside `--html F`: the rename would orphan what standard output wrote
"$pebble" viz "$tmp/small.csv" --html "$tmp/page.html" --svg - >"$tmp/page.html" 2>"$tmp/err"
rc=$?
check "pebble viz --html F --svg - > F: exit 2, refused rather than one output lost" \
    eval '[ $rc -eq 2 ] && one_line "^pebble: --svg -: --html .*page.html already writes to standard output"'
"$pebble" viz "$tmp/small.csv" --html - --svg "$tmp/page.svg" >"$tmp/page.svg" 2>"$tmp/err"
rc=$?
check "pebble viz --html - --svg F > F: exit 2, refused rather than one output lost" \
    eval '[ $rc -eq 2 ] && one_line "svg .*page.svg: that is the file standard output writes \(--html -\)"'

# plan --out F > F: the rename would orphan the report standard output wrote; --out
# /dev/stdout > F writes through the descriptor and keeps both
"$pebble" plan "$tmp/small.csv" --out "$tmp/both.txt" >"$tmp/both.txt" 2>"$tmp/err"
rc=$?
check "pebble plan --out F > F: exit 2, refused rather than the report lost" \
    eval '[ $rc -eq 2 ] && one_line "both.txt: that is the file standard output \(the report\) writes"'
"$pebble" plan "$tmp/small.csv" --out /dev/stdout >"$tmp/both.txt" 2>"$tmp/err"
rc=$?
check "pebble plan --out /dev/stdout > F: exit 0, F holds the report and the assignment" \
    eval '[ $rc -eq 0 ] && grep -q "^records: " "$tmp/both.txt" && grep -q "^id,lower,upper,size,offset" "$tmp/both.txt"'

# FILE - reading `< F`: F is the input all the same, for every command that writes
cp "$tmp/small.csv" "$tmp/stdin.csv"
run "$pebble" plan - --out "$tmp/stdin.csv" <"$tmp/stdin.csv"
check "pebble plan - --out F < F: exit 2 before planning, F intact" \
    eval '[ $rc -eq 2 ] && one_line "stdin.csv: that is the file standard input reads" && cmp -s "$tmp/stdin.csv" "$tmp/small.csv"'
"$pebble" export zoo:mlp --json "$tmp/stdin.json" 2>/dev/null
cp "$tmp/stdin.json" "$tmp/stdin.json.orig"
run "$pebble" viz - --svg "$tmp/stdin.svg" --html "$tmp/./stdin.json" <"$tmp/stdin.json"
check "pebble viz - --html ./F < F: exit 2, F intact" \
    eval '[ $rc -eq 2 ] && one_line "that is the file standard input reads" && cmp -s "$tmp/stdin.json" "$tmp/stdin.json.orig" && [ ! -e "$tmp/stdin.svg" ]'
cp "$D/x.npy" "$tmp/x.orig"
run "$pebble" run "$tmp/yz.json" --input x=- --output-dir "$D" <"$D/z.npy"
check "pebble run --input x=- --output-dir D < D/z.npy (z is an output): exit 2, the input intact" \
    eval '[ $rc -eq 2 ] && one_line "which is --input x=-" && cmp -s "$D/z.npy" "$tmp/x.orig"'
mkdir "$tmp/D4"
cp "$tmp/yz.json" "$tmp/D4/y.npy"
run "$pebble" run - --zero-unbound --output-dir "$tmp/D4" <"$tmp/D4/y.npy"
check "pebble run - --output-dir D < D/y.npy (MODEL is read from an output's file): exit 2, MODEL intact" \
    eval '[ $rc -eq 2 ] && one_line "which is MODEL" && cmp -s "$tmp/D4/y.npy" "$tmp/yz.json"'

# an output file that cannot be written is found before the model runs
mkdir -p "$tmp/D6/y.npy"
run "$pebble" run "$tmp/yz.json" --zero-unbound --output-dir "$tmp/D6"
check "pebble run --output-dir D where D/y.npy is a directory: exit 1 before running (no output printed), nothing written" \
    eval '[ $rc -eq 1 ] && one_line "y.npy: is a directory" && ! grep -q "^output" "$tmp/out" && [ ! -e "$tmp/D6/z.npy" ]'
if [ -n "$ro" ]; then
    run "$pebble" run "$tmp/yz.json" --zero-unbound --output-dir "$ro"
    check "pebble run --output-dir READ-ONLY: exit 1 before running (no output printed)" \
        eval '[ $rc -eq 1 ] && one_line "cannot create a temporary file beside it" && ! grep -q "^output" "$tmp/out"'
else
    skip "pebble run --output-dir into a read-only folder (the read-only mount failed)"
fi

# two outputs, one file name
sed 's#"name": "y"#"name": "a/b"#; s#"name": "z"#"name": "a_b"#' "$tmp/yz.json" >"$tmp/ab.json"
mkdir "$tmp/D3"
run "$pebble" run "$tmp/ab.json" --zero-unbound --output-dir "$tmp/D3"
check "pebble run with outputs 'a/b' and 'a_b' --output-dir D: exit 2 naming both, nothing written" \
    eval "[ \$rc -eq 2 ] && one_line \"outputs 'a/b' and 'a_b' would both be written to .*a_b.npy\" && [ -z \"\$(ls -A \"\$tmp/D3\")\" ]"
long=$(head -c 600 /dev/zero | tr '\0' n)
sed "s#\"name\": \"y\"#\"name\": \"${long}1\"#; s#\"name\": \"z\"#\"name\": \"${long}2\"#" "$tmp/yz.json" >"$tmp/long.json"
run "$pebble" run "$tmp/long.json" --zero-unbound --output-dir "$tmp/D3"
check "pebble run with two 601-byte output names alike in their first 511 bytes: exit 2 naming both, nothing written" \
    eval "[ \$rc -eq 2 ] && one_line \"outputs 'n{600}1' and 'n{600}2' would both be written\" && [ -z \"\$(ls -A \"\$tmp/D3\")\" ]"

echo "$passed passed, $failed failed, $skipped skipped (hostile cases run: $((passed + failed)))"
for f in "${failures[@]}"; do echo "failed: $f"; done
[ "$failed" -eq 0 ]
