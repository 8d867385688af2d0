/*
 * pebble's host CUDA emulator: running a grid. Blocks run one after another on the calling
 * (stream) thread; a block's threads are fibers (ucontext), so __syncthreads() is a real
 * barrier: a thread that reaches it parks until every thread of the block has.
 *
 * Cost: a fiber runs the block's threads one after another, and only when a thread parks at
 * the barrier does another fiber take over the threads not yet started; so a kernel that
 * never calls __syncthreads() costs one fiber switch per block, and one that does costs one
 * fiber per thread (fibers and their stacks are kept per OS thread and reused, never created
 * per launch). A block of one thread runs without a fiber. Every other launch runs blocks and
 * threads last to first (see run_grid).
 *
 * A __syncthreads() that some threads of the block never reach (they returned first, or
 * passed a different number of barriers, or met at different __syncthreads() statements:
 * the CUDA C++ Programming Guide allows one in conditional code "only if the conditional
 * evaluates identically across the entire thread block, otherwise the code execution is
 * likely to hang or produce unintended side effects") is undefined on a GPU (a hang, or garbage): here it
 * is the sticky cudaErrorLaunchFailure, with the kernel's name on stderr.
 *
 * Sanitizers: every switch is announced to AddressSanitizer (__sanitizer_start/finish_switch_
 * fiber) and ThreadSanitizer (__tsan_switch_to_fiber), as their fiber interfaces require.
 */
#include "emu.h"

#include <pbl_emu_device.h>

#include <sys/mman.h>
#include <ucontext.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define PBL_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PBL_EMU_ASAN 1
#endif
#endif
#ifdef PBL_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef PBL_EMU_TSAN
extern "C" {
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void  __tsan_destroy_fiber(void *fiber);
void  __tsan_switch_to_fiber(void *fiber, unsigned flags);
}
#endif

namespace pbl_emu {

__thread coords here;

namespace {

/* fiber stacks: kernels keep little on the stack, but sanitizers inflate frames */
constexpr size_t STACK_BYTES = (size_t)256 << 10;
constexpr size_t GUARD_BYTES = 4096;

struct fiber {
    ucontext_t ctx;
    char      *map = nullptr; /* guard page + stack */
    void      *fake = nullptr; /* ASan's fake stack while switched out */
    void      *tsan = nullptr;
    uint3      tid{ 0, 0, 0 };
    unsigned   barriers = 0;
    const char *site_file = nullptr; /* the __syncthreads() it waits at */
    int         site_line = 0;
};

struct block_state {
    const std::function<void()> *fn = nullptr;
    dim3                          dim;
    unsigned                      n = 0, next = 0, finished = 0;
    unsigned                      barriers_min = ~0u, barriers_max = 0;
    bool                          divergent = false;
    const char                   *split_file[2] = { nullptr, nullptr }; /* two statements one barrier */
    int                           split_line[2] = { 0, 0 };             /* met at, when they differ */
    bool                          reversed = false; /* threads started last to first */
    std::vector<fiber *>          waiting, ready;
};

struct worker_state {
    ucontext_t           main_ctx;
    void                *main_fake = nullptr;
    const void          *main_bottom = nullptr;
    size_t               main_size = 0;
    void                *main_tsan = nullptr;
    std::vector<std::unique_ptr<fiber>> all;
    std::vector<fiber *> idle;
    fiber               *cur = nullptr;   /* the fiber running a thread, or NULL on the main context */
    fiber               *starting = nullptr;
    block_state         *blk = nullptr;
    bool                 direct = false;  /* a one-thread block, run without a fiber */

    ~worker_state()
    {
        for (auto &f : all) {
#ifdef PBL_EMU_TSAN
            __tsan_destroy_fiber(f->tsan);
#endif
#ifdef PBL_EMU_ASAN
            /* frames that never returned left poison in the shadow: clear it before the
             * pages can be mapped again for something else */
            __asan_unpoison_memory_region(f->map + GUARD_BYTES, STACK_BYTES);
#endif
            munmap(f->map, GUARD_BYTES + STACK_BYTES);
        }
    }
};

thread_local std::unique_ptr<worker_state> ws;

uint3 coords_of(unsigned t, dim3 d)
{
    uint3 c;
    c.x = t % d.x;
    c.y = (t / d.x) % d.y;
    c.z = t / (d.x * d.y);
    return c;
}

/* Switches from the running context (saved in `from`) to fiber or main context `to`. */
void switch_to(ucontext_t *from, void **from_fake, ucontext_t *to, void *to_tsan, const void *to_bottom, size_t to_size)
{
#ifdef PBL_EMU_ASAN
    __sanitizer_start_switch_fiber(from_fake, to_bottom, to_size);
#else
    (void)from_fake;
    (void)to_bottom;
    (void)to_size;
#endif
#ifdef PBL_EMU_TSAN
    __tsan_switch_to_fiber(to_tsan, 0);
#else
    (void)to_tsan;
#endif
    swapcontext(from, to);
#ifdef PBL_EMU_ASAN
    const void *bottom = nullptr;
    size_t size = 0;
    __sanitizer_finish_switch_fiber(*from_fake, &bottom, &size);
    if (from != &ws->main_ctx) { /* a fiber resumed from the main context: its stack, for the way back */
        ws->main_bottom = bottom;
        ws->main_size = size;
    }
#endif
}

void to_main(fiber *f)
{
    switch_to(&f->ctx, &f->fake, &ws->main_ctx, ws->main_tsan, ws->main_bottom, ws->main_size);
}

void thread_done(block_state *b, unsigned barriers)
{
    b->finished++;
    b->barriers_min = barriers < b->barriers_min ? barriers : b->barriers_min;
    b->barriers_max = barriers > b->barriers_max ? barriers : b->barriers_max;
}

/* A fiber's life: run the block's unstarted threads one after another; when none is left,
 * park as idle on the main context; resumed for a later block, do the same again. */
void fiber_entry()
{
    fiber *f = ws->starting;
#ifdef PBL_EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &ws->main_bottom, &ws->main_size);
#endif
    for (;;) {
        block_state *b = ws->blk;
        while (b->next < b->n) {
            unsigned t = b->next++;
            if (b->reversed)
                t = b->n - 1 - t;
            f->tid = coords_of(t, b->dim);
            f->barriers = 0;
            here.thread = f->tid;
            (*b->fn)();
            thread_done(b, f->barriers);
        }
        ws->idle.push_back(f);
        ws->cur = nullptr;
        to_main(f);
    }
}

fiber *new_fiber()
{
    std::unique_ptr<fiber> f(new fiber);
    void *m = mmap(nullptr, GUARD_BYTES + STACK_BYTES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (m == MAP_FAILED)
        return nullptr;
    f->map = (char *)m;
    mprotect(f->map, GUARD_BYTES, PROT_NONE); /* a stack overflow faults instead of corrupting */
    getcontext(&f->ctx);
    f->ctx.uc_stack.ss_sp = f->map + GUARD_BYTES;
    f->ctx.uc_stack.ss_size = STACK_BYTES;
    f->ctx.uc_link = nullptr;
    makecontext(&f->ctx, fiber_entry, 0);
#ifdef PBL_EMU_TSAN
    f->tsan = __tsan_create_fiber(0);
#endif
    ws->all.push_back(std::move(f));
    return ws->all.back().get();
}

void resume(fiber *f)
{
    ws->cur = f;
    here.thread = f->tid;
    switch_to(&ws->main_ctx, &ws->main_fake, &f->ctx, f->tsan, f->map + GUARD_BYTES, STACK_BYTES);
}

/* Runs one block to completion (on the main context). False: no stack for a fiber. */
bool run_block(block_state *b)
{
    for (;;) {
        if (b->next < b->n) {
            fiber *f;
            if (!ws->idle.empty()) {
                f = ws->idle.back();
                ws->idle.pop_back();
            } else {
                f = new_fiber();
                if (!f)
                    return false;
                ws->starting = f;
            }
            resume(f);
        } else if (!b->ready.empty()) {
            fiber *f = b->ready.back();
            b->ready.pop_back();
            resume(f);
        } else if (!b->waiting.empty()) {
            if (b->finished > 0)
                b->divergent = true; /* threads returned while others wait at the barrier */
            for (fiber *w : b->waiting)
                if (!b->split_file[0] && (w->site_line != b->waiting[0]->site_line ||
                                          strcmp(w->site_file, b->waiting[0]->site_file) != 0)) {
                    b->divergent = true; /* one barrier, reached at two different statements */
                    b->split_file[0] = b->waiting[0]->site_file;
                    b->split_line[0] = b->waiting[0]->site_line;
                    b->split_file[1] = w->site_file;
                    b->split_line[1] = w->site_line;
                }
            b->ready.swap(b->waiting); /* the barrier opens (even then: the parked threads must end) */
        } else {
            break;
        }
    }
    if (b->barriers_min != b->barriers_max)
        b->divergent = true;
    return true;
}

} // namespace

void syncthreads(const char *file, int line)
{
    if (!ws || ws->direct || !ws->cur)
        return; /* a one-thread block: the barrier is trivially reached */
    fiber *f = ws->cur;
    f->barriers++;
    f->site_file = file;
    f->site_line = line;
    ws->blk->waiting.push_back(f);
    ws->cur = nullptr;
    to_main(f);
    here.thread = f->tid;
}

void run_grid(const char *name, dim3 grid, dim3 block, const std::function<void()> &fn)
{
    if (!ws) {
        ws.reset(new worker_state);
#ifdef PBL_EMU_TSAN
        ws->main_tsan = __tsan_get_current_fiber();
#endif
    }
    coords saved = here;
    here.block_dim = uint3{ block.x, block.y, block.z };
    here.grid_dim = uint3{ grid.x, grid.y, grid.z };
    unsigned n = block.x * block.y * block.z;
    /* Every other launch runs its blocks, and its threads within each block, last to first:
     * a kernel whose result depends on the order of blocks or of threads between barriers
     * (a race on a GPU) gives different results from one launch to the next. */
    static std::atomic<unsigned> launches{ 0 };
    bool reversed = (launches.fetch_add(1, std::memory_order_relaxed) & 1u) != 0;
    unsigned long long n_blocks = (unsigned long long)grid.x * grid.y * grid.z;
    for (unsigned long long lb = 0; lb < n_blocks; lb++) {
        unsigned long long bl = reversed ? n_blocks - 1 - lb : lb;
        here.block.x = (unsigned)(bl % grid.x);
        here.block.y = (unsigned)(bl / grid.x % grid.y);
        here.block.z = (unsigned)(bl / grid.x / grid.y);
        if (n == 1) {
            ws->direct = true;
            here.thread = uint3{ 0, 0, 0 };
            fn();
            ws->direct = false;
            continue;
        }
        block_state b;
        b.fn = &fn;
        b.dim = block;
        b.n = n;
        b.reversed = reversed;
        ws->blk = &b;
        bool ok = run_block(&b);
        ws->blk = nullptr;
        if (!ok) {
            set_sticky(cudaErrorLaunchOutOfResources, "kernel %s: no memory for a fiber stack", name);
            break;
        }
        if (b.divergent && b.split_file[0]) {
            set_sticky(cudaErrorLaunchFailure,
                       "kernel %s, block (%u, %u, %u): threads met at different __syncthreads() statements "
                       "(%s:%d and %s:%d), undefined on a GPU",
                       name, here.block.x, here.block.y, here.block.z, b.split_file[0], b.split_line[0],
                       b.split_file[1], b.split_line[1]);
            break;
        }
        if (b.divergent) {
            set_sticky(cudaErrorLaunchFailure,
                       "kernel %s, block (%u, %u, %u): __syncthreads() not reached by every thread of the block "
                       "(threads passed %u to %u barriers)",
                       name, here.block.x, here.block.y, here.block.z, b.barriers_min, b.barriers_max);
            break;
        }
    }
    here = saved;
}

} // namespace pbl_emu
