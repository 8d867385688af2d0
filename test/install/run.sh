#!/usr/bin/env bash
# pebble as other projects use it once installed. `cmake --install` of this build into a
# temporary prefix, the tree then moved (nothing installed may name where it was put), and:
#   - the installed libraries export the public API only (pbl_ and a letter: no pbl__ helper,
#     no protobuf-c onnx__*), and no file names this build's source or build directory
#     outside debug information (the CUDA module search, __FILE__ in messages, RPATHs);
#   - find_package(pebble) in a consumer project (test/install/CMakeLists.txt) with the CUDA
#     toolkit, BLAS and pkg-config made unfindable: the quickstart against libpebble.so, and
#     against libpebble.a with ONNX code of its own;
#   - pkg-config with pebble.pc alone on its path: `--libs` is -L and -lpebble only; the
#     quickstart linked with it against libpebble.so (found at run time through -Wl,-rpath),
#     and with `--static` against libpebble.a with that ONNX code;
#   - with CUDA, libpebble_cuda.so found from the installed tree by libpebble.so and by a
#     program in bin/ linked with libpebble.a (cuda_probe.c);
#   - the quickstart as a C++ translation unit (g++ -x c++ -pedantic -Werror), and
#     cxx_shapes.cc: PBL_SHAPE and PBL_ATTR_* in C++ give what C's macros give.
# Each quickstart must print its fit and exit 0 (it does when w and b are within 0.1 of 3 and
# -1). Usage: run.sh BUILD_DIR SOURCE_DIR CMAKE CC CXX [FLAGS]; FLAGS (the sanitizers of a
# sanitized tree) go to every compile and link of the consumers.
set -euo pipefail
build=$1 src=$2 cmake=$3 cc=$4 cxx=$5 flags=${6:-}
here=$src/test/install
quickstart=$src/examples/quickstart.c
read -r -a fl <<< "$flags"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pebble-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

"$cmake" --install "$build" --prefix "$tmp/installed" > "$tmp/install.log"
mv "$tmp/installed" "$tmp/prefix"
prefix=$tmp/prefix
pc=$(find "$prefix" -name pebble.pc)
libdir=$(dirname "$(dirname "$pc")")
echo "installed and moved to $prefix (libdir ${libdir#"$prefix"/})"

# ---- what the installed files export and name ----
bad=$(nm -g --defined-only "$libdir/libpebble.a" | awk 'NF == 3 && $3 !~ /^pbl_[^_]/ { print $3 }')
n=$(nm -g --defined-only "$libdir/libpebble.a" | awk 'NF == 3' | wc -l)
[ -z "$bad" ] || fail "libpebble.a exports $(echo "$bad" | wc -l) symbols besides pbl_*: $(echo "$bad" | head -5 | tr '\n' ' ')"
echo "libpebble.a: $n global symbols defined, all pbl_ and a letter"
bad=$(nm -D --defined-only "$libdir/libpebble.so" | awk 'NF == 3 && $3 !~ /^pbl_[^_]/ { print $3 }')
n=$(nm -D --defined-only "$libdir/libpebble.so" | awk 'NF == 3' | wc -l)
[ -z "$bad" ] || fail "libpebble.so exports $(echo "$bad" | wc -l) symbols besides pbl_*: $(echo "$bad" | head -5 | tr '\n' ' ')"
echo "libpebble.so: $n dynamic symbols defined, all pbl_ and a letter"
if [ -n "$flags" ]; then
  echo "(paths not checked: sanitizers compile source locations into the code)"
else
  n=0
  while IFS= read -r -d '' f; do
    case $(head -c 4 "$f" | od -An -c | tr -d ' ') in
      177ELF) ;; *) [[ $f == *.a ]] || continue ;;
    esac
    objcopy --strip-debug "$f" "$tmp/stripped"
    for dir in "$src" "$build"; do
      grep -qaF "$dir" "$tmp/stripped" && fail "${f#"$prefix"/} names $dir (outside debug information)"
    done
    n=$((n + 1))
  done < <(find "$prefix" -type f \( -path '*/lib*' -o -path '*/bin/*' \) ! -name '*.cmake' ! -name '*.pc' -print0)
  echo "$n installed binaries name neither $src nor $build"
fi

run() { # name, program: runs it, shows its output, checks it fitted
  local out
  if out=$("$2" 2>&1) && [[ $out == w\ =* ]]; then
    echo "$1: $out"
  else
    fail "$1: $out"
  fi
}

# ---- CMake: find_package ----
echo "== find_package(pebble), no CUDA toolkit, no BLAS or pkg-config lookups"
if "$cmake" -S "$here" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" \
     -DCMAKE_C_FLAGS="$flags" -DPEBBLE_QUICKSTART="$quickstart" -DCMAKE_BUILD_TYPE=Release \
     -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON -DCMAKE_DISABLE_FIND_PACKAGE_BLAS=ON \
     -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON > "$tmp/consumer.log" 2>&1 &&
   "$cmake" --build "$tmp/consumer" >> "$tmp/consumer.log" 2>&1; then
  run "find_package, pebble::pebble (shared)" "$tmp/consumer/quickstart_shared"
  run "find_package, pebble::pebble_static + own onnx__*" "$tmp/consumer/quickstart_static"
  readelf -d "$tmp/consumer/quickstart_static" | grep -q 'NEEDED.*libpebble' &&
    fail "quickstart_static needs libpebble.so"
else
  cat "$tmp/consumer.log"
  fail "the find_package consumer did not configure or build"
fi

# ---- pkg-config ----
# pebble.pc alone: it must need no other package's .pc (a consumer of libpebble.so needs no
# dependency's -dev package)
export PKG_CONFIG_LIBDIR=$libdir/pkgconfig
unset PKG_CONFIG_PATH
echo "== pkg-config (PKG_CONFIG_LIBDIR: pebble.pc alone)"
read -r -a libs <<< "$(pkg-config --libs pebble)"
[ ${#libs[@]} -eq 2 ] && [ "${libs[1]}" = -lpebble ] ||
  fail "pkg-config --libs pebble is '${libs[*]}', not -L<libdir> -lpebble"
read -r -a cflags <<< "$(pkg-config --cflags pebble)"
pcdir=$(pkg-config --variable=libdir pebble)
[ "$(cd "$pcdir" && pwd -P)" = "$(cd "$libdir" && pwd -P)" ] || fail "pebble.pc's libdir is $pcdir, not $libdir"
echo "pkg-config --cflags --libs pebble: ${cflags[*]} ${libs[*]}"
if "$cc" "${fl[@]}" "$quickstart" "${cflags[@]}" "${libs[@]}" -Wl,-rpath,"$pcdir" -o "$tmp/pc_shared" 2> "$tmp/cc.log"; then
  run "pkg-config, shared (rpath)" "$tmp/pc_shared"
else
  cat "$tmp/cc.log"; fail "pkg-config shared: link failed"
fi
echo "pkg-config --static --libs pebble: $(pkg-config --static --libs pebble)"
# the README's command: libpebble.a named in place of -lpebble, which would pick the .so
read -r -a slibs <<< "$(pkg-config --static --libs pebble | sed 's/-lpebble /-l:libpebble.a /')"
if "$cc" "${fl[@]}" "$quickstart" "$here/own_onnx.c" "${cflags[@]}" "${slibs[@]}" -o "$tmp/pc_static" 2> "$tmp/cc.log"; then
  run "pkg-config --static, libpebble.a + own onnx__*" "$tmp/pc_static"
  readelf -d "$tmp/pc_static" | grep -q 'NEEDED.*libpebble' && fail "pc_static needs libpebble.so"
else
  cat "$tmp/cc.log"; fail "pkg-config --static: link failed"
fi

# ---- the CUDA module, found from an installed tree ----
if cuda=$(find "$prefix" -name libpebble_cuda.so | grep .); then
  echo "== the CUDA module ($(basename "$cuda")), found by libpebble.so beside it and by a program in bin/"
  mkdir -p "$prefix/bin"
  if "$cc" "${fl[@]}" "$here/cuda_probe.c" "${cflags[@]}" "${libs[@]}" -Wl,-rpath,"$pcdir" -o "$tmp/cuda_probe" 2> "$tmp/cc.log" &&
     "$cc" "${fl[@]}" "$here/cuda_probe.c" "${cflags[@]}" "${slibs[@]}" -o "$prefix/bin/cuda_probe_static" 2>> "$tmp/cc.log"; then
    for p in "$tmp/cuda_probe" "$prefix/bin/cuda_probe_static"; do
      out=$(env -u PEBBLE_CUDA_MODULE -u LD_LIBRARY_PATH "$p" 2>&1) || true
      echo "$(basename "$p"): $out"
      [[ $out == PBL_OK* || $out == *"no CUDA device"* ]] || fail "$(basename "$p") did not open the installed CUDA module"
    done
  else
    cat "$tmp/cc.log"; fail "cuda_probe.c: link failed"
  fi
else
  echo "(no libpebble_cuda.so installed: a build without CUDA)"
fi

# ---- C++ ----
echo "== C++ ($cxx)"
cxxflags=(-std=c++11 -Wall -Wextra -pedantic -Werror)
if "$cxx" "${fl[@]}" "${cxxflags[@]}" -x c++ "$quickstart" -x none "${cflags[@]}" "${libs[@]}" \
     -Wl,-rpath,"$pcdir" -o "$tmp/cxx_quickstart" 2> "$tmp/cxx.log"; then
  run "quickstart.c as C++" "$tmp/cxx_quickstart"
else
  cat "$tmp/cxx.log"; fail "the quickstart does not compile as C++"
fi
if "$cc" "${fl[@]}" -std=c11 -Wall -Wextra -pedantic -Werror -c "$here/c_shapes.c" "${cflags[@]}" -o "$tmp/c_shapes.o" 2> "$tmp/cxx.log" &&
   "$cxx" "${fl[@]}" "${cxxflags[@]}" "$here/cxx_shapes.cc" "$tmp/c_shapes.o" "${cflags[@]}" "${libs[@]}" \
     -Wl,-rpath,"$pcdir" -o "$tmp/cxx_shapes" 2>> "$tmp/cxx.log"; then
  if out=$("$tmp/cxx_shapes" 2>&1); then echo "$out" | tail -1; else echo "$out"; fail "cxx_shapes"; fi
else
  cat "$tmp/cxx.log"; fail "cxx_shapes.cc does not build"
fi

if [ $fails -ne 0 ]; then
  echo "$fails checks failed"
  exit 1
fi
echo "all install checks passed"
