/*
 * pebble's host CUDA emulator: the runtime API's shared state (the runtime lock and the
 * registries of streams, events, graphs and captures), its errors (sticky and last error,
 * their names and strings) and the device queries. The other runtime API calls live in one
 * file per idea (runtime_internal.h lists them). What is emulated and why: emu.h.
 */
#include "runtime_internal.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

#include <unistd.h>

namespace pbl_emu {

std::mutex                              api;
std::set<stream_rt *>                   streams;
std::vector<std::unique_ptr<stream_rt>> graveyard;
std::set<event_rt *>                    events;
std::set<graph_rt *>                    graphs;
std::set<exec_rt *>                     execs;
std::set<capture *>                     captures;
stream_rt                              *legacy_stream = nullptr;
std::atomic<int>                        sticky_err{ 0 };

namespace {

thread_local cudaError_t last_err = cudaSuccess;

const char *err_string(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidPitchValue: return "invalid pitch argument";
    case cudaErrorInvalidSymbol: return "invalid device symbol";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInvalidDeviceFunction: return "invalid device function";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorAssert: return "device-side assert triggered";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorNotSupported: return "operation not supported";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureMerge: return "operation would result in a merge of separate capture sequences";
    case cudaErrorStreamCaptureUnmatched: return "capture was not ended in the same stream as it began";
    case cudaErrorStreamCaptureUnjoined: return "capturing stream has unjoined work";
    case cudaErrorStreamCaptureIsolation: return "dependency created on uncaptured work in another stream";
    case cudaErrorStreamCaptureImplicit: return "operation would make the legacy stream depend on a capturing blocking stream";
    case cudaErrorCapturedEvent: return "operation not permitted on an event last recorded in a capturing stream";
    case cudaErrorStreamCaptureWrongThread: return "attempt to terminate a thread-local capture sequence from another thread";
    default: return "unknown error";
    }
}

const char *err_name(cudaError_t e)
{
    switch (e) {
#define N(x) case x: return #x;
    N(cudaSuccess) N(cudaErrorInvalidValue) N(cudaErrorMemoryAllocation) N(cudaErrorInitializationError)
    N(cudaErrorInvalidConfiguration) N(cudaErrorInvalidPitchValue) N(cudaErrorInvalidSymbol)
    N(cudaErrorInvalidDevicePointer) N(cudaErrorInvalidMemcpyDirection) N(cudaErrorInvalidDeviceFunction)
    N(cudaErrorNoDevice) N(cudaErrorInvalidDevice) N(cudaErrorInvalidResourceHandle) N(cudaErrorIllegalState)
    N(cudaErrorNotReady) N(cudaErrorIllegalAddress) N(cudaErrorLaunchOutOfResources) N(cudaErrorAssert)
    N(cudaErrorLaunchFailure) N(cudaErrorNotSupported) N(cudaErrorStreamCaptureUnsupported)
    N(cudaErrorStreamCaptureInvalidated) N(cudaErrorStreamCaptureMerge) N(cudaErrorStreamCaptureUnmatched)
    N(cudaErrorStreamCaptureUnjoined) N(cudaErrorStreamCaptureIsolation) N(cudaErrorStreamCaptureImplicit)
    N(cudaErrorCapturedEvent) N(cudaErrorStreamCaptureWrongThread)
#undef N
    default: return "cudaErrorUnknown";
    }
}

} // namespace

cudaError_t fail(cudaError_t e)
{
    if (e != cudaSuccess)
        last_err = e;
    return e;
}

cudaError_t sticky() { return (cudaError_t)sticky_err.load(std::memory_order_acquire); }

void set_sticky(cudaError_t e, const char *fmt, ...)
{
    int expect = 0;
    if (!sticky_err.compare_exchange_strong(expect, (int)e, std::memory_order_acq_rel))
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "pebble CUDA emulator: %s (sticky): ", err_name(e));
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

size_t total_memory()
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && size > 0 ? (size_t)pages * (size_t)size : (size_t)8 << 30;
}

} // namespace pbl_emu

using namespace pbl_emu;

#define DEVICE_NAME "pebble host CUDA emulator (no GPU)"

/* ---- the C API ---------------------------------------------------------------------------- */

extern "C" {

const char *cudaGetErrorString(cudaError_t e) { return err_string(e); }
const char *cudaGetErrorName(cudaError_t e) { return err_name(e); }

cudaError_t cudaGetLastError(void)
{
    cudaError_t s = sticky();
    if (s != cudaSuccess)
        return s;
    cudaError_t e = last_err;
    last_err = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void)
{
    cudaError_t s = sticky();
    return s != cudaSuccess ? s : last_err;
}

cudaError_t cudaGetDeviceCount(int *count)
{
    if (!count)
        return fail(cudaErrorInvalidValue);
    static std::once_flag said;
    std::call_once(said, [] {
        fprintf(stderr, "pebble CUDA emulator: device 0 is \"%s\": kernels, cuBLAS and cuBLASLt run on the CPU\n",
                DEVICE_NAME);
    });
    *count = 1;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
    if (!device)
        return fail(cudaErrorInvalidValue);
    *device = 0;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice); }

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device)
{
    if (!p)
        return fail(cudaErrorInvalidValue);
    if (device != 0)
        return fail(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", DEVICE_NAME);
    p->totalGlobalMem = total_memory();
    p->sharedMemPerBlock = 49152;
    p->memPitch = 2147483647;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = 1024;
    p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647;
    p->maxGridSize[1] = 65535;
    p->maxGridSize[2] = 65535;
    p->multiProcessorCount = 1;
    p->major = 9;
    p->minor = 0;
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    STICKY_CHECK();
    if (!free_bytes || !total_bytes)
        return fail(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> lk(api);
    *total_bytes = total_memory();
    *free_bytes = alloc_bytes < *total_bytes ? *total_bytes - alloc_bytes : 0;
    return cudaSuccess;
}

} // extern "C"
