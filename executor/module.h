/* Opening an optional component's module (the CUDA backend, the MPI and NCCL communicators):
 * the two steps their loaders share. Each loader keeps its own search order and messages. */
#ifndef PBL_EXECUTOR_MODULE_H
#define PBL_EXECUTOR_MODULE_H

#include <stddef.h>

/* dlopen(path, flags); on failure NULL, with dlerror's text (or the path) in err. */
void *pbl__module_open(const char *path, int flags, char *err, size_t errlen);

/* out = the directory of the file holding this code (libpebble.so, or the executable a
 * static libpebble is linked into) + "/" + rest. 0 when that directory is unknown or out is
 * too small. */
int pbl__module_beside_self(char *out, size_t n, const char *rest);

#endif
