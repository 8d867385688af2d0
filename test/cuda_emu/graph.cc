/*
 * pebble's host CUDA emulator: captured graphs, their instantiation and replay (one thread
 * per captured stream, each node after its captured dependencies) and destruction. What is
 * emulated and why: emu.h.
 */
#include "runtime_internal.h"

#include <algorithm>

namespace pbl_emu {

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

namespace {

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

} // namespace

} // namespace pbl_emu

using namespace pbl_emu;

/* ---- the C API ---------------------------------------------------------------------------- */

extern "C" {

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
