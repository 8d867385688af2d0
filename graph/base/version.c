/* pbl_version: the library's version and commit. The text is made at build time by
 * cmake/commit.cmake into a small generated file (pebble_commit.c in the build tree), which
 * is rewritten only when the commit changes, so a new commit recompiles one file. */
#include "graph/base/export.h"
#include "pebble/version.h"

extern const char pbl__version_text[];

PBL__API const char *pbl_version(void)
{
    return pbl__version_text;
}
