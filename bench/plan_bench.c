/*
 * plan_bench: how small and how fast each planner strategy is.
 *
 *   plan_bench [--zoo] [--minimalloc DIR] [--traces DIR] [--scaling] [--strategies a,b,...]
 *              [--format table|json]
 *
 * --zoo         every zoo graph (inference and training): liveness, then each strategy
 * --minimalloc  every records CSV in DIR (MiniMalloc's challenging suite)
 * --traces      every *.csv in DIR, by name (real models' usage records, e.g.
 *               ../shared/planner_traces): times are the fastest of 3 runs, since a shared
 *               machine only ever adds time; `best`'s cell names the strategy that won
 * --scaling     random residual graphs of 1k, 10k and 100k values: liveness and each strategy
 *
 * Each cell is the arena's ratio to the lower bound (the most bytes live at one step) and the
 * planning time in ms (median of 3 runs; one run when it takes over a second). Every result
 * goes through pbl_plan_verify; a failed verification prints "INVALID" and the program exits 1.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dirent.h>

#include "pebble/pebble.h"
#include "pebble/plan_io.h"
#include "zoo.h"

#define MAX_STRATEGIES 32

typedef struct cell {
    int64_t arena;
    double  ms;
    int     ok;      /* planned and verified */
    int     skipped; /* the strategy declined (PBL_ERR_UNSUPPORTED, e.g. too large) */
    const char *winner; /* `best`: the strategy whose result it returned */
    int     cut;        /* `best`: strategies cut off or skipped for its time budget */
} cell;

typedef struct row {
    char    name[96];
    int32_t records;
    int64_t lower_bound;
    double  liveness_ms; /* graphs only */
    cell    c[MAX_STRATEGIES];
} row;

static const char *strategy[MAX_STRATEGIES];
static int n_strategy;
static int json;
static int failures;
static int fastest; /* times: the fastest run instead of the median (--traces) */

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Plans r with every chosen strategy into row->c. */
static void plan_all(row *rw, const pbl_usage_record *r, int32_t n, int64_t align)
{
    rw->records = n;
    rw->lower_bound = pbl_records_lower_bound(r, n);
    for (int k = 0; k < n_strategy; k++) {
        pbl_plan_options o = pbl_plan_options_default();
        pbl_plan_report rep;
        o.align = align;
        o.report = strcmp(strategy[k], "best") == 0 ? &rep : NULL;
        double times[3];
        int reps = 0;
        cell *c = &rw->c[k];
        memset(c, 0, sizeof *c);
        while (reps < 3) {
            pbl_assignment a;
            char err[256];
            double t0 = now_ms();
            pbl_status s = pbl_plan_records(r, n, strategy[k], &o, &a, err, sizeof err);
            times[reps++] = now_ms() - t0;
            if (s == PBL_ERR_UNSUPPORTED) {
                c->skipped = 1;
                break;
            }
            if (s != PBL_OK) {
                fprintf(stderr, "plan_bench: %s on %s: %s\n", strategy[k], rw->name, err);
                failures++;
                break;
            }
            if (pbl_plan_verify(r, n, &a, align, 0, err, sizeof err) != PBL_OK) {
                fprintf(stderr, "plan_bench: %s on %s: INVALID: %s\n", strategy[k], rw->name, err);
                failures++;
                pbl_assignment_free(&a);
                break;
            }
            c->arena = a.arena;
            c->ok = 1;
            if (o.report) {
                c->winner = rep.winner;
                c->cut = 0;
                for (int32_t j = 0; j < rep.n_steps; j++)
                    c->cut += rep.step[j].outcome == PBL_PLAN_CUT_OFF || rep.step[j].outcome == PBL_PLAN_SKIPPED_BUDGET;
            }
            pbl_assignment_free(&a);
            if (times[0] > 1000.0)
                break;
        }
        if (c->ok) {
            qsort(times, (size_t)reps, sizeof *times, cmp_double);
            c->ms = times[fastest ? 0 : reps / 2];
        }
    }
}

static void print_header(const char *title)
{
    if (json)
        return;
    printf("\n%s\n%-28s %8s %12s", title, "instance", "records", "lower bound");
    for (int k = 0; k < n_strategy; k++)
        printf(" %16.16s", strategy[k]);
    printf("\n");
}

static void print_row(const row *rw, int first_json)
{
    if (json) {
        printf("%s    {\"name\": \"%s\", \"records\": %d, \"lower_bound\": %lld, \"liveness_ms\": %.3f, \"strategies\": [",
               first_json ? "" : ",\n", rw->name, (int)rw->records, (long long)rw->lower_bound, rw->liveness_ms);
        for (int k = 0; k < n_strategy; k++) {
            const cell *c = &rw->c[k];
            printf("%s{\"name\": \"%s\", ", k ? ", " : "", strategy[k]);
            if (c->ok)
            {
                printf("\"bytes\": %lld, \"ratio\": %.4f, \"valid\": true, \"ms\": %.3f", (long long)c->arena,
                       rw->lower_bound ? (double)c->arena / (double)rw->lower_bound : 1.0, c->ms);
                if (c->winner)
                    printf(", \"winner\": \"%s\", \"cut_off_or_skipped\": %d", c->winner, c->cut);
                printf("}");
            }
            else
                printf("\"valid\": false, \"skipped\": %s}", c->skipped ? "true" : "false");
        }
        printf("]}");
        return;
    }
    printf("%-28.28s %8d %12lld", rw->name, (int)rw->records, (long long)rw->lower_bound);
    for (int k = 0; k < n_strategy; k++) {
        const cell *c = &rw->c[k];
        char buf[40];
        if (c->ok)
            snprintf(buf, sizeof buf, "%.3f %7.1fms", rw->lower_bound ? (double)c->arena / (double)rw->lower_bound : 1.0,
                     c->ms);
        else
            snprintf(buf, sizeof buf, "%s", c->skipped ? "declined" : "failed");
        printf(" %16s", buf);
    }
    printf("\n");
    for (int k = 0; k < n_strategy; k++)
        if (rw->c[k].winner)
            printf("%-28s   best: won by %s; %d cut off or skipped for the time budget\n", "", rw->c[k].winner,
                   rw->c[k].cut);
}

/* ---- graphs ------------------------------------------------------------------------------- */

static int graph_row(row *rw, pbl_graph *g)
{
    pbl_graph_records gr;
    char err[256];
    double t0 = now_ms();
    pbl_status s = pbl_graph_liveness(g, NULL, &gr, err, sizeof err);
    rw->liveness_ms = now_ms() - t0;
    if (s != PBL_OK) {
        fprintf(stderr, "plan_bench: liveness of %s: %s\n", rw->name, err);
        failures++;
        return -1;
    }
    plan_all(rw, gr.records, gr.n_records, 64);
    pbl_graph_records_free(&gr);
    return 0;
}

static void run_zoo(int *first_json)
{
    print_header("zoo graphs (align 64): arena / lower bound, planning ms");
    for (int i = 0; i < zoo_count(); i++) {
        row rw;
        memset(&rw, 0, sizeof rw);
        snprintf(rw.name, sizeof rw.name, "%s", zoo_name(i));
        pbl_graph *g = NULL;
        char err[256];
        if (zoo_build(zoo_name(i), 0, &g, err, sizeof err) != PBL_OK) {
            fprintf(stderr, "plan_bench: zoo %s: %s\n", zoo_name(i), err);
            failures++;
            continue;
        }
        if (graph_row(&rw, g) == 0) {
            print_row(&rw, *first_json);
            *first_json = 0;
        }
        pbl_graph_destroy(g);
    }
}

/* A random residual network of about `values` values: lanes of widths 64..512 (batch 32),
 * each step a relu, a tanh, an add of an earlier value of the same width (a skip connection
 * 1..40 steps back), or a fully_connected into another lane. Seeded: the same graph every run. */
static pbl_graph *random_graph(int32_t values, uint64_t seed)
{
    static const int64_t widths[] = { 64, 128, 256, 512 };
    enum { LANES = 4, HIST = 64 };
    pbl_graph *g;
    if (pbl_graph_create(&g, NULL) != PBL_OK)
        return NULL;
    pbl_value hist[LANES][HIST];
    int32_t n_hist[LANES] = { 0 };
    uint64_t st = seed;
#define NEXT() (st = st * 6364136223846793005ull + 1442695040888963407ull, (uint32_t)(st >> 33))
    int lane = 0;
    pbl_value cur = pbl_input(g, "x", PBL_SHAPE(32, widths[0]));
    hist[0][n_hist[0]++ % HIST] = cur;
    char name[32];
    while (pbl_graph_value_count(g) < values && pbl_graph_build_status(g) == PBL_OK) {
        uint32_t pick = NEXT() % 10;
        if (pick < 3) {
            cur = pbl_relu(g, cur);
        } else if (pick < 5) {
            cur = pbl_tanh(g, cur);
        } else if (pick < 8 && n_hist[lane] > 1) {
            int32_t back = 1 + (int32_t)(NEXT() % 40);
            if (back >= n_hist[lane] || back >= HIST)
                back = n_hist[lane] < HIST ? n_hist[lane] - 1 : HIST - 1;
            cur = pbl_add(g, cur, hist[lane][(n_hist[lane] - 1 - back) % HIST]);
        } else {
            int to = (int)(NEXT() % LANES);
            snprintf(name, sizeof name, "w%d", pbl_graph_value_count(g));
            pbl_value w = pbl_param(g, name, PBL_SHAPE(widths[to], widths[lane]));
            cur = pbl_fully_connected(g, cur, w, PBL_NONE);
            lane = to;
        }
        hist[lane][n_hist[lane]++ % HIST] = cur;
    }
#undef NEXT
    if (pbl_graph_build_status(g) != PBL_OK || pbl_graph_set_output(g, "y", cur) != PBL_OK) {
        fprintf(stderr, "plan_bench: random graph: %s\n", pbl_graph_errmsg(g));
        pbl_graph_destroy(g);
        return NULL;
    }
    return g;
}

/* A deep MLP's training step (widths cycling 256, 128, 512; batch 32; Adam) of about `values`
 * values: the zoo's training graphs, grown to any size. */
static pbl_graph *deep_mlp_graph(int32_t values, uint64_t seed)
{
    (void)seed;
    static const int64_t widths[] = { 256, 128, 512 };
    pbl_graph *g;
    if (pbl_graph_create(&g, NULL) != PBL_OK)
        return NULL;
    /* about 17 values per layer: fc, relu, 5 backward values, w and b with Adam's 3 states each,
     * 2 × 4 update outputs */
    int32_t layers = values / 17 > 1 ? values / 17 : 1;
    pbl_value *params = malloc((size_t)layers * 2 * sizeof *params), *grads = malloc((size_t)layers * 2 * sizeof *grads);
    pbl_value h = pbl_input(g, "x", PBL_SHAPE(32, widths[0]));
    pbl_value y = pbl_label(g, "y", PBL_I32, PBL_SHAPE(32));
    char name[32];
    for (int32_t l = 0; l < layers && params; l++) {
        int64_t in = widths[l % 3], out = l + 1 == layers ? 10 : widths[(l + 1) % 3];
        snprintf(name, sizeof name, "w%d", (int)l);
        params[2 * l] = pbl_param(g, name, PBL_SHAPE(out, in));
        snprintf(name, sizeof name, "b%d", (int)l);
        params[2 * l + 1] = pbl_param(g, name, PBL_SHAPE(out));
        h = pbl_fully_connected(g, h, params[2 * l], params[2 * l + 1]);
        if (l + 1 < layers)
            h = pbl_relu(g, h);
    }
    pbl_value loss = pbl_softmax_cross_entropy(g, h, y);
    pbl_optimizer_options o = pbl_optimizer_options_default(PBL_OPTIM_ADAM);
    if (!params || !grads || pbl_graph_build_status(g) != PBL_OK || pbl_graph_set_output(g, "loss", loss) != PBL_OK ||
        pbl_graph_gradient(g, loss, params, layers * 2, grads) != PBL_OK ||
        pbl_graph_add_optimizer(g, &o, params, grads, layers * 2) != PBL_OK) {
        fprintf(stderr, "plan_bench: deep MLP: %s\n", pbl_graph_errmsg(g));
        pbl_graph_destroy(g);
        g = NULL;
    }
    free(params);
    free(grads);
    return g;
}

static void run_scaling_of(const char *title, const char *what, pbl_graph *(*make)(int32_t, uint64_t), int *first_json)
{
    static const int32_t sizes[] = { 1000, 10000, 100000 };
    print_header(title);
    row rows[3];
    for (int i = 0; i < 3; i++) {
        row *rw = &rows[i];
        memset(rw, 0, sizeof *rw);
        pbl_graph *g = make(sizes[i], 42);
        if (!g) {
            failures++;
            return;
        }
        snprintf(rw->name, sizeof rw->name, "%s %d values", what, (int)pbl_graph_value_count(g));
        graph_row(rw, g);
        print_row(rw, *first_json);
        *first_json = 0;
        pbl_graph_destroy(g);
    }
    if (json)
        return;
    printf("%-28s %8s %12s", "growth 10k -> 100k: t ~ n^", "", "");
    for (int k = 0; k < n_strategy; k++) {
        const cell *a = &rows[1].c[k], *b = &rows[2].c[k];
        char buf[32] = "-";
        if (a->ok && b->ok && a->ms > 0)
            snprintf(buf, sizeof buf, "%.2f", log10(b->ms / a->ms) / log10((double)rows[2].records / rows[1].records));
        printf(" %16s", buf);
    }
    printf("\n%-28s %8s %12s  liveness: %.1f / %.1f / %.1f ms\n", "", "", "", rows[0].liveness_ms,
           rows[1].liveness_ms, rows[2].liveness_ms);
}

static void run_scaling(int *first_json)
{
    run_scaling_of("scaling: deep MLP training steps (align 64): arena / lower bound, planning ms", "deep MLP",
                   deep_mlp_graph, first_json);
    run_scaling_of("scaling: random residual graphs (align 64): arena / lower bound, planning ms", "random",
                   random_graph, first_json);
}

/* ---- MiniMalloc CSVs ---------------------------------------------------------------------- */

static void run_minimalloc(const char *dir, int *first_json)
{
    static const char *const files[] = { "A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "K" };
    print_header("MiniMalloc challenging instances (align 1): arena / lower bound, planning ms");
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.1048576.csv", dir, files[i]);
        pbl_records_file f;
        char err[512];
        if (pbl_records_read_csv(path, NULL, &f, err, sizeof err) != PBL_OK) {
            fprintf(stderr, "plan_bench: %s\n", err);
            failures++;
            continue;
        }
        row rw;
        memset(&rw, 0, sizeof rw);
        snprintf(rw.name, sizeof rw.name, "%s.1048576", files[i]);
        plan_all(&rw, f.records, f.n, 1);
        print_row(&rw, *first_json);
        *first_json = 0;
        pbl_records_file_free(&f);
    }
}

/* ---- real traces ------------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void run_traces(const char *dir, int *first_json)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "plan_bench: %s: cannot open the directory\n", dir);
        failures++;
        return;
    }
    char *names[256];
    int n_names = 0;
    for (struct dirent *e; (e = readdir(d)) && n_names < 256;) {
        size_t len = strlen(e->d_name);
        if (len > 4 && strcmp(e->d_name + len - 4, ".csv") == 0)
            names[n_names++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n_names, sizeof *names, cmp_str);
    print_header("Real traces (align 1): arena / lower bound, planning ms (fastest of 3)");
    fastest = 1;
    for (int i = 0; i < n_names; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        pbl_records_file f;
        char err[512];
        if (!names[i] || pbl_records_read_csv(path, NULL, &f, err, sizeof err) != PBL_OK) {
            fprintf(stderr, "plan_bench: %s\n", names[i] ? err : "out of memory");
            failures++;
            free(names[i]);
            continue;
        }
        row rw;
        memset(&rw, 0, sizeof rw);
        snprintf(rw.name, sizeof rw.name, "%.*s", (int)strlen(names[i]) - 4, names[i]);
        plan_all(&rw, f.records, f.n, 1);
        print_row(&rw, *first_json);
        *first_json = 0;
        pbl_records_file_free(&f);
        free(names[i]);
    }
    fastest = 0;
}

int main(int argc, char **argv)
{
    int zoo = 0, scaling = 0;
    const char *mm = NULL, *only = NULL, *traces = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--zoo") == 0)
            zoo = 1;
        else if (strcmp(argv[i], "--scaling") == 0)
            scaling = 1;
        else if (strcmp(argv[i], "--minimalloc") == 0 && i + 1 < argc)
            mm = argv[++i];
        else if (strcmp(argv[i], "--traces") == 0 && i + 1 < argc)
            traces = argv[++i];
        else if (strcmp(argv[i], "--strategies") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "--format") == 0 && i + 1 < argc)
            json = strcmp(argv[++i], "json") == 0;
        else {
            fprintf(stderr, "usage: plan_bench [--zoo] [--minimalloc DIR] [--traces DIR] [--scaling] [--strategies a,b] "
                            "[--format table|json]\n");
            return 2;
        }
    }
    if (!zoo && !scaling && !mm && !traces)
        zoo = scaling = 1;
    for (int32_t k = 0; k < pbl_plan_strategy_count() && n_strategy < MAX_STRATEGIES; k++) {
        const char *s = pbl_plan_strategy_name(k);
        if (only) {
            char pat[80];
            snprintf(pat, sizeof pat, ",%s,", s);
            char list[512];
            snprintf(list, sizeof list, ",%s,", only);
            if (!strstr(list, pat))
                continue;
        }
        strategy[n_strategy++] = s;
    }
    int first = 1;
    if (json)
        printf("{\n  \"rows\": [\n");
    if (zoo)
        run_zoo(&first);
    if (mm)
        run_minimalloc(mm, &first);
    if (traces)
        run_traces(traces, &first);
    if (scaling)
        run_scaling(&first);
    if (json)
        printf("\n  ]\n}\n");
    return failures ? 1 : 0;
}
