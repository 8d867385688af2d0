#!/usr/bin/env bash
# Builds the GPU check on this machine and packs it for a GPU machine that has the CUDA toolkit
# and driver but not pebble's Debian build dependencies (OpenBLAS, igraph, jansson,
# protobuf-c...), as the lent GPU machines of docs/cuda.md "The first GPU runs" were:
#
#     bench/gpu_bundle.sh [--arch 90] [--build-dir DIR] OUTDIR
#
# writes OUTDIR/build.tar.xz (the programs gpu_check.sh runs, built for that architecture),
# OUTDIR/libs.tar.xz (the shared libraries they need beyond the C/C++ runtime and CUDA's,
# copied from this machine) and OUTDIR/run.sh. Copy the source tree with OUTDIR inside it to
# the GPU machine, and there, from the source tree's root:
#
#     bash OUTDIR/run.sh REPORTDIR [gpu_check.sh options...]
#
# run.sh unpacks both archives, points the dynamic loader at them (and at the CUDA toolkit's
# and, where PyTorch's pip wheels bring one, NCCL's libraries) and runs bench/gpu_check.sh over
# the unpacked build (its deps, configure and build steps not selected). The build tree's
# absolute path is compiled into its programs' run paths, so run.sh links that path to the
# unpacked tree when it is not there already. Exit status: gpu_check.sh's; 2 for bad usage.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
arch=90 build="" out=""
while [ $# -gt 0 ]; do
    case $1 in
    --arch) [[ ${2:-} =~ ^[0-9]+[a-z]?$ ]] || { echo "gpu_bundle: --arch NN (e.g. 90)" >&2; exit 2; }; arch=$2; shift 2 ;;
    --build-dir) [ -n "${2:-}" ] || { echo "gpu_bundle: --build-dir DIR" >&2; exit 2; }; build=$2; shift 2 ;;
    -h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu_bundle: unknown option '$1'" >&2; exit 2 ;;
    *) [ -z "$out" ] || { echo "gpu_bundle: one OUTDIR only" >&2; exit 2; }; out=$1; shift ;;
    esac
done
[ -n "$out" ] || { echo "usage: bench/gpu_bundle.sh [--arch 90] [--build-dir DIR] OUTDIR" >&2; exit 2; }
build=${build:-$root/build-gpu}
mkdir -p "$out" "$build"
out=$(cd "$out" && pwd)
build=$(cd "$build" && pwd)

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DPEBBLE_CUDA=ON -DPEBBLE_BUILD_BENCH=ON \
    -DPEBBLE_BUILD_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" > "$out/configure.log"
targets=(pebble_cuda test_cuda mlp_cuda streams_exec_bench pebble_cli)
grep -q '^PEBBLE_NCCL:BOOL=ON' "$build/CMakeCache.txt" && targets+=(pebble_nccl pebble_mpi test_data_parallel dp_step)
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}" > "$out/build.log"

# the files gpu_check.sh runs, relative to the source root when the build tree is inside it
files=()
for f in libpebble_cuda.so libpebble_nccl.so libpebble_mpi.so test/test_cuda test/test_data_parallel \
         bench/mlp_cuda bench/streams_exec_bench bench/dp_step tools/pebble CMakeCache.txt; do
    [ -e "$build/$f" ] && files+=("$f")
done
tar -C "$build" -cJf "$out/build.tar.xz" "${files[@]}"

# every library those files load, but the C and C++ runtimes (the GPU machine has its own,
# newer ones) and CUDA's (its driver's toolkit must be the one that runs)
libs=$(mktemp -d)
trap 'rm -rf "$libs"' EXIT
mkdir "$libs/lib"
for f in "${files[@]}"; do
    [ "$f" = CMakeCache.txt ] && continue
    ldd "$build/$f" 2> /dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r name path; do
    case $name in
    libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | ld-linux* | libstdc++* | libgcc_s* | \
    libcuda* | libcublas* | libnccl* | libz.so* | liblzma* | libpebble*) ;;
    libmpi* | libopen-* | libhwloc* | libevent* | libpmix*) ;; # the GPU machine's own Open MPI, if any
    *) cp -L "$path" "$libs/lib/$name" ;;
    esac
done
tar -C "$libs" -cJf "$out/libs.tar.xz" lib

cat > "$out/run.sh" << EOF
#!/usr/bin/env bash
# made by bench/gpu_bundle.sh on $(date -u +%Y-%m-%d) for sm_$arch; run from the source root
set -u
[ \$# -ge 1 ] || { echo "usage: bash $(basename "$out")/run.sh REPORTDIR [gpu_check.sh options...]" >&2; exit 2; }
bundle=\$(cd "\$(dirname "\$0")" && pwd)
build=$build
if [ ! -d "\$build" ]; then # the programs' run path names the tree where they were built
    mkdir -p "\$(dirname "\$build")" && ln -s "\$(mktemp -d)" "\$build"
fi
tar -C "\$build" -xJf "\$bundle/build.tar.xz" || exit 1
libdir=\$(mktemp -d) && tar -C "\$libdir" -xJf "\$bundle/libs.tar.xz" || exit 1
path=\$build:\$libdir/lib
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do [ -d "\$d" ] && path=\$path:\$d; done
nccl=\$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2> /dev/null) &&
    path=\$path:\$nccl
export LD_LIBRARY_PATH=\$path\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
out=\$1; shift
exec bash bench/gpu_check.sh --build-dir "\$build" \\
    --only gpu,tests,tests_blocking,memcheck,racecheck,synccheck,initcheck,mlp_cuda,torch,mlp_vs_torch,streams,kernels,nccl \\
    "\$@" "\$out"
EOF
chmod +x "$out/run.sh"
echo "gpu_bundle: $out/build.tar.xz ($(du -h "$out/build.tar.xz" | cut -f1)), $out/libs.tar.xz ($(du -h "$out/libs.tar.xz" | cut -f1)), $out/run.sh"
