/*
 * libpebble_mpi.so: the communication module over MPI (built when CMake finds MPI; loaded by
 * executor/comm/comm.c). It exports one symbol, the table pbl_mpi_comm_module.
 *
 * Every collective is non-blocking (MPI_Iallreduce, MPI_Ibcast) and polled with MPI_Test up
 * to the communicator's timeout, so a rank whose peers stopped (a failed run, a crash the
 * launcher has not yet cleaned up) gets PBL_ERR_TIMEOUT instead of waiting forever. Polling
 * also drives Open MPI's progress, which it makes only inside MPI calls.
 *
 * Sums: MPI_SUM over floats may associate differently on different ranks in some
 * algorithms, and the ranks' parameters must stay bit-identical. So the sum is done as a
 * reduce to rank 0 followed by a broadcast of rank 0's bits: every rank gets the very same
 * result, whatever algorithm the library picks.
 */
#include <errno.h>
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "executor/comm/comm.h"

typedef struct mpi_ctx {
    MPI_Comm comm;
    double   timeout_s;
    int      we_initialised;
} mpi_ctx;

static int opened_by_us; /* communicators open whose MPI pebble initialised */

static pbl_status mpi_fail(int rc, const char *what, char *err, size_t errlen)
{
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, text, &len);
    snprintf(err, errlen, "MPI: %s failed: %s", what, text);
    return PBL_ERR_DEVICE;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Polls req until it completes or the timeout passes: spinning first (a collective between
 * ranks on one machine takes microseconds), then yielding the core between tests, so a
 * waiting rank leaves it to threads still computing. Not sleeping: Open MPI moves a large
 * message in fragments, each only when a test drives its progress, and a 50 us sleep between
 * tests made the all-reduces of the 784-512-512-10 step (2.7 MB) take 79 ms instead of ~48
 * between two ranks on a loaded 2-core machine. Spinning without yielding was slower still
 * (95 ms): it takes the core from the rank's own computation. */
static pbl_status wait_all(mpi_ctx *c, int n, MPI_Request *req, const char *what, char *err, size_t errlen)
{
    double deadline = now_s() + c->timeout_s;
    for (long spins = 0;; spins++) {
        int done = 0;
        int rc = MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS)
            return mpi_fail(rc, what, err, errlen);
        if (done)
            return PBL_OK;
        if (spins > 2000) {
            if (now_s() > deadline) {
                /* the request cannot be cancelled (collectives cannot): it is left pending,
                 * and this communicator is unusable from now on */
                snprintf(err, errlen,
                         "MPI: %s: another rank did not take part within %g s (it failed, stopped, or runs "
                         "another graph)",
                         what, c->timeout_s);
                return PBL_ERR_TIMEOUT;
            }
            sched_yield();
        }
    }
}

static pbl_status wait_for(mpi_ctx *c, MPI_Request *req, const char *what, char *err, size_t errlen)
{
    return wait_all(c, 1, req, what, err, errlen);
}

static pbl_status m_open(const void *mpi_comm, double timeout_s, void **out, int32_t *rank, int32_t *size,
                         int32_t *overlap_ok, char *err, size_t errlen)
{
    *out = NULL;
    int inited = 0, finalized = 0, level = MPI_THREAD_SINGLE;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (finalized) {
        snprintf(err, errlen, "MPI: already finalised in this process");
        return PBL_ERR_DEVICE;
    }
    if (!inited && mpi_comm) {
        snprintf(err, errlen, "MPI: an MPI_Comm was given but MPI is not initialised");
        return PBL_ERR_INVALID_ARG;
    }
    mpi_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return PBL_ERR_NOMEM;
    }
    c->timeout_s = timeout_s;
    int rc = MPI_SUCCESS;
    if (!inited) {
        rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &level);
        if (rc != MPI_SUCCESS) {
            free(c);
            return mpi_fail(rc, "MPI_Init_thread", err, errlen);
        }
        c->we_initialised = 1;
        opened_by_us++;
    } else {
        MPI_Query_thread(&level);
    }
    MPI_Comm base = mpi_comm ? *(const MPI_Comm *)mpi_comm : MPI_COMM_WORLD;
    rc = MPI_Comm_dup(base, &c->comm); /* our collectives never match the program's own */
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
    int r = 0, n = 1;
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_rank(c->comm, &r);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_size(c->comm, &n);
    if (rc != MPI_SUCCESS) {
        pbl_status s = mpi_fail(rc, "MPI_Comm_dup", err, errlen);
        if (c->we_initialised && --opened_by_us == 0)
            MPI_Finalize();
        free(c);
        return s;
    }
    *rank = r;
    *size = n;
    *overlap_ok = level >= MPI_THREAD_SERIALIZED;
    *out = c;
    return PBL_OK;
}

static void m_close(void *ctx)
{
    mpi_ctx *c = ctx;
    if (!c)
        return;
    MPI_Comm_free(&c->comm);
    if (c->we_initialised && --opened_by_us == 0)
        MPI_Finalize();
    free(c);
}

/* Beside each reduce, the count of ranks whose run failed (a one-int all-reduce in flight at
 * the same time): every rank sees the same count, so all stop at the same collective and the
 * collectives stay matched (the communicator stays usable). */
static pbl_status m_sum_f32(void *ctx, float *data, int64_t n, int32_t failed, char *err, size_t errlen)
{
    mpi_ctx *c = ctx;
    int rank = 0, size = 1;
    MPI_Comm_rank(c->comm, &rank);
    MPI_Comm_size(c->comm, &size);
    for (int64_t at = 0; at < n;) { /* MPI counts are ints */
        int k = n - at > (1 << 30) ? 1 << 30 : (int)(n - at);
        MPI_Request req[2];
        int marks = failed ? 1 : 0;
        int rc = MPI_Ireduce(rank == 0 ? MPI_IN_PLACE : data + at, data + at, k, MPI_FLOAT, MPI_SUM, 0, c->comm, &req[0]);
        if (rc == MPI_SUCCESS)
            rc = MPI_Iallreduce(MPI_IN_PLACE, &marks, 1, MPI_INT, MPI_SUM, c->comm, &req[1]);
        pbl_status s = rc == MPI_SUCCESS ? wait_all(c, 2, req, "all-reduce (reduce)", err, errlen)
                                         : mpi_fail(rc, "MPI_Ireduce", err, errlen);
        if (s != PBL_OK)
            return s;
        if (marks > 0) {
            snprintf(err, errlen, "MPI: all-reduce: %d of the %d ranks failed their run%s", marks, size,
                     failed ? " (this one too)" : "");
            return PBL_ERR_DEVICE;
        }
        rc = MPI_Ibcast(data + at, k, MPI_FLOAT, 0, c->comm, &req[0]);
        s = rc == MPI_SUCCESS ? wait_for(c, &req[0], "all-reduce (broadcast)", err, errlen)
                              : mpi_fail(rc, "MPI_Ibcast", err, errlen);
        if (s != PBL_OK)
            return s;
        at += k;
    }
    return PBL_OK;
}

static pbl_status m_min_max_u64(void *ctx, uint64_t x, uint64_t *min, uint64_t *max, char *err, size_t errlen)
{
    mpi_ctx *c = ctx;
    uint64_t v[2] = { x, ~x }; /* max of ~x is ~min */
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, v, 2, MPI_UINT64_T, MPI_MAX, c->comm, &req);
    pbl_status s = rc == MPI_SUCCESS ? wait_for(c, &req, "graph check", err, errlen)
                                     : mpi_fail(rc, "MPI_Iallreduce", err, errlen);
    *max = v[0];
    *min = ~v[1];
    return s;
}

static pbl_status m_broadcast(void *ctx, void *data, size_t bytes, int32_t root, char *err, size_t errlen)
{
    mpi_ctx *c = ctx;
    for (size_t at = 0; at < bytes;) {
        int k = bytes - at > ((size_t)1 << 30) ? 1 << 30 : (int)(bytes - at);
        MPI_Request req;
        int rc = MPI_Ibcast((char *)data + at, k, MPI_BYTE, root, c->comm, &req);
        pbl_status s = rc == MPI_SUCCESS ? wait_for(c, &req, "broadcast", err, errlen)
                                         : mpi_fail(rc, "MPI_Ibcast", err, errlen);
        if (s != PBL_OK)
            return s;
        at += (size_t)k;
    }
    return PBL_OK;
}

__attribute__((visibility("default"))) const pbl__comm_module pbl_mpi_comm_module = {
    .open = m_open,
    .close = m_close,
    .sum_f32 = m_sum_f32,
    .min_max_u64 = m_min_max_u64,
    .broadcast = m_broadcast,
};
