/*
 * pebble's host CUDA emulator: the device-side language, force-included (-include) into each
 * ops/cuda/NAME.cu when it is compiled as host C++ for libpebble_cuda_emu.so.
 *
 * __global__/__device__/__host__ vanish; __shared__ is `static thread_local` (one OS thread
 * runs one block at a time, its threads as fibers, test/cuda_emu/block.cc); threadIdx,
 * blockIdx, blockDim, gridDim read the running fiber's coordinates; __syncthreads is a real
 * barrier of the block's threads; atomics are host atomics (blocks of different streams run
 * on different OS threads). PBL__LAUNCH(k, grid, block, shmem, stream)(args...) converts the
 * arguments to the kernel's parameter types, copies them, checks every pointer argument
 * against the device allocations, and enqueues the whole grid on the emulated stream (or
 * records it into the stream's capture).
 */
#ifndef PBL_EMU_DEVICE_H
#define PBL_EMU_DEVICE_H

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static thread_local

namespace pbl_emu {

struct coords { /* plain data (uint3, not dim3), so it can be a __thread variable */
    uint3 thread, block, block_dim, grid_dim;
};
/* The coordinates of the fiber running on this OS thread (block.cc). GNU __thread, hidden:
 * no C++ thread_local wrapper call, and inside the module the local-dynamic TLS model, whose
 * block address the compiler computes once per kernel body instead of calling
 * __tls_get_addr at every threadIdx/blockIdx access. */
extern __thread coords here __attribute__((visibility("hidden")));

void syncthreads(const char *file, int line);

/* Enqueues `fn` (one block's body per call, run for each block and thread) as a kernel. */
void launch(const char *name, dim3 grid, dim3 block, size_t shmem, cudaStream_t stream, std::function<void()> fn,
            const void *const *ptrs, int n_ptrs);

template <class... P>
struct launcher {
    void (*k)(P...);
    const char  *name;
    dim3         grid, block;
    size_t       shmem;
    cudaStream_t stream;

    template <class... A>
    void operator()(A &&...a) const
    {
        static_assert(sizeof...(A) == sizeof...(P), "kernel launched with the wrong number of arguments");
        std::tuple<typename std::decay<P>::type...> args(std::forward<A>(a)...);
        const void *ptrs[sizeof...(P) + 1];
        int n = 0;
        std::apply([&](const auto &...v) { (collect(ptrs, n, v), ...); }, args);
        void (*kf)(P...) = k;
        launch(name, grid, block, shmem, stream, [kf, args]() { std::apply(kf, args); }, ptrs, n);
    }

    template <class T>
    static void collect(const void **ptrs, int &n, const T &v)
    {
        if constexpr (std::is_pointer<T>::value)
            ptrs[n++] = (const void *)v;
    }
};

template <class... P>
launcher<P...> make_launcher(const char *name, void (*k)(P...), dim3 grid, dim3 block, size_t shmem,
                             cudaStream_t stream)
{
    return launcher<P...>{ k, name, grid, block, shmem, stream };
}

} // namespace pbl_emu

#define threadIdx (static_cast<const uint3 &>(::pbl_emu::here.thread))
#define blockIdx  (static_cast<const uint3 &>(::pbl_emu::here.block))
#define blockDim  (static_cast<const uint3 &>(::pbl_emu::here.block_dim))
#define gridDim   (static_cast<const uint3 &>(::pbl_emu::here.grid_dim))

#define PBL__LAUNCH(k, grid, block, shmem, stream) \
    ::pbl_emu::make_launcher(#k, k, (grid), (block), (shmem), (stream))

#define __syncthreads() ::pbl_emu::syncthreads(__FILE__, __LINE__)
static inline void __threadfence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

/* Atomics: host atomics, since blocks of kernels on different streams run concurrently. */
static inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static inline unsigned atomicAdd(unsigned *p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v)
{
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
/* read-modify-write by compare-and-swap, for the operations without a builtin */
template <class T, class F>
static inline T pbl_emu_rmw(T *p, F f)
{
    T old, want;
    __atomic_load(p, &old, __ATOMIC_SEQ_CST);
    do
        want = f(old);
    while (!__atomic_compare_exchange(p, &old, &want, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
    return old;
}
static inline float atomicAdd(float *p, float v) { return pbl_emu_rmw(p, [v](float o) { return o + v; }); }
static inline double atomicAdd(double *p, double v) { return pbl_emu_rmw(p, [v](double o) { return o + v; }); }
template <class T>
static inline T pbl_emu_cas(T *p, T compare, T val)
{
    __atomic_compare_exchange_n(p, &compare, val, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return compare; /* the old value either way */
}
static inline int atomicCAS(int *p, int c, int v) { return pbl_emu_cas(p, c, v); }
static inline unsigned atomicCAS(unsigned *p, unsigned c, unsigned v) { return pbl_emu_cas(p, c, v); }
static inline unsigned long long atomicCAS(unsigned long long *p, unsigned long long c, unsigned long long v)
{
    return pbl_emu_cas(p, c, v);
}
static inline int atomicExch(int *p, int v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
static inline unsigned atomicExch(unsigned *p, unsigned v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
static inline float atomicExch(float *p, float v)
{
    float old;
    __atomic_exchange(p, &v, &old, __ATOMIC_SEQ_CST);
    return old;
}
static inline int atomicMax(int *p, int v) { return pbl_emu_rmw(p, [v](int o) { return o > v ? o : v; }); }
static inline int atomicMin(int *p, int v) { return pbl_emu_rmw(p, [v](int o) { return o < v ? o : v; }); }

#endif
