/*
 * A stand-in for libpebble_nccl.so on the host CUDA emulator (PEBBLE_NCCL_MODULE), so that the
 * CUDA backend's device collectives run here, without a GPU or NCCL: test_data_parallel
 * --cuda-emu (CTest data_parallel_cuda_emu) loads it through pbl_comm_create_nccl.
 *
 * It plays rank 0 of two ranks whose peer holds the same data: a device sum doubles the
 * bucket (x + x), so with the mean (x 1/2, exact) the parameters are those of one process.
 * Each sum is enqueued on the caller's stream as a host function of the emulator
 * (cudaLaunchHostFunc, the one runtime call libpebble_cuda_emu.so exports) and returns at
 * once, as NCCL's enqueue does; the function first sleeps (pbl_fake_nccl_set: delay_ms), so
 * a reader that does not wait for the sum reads the bucket undoubled. With hang set, the
 * function instead blocks until the communicator is aborted (a peer that never comes; at most
 * 10 s, so a missing wait fails a test rather than hanging it). wait_f32_device is the bounded
 * wait of nccl_module.c in miniature: done counts against enqueued until the timeout, then an
 * abort and PBL_ERR_TIMEOUT. pbl_fake_nccl_counts tells the test what was called when.
 *
 * One communicator at a time (the counters are the module's). Test code: not installed.
 */
#define _POSIX_C_SOURCE 200809L
#define _GNU_SOURCE /* RTLD_NOLOAD */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "executor/comm/comm.h"

#define API __attribute__((visibility("default")))
#define MAX_WAITS 64

typedef cudaError_t (*host_fn_launch)(cudaStream_t, cudaHostFn_t, void *);

typedef struct fake {
    double      timeout_s;
    atomic_int  aborted;
    int         broken;
} fake;

typedef struct job {
    fake  *c;
    float *data;
    int64_t n;
} job;

API void pbl_fake_nccl_set(int delay, int hang_until_abort);
API void pbl_fake_nccl_counts(long *n_enqueued, long *n_done, long *n_waits, long *at_wait, int reset);

static atomic_int  delay_ms = 0, hang = 0;
static atomic_long enqueued = 0, done = 0;
static long        waits = 0, enqueued_at_wait[MAX_WAITS];

/* Sets how the next sums behave. */
API void pbl_fake_nccl_set(int delay, int hang_until_abort)
{
    atomic_store(&delay_ms, delay);
    atomic_store(&hang, hang_until_abort);
}

/* What happened since the last reset: sums enqueued and completed, waits, and at each of the
 * first MAX_WAITS waits how many sums had been enqueued. reset: zero them after reading. */
API void pbl_fake_nccl_counts(long *n_enqueued, long *n_done, long *n_waits, long *at_wait, int reset)
{
    *n_enqueued = atomic_load(&enqueued);
    *n_done = atomic_load(&done);
    *n_waits = waits;
    for (long i = 0; at_wait && i < waits && i < MAX_WAITS; i++)
        at_wait[i] = enqueued_at_wait[i];
    if (reset) {
        atomic_store(&enqueued, 0);
        atomic_store(&done, 0);
        waits = 0;
    }
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void sleep_ms(int ms)
{
    struct timespec t = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&t, NULL);
}

/* On the stream's thread, in the stream's order. */
static void run_sum(void *p)
{
    job *j = p;
    if (atomic_load(&hang)) {
        for (int i = 0; i < 10000 && !atomic_load(&j->c->aborted); i++)
            sleep_ms(1);
    } else {
        sleep_ms(atomic_load(&delay_ms));
        for (int64_t i = 0; i < j->n; i++)
            j->data[i] += j->data[i];
    }
    free(j);
    atomic_fetch_add(&done, 1);
}

static pbl_status f_open_device(const void *mpi_comm, double timeout_s, int32_t device, void **ctx, int32_t *rank,
                                int32_t *size, int32_t *overlap_ok, char *err, size_t errlen)
{
    fake *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return PBL_ERR_NOMEM;
    }
    c->timeout_s = timeout_s;
    *ctx = c;
    *rank = 0;
    *size = 2;
    *overlap_ok = 1;
    return PBL_OK;
}

static pbl_status f_open(const void *mpi_comm, double timeout_s, void **ctx, int32_t *rank, int32_t *size,
                         int32_t *overlap_ok, char *err, size_t errlen)
{
    return f_open_device(mpi_comm, timeout_s, 0, ctx, rank, size, overlap_ok, err, errlen);
}

static void f_close(void *ctx) { free(ctx); }

static pbl_status f_sum_f32(void *ctx, float *data, int64_t n, int32_t failed, char *err, size_t errlen)
{
    for (int64_t i = 0; i < n; i++)
        data[i] += data[i];
    return PBL_OK;
}

static pbl_status f_min_max_u64(void *ctx, uint64_t x, uint64_t *min, uint64_t *max, char *err, size_t errlen)
{
    *min = *max = x;
    return PBL_OK;
}

static pbl_status f_broadcast(void *ctx, void *data, size_t bytes, int32_t root, char *err, size_t errlen)
{
    return PBL_OK;
}

static pbl_status f_sum_f32_device(void *ctx, float *data, int64_t n, void *stream, char *err, size_t errlen)
{
    fake *c = ctx;
    if (c->broken) {
        snprintf(err, errlen, "fake NCCL: the communicator was aborted after an earlier failure");
        return PBL_ERR_DEVICE;
    }
    /* the emulator the CUDA backend runs on, already loaded by the executor */
    const char *path = getenv("PEBBLE_CUDA_MODULE");
    void *h = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
    host_fn_launch launch = h ? (host_fn_launch)dlsym(h, "cudaLaunchHostFunc") : NULL;
    if (h)
        dlclose(h); /* only the reference NOLOAD took */
    job *j = malloc(sizeof *j);
    if (!launch || !j) {
        free(j);
        snprintf(err, errlen, "fake NCCL: no cudaLaunchHostFunc in PEBBLE_CUDA_MODULE (%s)", path ? path : "unset");
        return PBL_ERR_UNSUPPORTED;
    }
    *j = (job){ .c = c, .data = data, .n = n };
    atomic_fetch_add(&enqueued, 1);
    if (launch((cudaStream_t)stream, run_sum, j) != cudaSuccess) {
        atomic_fetch_sub(&enqueued, 1);
        free(j);
        snprintf(err, errlen, "fake NCCL: cudaLaunchHostFunc failed");
        return PBL_ERR_DEVICE;
    }
    return PBL_OK;
}

static pbl_status f_wait_f32_device(void *ctx, char *err, size_t errlen)
{
    fake *c = ctx;
    if (waits < MAX_WAITS)
        enqueued_at_wait[waits] = atomic_load(&enqueued);
    waits++;
    double deadline = now_s() + c->timeout_s;
    while (atomic_load(&done) < atomic_load(&enqueued)) {
        if (now_s() > deadline) {
            atomic_store(&c->aborted, 1); /* the stuck sums return: the stream drains */
            c->broken = 1;
            snprintf(err, errlen, "fake NCCL: all-reduce: another rank did not take part within %g s", c->timeout_s);
            return PBL_ERR_TIMEOUT;
        }
        sleep_ms(1);
    }
    return PBL_OK;
}

API const pbl__comm_module pbl_nccl_comm_module = {
    .open = f_open,
    .close = f_close,
    .sum_f32 = f_sum_f32,
    .min_max_u64 = f_min_max_u64,
    .broadcast = f_broadcast,
    .open_device = f_open_device,
    .sum_f32_device = f_sum_f32_device,
    .wait_f32_device = f_wait_f32_device,
};
