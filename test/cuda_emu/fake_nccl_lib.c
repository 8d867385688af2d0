/*
 * A stand-in NCCL for building the real executor/comm/nccl_module.c against the host CUDA
 * emulator: libpebble_nccl_emu.so is nccl_module.c (with MPI's module compiled in, as
 * libpebble_nccl.so) + this file, and test_data_parallel --nccl-emu (CTest nccl_emu_np1,
 * under mpirun -np 1) runs the CUDA backend's device sums through the module's own enqueue
 * and end-of-run wait, timeout and abort included.
 *
 * NCCL, one rank: an all-reduce of one rank is its data, so ncclAllReduce enqueues on the
 * caller's stream (the emulator's cudaLaunchHostFunc) a host function that only sleeps
 * (pbl_fake_nccl_set: delay_ms) or, with hang set, blocks until the communicator is aborted
 * (a peer that never comes; at most 10 s, so a missing wait fails a test rather than hanging
 * it). The communicator is non-blocking as the module asks: creation and each all-reduce
 * answer ncclInProgress and ncclCommGetAsyncError reports it for a few polls.
 *
 * CUDA: the module's runtime calls are forwarded to the emulator's module (PEBBLE_CUDA_MODULE,
 * which exports them: emu.h), opened here by the same path the CUDA backend's loader opens,
 * so both reach one emulator. Hidden: nothing here is exported but the table's module and
 * pbl_fake_nccl_set. Test code: not installed.
 */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define API __attribute__((visibility("default")))

API void pbl_fake_nccl_set(int delay, int hang_until_abort);

static atomic_int delay_ms = 0, hang = 0;

API void pbl_fake_nccl_set(int delay, int hang_until_abort)
{
    atomic_store(&delay_ms, delay);
    atomic_store(&hang, hang_until_abort);
}

/* ---- the emulator's runtime ------------------------------------------------------------ */

/* Called from the host thread only (the module's calls). */
static void *emu_sym(const char *name)
{
    static void *h;
    if (!h) {
        const char *path = getenv("PEBBLE_CUDA_MODULE");
        h = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL; /* never closed: the backend's too */
    }
    return h ? dlsym(h, name) : NULL;
}

/* f_: the emulator's own `name` (same type), or NULL */
#define EMU(name)                          \
    __typeof__(&name) f_ = NULL;           \
    void *p_ = emu_sym(#name);             \
    memcpy(&f_, &p_, sizeof p_)

cudaError_t cudaSetDevice(int device)
{
    EMU(cudaSetDevice);
    return f_ ? f_(device) : cudaErrorInitializationError;
}

const char *cudaGetErrorString(cudaError_t e)
{
    EMU(cudaGetErrorString);
    return f_ ? f_(e) : "no emulator (PEBBLE_CUDA_MODULE)";
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned int flags)
{
    EMU(cudaEventCreateWithFlags);
    return f_ ? f_(ev, flags) : cudaErrorInitializationError;
}

cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
    EMU(cudaEventDestroy);
    return f_ ? f_(ev) : cudaErrorInitializationError;
}

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s)
{
    EMU(cudaEventRecord);
    return f_ ? f_(ev, s) : cudaErrorInitializationError;
}

cudaError_t cudaEventQuery(cudaEvent_t ev)
{
    EMU(cudaEventQuery);
    return f_ ? f_(ev) : cudaErrorInitializationError;
}

static cudaError_t launch_host_func(cudaStream_t s, cudaHostFn_t fn, void *arg)
{
    EMU(cudaLaunchHostFunc);
    return f_ ? f_(s, fn, arg) : cudaErrorInitializationError;
}

/* ---- NCCL, one rank ---------------------------------------------------------------------- */

struct ncclComm {
    atomic_int aborted;
    atomic_int refs;       /* the handle and each all-reduce still on a stream */
    int        in_progress; /* polls of ncclCommGetAsyncError left answering ncclInProgress */
};

static void release(ncclComm_t c)
{
    if (atomic_fetch_sub(&c->refs, 1) == 1)
        free(c);
}

static void sleep_ms(int ms)
{
    struct timespec t = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&t, NULL);
}

/* On the stream's thread, in the stream's order. */
static void run_all_reduce(void *p)
{
    ncclComm_t c = p;
    if (atomic_load(&hang)) {
        for (int i = 0; i < 10000 && !atomic_load(&c->aborted); i++)
            sleep_ms(1);
    } else {
        sleep_ms(atomic_load(&delay_ms));
    }
    release(c);
}

const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclInProgress: return "operation in progress";
    case ncclInvalidUsage: return "invalid usage (the stand-in NCCL runs one rank)";
    default: return "stand-in NCCL error";
    }
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    memset(id, 0, sizeof *id);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *out, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config)
{
    if (nranks != 1 || rank != 0)
        return ncclInvalidUsage;
    ncclComm_t c = calloc(1, sizeof *c);
    if (!c)
        return ncclSystemError;
    atomic_store(&c->refs, 1);
    *out = c;
    if (config && config->blocking == 0) {
        c->in_progress = 2;
        return ncclInProgress;
    }
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *state)
{
    *state = c->in_progress > 0 ? ncclInProgress : ncclSuccess;
    if (c->in_progress > 0)
        c->in_progress--;
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t c, cudaStream_t stream)
{
    if (send != recv || type != ncclFloat32 || op != ncclSum)
        return ncclInvalidArgument; /* the module sums f32 in place: nothing else is stood in for */
    atomic_fetch_add(&c->refs, 1);
    if (launch_host_func(stream, run_all_reduce, c) != cudaSuccess) {
        release(c);
        return ncclUnhandledCudaError;
    }
    c->in_progress = 1;
    return ncclInProgress;
}

ncclResult_t ncclCommAbort(ncclComm_t c)
{
    atomic_store(&c->aborted, 1); /* the stuck all-reduces return; the last one frees c */
    release(c);
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t c)
{
    release(c);
    return ncclSuccess;
}
