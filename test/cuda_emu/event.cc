/*
 * pebble's host CUDA emulator: events, the only edges between non-blocking streams (record,
 * a stream waiting on one, synchronize, query), inside and outside captures. What is
 * emulated and why: emu.h.
 */
#include "runtime_internal.h"

#include <algorithm>

using namespace pbl_emu;

extern "C" {

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

} // extern "C"
