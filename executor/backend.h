/*
 * A backend (v2): where tensors live and how nodes run there, as an instance with streams.
 *
 * The executor core calls only these members, so a CUDA backend (cudaMalloc'd arena, kernels
 * on cudaStreams, cudaEvents) plugs in beside the CPU one without #ifdefs in the core. One
 * executor opens one instance (`ctx`) and closes it in pbl_exec_destroy.
 *
 * Streams and events. A stream is an in-order queue of work: kernels (`run`), fills, event
 * records and event waits, numbered 0 .. n_streams-1. Work on one stream runs in the order it
 * was enqueued; work on different streams may run concurrently, ordered only by events:
 * `record(s, ev)` marks the point on stream s after everything enqueued on s so far, and
 * `wait(t, ev)` makes later work on stream t wait until the most recent record of ev (as of
 * the call to wait, CUDA's cudaStreamWaitEvent rule) has been reached. Waiting on an event
 * never recorded is a no-op. Events are numbered 0 .. n_events-1 and may be recorded again
 * on later runs.
 *
 * How the executor drives it, per pbl_exec_run:
 *     run_begin(ctx)                                   (optional)
 *     for each step t in schedule order:
 *         wait(ctx, stream[t], ev) for every cross-stream step t waits for
 *         run(ctx, stream[t], op, &kargs[t])
 *         fill(ctx, stream[t], ...) for debug poison of records whose last access is t
 *         record(ctx, stream[t], event_of[t])           if another stream waits for t
 *     status = sync(ctx, &failed)
 *     run_end(ctx)                                     (optional)
 * Every wait refers to an event recorded earlier in that order, so a backend may block the
 * enqueuing thread when a queue is full without deadlock: what is already enqueued can always
 * drain.
 *
 * Threading. Every member is called from the executor's thread only (one thread at a time
 * per instance); a backend may run the enqueued work on its own threads (CPU: one worker
 * per stream; CUDA: the device). Kernels that fail write their message into kargs->err; the
 * executor gives each stream its own error buffer, so failures on two streams never write
 * the same bytes. Device memory passed to upload/download/alloc/free must not be in use by
 * queued work: the executor syncs before those calls.
 *
 * Ownership. The backend does not own kernel arguments: a pbl__kargs passed to `run` (and
 * the arrays it points to) stays valid and unchanged until the next `sync` returns. Memory
 * from `alloc` is the caller's until it passes it to `free` (same ctx, same byte count).
 *
 * Members marked optional may be NULL; all others are required.
 */
#ifndef PBL_BACKEND_H
#define PBL_BACKEND_H

#include "graph/base/mem.h"
#include "graph/ir/op.h"
#include "pebble/exec.h"

typedef struct pbl__backend_config {
    int32_t n_streams;       /* >= 1 */
    int32_t n_events;        /* >= 0 */
    int32_t threads;         /* CPU threads (CPU: threads - 1 pool workers with one stream) */
    int32_t blas_threads;    /* math-library (BLAS) threads for the whole instance; 0: leave
                                the library's setting as it is (the executor has resolved
                                pbl_exec_options.blas_threads = 0 to `threads` already) */
    int32_t split_products;  /* 1: blas_threads was left to its default, so the CPU backend,
                                when it has a pool (one stream, threads > 1), may split large
                                products over the pool and run BLAS single-threaded */
    int32_t flush_denormals; /* kernels treat denormal floats as zero (CPU: FTZ+DAZ) */
} pbl__backend_config;

typedef struct pbl__backend {
    const char *name;
    /* 1: memory from `alloc` is not host-addressable (CUDA), so caller buffers bound to
     * variables cannot be handed to kernels: the executor keeps such variables in its own
     * device storage, uploads the caller's buffer before each run and downloads parameters
     * and state after it. 0: bound buffers are used in place (CPU). */
    int         device_memory;
    /* Optional: whether the backend can be opened here at all (a device exists, it was built
     * in), before any planning; PBL_ERR_UNSUPPORTED with err explaining. */
    pbl_status (*probe)(char *err, size_t errlen);
    /* Creates an instance for `cfg` in *ctx. `host` is the executor's accounted host
     * allocator; the backend may keep the pointer (it outlives the instance) and use it from
     * the executor's thread only. PBL_ERR_NOMEM, PBL_ERR_UNSUPPORTED (e.g. no device) or
     * PBL_ERR_INVALID_ARG, with err (errlen bytes) explaining. */
    pbl_status (*open)(pbl__mem *host, const pbl__backend_config *cfg, void **ctx, char *err, size_t errlen);
    /* Waits for queued work, stops the instance's threads and frees it. Accepts NULL. */
    void       (*close)(void *ctx);
    /* Device memory, aligned to 64 bytes, not initialised. NULL on failure. */
    void      *(*alloc)(void *ctx, size_t bytes);
    void       (*free)(void *ctx, void *p, size_t bytes);          /* p may be NULL */
    /* Synchronous copies of n bytes host -> device and device -> host. */
    pbl_status (*upload)(void *ctx, void *dst, const void *src, size_t n);
    pbl_status (*download)(void *ctx, void *dst, const void *src, size_t n);
    /* Enqueues on `stream` a fill of n bytes of device memory with the byte value (0: zero;
     * 0xFF: the executor's NaN poison). Runs after what `stream` has queued. */
    pbl_status (*fill)(void *ctx, int32_t stream, void *dst, int byte, size_t n);
    /* Whether the backend has a kernel for the op. Pure; ctx may be NULL. */
    int        (*has_kernel)(void *ctx, const pbl__op *op);
    /* Enqueues one node on `stream`; the pointers in `a` are device memory. Returns only
     * failures to enqueue; a kernel's own failure is returned by the next sync. After a
     * kernel fails, the instance skips later kernels and fills of the run (records and waits
     * still happen, so nothing hangs). */
    pbl_status (*run)(void *ctx, int32_t stream, const pbl__op *op, const pbl__kargs *a);
    /* Enqueues on `stream` a record of / a wait for event `event` (see the top). */
    pbl_status (*record)(void *ctx, int32_t stream, int32_t event);
    pbl_status (*wait)(void *ctx, int32_t stream, int32_t event);
    /* Waits until every stream has finished its queue. Returns the first kernel failure since
     * the previous sync (first in time) and sets *failed to that kernel's arguments (its
     * a->err holds the message), or PBL_OK with *failed NULL; a device failure is returned
     * with *failed NULL. Clears the failure, so the next run starts clean. */
    pbl_status (*sync)(void *ctx, const pbl__kargs **failed);
    /* Optional: around one run, on the executor's thread (CPU: flush denormals there). */
    void       (*run_begin)(void *ctx);
    void       (*run_end)(void *ctx);
    /* Optional, all three or none (CUDA Graphs): graph_begin before a run's first enqueue
     * starts capturing instead of running; graph_end after its last enqueue ends the capture
     * and instantiates it; graph_launch enqueues the captured run again with `run` as the
     * run counter: kargs->run is frozen at capture time, so kernels that read it (dropout)
     * read it from device memory that graph_launch sets. The CPU backend has none; the
     * executor captures only when asked (pbl_exec_options.cuda_graph). */
    pbl_status (*graph_begin)(void *ctx);
    pbl_status (*graph_end)(void *ctx);
    pbl_status (*graph_launch)(void *ctx, uint64_t run);
    /* Optional: why the instance's last failing call failed (CUDA: the failing API call, file,
     * line and the runtime's error string), for the executor's message; NULL or "" when it has
     * nothing to say. A kernel's own failure is in its kargs->err instead (see sync). */
    const char *(*errmsg)(void *ctx);
    /* Optional: the device the instance runs on, for people (CUDA: the GPU's name, ordinal,
     * compute capability and memory); a string the instance holds. NULL: the executor names
     * the CPU (pbl_exec_device). */
    const char *(*device)(void *ctx);
} pbl__backend;

extern const pbl__backend pbl__backend_cpu;
/* executor/cuda/loader.c: loads executor/cuda/backend.c's table from libpebble_cuda.so on
 * first use (a build without CUDA has no module: it cannot be opened) */
extern const pbl__backend pbl__backend_cuda;

#endif
