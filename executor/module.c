#define _GNU_SOURCE /* dladdr */
#include "executor/module.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

void *pbl__module_open(const char *path, int flags, char *err, size_t errlen)
{
    void *h = dlopen(path, flags);
    if (!h && err && errlen) {
        const char *e = dlerror();
        snprintf(err, errlen, "%s", e ? e : path);
    }
    return h;
}

int pbl__module_beside_self(char *out, size_t n, const char *rest)
{
    Dl_info info;
    if (!dladdr((void *)pbl__module_beside_self, &info) || !info.dli_fname)
        return 0;
    const char *slash = strrchr(info.dli_fname, '/');
    if (!slash)
        return 0;
    int len = snprintf(out, n, "%.*s/%s", (int)(slash - info.dli_fname), info.dli_fname, rest);
    return len > 0 && (size_t)len < n;
}
