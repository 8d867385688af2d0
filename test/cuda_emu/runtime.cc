/*
 * pebble's host CUDA emulator: the runtime API (memory, streams, events, stream capture and
 * graphs, errors, device queries). What is emulated and why: emu.h.
 *
 * Locks. One runtime lock (`api`) guards the host-side state (allocations, streams, events,
 * captures); only host threads take it. Each stream's queue has its own lock, shared by the
 * host (push) and the stream's worker (pop); TSan is told to ignore that lock (emu.h), and
 * sees instead the CUDA-level edges as atomics: `posted` (release by the host after building
 * an item, acquire by the worker before running it) and `done` (release by the worker after
 * each item, acquire by whoever waits for it: a stream waiting on an event, a synchronize).
 */
#include "emu.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define PBL_EMU_RT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PBL_EMU_RT_ASAN 1
#endif
#endif
#ifdef PBL_EMU_RT_ASAN
#include <sanitizer/asan_interface.h>
#define PBL_EMU_POISON(p, n)   ASAN_POISON_MEMORY_REGION((p), (n))
#define PBL_EMU_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define PBL_EMU_POISON(p, n)   ((void)(p), (void)(n))
#define PBL_EMU_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace pbl_emu {
namespace {

struct stream_rt;
struct capture;

/* one queue item: work, or a wait for another stream's progress */
struct item {
    std::function<void()> fn;
    stream_rt            *wait_for = nullptr;
    uint64_t              wait_seq = 0;
};

/* a node of a graph under capture (or captured): its work and what it waits for */
struct gnode {
    std::function<void()> fn;
    std::vector<int>      deps;
    int                   lane; /* the captured stream it came from */
};

struct graph_rt {
    std::vector<gnode> nodes;
    int                n_lanes = 0;
};

struct stream_rt {
    unsigned                flags = 0;
    bool                    legacy = false;
    std::mutex              m;
    std::condition_variable cv;
    std::deque<item>        q;
    bool                    stop = false;
    uint64_t                enq = 0;  /* items pushed (host side, under api) */
    std::atomic<uint64_t>   posted{ 0 };
    std::atomic<uint64_t>   done{ 0 };
    std::thread             worker;
    /* capture */
    capture                *cap = nullptr;
    std::vector<int>        cap_deps;
    int                     lane = 0;
};

struct capture {
    graph_rt                 *g = nullptr;
    stream_rt                *origin = nullptr;
    cudaStreamCaptureMode     mode = cudaStreamCaptureModeGlobal;
    std::thread::id           thread;
    bool                      invalid = false;
    std::vector<stream_rt *>  streams;
};

struct event_rt {
    unsigned         flags = 0;
    stream_rt       *s = nullptr; /* last record outside a capture: (s, seq) */
    uint64_t         seq = 0;
    capture         *cap = nullptr; /* last record inside this capture, with these deps */
    std::vector<int> cap_deps;
};

struct exec_rt; /* an instantiated graph */

std::mutex                         api;
std::map<uintptr_t, size_t>        allocs; /* base -> bytes */
size_t                             alloc_bytes = 0;
std::set<stream_rt *>              streams;
std::vector<std::unique_ptr<stream_rt>> graveyard; /* destroyed streams (events may name them) */
std::set<event_rt *>               events;
std::set<graph_rt *>               graphs;
std::set<exec_rt *>                execs;
std::set<capture *>                captures;
stream_rt                         *legacy_stream = nullptr;
std::atomic<int>                   sticky_err{ 0 };
/* Freed blocks of 1 MiB and more, kept for the next cudaMalloc of the same size: every
 * executor takes a 32 MiB cuBLAS workspace per stream, and test_cuda creates hundreds of
 * executors; fresh 32 MiB blocks each time cost the sanitizers' allocators most of the run
 * (shadow clearing and page faults: 16 GB allocated in test_cuda, a third of its TSan time).
 * Cached blocks up to 16 MiB are poisoned for ASan while they wait, so a use after cudaFree
 * is still reported; bigger ones (the workspaces) are not (their poisoning would cost as much
 * as the allocation it saves). */
constexpr size_t                   CACHE_MIN = (size_t)1 << 20, CACHE_MAX = (size_t)1 << 30;
constexpr size_t                   POISON_MAX = (size_t)16 << 20;
struct block_cache_t : std::multimap<size_t, void *> {
    ~block_cache_t() /* at exit: the blocks go back to the allocator (leak checkers run after) */
    {
        for (auto &b : *this) {
            PBL_EMU_UNPOISON(b.second, b.first);
            free(b.second);
        }
    }
};
block_cache_t                      block_cache;
size_t                             cache_bytes = 0;
thread_local cudaError_t           last_err = cudaSuccess;

/* ---- stream workers ------------------------------------------------------------------- */

void wait_done(stream_rt *s, uint64_t seq)
{
    while (s->done.load(std::memory_order_acquire) < seq) {
        PBL_EMU_HIDE_BEGIN();
        {
            std::unique_lock<std::mutex> lk(s->m);
            while (s->done.load(std::memory_order_relaxed) < seq)
                s->cv.wait(lk);
        }
        PBL_EMU_HIDE_END();
    }
}

void worker_main(stream_rt *s)
{
    for (;;) {
        item it;
        bool have = false;
        PBL_EMU_HIDE_BEGIN();
        {
            std::unique_lock<std::mutex> lk(s->m);
            while (s->q.empty() && !s->stop)
                s->cv.wait(lk);
            if (!s->q.empty()) {
                it = std::move(s->q.front());
                s->q.pop_front();
                have = true;
            }
        }
        PBL_EMU_HIDE_END();
        if (!have)
            return;
        (void)s->posted.load(std::memory_order_acquire); /* the host built `it` before posting */
        if (it.wait_for)
            wait_done(it.wait_for, it.wait_seq);
        else if (sticky_err.load(std::memory_order_relaxed) == 0)
            it.fn(); /* after a sticky error the context is dead: nothing runs */
        it = item();
        s->done.fetch_add(1, std::memory_order_release);
        PBL_EMU_HIDE_BEGIN();
        {
            std::lock_guard<std::mutex> lk(s->m);
            s->cv.notify_all();
        }
        PBL_EMU_HIDE_END();
    }
}

stream_rt *new_stream(unsigned flags, bool legacy)
{
    stream_rt *s = new stream_rt;
    s->flags = flags;
    s->legacy = legacy;
    s->worker = std::thread(worker_main, s);
    return s;
}

/* Pushes an item (under api). */
void push(stream_rt *s, item it)
{
    s->enq++;
    s->posted.fetch_add(1, std::memory_order_release);
    PBL_EMU_HIDE_BEGIN();
    {
        std::lock_guard<std::mutex> lk(s->m);
        s->q.push_back(std::move(it));
        s->cv.notify_all();
    }
    PBL_EMU_HIDE_END();
}

/* s waits until `on` has finished its first seq items: always an item (even when `on` is
 * already there), so the acquire that orders the work happens on s's thread. */
void push_wait(stream_rt *s, stream_rt *on, uint64_t seq)
{
    if (on == s || seq == 0)
        return;
    item it;
    it.wait_for = on;
    it.wait_seq = seq;
    push(s, std::move(it));
}

stream_rt *legacy()
{
    if (!legacy_stream)
        legacy_stream = new_stream(cudaStreamDefault, true);
    return legacy_stream;
}

/* The stream a handle names (under api), or NULL when it is not a live stream. */
stream_rt *resolve(cudaStream_t h)
{
    if (h == nullptr || h == cudaStreamLegacy || h == cudaStreamPerThread)
        return legacy();
    stream_rt *s = reinterpret_cast<stream_rt *>(h);
    return streams.count(s) ? s : nullptr;
}

/* Implicit synchronisation with the legacy stream (cudaStreamDefault streams only). */
void legacy_edges(stream_rt *s)
{
    if (s->legacy) {
        for (stream_rt *o : streams)
            if (!(o->flags & cudaStreamNonBlocking) && o->enq)
                push_wait(s, o, o->enq);
    } else if (!(s->flags & cudaStreamNonBlocking) && legacy_stream && legacy_stream->enq) {
        push_wait(s, legacy_stream, legacy_stream->enq);
    }
}

/* ---- capture ---------------------------------------------------------------------------- */

void invalidate(capture *c) { c->invalid = true; }

/* An unsafe call from this thread during a capture in global or thread-local mode
 * invalidates it; true when one did (the call then fails). */
bool unsafe_call()
{
    bool hit = false;
    for (capture *c : captures) {
        if (c->mode == cudaStreamCaptureModeRelaxed)
            continue;
        if (c->mode == cudaStreamCaptureModeGlobal || c->thread == std::this_thread::get_id()) {
            invalidate(c);
            hit = true;
        }
    }
    return hit;
}

void join_capture(stream_rt *s, capture *c, const std::vector<int> &deps)
{
    s->cap = c;
    s->cap_deps = deps;
    s->lane = (int)c->streams.size();
    c->streams.push_back(s);
    c->g->n_lanes = (int)c->streams.size();
}

void end_capture(capture *c)
{
    for (stream_rt *s : c->streams) {
        s->cap = nullptr;
        s->cap_deps.clear();
    }
    for (event_rt *e : events)
        if (e->cap == c) {
            e->cap = nullptr; /* a later wait on it is a no-op, as for an unrecorded event */
            e->cap_deps.clear();
        }
    captures.erase(c);
    delete c;
}

/* ---- graphs --------------------------------------------------------------------------------- */

/* An instantiated graph: one thread per captured stream (lane) replays that stream's nodes in
 * capture order, each after its dependencies (possibly on other lanes) are done. */
struct exec_rt {
    graph_rt                               g;
    std::vector<std::vector<int>>          lane_nodes;
    std::unique_ptr<std::atomic<uint64_t>[]> node_gen; /* launch generation each node finished */
    std::vector<std::thread>               lanes;
    std::mutex                             m;
    std::condition_variable                cv;
    uint64_t                               go = 0;      /* generation to run (under m) */
    std::atomic<uint64_t>                  started{ 0 }; /* generation posted (release) */
    std::unique_ptr<std::atomic<uint64_t>[]> lane_gen;  /* generation each lane finished */
    bool                                   stop = false;
    std::atomic<int>                       in_flight{ 0 };
};

void exec_wait(exec_rt *x, const std::function<bool()> &ready)
{
    if (ready())
        return;
    PBL_EMU_HIDE_BEGIN();
    {
        std::unique_lock<std::mutex> lk(x->m);
        while (!ready())
            x->cv.wait(lk);
    }
    PBL_EMU_HIDE_END();
}

void exec_notify(exec_rt *x)
{
    PBL_EMU_HIDE_BEGIN();
    {
        std::lock_guard<std::mutex> lk(x->m);
        x->cv.notify_all();
    }
    PBL_EMU_HIDE_END();
}

void lane_main(exec_rt *x, int lane)
{
    uint64_t gen = 0;
    for (;;) {
        bool stop = false;
        PBL_EMU_HIDE_BEGIN();
        {
            std::unique_lock<std::mutex> lk(x->m);
            while (x->go == gen && !x->stop)
                x->cv.wait(lk);
            stop = x->go == gen;
            gen = x->go;
        }
        PBL_EMU_HIDE_END();
        if (stop)
            return;
        (void)x->started.load(std::memory_order_acquire);
        for (int id : x->lane_nodes[(size_t)lane]) {
            for (int d : x->g.nodes[(size_t)id].deps) {
                std::atomic<uint64_t> *dg = &x->node_gen[(size_t)d];
                exec_wait(x, [dg, gen] { return dg->load(std::memory_order_acquire) >= gen; });
                (void)dg->load(std::memory_order_acquire);
            }
            if (sticky_err.load(std::memory_order_relaxed) == 0)
                x->g.nodes[(size_t)id].fn();
            x->node_gen[(size_t)id].store(gen, std::memory_order_release);
            exec_notify(x);
        }
        x->lane_gen[(size_t)lane].store(gen, std::memory_order_release);
        exec_notify(x);
    }
}

/* One replay, on the launching stream's thread: start every lane, wait for all. */
void exec_run(exec_rt *x)
{
    uint64_t gen;
    x->started.fetch_add(1, std::memory_order_release);
    PBL_EMU_HIDE_BEGIN();
    {
        std::lock_guard<std::mutex> lk(x->m);
        gen = ++x->go;
        x->cv.notify_all();
    }
    PBL_EMU_HIDE_END();
    for (size_t l = 0; l < x->lanes.size(); l++) {
        std::atomic<uint64_t> *lg = &x->lane_gen[l];
        exec_wait(x, [lg, gen] { return lg->load(std::memory_order_acquire) >= gen; });
        (void)lg->load(std::memory_order_acquire);
    }
    x->in_flight.fetch_sub(1, std::memory_order_release);
}

void sync_all()
{
    for (stream_rt *s : streams)
        wait_done(s, s->enq);
    if (legacy_stream)
        wait_done(legacy_stream, legacy_stream->enq);
}

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

/* The common prologue of an API call: a sticky error answers everything. */
#define STICKY_CHECK()                              \
    do {                                            \
        cudaError_t st_ = sticky();                 \
        if (st_ != cudaSuccess)                     \
            return fail(st_);                       \
    } while (0)

bool is_device_locked(const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p;
    auto it = allocs.upper_bound(a);
    if (it == allocs.begin())
        return false;
    --it;
    return a >= it->first && a - it->first <= it->second && n <= it->second - (a - it->first);
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

bool is_device(const void *p, size_t n)
{
    std::lock_guard<std::mutex> lk(api);
    return is_device_locked(p, n);
}

/* Under api. */
static cudaError_t enqueue_locked(stream_rt *s, std::function<void()> fn)
{
    if (s->cap) {
        capture *c = s->cap;
        if (c->invalid)
            return cudaErrorStreamCaptureInvalidated;
        gnode n;
        n.fn = std::move(fn);
        n.deps = s->cap_deps;
        n.lane = s->lane;
        c->g->nodes.push_back(std::move(n));
        s->cap_deps.assign(1, (int)c->g->nodes.size() - 1);
        return cudaSuccess;
    }
    if (s->legacy) {
        for (capture *c : captures)
            for (stream_rt *o : c->streams)
                if (!(o->flags & cudaStreamNonBlocking)) {
                    invalidate(c); /* the legacy stream would wait for a capturing blocking stream */
                    return cudaErrorStreamCaptureImplicit;
                }
    }
    legacy_edges(s);
    item it;
    it.fn = std::move(fn);
    push(s, std::move(it));
    return cudaSuccess;
}

cudaError_t enqueue(cudaStream_t h, std::function<void()> fn, const char *what)
{
    STICKY_CHECK();
    std::lock_guard<std::mutex> lk(api);
    stream_rt *s = resolve(h);
    if (!s)
        return fail(cudaErrorInvalidResourceHandle);
    return fail(enqueue_locked(s, std::move(fn)));
}

void launch(const char *name, dim3 grid, dim3 block, size_t shmem, cudaStream_t stream, std::function<void()> fn,
            const void *const *ptrs, int n_ptrs)
{
    if (sticky() != cudaSuccess) {
        fail(sticky());
        return;
    }
    unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    if (threads == 0 || threads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64 || grid.x == 0 ||
        grid.y == 0 || grid.z == 0 || grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535 || shmem > 49152) {
        fail(cudaErrorInvalidConfiguration);
        return;
    }
    int bad = -1;
    {
        std::lock_guard<std::mutex> lk(api);
        for (int i = 0; i < n_ptrs && bad < 0; i++)
            if (ptrs[i] && !is_device_locked(ptrs[i], 0))
                bad = i;
    }
    std::string kname = name;
    std::function<void()> work;
    if (bad >= 0) {
        const void *p = ptrs[bad];
        work = [kname, p, bad] {
            set_sticky(cudaErrorIllegalAddress, "kernel %s: pointer argument %d (%p) is not device memory",
                       kname.c_str(), bad, p);
        };
    } else {
        work = [kname, grid, block, fn] { run_grid(kname.c_str(), grid, block, fn); };
    }
    cudaError_t e = enqueue(stream, std::move(work), name);
    if (e != cudaSuccess)
        fail(e);
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

static size_t total_memory()
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && size > 0 ? (size_t)pages * (size_t)size : (size_t)8 << 30;
}

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

cudaError_t cudaDeviceSynchronize(void)
{
    STICKY_CHECK();
    {
        std::lock_guard<std::mutex> lk(api);
        if (unsafe_call())
            return fail(cudaErrorStreamCaptureUnsupported);
        sync_all();
    }
    STICKY_CHECK();
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t size)
{
    STICKY_CHECK();
    if (!p)
        return fail(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> lk(api);
    if (unsafe_call())
        return fail(cudaErrorStreamCaptureUnsupported);
    *p = nullptr;
    if (size == 0)
        return cudaSuccess;
    void *m = nullptr;
    auto cached = size >= CACHE_MIN ? block_cache.find(size) : block_cache.end();
    if (cached != block_cache.end()) {
        m = cached->second;
        block_cache.erase(cached);
        cache_bytes -= size;
        PBL_EMU_UNPOISON(m, size);
    } else if (posix_memalign(&m, 256, size) != 0 || !m) {
        return fail(cudaErrorMemoryAllocation);
    }
    if (size <= ((size_t)16 << 20))
        memset(m, 0xff, size); /* float NaN: a read of memory nobody wrote shows */
    allocs[(uintptr_t)m] = size;
    alloc_bytes += size;
    *p = m;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    STICKY_CHECK();
    if (!p)
        return cudaSuccess;
    std::lock_guard<std::mutex> lk(api);
    if (unsafe_call())
        return fail(cudaErrorStreamCaptureUnsupported);
    auto it = allocs.find((uintptr_t)p);
    if (it == allocs.end())
        return fail(cudaErrorInvalidValue);
    sync_all(); /* cudaFree synchronises the device */
    size_t size = it->second;
    alloc_bytes -= size;
    allocs.erase(it);
    if (size >= CACHE_MIN && cache_bytes + size <= CACHE_MAX) {
        if (size <= POISON_MAX)
            PBL_EMU_POISON(p, size); /* ASan still reports a use after this free */
        block_cache.emplace(size, p);
        cache_bytes += size;
    } else {
        free(p);
    }
    return cudaSuccess;
}

/* Checks a copy's pointers against its kind (under api). */
static cudaError_t check_copy(void *dst, const void *src, size_t dn, size_t sn, cudaMemcpyKind kind)
{
    bool dd = is_device_locked(dst, dn), sd = is_device_locked(src, sn);
    switch (kind) {
    case cudaMemcpyHostToDevice: return dd ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDeviceToHost: return sd ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDeviceToDevice: return dd && sd ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyHostToHost:
    case cudaMemcpyDefault: return cudaSuccess;
    default: return cudaErrorInvalidMemcpyDirection;
    }
}

/* A copy from pageable host memory to the device is staged before the call returns (the
 * caller may reuse its buffer at once): the source is snapshotted here. Outside captures. */
static cudaError_t memcpy_async_locked(stream_rt *s, void *dst, const void *src, size_t n, cudaMemcpyKind kind)
{
    cudaError_t e = check_copy(dst, src, n, n, kind);
    if (e != cudaSuccess || n == 0)
        return e;
    bool staged = !is_device_locked(src, n) && !s->cap;
    if (staged) {
        std::shared_ptr<std::vector<unsigned char>> copy =
            std::make_shared<std::vector<unsigned char>>((const unsigned char *)src, (const unsigned char *)src + n);
        return enqueue_locked(s, [dst, copy, n] { memcpy(dst, copy->data(), n); });
    }
    return enqueue_locked(s, [dst, src, n] { memmove(dst, src, n); });
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind, cudaStream_t h)
{
    STICKY_CHECK();
    std::lock_guard<std::mutex> lk(api);
    stream_rt *s = resolve(h);
    if (!s)
        return fail(cudaErrorInvalidResourceHandle);
    return fail(memcpy_async_locked(s, dst, src, n, kind));
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind)
{
    STICKY_CHECK();
    stream_rt *s;
    {
        std::lock_guard<std::mutex> lk(api);
        if (unsafe_call())
            return fail(cudaErrorStreamCaptureUnsupported);
        s = legacy();
        cudaError_t e = memcpy_async_locked(s, dst, src, n, kind);
        if (e != cudaSuccess)
            return fail(e);
        wait_done(s, s->enq);
    }
    STICKY_CHECK();
    return cudaSuccess;
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                              size_t height, cudaMemcpyKind kind, cudaStream_t h)
{
    STICKY_CHECK();
    /* "returns an error if dpitch or spitch is greater than the maximum allowed" (memPitch) */
    if (width > dpitch || width > spitch || dpitch > 2147483647 || spitch > 2147483647)
        return fail(cudaErrorInvalidPitchValue);
    if (height == 0 || width == 0)
        return cudaSuccess;
    std::lock_guard<std::mutex> lk(api);
    stream_rt *s = resolve(h);
    if (!s)
        return fail(cudaErrorInvalidResourceHandle);
    size_t dn = dpitch * (height - 1) + width, sn = spitch * (height - 1) + width;
    cudaError_t e = check_copy(dst, src, dn, sn, kind);
    if (e != cudaSuccess)
        return fail(e);
    if (!is_device_locked(src, sn) && !s->cap) {
        std::shared_ptr<std::vector<unsigned char>> copy =
            std::make_shared<std::vector<unsigned char>>((const unsigned char *)src, (const unsigned char *)src + sn);
        return fail(enqueue_locked(s, [=] {
            for (size_t r = 0; r < height; r++)
                memcpy((char *)dst + r * dpitch, copy->data() + r * spitch, width);
        }));
    }
    return fail(enqueue_locked(s, [=] {
        for (size_t r = 0; r < height; r++)
            memmove((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
    }));
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t h)
{
    STICKY_CHECK();
    std::lock_guard<std::mutex> lk(api);
    stream_rt *s = resolve(h);
    if (!s)
        return fail(cudaErrorInvalidResourceHandle);
    if (!is_device_locked(p, n))
        return fail(cudaErrorInvalidValue);
    if (n == 0)
        return cudaSuccess;
    return fail(enqueue_locked(s, [p, value, n] { memset(p, value, n); }));
}

cudaError_t cudaMemset(void *p, int value, size_t n)
{
    STICKY_CHECK();
    {
        std::lock_guard<std::mutex> lk(api);
        if (unsafe_call())
            return fail(cudaErrorStreamCaptureUnsupported);
    }
    return cudaMemsetAsync(p, value, n, nullptr); /* asynchronous for device memory, as documented */
}

/* ---- streams -------------------------------------------------------------------------------- */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *p, unsigned int flags)
{
    STICKY_CHECK();
    if (!p || (flags & ~(unsigned)cudaStreamNonBlocking))
        return fail(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> lk(api);
    stream_rt *s = new_stream(flags, false);
    streams.insert(s);
    *p = reinterpret_cast<cudaStream_t>(s);
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *p) { return cudaStreamCreateWithFlags(p, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t h)
{
    stream_rt *s;
    {
        std::lock_guard<std::mutex> lk(api);
        s = reinterpret_cast<stream_rt *>(h);
        if (!h || !streams.count(s))
            return fail(cudaErrorInvalidResourceHandle);
        if (s->cap)
            invalidate(s->cap);
        streams.erase(s);
    }
    /* the work already queued still runs (the call itself does not wait for it, on a GPU;
     * here the worker is joined once it has drained its queue) */
    PBL_EMU_HIDE_BEGIN();
    {
        std::lock_guard<std::mutex> lk(s->m);
        s->stop = true;
        s->cv.notify_all();
    }
    PBL_EMU_HIDE_END();
    s->worker.join();
    std::lock_guard<std::mutex> lk(api);
    graveyard.emplace_back(s);
    return sticky() != cudaSuccess ? fail(sticky()) : cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t h)
{
    STICKY_CHECK();
    stream_rt *s;
    uint64_t seq;
    {
        std::lock_guard<std::mutex> lk(api);
        s = resolve(h);
        if (!s)
            return fail(cudaErrorInvalidResourceHandle);
        if (s->cap) {
            invalidate(s->cap);
            return fail(cudaErrorStreamCaptureUnsupported);
        }
        if (s->legacy && unsafe_call())
            return fail(cudaErrorStreamCaptureUnsupported);
        seq = s->enq;
    }
    wait_done(s, seq);
    STICKY_CHECK();
    return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t h)
{
    STICKY_CHECK();
    std::lock_guard<std::mutex> lk(api);
    stream_rt *s = resolve(h);
    if (!s)
        return fail(cudaErrorInvalidResourceHandle);
    if (s->cap) {
        invalidate(s->cap);
        return fail(cudaErrorStreamCaptureUnsupported);
    }
    return s->done.load(std::memory_order_acquire) >= s->enq ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t h, cudaStreamCaptureMode mode)
{
    STICKY_CHECK();
    std::lock_guard<std::mutex> lk(api);
    stream_rt *s = resolve(h);
    if (!s)
        return fail(cudaErrorInvalidResourceHandle);
    if (s->legacy)
        return fail(cudaErrorStreamCaptureUnsupported); /* the legacy stream cannot capture */
    if (s->cap)
        return fail(cudaErrorIllegalState);
    if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
        mode != cudaStreamCaptureModeRelaxed)
        return fail(cudaErrorInvalidValue);
    capture *c = new capture;
    c->g = new graph_rt;
    c->origin = s;
    c->mode = mode;
    c->thread = std::this_thread::get_id();
    captures.insert(c);
    join_capture(s, c, {});
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t h, cudaGraph_t *pg)
{
    STICKY_CHECK();
    if (!pg)
        return fail(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> lk(api);
    stream_rt *s = resolve(h);
    if (!s)
        return fail(cudaErrorInvalidResourceHandle);
    capture *c = s->cap;
    if (!c)
        return fail(cudaErrorIllegalState);
    if (c->origin != s)
        return fail(cudaErrorStreamCaptureUnmatched);
    if (c->mode != cudaStreamCaptureModeRelaxed && c->thread != std::this_thread::get_id())
        return fail(cudaErrorStreamCaptureWrongThread);
    *pg = nullptr;
    graph_rt *g = c->g;
    cudaError_t e = cudaSuccess;
    if (c->invalid) {
        e = cudaErrorStreamCaptureInvalidated;
    } else {
        /* every other stream's last work must precede the origin's last work */
        std::vector<char> anc(g->nodes.size(), 0);
        std::vector<int> todo = s->cap_deps;
        while (!todo.empty()) {
            int n = todo.back();
            todo.pop_back();
            if (anc[(size_t)n])
                continue;
            anc[(size_t)n] = 1;
            for (int d : g->nodes[(size_t)n].deps)
                todo.push_back(d);
        }
        for (stream_rt *o : c->streams)
            for (int d : o->cap_deps)
                if (!anc[(size_t)d])
                    e = cudaErrorStreamCaptureUnjoined;
    }
    end_capture(c);
    if (e != cudaSuccess) {
        delete g;
        return fail(e);
    }
    graphs.insert(g);
    *pg = reinterpret_cast<cudaGraph_t>(g);
    return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t h, cudaStreamCaptureStatus *st)
{
    STICKY_CHECK();
    if (!st)
        return fail(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> lk(api);
    stream_rt *s = resolve(h);
    if (!s)
        return fail(cudaErrorInvalidResourceHandle);
    *st = !s->cap ? cudaStreamCaptureStatusNone
                  : s->cap->invalid ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}

/* ---- events --------------------------------------------------------------------------------- */

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *p, unsigned int flags)
{
    STICKY_CHECK();
    if (!p || (flags & ~(unsigned)(cudaEventBlockingSync | cudaEventDisableTiming)))
        return fail(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> lk(api);
    event_rt *e = new event_rt;
    e->flags = flags;
    events.insert(e);
    *p = reinterpret_cast<cudaEvent_t>(e);
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *p) { return cudaEventCreateWithFlags(p, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t h)
{
    std::lock_guard<std::mutex> lk(api);
    event_rt *e = reinterpret_cast<event_rt *>(h);
    if (!h || !events.count(e))
        return fail(cudaErrorInvalidResourceHandle);
    events.erase(e);
    delete e;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t h, cudaStream_t sh)
{
    STICKY_CHECK();
    std::lock_guard<std::mutex> lk(api);
    event_rt *e = reinterpret_cast<event_rt *>(h);
    if (!h || !events.count(e))
        return fail(cudaErrorInvalidResourceHandle);
    stream_rt *s = resolve(sh);
    if (!s)
        return fail(cudaErrorInvalidResourceHandle);
    if (s->cap) {
        if (s->cap->invalid)
            return fail(cudaErrorStreamCaptureInvalidated);
        e->cap = s->cap;
        e->cap_deps = s->cap_deps;
        e->s = nullptr;
        return cudaSuccess;
    }
    legacy_edges(s);
    e->cap = nullptr;
    e->cap_deps.clear();
    e->s = s;
    e->seq = s->enq;
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t sh, cudaEvent_t h, unsigned int flags)
{
    STICKY_CHECK();
    if (flags != 0)
        return fail(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> lk(api);
    event_rt *e = reinterpret_cast<event_rt *>(h);
    if (!h || !events.count(e))
        return fail(cudaErrorInvalidResourceHandle);
    stream_rt *s = resolve(sh);
    if (!s)
        return fail(cudaErrorInvalidResourceHandle);
    if (e->cap) {
        capture *c = e->cap;
        if (s->cap && s->cap != c) {
            invalidate(s->cap);
            invalidate(c);
            return fail(cudaErrorStreamCaptureMerge);
        }
        if (c->invalid)
            return fail(cudaErrorStreamCaptureInvalidated);
        if (s->legacy)
            return fail(cudaErrorStreamCaptureImplicit);
        if (!s->cap) {
            join_capture(s, c, e->cap_deps); /* cross-stream capture: s joins */
        } else {
            for (int d : e->cap_deps)
                if (std::find(s->cap_deps.begin(), s->cap_deps.end(), d) == s->cap_deps.end())
                    s->cap_deps.push_back(d);
        }
        return cudaSuccess;
    }
    if (s->cap) {
        if (e->s) { /* a capturing stream may not wait on work outside its capture */
            invalidate(s->cap);
            return fail(cudaErrorStreamCaptureIsolation);
        }
        return cudaSuccess;
    }
    if (e->s)
        push_wait(s, e->s, e->seq);
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t h)
{
    STICKY_CHECK();
    stream_rt *s = nullptr;
    uint64_t seq = 0;
    {
        std::lock_guard<std::mutex> lk(api);
        event_rt *e = reinterpret_cast<event_rt *>(h);
        if (!h || !events.count(e))
            return fail(cudaErrorInvalidResourceHandle);
        if (e->cap)
            return fail(cudaErrorCapturedEvent);
        s = e->s;
        seq = e->seq;
    }
    if (s)
        wait_done(s, seq);
    STICKY_CHECK();
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t h)
{
    STICKY_CHECK();
    std::lock_guard<std::mutex> lk(api);
    event_rt *e = reinterpret_cast<event_rt *>(h);
    if (!h || !events.count(e))
        return fail(cudaErrorInvalidResourceHandle);
    if (e->cap)
        return fail(cudaErrorCapturedEvent);
    return !e->s || e->s->done.load(std::memory_order_acquire) >= e->seq ? cudaSuccess : cudaErrorNotReady;
}

/* ---- graphs --------------------------------------------------------------------------------- */

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *px, cudaGraph_t hg, unsigned long long flags)
{
    STICKY_CHECK();
    if (!px || flags != 0)
        return fail(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> lk(api);
    graph_rt *g = reinterpret_cast<graph_rt *>(hg);
    if (!hg || !graphs.count(g))
        return fail(cudaErrorInvalidResourceHandle);
    exec_rt *x = new exec_rt;
    x->g = *g; /* an exec is independent of its graph (the graph may be destroyed) */
    int lanes = std::max(1, g->n_lanes);
    x->lane_nodes.resize((size_t)lanes);
    for (size_t i = 0; i < x->g.nodes.size(); i++)
        x->lane_nodes[(size_t)x->g.nodes[i].lane].push_back((int)i);
    x->node_gen.reset(new std::atomic<uint64_t>[x->g.nodes.size() + 1]);
    for (size_t i = 0; i <= x->g.nodes.size(); i++)
        x->node_gen[i].store(0);
    x->lane_gen.reset(new std::atomic<uint64_t>[(size_t)lanes]);
    for (int l = 0; l < lanes; l++)
        x->lane_gen[(size_t)l].store(0);
    for (int l = 0; l < lanes; l++)
        x->lanes.emplace_back(lane_main, x, l);
    execs.insert(x);
    *px = reinterpret_cast<cudaGraphExec_t>(x);
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t hx, cudaStream_t sh)
{
    STICKY_CHECK();
    std::lock_guard<std::mutex> lk(api);
    exec_rt *x = reinterpret_cast<exec_rt *>(hx);
    if (!hx || !execs.count(x))
        return fail(cudaErrorInvalidResourceHandle);
    stream_rt *s = resolve(sh);
    if (!s)
        return fail(cudaErrorInvalidResourceHandle);
    if (s->cap)
        return fail(cudaErrorNotSupported); /* a graph launched into a capture: not emulated */
    x->in_flight.fetch_add(1, std::memory_order_relaxed);
    cudaError_t e = enqueue_locked(s, [x] { exec_run(x); });
    if (e != cudaSuccess)
        x->in_flight.fetch_sub(1, std::memory_order_relaxed);
    return fail(e);
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t hx)
{
    exec_rt *x;
    {
        std::lock_guard<std::mutex> lk(api);
        x = reinterpret_cast<exec_rt *>(hx);
        if (!hx || !execs.count(x))
            return fail(cudaErrorInvalidResourceHandle);
        execs.erase(x);
    }
    /* a launch still running finishes first */
    while (x->in_flight.load(std::memory_order_acquire) > 0)
        std::this_thread::yield();
    PBL_EMU_HIDE_BEGIN();
    {
        std::lock_guard<std::mutex> lk(x->m);
        x->stop = true;
        x->cv.notify_all();
    }
    PBL_EMU_HIDE_END();
    for (std::thread &t : x->lanes)
        t.join();
    delete x;
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t hg)
{
    std::lock_guard<std::mutex> lk(api);
    graph_rt *g = reinterpret_cast<graph_rt *>(hg);
    if (!hg || !graphs.count(g))
        return fail(cudaErrorInvalidResourceHandle);
    graphs.erase(g);
    delete g;
    return cudaSuccess;
}

} // extern "C"
