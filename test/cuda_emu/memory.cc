/*
 * pebble's host CUDA emulator: device memory (cudaMalloc/cudaFree, the registry of live
 * allocations every pointer check uses, the cache of big freed blocks) and the copies and
 * memsets into it. Memory is its own idea: what counts as device memory decides which kernel
 * arguments and copies are legal. What is emulated and why: emu.h.
 */
#include "runtime_internal.h"

#include <cstdlib>
#include <cstring>

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

std::map<uintptr_t, size_t> allocs;
size_t                      alloc_bytes = 0;

namespace {

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

} // namespace

bool is_device_locked(const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p;
    auto it = allocs.upper_bound(a);
    if (it == allocs.begin())
        return false;
    --it;
    return a >= it->first && a - it->first <= it->second && n <= it->second - (a - it->first);
}


bool is_device(const void *p, size_t n)
{
    std::lock_guard<std::mutex> lk(api);
    return is_device_locked(p, n);
}

} // namespace pbl_emu

using namespace pbl_emu;

/* ---- the C API ---------------------------------------------------------------------------- */

extern "C" {

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

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *at, const void *p)
{
    STICKY_CHECK();
    if (!at)
        return fail(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> lk(api);
    bool dev = is_device_locked(p, 1);
    *at = cudaPointerAttributes{ dev ? cudaMemoryTypeDevice : cudaMemoryTypeUnregistered, 0,
                                 dev ? const_cast<void *>(p) : nullptr, nullptr };
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

} // extern "C"
