/*
 * bench/dp_sim_model.h — the event simulation behind bench/dp_sim: one data-parallel training
 * step on N ranks, one compute stream and one communication stream per rank, gradients
 * all-reduced in buckets.
 *
 * Pure: no pebble, no clock, no globals; plain numbers in, plain numbers out. bench/dp_sim.c
 * turns a graph into a dps_step (node costs in seconds, gradient sizes and the step that
 * finishes each) and test/test_dp_sim.c checks the simulation on hand-computed cases.
 *
 * The model (docs/data_parallel_sim.md says why, and what it leaves out):
 *
 *  - All-reduce of n bytes over N ranks, ring (reduce-scatter then all-gather; Thakur,
 *    Rabenseifner & Gropp 2005, "Optimization of collective communication operations in
 *    MPICH", IJHPCA 19(1), sec. 4.5; Patarasuk & Yuan 2009, "Bandwidth optimal all-reduce
 *    algorithms for clusters of workstations", JPDC 69(2)):
 *        T_ring(n, N) = 2(N-1)·α + 2(N-1)/N · n/β
 *    recursive doubling (the short-message algorithm of the same MPICH paper, N a power of 2;
 *    ceil(log2 N) rounds otherwise, an optimistic bound):
 *        T_rd(n, N)   = ceil(log2 N)·(α + n/β)
 *    Rabenseifner's (reduce-scatter by recursive halving, all-gather by recursive doubling; the
 *    long-message algorithm of the same paper, sec. 4.5, N a power of 2):
 *        T_rh(n, N)   = 2·ceil(log2 N)·α + 2(N-1)/N · n/β
 *    and "best", the smallest of the three per message (what MPICH's size switch approximates).
 *    The reduction arithmetic (γ per byte) is left out: it is small beside n/β on a network.
 *  - Buckets: the gradients in the order the backward pass finishes them (the schedule index
 *    of the node producing each; ties by gradient index), packed greedily: a bucket takes the
 *    next gradient while its bytes stay <= B, a gradient larger than B is a bucket alone,
 *    B = 0 gives one bucket per gradient, DPS_ONE_BUCKET one bucket for all; with a cap of
 *    M gradients (pbl_graph_data_parallel packs at most 16, the inputs bucket_pack takes) a
 *    bucket also closes when it holds M.
 *  - Compute stream: the non-update nodes in schedule order, each its cost in seconds, then
 *    the optimizer updates bucket by bucket, each waiting only for its own bucket's
 *    all-reduce. Updates do not run inside the backward pass: a compute stream that ran one
 *    there would stall on its all-reduce while backward work waits (PyTorch DDP likewise
 *    steps the optimizer after backward). This also keeps the step monotone: a slower link
 *    never gives a shorter step.
 *  - Communication stream: bucket k's all-reduce starts when its last gradient is finished
 *    and bucket k-1's all-reduce is done (one collective at a time, in bucket order). Without
 *    overlap every all-reduce waits for the end of the backward pass instead.
 *  - The step ends when the last update has run.
 */
#ifndef PEBBLE_BENCH_DP_SIM_MODEL_H
#define PEBBLE_BENCH_DP_SIM_MODEL_H

#include <stdint.h>

#define DPS_ONE_BUCKET INT64_MAX /* bucket_bytes: one bucket holding every gradient */

typedef enum dps_algo {
    DPS_RING, /* bandwidth-optimal ring */
    DPS_RD,   /* recursive doubling */
    DPS_RH,   /* Rabenseifner: recursive halving + doubling */
    DPS_BEST, /* the fastest of the three, per bucket */
} dps_algo;

typedef struct dps_link {
    double   alpha; /* seconds per message (latency), >= 0 */
    double   beta;  /* bytes per second per link, > 0 */
    dps_algo algo;
} dps_link;

typedef struct dps_grad {
    int64_t bytes;    /* > 0 */
    int32_t ready;    /* index into dps_step.compute_s of the node that finishes it */
    double  update_s; /* its optimizer update's time on the compute stream, >= 0 */
} dps_grad;

typedef struct dps_step {
    const double   *compute_s; /* [n_compute] non-update nodes in schedule order, seconds >= 0 */
    int32_t         n_compute;
    const dps_grad *grads;     /* [n_grads] */
    int32_t         n_grads;
} dps_step;

typedef struct dps_result {
    double  step_s;    /* the step: when the last update ends */
    double  compute_s; /* every node and update: the step with free communication */
    double  comm_s;    /* sum of the buckets' all-reduce times */
    double  exposed_s; /* step_s - compute_s: communication the compute stream waited for */
    double  hidden;    /* 1 - exposed_s / comm_s, the fraction of communication hidden; -1
                          when there is none (one rank) */
    int32_t n_buckets;
    int64_t max_bucket_bytes;
} dps_result;

/* The time of one all-reduce of `bytes` over `ranks` ranks (0 for one rank). */
double dps_allreduce_s(const dps_link *l, int64_t bytes, int64_t ranks);

/* The bucketing rule: at most bucket_bytes and (max_grads > 0) max_grads gradients a bucket.
 * order[0..n) gets the gradient indices in finishing order, bucket[i] the bucket of order[i]
 * (0, 1, ... ascending). Returns the number of buckets, -1 on bad input (n < 0, a gradient of
 * <= 0 bytes, bucket_bytes or max_grads < 0) or when out of memory. */
int32_t dps_buckets(const dps_grad *grads, int32_t n, int64_t bucket_bytes, int32_t max_grads, int32_t *order,
                    int32_t *bucket);

/* Simulates one step with dps_buckets' buckets. overlap = 0: every all-reduce waits for the
 * last compute node.
 * Returns 0, or -1 on bad input (a ready index out of range, negative times, ranks < 1, a
 * link with beta <= 0) or when out of memory; *out is then zeroed. */
int dps_simulate(const dps_step *s, const dps_link *l, int64_t ranks, int64_t bucket_bytes, int32_t max_grads,
                 int overlap, dps_result *out);

#endif
