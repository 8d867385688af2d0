/*
 * Communication backends: the table a module (libpebble_mpi.so, built from mpi_module.c when
 * CMake finds MPI) exports, and what the executor needs of a pbl_comm.
 *
 * Every collective of a module gives up after the communicator's timeout with
 * PBL_ERR_TIMEOUT, so a rank that failed or stopped makes the others fail, not hang; engine
 * errors become PBL_ERR_DEVICE with the engine's own text in err.
 */
#ifndef PBL_COMM_H
#define PBL_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "graph/ir/op.h"
#include "pebble/exec.h"

typedef struct pbl__comm_module {
    /* Joins *(MPI_Comm *)mpi_comm (duplicated) or MPI_COMM_WORLD (initialising MPI when the
     * program has not). *overlap_ok: the thread level allows calls from the communication
     * thread (MPI_THREAD_SERIALIZED or more). */
    pbl_status (*open)(const void *mpi_comm, double timeout_s, void **ctx, int32_t *rank, int32_t *size,
                       int32_t *overlap_ok, char *err, size_t errlen);
    void (*close)(void *ctx); /* accepts NULL; finalises MPI if open initialised it (last one) */
    /* failed: as pbl__collective.sum_f32's; PBL_ERR_DEVICE when any rank marked it */
    pbl_status (*sum_f32)(void *ctx, float *data, int64_t n, int32_t failed, char *err, size_t errlen);
    /* The smallest and largest of every rank's x. */
    pbl_status (*min_max_u64)(void *ctx, uint64_t x, uint64_t *min, uint64_t *max, char *err, size_t errlen);
    pbl_status (*broadcast)(void *ctx, void *data, size_t bytes, int32_t root, char *err, size_t errlen);
    /* NCCL's module (libpebble_nccl.so, nccl_module.c) only; NULL in MPI's. open_device: as
     * open, then an NCCL communicator on GPU `device` (its unique id broadcast over MPI); every
     * rank fails when one does. sum_f32_device and wait_f32_device: pbl__collective's (the
     * sum only enqueued; the wait, by the timeout, at the end of the run). A module must have
     * all three for pbl_comm_create_nccl to use it. */
    pbl_status (*open_device)(const void *mpi_comm, double timeout_s, int32_t device, void **ctx, int32_t *rank,
                              int32_t *size, int32_t *overlap_ok, char *err, size_t errlen);
    pbl_status (*sum_f32_device)(void *ctx, float *data, int64_t n, void *stream, char *err, size_t errlen);
    pbl_status (*wait_f32_device)(void *ctx, char *err, size_t errlen);
} pbl__comm_module;

/* What allreduce kernels call (pbl__kargs.coll); NULL for NULL. */
const pbl__collective *pbl__comm_collective(const pbl_comm *c);
/* Whether the communicator sums GPU memory (pbl__collective.sum_f32_device: NCCL). */
int pbl__comm_device_ok(const pbl_comm *c);
/* Whether the CPU backend's communication thread may call the engine (MPI's thread level);
 * the CUDA backend enqueues device sums from the executor's thread and needs no such level. */
int pbl__comm_overlap_ok(const pbl_comm *c);
/* PBL_OK when every rank passes the same hash; PBL_ERR_SHAPE (err: how many differ) when not;
 * the collective's own failures. */
pbl_status pbl__comm_check_same(pbl_comm *c, uint64_t hash, char *err, size_t errlen);


/* ---- the executor's side (executor/comm/exec_comm.c) ---- */

/* Whether the op is one of data parallelism's (bucket_pack, allreduce, bucket_unpack): the
 * nodes that run on the communication stream. */
int pbl__op_is_comm(int32_t op);
/* *stream_of_node (allocated from m, g->n_nodes entries): 1 for communication nodes, 0 for
 * the rest; *n_comm: how many the schedule for `targets` (as pbl_exec_options.targets) runs
 * (0: nothing allocated, *stream_of_node NULL). PBL_ERR_NOMEM. */
pbl_status pbl__comm_streams(const pbl_graph *g, const char *const *targets, int32_t n_targets, pbl__mem *m,
                             int32_t **stream_of_node, int32_t *n_comm);
/* A 64-bit FNV-1a hash of what every rank must agree on: each value's name, kind, dtype and
 * shape, each node's op, name, inputs and attributes. */
uint64_t pbl__graph_hash(const pbl_graph *g);

#endif
