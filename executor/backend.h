/*
 * A backend: where tensors live and how a node runs there. The executor core calls only
 * these members, so a CUDA backend (cudaMalloc'd arena, kernels on streams) plugs in beside
 * the CPU one without #ifdefs in the core. Members marked optional may be NULL.
 */
#ifndef PBL_BACKEND_H
#define PBL_BACKEND_H

#include "graph/mem.h"
#include "ops/op.h"
#include "pebble/exec.h"

typedef struct pbl__backend {
    const char *name;
    /* Device memory, aligned to 64 bytes. NULL on failure. */
    void      *(*alloc)(pbl__mem *host, size_t bytes);
    void       (*free)(pbl__mem *host, void *p, size_t bytes);
    /* Copies n bytes host -> device and device -> host. */
    pbl_status (*upload)(void *dst, const void *src, size_t n);
    pbl_status (*download)(void *dst, const void *src, size_t n);
    /* Fills n bytes of device memory with the byte value (0: zeroing; 0xFF: NaN poison). */
    pbl_status (*fill)(void *dst, int byte, size_t n);
    /* Whether the backend has a kernel for the op. */
    int        (*has_kernel)(const pbl__op *op);
    /* Runs one node; the pointers in `a` are device memory. On failure a->err explains. */
    pbl_status (*run)(const pbl__op *op, const pbl__kargs *a);
    /* Optional: waits until every queued node has finished (synchronous backends: NULL). */
    pbl_status (*sync)(void);
    /* Optional: sets the threads the backend's math library may use (0: leave as is). */
    void       (*set_threads)(int32_t threads);
    /* Optional: around one run on the calling thread — e.g. flush denormals to zero — saving
     * the thread's previous state in *saved and restoring it at the end. */
    void       (*run_begin)(int flush_denormals, uint32_t *saved);
    void       (*run_end)(uint32_t saved);
} pbl__backend;

extern const pbl__backend pbl__backend_cpu;

#endif
