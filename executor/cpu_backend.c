/* The CPU backend: host memory, the ops' CPU kernels, OpenBLAS threads. */
#include <stdint.h>
#include <string.h>

#include "executor/backend.h"

#ifdef PEBBLE_HAVE_OPENBLAS_THREADS
#include <cblas.h>
#endif

/* 64-byte alignment for vector loads; the original pointer sits just below the block. */
static void *cpu_alloc(pbl__mem *host, size_t bytes)
{
    size_t total = bytes + 64 + sizeof(void *);
    char *raw = pbl__mem_alloc(host, total);
    if (!raw)
        return NULL;
    uintptr_t p = ((uintptr_t)raw + sizeof(void *) + 63) & ~(uintptr_t)63;
    ((void **)p)[-1] = raw;
    return (void *)p;
}

static void cpu_free(pbl__mem *host, void *p, size_t bytes)
{
    if (p)
        pbl__mem_free(host, ((void **)p)[-1], bytes + 64 + sizeof(void *));
}

static pbl_status cpu_copy(void *dst, const void *src, size_t n)
{
    if (n && dst != src)
        memcpy(dst, src, n);
    return PBL_OK;
}

static pbl_status cpu_zero(void *dst, size_t n)
{
    if (n)
        memset(dst, 0, n);
    return PBL_OK;
}

static int cpu_has_kernel(const pbl__op *op) { return op->cpu != NULL; }

static pbl_status cpu_run(const pbl__op *op, const pbl__kargs *a) { return op->cpu(a); }

static void cpu_set_threads(int32_t threads)
{
#ifdef PEBBLE_HAVE_OPENBLAS_THREADS
    if (threads > 0)
        openblas_set_num_threads(threads);
#else
    (void)threads;
#endif
}

const pbl__backend pbl__backend_cpu = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .zero = cpu_zero,
    .has_kernel = cpu_has_kernel,
    .run = cpu_run,
    .sync = NULL,
    .set_threads = cpu_set_threads,
};
