/*
 * Data parallelism (pebble/autodiff.h pbl_graph_data_parallel, pebble/exec.h pbl_comm).
 *
 * Alone (`test_data_parallel`): the pass's buckets (order, greedy packing, a big gradient
 * alone, names, the graph restored on bad arguments), and a data-parallel graph run with no
 * communicator on its communication stream (a worker thread: the TSan run covers it), whose
 * parameters after K steps are bit-identical to the plain graph's.
 *
 * Under mpirun (`test_data_parallel --mpi`, CTest data_parallel_np2/np3): each of N ranks
 * trains on its 1/N of every batch; after K steps its parameters equal those of one process
 * training on the whole batch (run here by every rank) within |a - b| <= 1e-5 + 1e-4 |b| (the
 * sums' order differs), and are bit-identical across ranks, with and without overlap. Ranks
 * with different graphs are refused (PBL_ERR_SHAPE on every rank); a rank whose run fails makes
 * the others fail at once at the same all-reduce (PBL_ERR_DEVICE), the communicator still
 * usable; a rank that stops makes the others fail with PBL_ERR_TIMEOUT, not hang.
 * Without MPI built, --mpi exits 77 (skipped). --nccl: run_nccl below (CTest nccl_np1/np2 here,
 * where there is no GPU; bench/gpu_check.sh on a GPU machine). --cuda-emu: the communication
 * stream on the CUDA backend, on the host emulator, with a stand-in NCCL module (run_cuda_emu
 * below; CTest data_parallel_cuda_emu; 77 without a CUDA backend to open). --nccl-emu: the real
 * NCCL module built against the emulator and a stand-in NCCL (run_nccl_emu; CTest nccl_emu_np1).
 */
#define _POSIX_C_SOURCE 200809L /* mkstemp */
#define _GNU_SOURCE             /* RTLD_NOLOAD */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "executor/exec_internal.h"
#include "pebble/pebble.h"

#define D     12 /* features */
#define H     16 /* hidden */
#define C     4  /* classes */
#define B     12 /* the whole batch: divisible by 1, 2, 3, 4 and 6 ranks */
#define STEPS 6

static int failures;
#define CHECK(cond, ...)                                              \
    do {                                                              \
        if (!(cond)) {                                                \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                             \
            fprintf(stderr, "\n");                                    \
            failures++;                                               \
        }                                                             \
    } while (0)

typedef struct net {
    pbl_graph *g;
    pbl_exec  *e;
    pbl_value  x, y, loss, params[6], grads[6], reduced[6];
    pbl_backend_kind kind; /* the executor's backend */
    float      w[6][H * H > H * D ? H * H : H * D];
} net;

static const int64_t pshape[6][2] = { { H, D }, { H, 1 }, { H, H }, { H, 1 }, { C, H }, { C, 1 } };
static int64_t pnumel(int p) { return pshape[p][0] * pshape[p][1]; }

static uint32_t rng;
static float uniform(void)
{
    rng = rng * 1664525u + 1013904223u;
    return (float)(rng >> 8) / 16777216.0f;
}

/* The MLP D-H-H-C on `batch` samples; dp: with the data-parallel pass (bucket_bytes). */
static void build(net *n, int64_t batch, int dp, int64_t bucket_bytes, int hidden)
{
    memset(n, 0, sizeof *n);
    pbl_graph_create(&n->g, NULL);
    pbl_graph *g = n->g;
    n->x = pbl_input(g, "x", PBL_SHAPE(batch, D));
    n->y = pbl_label(g, "y", PBL_I32, PBL_SHAPE(batch));
    const char *names[6] = { "w1", "b1", "w2", "b2", "w3", "b3" };
    pbl_shape shapes[6] = { PBL_SHAPE(hidden, D), PBL_SHAPE(hidden), PBL_SHAPE(H, hidden), PBL_SHAPE(H),
                            PBL_SHAPE(C, H), PBL_SHAPE(C) };
    for (int p = 0; p < 6; p++)
        n->params[p] = pbl_param(g, names[p], shapes[p]);
    pbl_value h = pbl_tanh(g, pbl_fully_connected(g, n->x, n->params[0], n->params[1]));
    h = pbl_relu(g, pbl_fully_connected(g, h, n->params[2], n->params[3]));
    pbl_value logits = pbl_fully_connected(g, h, n->params[4], n->params[5]);
    n->loss = pbl_softmax_cross_entropy(g, logits, n->y);
    pbl_graph_set_output(g, "loss", n->loss);
    CHECK(pbl_graph_build_status(g) == PBL_OK, "%s", pbl_graph_errmsg(g));
    CHECK(pbl_graph_gradient(g, n->loss, n->params, 6, n->grads) == PBL_OK, "%s", pbl_graph_errmsg(g));
    const pbl_value *use = n->grads;
    if (dp) {
        pbl_data_parallel_options o = pbl_data_parallel_options_default();
        o.bucket_bytes = bucket_bytes;
        CHECK(pbl_graph_data_parallel(g, &o, n->grads, 6, n->reduced) == PBL_OK, "%s", pbl_graph_errmsg(g));
        use = n->reduced;
    }
    pbl_optimizer_options oo = pbl_optimizer_options_default(PBL_OPTIM_SGD_MOMENTUM);
    oo.lr = 0.1;
    CHECK(pbl_graph_add_optimizer(g, &oo, n->params, use, 6) == PBL_OK, "%s", pbl_graph_errmsg(g));
}

/* The backend the ranks' executors use: CPU, or CUDA under --nccl on a GPU machine, where the
 * parameters are written to the device and read back after training (binds are host memory). */
static pbl_backend_kind backend = PBL_BACKEND_CPU;

/* The executor for options o, its parameters set to the same start. */
static pbl_status start_with(net *n, const pbl_exec_options *o, char *err, size_t errlen)
{
    n->kind = o->backend;
    pbl_status s = pbl_exec_create(&n->e, n->g, o, err, errlen);
    if (s != PBL_OK)
        return s;
    rng = 42;
    for (int p = 0; p < 6; p++) {
        for (int64_t i = 0; i < pnumel(p); i++)
            n->w[p][i] = (2.0f * uniform() - 1.0f) * 0.3f;
        if (n->kind == PBL_BACKEND_CUDA)
            pbl_exec_write(n->e, n->params[p], n->w[p], (size_t)pnumel(p) * sizeof(float));
        else
            pbl_exec_bind(n->e, n->params[p], n->w[p], (size_t)pnumel(p) * sizeof(float));
    }
    return PBL_OK;
}

static pbl_exec_options options(pbl_comm *comm, int overlap)
{
    pbl_exec_options o = pbl_exec_options_default();
    if (comm)
        o.backend = backend;
    o.comm = comm;
    o.comm_overlap = overlap;
    o.blas_threads = 1; /* the bits under test are ours, not threaded BLAS's */
    return o;
}

static pbl_status start(net *n, pbl_comm *comm, int overlap, char *err, size_t errlen)
{
    pbl_exec_options o = options(comm, overlap);
    return start_with(n, &o, err, errlen);
}

static void finish(net *n)
{
    pbl_exec_destroy(n->e);
    pbl_graph_destroy(n->g);
    n->e = NULL;
    n->g = NULL;
}

/* Batch `step`'s samples [lo, lo + count) of the whole batch B. */
static void batch_of(int step, int64_t lo, int64_t count, float *x, int32_t *y)
{
    rng = 1000u + (uint32_t)step;
    for (int64_t i = 0; i < B; i++) {
        int32_t label = (int32_t)(uniform() * C);
        for (int j = 0; j < D; j++) {
            float v = 2.0f * uniform() - 1.0f + (j % C == label ? 1.0f : 0.0f);
            if (i >= lo && i < lo + count)
                x[(i - lo) * D + j] = v;
        }
        if (i >= lo && i < lo + count)
            y[i - lo] = label;
    }
}

static pbl_status train(net *n, int64_t lo, int64_t count)
{
    float x[B * D];
    int32_t y[B];
    for (int s = 0; s < STEPS; s++) {
        batch_of(s, lo, count, x, y);
        pbl_exec_write(n->e, n->x, x, (size_t)(count * D) * sizeof(float));
        pbl_exec_write(n->e, n->y, y, (size_t)count * sizeof(int32_t));
        pbl_status st = pbl_exec_run(n->e);
        if (st != PBL_OK)
            return st;
    }
    return PBL_OK;
}

/* CUDA: the trained parameters back into n->w (CPU: bound, already there). */
static void read_back(net *n)
{
    for (int p = 0; p < 6 && n->kind == PBL_BACKEND_CUDA; p++)
        pbl_exec_read(n->e, n->params[p], n->w[p], (size_t)pnumel(p) * sizeof(float));
}

/* ---- alone: the pass and the communication stream ----------------------------------------- */

static pbl_node node_named(const pbl_graph *g, const char *name) { return pbl_graph_find_node(g, name); }

static void test_buckets(void)
{
    net n;
    /* w3+b3 (4x16 + 4 floats = 272 bytes) finish first, then w2+b2 (1088), then w1+b1 (832) */
    build(&n, B, 1, 1100, H);
    const pbl_graph *g = n.g;
    pbl_node_info info;
    CHECK(node_named(g, "dp/bucket0") != PBL_NONE, "bucket 0");
    CHECK(node_named(g, "dp/bucket3") == PBL_NONE, "no bucket 3");
    /* bucket 0: the last layer's gradients (w3, b3, then 16x16 w2 does not fit: 272 + 1024 > 1100) */
    if (pbl_graph_node_info(g, node_named(g, "dp/bucket0"), &info) == PBL_OK) {
        CHECK(info.n_inputs == 2, "bucket 0 holds %d gradients", (int)info.n_inputs);
        CHECK(info.n_inputs == 2 && (info.inputs[0] == n.grads[4] || info.inputs[0] == n.grads[5]),
              "bucket 0 starts with the last layer's gradient");
    }
    pbl_value flat = pbl_graph_find_value(g, "dp/bucket0");
    pbl_value_info vi;
    CHECK(flat != PBL_NONE && pbl_graph_value_info(g, flat, &vi) == PBL_OK && vi.shape.ndim == 1 &&
              vi.shape.dim[0] == C * H + C,
          "bucket 0 is one flat value of %d floats", C * H + C);
    for (int p = 0; p < 6; p++)
        CHECK(n.reduced[p] != PBL_NONE && n.reduced[p] != n.grads[p], "param %d has a reduced gradient", p);
    /* the buckets are ordinary nodes and values: saved, loaded and planned like any (pebble plan/viz) */
    char path[] = "/tmp/test_data_parallel_XXXXXX";
    int fd = mkstemp(path);
    char err[256];
    pbl_graph *back = NULL;
    CHECK(fd >= 0 && pbl_graph_save_json(g, path, err, sizeof err) == PBL_OK, "save: %s", err);
    CHECK(pbl_graph_load_json(&back, path, NULL, err, sizeof err) == PBL_OK, "load: %s", err);
    CHECK(back && pbl_graph_node_count(back) == pbl_graph_node_count(g) &&
              pbl_graph_find_value(back, "dp/bucket0/allreduce") != PBL_NONE,
          "the JSON round trip keeps the buckets");
    pbl_graph_destroy(back);
    if (fd >= 0) {
        close(fd);
        unlink(path);
    }
    finish(&n);

    /* a bucket smaller than every gradient: each gradient a bucket alone */
    build(&n, B, 1, 1, H);
    CHECK(node_named(n.g, "dp/bucket5") != PBL_NONE && node_named(n.g, "dp/bucket6") == PBL_NONE,
          "6 buckets of one gradient");
    finish(&n);

    /* bad arguments leave the graph as it was */
    build(&n, B, 0, 0, H);
    int32_t nodes0 = pbl_graph_node_count(n.g);
    pbl_data_parallel_options o = pbl_data_parallel_options_default();
    pbl_value red[6], twice[2] = { n.grads[0], n.grads[0] };
    o.bucket_bytes = 0;
    CHECK(pbl_graph_data_parallel(n.g, &o, n.grads, 6, red) == PBL_ERR_INVALID_ARG, "bucket_bytes 0");
    o = pbl_data_parallel_options_default();
    CHECK(pbl_graph_data_parallel(n.g, &o, twice, 2, red) == PBL_ERR_INVALID_ARG, "a gradient twice");
    CHECK(strstr(pbl_graph_errmsg(n.g), "twice") != NULL, "message: %s", pbl_graph_errmsg(n.g));
    CHECK(pbl_graph_data_parallel(n.g, &o, n.params, 1, red) == PBL_ERR_INVALID_ARG, "a parameter as gradient");
    CHECK(pbl_graph_node_count(n.g) == nodes0, "graph restored");
    /* in place: reduced may be grads itself */
    pbl_value same[6];
    memcpy(same, n.grads, sizeof same);
    CHECK(pbl_graph_data_parallel(n.g, &o, same, 6, same) == PBL_OK, "%s", pbl_graph_errmsg(n.g));
    for (int p = 0; p < 6; p++) {
        pbl_node_info ni;
        pbl_value_info vi2;
        CHECK(same[p] != PBL_NONE && same[p] != n.grads[p], "in place: param %d reduced", p);
        CHECK(same[p] != PBL_NONE && pbl_graph_value_info(n.g, same[p], &vi2) == PBL_OK &&
                  pbl_graph_node_info(n.g, vi2.producer, &ni) == PBL_OK && strcmp(ni.op, "bucket_unpack") == 0,
              "in place: param %d's reduced gradient comes from bucket_unpack", p);
    }
    finish(&n);
}

/* One process: the data-parallel graph on its communication stream gives the plain graph's bits. */
static void test_alone(void)
{
    char err[512];
    net plain, dp;
    build(&plain, B, 0, 0, H);
    build(&dp, B, 1, 1100, H);
    CHECK(start(&plain, NULL, 1, err, sizeof err) == PBL_OK, "%s", err);
    CHECK(start(&dp, NULL, 1, err, sizeof err) == PBL_OK, "%s", err);
    pbl_exec_stats st;
    pbl_exec_stats_get(dp.e, &st);
    CHECK(st.streams == 2, "communication on a stream of its own: %d streams", (int)st.streams);
    CHECK(train(&plain, 0, B) == PBL_OK, "%s", pbl_exec_errmsg(plain.e));
    CHECK(train(&dp, 0, B) == PBL_OK, "%s", pbl_exec_errmsg(dp.e));
    for (int p = 0; p < 6; p++)
        CHECK(memcmp(plain.w[p], dp.w[p], (size_t)pnumel(p) * sizeof(float)) == 0, "param %d bit-identical", p);
    /* an evaluation executor over the data-parallel graph (the forward pass only: no
     * communication node in its schedule) runs on one stream */
    pbl_exec *ev = NULL;
    const char *targets[] = { "loss" };
    pbl_exec_options eo = pbl_exec_options_default();
    eo.targets = targets;
    eo.n_targets = 1;
    CHECK(pbl_exec_create(&ev, dp.g, &eo, err, sizeof err) == PBL_OK, "evaluation executor: %s", err);
    if (ev) {
        pbl_exec_stats es;
        pbl_exec_stats_get(ev, &es);
        CHECK(es.streams == 1, "evaluation: %d streams", (int)es.streams);
    }
    pbl_exec_destroy(ev);
    finish(&plain);
    finish(&dp);
}

/* ---- under mpirun ------------------------------------------------------------------------ */

static int close_enough(const float *a, const float *b, int64_t n, double *worst)
{
    int ok = 1;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]), tol = 1e-5 + 1e-4 * fabs((double)b[i]);
        if (d > *worst)
            *worst = d;
        ok &= d <= tol;
    }
    return ok;
}

static void test_ranks(pbl_comm *comm, int overlap)
{
    int32_t r = pbl_comm_rank(comm), n = pbl_comm_size(comm);
    char err[512];
    net whole, part;
    build(&whole, B, 0, 0, H);
    build(&part, B / n, 1, 1100, H);
    CHECK(start(&whole, NULL, 0, err, sizeof err) == PBL_OK, "%s", err);
    CHECK(start(&part, comm, overlap, err, sizeof err) == PBL_OK, "%s", err);
    CHECK(train(&whole, 0, B) == PBL_OK, "%s", pbl_exec_errmsg(whole.e));
    CHECK(train(&part, (int64_t)r * (B / n), B / n) == PBL_OK, "%s", pbl_exec_errmsg(part.e));
    read_back(&part);
    double worst = 0;
    for (int p = 0; p < 6; p++) {
        CHECK(close_enough(part.w[p], whole.w[p], pnumel(p), &worst), "rank %d param %d: %d ranks vs one process",
              (int)r, p, (int)n);
        float theirs[H * H > H * D ? H * H : H * D];
        memcpy(theirs, part.w[p], (size_t)pnumel(p) * sizeof(float));
        CHECK(pbl_comm_broadcast(comm, theirs, (size_t)pnumel(p) * sizeof(float), 0) == PBL_OK, "%s",
              pbl_comm_errmsg(comm));
        CHECK(memcmp(theirs, part.w[p], (size_t)pnumel(p) * sizeof(float)) == 0,
              "rank %d param %d bit-identical to rank 0's", (int)r, p);
    }
    if (r == 0)
        printf("%d ranks, overlap %d: after %d steps the largest difference from one process is %.3g\n", (int)n,
               overlap, STEPS, worst);
    finish(&whole);
    finish(&part);
}

/* Rank 1's hidden layer is wider: every rank is refused. */
static void test_different_graphs(pbl_comm *comm)
{
    int32_t r = pbl_comm_rank(comm), n = pbl_comm_size(comm);
    char err[512] = "";
    net part;
    build(&part, B / n, 1, 1100, r == 1 ? H + 1 : H);
    pbl_status s = start(&part, comm, 1, err, sizeof err);
    CHECK(s == PBL_ERR_SHAPE, "rank %d: different graphs refused (%s): %s", (int)r, pbl_status_str(s), err);
    CHECK(strstr(err, "same graph") != NULL, "message: %s", err);
    if (r == 0)
        printf("different graphs: %s\n", err);
    finish(&part);
}

/* Rank 1's labels are out of range: its run fails before its all-reduce, which it still joins
 * marked as failed, so every other rank fails at that all-reduce at once (PBL_ERR_DEVICE, no
 * timeout) and the communicator stays usable. */
static void test_failing_rank(pbl_comm *comm)
{
    char err[512];
    int32_t r = pbl_comm_rank(comm), n = pbl_comm_size(comm);
    net part;
    build(&part, B / n, 1, 1100, H);
    CHECK(start(&part, comm, 1, err, sizeof err) == PBL_OK, "%s", err);
    float x[B * D];
    int32_t y[B];
    batch_of(0, 0, B / n, x, y);
    if (r == 1)
        y[0] = 99;
    pbl_exec_write(part.e, part.x, x, (size_t)(B / n * D) * sizeof(float));
    pbl_exec_write(part.e, part.y, y, (size_t)(B / n) * sizeof(int32_t));
    pbl_status s = pbl_exec_run(part.e);
    if (r == 1)
        CHECK(s != PBL_OK && s != PBL_ERR_DEVICE && s != PBL_ERR_TIMEOUT, "rank 1's own failure: %s",
              pbl_status_str(s));
    else
        CHECK(s == PBL_ERR_DEVICE && strstr(pbl_exec_errmsg(part.e), "1 of the") != NULL,
              "rank %d learns of rank 1's failure (%s): %s", (int)r, pbl_status_str(s), pbl_exec_errmsg(part.e));
    if (r == 0)
        printf("a failing rank: rank 0 gets '%s'\n", pbl_exec_errmsg(part.e));
    finish(&part);
    float one = 1;
    CHECK(pbl_comm_allreduce_sum(comm, &one, 1) == PBL_OK && one == (float)n, "the communicator still works: %s",
          pbl_comm_errmsg(comm));
}

/* Rank 1 never runs its step: every other rank's all-reduce gives up after the timeout.
 * Last: the timed-out collective is left pending, its communicator not destroyed. */
static void test_stopped_rank(void)
{
    char err[512];
    pbl_comm *comm = NULL;
    pbl_comm_options co = pbl_comm_options_default();
    co.timeout_s = 1.0;
    CHECK(pbl_comm_create_mpi(&comm, &co, err, sizeof err) == PBL_OK, "%s", err);
    if (!comm)
        return;
    int32_t r = pbl_comm_rank(comm), n = pbl_comm_size(comm);
    net part;
    build(&part, B / n, 1, 1100, H);
    CHECK(start(&part, comm, 1, err, sizeof err) == PBL_OK, "%s", err);
    float x[B * D];
    int32_t y[B];
    batch_of(0, 0, B / n, x, y);
    pbl_exec_write(part.e, part.x, x, (size_t)(B / n * D) * sizeof(float));
    pbl_exec_write(part.e, part.y, y, (size_t)(B / n) * sizeof(int32_t));
    if (r != 1) {
        pbl_status s = pbl_exec_run(part.e);
        CHECK(s == PBL_ERR_TIMEOUT, "rank %d times out (%s): %s", (int)r, pbl_status_str(s), pbl_exec_errmsg(part.e));
        if (r == 0)
            printf("a stopped rank: rank 0 gets '%s'\n", pbl_exec_errmsg(part.e));
    }
    finish(&part);
    /* not destroyed: freeing it would wait for the pending collective */
}

/* The CUDA backend with an MPI communicator of several ranks: refused at creation (MPI sums
 * host memory; the CUDA allreduce needs NCCL), on every rank, when a CUDA backend opens at all
 * (CTest gives it the host emulator). */
static void test_cuda_needs_nccl(pbl_comm *comm)
{
    char err[512];
    net n;
    build(&n, B / pbl_comm_size(comm), 1, 1100, H);
    pbl_exec_options o = pbl_exec_options_default();
    o.backend = PBL_BACKEND_CUDA;
    o.comm_overlap = 0; /* the CPU backend's */
    pbl_exec *plain = NULL;
    if (pbl_exec_create(&plain, n.g, &o, err, sizeof err) != PBL_OK) {
        printf("no CUDA backend, refusal of CUDA + MPI not checked: %s\n", err);
        pbl_graph_destroy(n.g);
        return;
    }
    pbl_exec_destroy(plain);
    o.comm = comm;
    pbl_status s = pbl_exec_create(&n.e, n.g, &o, err, sizeof err);
    CHECK(s == PBL_ERR_UNSUPPORTED && strstr(err, "NCCL") != NULL, "CUDA + MPI: status %d: %s", (int)s, err);
    finish(&n);
}

static int run_mpi(void)
{
    char err[512];
    pbl_comm *comm = NULL;
    pbl_status s = pbl_comm_create_mpi(&comm, NULL, err, sizeof err);
    if (s == PBL_ERR_UNSUPPORTED) {
        printf("skipped: %s\n", err);
        return 77;
    }
    CHECK(s == PBL_OK, "%s", err);
    if (!comm)
        return 1;
    if (B % pbl_comm_size(comm) != 0) {
        fprintf(stderr, "%d ranks do not divide the batch of %d\n", (int)pbl_comm_size(comm), B);
        return 2;
    }
    test_ranks(comm, 1);
    test_ranks(comm, 0);
    if (pbl_comm_size(comm) > 1) {
        test_different_graphs(comm);
        test_cuda_needs_nccl(comm);
    }
    /* every rank done with `comm` before the failure test's timeouts start */
    float one = 1;
    CHECK(pbl_comm_allreduce_sum(comm, &one, 1) == PBL_OK, "%s", pbl_comm_errmsg(comm));
    CHECK(one == (float)pbl_comm_size(comm), "allreduce_sum of ones: %g", one);
    if (pbl_comm_size(comm) > 1) {
        test_failing_rank(comm);
        test_stopped_rank();
    }
    int all = failures;
    float f = (float)failures;
    if (pbl_comm_allreduce_sum(comm, &f, 1) == PBL_OK)
        all = (int)f;
    pbl_comm_destroy(comm);
    return all ? 1 : 0;
}

/* --nccl: an NCCL communicator on this rank's GPU (Open MPI's local rank, else 0). Without a
 * GPU (this build machine) its creation must fail cleanly on every rank: PBL_ERR_DEVICE and a
 * message, no crash, no hang (CTest's timeout) -- unless --need-gpu, as bench/gpu_check.sh
 * runs it on a GPU machine. With one, the ranks train on the CUDA backend as test_ranks does
 * on the CPU. 77 (skipped) when pebble was built without NCCL. */
static int run_nccl(int need_gpu)
{
    char err[512] = "";
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    int32_t device = local ? (int32_t)atoi(local) : 0;
    pbl_comm_options co = pbl_comm_options_default();
    co.timeout_s = 30;
    pbl_comm *comm = (pbl_comm *)1;
    pbl_status s = pbl_comm_create_nccl(&comm, &co, device, err, sizeof err);
    if (s == PBL_ERR_UNSUPPORTED) {
        printf("skipped: %s\n", err);
        return 77;
    }
    if (s != PBL_OK) {
        CHECK(comm == NULL, "no communicator on failure");
        CHECK(err[0] != 0, "a message");
        CHECK(!need_gpu, "NCCL on GPU %d: %s", (int)device, err);
        if (!need_gpu) {
            CHECK(s == PBL_ERR_DEVICE || s == PBL_ERR_TIMEOUT, "status %d: %s", (int)s, err);
            printf("no GPU here, refused cleanly: %s\n", err);
        }
        return failures ? 1 : 0;
    }
    if (B % pbl_comm_size(comm) != 0) {
        fprintf(stderr, "%d ranks do not divide the batch of %d\n", (int)pbl_comm_size(comm), B);
        pbl_comm_destroy(comm);
        return 2;
    }
    backend = PBL_BACKEND_CUDA;
    test_ranks(comm, 1); /* the all-reduces on a CUDA stream of their own */
    test_ranks(comm, 0); /* in order on the compute stream */
    int all = failures;
    float f = (float)failures;
    if (pbl_comm_allreduce_sum(comm, &f, 1) == PBL_OK)
        all = (int)f;
    pbl_comm_destroy(comm);
    if (pbl_comm_rank(NULL) == 0 && !all)
        printf("ok: NCCL data parallelism on the CUDA backend\n");
    return all ? 1 : 0;
}

/* ---- --cuda-emu: the communication stream on the CUDA backend, on the host emulator ----------
 *
 * Run by CTest as data_parallel_cuda_emu with PEBBLE_CUDA_MODULE (the emulator, which runs each
 * stream on a thread of its own) and PEBBLE_NCCL_MODULE (test/cuda_emu/fake_nccl.c, a stand-in
 * NCCL whose device sums are host functions enqueued on the caller's stream). */

/* How many buckets the pass made (dp/bucket<k>/allreduce for k = 0, 1, ...). */
static int n_buckets(const pbl_graph *g)
{
    char name[64];
    int k = 0;
    for (;; k++) {
        snprintf(name, sizeof name, "dp/bucket%d/allreduce", k);
        if (node_named(g, name) == PBL_NONE)
            return k;
    }
}

/* Every bucket_pack, allreduce and bucket_unpack node of the data-parallel graph on `comm_stream`,
 * every other scheduled node on stream 0. */
static void check_placement(const net *n, int32_t comm_stream, const char *what)
{
    int comm_nodes = 0, other = 0;
    for (pbl_node i = 0; i < pbl_graph_node_count(n->g); i++) {
        int32_t st = pbl__exec_node_stream(n->e, i);
        pbl_node_info info;
        pbl_graph_node_info(n->g, i, &info);
        const char *op = info.op;
        int is_comm = strcmp(op, "bucket_pack") == 0 || strcmp(op, "allreduce") == 0 || strcmp(op, "bucket_unpack") == 0;
        if (st < 0)
            continue;
        comm_nodes += is_comm;
        other += !is_comm;
        CHECK(st == (is_comm ? comm_stream : 0), "%s: node %d (%s) on stream %d", what, (int)i, op, (int)st);
    }
    CHECK(comm_nodes >= 3 && other > 0, "%s: %d communication nodes, %d others scheduled", what, comm_nodes, other);
}

static int same_params(const net *a, const net *b)
{
    int same = 1;
    for (int p = 0; p < 6; p++)
        same &= memcmp(a->w[p], b->w[p], (size_t)pnumel(p) * sizeof(float)) == 0;
    return same;
}

/* Trains the data-parallel graph on the whole batch on the CUDA backend with options o; the
 * parameters end in n->w. */
static pbl_status train_cuda(net *n, const pbl_exec_options *o, char *err, size_t errlen)
{
    build(n, B, 1, 1100, H);
    pbl_status s = start_with(n, o, err, errlen);
    if (s != PBL_OK)
        return s;
    s = train(n, 0, B);
    if (s == PBL_OK)
        read_back(n);
    else
        snprintf(err, errlen, "%s", pbl_exec_errmsg(n->e));
    return s;
}

/* No communicator (allreduce copies): overlap puts the communication nodes on CUDA stream 1
 * beside one compute stream, with the same bits as running them in order, and the step of one
 * CPU process within the CPU/CUDA tolerance; several compute streams with it are refused. */
static void test_cuda_overlap_alone(void)
{
    char err[512] = "";
    net cpu, in_order, overlap, captured;
    build(&cpu, B, 0, 0, H);
    CHECK(start(&cpu, NULL, 0, err, sizeof err) == PBL_OK, "%s", err);
    CHECK(train(&cpu, 0, B) == PBL_OK, "%s", pbl_exec_errmsg(cpu.e));

    pbl_exec_options o = options(NULL, 0);
    o.backend = PBL_BACKEND_CUDA;
    CHECK(train_cuda(&in_order, &o, err, sizeof err) == PBL_OK, "in order: %s", err);
    o.comm_overlap = 1;
    CHECK(train_cuda(&overlap, &o, err, sizeof err) == PBL_OK, "overlap: %s", err);
    pbl_exec_stats st = { 0 };
    if (overlap.e)
        pbl_exec_stats_get(overlap.e, &st);
    CHECK(st.streams == 2 && st.waits > 0, "overlap: %d streams, %d waits (one compute stream, one communication)",
          (int)st.streams, (int)st.waits);
    /* planned over happens-before on the two streams, and verified there (pbl_exec_create) */
    CHECK(st.strategy && strcmp(st.strategy, "hb") == 0, "overlap: storage strategy %s",
          st.strategy ? st.strategy : "(none)");
    if (overlap.e)
        check_placement(&overlap, 1, "overlap");
    CHECK(same_params(&overlap, &in_order), "overlap bit-identical to in order on CUDA");
    double worst = 0;
    for (int p = 0; p < 6; p++)
        CHECK(close_enough(overlap.w[p], cpu.w[p], pnumel(p), &worst), "param %d: CUDA overlap vs one CPU process", p);
    /* captured into one CUDA graph: both streams forked from and joined into stream 0 */
    o.cuda_graph = 1;
    CHECK(train_cuda(&captured, &o, err, sizeof err) == PBL_OK, "overlap, cuda_graph: %s", err);
    CHECK(same_params(&captured, &in_order), "overlap captured bit-identical to in order");
    printf("CUDA emulator, overlap: 2 streams, %d waits a run, bit-identical to in order; largest difference "
           "from one CPU process %.3g\n", (int)st.waits, worst);
    finish(&cpu);
    finish(&in_order);
    finish(&overlap);
    finish(&captured);

    net refused;
    build(&refused, B, 1, 1100, H);
    o = options(NULL, 1);
    o.backend = PBL_BACKEND_CUDA;
    o.streams = 2;
    pbl_status s = start_with(&refused, &o, err, sizeof err);
    CHECK(s == PBL_ERR_UNSUPPORTED && strstr(err, "compute streams") != NULL,
          "2 compute streams + the communication stream refused (%s): %s", pbl_status_str(s), err);
    finish(&refused);
}

/* With the stand-in's peer never coming (its hang set) and a timeout of 0.5 s: the run fails
 * with PBL_ERR_TIMEOUT naming an all-reduce, and the next run at once (the communicator was
 * aborted). */
static void check_missing_peer(pbl_comm *comm)
{
    char err[512] = "";
    net stuck;
    build(&stuck, B, 1, 1100, H);
    pbl_exec_options o = options(comm, 1);
    o.backend = PBL_BACKEND_CUDA;
    CHECK(start_with(&stuck, &o, err, sizeof err) == PBL_OK, "%s", err);
    if (stuck.e) {
        float x[B * D];
        int32_t y[B];
        batch_of(0, 0, B, x, y);
        pbl_exec_write(stuck.e, stuck.x, x, sizeof x);
        pbl_exec_write(stuck.e, stuck.y, y, sizeof y);
        pbl_status s = pbl_exec_run(stuck.e);
        const char *msg = pbl_exec_errmsg(stuck.e);
        CHECK(s == PBL_ERR_TIMEOUT, "a missing peer: %s: %s", pbl_status_str(s), msg);
        CHECK(strstr(msg, "allreduce") != NULL && strstr(msg, "did not take part") != NULL, "message: %s", msg);
        printf("a missing peer, timeout 0.5 s: %s\n", msg);
        s = pbl_exec_run(stuck.e);
        CHECK(s == PBL_ERR_DEVICE && strstr(pbl_exec_errmsg(stuck.e), "aborted") != NULL,
              "the run after: %s: %s", pbl_status_str(s), pbl_exec_errmsg(stuck.e));
    }
    finish(&stuck);
}

typedef void (*fake_set_fn)(int delay_ms, int hang);
typedef void (*fake_counts_fn)(long *enqueued, long *done, long *waits, long *at_wait, int reset);

/* Device sums through the stand-in NCCL (two ranks holding the same data: the mean is the
 * data): each sum is only enqueued, the run waits for them once at its end, after every sum
 * was enqueued, and with a 5 ms delay in each sum the parameters are those of no communicator,
 * with and without overlap. A peer that never comes: the run fails with PBL_ERR_TIMEOUT after
 * the communicator's timeout, naming the all-reduce, and later runs fail at once. */
static void test_cuda_device_sums(void)
{
    char err[512] = "";
    pbl_comm_options co = pbl_comm_options_default();
    co.timeout_s = 30;
    pbl_comm *comm = NULL;
    pbl_status s = pbl_comm_create_nccl(&comm, &co, 0, err, sizeof err);
    CHECK(s == PBL_OK, "the stand-in NCCL module (PEBBLE_NCCL_MODULE): %s", err);
    const char *path = getenv("PEBBLE_NCCL_MODULE");
    void *h = s == PBL_OK && path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
    fake_set_fn set = h ? (fake_set_fn)(uintptr_t)dlsym(h, "pbl_fake_nccl_set") : NULL;
    fake_counts_fn counts = h ? (fake_counts_fn)(uintptr_t)dlsym(h, "pbl_fake_nccl_counts") : NULL;
    CHECK(set && counts, "the stand-in's controls in %s", path ? path : "(PEBBLE_NCCL_MODULE unset)");
    if (!set || !counts) {
        pbl_comm_destroy(comm);
        return;
    }

    net alone, sums[2];
    pbl_exec_options o = options(NULL, 1);
    o.backend = PBL_BACKEND_CUDA;
    CHECK(train_cuda(&alone, &o, err, sizeof err) == PBL_OK, "no communicator: %s", err);
    int nb = n_buckets(alone.g);
    set(5, 0);
    for (int overlap = 0; overlap < 2; overlap++) {
        counts(&(long){ 0 }, &(long){ 0 }, &(long){ 0 }, NULL, 1);
        o = options(comm, overlap);
        o.backend = PBL_BACKEND_CUDA;
        CHECK(train_cuda(&sums[overlap], &o, err, sizeof err) == PBL_OK, "overlap %d: %s", overlap, err);
        long enq = 0, dn = 0, waits = 0, at_wait[STEPS] = { 0 };
        counts(&enq, &dn, &waits, at_wait, 1);
        CHECK(enq == (long)STEPS * nb && dn == enq, "overlap %d: %ld sums enqueued, %ld done (%d steps x %d buckets)",
              overlap, enq, dn, STEPS, nb);
        CHECK(waits == STEPS, "overlap %d: %ld waits for %d runs (one at the end of each)", overlap, waits, STEPS);
        for (int r = 0; r < STEPS && r < waits; r++)
            CHECK(at_wait[r] == (long)(r + 1) * nb, "overlap %d: run %d waited with %ld sums enqueued (every one of "
                  "the run's %d)", overlap, r, at_wait[r], nb);
        CHECK(same_params(&sums[overlap], &alone), "overlap %d: parameters bit-identical to no communicator", overlap);
    }
    if (sums[1].e)
        check_placement(&sums[1], 1, "device sums, overlap");
    finish(&alone);
    finish(&sums[0]);
    finish(&sums[1]);
    pbl_comm_destroy(comm);

    /* a peer that never takes part */
    co.timeout_s = 0.5;
    comm = NULL;
    CHECK(pbl_comm_create_nccl(&comm, &co, 0, err, sizeof err) == PBL_OK, "%s", err);
    set(0, 1);
    check_missing_peer(comm);
    set(0, 0);
    counts(&(long){ 0 }, &(long){ 0 }, &(long){ 0 }, NULL, 1);
    pbl_comm_destroy(comm);
}

/* Whether a CUDA backend opens here (says why not). */
static int cuda_opens(void)
{
    char err[512] = "";
    pbl_exec *e = NULL;
    pbl_graph *g = NULL;
    pbl_graph_create(&g, NULL);
    pbl_graph_set_output(g, "y", pbl_relu(g, pbl_input(g, "x", PBL_SHAPE(2))));
    pbl_exec_options o = pbl_exec_options_default();
    o.backend = PBL_BACKEND_CUDA;
    pbl_status s = pbl_exec_create(&e, g, &o, err, sizeof err);
    pbl_exec_destroy(e);
    pbl_graph_destroy(g);
    if (s != PBL_OK)
        printf("skipped: no CUDA backend (set PEBBLE_CUDA_MODULE to the emulator): %s\n", err);
    return s == PBL_OK;
}

/* --nccl-emu, under mpirun -np 1 (CTest nccl_emu_np1): the real NCCL module, built against the
 * emulator with a stand-in NCCL of one rank (test/cuda_emu/fake_nccl_lib.c, PEBBLE_NCCL_MODULE
 * = libpebble_nccl_emu.so), whose all-reduces sleep 5 ms on their stream: training with and
 * without overlap gives the bits of no communicator, and a stuck all-reduce is timed out by the
 * module's end-of-run wait, which aborts the communicator. */
static int run_nccl_emu(void)
{
    if (!cuda_opens())
        return 77;
    char err[512] = "";
    pbl_comm_options co = pbl_comm_options_default();
    co.timeout_s = 30;
    pbl_comm *comm = NULL;
    pbl_status s = pbl_comm_create_nccl(&comm, &co, 0, err, sizeof err);
    if (s == PBL_ERR_UNSUPPORTED) {
        printf("skipped: %s\n", err);
        return 77;
    }
    CHECK(s == PBL_OK && pbl_comm_size(comm) == 1, "NCCL's module on the emulator: %s", err);
    const char *path = getenv("PEBBLE_NCCL_MODULE");
    void *h = s == PBL_OK && path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
    fake_set_fn set = h ? (fake_set_fn)(uintptr_t)dlsym(h, "pbl_fake_nccl_set") : NULL;
    CHECK(set != NULL, "the stand-in NCCL's control in %s", path ? path : "(PEBBLE_NCCL_MODULE unset)");
    if (set) {
        net alone, sums[2];
        pbl_exec_options o = options(NULL, 1);
        o.backend = PBL_BACKEND_CUDA;
        CHECK(train_cuda(&alone, &o, err, sizeof err) == PBL_OK, "no communicator: %s", err);
        set(5, 0);
        for (int overlap = 0; overlap < 2; overlap++) {
            o = options(comm, overlap);
            o.backend = PBL_BACKEND_CUDA;
            CHECK(train_cuda(&sums[overlap], &o, err, sizeof err) == PBL_OK, "overlap %d: %s", overlap, err);
            CHECK(same_params(&sums[overlap], &alone), "overlap %d: parameters bit-identical to no communicator",
                  overlap);
        }
        finish(&alone);
        finish(&sums[0]);
        finish(&sums[1]);
        /* a second communicator before the first goes: MPI ends with the last one */
        pbl_comm *quick = NULL;
        co.timeout_s = 0.5;
        CHECK(pbl_comm_create_nccl(&quick, &co, 0, err, sizeof err) == PBL_OK, "%s", err);
        set(0, 1);
        if (quick)
            check_missing_peer(quick);
        set(0, 0);
        pbl_comm_destroy(quick);
    }
    if (h)
        dlclose(h);
    pbl_comm_destroy(comm);
    printf("%s\n", failures ? "FAILED" : "ok: nccl_module.c's device sums on the emulator");
    return failures ? 1 : 0;
}

static int run_cuda_emu(void)
{
    if (!cuda_opens())
        return 77;
    test_cuda_overlap_alone();
    test_cuda_device_sums();
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--cuda-emu") == 0)
        return run_cuda_emu();
    if (argc > 1 && strcmp(argv[1], "--nccl-emu") == 0)
        return run_nccl_emu();
    if (argc > 1 && strcmp(argv[1], "--mpi") == 0)
        return run_mpi();
    if (argc > 1 && strcmp(argv[1], "--nccl") == 0)
        return run_nccl(argc > 2 && strcmp(argv[2], "--need-gpu") == 0);
    test_buckets();
    test_alone();
    /* NCCL: bad arguments refused before any module is loaded (--nccl tries a real one) */
    char err[256];
    pbl_comm *c = (pbl_comm *)1;
    pbl_comm_options co = pbl_comm_options_default();
    CHECK(pbl_comm_create_nccl(&c, NULL, -1, err, sizeof err) == PBL_ERR_INVALID_ARG && c == NULL, "%s", err);
    CHECK(strstr(err, "device") != NULL, "%s", err);
    co.timeout_s = 0;
    c = (pbl_comm *)1;
    CHECK(pbl_comm_create_nccl(&c, &co, 0, err, sizeof err) == PBL_ERR_INVALID_ARG && c == NULL, "%s", err);
    CHECK(pbl_comm_create_nccl(NULL, NULL, 0, err, sizeof err) == PBL_ERR_INVALID_ARG, "%s", err);
    CHECK(pbl_comm_size(NULL) == 1 && pbl_comm_rank(NULL) == 0, "NULL is one rank");
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
