/*
 * libpebble_nccl.so: the communication module over NCCL (built when CMake finds NCCL, the CUDA
 * toolkit and MPI; loaded by executor/comm/comm.c). It exports one table, pbl_nccl_comm_module.
 *
 * MPI brings the ranks together: this file compiles mpi_module.c in (its table renamed, so it
 * never clashes with libpebble_mpi.so's), and host collectives (the graph check, broadcast,
 * pbl_comm_allreduce_sum) go over MPI as in that module. NCCL does the one thing MPI cannot:
 * summing GPU memory on a CUDA stream (sum_f32_device, the CUDA allreduce kernel's call).
 *
 * Never blocking forever: the NCCL communicator is non-blocking (ncclConfig_t.blocking = 0),
 * its creation and each all-reduce's enqueue are polled (ncclCommGetAsyncError) up to the
 * timeout. The all-reduce itself is not waited for where it is enqueued: an event recorded
 * after it on its stream marks its end, and wait_f32_device, which the CUDA backend calls at
 * the end of the run, polls those events (cudaEventQuery) up to the timeout, so the host
 * enqueues the rest of the backward pass while the sums run. A sum that runs past the
 * timeout is aborted (ncclCommAbort): the rank gets PBL_ERR_TIMEOUT and the communicator
 * refuses every later device sum. A rank that fails before a sum never enqueues it, so its
 * peers time out the same way.
 *
 * Written and compiled (gcc -Werror) on a machine without a GPU: it has never run on one
 * (docs/data_parallel.md, bench/gpu_check.sh).
 */
#define pbl_mpi_comm_module pbl__nccl_mpi_part
#include "executor/comm/mpi_module.c"
#undef pbl_mpi_comm_module

#include <cuda_runtime_api.h>
#include <nccl.h>

/* The end of the latest device sum enqueued on one stream: sums on a stream complete in
 * order, so one event per stream marks all of them. */
typedef struct sum_mark {
    cudaStream_t stream;
    cudaEvent_t  done;
    int          pending; /* recorded since the last wait_f32_device */
} sum_mark;

typedef struct nccl_ctx {
    void      *mpi;  /* the MPI part's context */
    ncclComm_t comm; /* NULL until created */
    double     timeout_s;
    int32_t    size;
    int        broken; /* aborted after a timeout or an error: no more device sums */
    sum_mark  *marks;  /* one per stream a sum was ever enqueued on */
    int32_t    n_marks;
} nccl_ctx;

static pbl_status nccl_fail(ncclResult_t r, const char *what, char *err, size_t errlen)
{
    snprintf(err, errlen, "NCCL: %s failed: %s", what, ncclGetErrorString(r));
    return PBL_ERR_DEVICE;
}

/* Polls the communicator until its pending operation (creation, an enqueue) is no longer in
 * progress, up to the deadline. */
static pbl_status settle(nccl_ctx *c, double deadline, const char *what, char *err, size_t errlen)
{
    for (;;) {
        ncclResult_t st = ncclInProgress;
        ncclResult_t r = ncclCommGetAsyncError(c->comm, &st);
        if (r != ncclSuccess)
            return nccl_fail(r, "ncclCommGetAsyncError", err, errlen);
        if (st == ncclSuccess)
            return PBL_OK;
        if (st != ncclInProgress)
            return nccl_fail(st, what, err, errlen);
        if (now_s() > deadline) {
            snprintf(err, errlen, "NCCL: %s: not done within %g s (another rank failed or stopped)", what,
                     c->timeout_s);
            return PBL_ERR_TIMEOUT;
        }
        sched_yield();
    }
}

static void abort_comm(nccl_ctx *c)
{
    if (c->comm)
        ncclCommAbort(c->comm);
    c->comm = NULL;
    c->broken = 1;
}

/* Every rank learns whether all got this far (ok on each): the smallest of the flags. */
static pbl_status agree(nccl_ctx *c, int ok, const char *step, char *err, size_t errlen)
{
    uint64_t lo = 0, hi = 0;
    char why[256] = "";
    pbl_status s = m_min_max_u64(c->mpi, ok ? 1u : 0u, &lo, &hi, why, sizeof why);
    if (s != PBL_OK) {
        if (ok)
            snprintf(err, errlen, "%s", why);
        return s;
    }
    if (!lo && ok) {
        snprintf(err, errlen, "NCCL: another rank failed %s", step);
        return PBL_ERR_DEVICE;
    }
    return PBL_OK;
}

static void n_close(void *ctx)
{
    nccl_ctx *c = ctx;
    if (!c)
        return;
    if (c->comm)
        ncclCommDestroy(c->comm);
    for (int32_t i = 0; i < c->n_marks; i++)
        (void)cudaEventDestroy(c->marks[i].done);
    free(c->marks);
    m_close(c->mpi);
    free(c);
}

static pbl_status n_open_device(const void *mpi_comm, double timeout_s, int32_t device, void **out, int32_t *rank,
                                int32_t *size, int32_t *overlap_ok, char *err, size_t errlen)
{
    *out = NULL;
    nccl_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return PBL_ERR_NOMEM;
    }
    c->timeout_s = timeout_s;
    pbl_status s = m_open(mpi_comm, timeout_s, &c->mpi, rank, size, overlap_ok, err, errlen);
    if (s != PBL_OK) {
        free(c);
        return s;
    }
    c->size = *size;
    /* the device first, on every rank, before any rank waits on NCCL */
    cudaError_t ce = cudaSetDevice(device);
    if (ce != cudaSuccess)
        snprintf(err, errlen, "CUDA: cudaSetDevice(%d) failed: %s", (int)device, cudaGetErrorString(ce));
    s = agree(c, ce == cudaSuccess, "to select its GPU", err, errlen);
    if (s == PBL_OK && ce != cudaSuccess)
        s = PBL_ERR_DEVICE;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    ncclResult_t r = ncclSuccess;
    if (s == PBL_OK && *rank == 0) {
        r = ncclGetUniqueId(&id);
        if (r != ncclSuccess)
            nccl_fail(r, "ncclGetUniqueId", err, errlen);
    }
    if (s == PBL_OK)
        s = agree(c, r == ncclSuccess, "to make NCCL's unique id", err, errlen);
    if (s == PBL_OK && r != ncclSuccess)
        s = PBL_ERR_DEVICE;
    if (s == PBL_OK)
        s = m_broadcast(c->mpi, &id, sizeof id, 0, err, errlen);
    if (s == PBL_OK) {
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        cfg.blocking = 0;
        r = ncclCommInitRankConfig(&c->comm, *size, id, *rank, &cfg);
        if (r != ncclSuccess && r != ncclInProgress)
            s = nccl_fail(r, "ncclCommInitRankConfig", err, errlen);
        else
            s = settle(c, now_s() + timeout_s, "ncclCommInitRankConfig", err, errlen);
        if (s != PBL_OK)
            abort_comm(c);
        pbl_status t = agree(c, s == PBL_OK, "to join the NCCL communicator", err, errlen);
        if (s == PBL_OK)
            s = t;
    }
    if (s != PBL_OK) {
        n_close(c);
        return s;
    }
    *out = c;
    return PBL_OK;
}

static pbl_status n_sum_f32(void *ctx, float *data, int64_t n, int32_t failed, char *err, size_t errlen)
{
    return m_sum_f32(((nccl_ctx *)ctx)->mpi, data, n, failed, err, errlen);
}

static pbl_status n_min_max_u64(void *ctx, uint64_t x, uint64_t *min, uint64_t *max, char *err, size_t errlen)
{
    return m_min_max_u64(((nccl_ctx *)ctx)->mpi, x, min, max, err, errlen);
}

static pbl_status n_broadcast(void *ctx, void *data, size_t bytes, int32_t root, char *err, size_t errlen)
{
    return m_broadcast(((nccl_ctx *)ctx)->mpi, data, bytes, root, err, errlen);
}

/* The mark of `stream`, made (with its event) on the first sum enqueued there; NULL with err
 * on failure. */
static sum_mark *mark_of(nccl_ctx *c, cudaStream_t stream, char *err, size_t errlen)
{
    for (int32_t i = 0; i < c->n_marks; i++)
        if (c->marks[i].stream == stream)
            return &c->marks[i];
    sum_mark *m = realloc(c->marks, (size_t)(c->n_marks + 1) * sizeof *m);
    if (!m) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->marks = m;
    m = &c->marks[c->n_marks];
    *m = (sum_mark){ .stream = stream, .done = NULL, .pending = 0 };
    cudaError_t ce = cudaEventCreateWithFlags(&m->done, cudaEventDisableTiming);
    if (ce != cudaSuccess) {
        snprintf(err, errlen, "CUDA: cudaEventCreateWithFlags failed: %s", cudaGetErrorString(ce));
        return NULL;
    }
    c->n_marks++;
    return m;
}

/* ncclAllReduce(sum) in place on `stream`, and an event after it; returns once NCCL has taken
 * the call (the non-blocking communicator may still be enqueueing it), not when the sum is
 * done: n_wait_f32_device waits for that at the end of the run. NCCL's ring and tree give
 * every rank the same bits of the sum, as MPI's reduce-then-broadcast does. */
static pbl_status n_sum_f32_device(void *ctx, float *data, int64_t n, void *stream, char *err, size_t errlen)
{
    nccl_ctx *c = ctx;
    if (c->broken || !c->comm) {
        snprintf(err, errlen, "NCCL: the communicator was aborted after an earlier failure");
        return PBL_ERR_DEVICE;
    }
    cudaStream_t st = (cudaStream_t)stream;
    sum_mark *m = mark_of(c, st, err, errlen);
    if (!m)
        return PBL_ERR_DEVICE;
    ncclResult_t r = ncclAllReduce(data, data, (size_t)n, ncclFloat32, ncclSum, c->comm, st);
    pbl_status s = PBL_OK;
    if (r != ncclSuccess && r != ncclInProgress)
        s = nccl_fail(r, "ncclAllReduce", err, errlen);
    else
        s = settle(c, now_s() + c->timeout_s, "ncclAllReduce", err, errlen);
    if (s == PBL_OK) {
        cudaError_t ce = cudaEventRecord(m->done, st);
        if (ce != cudaSuccess) {
            snprintf(err, errlen, "CUDA: recording the all-reduce's end failed: %s", cudaGetErrorString(ce));
            s = PBL_ERR_DEVICE;
        }
    }
    if (s == PBL_OK)
        m->pending = 1;
    else
        abort_comm(c); /* a half-enqueued sum cannot be taken back: only an abort ends it */
    return s;
}

/* Polls the events of the sums enqueued since the last call, and NCCL's asynchronous error,
 * until every sum is done or the timeout (from this call) has passed; aborts the communicator
 * on a timeout or an error, which ends the sums still running so the stream drains. */
static pbl_status n_wait_f32_device(void *ctx, char *err, size_t errlen)
{
    nccl_ctx *c = ctx;
    double deadline = now_s() + c->timeout_s;
    pbl_status s = PBL_OK;
    for (long spins = 0; s == PBL_OK; spins++) {
        int32_t left = 0;
        for (int32_t i = 0; i < c->n_marks && s == PBL_OK; i++) {
            if (!c->marks[i].pending)
                continue;
            cudaError_t ce = cudaEventQuery(c->marks[i].done);
            if (ce == cudaSuccess) {
                c->marks[i].pending = 0;
            } else if (ce == cudaErrorNotReady) {
                left++;
            } else {
                snprintf(err, errlen, "CUDA: all-reduce stream failed: %s", cudaGetErrorString(ce));
                s = PBL_ERR_DEVICE;
            }
        }
        if (s != PBL_OK || left == 0)
            break;
        if (spins > 2000) { /* a sum this slow may be stuck: check NCCL and the clock */
            s = c->comm ? settle(c, deadline, "ncclAllReduce", err, errlen) : PBL_OK;
            if (s == PBL_OK && now_s() > deadline) {
                snprintf(err, errlen, "NCCL: all-reduce: another rank did not take part within %g s (it failed, "
                                      "stopped, or runs another graph)", c->timeout_s);
                s = PBL_ERR_TIMEOUT;
            }
            sched_yield();
        }
    }
    if (s != PBL_OK) {
        abort_comm(c); /* the sums may still be pending on their streams: only an abort ends them */
        for (int32_t i = 0; i < c->n_marks; i++)
            c->marks[i].pending = 0;
    }
    return s;
}

/* open: a communicator with no GPU is MPI's module; this one is asked for with a device */
static pbl_status n_open(const void *mpi_comm, double timeout_s, void **out, int32_t *rank, int32_t *size,
                         int32_t *overlap_ok, char *err, size_t errlen)
{
    return n_open_device(mpi_comm, timeout_s, 0, out, rank, size, overlap_ok, err, errlen);
}

__attribute__((visibility("default"))) const pbl__comm_module pbl_nccl_comm_module = {
    .open = n_open,
    .close = n_close,
    .sum_f32 = n_sum_f32,
    .min_max_u64 = n_min_max_u64,
    .broadcast = n_broadcast,
    .open_device = n_open_device,
    .sum_f32_device = n_sum_f32_device,
    .wait_f32_device = n_wait_f32_device,
};
