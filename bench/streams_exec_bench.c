/*
 * bench/streams_exec_bench.c — a graph of independent branches of small ops on 1, 2 and 4 streams.
 *
 * The graph (public API only):
 *
 *     x [B, W]
 *     branch i (of --branches): h = x; --depth times: h = tanh(fully_connected(h, w_ij, b_ij))
 *     y = sum of the branches' last h (add chain), an output
 *
 * Forward only: each branch is a chain of small products (B x W x W) and element-wise ops, so
 * one stream runs them one after another while several streams can run branches side by
 * side. For each stream count the executor is created with pbl_exec_options.streams (the
 * colouring of pbl_graph_streams, happens-before-safe planned storage) and timed over
 * --iters runs per repetition, --reps repetitions, median reported; every row's output must
 * be bit-identical to one stream's ("same" column). Beside the wall clock, the process CPU
 * time per run (all threads): on a shared, loaded machine the wall-clock speedup also
 * reflects how many threads the OS scheduler gives the process, while the CPU time shows
 * what the streams' hand-offs and waits cost.
 *
 * BLAS runs single-threaded in every row (--threads, default 1, for the one-stream row), so
 * the rows compare streams, not BLAS threads.
 *
 * Backends: the table has one column group per entry of `backends` below. A CUDA backend
 * adds its entry there (its pbl_backend_kind and name) when it is built; until then only
 * the CPU is measured, and no CUDA figure is printed.
 *
 *     streams_exec_bench [--branches 4] [--depth 16] [--width 64] [--batch 32] [--streams 1,2,4]
 *                   [--threads 1] [--warmup 20] [--iters N] [--reps 5] [--format table|json]
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pebble/pebble.h"

#define MAX_ROWS 16
#define TARGET_REP_S 0.3

typedef struct backend_entry {
    const char      *name;
    pbl_backend_kind kind;
} backend_entry;

/* The backends measured. The CUDA backend's helper adds { "cuda", PBL_BACKEND_CUDA } here. */
static const backend_entry backends[] = {
    { "cpu", PBL_BACKEND_CPU },
    { "cuda", PBL_BACKEND_CUDA }, /* skipped (a note on stderr) without CUDA or a device */
};
#define N_BACKENDS ((int)(sizeof backends / sizeof backends[0]))

typedef struct options {
    int     branches, depth, width, batch, threads, warmup, iters, reps, json;
    int32_t streams[MAX_ROWS];
    int     n_streams;
} options;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time of the whole process (every thread): what the run cost, whatever the load. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: streams_exec_bench [--branches 4] [--depth 16] [--width 64] [--batch 32] [--streams 1,2,4]\n"
               "                     [--threads 1] [--warmup 20] [--iters N] [--reps 5] [--format table|json]\n");
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

static int parse_args(int argc, char **argv, options *o)
{
    *o = (options){ .branches = 4, .depth = 16, .width = 64, .batch = 32, .threads = 1, .warmup = 20, .iters = 0,
                    .reps = 5, .json = 0, .streams = { 1, 2, 4 }, .n_streams = 3 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        } else if (!v) {
            bad = 1;
        } else if (!strcmp(a, "--branches")) {
            bad = parse_int(v, 1, 64, &o->branches);
        } else if (!strcmp(a, "--depth")) {
            bad = parse_int(v, 1, 10000, &o->depth);
        } else if (!strcmp(a, "--width")) {
            bad = parse_int(v, 1, 1 << 14, &o->width);
        } else if (!strcmp(a, "--batch")) {
            bad = parse_int(v, 1, 1 << 16, &o->batch);
        } else if (!strcmp(a, "--threads")) {
            bad = parse_int(v, 0, 1024, &o->threads);
        } else if (!strcmp(a, "--warmup")) {
            bad = parse_int(v, 0, 1 << 20, &o->warmup);
        } else if (!strcmp(a, "--iters")) {
            bad = parse_int(v, 1, 1 << 24, &o->iters);
        } else if (!strcmp(a, "--reps")) {
            bad = parse_int(v, 1, 1000, &o->reps);
        } else if (!strcmp(a, "--format")) {
            o->json = !strcmp(v, "json");
            bad = !o->json && strcmp(v, "table") != 0;
        } else if (!strcmp(a, "--streams")) {
            o->n_streams = 0;
            char buf[128];
            snprintf(buf, sizeof buf, "%s", v);
            for (char *tok = strtok(buf, ","); tok && !bad; tok = strtok(NULL, ",")) {
                int k;
                bad = o->n_streams == MAX_ROWS || parse_int(tok, 1, 64, &k);
                if (!bad)
                    o->streams[o->n_streams++] = k;
            }
            bad = bad || o->n_streams == 0;
        } else {
            bad = 1;
        }
        if (bad) {
            fprintf(stderr, "streams_exec_bench: bad argument '%s'%s%s\n", a, v ? " " : "", v ? v : "");
            usage(stderr);
            return -1;
        }
        i++;
    }
    return 0;
}

static uint64_t rng = 12345;
static float unit(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)(rng >> 40) / 16777216.0f;
}

typedef struct model {
    pbl_graph *g;
    pbl_value  x, y, *params;
    int        n_params;
    float     *data;      /* every parameter's values, concatenated */
    size_t     n_data;
} model;

static int build(const options *o, model *m)
{
    memset(m, 0, sizeof *m);
    if (pbl_graph_create(&m->g, NULL) != PBL_OK)
        return -1;
    pbl_graph *g = m->g;
    m->n_params = 2 * o->branches * o->depth;
    m->params = calloc((size_t)m->n_params, sizeof *m->params);
    m->n_data = (size_t)o->branches * (size_t)o->depth * (size_t)(o->width * o->width + o->width);
    m->data = malloc(m->n_data * sizeof *m->data);
    if (!m->params || !m->data)
        return -1;
    m->x = pbl_input(g, "x", PBL_SHAPE(o->batch, o->width));
    pbl_value sum = PBL_NONE;
    int p = 0;
    char name[64];
    for (int b = 0; b < o->branches; b++) {
        pbl_value h = m->x;
        for (int d = 0; d < o->depth; d++) {
            snprintf(name, sizeof name, "w%d_%d", b, d);
            pbl_value w = m->params[p++] = pbl_param(g, name, PBL_SHAPE(o->width, o->width));
            snprintf(name, sizeof name, "b%d_%d", b, d);
            pbl_value bias = m->params[p++] = pbl_param(g, name, PBL_SHAPE(o->width));
            h = pbl_tanh(g, pbl_fully_connected(g, h, w, bias));
        }
        sum = sum == PBL_NONE ? h : pbl_add(g, sum, h);
    }
    m->y = sum;
    if (pbl_graph_build_status(g) != PBL_OK || pbl_graph_set_output(g, "y", m->y) != PBL_OK) {
        fprintf(stderr, "streams_exec_bench: building the graph: %s\n", pbl_graph_errmsg(g));
        return -1;
    }
    float scale = 1.0f / (float)o->width;
    for (size_t i = 0; i < m->n_data; i++)
        m->data[i] = (2.0f * unit() - 1.0f) * scale * 2.0f;
    return 0;
}

typedef struct row {
    const char *backend;
    int32_t     streams_asked, streams_used, waits;
    uint64_t    arena;
    double      ms;       /* median ms per run (wall clock) */
    double      cpu_ms;   /* median process CPU ms per run (all threads) */
    int         same;     /* output bit-identical to the first row of its backend */
} row;

/* Times one executor; fills r; out gets the output (batch x width floats). */
static int measure(const options *o, const model *m, const backend_entry *be, int32_t streams, row *r, float *out,
                   float *x)
{
    pbl_exec_options eo = pbl_exec_options_default();
    eo.backend = be->kind;
    eo.streams = streams;
    eo.threads = streams == 1 ? o->threads : 0;
    pbl_exec *e;
    char err[512];
    pbl_status cs = pbl_exec_create(&e, m->g, &eo, err, sizeof err);
    if (cs != PBL_OK) {
        fprintf(stderr, "streams_exec_bench: %s, %d streams: %s\n", be->name, (int)streams, err);
        return cs == PBL_ERR_UNSUPPORTED && be->kind != PBL_BACKEND_CPU ? 1 : -1; /* 1: not here, skip */
    }
    size_t at = 0, xbytes = (size_t)o->batch * (size_t)o->width * sizeof(float);
    for (int i = 0; i < m->n_params; i++) {
        size_t n = (i % 2 == 0) ? (size_t)(o->width * o->width) : (size_t)o->width;
        if (pbl_exec_write(e, m->params[i], m->data + at, n * sizeof(float)) != PBL_OK)
            goto fail;
        at += n;
    }
    if (pbl_exec_write(e, m->x, x, xbytes) != PBL_OK)
        goto fail;
    for (int i = 0; i < o->warmup; i++)
        if (pbl_exec_run(e) != PBL_OK)
            goto fail;
    int iters = o->iters;
    if (!iters) { /* calibrate: about TARGET_REP_S per repetition */
        iters = 1;
        for (;;) {
            double t0 = now_s();
            for (int i = 0; i < iters; i++)
                if (pbl_exec_run(e) != PBL_OK)
                    goto fail;
            double dt = now_s() - t0;
            if (dt >= 0.05) {
                iters = (int)((double)iters * TARGET_REP_S / dt) + 1;
                break;
            }
            iters *= 2;
        }
    }
    double reps[1000], cpu[1000];
    for (int k = 0; k < o->reps; k++) {
        double t0 = now_s(), c0 = cpu_s();
        for (int i = 0; i < iters; i++)
            if (pbl_exec_run(e) != PBL_OK)
                goto fail;
        reps[k] = (now_s() - t0) * 1e3 / iters;
        cpu[k] = (cpu_s() - c0) * 1e3 / iters;
    }
    if (pbl_exec_read(e, m->y, out, xbytes) != PBL_OK)
        goto fail;
    pbl_exec_stats st;
    pbl_exec_stats_get(e, &st);
    *r = (row){ .backend = be->name, .streams_asked = streams, .streams_used = st.streams, .waits = st.waits,
                .arena = st.arena_bytes, .ms = median(reps, o->reps), .cpu_ms = median(cpu, o->reps) };
    pbl_exec_destroy(e);
    return 0;
fail:
    fprintf(stderr, "streams_exec_bench: %s, %d streams: %s\n", be->name, (int)streams, pbl_exec_errmsg(e));
    pbl_exec_destroy(e);
    return -1;
}

int main(int argc, char **argv)
{
    options o;
    if (parse_args(argc, argv, &o) != 0)
        return 2;
    model m;
    if (build(&o, &m) != 0)
        return 1;
    size_t nx = (size_t)o.batch * (size_t)o.width;
    float *x = malloc(nx * sizeof *x), *ref = malloc(nx * sizeof *ref), *out = malloc(nx * sizeof *out);
    row rows[MAX_ROWS * N_BACKENDS];
    int n_rows = 0, rc = 0;
    for (size_t i = 0; i < nx; i++)
        x[i] = 2.0f * unit() - 1.0f;
    for (int b = 0; b < N_BACKENDS && rc == 0; b++) {
        for (int k = 0; k < o.n_streams && rc == 0; k++) {
            row *r = &rows[n_rows];
            int mr = measure(&o, &m, &backends[b], o.streams[k], r, k == 0 ? ref : out, x);
            if (mr == 1)
                break; /* this backend is not available here: no column */
            if (mr != 0) {
                rc = 1;
                break;
            }
            r->same = k == 0 || memcmp(ref, out, nx * sizeof *out) == 0;
            n_rows++;
        }
    }
    int nodes = pbl_graph_node_count(m.g);
    if (o.json) {
        printf("{\"graph\": {\"branches\": %d, \"depth\": %d, \"width\": %d, \"batch\": %d, \"nodes\": %d}, "
               "\"threads\": %d, \"results\": [", o.branches, o.depth, o.width, o.batch, nodes, o.threads);
        for (int i = 0; i < n_rows; i++) {
            const row *r = &rows[i], *base = r;
            for (int j = 0; j < n_rows; j++)
                if (!strcmp(rows[j].backend, r->backend)) {
                    base = &rows[j];
                    break;
                }
            printf("%s{\"backend\": \"%s\", \"streams\": %d, \"streams_used\": %d, \"waits\": %d, "
                   "\"arena_bytes\": %llu, \"ms\": %.4f, \"cpu_ms\": %.4f, \"speedup\": %.3f, \"identical\": %s}",
                   i ? ", " : "", r->backend, (int)r->streams_asked, (int)r->streams_used, (int)r->waits,
                   (unsigned long long)r->arena, r->ms, r->cpu_ms, base->ms / r->ms, r->same ? "true" : "false");
        }
        printf("]}\n");
    } else {
        printf("%d branches x %d x (fully_connected [%d,%d]x[%d,%d] + tanh), forward, %d nodes; BLAS threads %d\n",
               o.branches, o.depth, o.batch, o.width, o.width, o.width, nodes, o.threads);
        printf("%-8s %8s %6s %6s %12s %12s %12s %8s %6s\n", "backend", "streams", "used", "waits", "arena B",
               "ms/run", "cpu ms/run", "speedup", "same");
        for (int i = 0; i < n_rows; i++) {
            const row *r = &rows[i], *base = r;
            for (int j = 0; j < n_rows; j++)
                if (!strcmp(rows[j].backend, r->backend)) {
                    base = &rows[j];
                    break;
                }
            printf("%-8s %8d %6d %6d %12llu %12.4f %12.4f %7.2fx %6s\n", r->backend, (int)r->streams_asked,
                   (int)r->streams_used, (int)r->waits, (unsigned long long)r->arena, r->ms, r->cpu_ms,
                   base->ms / r->ms, r->same ? "yes" : "NO");
        }
    }
    for (int i = 0; i < n_rows; i++)
        if (!rows[i].same)
            rc = 1;
    free(x);
    free(ref);
    free(out);
    free(m.params);
    free(m.data);
    pbl_graph_destroy(m.g);
    return rc;
}
