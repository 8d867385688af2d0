/*
 * What every CUDA kernel file (ops/cuda/NAME.cu) shares: the error macro, launch geometry, the broadcast
 * walk as a device-side index map, and the C-linkage pebble headers.
 *
 * PBL__CU / PBL__CUBLAS record the failing call, file and line in a->err, set `s` to
 * PBL_ERR_DEVICE and jump to the function's `done` label: no return hides in a macro, and
 * nothing aborts (STYLE.md, "Errors"). Each kernel function therefore reads
 *     pbl_status s = PBL_OK;  ...  done: return s;
 */
#ifndef PBL_CUDA_COMMON_CUH
#define PBL_CUDA_COMMON_CUH

#include <cstdio>

#include "ops/cuda/kernels.h"
#include "ops/shared/formulas.h"

extern "C" {
#include "ops/shared/broadcast.h"
}

const char *pbl__cublas_status_str(cublasStatus_t st);

/* The sum of every thread's v over a block of THREADS threads (a power of two), as a tree in
 * part[THREADS] (shared memory): the same order of additions on every launch, so the same
 * bits (no atomics). Every thread of the block must call it; every thread gets the total, and
 * part may be reused once it returns. */
template <int THREADS, typename T>
__device__ static inline T pbl__block_sum(T v, T *part)
{
    part[threadIdx.x] = v;
    __syncthreads();
    for (int w = THREADS / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w)
            part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    T total = part[0];
    __syncthreads();
    return total;
}

#define PBL__CU(call)                                                                       \
    do {                                                                                    \
        cudaError_t e_ = (call);                                                            \
        if (e_ != cudaSuccess) {                                                            \
            snprintf(a->err, a->errlen, "%s failed at %s:%d: %s", #call, __FILE__, __LINE__,  \
                     cudaGetErrorString(e_));                                               \
            (void)cudaGetLastError(); /* reported here: not again by a later launch's check */ \
            s = PBL_ERR_DEVICE;                                                             \
            goto done;                                                                      \
        }                                                                                   \
    } while (0)

#define PBL__CUBLAS(call)                                                                   \
    do {                                                                                    \
        cublasStatus_t e_ = (call);                                                         \
        if (e_ != CUBLAS_STATUS_SUCCESS) {                                                  \
            snprintf(a->err, a->errlen, "%s failed at %s:%d: %s", #call, __FILE__, __LINE__,  \
                     pbl__cublas_status_str(e_));                                           \
            s = PBL_ERR_DEVICE;                                                             \
            goto done;                                                                      \
        }                                                                                   \
    } while (0)

/* Every launch is spelled PBL__LAUNCH(kernel, grid, block, shmem, stream)(args...): under nvcc
 * it is the triple-chevron launch; a host build of these files (a CUDA emulator for testing
 * without a GPU) can define it as a call that runs the grid. */
#ifndef PBL__LAUNCH
#define PBL__LAUNCH(k, grid, block, shmem, stream) k<<<(grid), (block), (shmem), (stream)>>>
#endif

/* A launch's own errors (bad configuration) show at once in cudaGetLastError. */
#define PBL__LAUNCHED() PBL__CU(cudaGetLastError())

#define PBL__THREADS 256
static inline unsigned pbl__blocks(int64_t n)
{
    int64_t b = (n + PBL__THREADS - 1) / PBL__THREADS;
    if (b < 1)
        b = 1;
    return (unsigned)(b > 65535 * 16 ? 65535 * 16 : b); /* kernels loop grid-stride beyond it */
}

#define PBL__GRID_LOOP(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

#define PBL__IN(a, i)  ((const float *)(a)->in[i])
#define PBL__OUT(a, k) ((float *)(a)->out[k])
#define PBL__NUMEL(m)  pbl_shape_numel(&(m).shape)

/* The broadcast walk of ops/shared/broadcast.h by value, for kernels: big element i reads the
 * small operand at bcast_offset(b, i). */
struct pbl__dbcast {
    int32_t ndim;
    int64_t dim[PBL_MAX_DIMS];
    int64_t stride[PBL_MAX_DIMS];
};

static inline pbl__dbcast pbl__dbcast_make(const pbl_shape *big, const pbl_shape *small)
{
    pbl__bcast bc;
    pbl__bcast_init(&bc, big, small);
    pbl__dbcast d;
    d.ndim = bc.ndim;
    for (int i = 0; i < PBL_MAX_DIMS; i++) {
        d.dim[i] = i < bc.ndim ? bc.dim[i] : 1;
        d.stride[i] = i < bc.ndim ? bc.stride[i] : 0;
    }
    return d;
}

__device__ static inline int64_t pbl__dbcast_offset(const pbl__dbcast &b, int64_t i)
{
    int64_t off = 0;
    for (int32_t d = b.ndim - 1; d >= 0; d--) {
        off += (i % b.dim[d]) * b.stride[d];
        i /= b.dim[d];
    }
    return off;
}

#endif
