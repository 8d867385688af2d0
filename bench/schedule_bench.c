/*
 * bench/schedule_bench.c — what the node order does to the lower bound, over the model zoo.
 *
 * For every zoo graph (inference and training, each at its default batch): the nodes the
 * executor runs, the lower bound (the most bytes live at one step, records aligned to 64 as
 * the executor plans them) in program order and in min_peak order (pebble/schedule.h), their
 * ratio, a floor no order goes below (pbl_schedule.floor), the candidate min_peak kept,
 * whether its peak is proven minimal (the exact search, or peak == floor), and the
 * scheduling time (the median of --reps calls). Then the MLP training step (zoo mlp_train,
 * planned storage, one stream) timed in both orders, interleaved, median of --reps loops of
 * --iters steps: a better order must not slow the step.
 *
 *     schedule_bench [--reps 5] [--iters 20] [--threads 1] [--batch N] [--format table|json]
 *                    [--only NAME]
 *
 * --batch N builds every graph for N samples (0, the default: each model's own batch); the
 * MLP step always runs at mlp_train's own batch, 128.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pebble/pebble.h"
#include "zoo.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

typedef struct row {
    const char *name;
    int32_t     nodes;
    int64_t     program, min_peak, floor;
    const char *method;
    int         exact;
    double      ms;
} row;

static int schedule_row(const char *name, int64_t batch, int reps, row *r)
{
    pbl_graph *g;
    char err[512];
    if (zoo_build(name, batch, &g, err, sizeof err) != PBL_OK) {
        fprintf(stderr, "schedule_bench: %s: %s\n", name, err);
        return 1;
    }
    double t[64];
    pbl_schedule_options o = pbl_schedule_options_default();
    o.kind = PBL_SCHEDULE_MIN_PEAK;
    for (int k = 0; k < reps; k++) {
        pbl_schedule sc;
        double t0 = now_ms();
        if (pbl_graph_schedule(g, &o, &sc, err, sizeof err) != PBL_OK) {
            fprintf(stderr, "schedule_bench: %s: %s\n", name, err);
            pbl_graph_destroy(g);
            return 1;
        }
        t[k] = now_ms() - t0;
        *r = (row){ name, sc.n_steps, sc.program_peak, sc.peak, sc.floor, sc.method, sc.exact, 0 };
        pbl_schedule_free(&sc);
    }
    r->ms = median(t, reps);
    pbl_graph_destroy(g);
    return 0;
}

/* Median ms per step of mlp_train in each order, the loops interleaved. */
static int step_times(int reps, int iters, int threads, double ms[2], uint64_t lb[2])
{
    pbl_graph *g;
    char err[512];
    if (zoo_build("mlp_train", 0, &g, err, sizeof err) != PBL_OK) {
        fprintf(stderr, "schedule_bench: mlp_train: %s\n", err);
        return 1;
    }
    pbl_exec *e[2] = { NULL, NULL };
    int rc = 1;
    for (int k = 0; k < 2; k++) {
        pbl_exec_options o = pbl_exec_options_default();
        o.threads = threads;
        o.schedule = k ? PBL_SCHEDULE_MIN_PEAK : PBL_SCHEDULE_PROGRAM;
        if (pbl_exec_create(&e[k], g, &o, err, sizeof err) != PBL_OK) {
            fprintf(stderr, "schedule_bench: exec: %s\n", err);
            goto done;
        }
        /* every variable zero but the labels: the time of a step does not depend on values */
        for (pbl_value v = 0; v < pbl_graph_value_count(g); v++) {
            pbl_value_info vi;
            pbl_graph_value_info(g, v, &vi);
            if (vi.kind == PBL_VALUE_NODE || vi.kind == PBL_VALUE_STATE)
                continue;
            size_t bytes = (size_t)pbl_shape_numel(&vi.shape) * pbl_dtype_size(vi.dtype);
            void *p = calloc(1, bytes ? bytes : 1);
            if (p) {
                pbl_exec_write(e[k], v, p, bytes);
                free(p);
            }
        }
        pbl_exec_stats st;
        pbl_exec_stats_get(e[k], &st);
        lb[k] = st.lower_bound;
        for (int w = 0; w < 5; w++)
            pbl_exec_run(e[k]);
    }
    double t[2][64];
    for (int r = 0; r < reps; r++) {
        for (int k = 0; k < 2; k++) {
            double t0 = now_ms();
            for (int i = 0; i < iters; i++)
                if (pbl_exec_run(e[k]) != PBL_OK) {
                    fprintf(stderr, "schedule_bench: run: %s\n", pbl_exec_errmsg(e[k]));
                    goto done;
                }
            t[k][r] = (now_ms() - t0) / iters;
        }
    }
    ms[0] = median(t[0], reps);
    ms[1] = median(t[1], reps);
    rc = 0;
done:
    pbl_exec_destroy(e[0]);
    pbl_exec_destroy(e[1]);
    pbl_graph_destroy(g);
    return rc;
}

int main(int argc, char **argv)
{
    int reps = 5, iters = 20, threads = 1, json = 0;
    long long batch = 0;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc)
            batch = atoll(argv[++i]);
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "--format") == 0 && i + 1 < argc)
            json = strcmp(argv[++i], "json") == 0;
        else {
            fprintf(stderr, "usage: schedule_bench [--reps N] [--iters N] [--threads N] [--batch N] "
                            "[--format table|json] [--only NAME]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > 64 || iters < 1 || threads < 0 || batch < 0) {
        fprintf(stderr, "schedule_bench: --reps 1..64, --iters >= 1, --threads >= 0, --batch >= 0\n");
        return 2;
    }
    if (json)
        printf("{\"graphs\": [");
    else
        printf("%-20s %6s %14s %14s %7s %14s  %-13s %6s %9s\n", "graph", "nodes", "LB program", "LB min_peak", "ratio",
               "floor", "kept", "proven", "sched ms");
    int first = 1;
    for (int i = 0; i < zoo_count(); i++) {
        if (only && strcmp(only, zoo_name(i)) != 0)
            continue;
        row r;
        if (schedule_row(zoo_name(i), (int64_t)batch, reps, &r) != 0)
            return 1;
        double ratio = r.program ? (double)r.min_peak / (double)r.program : 1;
        if (json)
            printf("%s\n  {\"name\": \"%s\", \"nodes\": %d, \"program_lower_bound\": %lld, \"min_peak_lower_bound\": "
                   "%lld, \"ratio\": %.6f, \"floor\": %lld, \"method\": \"%s\", \"proven\": %s, \"ms\": %.3f}",
                   first ? "" : ",", r.name, (int)r.nodes, (long long)r.program, (long long)r.min_peak, ratio,
                   (long long)r.floor, r.method, r.exact ? "true" : "false", r.ms);
        else
            printf("%-20s %6d %14lld %14lld %7.4f %14lld  %-13s %6s %9.2f\n", r.name, (int)r.nodes, (long long)r.program,
                   (long long)r.min_peak, ratio, (long long)r.floor, r.method, r.exact ? "yes" : "no", r.ms);
        first = 0;
        fflush(stdout);
    }
    double ms[2];
    uint64_t lb[2];
    if (only && strcmp(only, "mlp_train") != 0) {
        if (json)
            printf("\n]}\n");
        return 0;
    }
    if (step_times(reps, iters, threads, ms, lb) != 0)
        return 1;
    if (json)
        printf("\n], \"mlp_train_step\": {\"threads\": %d, \"iters\": %d, \"reps\": %d, \"program_ms\": %.4f, "
               "\"min_peak_ms\": %.4f, \"program_lower_bound\": %llu, \"min_peak_lower_bound\": %llu}}\n",
               threads, iters, reps, ms[0], ms[1], (unsigned long long)lb[0], (unsigned long long)lb[1]);
    else
        printf("\nmlp_train step (%d thread(s), median of %d x %d steps): program %.3f ms (LB %llu), min_peak %.3f ms "
               "(LB %llu), ratio %.3f\n",
               threads, reps, iters, ms[0], (unsigned long long)lb[0], ms[1], (unsigned long long)lb[1],
               ms[1] / ms[0]);
    return 0;
}
