# cli_harness.sh: what the pebble command-line tests share. Source it after setting $bin (the
# pebble program) and $tmp (a scratch directory):
#   pass DESC   counts a passed check and prints it;
#   fail DESC   prints the failure with the last command's stdout/stderr (or the files of $tmp
#               that $harness_logs names) and exits 1;
#   run ARGS    runs "$bin" ARGS into $tmp/out and $tmp/err, sets $rc, and fails on a
#               sanitizer report or a crash (exit status 128 and above).
passed=0
fail() {
    echo "FAIL: $*"
    for f in ${harness_logs:-out err}; do
        [ -s "$tmp/$f" ] && { echo "--- $f:"; head -c 4000 "$tmp/$f"; }
    done
    echo "$passed passed, 1 failed"
    exit 1
}
pass() {
    passed=$((passed + 1))
    echo "ok $passed - $*"
}
rc=0
run() {
    "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if grep -q Sanitizer "$tmp/out" "$tmp/err"; then fail "pebble $*: a sanitizer reported an error"; fi
    if [ "$rc" -ge 128 ]; then fail "pebble $*: exit status $rc: killed by a signal (crash)"; fi
}
