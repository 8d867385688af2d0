/*
 * pebble's host CUDA emulator: streams (each a worker thread running its queue in order; the
 * legacy stream and its implicit edges), enqueueing work on them, kernel launches and the
 * synchronize calls. What is emulated and why: emu.h; the locks: runtime_internal.h.
 */
#include "runtime_internal.h"

#include <string>

namespace pbl_emu {

namespace {

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

} // namespace

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

stream_rt *new_stream(unsigned flags, bool legacy)
{
    stream_rt *s = new stream_rt;
    s->flags = flags;
    s->legacy = legacy;
    s->worker = std::thread(worker_main, s);
    return s;
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

void sync_all()
{
    for (stream_rt *s : streams)
        wait_done(s, s->enq);
    if (legacy_stream)
        wait_done(legacy_stream, legacy_stream->enq);
}

/* Under api. */
cudaError_t enqueue_locked(stream_rt *s, std::function<void()> fn)
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

/* ---- the C API ---------------------------------------------------------------------------- */

extern "C" {

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

/* Runs fn(userData) on the stream's thread in its turn. Exported from libpebble_cuda_emu.so
 * (emu.h): the stand-in NCCL modules enqueue their all-reduces with it, as NCCL enqueues its
 * kernels on the caller's stream. */
cudaError_t cudaLaunchHostFunc(cudaStream_t h, cudaHostFn_t fn, void *userData)
{
    if (!fn)
        return fail(cudaErrorInvalidValue);
    return enqueue(h, [fn, userData] { fn(userData); }, "cudaLaunchHostFunc");
}

} // extern "C"
