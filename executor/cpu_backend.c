/* The CPU backend: host memory, the ops' CPU kernels, OpenBLAS threads. */
#include <stdint.h>
#include <string.h>

#include "executor/backend.h"

#ifdef PEBBLE_HAVE_OPENBLAS_THREADS
#include <cblas.h>
#endif
#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#define PBL__HAVE_MXCSR 1
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

static pbl_status cpu_fill(void *dst, int byte, size_t n)
{
    if (n)
        memset(dst, byte, n);
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

/* Denormal arithmetic takes a slow microcode path on x86 (tens of times slower): Adam's moments
 * for weights that stop receiving gradient decay into that range and can slow a whole epoch
 * 2-3x. As TensorFlow does on its CPU threads, flush them (FTZ) and read them as zero (DAZ)
 * while a run executes, then restore the caller's MXCSR. */
static void cpu_run_begin(int flush_denormals, uint32_t *saved)
{
#ifdef PBL__HAVE_MXCSR
    *saved = _mm_getcsr();
    if (flush_denormals)
        _mm_setcsr(*saved | 0x8040u); /* FTZ (bit 15) | DAZ (bit 6) */
#else
    (void)flush_denormals;
    *saved = 0;
#endif
}

static void cpu_run_end(uint32_t saved)
{
#ifdef PBL__HAVE_MXCSR
    _mm_setcsr(saved);
#else
    (void)saved;
#endif
}

const pbl__backend pbl__backend_cpu = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .fill = cpu_fill,
    .has_kernel = cpu_has_kernel,
    .run = cpu_run,
    .sync = NULL,
    .set_threads = cpu_set_threads,
    .run_begin = cpu_run_begin,
    .run_end = cpu_run_end,
};
