/*
 * exact_vs_minimalloc: the `exact` strategy on MiniMalloc's challenging suite (A-K), beside
 * MiniMalloc's published solve times.
 *
 *   exact_vs_minimalloc [--dir DIR] [--capacity C] [--time-limit S] [--minimise]
 *                       [--only A,B,...] [--out DIR] [--format table|json]
 *
 * Default: every instance at capacity 1048576 (the suite's decision problem), 10 s each. Per
 * instance it prints the time exact took, whether pbl_plan_verify accepted the packing at
 * that capacity, the arena, and MiniMalloc's time from its ASPLOS '23 talk slides (the table
 * in shared/minimalloc_benchmarks/README.md). --minimise drops the capacity: exact then
 * minimises the arena within the time limit and the table shows the lower bound and whether
 * the result was proven optimal. --out writes each packing to DIR/NAME.exact.csv (records
 * plus an offset column; `pebble check` reads it back). Times are wall-clock and thread CPU
 * time on the machine this runs on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pebble/plan.h"
#include "pebble/plan_io.h"

#ifndef PBL_MINIMALLOC_DIR
#define PBL_MINIMALLOC_DIR "../shared/minimalloc_benchmarks"
#endif

typedef struct instance {
    const char *name;
    double      minimalloc_ms; /* published, challenging suite, capacity 1048576 */
} instance;

static const instance suite[] = {
    { "A", 4910 }, { "B", 3661 }, { "C", 637 }, { "D", 2674 }, { "E", 3717 }, { "F", 5358 },
    { "G", 1181 }, { "H", 1808 }, { "I", 3908 }, { "J", 883 }, { "K", 628 },
};

static double clock_s(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int wanted(const char *only, const char *name)
{
    if (!only)
        return 1;
    size_t len = strlen(name);
    for (const char *p = only; *p;) {
        const char *q = strchr(p, ',');
        size_t l = q ? (size_t)(q - p) : strlen(p);
        if (l == len && strncmp(p, name, l) == 0)
            return 1;
        if (!q)
            break;
        p = q + 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *dir = PBL_MINIMALLOC_DIR, *only = NULL, *format = "table", *out_dir = NULL;
    long long capacity = 1048576;
    double limit = 10.0;
    int minimise = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            dir = argv[++i];
        else if (strcmp(argv[i], "--capacity") == 0 && i + 1 < argc)
            capacity = atoll(argv[++i]);
        else if (strcmp(argv[i], "--time-limit") == 0 && i + 1 < argc)
            limit = atof(argv[++i]);
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            out_dir = argv[++i];
        else if (strcmp(argv[i], "--format") == 0 && i + 1 < argc)
            format = argv[++i];
        else if (strcmp(argv[i], "--minimise") == 0)
            minimise = 1;
        else {
            fprintf(stderr, "usage: exact_vs_minimalloc [--dir DIR] [--capacity C] [--time-limit S] [--minimise]"
                            " [--only A,B,...] [--out DIR] [--format table|json]\n");
            return 2;
        }
    }
    int json = strcmp(format, "json") == 0;
    if (!json && strcmp(format, "table") != 0) {
        fprintf(stderr, "exact_vs_minimalloc: --format is table or json\n");
        return 2;
    }
    if (minimise)
        capacity = 0;
    if (json)
        printf("{\"capacity\": %lld, \"time_limit\": %g, \"instances\": [", capacity, limit);
    else
        printf("%-8s %4s %9s %9s %8s %8s %8s %14s %9s %8s\n", "instance", "n", "exact_ms", "cpu_ms", "verified",
               "arena", "optimal", minimise ? "lower_bound" : "status", minimise ? "" : "minimalloc", minimise ? "" : "speedup");
    int failures = 0, first = 1;
    for (size_t k = 0; k < sizeof suite / sizeof suite[0]; k++) {
        if (!wanted(only, suite[k].name))
            continue;
        char path[4096], err[512];
        snprintf(path, sizeof path, "%s/%s.1048576.csv", dir, suite[k].name);
        pbl_records_file f;
        if (pbl_records_read_csv(path, NULL, &f, err, sizeof err) != PBL_OK) {
            fprintf(stderr, "exact_vs_minimalloc: %s\n", err);
            return 1;
        }
        pbl_plan_options o = pbl_plan_options_default();
        o.capacity = capacity;
        o.time_limit = limit;
        pbl_assignment a;
        double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
        pbl_status s = pbl_plan_records(f.records, f.n, "exact", &o, &a, err, sizeof err);
        double ms = (clock_s(CLOCK_MONOTONIC) - t0) * 1e3, cpu_ms = (clock_s(CLOCK_THREAD_CPUTIME_ID) - c0) * 1e3;
        int verified = s == PBL_OK && pbl_plan_verify(f.records, f.n, &a, 1, capacity, NULL, 0) == PBL_OK;
        long long arena = s == PBL_OK ? (long long)a.arena : -1;
        int optimal = s == PBL_OK && a.optimal;
        long long lb = (long long)pbl_records_lower_bound(f.records, f.n);
        failures += !verified;
        if (verified && out_dir) {
            char out_path[4096];
            snprintf(out_path, sizeof out_path, "%s/%s.exact.csv", out_dir, suite[k].name);
            if (pbl_assignment_write_csv(out_path, &f, &a, err, sizeof err) != PBL_OK) {
                fprintf(stderr, "exact_vs_minimalloc: %s\n", err);
                failures++;
            }
        }
        if (json) {
            printf("%s\n  {\"name\": \"%s\", \"n\": %d, \"ms\": %.1f, \"cpu_ms\": %.1f, \"status\": \"%s\", "
                   "\"verified\": %s, \"arena\": %lld, \"optimal\": %s, \"lower_bound\": %lld, "
                   "\"minimalloc_ms\": %.0f}",
                   first ? "" : ",", suite[k].name, (int)f.n, ms, cpu_ms, pbl_status_name(s),
                   verified ? "true" : "false", arena, optimal ? "true" : "false", lb, suite[k].minimalloc_ms);
        } else {
            if (minimise)
                printf("%-8s %4d %9.1f %9.1f %8s %8lld %8s %14lld\n", suite[k].name, (int)f.n, ms, cpu_ms,
                       verified ? "yes" : "NO", arena, optimal ? "yes" : "no", lb);
            else
                printf("%-8s %4d %9.1f %9.1f %8s %8lld %8s %14s %9.0f %7.1fx\n", suite[k].name, (int)f.n, ms, cpu_ms,
                       verified ? "yes" : "NO", arena, optimal ? "yes" : "no", pbl_status_name(s) + 4,
                       suite[k].minimalloc_ms, suite[k].minimalloc_ms / (ms > 0.01 ? ms : 0.01));
        }
        first = 0;
        fflush(stdout);
        if (s == PBL_OK)
            pbl_assignment_free(&a);
        pbl_records_file_free(&f);
    }
    if (json)
        printf("\n]}\n");
    return failures ? 1 : 0;
}
