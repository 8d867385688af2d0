#!/usr/bin/env bash
# The documented command lines exist: every `pebble` and `train_mlp` command in README.md and
# docs/*.md names a real subcommand and only flags that program's --help lists, and the
# commands shown after a "$ " prompt run (exit 0) where every file they name exists.
#
# usage: doc_commands.sh SOURCE_DIR PEBBLE [TRAIN_MLP]
#
# Where commands are found: lines of fenced blocks other than ```c that run
# build/tools/pebble or build/examples/train_mlp (a synopsis continues on lines that start
# with spaces and "["), and inline code spans that start with "pebble " (`pebble plan
# --strategy`, also across a line break). A command ends at " && ", " | ", ";" or " # ".
set -u

src=${1:?usage: doc_commands.sh SOURCE_DIR PEBBLE [TRAIN_MLP]}
pebble=${2:?usage: doc_commands.sh SOURCE_DIR PEBBLE [TRAIN_MLP]}
train=${3:-}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/doc_commands.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

passed=0
failed=0
pass() {
    passed=$((passed + 1))
    echo "ok $passed - $*"
}
fail() {
    failed=$((failed + 1))
    echo "FAIL: $*"
}

cd "$src" || exit 1

# commands FILE: "FILE:LINE<TAB>prompt<TAB>command" per command (prompt 1 after "$ ").
commands() {
    awk -v file="$1" '
    function cut(s) {
        sub(/ && .*$/, "", s); sub(/ \| .*$/, "", s); sub(/;.*$/, "", s); sub(/ # .*$/, "", s)
        gsub(/[ \t]+/, " ", s); sub(/ $/, "", s)
        return s
    }
    function flush() {
        if (cmd != "")
            printf "%s:%d\t%d\t%s\n", file, at, prompt, cut(cmd)
        cmd = ""
    }
    /^```/ {
        flush()
        if (!fence) {
            fence = 1
            lang = substr($0, 4)
            next
        }
        fence = 0
        next
    }
    fence && lang != "c" {
        if (cmd != "" && $0 ~ /^[ \t]+\[/) {
            cmd = cmd " " $0
            next
        }
        flush()
        p = index($0, "build/tools/pebble ")
        if (p == 0)
            p = index($0, "build/examples/train_mlp")
        if (p == 0)
            next
        prompt = $0 ~ /^\$ /
        cmd = substr($0, p)
        at = FNR
        next
    }
    !fence {
        # inline spans: join the paragraph, then take every `pebble ...`
        if ($0 ~ /^[ \t]*$/) {
            spans()
            para = ""
            next
        }
        if (para == "")
            pstart = FNR
        para = para " " $0
    }
    function spans(   s, q, r) {
        s = para
        while ((q = index(s, "`pebble ")) > 0) {
            s = substr(s, q + 1)
            r = index(s, "`")
            printf "%s:%d\t0\t%s\n", file, pstart, cut(substr(s, 1, r - 1))
            s = substr(s, r + 1)
        }
    }
    END { flush(); spans() }
    ' "$1"
}

for m in README.md docs/*.md; do
    [ -f "$m" ] && commands "$m"
done >"$tmp/commands"
[ -s "$tmp/commands" ] || { echo "FAIL: no commands found"; exit 1; }

# help PROGRAM [SUB]: the program's --help text in $tmp/help.txt, or a failure.
help() {
    "$@" --help >"$tmp/help.txt" 2>&1
}

while IFS=$'\t' read -r where prompt cmd; do
    read -r -a w <<<"$cmd"
    prog=${w[0]}
    case $prog in
    build/tools/pebble | pebble) bin=$pebble; name=pebble ;;
    build/examples/train_mlp) bin=$train; name=train_mlp ;;
    *) fail "$where: '$cmd': unknown program"; continue ;;
    esac
    if [ -z "$bin" ]; then
        echo "skip $where: '$cmd': $name not built"
        continue
    fi
    subs=()
    if [ $name = pebble ] && [[ ${w[1]:-} != -* ]]; then # `pebble --version` has none
        subs=("${w[1]:-}")
        for ((k = 2; k < ${#w[@]}; k++)); do # `pebble plan / check / export`
            [ "${w[k - 1]}" = / ] && subs+=("${w[k]}")
        done
    fi
    bad=0
    for sub in "${subs[@]}"; do
        if ! help "$bin" "$sub"; then
            fail "$where: '$cmd': '$name $sub --help' fails: $(head -n 1 "$tmp/help.txt")"
            bad=1
        fi
    done
    [ $bad -eq 1 ] && continue
    # the flags are checked against the first subcommand's help (a list of subcommands has
    # no flags), or the program's own
    if ! help "$bin" ${subs[0]:+"${subs[0]}"}; then
        fail "$where: '$cmd': '$name --help' fails: $(head -n 1 "$tmp/help.txt")"
        continue
    fi
    flags=$(grep -o -E -- '(^| |\[)--[a-z][a-z0-9-]*' <<<"$cmd" | sed 's/^[ []*//' | sort -u)
    missing=""
    for f in $flags; do
        grep -q -w -e "$f" "$tmp/help.txt" || missing="$missing $f"
    done
    if [ -n "$missing" ]; then
        fail "$where: '$cmd': $name${subs[0]:+ ${subs[0]}} --help lists no$missing"
        continue
    fi
    what="$name${subs[0]:+ ${subs[*]}} exists$([ -n "$flags" ] && echo ", --help lists $(echo $flags)")"
    if [ "$prompt" = 1 ]; then
        # run it where every path it names exists (zoo:NAME needs nothing)
        runnable=1
        for a in "${w[@]:1}"; do
            case $a in
            -* | zoo:*) ;;
            */* | *.csv | *.json | *.onnx | *.npy | *.pb) [ -e "$a" ] || runnable=0 ;;
            esac
        done
        if [ $runnable -eq 1 ]; then
            if ! "$bin" "${w[@]:1}" >"$tmp/out" 2>&1; then
                fail "$where: '$cmd' exits with status $?:"
                tail -n 5 "$tmp/out"
                continue
            fi
            what="$what; runs, exit 0"
        else
            what="$what; not run (names a file that is not here)"
        fi
    fi
    pass "$where: '$cmd': $what"
done <"$tmp/commands"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
