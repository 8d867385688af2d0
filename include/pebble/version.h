/*
 * pebble/version.h — which pebble this is.
 *
 *     printf("pebble %s\n", pbl_version());   // "pebble 0.1.0 (commit 61cbc4d)"
 *
 * PBL_VERSION_MAJOR/MINOR/PATCH are the version of the headers compiled against; CMake's
 * project version is read from these three lines (CMakeLists.txt), so this is the one place
 * the version is written. pbl_version() is the version of the library linked, with the commit
 * it was built from: `git describe --always --dirty` of the source tree, taken at each build
 * (a "-dirty" suffix: built with uncommitted changes), or "unknown" when the source is not a
 * git checkout (a release tarball).
 */
#ifndef PEBBLE_VERSION_H
#define PEBBLE_VERSION_H

#define PBL_VERSION_MAJOR 0
#define PBL_VERSION_MINOR 1
#define PBL_VERSION_PATCH 0

#ifdef __cplusplus
extern "C" {
#endif

/* "MAJOR.MINOR.PATCH (commit C)": a static string; thread-safe. */
const char *pbl_version(void);

/* The CPU and the kernels pebble's CPU backend runs on it: "MODEL [EXTENSIONS]; kernels:
 * LEVEL", e.g. "AMD EPYC [sse2 ... avx512f]; kernels: avx512". LEVEL is the highest x86-64
 * vector level the CPU has (baseline = SSE2, avx2 = AVX2 + FMA, avx512 = AVX-512F), or the
 * lower one the environment variable PEBBLE_CPU_LEVEL=baseline|avx2|avx512 asks for (read
 * once per process, at first use). A static string; thread-safe. */
const char *pbl_cpu_describe(void);

/* LEVEL alone: "baseline", "avx2" or "avx512". */
const char *pbl_cpu_kernels(void);

#ifdef __cplusplus
}
#endif
#endif
