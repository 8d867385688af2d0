/*
 * bench/dp_step.c — the data-parallel training step, measured (docs/data_parallel.md).
 *
 * The 784-512-512-10 ReLU MLP with SGD + momentum, the global batch --batch (default 128)
 * shared by the ranks. Run it alone (one rank) and under mpirun -np N; rank 0 prints one
 * table. Times, per step, the median of --reps repetitions of --iters steps (after --warmup):
 *
 *   in order   every node on one stream (comm_overlap 0)
 *   overlap    the communication nodes on a stream of their own (comm_overlap 1)
 * each as "compute" (no communicator: allreduce copies, the same nodes and threads) and
 * "step" (the communicator), on this rank's share of the batch; then the buckets' all-reduces
 * alone (pbl_comm_allreduce_sum of each bucket's size), and the share of the communication
 * time that overlap hides:
 *   hidden = 1 − (overlap step − overlap compute) / (in-order step − in-order compute)
 * BLAS runs one thread per rank (--threads, default 1), as several streams do.
 *
 * --nccl runs the ranks on the CUDA backend (one GPU per rank: Open MPI's local rank) with an
 * NCCL communicator, even for one rank, so that the all-reduce nodes go through NCCL: in order
 * on one CUDA stream, and with overlap on a CUDA stream of their own beside one compute stream
 * (streams = 1 in both, so the columns differ by the communication stream alone). The
 * all-reduces alone print "-" (NCCL sums device buffers; pbl_comm_allreduce_sum is MPI's).
 *
 *     dp_step [--batch 128] [--bucket BYTES] [--iters 40] [--reps 5] [--warmup 5] [--threads 1] [--nccl]
 *     mpirun -np 2 --oversubscribe --allow-run-as-root build/bench/dp_step
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pebble/pebble.h>

static const int64_t layers[] = { 784, 512, 512, 10 };
#define N_LAYERS 3

typedef struct net {
    pbl_graph *g;
    pbl_exec  *e;
    pbl_value  x, y, loss, params[2 * N_LAYERS];
    float     *w[2 * N_LAYERS];
    int64_t    n_buckets, bucket_elems[64];
} net;

/* PBL_BACKEND_CUDA under --nccl: parameters are written to the device, not bound */
static pbl_backend_kind backend = PBL_BACKEND_CPU;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int64_t numel(const pbl_graph *g, pbl_value v)
{
    pbl_value_info vi;
    pbl_graph_value_info(g, v, &vi);
    return pbl_shape_numel(&vi.shape);
}

static int build(net *n, int64_t batch, int dp, int64_t bucket, pbl_comm *comm, int overlap, int threads)
{
    memset(n, 0, sizeof *n);
    pbl_graph_create(&n->g, NULL);
    pbl_graph *g = n->g;
    n->x = pbl_input(g, "x", PBL_SHAPE(batch, layers[0]));
    n->y = pbl_label(g, "y", PBL_I32, PBL_SHAPE(batch));
    pbl_value h = n->x, grads[2 * N_LAYERS];
    char name[32];
    for (int l = 0; l < N_LAYERS; l++) {
        snprintf(name, sizeof name, "fc%d/w", l + 1);
        n->params[2 * l] = pbl_param(g, name, PBL_SHAPE(layers[l + 1], layers[l]));
        snprintf(name, sizeof name, "fc%d/b", l + 1);
        n->params[2 * l + 1] = pbl_param(g, name, PBL_SHAPE(layers[l + 1]));
        h = pbl_fully_connected(g, h, n->params[2 * l], n->params[2 * l + 1]);
        if (l + 1 < N_LAYERS)
            h = pbl_relu(g, h);
    }
    pbl_value loss = n->loss = pbl_softmax_cross_entropy(g, h, n->y);
    pbl_graph_set_output(g, "loss", loss);
    if (pbl_graph_gradient(g, loss, n->params, 2 * N_LAYERS, grads) != PBL_OK)
        goto fail;
    if (dp) {
        pbl_data_parallel_options o = pbl_data_parallel_options_default();
        o.bucket_bytes = bucket;
        if (pbl_graph_data_parallel(g, &o, grads, 2 * N_LAYERS, grads) != PBL_OK)
            goto fail;
        for (int k = 0; k < 64; k++) {
            snprintf(name, sizeof name, "dp/bucket%d", k);
            pbl_value b = pbl_graph_find_value(g, name);
            if (b == PBL_NONE)
                break;
            n->bucket_elems[n->n_buckets++] = numel(g, b);
        }
    }
    pbl_optimizer_options oo = pbl_optimizer_options_default(PBL_OPTIM_SGD_MOMENTUM);
    if (pbl_graph_add_optimizer(g, &oo, n->params, grads, 2 * N_LAYERS) != PBL_OK)
        goto fail;
    pbl_exec_options eo = pbl_exec_options_default();
    eo.threads = threads;
    eo.blas_threads = threads;
    eo.backend = backend;
    eo.comm = comm;
    eo.comm_overlap = overlap;
    if (backend == PBL_BACKEND_CUDA)
        eo.streams = 1; /* one compute stream: overlap adds the communication stream alone */
    char err[512];
    if (pbl_exec_create(&n->e, g, &eo, err, sizeof err) != PBL_OK) {
        fprintf(stderr, "dp_step: %s\n", err);
        return -1;
    }
    for (int p = 0; p < 2 * N_LAYERS; p++) {
        int64_t k = numel(g, n->params[p]);
        n->w[p] = malloc((size_t)k * sizeof(float));
        for (int64_t i = 0; i < k; i++)
            n->w[p][i] = (float)((i * 7919 + p) % 1000) * 2e-6f - 1e-3f;
        if (backend == PBL_BACKEND_CUDA)
            pbl_exec_write(n->e, n->params[p], n->w[p], (size_t)k * sizeof(float));
        else
            pbl_exec_bind(n->e, n->params[p], n->w[p], (size_t)k * sizeof(float));
    }
    float *x = calloc((size_t)(batch * layers[0]), sizeof *x);
    int32_t *y = calloc((size_t)batch, sizeof *y);
    for (int64_t i = 0; i < batch * layers[0]; i++)
        x[i] = (float)(i % 255) / 255.0f;
    for (int64_t i = 0; i < batch; i++)
        y[i] = (int32_t)(i % 10);
    pbl_exec_write(n->e, n->x, x, (size_t)(batch * layers[0]) * sizeof *x);
    pbl_exec_write(n->e, n->y, y, (size_t)batch * sizeof *y);
    free(x);
    free(y);
    return 0;
fail:
    fprintf(stderr, "dp_step: %s\n", pbl_graph_errmsg(g));
    return -1;
}

static void destroy(net *n)
{
    pbl_exec_destroy(n->e);
    pbl_graph_destroy(n->g);
    for (int p = 0; p < 2 * N_LAYERS; p++)
        free(n->w[p]);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median over reps of the mean step time (ms) of iters steps. comm: start each repetition
 * together (so ranks time the same steps). */
static double time_steps(net *n, pbl_comm *comm, int warmup, int iters, int reps)
{
    double t[64];
    for (int i = 0; i < warmup; i++)
        pbl_exec_run(n->e);
    for (int r = 0; r < reps; r++) {
        float sync = 0;
        if (comm)
            pbl_comm_allreduce_sum(comm, &sync, 1);
        double t0 = now();
        for (int i = 0; i < iters; i++)
            if (pbl_exec_run(n->e) != PBL_OK) {
                fprintf(stderr, "dp_step: %s\n", pbl_exec_errmsg(n->e));
                exit(1);
            }
        t[r] = (now() - t0) * 1e3 / iters;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp);
    if (getenv("DP_STEP_DEBUG")) {
        float loss = 0;
        pbl_exec_read(n->e, n->loss, &loss, sizeof loss);
        fprintf(stderr, "rank %d loss %g\n", (int)pbl_comm_rank(comm), loss);
    }
    return t[reps / 2];
}

static double time_comm(const net *n, pbl_comm *comm, int warmup, int iters, int reps)
{
    if (!comm || pbl_comm_size(comm) < 2 || backend == PBL_BACKEND_CUDA) /* NCCL wants device buffers */
        return 0;
    int64_t most = 0;
    for (int64_t k = 0; k < n->n_buckets; k++)
        most = n->bucket_elems[k] > most ? n->bucket_elems[k] : most;
    float *buf = calloc((size_t)most, sizeof *buf);
    double t[64];
    for (int r = -1; r < reps; r++) {
        double t0 = now();
        for (int i = 0; i < (r < 0 ? warmup : iters); i++)
            for (int64_t k = 0; k < n->n_buckets; k++)
                pbl_comm_allreduce_sum(comm, buf, n->bucket_elems[k]);
        if (r >= 0)
            t[r] = (now() - t0) * 1e3 / iters;
    }
    free(buf);
    qsort(t, (size_t)reps, sizeof *t, cmp);
    return t[reps / 2];
}

int main(int argc, char **argv)
{
    long batch = 128, bucket = 1 << 20, iters = 40, reps = 5, warmup = 5, threads = 1;
    int nccl = argc > 1 && !strcmp(argv[argc - 1], "--nccl");
    argc -= nccl;
    if (argc % 2 == 0) {
        fprintf(stderr, "dp_step: every option takes a value, except a last --nccl\n");
        return 2;
    }
    for (int i = 1; i + 1 < argc; i += 2) {
        long *dst = !strcmp(argv[i], "--batch") ? &batch : !strcmp(argv[i], "--bucket") ? &bucket
                  : !strcmp(argv[i], "--iters") ? &iters : !strcmp(argv[i], "--reps") ? &reps
                  : !strcmp(argv[i], "--warmup") ? &warmup : !strcmp(argv[i], "--threads") ? &threads : NULL;
        if (!dst || (*dst = strtol(argv[i + 1], NULL, 10)) < 1 || *dst > (1L << 30)) {
            fprintf(stderr, "usage: dp_step [--batch B] [--bucket BYTES] [--iters N] [--reps R] [--warmup W] [--threads T] [--nccl]\n");
            return 2;
        }
    }
    if (reps > 63)
        reps = 63;
    pbl_comm *comm = NULL;
    const char *world = getenv("OMPI_COMM_WORLD_SIZE");
    if (nccl) {
        char err[512];
        const char *local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
        if (pbl_comm_create_nccl(&comm, NULL, local ? atoi(local) : 0, err, sizeof err) != PBL_OK) {
            fprintf(stderr, "dp_step: %s\n", err);
            return 1;
        }
        backend = PBL_BACKEND_CUDA;
    } else if (world && atoi(world) > 1) {
        char err[512];
        if (pbl_comm_create_mpi(&comm, NULL, err, sizeof err) != PBL_OK) {
            fprintf(stderr, "dp_step: %s\n", err);
            return 1;
        }
    }
    int ranks = pbl_comm_size(comm), rank = pbl_comm_rank(comm);
    if (batch % ranks) {
        if (rank == 0)
            fprintf(stderr, "dp_step: --batch %ld is not a multiple of %d ranks\n", batch, ranks);
        pbl_comm_destroy(comm);
        return 2;
    }
    int64_t local = batch / ranks;
    /* each configuration in turn: [overlap][with communicator] */
    double t[2][2] = { { 0 } };
    net dp = { 0 };
    for (int ov = 0; ov < 2; ov++)
        for (int c = 0; c < 2; c++) {
            if (build(&dp, local, 1, bucket, c ? comm : NULL, ov, (int)threads))
                return 1;
            t[ov][c] = time_steps(&dp, comm, (int)warmup, (int)iters, (int)reps);
            destroy(&dp);
        }
    if (build(&dp, local, 1, bucket, comm, 0, (int)threads))
        return 1;
    double t_comm = time_comm(&dp, comm, (int)warmup, (int)iters, (int)reps);
    if (rank == 0) {
        double exposed = t[0][1] - t[0][0], exposed_ov = t[1][1] - t[1][0];
        printf("784-512-512-10, SGD+momentum, global batch %ld = %d rank(s) x %lld, buckets of %ld bytes (%lld "
               "buckets), %s %ld, median of %ld x %ld steps\n",
               batch, ranks, (long long)local, bucket, (long long)dp.n_buckets,
               nccl ? "CUDA backend and NCCL, host threads" : "BLAS threads", threads, reps, iters);
        printf("| ranks | in order: compute ms | in order: step ms | overlap: compute ms | overlap: step ms | "
               "all-reduces alone ms | hidden |\n");
        printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
        if (nccl)
            printf("| %d | %.3f | %.3f | %.3f | %.3f | - | ", ranks, t[0][0], t[0][1], t[1][0], t[1][1]);
        else
            printf("| %d | %.2f | %.2f | %.2f | %.2f | %.2f | ", ranks, t[0][0], t[0][1], t[1][0], t[1][1], t_comm);
        /* NCCL with one rank still runs its all-reduce kernels (copies): worth the column */
        if ((nccl || ranks > 1) && exposed > 0)
            printf("%.0f%% |\n", 100.0 * (1.0 - exposed_ov / exposed));
        else
            printf("- |\n");
    }
    destroy(&dp);
    pbl_comm_destroy(comm);
    return 0;
}
