/*
 * pebble's host CUDA emulator: what its runtime API files share (runtime.cc: shared state,
 * errors, device queries; memory.cc: device memory; stream.cc: streams and kernel launches;
 * event.cc: events; capture.cc: stream capture; graph.cc: graph instantiate and replay).
 * One header so each idea has its own file while the state they all touch is declared once.
 * What is emulated and why: emu.h.
 *
 * Locks. One runtime lock (`api`) guards the host-side state (allocations, streams, events,
 * captures); only host threads take it. Each stream's queue has its own lock, shared by the
 * host (push) and the stream's worker (pop); TSan is told to ignore that lock (emu.h), and
 * sees instead the CUDA-level edges as atomics: `posted` (release by the host after building
 * an item, acquire by the worker before running it) and `done` (release by the worker after
 * each item, acquire by whoever waits for it: a stream waiting on an event, a synchronize).
 */
#ifndef PBL_EMU_RUNTIME_INTERNAL_H
#define PBL_EMU_RUNTIME_INTERNAL_H

#include "emu.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace pbl_emu {

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

/* ---- shared state (runtime.cc; the allocations: memory.cc) ------------------------------ */

extern std::mutex                              api;
extern std::map<uintptr_t, size_t>             allocs; /* base -> bytes */
extern size_t                                  alloc_bytes;
extern std::set<stream_rt *>                   streams;
extern std::vector<std::unique_ptr<stream_rt>> graveyard; /* destroyed streams (events may name them) */
extern std::set<event_rt *>                    events;
extern std::set<graph_rt *>                    graphs;
extern std::set<exec_rt *>                     execs;
extern std::set<capture *>                     captures;
extern stream_rt                              *legacy_stream;
extern std::atomic<int>                        sticky_err;

/* ---- stream.cc ------------------------------------------------------------------------- */

/* Blocks until `s` has finished its first seq items. */
void wait_done(stream_rt *s, uint64_t seq);
stream_rt *new_stream(unsigned flags, bool legacy);
/* s waits until `on` has finished its first seq items (under api). */
void push_wait(stream_rt *s, stream_rt *on, uint64_t seq);
/* The legacy stream, created on first use (under api). */
stream_rt *legacy();
/* The stream a handle names (under api), or NULL when it is not a live stream. */
stream_rt *resolve(cudaStream_t h);
/* Implicit synchronisation with the legacy stream (cudaStreamDefault streams only). */
void legacy_edges(stream_rt *s);
/* Enqueues `fn` on s, or records it as a node while s captures (under api). */
cudaError_t enqueue_locked(stream_rt *s, std::function<void()> fn);
/* Waits for every stream's work enqueued so far (under api). */
void sync_all();

/* ---- capture.cc ------------------------------------------------------------------------ */

void invalidate(capture *c);
/* An unsafe call from this thread during a capture in global or thread-local mode
 * invalidates it; true when one did (the call then fails). Under api. */
bool unsafe_call();
/* s joins capture c, its next node depending on `deps`. */
void join_capture(stream_rt *s, capture *c, const std::vector<int> &deps);

/* ---- memory.cc ------------------------------------------------------------------------- */

/* is_device (emu.h), under api. */
bool is_device_locked(const void *p, size_t n);

/* ---- runtime.cc ------------------------------------------------------------------------ */

/* The device's total memory: the host's physical memory. */
size_t total_memory();

/* The common prologue of an API call: a sticky error answers everything. */
#define STICKY_CHECK()                              \
    do {                                            \
        cudaError_t st_ = sticky();                 \
        if (st_ != cudaSuccess)                     \
            return fail(st_);                       \
    } while (0)

} // namespace pbl_emu

#endif
