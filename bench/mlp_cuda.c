/*
 * MLP training on the CUDA backend: samples/s and device memory, with and without a CUDA
 * Graph, for each batch size.
 *
 * Model: x [B, 784] f32 -> fully_connected 784-512 -> relu -> 512-512 -> relu -> 512-10,
 * softmax cross-entropy (mean), Adam (lr 1e-3): forward, backward and update in one
 * pbl_exec_run, which ends with a sync (so each step is timed to completion). The input
 * batch and labels are written once and stay on the device (bench/mlp_cuda_torch.py keeps
 * its batch on the device likewise). Each timed loop runs --iters steps after --warmup
 * untimed ones; it is repeated --reps times and the median is printed.
 *
 * Device memory is what the executor allocated: the planned arena plus the variables
 * (parameters, Adam state, input, labels). cuBLAS workspaces (32 MiB per stream) are not
 * counted, as torch.cuda.max_memory_allocated does not count cuBLAS's.
 *
 *     mlp_cuda [--batch 128,1024] [--streams 0] [--warmup 20] [--iters 200] [--reps 5] [--fuse]
 *              [--format table|json]
 *
 * --fuse also times each configuration on pbl_graph_fuse's copy of the graph (forward and
 * backward patterns: cuBLASLt's RELU_BIAS/BIAS epilogues for the layers, BGRADB for the weight
 * and bias gradients, matmul_act_grad for the data gradients; ops/cuda/fused.cu), as rows
 * marked "fused". Every row starts from the same parameters and batch and runs as many steps,
 * so the losses agree up to rounding (cuBLASLt's epilogues sum in another order).
 *
 * Without a CUDA device (or built without CUDA) it prints "no CUDA device: ..." and exits 0.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pebble/pebble.h"

enum { IN = 784, H1 = 512, H2 = 512, C = 10, MAX_BATCHES = 8 };

typedef struct result {
    int      batch, graph, streams, fused;
    double   samples_per_s, step_ms;
    uint64_t device_bytes, arena_bytes;
    float    loss;
} result;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static uint64_t rng = 0x5EED;
static float unit(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (float)((double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53);
}

/* Builds the training graph for `batch` and runs it; 0 on success, 2 when CUDA is absent. */
static int measure(int batch, int graph, int streams, int fused, int warmup, int iters, int reps, result *r,
                   char *why, size_t whylen)
{
    pbl_graph *g = NULL, *f = NULL;
    pbl_exec *e = NULL;
    int rc = 1;
    rng = 0x5EED; /* every configuration starts from the same parameters and batch */
    pbl_graph_create(&g, NULL);
    pbl_value x = pbl_input(g, "x", PBL_SHAPE(batch, IN)), y = pbl_label(g, "y", PBL_I32, PBL_SHAPE(batch));
    pbl_value p[6] = { pbl_param(g, "w1", PBL_SHAPE(H1, IN)), pbl_param(g, "b1", PBL_SHAPE(H1)),
                       pbl_param(g, "w2", PBL_SHAPE(H2, H1)), pbl_param(g, "b2", PBL_SHAPE(H2)),
                       pbl_param(g, "w3", PBL_SHAPE(C, H2)),  pbl_param(g, "b3", PBL_SHAPE(C)) };
    pbl_value h = pbl_relu(g, pbl_fully_connected(g, x, p[0], p[1]));
    h = pbl_relu(g, pbl_fully_connected(g, h, p[2], p[3]));
    pbl_value loss = pbl_softmax_cross_entropy(g, pbl_fully_connected(g, h, p[4], p[5]), y);
    pbl_graph_set_output(g, "loss", loss);
    pbl_value gr[6];
    pbl_optimizer_options oo = pbl_optimizer_options_default(PBL_OPTIM_ADAM);
    oo.lr = 1e-3;
    if (pbl_graph_build_status(g) != PBL_OK || pbl_graph_gradient(g, loss, p, 6, gr) != PBL_OK ||
        pbl_graph_add_optimizer(g, &oo, p, gr, 6) != PBL_OK) {
        snprintf(why, whylen, "building the graph: %s", pbl_graph_errmsg(g));
        goto done;
    }
    if (fused) { /* the fused copy keeps the names of the parameters, inputs and outputs */
        pbl_fuse_options fo = pbl_fuse_options_default();
        pbl_fuse_report rep;
        if (pbl_graph_fuse(g, &fo, &f, &rep, why, whylen) != PBL_OK)
            goto done;
        static const char *const names[6] = { "w1", "b1", "w2", "b2", "w3", "b3" };
        for (int i = 0; i < 6; i++)
            p[i] = pbl_graph_find_value(f, names[i]);
        x = pbl_graph_find_value(f, "x");
        y = pbl_graph_find_value(f, "y");
        loss = pbl_graph_output(f, "loss");
        for (int i = 0; i < 6; i++)
            if (p[i] == PBL_NONE)
                x = PBL_NONE;
        if (x == PBL_NONE || y == PBL_NONE || loss == PBL_NONE) {
            snprintf(why, whylen, "the fused graph lost a parameter, input or output name");
            goto done;
        }
    }
    pbl_exec_options o = pbl_exec_options_default();
    o.backend = PBL_BACKEND_CUDA;
    o.streams = streams;
    o.cuda_graph = graph;
    pbl_status s = pbl_exec_create(&e, f ? f : g, &o, why, whylen);
    if (s != PBL_OK) {
        rc = s == PBL_ERR_UNSUPPORTED ? 2 : 1;
        goto done;
    }
    /* parameters uniform in ±1/sqrt(fan_in), as torch.nn.Linear initialises them */
    int64_t fan[6] = { IN, IN, H1, H1, H2, H2 }, n[6] = { H1 * IN, H1, H2 * H1, H2, C * H2, C };
    for (int i = 0; i < 6; i++) {
        float *buf = malloc((size_t)n[i] * sizeof *buf);
        float bound = 1.0f / sqrtf((float)fan[i]);
        for (int64_t j = 0; j < n[i]; j++)
            buf[j] = (2.0f * unit() - 1.0f) * bound;
        s = pbl_exec_write(e, p[i], buf, (size_t)n[i] * sizeof *buf);
        free(buf);
        if (s != PBL_OK)
            goto fail;
    }
    float *xs = malloc((size_t)batch * IN * sizeof *xs);
    int32_t *ys = malloc((size_t)batch * sizeof *ys);
    for (int64_t j = 0; j < (int64_t)batch * IN; j++)
        xs[j] = 2.0f * unit() - 1.0f;
    for (int j = 0; j < batch; j++)
        ys[j] = (int32_t)(unit() * C) % C;
    s = pbl_exec_write(e, x, xs, (size_t)batch * IN * sizeof *xs);
    if (s == PBL_OK)
        s = pbl_exec_write(e, y, ys, (size_t)batch * sizeof *ys);
    free(xs);
    free(ys);
    for (int i = 0; i < warmup && s == PBL_OK; i++)
        s = pbl_exec_run(e);
    double t[64];
    for (int k = 0; k < reps && s == PBL_OK; k++) {
        double t0 = now_s();
        for (int i = 0; i < iters && s == PBL_OK; i++)
            s = pbl_exec_run(e);
        t[k] = now_s() - t0;
    }
    if (s != PBL_OK)
        goto fail;
    qsort(t, (size_t)reps, sizeof t[0], cmp_double);
    pbl_exec_stats st;
    pbl_exec_stats_get(e, &st);
    r->batch = batch;
    r->graph = graph;
    r->fused = fused;
    r->streams = st.streams;
    r->step_ms = 1e3 * t[reps / 2] / iters;
    r->samples_per_s = batch * iters / t[reps / 2];
    r->arena_bytes = st.arena_bytes;
    r->device_bytes = st.arena_bytes + st.variable_bytes;
    if ((s = pbl_exec_read(e, loss, &r->loss, sizeof r->loss)) != PBL_OK)
        goto fail;
    rc = 0;
    goto done;
fail:
    snprintf(why, whylen, "%s", pbl_exec_errmsg(e));
done:
    pbl_exec_destroy(e);
    pbl_graph_destroy(f);
    pbl_graph_destroy(g);
    return rc;
}

int main(int argc, char **argv)
{
    int batches[MAX_BATCHES] = { 128, 1024 }, n_batches = 2, streams = 0, warmup = 20, iters = 200, reps = 5, json = 0,
        fuse = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--batch") && v) {
            n_batches = 0;
            for (char *s = (char *)v, *end; *s && n_batches < MAX_BATCHES; s = *end ? end + 1 : end) {
                batches[n_batches] = (int)strtol(s, &end, 10);
                if (end == s || batches[n_batches] < 1) {
                    fprintf(stderr, "mlp_cuda: bad --batch '%s'\n", v);
                    return 2;
                }
                n_batches++;
            }
            i++;
        } else if (!strcmp(argv[i], "--streams") && v) {
            streams = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--warmup") && v) {
            warmup = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--iters") && v) {
            iters = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--reps") && v) {
            reps = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--fuse")) {
            fuse = 1;
        } else if (!strcmp(argv[i], "--format") && v) {
            json = !strcmp(argv[++i], "json");
        } else {
            fprintf(stderr, "usage: mlp_cuda [--batch 128,1024] [--streams N] [--warmup N] [--iters N] [--reps N] [--fuse] "
                            "[--format table|json]\n");
            return 2;
        }
    }
    if (iters < 1 || reps < 1 || reps > 64 || warmup < 0) {
        fprintf(stderr, "mlp_cuda: --iters >= 1, 1 <= --reps <= 64, --warmup >= 0\n");
        return 2;
    }
    result res[4 * MAX_BATCHES];
    int n = 0;
    for (int b = 0; b < n_batches; b++)
        for (int k = 0; k < (fuse ? 4 : 2); k++) {
            int graph = k & 1, fused = k >> 1;
            char why[512] = "";
            int rc = measure(batches[b], graph, streams, fused, warmup, iters, reps, &res[n], why, sizeof why);
            if (rc == 2) {
                printf("no CUDA device: %s\n", why);
                return 0;
            }
            if (rc != 0) {
                fprintf(stderr, "mlp_cuda: batch %d, graph %d%s: %s\n", batches[b], graph, fused ? ", fused" : "", why);
                return 1;
            }
            n++;
        }
    if (json) {
        printf("{\"model\": \"mlp 784-512-512-10 adam f32\", \"results\": [");
        for (int i = 0; i < n; i++)
            printf("%s{\"batch\": %d, \"cuda_graph\": %d, \"fused\": %d, \"streams\": %d, \"step_ms\": %.4f, "
                   "\"samples_per_s\": %.1f, \"device_bytes\": %llu, \"arena_bytes\": %llu, \"loss\": %.6f}",
                   i ? ", " : "", res[i].batch, res[i].graph, res[i].fused, res[i].streams, res[i].step_ms,
                   res[i].samples_per_s,
                   (unsigned long long)res[i].device_bytes, (unsigned long long)res[i].arena_bytes, (double)res[i].loss);
        printf("]}\n");
        return 0;
    }
    printf("MLP 784-512-512-10, Adam, f32, CUDA backend (median of %d x %d steps)\n", reps, iters);
    printf("%6s %6s %6s %8s %10s %14s %14s %10s\n", "batch", "graph", "fused", "streams", "step ms", "samples/s",
           "device MiB", "loss");
    for (int i = 0; i < n; i++)
        printf("%6d %6s %6s %8d %10.4f %14.1f %14.2f %10.5f\n", res[i].batch, res[i].graph ? "yes" : "no",
               res[i].fused ? "yes" : "no", res[i].streams,
               res[i].step_ms, res[i].samples_per_s, (double)res[i].device_bytes / 1048576.0, (double)res[i].loss);
    return 0;
}
