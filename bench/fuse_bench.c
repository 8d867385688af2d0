/*
 * bench/fuse_bench.c — operator fusion (pebble/fuse.h) on the zoo's training graphs: nodes,
 * planned arena and, for the MLPs, the step time unfused and fused.
 *
 * Each runnable model gets two executors (the graph and pbl_graph_fuse's copy) bound to the
 * same random data; after --warmup steps each, --reps repetitions of --iters steps alternate
 * between them, and the median repetition is reported (wall and process CPU time per step).
 * The convolutional and transformer models (plan_only: a CPU training step takes seconds) get
 * the node and arena columns only. The
 * arena columns are the planned arena of the graph's usage records by greedy_by_size (the
 * same strategy for every row; the executor's default, "best", is slow on the big graphs).
 * Column bwd: 0 fuses the forward patterns only (pbl_fuse_options.backward = 0), 1 the
 * backward ones too (wb: fully_connected_grad_wb nodes, ag: matmul_act_grad nodes); the MLPs
 * get one row of each, so the backward fusion's own effect is the difference.
 *
 *     fuse_bench [--iters 20] [--reps 5] [--warmup 3] [--format table|json]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pebble/pebble.h"
#include "tools/zoo/zoo.h"

typedef struct row {
    const char *model;
    int64_t     batch;
    int         plan_only; /* not timed even when the CPU could run it */
    int         backward;  /* pbl_fuse_options.backward */
    int         runs;      /* the CPU backend runs every op */
    int32_t     nodes, nodes_fused, dense, chains, weight_bias, act_grads;
    uint64_t    arena, arena_fused;
    double      ms, ms_fused, cpu_ms, cpu_ms_fused;
} row;

static double now(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* An executor of g with every input, label and parameter bound to pseudo-random data. */
typedef struct bound {
    pbl_exec *e;
    void     *data[1024];
    int       n;
} bound;

static int bind_all(bound *b, pbl_graph *g, char *err, size_t errlen)
{
    memset(b, 0, sizeof *b);
    if (pbl_exec_create(&b->e, g, NULL, err, errlen) != PBL_OK)
        return -1;
    uint64_t seed = 1;
    for (pbl_value v = 0; v < pbl_graph_value_count(g); v++) {
        pbl_value_info vi;
        if (pbl_graph_value_info(g, v, &vi) != PBL_OK || vi.kind == PBL_VALUE_NODE || vi.kind == PBL_VALUE_STATE)
            continue;
        if (b->n == 1024) {
            snprintf(err, errlen, "too many variables");
            return -1;
        }
        int64_t n = pbl_shape_numel(&vi.shape);
        size_t bytes = (size_t)n * pbl_dtype_size(vi.dtype);
        void *p = malloc(bytes ? bytes : 1);
        if (!p) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        b->data[b->n++] = p;
        for (int64_t i = 0; i < n; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            if (vi.dtype == PBL_I32)
                ((int32_t *)p)[i] = (int32_t)((seed >> 33) % 10);
            else
                ((float *)p)[i] = ((float)(seed >> 40) / (float)(1 << 24) - 0.5f) * 0.1f;
        }
        if (pbl_exec_bind(b->e, v, p, bytes) != PBL_OK) {
            snprintf(err, errlen, "binding value %d", (int)v);
            return -1;
        }
    }
    return 0;
}

static void unbind_all(bound *b)
{
    pbl_exec_destroy(b->e); /* accepts NULL */
    for (int i = 0; i < b->n; i++)
        free(b->data[i]);
}

static int time_steps(bound *b, int iters, double *wall, double *cpu)
{
    double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
    for (int i = 0; i < iters; i++)
        if (pbl_exec_run(b->e) != PBL_OK)
            return -1;
    *wall = (now(CLOCK_MONOTONIC) - w0) / iters;
    *cpu = (now(CLOCK_PROCESS_CPUTIME_ID) - c0) / iters;
    return 0;
}

/* greedy_by_size's arena for g's usage records, -1 on failure */
static int64_t plan_arena(const pbl_graph *g, char *err, size_t errlen)
{
    pbl_graph_records gr = { 0 };
    pbl_assignment a = { 0 };
    int64_t arena = -1;
    if (pbl_graph_liveness(g, NULL, &gr, err, errlen) == PBL_OK &&
        pbl_plan_records(gr.records, gr.n_records, "greedy_by_size", NULL, &a, err, errlen) == PBL_OK)
        arena = a.arena;
    pbl_assignment_free(&a);
    pbl_graph_records_free(&gr);
    return arena;
}

static int measure(row *r, int iters, int reps, int warmup)
{
    char err[512];
    pbl_graph *g = NULL, *f = NULL;
    pbl_fuse_report rep;
    pbl_fuse_options fo = pbl_fuse_options_default();
    fo.backward = r->backward;
    if (zoo_build(r->model, r->batch, &g, err, sizeof err) != PBL_OK ||
        pbl_graph_fuse(g, &fo, &f, &rep, err, sizeof err) != PBL_OK) {
        fprintf(stderr, "fuse_bench: %s: %s\n", r->model, err);
        pbl_graph_destroy(g);
        return -1;
    }
    r->nodes = rep.nodes_before;
    r->nodes_fused = rep.nodes_after;
    r->dense = rep.dense;
    r->chains = rep.chains;
    r->weight_bias = rep.weight_bias;
    r->act_grads = rep.act_grads;
    bound a = { 0 }, b = { 0 };
    int64_t a0 = plan_arena(g, err, sizeof err), a1 = a0 < 0 ? -1 : plan_arena(f, err, sizeof err);
    int ok = a0 >= 0 && a1 >= 0;
    if (!ok) {
        fprintf(stderr, "fuse_bench: %s: planning: %s\n", r->model, err);
        goto done;
    }
    r->arena = (uint64_t)a0;
    r->arena_fused = (uint64_t)a1;
    /* timed when the CPU backend takes the graph (every op has a kernel) and it is not plan_only */
    r->runs = !r->plan_only && bind_all(&a, g, err, sizeof err) == 0 && bind_all(&b, f, err, sizeof err) == 0 &&
              pbl_exec_run(a.e) == PBL_OK && pbl_exec_run(b.e) == PBL_OK;
    if (r->runs) {
        double w[2][64], c[2][64];
        for (int i = 0; i < warmup; i++)
            if (pbl_exec_run(a.e) != PBL_OK || pbl_exec_run(b.e) != PBL_OK)
                ok = 0;
        for (int k = 0; k < reps && ok; k++)
            ok = time_steps(&a, iters, &w[0][k], &c[0][k]) == 0 && time_steps(&b, iters, &w[1][k], &c[1][k]) == 0;
        for (int j = 0; j < 2 && ok; j++) {
            qsort(w[j], (size_t)reps, sizeof w[j][0], cmp_double);
            qsort(c[j], (size_t)reps, sizeof c[j][0], cmp_double);
        }
        r->ms = w[0][reps / 2];
        r->ms_fused = w[1][reps / 2];
        r->cpu_ms = c[0][reps / 2];
        r->cpu_ms_fused = c[1][reps / 2];
    }
done:
    unbind_all(&a);
    unbind_all(&b);
    pbl_graph_destroy(f);
    pbl_graph_destroy(g);
    return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
    int iters = 20, reps = 5, warmup = 3, json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--format") && i + 1 < argc) {
            json = !strcmp(argv[++i], "json");
        } else if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
            iters = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) {
            warmup = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: fuse_bench [--iters N] [--reps R (1..64)] [--warmup N] [--format table|json]\n");
            return 2;
        }
    }
    if (iters < 1 || reps < 1 || reps > 64 || warmup < 0) {
        fprintf(stderr, "fuse_bench: --iters >= 1, --reps in 1..64, --warmup >= 0\n");
        return 2;
    }
    row rows[] = {
        { .model = "mlp_train", .batch = 128 },
        { .model = "mlp_train", .batch = 128, .backward = 1 },
        { .model = "mlp_train", .batch = 16 },
        { .model = "mlp_train", .batch = 16, .backward = 1 },
        { .model = "mlp50_train", .batch = 128 },
        { .model = "mlp50_train", .batch = 128, .backward = 1 },
        { .model = "mlp100_train", .batch = 256 },
        { .model = "mlp100_train", .batch = 256, .backward = 1 },
        /* the CPU has kernels for every op of these, but a training step is seconds of CPU
         * here and the two executors hold big arenas each (BERT's 2.6 GiB): planned, not timed */
        { .model = "resnet50_train", .batch = 8, .plan_only = 1, .backward = 1 },
        { .model = "mobilenet_v2_train", .batch = 8, .plan_only = 1, .backward = 1 },
        { .model = "bert_base_train", .batch = 0, .plan_only = 1, .backward = 1 },
    };
    int n = (int)(sizeof rows / sizeof rows[0]), rc = 0;
    if (json)
        printf("{\"iters\": %d, \"reps\": %d, \"rows\": [", iters, reps);
    else
        printf("%-20s %5s %3s %6s %6s %5s %6s %4s %4s %12s %12s %9s %9s %9s %9s\n", "model", "batch", "bwd", "nodes",
               "fused", "dense", "chains", "wb", "ag", "arena", "arena fused", "ms/step", "fused", "cpu ms", "fused");
    for (int i = 0; i < n; i++) {
        row *r = &rows[i];
        if (measure(r, iters, reps, warmup) != 0) {
            rc = 1;
            continue;
        }
        if (json) {
            printf("%s{\"model\": \"%s\", \"batch\": %lld, \"backward\": %d, \"nodes\": %d, \"nodes_fused\": %d, "
                   "\"dense\": %d, \"chains\": %d, \"weight_bias\": %d, \"act_grads\": %d, \"arena\": %llu, "
                   "\"arena_fused\": %llu",
                   i ? ", " : "", r->model, (long long)r->batch, r->backward, (int)r->nodes, (int)r->nodes_fused,
                   (int)r->dense, (int)r->chains, (int)r->weight_bias, (int)r->act_grads,
                   (unsigned long long)r->arena, (unsigned long long)r->arena_fused);
            if (r->runs)
                printf(", \"ms\": %.4f, \"ms_fused\": %.4f, \"cpu_ms\": %.4f, \"cpu_ms_fused\": %.4f", r->ms,
                       r->ms_fused, r->cpu_ms, r->cpu_ms_fused);
            printf("}");
        } else {
            printf("%-20s %5lld %3d %6d %6d %5d %6d %4d %4d %12llu %12llu", r->model, (long long)r->batch, r->backward,
                   (int)r->nodes, (int)r->nodes_fused, (int)r->dense, (int)r->chains, (int)r->weight_bias,
                   (int)r->act_grads, (unsigned long long)r->arena, (unsigned long long)r->arena_fused);
            if (r->runs)
                printf(" %9.3f %9.3f %9.3f %9.3f\n", r->ms, r->ms_fused, r->cpu_ms, r->cpu_ms_fused);
            else
                printf(" %9s %9s %9s %9s\n", "-", "-", "-", "-");
        }
    }
    if (json)
        printf("]}\n");
    return rc;
}
