#!/usr/bin/env bash
# bench/gpu_check.sh without a GPU: its --stub mode over this build tree, with the host CUDA
# emulator as the CUDA module (test/cuda_emu) and fake nvidia-smi, nvcc, compute-sanitizer and
# python (one without torch, one standing in for PyTorch and mlp_cuda_torch.py) written here. Checks the control flow (every step in order, each reported), the time
# limits (a sanitizer that hangs is cut off at its --limit, its process group killed, and the
# later steps still run), failure handling (a sanitizer reporting errors, a GPU query failing,
# no device: the later steps run, the exit status is 1; all passing: 0; bad usage: 2) and the
# report (gpu_report.md's sections and tables, gpu_report.json valid and holding each step).
#
# usage: gpu_check.sh PATH/TO/bench/gpu_check.sh BUILD_DIR PATH/TO/libpebble_cuda_emu.so
set -u

script=${1:?usage: gpu_check.sh GPU_CHECK_SH BUILD_DIR EMULATOR_MODULE}
build=${2:?usage: gpu_check.sh GPU_CHECK_SH BUILD_DIR EMULATOR_MODULE}
emu=${3:?usage: gpu_check.sh GPU_CHECK_SH BUILD_DIR EMULATOR_MODULE}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

passed=0
fail() {
    echo "FAIL: $*"
    for f in "$tmp/out" "$tmp/run/gpu_report.md"; do
        [ -s "$f" ] && { echo "--- $f:"; cat "$f"; }
    done
    echo "$passed passed, 1 failed"
    exit 1
}
pass() {
    passed=$((passed + 1))
    echo "ok $passed - $*"
}

# ---- the fakes ---------------------------------------------------------------------------
stub=$tmp/stub
mkdir -p "$stub"
cat > "$stub/nvidia-smi" << 'EOF'
#!/usr/bin/env bash
[ -z "${FAKE_GPU_FAIL:-}" ] || { echo "NVIDIA-SMI has failed: no driver" >&2; exit 9; }
[ "$1" = "--query-gpu=name,driver_version,compute_cap,memory.total" ] || { echo "unexpected: $*" >&2; exit 8; }
echo "Fake GPU H0, 999.99, 9.0, 81559 MiB"
EOF
cat > "$stub/nvcc" << 'EOF'
#!/usr/bin/env bash
echo "Cuda compilation tools, release 99.1, V99.1.7"
EOF
# compute-sanitizer --tool TOOL --error-exitcode N PROGRAM: logs its arguments; FAKE_HANG=TOOL
# hangs (its pid in $FAKE_DIR/hang.pid), FAKE_FAIL=TOOL reports two errors
cat > "$stub/compute-sanitizer" << 'EOF'
#!/usr/bin/env bash
echo "$*" >> "$FAKE_DIR/sanitizer.log"
tool=$2 prog=${*: -1}
[ -x "$prog" ] || { echo "no program '$prog'" >&2; exit 3; }
if [ "$tool" = "${FAKE_HANG:-}" ]; then
    echo $$ > "$FAKE_DIR/hang.pid"
    exec sleep 600
fi
if [ "$tool" = "${FAKE_FAIL:-}" ]; then
    echo "========= Invalid __global__ read of size 4 bytes"
    echo "=========     at scale_k(float *, const float *, long)+0x70"
    echo "========= ERROR SUMMARY: 2 errors"
    exit 86
fi
if [ "$tool" = racecheck ]; then
    echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"
else
    echo "========= ERROR SUMMARY: 0 errors"
fi
EOF
# a python without torch
cat > "$stub/python3" << 'EOF'
#!/usr/bin/env bash
echo "ModuleNotFoundError: No module named 'torch'" >&2
exit 1
EOF
# a python "with torch" on a "GPU": answers gpu_check's torch probe and mlp_cuda_vs_torch.sh's,
# and stands in for mlp_cuda_torch.py (fixed torch rows for batch 8, as --json asks)
mkdir -p "$stub/torch"
cat > "$stub/torch/python3" << 'EOF'
#!/usr/bin/env bash
if [ "$1" = -c ]; then
    echo "torch 9.9.9, CUDA 99.1, Fake GPU H0"
    exit 0
fi
[[ $1 == */mlp_cuda_torch.py ]] || exit 5
while [ $# -gt 0 ]; do
    case $1 in
    --pebble) grep -q '"results"' "$2" || exit 6; shift ;;
    --json) json=$2; shift ;;
    esac
    shift
done
echo " batch runner                    step ms      samples/s   device MiB"
echo "     8 torch eager                 1.5000         5333.3         9.00"
echo "     8 torch cuda graph            0.5000        16000.0         9.00"
printf '%s\n' '{"device": "Fake GPU H0", "torch": "9.9.9", "rows": [{"batch": 8, "runner": "torch eager", "step_ms": 1.5, "samples_per_s": 5333.3, "device_bytes": 9437184}, {"batch": 8, "runner": "torch cuda graph", "step_ms": 0.5, "samples_per_s": 16000.0, "device_bytes": 9437184}]}' > "${json:?}"
EOF
chmod +x "$stub"/* "$stub/torch/python3"
export FAKE_DIR=$tmp OPENBLAS_NUM_THREADS=1

# runs gpu_check.sh into $tmp/run; its exit status in $rc
check() {
    rm -rf "$tmp/run" "$tmp/sanitizer.log"
    # the real test_cuda and mlp_cuda run on the host emulator here, many times slower than on
    # a GPU (and slower still on a loaded 2-core CI machine): the GPU-sized limits of their
    # steps (35 s, 15 s) would cut them off, so this test gives them room; a limit given in "$@"
    # comes later and wins
    bash "$script" --stub "$stub" --build-dir "$build" --limit tests=600 --limit mlp_cuda=300 "$@" "$tmp/run" > "$tmp/out" 2>&1
    rc=$?
}
json=$tmp/run/gpu_report.json
md=$tmp/run/gpu_report.md
# step_is NAME STATUS: the JSON report's record of step NAME has STATUS
step_is() { grep -q "{\"name\": \"$1\", \"status\": \"$2\"" "$json"; }
valid_json() {
    if command -v python3 > /dev/null && python3 -c 'import json' 2> /dev/null; then
        python3 -m json.tool "$1" > /dev/null
    elif command -v jq > /dev/null; then
        jq . "$1" > /dev/null
    else
        echo "(neither python3 nor jq: JSON not validated)"
    fi
}

# ---- 1: a sanitizer finding, a hanging sanitizer, no PyTorch -------------------------------
PEBBLE_CUDA_MODULE=$emu PYTHON=$stub/python3 FAKE_FAIL=memcheck FAKE_HANG=racecheck \
    check --limit racecheck=2
[ $rc -eq 1 ] || fail "a failing and a hanging sanitizer: exit status $rc, not 1"
[ -s "$md" ] && [ -s "$json" ] || fail "no gpu_report.md / gpu_report.json"
valid_json "$json" || fail "gpu_report.json is not valid JSON"
pass "a failing and a hanging sanitizer: exit status 1, both reports written, the JSON valid"

for s in deps:skipped gpu:passed configure:skipped build:skipped tests:passed tests_blocking:skipped \
         memcheck:failed racecheck:timed_out synccheck:passed initcheck:passed mlp_cuda:passed \
         torch:skipped mlp_vs_torch:skipped streams:passed kernels:skipped nccl:skipped; do
    step_is "${s%%:*}" "${s#*:}" || fail "step ${s%%:*} is not ${s#*:} in gpu_report.json"
done
order=$(grep -o '{"name": "[a-z_]*"' "$json" | cut -d'"' -f4 | paste -sd' ' -)
[ "$order" = "deps gpu configure build tests tests_blocking memcheck racecheck synccheck initcheck mlp_cuda torch mlp_vs_torch streams kernels nccl" ] ||
    fail "steps out of order: $order"
grep -q '"result": "failed: memcheck racecheck"' "$json" || fail "JSON result does not name memcheck and racecheck"
grep -q '"memcheck": {"status": "failed", "errors": 2}' "$json" || fail "JSON: memcheck's 2 errors"
grep -q '"limit_s": 2,' "$json" || fail "JSON: racecheck's limit of 2 s"
pass "every step in order with its outcome: memcheck failed (2 errors), racecheck timed out, the later steps ran"

# the hang was cut off: the fake's process is gone, its step took about its limit
pid=$(cat "$tmp/hang.pid" 2> /dev/null) || fail "the hanging sanitizer did not start"
! kill -0 "$pid" 2> /dev/null || { kill "$pid"; fail "the hanging sanitizer ($pid) still runs"; }
grep -q '^| racecheck | timed_out | [0-9.]* | 2 | cut off after 2s |' "$md" || fail "md: racecheck's timed-out row"
# cut off at its limit, not at some later one (the fake sleeps 600 s): 30 s leaves room for a
# loaded machine
secs=$(grep -o '"name": "racecheck", "status": "timed_out", "seconds": [0-9.]*' "$json" | grep -o '[0-9.]*$')
awk -v s="$secs" 'BEGIN { exit !(s >= 2 && s < 30) }' || fail "racecheck cut off after ${secs}s, not about 2"
pass "the hanging racecheck was cut off after its 2 s limit (${secs}s) and killed"

[ "$(wc -l < "$tmp/sanitizer.log")" -eq 4 ] || fail "compute-sanitizer ran $(wc -l < "$tmp/sanitizer.log") times, not 4"
for t in memcheck racecheck synccheck initcheck; do
    grep -q -- "^--tool $t --error-exitcode 86 .*/test/test_cuda\$" "$tmp/sanitizer.log" ||
        fail "compute-sanitizer --tool $t not run over test_cuda"
done
pass "compute-sanitizer ran each tool over test_cuda"

grep -q 'Fake GPU H0 (compute capability 9.0, 81559 MiB), driver 999.99' "$md" || fail "md: the GPU line"
grep -q 'CUDA toolkit: 99.1.7; built for architectures: 90' "$md" || fail "md: toolkit and architecture"
grep -q -- '-DCMAKE_CUDA_ARCHITECTURES=90' "$md" || fail "md: the configure line for the queried architecture"
grep -q "CUDA module: $emu" "$md" || fail "md: the emulator as the CUDA module"
grep -q '^| tests | passed |.*op cases' "$md" || fail "md: test_cuda's summary"
grep -q '^| memcheck | failed | 2 | 2 errors |' "$md" || fail "md: sanitizer table"
grep -q 'Invalid __global__ read' "$md" || fail "md: memcheck's findings"
grep -q '^| torch | skipped |.*no PyTorch' "$md" || fail "md: PyTorch missing"
grep -q '^| 8 | 1 | ' "$md" || fail "md: mlp_cuda's table (batch 8, graph)"
grep -q '^| cuda | 2 | 2 | ' "$md" || fail "md: streams_exec_bench's cuda rows"
grep -q '^| Fake GPU H0 | .* | passed | memcheck 2, racecheck timed_out, synccheck 0, initcheck 0 | batch 8: pebble ' "$md" ||
    fail "md: the row for docs/cuda.md"
grep -q '"mlp_cuda": {"model": ' "$json" && grep -q '"streams": {"graph": ' "$json" ||
    fail "JSON: the benchmarks' own JSON"
pass "gpu_report.md: GPU, toolkit, architecture, steps, sanitizer findings, benchmark tables, docs row"

# ---- 2: everything passes, PyTorch present --------------------------------------------------
PEBBLE_CUDA_MODULE=$emu PYTHON=$stub/torch/python3 \
    check --only gpu,memcheck,racecheck,synccheck,initcheck,mlp_cuda,torch,mlp_vs_torch,streams
[ $rc -eq 0 ] || fail "all selected steps passing: exit status $rc, not 0"
valid_json "$json" || fail "gpu_report.json is not valid JSON (all passing)"
grep -q '"result": "passed"' "$json" && step_is tests skipped && step_is memcheck passed ||
    fail "all passing: result, not-selected tests, memcheck"
grep -q '^| tests | skipped | .* | not selected |' "$md" || fail "md: a step not selected"
pass "all selected steps passing: exit status 0, the others reported as not selected"

step_is torch passed && step_is mlp_vs_torch passed || fail "PyTorch present: torch and mlp_vs_torch not passed"
grep -q 'PyTorch: torch 9.9.9, CUDA 99.1, Fake GPU H0' "$md" || fail "md: PyTorch's version line"
grep -q '     8 torch cuda graph            0.5000' "$md" || fail "md: mlp_cuda_vs_torch.sh's table"
grep -q '"mlp_vs_torch": {"device": "Fake GPU H0"' "$json" || fail "JSON: the torch rows (MLP_TORCH_JSON)"
grep -q '^| Fake GPU H0 | .* | skipped | memcheck 0, racecheck 0, synccheck 0, initcheck 0 | batch 8: pebble [0-9.]* / [0-9.]* ms, torch 1.5 / 0.5 ms |$' "$md" ||
    fail "md: the docs row with pebble's and torch's step times"
pass "PyTorch present: mlp_cuda_vs_torch.sh ran, its table and the docs row's pebble / torch step times"

# ---- 2b: no nsys, ncu present: the kernel table and cuBLASLt's fused products ---------------
# ncu --csv --metrics gpu__time_duration.sum PROGRAM ARGS...: runs PROGRAM (mlp_cuda on the
# emulator), then prints CSV rows as ncu does: three launches of two kernels, a thousands
# separator, a comma inside an argument list; FAKE_LT=1 also logs two RELU_BIAS products and
# one BGRADB in cuBLASLt's trace format, and a heuristic query naming one (it must not count)
cat > "$stub/ncu" << 'EOF'
#!/usr/bin/env bash
[ "$1 $2 $3" = "--csv --metrics gpu__time_duration.sum" ] || { echo "unexpected: $*" >&2; exit 8; }
shift 3
echo "==PROF== Connected to process 1 ($1)"
"$@" || exit
[ -z "${FAKE_NCU_NONE:-}" ] || exit 0 # profiled nothing (no counters, say): no CSV rows
cat << 'CSV'
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","mlp_cuda","h","adam_k(float *, long)","1","13","(256, 1, 1)","(8, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","6,400"
"1","1","mlp_cuda","h","sm80_xmma_gemm_f32_kernel","1","13","(128, 1, 1)","(8, 8, 2)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","33,600"
"2","1","mlp_cuda","h","adam_k(float *, long)","1","13","(256, 1, 1)","(8, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","2,600"
CSV
# FAKE_NCU_MORE=1: names whose template arguments hold parentheses (two kernels, not one),
# one kernel in seconds and one in microseconds, and 30 more kernels (35 in all: the table
# shows 30, the note counts every one)
if [ -n "${FAKE_NCU_MORE:-}" ]; then
    row() { printf '"9","1","mlp_cuda","h","%s","1","13","(256, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","%s","%s"\n' "$@"; }
    row 'void (anonymous namespace)::a_k<(bool)1>(float *)' usecond 1.50
    row 'void (anonymous namespace)::b_k<(bool)0>(float *)' us 2.50
    row 'long_k(float *)' second 1.2
    for i in $(seq 10 39); do row "k$i(int)" ns 1,000; done
fi
if [ -n "${FAKE_LT:-}" ]; then
    for e in RELU_BIAS RELU_BIAS BGRADB; do
        echo "[t][cublasLt][1][Trace][cublasLtMatmul] A=0X1 computeDesc=[computeType=COMPUTE_32F epilogue=EPILOGUE_$e]"
    done
    echo "[t][cublasLt][1][Api][cublasLtMatmulAlgoGetHeuristic] computeDesc=[epilogue=EPILOGUE_BIAS]"
fi >> "${CUBLASLT_LOG_FILE:?}"
EOF
chmod +x "$stub/ncu"
PEBBLE_CUDA_MODULE=$emu FAKE_LT=1 check --only kernels
[ $rc -eq 0 ] && step_is kernels passed || fail "ncu: kernels not passed (exit status $rc)"
grep -q '^| kernels | passed | .* | ncu: 3 launches of 2 kernels; cuBLASLt fused products: BGRADB 1, RELU_BIAS 2 |$' "$md" ||
    fail "md: the kernels step's note (launches, kernels, the fused products by epilogue)"
grep -q '^## Kernels (ncu, mlp_cuda --batch 8 --warmup 0 --iters 1 --reps 1 --fuse)$' "$md" || fail "md: the kernels heading"
# one row per kernel in µs, the largest total first
rows=$(grep '^| sm80_xmma\|^| adam_k' "$md" | paste -sd' ' -)
[ "$rows" = "| sm80_xmma_gemm_f32_kernel | 1 | 33.6 | 33.6 | | adam_k | 2 | 4.5 | 9.0 |" ] ||
    fail "md: the kernel table: $rows"
grep -q '^ *8 *yes *yes ' "$tmp/run/kernels.csv" || fail "mlp_cuda --fuse did not run its fused, captured row under ncu"
PEBBLE_CUDA_MODULE=$emu check --only kernels
step_is kernels passed && grep -q '^| kernels | passed | .* | ncu: 3 launches of 2 kernels; cuBLASLt fused products: none (the fallbacks ran' "$md" ||
    fail "md: no fused product logged"
PEBBLE_CUDA_MODULE=$emu FAKE_NCU_MORE=1 check --only kernels
step_is kernels passed && grep -q '^| kernels | passed | .* | ncu: 36 launches of 35 kernels; ' "$md" ||
    fail "md: more than 30 kernels: the note counts them all"
grep -q '^| long_k | 1 | 1200000.0 | 1200000.0 |$' "$md" || fail "md: a kernel timed in seconds"
grep -q '^| void (anonymous namespace)::a_k<(bool)1> | 1 | 1.5 | 1.5 |$' "$md" &&
    grep -q '^| void (anonymous namespace)::b_k<(bool)0> | 1 | 2.5 | 2.5 |$' "$md" ||
    fail "md: names with parentheses before the argument list"
[ "$(grep -c '^| k[0-9][0-9] | 1 | 1.0 | 1.0 |$' "$md")" -eq 25 ] || fail "md: the table holds 30 rows"
PEBBLE_CUDA_MODULE=$emu FAKE_NCU_NONE=1 check --only kernels
[ $rc -eq 0 ] && step_is kernels failed && grep -q '^| kernels | failed | .* | ncu timed no kernel |$' "$md" ||
    fail "ncu without a CSV row: the kernels step must fail, the run not (advisory; exit status $rc)"
rm "$stub/ncu"
pass "without nsys, ncu times mlp_cuda --fuse's kernels: one row per kernel, cuBLASLt's fused products by epilogue; no rows fail the step, not the run"

# ---- 3: no device, the GPU query failing ---------------------------------------------------
PEBBLE_CUDA_MODULE=$tmp/missing/libpebble_cuda.so FAKE_GPU_FAIL=1 check --only gpu,tests,mlp_cuda,streams
[ $rc -eq 1 ] || fail "no device: exit status $rc, not 1"
step_is gpu failed && step_is tests skipped && step_is mlp_cuda failed && step_is streams failed ||
    fail "no device: gpu failed, tests skipped (77), mlp_cuda and streams failed"
grep -q '"result": "failed: gpu tests mlp_cuda streams"' "$json" || fail "no device: the failing steps named"
grep -q '^| tests | skipped | .*no CUDA device' "$md" || fail "md: why the tests did not run"
step_is memcheck skipped && grep -q '^| memcheck | skipped | .* | not selected |' "$md" && [ ! -e "$tmp/sanitizer.log" ] ||
    fail "--only without the sanitizers: compute-sanitizer not run, reported as not selected"
pass "no device: each step says so, exit status 1"

# ---- 4: bad usage --------------------------------------------------------------------------
for args in "" "--limit nosuchstep=3 $tmp/u" "--only tests,bogus $tmp/u" "--budget x $tmp/u" "--stub $stub $tmp/u"; do
    # shellcheck disable=SC2086 # the arguments, split on purpose
    bash "$script" $args > "$tmp/out" 2>&1
    rc=$?
    [ $rc -eq 2 ] || fail "gpu_check.sh $args: exit status $rc, not 2"
done
pass "bad usage (no OUTDIR, unknown step, bad budget, --stub without --build-dir): exit status 2"

echo "$passed passed, 0 failed"
