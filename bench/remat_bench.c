/*
 * bench/remat_bench.c — rematerialisation: memory against step time on a deep MLP's training step.
 *
 * The model is the zoo's mlp100_train: 784 -> 99 hidden layers of 128 (relu) -> 10, softmax
 * cross-entropy, backward, SGD with momentum; batch 1024 by default, so activations (one
 * [1024, 128] f32 tensor, 512 KiB, per layer) outweigh the weights (64 KiB per layer) 8x.
 *
 * Each row is one way to run the same step, produced by one small function (row_*) listed in
 * the `rows` table below; a new technique adds a function and a line there:
 *
 *   plain       the graph as built: planned arena, no recomputation
 *   mirror      static recomputation, MXNet's mirror rule (pebble/recompute.h)
 *   sqrt        static recomputation, Chen et al. 2016's sqrt(n) segments
 *   budget X%   static recomputation, Chen et al.'s Algorithm 2 searched for an arena of at most
 *               X% of the plain arena (the budget is in arena bytes: variables are the same
 *               for every row)
 *   DTR X%      dynamic mode (PBL_STORAGE_DYNAMIC): eager execution from a BFC pool with Dynamic
 *               Tensor Rematerialization under a budget of X% of the plain arena; its "arena"
 *               is the pool's peak in-use bytes (each tensor rounded up to 256), "recomp" the
 *               kernels re-run per step. --dtr-trace PREFIX writes each DTR row's pool trace
 *               (the format bench/bfc_replay reads) to PREFIX<X>.csv
 *
 * Columns: checkpoints kept, recompute nodes added, estimated extra FLOPs (% of the plain
 * step's), the planned arena, the arena plus executor-held variables (inputs, parameters,
 * optimizer state: the step's peak device memory, since nothing else is allocated while it
 * runs), the median step time over --reps repetitions of --iters steps, and both against plain;
 * beside the wall time, the process's CPU time per step (on a shared machine the wall time also
 * counts other programs' turns on the cores).
 * A row whose budget cannot be met says so (PBL_ERR_BUDGET) and gives the least arena reached.
 *
 *     remat_bench [--batch 1024] [--threads 1] [--iters 3] [--reps 3] [--format table|json]
 *                 [--dtr-trace PREFIX]
 *
 * Anchors: Chen et al. 2016 report sublinear (O(sqrt(n))) memory for about 30% more time
 * (one extra forward pass); the goal here is at most 1.2x the plain step time at 50% of the
 * plain arena and 1.5x at 30%.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pebble/pebble.h"
#include "tools/zoo/zoo.h"

#define MODEL "mlp100_train"

typedef struct options {
    int64_t     batch;
    int         threads, iters, reps, json;
    const char *dtr_trace; /* NULL, or the prefix of DTR rows' pool traces */
} options;

/* One row of the table. */
typedef struct row {
    char        name[32];
    char        status[96];  /* "ok", or why the row has no timing */
    int         ran;         /* timed */
    int32_t     checkpoints, recomputed; /* -1: not applicable */
    double      extra_flops_pct;
    uint64_t    arena, variables;
    double      step_ms;
    double      cpu_ms;      /* the process's CPU time per step (median) */
} row;

/* What every row function shares: the plain graph and its measurements. */
typedef struct bench {
    const options *o;
    pbl_graph     *g;         /* the plain training graph */
    uint64_t       plain_arena;
    double         step_flops;
} bench;

typedef int (*row_fn)(bench *b, double arg, row *r);

static double clock_s(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static double now_s(void) { return clock_s(CLOCK_MONOTONIC); }
/* CPU time of the whole process: on a shared machine, wall time also counts the time other
 * programs held the cores; with one BLAS thread this is the step's own work. */
static double cpu_s(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Writes every input, label and parameter of g (He-uniform weights, small biases, U(-1,1)
 * inputs, labels in 0..9), so the executor holds them: its variable bytes are all of them. */
static int fill_variables(const pbl_graph *g, pbl_exec *e)
{
    uint64_t s = 42;
    for (pbl_value v = 0; v < pbl_graph_value_count(g); v++) {
        pbl_value_info vi;
        pbl_graph_value_info(g, v, &vi);
        if (vi.kind == PBL_VALUE_NODE || vi.kind == PBL_VALUE_STATE)
            continue;
        int64_t n = pbl_shape_numel(&vi.shape);
        size_t bytes = (size_t)n * pbl_dtype_size(vi.dtype);
        void *p = malloc(bytes);
        if (!p)
            return -1;
        float scale = vi.kind != PBL_VALUE_PARAM ? 1.0f
                      : vi.shape.ndim == 2 ? sqrtf(6.0f / (float)vi.shape.dim[1]) : 0.01f;
        for (int64_t i = 0; i < n; i++) {
            uint64_t r = splitmix(&s);
            if (vi.dtype == PBL_I32)
                ((int32_t *)p)[i] = (int32_t)(r % 10);
            else
                ((float *)p)[i] = scale * (float)((double)(r >> 40) / (double)(1ull << 23) - 1.0);
        }
        pbl_status st = pbl_exec_write(e, v, p, bytes);
        free(p);
        if (st != PBL_OK)
            return -1;
    }
    return 0;
}

/* Runs g (with executor options `dyn`, NULL: planned): warm-up step, then reps x iters steps;
 * fills arena, variables, step_ms (median). */
static int time_graph(const bench *b, const pbl_graph *g, row *r, const pbl_exec_options *dyn)
{
    pbl_exec *e = NULL;
    pbl_exec_options eo = dyn ? *dyn : pbl_exec_options_default();
    eo.threads = b->o->threads;
    char err[512];
    pbl_status cs = pbl_exec_create(&e, g, &eo, err, sizeof err);
    if (cs == PBL_ERR_BUDGET) { /* an answer: the row says what would work */
        const char *w = strstr(err, "the smallest budget that works is ");
        snprintf(r->status, sizeof r->status, "%s: works from %.1f MiB", pbl_status_str(cs),
                 w ? (double)strtoull(w + 34, NULL, 10) / (1 << 20) : 0.0);
        return 0;
    }
    if (cs != PBL_OK) {
        snprintf(r->status, sizeof r->status, "exec: %.80s", err);
        return -1;
    }
    pbl_exec_stats st;
    pbl_exec_stats_get(e, &st);
    r->arena = st.arena_bytes;
    r->variables = st.variable_bytes;
    double *t = malloc((size_t)b->o->reps * 2 * sizeof *t), *c = t ? t + b->o->reps : NULL;
    int rc = t && fill_variables(g, e) == 0 && pbl_exec_run(e) == PBL_OK ? 0 : -1;
    for (int k = 0; k < b->o->reps && rc == 0; k++) {
        double t0 = now_s(), c0 = cpu_s();
        for (int i = 0; i < b->o->iters && rc == 0; i++)
            rc = pbl_exec_run(e) == PBL_OK ? 0 : -1;
        t[k] = (now_s() - t0) / b->o->iters;
        c[k] = (cpu_s() - c0) / b->o->iters;
    }
    if (rc == 0 && dyn) { /* the pool's peak is known after a run */
        pbl_exec_stats_get(e, &st);
        r->arena = st.dynamic_peak;
        r->recomputed = (int32_t)st.remat_ops;
    }
    if (rc == 0) {
        qsort(t, (size_t)b->o->reps, sizeof *t, cmp_double);
        qsort(c, (size_t)b->o->reps, sizeof *c, cmp_double);
        r->step_ms = 1e3 * t[b->o->reps / 2];
        r->cpu_ms = 1e3 * c[b->o->reps / 2];
        r->ran = 1;
        snprintf(r->status, sizeof r->status, "ok");
    } else {
        snprintf(r->status, sizeof r->status, "run failed: %.80s", pbl_exec_errmsg(e));
    }
    free(t);
    pbl_exec_destroy(e);
    return rc;
}

static int row_plain(bench *b, double arg, row *r)
{
    (void)arg;
    snprintf(r->name, sizeof r->name, "plain");
    r->checkpoints = r->recomputed = -1;
    return time_graph(b, b->g, r, NULL);
}

/* Static recomputation (pebble/recompute.h); frac is the budget as a fraction of the plain
 * arena for PBL_RECOMPUTE_BUDGET. Row functions return 0 when the row is an answer (timed, or
 * an honest "budget not met"), -1 on a failure. */
static int row_static(bench *b, pbl_recompute_method m, double frac, row *r)
{
    pbl_recompute_options o = pbl_recompute_options_default();
    o.method = m;
    o.budget = frac > 0 ? (uint64_t)(frac * (double)b->plain_arena) : 0;
    pbl_graph *lean = NULL;
    pbl_recompute_report rep;
    char err[512];
    pbl_status s = pbl_graph_recompute(b->g, &o, &lean, &rep, err, sizeof err);
    r->checkpoints = rep.n_checkpoints;
    r->recomputed = rep.recomputed;
    r->extra_flops_pct = 100.0 * rep.extra_flops / b->step_flops;
    r->arena = rep.arena;
    int rc = -1;
    if (s == PBL_OK) {
        rc = time_graph(b, lean, r, NULL);
    } else if (s == PBL_ERR_BUDGET) { /* an answer, not a failure: the row says so */
        snprintf(r->status, sizeof r->status, "%s: least arena %.1f MiB", pbl_status_str(s),
                 (double)rep.arena / (1 << 20));
        rc = 0;
    } else {
        snprintf(r->status, sizeof r->status, "%s: %.80s", pbl_status_str(s), err);
    }
    pbl_recompute_report_free(&rep);
    pbl_graph_destroy(lean);
    return rc;
}

static int row_mirror(bench *b, double arg, row *r)
{
    snprintf(r->name, sizeof r->name, "mirror");
    return row_static(b, PBL_RECOMPUTE_MIRROR, arg, r);
}

static int row_sqrt(bench *b, double arg, row *r)
{
    snprintf(r->name, sizeof r->name, "sqrt(n)");
    return row_static(b, PBL_RECOMPUTE_SQRT, arg, r);
}

static int row_budget(bench *b, double frac, row *r)
{
    snprintf(r->name, sizeof r->name, "budget %.0f%%", 100 * frac);
    return row_static(b, PBL_RECOMPUTE_BUDGET, frac, r);
}

/* Dynamic mode with DTR (pebble/exec.h) under frac of the plain arena. */
static int row_dtr(bench *b, double frac, row *r)
{
    snprintf(r->name, sizeof r->name, "DTR %.0f%%", 100 * frac);
    r->checkpoints = -1;
    pbl_exec_options eo = pbl_exec_options_default();
    eo.storage = PBL_STORAGE_DYNAMIC;
    eo.budget = (uint64_t)(frac * (double)b->plain_arena);
    FILE *tf = NULL;
    if (b->o->dtr_trace) {
        char path[1024];
        snprintf(path, sizeof path, "%s%.0f.csv", b->o->dtr_trace, 100 * frac);
        if (!(tf = fopen(path, "w"))) {
            snprintf(r->status, sizeof r->status, "cannot write %.80s", path);
            return -1;
        }
        eo.trace = tf;
    }
    int rc = time_graph(b, b->g, r, &eo);
    if (tf)
        fclose(tf);
    return rc;
}

/* The table: one line per row, in print order. */
static const struct {
    row_fn fn;
    double arg;
} rows[] = {
    { row_plain, 0 },
    { row_mirror, 0 },
    { row_sqrt, 0 },
    { row_budget, 0.5 },
    { row_budget, 0.3 },
    { row_dtr, 0.7 },
    { row_dtr, 0.5 },
    { row_dtr, 0.3 },
};

enum { N_ROWS = (int)(sizeof rows / sizeof rows[0]) };

static void print_table(const bench *b, const row *r, int n)
{
    const row *p = &r[0];
    printf("%s, batch %lld, %d BLAS thread(s), median of %d x %d steps\n", MODEL, (long long)b->o->batch,
           b->o->threads, b->o->reps, b->o->iters);
    printf("%-12s %6s %6s %8s %11s %13s %9s %7s %8s %6s %7s  %s\n", "row", "ckpts", "recomp", "+flops", "arena MiB",
           "arena+var MiB", "step ms", "x time", "cpu ms", "x cpu", "x peak", "status");
    for (int i = 0; i < n; i++) {
        char ck[16] = "-", rc[16] = "-", fl[16] = "-", tm[16] = "-", xt[16] = "-", xp[16] = "-", pk[16] = "-";
        char cm[16] = "-", xc[16] = "-";
        if (r[i].checkpoints >= 0) {
            snprintf(ck, sizeof ck, "%d", (int)r[i].checkpoints);
            snprintf(fl, sizeof fl, "%.1f%%", r[i].extra_flops_pct);
        }
        if (r[i].recomputed >= 0)
            snprintf(rc, sizeof rc, "%d", (int)r[i].recomputed);
        if (r[i].ran) {
            snprintf(tm, sizeof tm, "%.1f", r[i].step_ms);
            snprintf(cm, sizeof cm, "%.1f", r[i].cpu_ms);
            snprintf(pk, sizeof pk, "%.1f", (double)(r[i].arena + r[i].variables) / (1 << 20));
            if (p->ran) {
                snprintf(xt, sizeof xt, "%.2f", r[i].step_ms / p->step_ms);
                snprintf(xc, sizeof xc, "%.2f", r[i].cpu_ms / p->cpu_ms);
                snprintf(xp, sizeof xp, "%.2f", (double)(r[i].arena + r[i].variables) / (double)(p->arena + p->variables));
            }
        }
        printf("%-12s %6s %6s %8s %11.1f %13s %9s %7s %8s %6s %7s  %s\n", r[i].name, ck, rc, fl,
               (double)r[i].arena / (1 << 20), pk, tm, xt, cm, xc, xp, r[i].status);
    }
}

static void print_json(const bench *b, const row *r, int n)
{
    printf("{\"model\": \"%s\", \"batch\": %lld, \"threads\": %d, \"iters\": %d, \"reps\": %d, "
           "\"plain_arena\": %llu, \"rows\": [",
           MODEL, (long long)b->o->batch, b->o->threads, b->o->iters, b->o->reps,
           (unsigned long long)b->plain_arena);
    for (int i = 0; i < n; i++) {
        printf("%s\n  {\"row\": \"%s\", \"status\": \"%s\", \"arena\": %llu", i ? "," : "", r[i].name, r[i].status,
               (unsigned long long)r[i].arena);
        if (r[i].checkpoints >= 0)
            printf(", \"checkpoints\": %d, \"recomputed\": %d, \"extra_flops_pct\": %.2f", (int)r[i].checkpoints,
                   (int)r[i].recomputed, r[i].extra_flops_pct);
        else if (r[i].recomputed >= 0)
            printf(", \"recomputed\": %d", (int)r[i].recomputed);
        if (r[i].ran)
            printf(", \"variables\": %llu, \"peak\": %llu, \"step_ms\": %.3f, \"time_ratio\": %.4f, "
                   "\"cpu_ms\": %.3f, \"cpu_ratio\": %.4f",
                   (unsigned long long)r[i].variables, (unsigned long long)(r[i].arena + r[i].variables),
                   r[i].step_ms, r[0].ran ? r[i].step_ms / r[0].step_ms : 0.0, r[i].cpu_ms,
                   r[0].ran ? r[i].cpu_ms / r[0].cpu_ms : 0.0);
        printf("}");
    }
    printf("\n]}\n");
}

static int parse_int(const char *flag, const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "remat_bench: %s: expected an integer in [%ld, %ld], got '%s'\n", flag, lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_args(int argc, char **argv, options *o)
{
    *o = (options){ .batch = 1024, .threads = 1, .iters = 3, .reps = 3 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        long v = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: remat_bench [--batch 1024] [--threads 1] [--iters 3] [--reps 3] [--format table|json]\n"
                   "                   [--dtr-trace PREFIX]\n");
            exit(0);
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "remat_bench: unknown flag or missing value: %s\n", a);
            return -1;
        }
        const char *val = argv[++i];
        if (!strcmp(a, "--format")) {
            if (strcmp(val, "json") && strcmp(val, "table")) {
                fprintf(stderr, "remat_bench: --format: table or json, got '%s'\n", val);
                return -1;
            }
            o->json = !strcmp(val, "json");
        } else if (!strcmp(a, "--dtr-trace")) {
            o->dtr_trace = val;
        } else if (!strcmp(a, "--batch")) {
            if (parse_int(a, val, 1, 1 << 20, &v))
                return -1;
            o->batch = v;
        } else if (!strcmp(a, "--threads")) {
            if (parse_int(a, val, 1, 256, &v))
                return -1;
            o->threads = (int)v;
        } else if (!strcmp(a, "--iters")) {
            if (parse_int(a, val, 1, 1 << 20, &v))
                return -1;
            o->iters = (int)v;
        } else if (!strcmp(a, "--reps")) {
            if (parse_int(a, val, 1, 1000, &v))
                return -1;
            o->reps = (int)v;
        } else {
            fprintf(stderr, "remat_bench: unknown flag: %s\n", a);
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    options o;
    if (parse_args(argc, argv, &o))
        return 2;
    bench b = { .o = &o };
    char err[256];
    if (zoo_build(MODEL, o.batch, &b.g, err, sizeof err) != PBL_OK) {
        fprintf(stderr, "remat_bench: %s\n", err);
        return 1;
    }
    /* the plain arena and step FLOPs, from a report that keeps everything */
    pbl_recompute_options ro = pbl_recompute_options_default();
    ro.method = PBL_RECOMPUTE_BUDGET; /* no budget: nothing recomputed */
    pbl_recompute_report rep;
    pbl_graph *copy = NULL;
    if (pbl_graph_recompute(b.g, &ro, &copy, &rep, err, sizeof err) != PBL_OK) {
        fprintf(stderr, "remat_bench: %s\n", err);
        return 1;
    }
    b.plain_arena = rep.arena_plain;
    b.step_flops = rep.step_flops;
    pbl_recompute_report_free(&rep);
    pbl_graph_destroy(copy);

    row r[N_ROWS];
    int failed = 0;
    for (int i = 0; i < N_ROWS; i++) {
        memset(&r[i], 0, sizeof r[i]);
        if (rows[i].fn(&b, rows[i].arg, &r[i]) != 0)
            failed = 1;
    }
    if (o.json)
        print_json(&b, r, N_ROWS);
    else
        print_table(&b, r, N_ROWS);
    pbl_graph_destroy(b.g);
    return failed;
}
