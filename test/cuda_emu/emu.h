/*
 * pebble's host CUDA emulator: what its pieces share (the runtime API: runtime.cc, memory.cc,
 * stream.cc, event.cc, capture.cc, graph.cc, sharing runtime_internal.h; block.cc: a block's
 * threads as fibers; blas.cc: cuBLAS and cuBLASLt).
 *
 * What it emulates, and how (the point: a backend or kernel bug shows up here):
 * - Device memory is host memory from posix_memalign, registered by cudaMalloc: under
 *   AddressSanitizer a kernel reading past its buffer is reported (a stand-in for
 *   compute-sanitizer's memcheck). New allocations up to 16 MiB are filled with 0xff bytes
 *   (a float NaN), so reading memory nobody wrote shows in the results. cudaFree of a pointer
 *   cudaMalloc did not return is cudaErrorInvalidValue. Freed blocks of 1 MiB and more are
 *   kept for reuse by the next allocation of the same size (see memory.cc: the sanitizers'
 *   allocators made fresh 32 MiB workspaces per executor the bulk of the run). Every pointer argument of a kernel
 *   launch must be NULL or point into (or one past) a live allocation: anything else (a host
 *   buffer) is the sticky cudaErrorIllegalAddress when the kernel would run, as on a GPU
 *   without unified addressing.
 * - Every stream is its own worker thread running its queue in order, asynchronously to the
 *   host. cudaEventRecord/cudaStreamWaitEvent are the only edges between non-blocking streams,
 *   so a missing edge is a real data race (ThreadSanitizer reports it: the emulator's own
 *   locks are hidden from TSan, only the CUDA-level edges are shown to it). The legacy default
 *   stream (0) waits for blocking streams' earlier work and they for its work, as documented.
 * - Stream capture: work enqueued on a capturing stream is recorded as graph nodes, not run;
 *   an event recorded in the capture and waited on by another stream pulls that stream into
 *   the capture; cudaStreamEndCapture requires every such stream joined back into the origin
 *   (else cudaErrorStreamCaptureUnjoined). A graph launch replays the nodes on one thread per
 *   captured stream, each node after its captured dependencies only. Synchronising or querying
 *   a capturing stream, or an unsafe call (cudaMalloc, cudaFree, cudaMemcpy, cudaMemset,
 *   cudaDeviceSynchronize) from the capturing thread (or any thread, in global mode),
 *   invalidates the capture and returns cudaErrorStreamCaptureUnsupported.
 * - Launch configuration: more than 1024 threads per block, a zero or oversized dimension is
 *   cudaErrorInvalidConfiguration from cudaGetLastError (not sticky); an unknown stream handle
 *   is cudaErrorInvalidResourceHandle. Sticky errors (illegal address, a __syncthreads() that
 *   not every thread of the block reached, or that threads met at different statements) are
 *   returned by every later call.
 * - A block's threads are fibers (ucontext) on the stream's thread: __syncthreads is a real
 *   barrier. One fiber runs threads one after another until a thread waits at the barrier, so
 *   kernels that never call it cost one fiber switch per block. Fiber switches are annotated
 *   for ASan and TSan. Every other launch runs its blocks, and the threads of each block, in
 *   reverse order, so a kernel that depends on the order of blocks or threads (a race on a
 *   GPU) does not give the same result every launch.
 * - cudaGetDeviceCount is 1; the device's name says it is this emulator.
 */
#ifndef PBL_EMU_EMU_H
#define PBL_EMU_EMU_H

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>

/* What libpebble_cuda_emu.so exports besides the backend table (module.map): the runtime
 * calls of the stand-in NCCL modules (test/cuda_emu/fake_nccl.c, fake_nccl_lib.c, which build
 * executor/comm/nccl_module.c against the emulator) and cudaLaunchHostFunc. Protected: the
 * module's own calls still bind to its own definitions, even in a process where a real
 * libcudart was loaded globally (libpebble_nccl.so is opened RTLD_GLOBAL). */
#define PBL_EMU_EXPORT __attribute__((visibility("protected")))
extern "C" {
PBL_EMU_EXPORT cudaError_t cudaSetDevice(int device);
PBL_EMU_EXPORT const char *cudaGetErrorString(cudaError_t error);
PBL_EMU_EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags);
PBL_EMU_EXPORT cudaError_t cudaEventDestroy(cudaEvent_t event);
PBL_EMU_EXPORT cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
PBL_EMU_EXPORT cudaError_t cudaEventQuery(cudaEvent_t event);
PBL_EMU_EXPORT cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData);
}

namespace pbl_emu {

/* Enqueues `fn` on `stream` (0: the legacy stream), or records it as a node while the stream
 * captures. `what` names the work in messages. Takes the runtime's lock. */
cudaError_t enqueue(cudaStream_t stream, std::function<void()> fn, const char *what);

/* Whether [p, p + n) lies in one live device allocation (n 0: p may be one past the end). */
bool is_device(const void *p, size_t n);

/* Sets the sticky error (first one wins) and says why on stderr. */
void set_sticky(cudaError_t e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
cudaError_t sticky();

/* Records `e` as this host thread's last error and returns it. */
cudaError_t fail(cudaError_t e);

/* Runs a grid of blocks of `fn` on the calling thread (block.cc). */
void run_grid(const char *name, dim3 grid, dim3 block, const std::function<void()> &fn);

} // namespace pbl_emu

/* ThreadSanitizer: the emulator's own mutexes and condition variables would order every
 * stream after every other (they all meet the host thread's locks), hiding the races the
 * emulator exists to show; TSan is told to ignore their synchronisation, and the CUDA-level
 * edges (enqueue -> run, run -> event wait / synchronize) are atomics it does see. */
#if defined(__SANITIZE_THREAD__)
#define PBL_EMU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PBL_EMU_TSAN 1
#endif
#endif
#ifdef PBL_EMU_TSAN
extern "C" void AnnotateIgnoreSyncBegin(const char *file, int line);
extern "C" void AnnotateIgnoreSyncEnd(const char *file, int line);
extern "C" void AnnotateIgnoreReadsBegin(const char *file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char *file, int line);
extern "C" void AnnotateIgnoreWritesBegin(const char *file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char *file, int line);
/* around the emulator's queue bookkeeping only: its lock's synchronisation and its accesses */
#define PBL_EMU_HIDE_BEGIN()                              \
    (AnnotateIgnoreSyncBegin(__FILE__, __LINE__), AnnotateIgnoreReadsBegin(__FILE__, __LINE__), \
     AnnotateIgnoreWritesBegin(__FILE__, __LINE__))
#define PBL_EMU_HIDE_END()                                \
    (AnnotateIgnoreWritesEnd(__FILE__, __LINE__), AnnotateIgnoreReadsEnd(__FILE__, __LINE__), \
     AnnotateIgnoreSyncEnd(__FILE__, __LINE__))
#else
#define PBL_EMU_HIDE_BEGIN() ((void)0)
#define PBL_EMU_HIDE_END()   ((void)0)
#endif

#endif
