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

#ifdef __cplusplus
}
#endif
#endif
