/*
 * pebble's host CUDA emulator: stream capture: begin, end and status, and which calls
 * invalidate a capture (streams join one through events: event.cc). A capture records graph
 * nodes instead of running work (stream.cc's enqueue_locked); graph.cc replays them. What is
 * emulated and why: emu.h.
 */
#include "runtime_internal.h"

namespace pbl_emu {

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

namespace {

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

} // namespace

} // namespace pbl_emu

using namespace pbl_emu;

/* ---- the C API ---------------------------------------------------------------------------- */

extern "C" {

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

} // extern "C"
