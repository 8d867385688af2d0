#!/usr/bin/env bash
# The layering rules of docs/architecture.md, checked over every quoted #include in the tree:
# each folder may include only the folders its row names (the longest matching row applies),
# no header takes part in an include cycle, and no folder holds more than 20 files.
# Usage: check_layers.sh [REPO_ROOT [BUILD_DIR]]   (exit 0: all rules hold; 1: each breach
# printed). With BUILD_DIR, the graph layer's objects are also checked for calls into executor/.
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

# folder (a path prefix)   what its files may include (path prefixes; "pebble/" is the public API)
rules='
include/pebble/         pebble/
graph/base/             pebble/ graph/base/
graph/planner/          pebble/plan.h pebble/plan_io.h pebble/status.h pebble/alloc.h graph/base/ graph/planner/
graph/ir/               pebble/ graph/base/ graph/ir/
graph/autodiff/         pebble/ graph/base/ graph/ir/ graph/autodiff/
graph/liveness/         pebble/ graph/base/ graph/ir/ graph/planner/ graph/liveness/
graph/schedule/         pebble/ graph/base/ graph/ir/ graph/planner/ graph/liveness/ graph/schedule/
graph/streams/          pebble/ graph/base/ graph/ir/ graph/planner/ graph/liveness/ graph/streams/
graph/passes/           pebble/ graph/base/ graph/ir/ graph/autodiff/ graph/liveness/ graph/planner/ graph/streams/ graph/passes/
graph/explain/          pebble/ graph/base/ graph/ir/ graph/autodiff/ graph/liveness/ graph/planner/ graph/streams/ graph/passes/ graph/explain/
graph/io/               pebble/ graph/base/ graph/ir/ graph/planner/ graph/streams/ graph/io/ onnx/
ops/                    pebble/ graph/base/ graph/ir/ ops/
executor/               pebble/ graph/ ops/ executor/
tools/                  pebble/ tools/ graph/base/file_out.h graph/base/file_in.h
examples/               pebble/ examples/ tools/args/
bench/                  pebble/ tools/zoo/ bench/
'
# the graph layer never reaches up to the executor, even through its public header
forbidden='
graph/                  pebble/exec.h pebble/bfc.h
'

row_for() { # file rules -> the longest folder prefix of the rules matching file, and its list
    local f=$1 best="" list="" folder rest
    while read -r folder rest; do
        [ -n "$folder" ] || continue
        if [[ $f == "$folder"* && ${#folder} -gt ${#best} ]]; then best=$folder; list=$rest; fi
    done <<< "$2"
    printf '%s\n' "$list"
}

allowed_by() { # target list -> 0 when some prefix of the list matches target
    local t=$1 p
    for p in $2; do [[ $t == "$p"* ]] && return 0; done
    return 1
}

fail=0
edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
# the tracked files (any file under the folders when this is not a git checkout)
list() { if git rev-parse --git-dir > /dev/null 2>&1; then git ls-files -- "$@"; else find "$@" -type f; fi; }
files=$(list include graph ops executor tools examples bench | grep -E '\.(c|h|cu|cuh|cc)$' || true)
for f in $files; do
    allow=$(row_for "$f" "$rules")
    deny=$(row_for "$f" "$forbidden")
    dir=$(dirname "$f")
    while IFS= read -r inc; do
        # resolve as the compiler does: beside the file, then from the root (-I.), then a
        # folder a target adds to its include path (a bare name found once in the tree)
        if [ -e "$dir/$inc" ] && [[ $inc != */* ]]; then target="$dir/$inc"
        elif [[ $inc != */* ]] && [ "$(grep -c "/$inc\$" <<< "$files")" -eq 1 ]; then target=$(grep "/$inc\$" <<< "$files")
        else target=$inc; fi
        [[ $target == include/pebble/* ]] && target=${target#include/}
        echo "$f $target" >> "$edges"
        if [ -z "$allow" ]; then
            echo "layers: $f: no rule covers this folder (add a row to test/check_layers.sh)"; fail=1; break
        fi
        if ! allowed_by "$target" "$allow" || { [ -n "$deny" ] && allowed_by "$target" "$deny"; }; then
            echo "layers: $f includes \"$inc\", outside what ${f%/*}/ may include ($allow)"; fail=1
        fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done

# include cycles among headers: tsort reports a loop in the include graph (public headers are
# named pebble/*.h on both sides)
sed 's#^include/pebble/#pebble/#' "$edges" | awk '{print $2, $1}' > "$edges.tsort"
if ! tsort "$edges.tsort" > /dev/null 2> "$edges.err"; then
    echo "layers: include cycle:"; sed 's/^tsort: /  /' "$edges.err"; fail=1
fi
rm -f "$edges.tsort" "$edges.err"

# no folder holds more than 20 files
while read -r n d; do
    if [ "$n" -gt 20 ]; then echo "layers: $d holds $n files (at most 20: make a subfolder)"; fail=1; fi
done < <(list graph ops executor include tools | xargs -n1 dirname | sort | uniq -c)

# with a build folder: no object of the graph layer calls into the executor (the symbols
# defined by executor/ objects), whatever it includes
build=${2:-}
if [ -n "$build" ]; then
    objdir=$build/CMakeFiles/pebble_objects.dir
    # the objects of a folder whose sources still exist (a build folder older than a move
    # keeps objects of files that are gone)
    live_objects() { find "$objdir/$1" -name '*.o' | while read -r o; do
                         src=${o#"$objdir/"}; [ -e "$root/${src%.o}" ] && echo "$o"; done; }
    exec_syms=$(live_objects executor | xargs -r nm --defined-only -g 2>/dev/null | awk 'NF==3{print $3}' | sort -u)
    while IFS= read -r o; do
        while IFS= read -r sym; do
            if grep -qxF "$sym" <<< "$exec_syms"; then
                echo "layers: ${o#"$objdir/"} (graph layer) calls $sym, defined in executor/"; fail=1
            fi
        done < <(nm -u "$o" | awk '{print $2}')
    done < <(live_objects graph)
fi

[ $fail -eq 0 ] && echo "layers: every include follows docs/architecture.md's rules; no cycles; no folder over 20 files"
exit $fail
