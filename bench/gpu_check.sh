#!/usr/bin/env bash
# One command proves the CUDA path on a machine with an NVIDIA GPU (docs/cuda.md, "Running it
# on a GPU"): installs the Debian build dependencies when it can, builds a Release tree for
# the present GPU's architecture only, runs test_cuda, then compute-sanitizer's memcheck,
# racecheck, synccheck and initcheck over it, then the CUDA benchmarks, and writes
# OUTDIR/gpu_report.md and OUTDIR/gpu_report.json (rewritten after every step, so a run cut
# short still leaves one). Every step runs under its own time limit (`timeout`; the limits add
# up to under 9 minutes, and --budget caps the whole), output in OUTDIR/logs/STEP.log, and a
# step that fails or is cut off does not stop the later ones.
#
#     bench/gpu_check.sh [options] OUTDIR
#
#     --build-dir DIR     the build tree (default: build-gpu in the source tree)
#     --limit STEP=SECS   one step's time limit (repeatable; the steps and defaults: --help)
#     --budget SECS       the whole run's limit (default 530): a step gets at most what is left
#     --only STEP,...     run only these steps (the others are reported as not selected)
#     --jobs N            build jobs (default: every core)
#     --stub DIR          test mode, without a GPU (test/gpu_check.sh): nvidia-smi,
#                         compute-sanitizer, nvcc, nsys and ncu are looked for in DIR only; no
#                         packages, no configure or build (--build-dir must be a built tree);
#                         $PEBBLE_CUDA_MODULE is kept (the host emulator's module) and the
#                         benchmarks run tiny sizes
#
# Environment: PYTHON (a python with PyTorch; default bench/.venv/bin/python3, else python3),
# PEBBLE_GPU_CHECK_SANITIZER_ARGS (more compute-sanitizer options, e.g. a kernel filter).
# Exit status: 0 when every step that ran passed (skips of optional steps, such as PyTorch or
# a profiler missing, are fine), 1 when a step failed or timed out or the tests or a sanitizer could
# not run, 2 for bad usage. Package installation failing (offline machine) is reported but is
# not a failure by itself: the build says whether what is installed is enough; nor is the
# kernels step failing (a profiler that cannot read the GPU's counters).
# The nccl step (docs/data_parallel.md, "NCCL"): under mpirun -np 1 (one rank per GPU; the
# test's -np 2 needs two), test_data_parallel --nccl --need-gpu trains on the CUDA backend with
# NCCL's all-reduce against the one-process result (with the all-reduces on a communication
# stream and in order), then bench/dp_step --nccl times the step both ways;
# skipped when mpirun or libpebble_nccl.so is missing.
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

steps=(deps gpu configure build tests tests_blocking memcheck racecheck synccheck initcheck
       mlp_cuda torch mlp_vs_torch streams kernels nccl)
# default limits (s): without tests_blocking, which runs only when the tests fail, they add up
# to 570 s, past the default budget (530 s) that caps the whole: when every step before it
# takes its whole limit, the last step (nccl) gets 0 s and is skipped for the budget
limits=(30 10 40 90 35 35 65 70 30 45 15 20 35 15 30 40)
# steps whose failure is not the run's failure (reported only): the packages (the build judges
# what is installed) and the profiler (ncu may not read the counters where the GPU is shared)
advisory=" deps kernels "
# steps that must run (a skip other than "not selected" fails the run)
required=" tests memcheck racecheck synccheck initcheck "

usage() {
    sed -n '/^#     bench\/gpu_check.sh/,/^# Environment/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    echo "steps and default limits (s):" >&2
    local i
    for i in "${!steps[@]}"; do printf '  %-15s %4s\n' "${steps[$i]}" "${limits[$i]}" >&2; done
}

declare -A idx # step name -> index
for i in "${!steps[@]}"; do idx[${steps[$i]}]=$i; done
step_index() { # NAME -> index on stdout, 1 when unknown
    [ -n "${idx[$1]:-}" ] && echo "${idx[$1]}"
}

# ---- arguments ---------------------------------------------------------------------------
outdir="" build="" budget=530 only="" jobs="" stub=""
while [ $# -gt 0 ]; do
    case $1 in
    -h | --help) usage; exit 0 ;;
    --build-dir) [ $# -ge 2 ] || { usage; exit 2; }; build=$2; shift 2 ;;
    --budget) [[ ${2:-} =~ ^[0-9]+$ ]] || { echo "gpu_check: --budget SECS" >&2; exit 2; }; budget=$2; shift 2 ;;
    --only) [ $# -ge 2 ] || { usage; exit 2; }; only=",$2,"; shift 2 ;;
    --jobs) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "gpu_check: --jobs N" >&2; exit 2; }; jobs=$2; shift 2 ;;
    --stub) [ -d "${2:-}" ] || { echo "gpu_check: --stub DIR: no such directory '${2:-}'" >&2; exit 2; }
            stub=$(cd "$2" && pwd); shift 2 ;;
    --limit)
        if [[ ${2:-} =~ ^([a-z_]+)=([0-9]+)$ ]] && i=$(step_index "${BASH_REMATCH[1]}"); then
            limits[$i]=${BASH_REMATCH[2]}
        else
            echo "gpu_check: --limit STEP=SECS: bad '${2:-}' (steps: ${steps[*]})" >&2; exit 2
        fi
        shift 2 ;;
    -*) echo "gpu_check: unknown option '$1'" >&2; usage; exit 2 ;;
    *) [ -z "$outdir" ] || { echo "gpu_check: one OUTDIR only" >&2; exit 2; }; outdir=$1; shift ;;
    esac
done
[ -n "$outdir" ] || { usage; exit 2; }
if [ -n "$only" ]; then
    for s in ${only//,/ }; do
        step_index "$s" > /dev/null || { echo "gpu_check: --only: unknown step '$s' (steps: ${steps[*]})" >&2; exit 2; }
    done
fi
if ! command -v timeout > /dev/null; then
    echo "gpu_check: needs timeout (GNU coreutils)" >&2
    exit 2
fi
mkdir -p "$outdir/logs" || exit 2
outdir=$(cd "$outdir" && pwd)
logs=$outdir/logs
if [ -z "$build" ]; then
    [ -z "$stub" ] || { echo "gpu_check: --stub needs --build-dir (a built tree)" >&2; exit 2; }
    build=$root/build-gpu
fi
mkdir -p "$build" || exit 2
build=$(cd "$build" && pwd)
[ -n "$jobs" ] || jobs=$(nproc 2> /dev/null || echo 4)

# ---- tools -------------------------------------------------------------------------------
# find_tool NAME: the path of NAME (stub mode: in the stub folder only), empty when absent
find_tool() {
    if [ -n "$stub" ]; then
        [ -x "$stub/$1" ] && echo "$stub/$1"
        return 0
    fi
    local p d
    p=$(command -v "$1" 2> /dev/null) && { echo "$p"; return 0; }
    for d in ${CUDA_HOME:-} ${CUDA_PATH:-} /usr/local/cuda /opt/cuda; do
        [ -x "$d/bin/$1" ] && { echo "$d/bin/$1"; return 0; }
    done
    # nsys and ncu ship in their own trees
    for p in /opt/nvidia/nsight-systems/*/bin/"$1" /usr/local/cuda/nsight-systems*/bin/"$1" \
             /opt/nvidia/nsight-compute/*/"$1" /usr/local/cuda/nsight-compute*/"$1"; do
        [ -x "$p" ] && { echo "$p"; return 0; }
    done
    return 0
}
nvsmi=$(find_tool nvidia-smi)
sanitizer=$(find_tool compute-sanitizer)
nvcc=$(find_tool nvcc)
nsys=$(find_tool nsys)
ncu=$(find_tool ncu)
[ -z "$nvcc" ] || [ -n "$stub" ] || PATH=$(dirname "$nvcc"):$PATH

if [ -z "$stub" ]; then
    # the build's own module, never a leftover (an emulator's would pass without a GPU)
    [ -z "${PEBBLE_CUDA_MODULE:-}" ] || echo "gpu_check: ignoring PEBBLE_CUDA_MODULE=$PEBBLE_CUDA_MODULE (the build's module runs)"
    unset PEBBLE_CUDA_MODULE
    cuda_module=$build/libpebble_cuda.so
else
    cuda_module=${PEBBLE_CUDA_MODULE:-"(none set)"}
fi

test_prog=$build/test/test_cuda
mlp_prog=$build/bench/mlp_cuda
streams_prog=$build/bench/streams_exec_bench
if [ -n "$stub" ]; then
    mlp_args=(--batch 8 --warmup 0 --iters 1 --reps 1)
    streams_args=(--branches 2 --depth 2 --width 8 --batch 4 --warmup 1 --iters 2 --reps 1 --streams "1,2")
    nsys_mlp_args=(--batch 8 --warmup 0 --iters 1 --reps 1)
    ncu_mlp_args=(--batch 8 --warmup 0 --iters 1 --reps 1 --fuse)
else
    mlp_args=()
    streams_args=()
    nsys_mlp_args=(--batch 1024 --warmup 5 --iters 20 --reps 1)
    # ncu replays and times each kernel alone: few steps (both graphs: --fuse)
    ncu_mlp_args=(--batch 1024 --warmup 1 --iters 2 --reps 1 --fuse)
fi
kernels_tool=nsys kernels_args=("${nsys_mlp_args[@]}")
[ -n "$nsys" ] || [ -z "$ncu" ] || kernels_tool=ncu kernels_args=("${ncu_mlp_args[@]}")

# ---- clock and step records --------------------------------------------------------------
now_ms() { local t; t=$(date +%s%N); echo $((t / 1000000)); }
fmt_s() { printf '%d.%d' $(($1 / 1000)) $((($1 % 1000) / 100)); }
fmt_var() { printf -v REPLY '%d.%d' $(($1 / 1000)) $((($1 % 1000) / 100)); } # MS -> REPLY
t0=$(now_ms)
mode=gpu
[ -z "$stub" ] || mode=stub
run_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
commit=$(git -C "$root" rev-parse --short=12 HEAD 2> /dev/null || echo unknown)
if [ "$commit" != unknown ] && [ -n "$(git -C "$root" status --porcelain --untracked-files=no 2> /dev/null)" ]; then
    commit="$commit+dirty"
fi

declare -a st_status st_ms st_limit st_rc st_note
for i in "${!steps[@]}"; do
    st_status[$i]=pending st_ms[$i]=0 st_limit[$i]=${limits[$i]} st_rc[$i]="" st_note[$i]=""
done

selected() { [ -z "$only" ] || [[ $only == *",$1,"* ]]; }

# record NAME STATUS NOTE [RC]: sets a step's outcome (STATUS: passed failed timed_out skipped)
record() {
    local i
    i=${idx[$1]}
    st_status[$i]=$2 st_note[$i]=$3
    [ $# -lt 4 ] || st_rc[$i]=$4
    printf 'gpu_check: %-15s %-10s %6ss  %s\n' "$1" "$2" "$(fmt_s "${st_ms[$i]}")" "$3"
    write_report
}

# skip NAME WHY
skip() { record "$1" skipped "$2"; }

# run_step NAME CMD...: runs CMD under the step's limit (capped by what is left of the budget),
# stdout (or $step_stdout when set) and stderr into logs/NAME.log; sets st_* and returns 0
# when it ran (whatever its result: look at st_rc / st_status), 1 when it did not run.
run_step() {
    local name=$1 i limit left start rc out
    shift
    i=${idx[$name]}
    if ! selected "$name"; then
        skip "$name" "not selected"
        return 1
    fi
    left=$((budget - ($(now_ms) - t0) / 1000))
    limit=${limits[$i]}
    [ "$left" -ge "$limit" ] || limit=$left
    if [ "$limit" -lt 1 ]; then
        skip "$name" "time budget (${budget}s) spent"
        return 1
    fi
    st_limit[$i]=$limit
    out=${step_stdout:-$logs/$name.log}
    printf '$ %s\n' "$*" > "$logs/$name.log"
    [ "$out" = "$logs/$name.log" ] || : > "$out"
    start=$(now_ms)
    # timeout signals the whole process group (compute-sanitizer's target, ctest's children)
    timeout -k 5 "$limit" "$@" >> "$out" 2>> "$logs/$name.log" < /dev/null
    rc=$?
    st_ms[$i]=$(($(now_ms) - start))
    st_rc[$i]=$rc
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        st_status[$i]=timed_out st_note[$i]="cut off after ${limit}s"
    elif [ $rc -eq 0 ]; then
        st_status[$i]=passed
    else
        st_status[$i]=failed st_note[$i]="exit status $rc"
    fi
    return 0
}

# finish NAME [NOTE]: prints and reports a step run_step ran, keeping its status
finish() {
    local i
    i=${idx[$1]}
    [ $# -lt 2 ] || [ -z "$2" ] || st_note[$i]=$2
    record "$1" "${st_status[$i]}" "${st_note[$i]}"
}

# ---- report ------------------------------------------------------------------------------
json_str() { # STRING -> a JSON string literal
    local REPLY
    json_var "$1"
    printf '%s' "$REPLY"
}
json_var() { # STRING -> REPLY, a JSON string literal (no subshell: the report is written often)
    local s=$1
    s=${s//\\/\\\\}
    s=${s//\"/\\\"}
    s=${s//$'\n'/\\n}
    s=${s//$'\t'/\\t}
    s=${s//[[:cntrl:]]/}
    printf -v REPLY '"%s"' "$s"
}
md_cell() { local s=${1//|/\\|}; REPLY=${s//$'\n'/ }; } # STRING -> REPLY, for a table cell

# json_rows FILE KEY...: a Markdown table of the objects in FILE's "results" array (one line
# of JSON as mlp_cuda and streams_exec_bench print it), the columns KEY...
json_rows() {
    local file=$1
    shift
    awk -v keys="$*" '
    BEGIN { n = split(keys, k, " "); h = "|"; s = "|"
            for (i = 1; i <= n; i++) { h = h " " k[i] " |"; s = s "---|" }
            print h; print s }
    { line = line $0 }
    END {
        sub(/^.*"results": *\[/, "", line); sub(/\] *\} *$/, "", line)
        m = split(line, obj, /\} *, *\{/)
        for (j = 1; j <= m; j++) {
            row = "|"
            for (i = 1; i <= n; i++) {
                v = ""
                if (match(obj[j], "\"" k[i] "\": *(\"[^\"]*\"|[^,}]*)")) {
                    v = substr(obj[j], RSTART, RLENGTH); sub(/^"[^"]*": */, "", v); gsub(/"/, "", v)
                }
                row = row " " v " |"
            }
            print row
        }
    }' "$file"
}

# json_value FILE MATCH KEY: KEY's value in the first object of FILE containing MATCH
json_value() {
    tr '{' '\n' < "$1" | grep -F -- "$2" | head -n 1 | sed -n "s/.*\"$3\": *\"\{0,1\}\([^,\"}]*\).*/\1/p"
}

gpu_name="" gpu_driver="" gpu_cap="" gpu_mem="" toolkit="" archs="" torch_version=""
tests_summary="" verdict="" exit_code=0 headline=""
declare -A san_errors=([memcheck]="" [racecheck]="" [synccheck]="" [initcheck]="")

log_excerpt() { # FILE PATTERN MAX: matching lines, at most MAX
    [ -f "$1" ] && grep -E -- "$2" "$1" | head -n "$3"
}

sanitizer_errors() { # TOOL -> the error count its log reports, empty when none is
    local f=$logs/$1.log
    [ -f "$f" ] || return 0
    if [ "$1" = racecheck ]; then
        sed -n 's/.*RACECHECK SUMMARY: [0-9]* hazards\{0,1\} displayed (\([0-9]*\) errors\{0,1\}, .*/\1/p' "$f" | tail -n 1
    else
        sed -n 's/.*ERROR SUMMARY: \([0-9]*\) errors\{0,1\}.*/\1/p' "$f" | tail -n 1
    fi
}

mlp_headline() { # "pebble eager/graph vs torch eager/graph ms at batch B", or empty
    local f=$outdir/mlp_cuda.json t=$outdir/mlp_vs_torch.json b pe pg te tg
    [ -s "$f" ] && [ "$(head -c 1 "$f")" = "{" ] || return 0
    b=$(tr '{' '\n' < "$f" | sed -n 's/.*"batch": *\([0-9]*\).*/\1/p' | sort -n | tail -n 1)
    [ -n "$b" ] || return 0
    pe=$(json_value "$f" "\"batch\": $b, \"cuda_graph\": 0" step_ms)
    pg=$(json_value "$f" "\"batch\": $b, \"cuda_graph\": 1" step_ms)
    te="-" tg="-"
    if [ -s "$t" ]; then
        te=$(json_value "$t" "\"batch\": $b, \"runner\": \"torch eager\"" step_ms)
        tg=$(json_value "$t" "\"batch\": $b, \"runner\": \"torch cuda graph\"" step_ms)
    fi
    printf 'batch %s: pebble %s / %s ms, torch %s / %s ms' "$b" "${pe:--}" "${pg:--}" "${te:--}" "${tg:--}"
}

write_json() {
    local i f first=1 secs REPLY
    {
        printf '{\n  "schema": 1,\n  "date": %s,\n  "commit": %s,\n  "mode": %s,\n' "$(json_str "$run_date")" \
            "$(json_str "$commit")" "$(json_str "$mode")"
        printf '  "gpu": {"name": %s, "driver": %s, "compute_capability": %s, "memory": %s},\n' \
            "$(json_str "$gpu_name")" "$(json_str "$gpu_driver")" "$(json_str "$gpu_cap")" "$(json_str "$gpu_mem")"
        printf '  "toolkit": %s,\n  "architectures": %s,\n  "cuda_module": %s,\n  "build_dir": %s,\n' \
            "$(json_str "$toolkit")" "$(json_str "$archs")" "$(json_str "$cuda_module")" "$(json_str "$build")"
        printf '  "torch": %s,\n  "result": %s,\n  "exit_status": %d,\n  "elapsed_s": %s,\n  "steps": [\n' \
            "$(json_str "$torch_version")" "$(json_str "${verdict:-running}")" "$exit_code" "$(fmt_s $(($(now_ms) - t0)))"
        for i in "${!steps[@]}"; do
            [ $first -eq 1 ] || printf ',\n'
            first=0
            fmt_var "${st_ms[$i]}"
            secs=$REPLY
            json_var "${st_note[$i]}"
            printf '    {"name": "%s", "status": "%s", "seconds": %s, "limit_s": %s, "exit_code": %s, "note": %s, "log": "%s"}' \
                "${steps[$i]}" "${st_status[$i]}" "$secs" "${st_limit[$i]}" "${st_rc[$i]:-null}" "$REPLY" \
                "logs/${steps[$i]}.log"
        done
        printf '\n  ],\n  "tests_summary": %s,\n  "sanitizers": {' "$(json_str "$tests_summary")"
        first=1
        for f in memcheck racecheck synccheck initcheck; do
            [ $first -eq 1 ] || printf ', '
            first=0
            i=${idx[$f]}
            printf '%s: {"status": %s, "errors": %s}' "$(json_str $f)" "$(json_str "${st_status[$i]}")" \
                "${san_errors[$f]:-null}"
        done
        printf '},\n  "mlp_headline": %s' "$(json_str "$headline")"
        # the programs' own JSON, as they printed it, when their step passed
        for f in mlp_cuda:mlp_cuda.json mlp_vs_torch:mlp_vs_torch.json streams:streams.json; do
            i=${idx[${f%%:*}]}
            if [ "${st_status[$i]}" = passed ] && [ "$(head -c 1 "$outdir/${f#*:}" 2> /dev/null)" = "{" ]; then
                printf ',\n  %s: %s' "$(json_str "${f%%:*}")" "$(tr -d '\n' < "$outdir/${f#*:}")"
            else
                printf ',\n  %s: null' "$(json_str "${f%%:*}")"
            fi
        done
        printf '\n}\n'
    } > "$outdir/gpu_report.json.tmp" && mv "$outdir/gpu_report.json.tmp" "$outdir/gpu_report.json"
}

write_md() {
    local i f e secs REPLY
    {
        echo "# pebble GPU check"
        echo
        echo "- date: $run_date, commit $commit, mode: $mode${stub:+ (no GPU: tools from $stub)}"
        echo "- GPU: ${gpu_name:-unknown} (compute capability ${gpu_cap:-?}, ${gpu_mem:-? memory}), driver ${gpu_driver:-?}"
        echo "- CUDA toolkit: ${toolkit:-not found}; built for architectures: ${archs:-the default (80;90)}"
        echo "- CUDA module: $cuda_module; PyTorch: ${torch_version:-none}"
        echo "- result: **${verdict:-running}** (exit status $exit_code), $(fmt_s $(($(now_ms) - t0))) s in all"
        echo
        echo "## Steps"
        echo
        echo "| step | result | seconds | limit s | note |"
        echo "|---|---|---|---|---|"
        for i in "${!steps[@]}"; do
            fmt_var "${st_ms[$i]}"
            secs=$REPLY
            md_cell "${st_note[$i]}"
            echo "| ${steps[$i]} | ${st_status[$i]} | $secs | ${st_limit[$i]} | $REPLY |"
        done
        echo
        echo "Logs: \`logs/STEP.log\`."
        echo
        echo "## Tests (test_cuda)"
        echo
        if [ -f "$logs/tests.log" ]; then
            echo '```'
            log_excerpt "$logs/tests.log" 'op cases|final loss|cnn streams|checks failed|no CUDA device|FAIL' 40
            echo '```'
        else
            echo "(not run)"
        fi
        echo
        echo "## Sanitizers (compute-sanitizer over test_cuda)"
        echo
        echo "| tool | result | errors | note |"
        echo "|---|---|---|---|"
        for f in memcheck racecheck synccheck initcheck; do
            i=${idx[$f]}
            e=${san_errors[$f]}
            md_cell "${st_note[$i]}"
            echo "| $f | ${st_status[$i]} | ${e:--} | $REPLY |"
        done
        for f in memcheck racecheck synccheck initcheck; do
            [ -f "$logs/$f.log" ] && grep -q '^========= [A-Z]' "$logs/$f.log" || continue
            if grep -E '^========= ' "$logs/$f.log" | grep -vqE 'SUMMARY|^========= *$'; then
                printf '\n%s, first findings:\n\n```\n' "$f"
                grep -E '^========= ' "$logs/$f.log" | grep -vE '^========= *$' | head -n 30
                echo '```'
            fi
        done
        echo
        echo "## MLP training step (mlp_cuda)"
        echo
        if [ -s "$outdir/mlp_cuda.json" ] && [ "$(head -c 1 "$outdir/mlp_cuda.json")" = "{" ]; then
            json_rows "$outdir/mlp_cuda.json" batch cuda_graph streams step_ms samples_per_s device_bytes loss
        else
            echo "(no figures)"
        fi
        echo
        echo "## Beside PyTorch (mlp_cuda_vs_torch.sh)"
        echo
        i=${idx[mlp_vs_torch]}
        if [ "${st_status[$i]}" = passed ]; then
            echo '```'
            grep -vE '^\$ ' "$logs/mlp_vs_torch.log"
            echo '```'
        else
            md_cell "${st_note[$i]}"
            echo "(${st_status[$i]}: $REPLY)"
        fi
        echo
        echo "## Streams (streams_exec_bench)"
        echo
        if [ -s "$outdir/streams.json" ] && [ "$(head -c 1 "$outdir/streams.json")" = "{" ]; then
            json_rows "$outdir/streams.json" backend streams streams_used waits ms cpu_ms speedup identical
        else
            echo "(no figures)"
        fi
        echo
        echo "## Kernels ($kernels_tool, mlp_cuda ${kernels_args[*]})"
        echo
        i=${idx[kernels]}
        if [ "${st_status[$i]}" = passed ] && [ "$kernels_tool" = ncu ]; then
            echo "Each kernel timed alone by ncu (gpu__time_duration.sum; ncu locks the clocks), both"
            echo "graphs' kernels together; $(md_cell "${st_note[$i]}"; printf '%s' "$REPLY")."
            echo
            cat "$outdir/kernels.md" 2> /dev/null || echo "(no kernel rows)"
        elif [ "${st_status[$i]}" = passed ]; then
            echo '```'
            grep -E -A 40 'cuda_gpu_kern_sum|CUDA Kernel Statistics' "$logs/kernels.log" | head -n 42
            echo '```'
        else
            md_cell "${st_note[$i]}"
            echo "(${st_status[$i]}: $REPLY)"
        fi
        echo
        echo "## NCCL data parallelism (test_data_parallel --nccl, dp_step --nccl)"
        echo
        if [ -s "$logs/nccl.log" ]; then
            echo '```'
            grep -E '^ok:|^784-|^\| |FAIL|failed|rror' "$logs/nccl.log" | head -n 20
            echo '```'
        else
            i=${idx[nccl]}
            md_cell "${st_note[$i]}"
            echo "(${st_status[$i]}: $REPLY)"
        fi
        echo
        echo "## Row for docs/cuda.md"
        echo
        echo "| device | date | commit | tests | sanitizer findings | MLP step: pebble eager / graph, torch eager / graph |"
        echo "|---|---|---|---|---|---|"
        local sans="" s
        for f in memcheck racecheck synccheck initcheck; do
            i=${idx[$f]}
            e=${san_errors[$f]}
            s=${st_status[$i]}
            [ "$s" != passed ] || s=${e:-0}
            [ "$s" != failed ] || [ -z "$e" ] || s="$e"
            sans="$sans${sans:+, }$f $s"
        done
        i=${idx[tests]}
        echo "| ${gpu_name:-?} | ${run_date%%T*} | $commit | ${st_status[$i]} | $sans | $headline |"
    } > "$outdir/gpu_report.md.tmp" && mv "$outdir/gpu_report.md.tmp" "$outdir/gpu_report.md"
}

write_report() { write_json; write_md; }

# ---- the steps ---------------------------------------------------------------------------
step_deps() {
    if [ -n "$stub" ]; then
        skip deps "stub mode"
    elif ! command -v apt-get > /dev/null || ! command -v dpkg-query > /dev/null; then
        skip deps "no apt-get/dpkg-query (not Debian or Ubuntu): install by hand what .ci/setup-debian --build lists"
    elif [ "$(id -u)" -ne 0 ] && ! { command -v sudo > /dev/null && sudo -n true 2> /dev/null; }; then
        skip deps "not root and no password-less sudo: install by hand what .ci/setup-debian --build lists"
    elif run_step deps bash "$root/.ci/setup-debian" --build; then
        local i
        i=${idx[deps]}
        if [ "${st_status[$i]}" = passed ]; then
            finish deps "$(tail -n 1 "$logs/deps.log")"
        else
            finish deps "${st_note[$i]}: packages not installed (offline?); the build says if any is missing"
        fi
    fi
}

step_gpu() {
    local i line caps
    if [ -z "$nvsmi" ]; then
        skip gpu "nvidia-smi not found"
    elif step_stdout=$logs/gpu.csv run_step gpu "$nvsmi" \
        --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader; then
        i=${idx[gpu]}
        IFS= read -r line < "$logs/gpu.csv" || line=""
        IFS=, read -r gpu_name gpu_driver gpu_cap gpu_mem <<< "$line"
        gpu_name=$(echo "$gpu_name" | sed 's/^ *//;s/ *$//') gpu_driver=${gpu_driver# } gpu_cap=${gpu_cap# } gpu_mem=${gpu_mem# }
        # one architecture per distinct compute capability ("9.0" -> 90)
        caps=$(cut -d, -f3 "$logs/gpu.csv" | tr -d ' .' | grep -E '^[0-9]+[a-z]?$' | sort -u | paste -sd';' -)
        archs=$caps
        if [ "${st_status[$i]}" = passed ] && [ -z "$line" ]; then
            st_status[$i]=failed st_note[$i]="nvidia-smi listed no GPU"
        elif [ "${st_status[$i]}" = passed ]; then
            st_note[$i]="$(wc -l < "$logs/gpu.csv" | tr -d ' ') GPU(s); architectures ${archs:-unknown (the default: 80;90)}"
        fi
        finish gpu
    fi
    return 0
}

configure_cmd() {
    cfg=(cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DPEBBLE_CUDA=ON -DPEBBLE_BUILD_BENCH=ON
         -DPEBBLE_BUILD_TESTS=ON)
    [ -z "$archs" ] || cfg+=("-DCMAKE_CUDA_ARCHITECTURES=$archs")
    if [ ! -f "$build/CMakeCache.txt" ] && command -v ninja > /dev/null; then
        cfg+=(-G Ninja)
    fi
}

step_configure() {
    local cfg
    configure_cmd
    if [ -n "$stub" ]; then
        skip configure "stub mode: reusing $build; would run: ${cfg[*]}"
    elif ! command -v cmake > /dev/null; then
        record configure failed "cmake not found (see the deps step)"
    elif run_step configure "${cfg[@]}"; then
        finish configure
    fi
}

build_targets=(pebble_cuda test_cuda mlp_cuda streams_exec_bench)
step_build() {
    local keep=(-k) i n
    grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja' "$build/CMakeCache.txt" 2> /dev/null && keep=(-k 0)
    # the nccl step's programs, when the configure step found MPI and NCCL
    grep -q '^PEBBLE_NCCL:BOOL=ON' "$build/CMakeCache.txt" 2> /dev/null &&
        build_targets+=(pebble_nccl test_data_parallel dp_step)
    if [ -n "$stub" ]; then
        skip build "stub mode: reusing $build"
    elif [ ! -f "$build/CMakeCache.txt" ]; then
        record build failed "not configured (see the configure step)"
    elif run_step build cmake --build "$build" -j "$jobs" --target "${build_targets[@]}" -- "${keep[@]}"; then
        i=${idx[build]}
        n=$(grep -c -i 'warning' "$logs/build.log")
        [ "$n" -eq 0 ] || st_note[$i]="${st_note[$i]}${st_note[$i]:+; }$n warning line(s) in logs/build.log"
        finish build
    fi
}

# device_notes LOG: what a failing GPU run's messages point at (docs/cuda.md's risk list)
device_notes() {
    local n=""
    grep -q 'CUBLAS_STATUS_' "$1" && n="$n; a CUBLAS_STATUS_* (docs/cuda.md risk 2: alignment)"
    grep -qiE 'NoKernelImage|no kernel image' "$1" && n="$n; no kernel image for this GPU (risk 7: architectures)"
    grep -qiE 'IllegalAddress|illegal (memory )?address' "$1" && n="$n; an illegal address (risk 6: see tests_blocking)"
    printf '%s' "$n"
}

# run_tests NAME [ENV=VALUE...]: test_cuda, exit 77 (no device) counted as skipped
run_tests() {
    local name=$1 i fails
    shift
    if [ ! -x "$test_prog" ]; then
        skip "$name" "$test_prog not built"
        return 0
    fi
    run_step "$name" env "$@" "$test_prog" || return 0
    i=${idx[$name]}
    if [ "${st_rc[$i]}" = 77 ]; then
        st_status[$i]=skipped st_note[$i]=$(grep -m 1 'no CUDA device' "$logs/$name.log")
    elif [ "${st_status[$i]}" = passed ]; then
        st_note[$i]=$(grep -m 1 'op cases' "$logs/$name.log")
    elif [ "${st_status[$i]}" = failed ]; then
        fails=$(grep -m 1 'checks failed' "$logs/$name.log")
        st_note[$i]="${st_note[$i]}${fails:+: $fails}$(device_notes "$logs/$name.log")"
    fi
    finish "$name"
}

step_tests() {
    run_tests tests
    tests_summary=$(log_excerpt "$logs/tests.log" 'op cases|checks failed|no CUDA device' 3 | paste -sd';' -)
}

step_tests_blocking() {
    case ${st_status[${idx[tests]}]} in
    failed | timed_out) run_tests tests_blocking CUDA_LAUNCH_BLOCKING=1 ;;
    *) skip tests_blocking "runs only when the tests fail (CUDA_LAUNCH_BLOCKING=1: faults name their node)" ;;
    esac
}

step_sanitizer() {
    local tool=$1 i e extra=()
    # shellcheck disable=SC2206 # options, split on spaces on purpose
    [ -z "${PEBBLE_GPU_CHECK_SANITIZER_ARGS:-}" ] || extra=($PEBBLE_GPU_CHECK_SANITIZER_ARGS)
    if [ -z "$sanitizer" ]; then
        skip "$tool" "compute-sanitizer not found"
        return 0
    fi
    if [ ! -x "$test_prog" ]; then
        skip "$tool" "$test_prog not built"
        return 0
    fi
    run_step "$tool" "$sanitizer" --tool "$tool" --error-exitcode 86 "${extra[@]}" \
        "$test_prog" || return 0
    i=${idx[$tool]}
    e=$(sanitizer_errors "$tool")
    san_errors[$tool]=$e
    case ${st_status[$i]} in
    passed)
        if [ -n "$e" ] && [ "$e" != 0 ]; then
            st_status[$i]=failed st_note[$i]="$e errors"
        else
            st_note[$i]="${e:-no} errors reported"
        fi ;;
    failed)
        if grep -q 'no CUDA device' "$logs/$tool.log"; then
            st_note[$i]="test_cuda found no CUDA device under the sanitizer"
        elif [ -n "$e" ] && [ "$e" != 0 ]; then
            st_note[$i]="$e errors"
        else
            st_note[$i]="test_cuda failed under the sanitizer (exit status ${st_rc[$i]})$(device_notes "$logs/$tool.log")"
        fi ;;
    esac
    finish "$tool"
}

step_mlp_cuda() {
    local i
    if [ ! -x "$mlp_prog" ]; then
        skip mlp_cuda "$mlp_prog not built"
        return 0
    fi
    step_stdout=$outdir/mlp_cuda.json run_step mlp_cuda "$mlp_prog" --format json "${mlp_args[@]}" || return 0
    i=${idx[mlp_cuda]}
    if grep -q '^no CUDA device' "$outdir/mlp_cuda.json"; then
        st_status[$i]=failed st_note[$i]=$(head -n 1 "$outdir/mlp_cuda.json")
    elif [ "${st_status[$i]}" = passed ]; then
        headline=$(mlp_headline)
        st_note[$i]=$headline
    fi
    finish mlp_cuda
}

pick_python() {
    if [ -n "${PYTHON:-}" ]; then
        echo "$PYTHON"
    elif [ -x "$here/.venv/bin/python3" ]; then
        echo "$here/.venv/bin/python3"
    else
        command -v python3 || echo python3
    fi
}

step_torch() {
    local i py
    py=$(pick_python)
    if ! command -v "$py" > /dev/null 2>&1; then
        skip torch "no python ($py)"
        return 0
    fi
    run_step torch "$py" -c 'import torch, sys
ok = torch.cuda.is_available()
print("torch %s, CUDA %s, %s" % (torch.__version__, torch.version.cuda, torch.cuda.get_device_name() if ok else "no CUDA device"))
sys.exit(0 if ok else 3)' || return 0
    i=${idx[torch]}
    case ${st_rc[$i]} in
    0) torch_version=$(tail -n 1 "$logs/torch.log"); st_note[$i]="$torch_version ($py)" ;;
    3) st_status[$i]=skipped st_note[$i]="PyTorch sees no CUDA device: $(tail -n 1 "$logs/torch.log")" ;;
    124 | 137) ;;
    *) st_status[$i]=skipped st_note[$i]="no PyTorch in $py: $(tail -n 1 "$logs/torch.log")" ;;
    esac
    finish torch
}

step_mlp_vs_torch() {
    local i
    i=${idx[torch]}
    if [ "${st_status[$i]}" != passed ]; then
        skip mlp_vs_torch "no PyTorch with CUDA (see the torch step)"
        return 0
    fi
    if [ ! -x "$mlp_prog" ]; then
        skip mlp_vs_torch "$mlp_prog not built"
        return 0
    fi
    MLP_TORCH_JSON=$outdir/mlp_vs_torch.json PYTHON=$(pick_python) run_step mlp_vs_torch \
        bash "$here/mlp_cuda_vs_torch.sh" "$build" "${mlp_args[@]}" || return 0
    i=${idx[mlp_vs_torch]}
    if [ "${st_status[$i]}" = passed ]; then
        headline=$(mlp_headline)
        st_note[$i]=$headline
    fi
    finish mlp_vs_torch
}

step_streams() {
    local i
    if [ ! -x "$streams_prog" ]; then
        skip streams "$streams_prog not built"
        return 0
    fi
    step_stdout=$outdir/streams.json run_step streams "$streams_prog" --format json "${streams_args[@]}" || return 0
    i=${idx[streams]}
    if [ "${st_status[$i]}" = passed ] && ! grep -q '"backend": "cuda"' "$outdir/streams.json"; then
        st_status[$i]=failed st_note[$i]="no cuda rows: $(grep -m 1 -i cuda "$logs/streams.log")"
    elif [ "${st_status[$i]}" = passed ]; then
        st_note[$i]="cuda rows identical to one stream's: $(grep -o '"backend": "cuda"[^}]*"identical": [a-z]*' \
            "$outdir/streams.json" | grep -c 'true')/$(grep -o '"backend": "cuda"' "$outdir/streams.json" | wc -l)"
    fi
    finish streams
}

# kernel_sums CSV: ncu's --csv rows (gpu__time_duration.sum) summed per kernel (its name
# without the argument list: the last parenthesised group, so "(anonymous namespace)" or a
# "(bool)1" template argument stays part of it), one "total µs<TAB>name<TAB>launches" line each,
# the largest total first. Other lines (the program's own output, ==PROF==) are ignored.
kernel_sums() {
    awk -F'","' '
        function base(s,   i, c, d) {
            if (s !~ /\)$/)
                return s
            for (i = length(s); i > 0; i--) {
                c = substr(s, i, 1)
                if (c == ")")
                    d++
                else if (c == "(" && --d == 0)
                    return substr(s, 1, i - 1)
            }
            return s
        }
        !/^"/ { next }
        { sub(/^"/, ""); sub(/"\r?$/, "") }
        !col { for (c = 1; c <= NF; c++) { if ($c == "Kernel Name") col = c; if ($c == "Metric Unit") unit = c
                                            if ($c == "Metric Value") val = c }
               next }
        { name = base($col); gsub(/\|/, "/", name); v = $val; gsub(/,/, "", v)
          if ($unit ~ /^(ns|nsecond)$/) v /= 1000; else if ($unit ~ /^(ms|msecond)$/) v *= 1000
          else if ($unit ~ /^(s|second)$/) v *= 1000000
          n[name]++; t[name] += v }
        END { for (k in n) printf "%.1f\t%s\t%d\n", t[k], k, n[k] }' "$1" |
        sort -t "$(printf '\t')" -k1,1 -rn
}

# kernel_table < SUMS: kernel_sums's lines as a markdown table (launches, mean and total µs),
# at most 30 rows
kernel_table() {
    echo "| kernel | launches | mean µs | total µs |"
    echo "|---|---:|---:|---:|"
    head -n 30 | awk -F'\t' 'NF == 3 { printf "| %s | %d | %.1f | %.1f |\n", $2, $3, $1 / $3, $1 }'
}

# lt_epilogues LOG: the fused products cuBLASLt ran (its log's cublasLtMatmul trace lines) by
# epilogue, "BGRADB 12, RELU_BIAS 8"; empty when none ran
lt_epilogues() {
    grep -h '\]\[cublasLtMatmul\]' "$1" 2> /dev/null | grep -o 'epilogue=EPILOGUE_[A-Z_]*' | sed 's/.*EPILOGUE_//' |
        sort | uniq -c | awk '{ printf "%s%s %d", (NR > 1 ? ", " : ""), $2, $1 }'
}

step_kernels() {
    local sums kinds launches fused
    if [ -z "$nsys" ] && [ -z "$ncu" ]; then
        skip kernels "neither nsys nor ncu found (which cuBLASLt kernels run: docs/cuda.md risk 1)"
    elif [ ! -x "$mlp_prog" ]; then
        skip kernels "$mlp_prog not built"
    elif [ "$kernels_tool" = nsys ]; then
        if run_step kernels "$nsys" profile --trace=cuda --stats=true --force-overwrite=true \
            -o "$build/gpu_check_mlp" "$mlp_prog" "${kernels_args[@]}"; then
            finish kernels
        fi
    elif rm -f "$logs/cublaslt.log" &&
        step_stdout=$outdir/kernels.csv run_step kernels env CUBLASLT_LOG_LEVEL=5 CUBLASLT_LOG_FILE="$logs/cublaslt.log" \
            "$ncu" --csv --metrics gpu__time_duration.sum "$mlp_prog" "${kernels_args[@]}"; then
        if [ "${st_status[${idx[kernels]}]}" = passed ]; then
            sums=$(kernel_sums "$outdir/kernels.csv")
            printf '%s\n' "$sums" | kernel_table > "$outdir/kernels.md"
            kinds=$(printf '%s\n' "$sums" | awk -F'\t' 'NF == 3 { k++ } END { print k + 0 }')
            launches=$(printf '%s\n' "$sums" | awk -F'\t' 'NF == 3 { n += $3 } END { print n + 0 }')
            fused=$(lt_epilogues "$logs/cublaslt.log")
            if [ "$kinds" -le 0 ]; then
                st_status[${idx[kernels]}]=failed st_note[${idx[kernels]}]="ncu timed no kernel"
            else
                st_note[${idx[kernels]}]="ncu: $launches launches of $kinds kernels; cuBLASLt fused products: ${fused:-none (the fallbacks ran: docs/cuda.md risk 1)}"
            fi
        fi
        finish kernels
    fi
}

step_nccl() {
    local i mpirun row
    mpirun=$(command -v mpirun || true)
    if [ -n "$stub" ]; then
        skip nccl "stub mode: NCCL needs a GPU"
    elif [ -z "$mpirun" ]; then
        skip nccl "mpirun not found (Open MPI)"
    elif [ ! -f "$build/libpebble_nccl.so" ] || [ ! -x "$build/test/test_data_parallel" ]; then
        skip nccl "libpebble_nccl.so or test_data_parallel not built (NCCL or MPI not found by the configure step)"
    else
        # the test, then the step's times at two batches (dp_step skipped when not built)
        run_step nccl env PEBBLE_NCCL_MODULE="$build/libpebble_nccl.so" bash -c '
            set -e
            "$1" -np 1 --allow-run-as-root --oversubscribe "$2/test/test_data_parallel" --nccl --need-gpu
            if [ -x "$2/bench/dp_step" ]; then
                for b in 128 1024; do
                    "$1" -np 1 --allow-run-as-root --oversubscribe "$2/bench/dp_step" --batch $b --nccl
                done
            fi' nccl "$mpirun" "$build" || return 0
        i=${idx[nccl]}
        if [ "${st_status[$i]}" = passed ]; then
            row=$(grep -m 1 '^| 1 |' "$logs/nccl.log")
            st_note[$i]="$(grep -m 1 '^ok:' "$logs/nccl.log")${row:+; step ms at batch 128 (in order: compute, NCCL; overlap: compute, NCCL): }$(echo "$row" | cut -d'|' -f3-6 | tr -d ' ')"
        else
            st_note[$i]="${st_note[$i]}$(device_notes "$logs/nccl.log")"
        fi
        finish nccl
    fi
}

# ---- run ---------------------------------------------------------------------------------
on_signal() {
    verdict=interrupted exit_code=130
    write_report
    exit 130
}
trap on_signal INT TERM

# step NAME FUNCTION [ARGS...]: runs the step's function, or reports it not selected (--only)
step() {
    local name=$1
    shift
    if selected "$name"; then
        "$@"
    else
        skip "$name" "not selected"
    fi
}

echo "gpu_check: source $root, build $build, report $outdir/gpu_report.md${stub:+ (stub mode)}"
if [ -n "$nvcc" ]; then
    toolkit=$(timeout 20 "$nvcc" --version 2> /dev/null | sed -n 's/.*release \([^,]*\), V\([^ ]*\).*/\2/p' | head -n 1)
    toolkit=${toolkit:-"nvcc at $nvcc (version unknown)"}
fi
write_report
step deps step_deps
step gpu step_gpu
step configure step_configure
step build step_build
step tests step_tests
step tests_blocking step_tests_blocking
for tool in memcheck racecheck synccheck initcheck; do
    step $tool step_sanitizer $tool
done
step mlp_cuda step_mlp_cuda
step torch step_torch
step mlp_vs_torch step_mlp_vs_torch
step streams step_streams
step kernels step_kernels
step nccl step_nccl

# logs past 1 MiB (a sanitizer finding repeated in every launch) keep their first 2000 and last
# 500 lines, so that OUTDIR stays small enough to bring back from a lent machine
for f in "$logs"/*.log; do
    [ "$(wc -c < "$f")" -le 1048576 ] && continue
    { head -n 2000 "$f"; echo "[gpu_check: $(wc -l < "$f") lines, cut to the first 2000 and the last 500]"
      tail -n 500 "$f"; } > "$f.cut" && mv "$f.cut" "$f"
done

# the verdict: a failed or cut-off step (deps aside), or a required step that could not run
bad=""
for i in "${!steps[@]}"; do
    s=${steps[$i]}
    [[ $advisory == *" $s "* ]] && continue
    case ${st_status[$i]} in
    failed | timed_out) bad="$bad $s" ;;
    skipped) [[ $required == *" $s "* ]] && [ "${st_note[$i]}" != "not selected" ] && bad="$bad $s" ;;
    esac
done
if [ -n "$bad" ]; then
    verdict="failed:$bad" exit_code=1
else
    verdict=passed exit_code=0
fi
write_report
echo "gpu_check: $verdict ($(fmt_s $(($(now_ms) - t0))) s); report: $outdir/gpu_report.md"
exit $exit_code
