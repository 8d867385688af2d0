/*
 * streams_bench: memory beside parallelism when a graph runs on several streams.
 *
 *   streams_bench [--models a,b,...] [--streams 1,2,4,8] [--format table|json]
 *
 * For every zoo graph (or the ones named) and every stream count, the graph is coloured
 * (pbl_graph_streams, NNVM's heaviest-path colouring over pebble's cost model) and its memory
 * planned with each stream strategy (colour, hb, hb_events; align 64). Columns:
 *
 *   waits     cross-stream waits (event edges) after transitive reduction; "+k" the waits
 *             hb_events added
 *   speedup   total cost / makespan: the makespan is the longest path through stream order
 *             and waits, weighted by cost (pbl_stream_plan_makespan), so this is the speedup
 *             the plan allows on hardware with one unit per stream
 *   sp_ev     the same after hb_events' added waits (its price in parallelism)
 *   dag       total cost / the dependency DAG's critical path: the speedup no number of
 *             streams can beat
 *   colour, hb, hb_events   arena / the serial lower bound (the most bytes live at one step
 *             of the single-stream schedule, pbl_records_lower_bound of pbl_graph_liveness)
 *   ms        planning time of hb_events, the slowest
 *
 * Every plan passed pbl_stream_plan_verify inside pbl_graph_stream_storage; a failure prints
 * the error and the program exits 1.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pebble/pebble.h"
#include "zoo.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The critical path of g's scheduled nodes over data dependencies, weighted by pbl_node_cost. */
static int64_t dag_critical_path(const pbl_graph *g, const pbl_stream_plan *sp)
{
    int32_t nn = pbl_graph_node_count(g);
    int64_t *finish = calloc((size_t)(nn ? nn : 1), sizeof *finish), best = 0;
    for (int32_t t = 0; t < sp->n_steps; t++) {
        pbl_node_info ni;
        pbl_graph_node_info(g, sp->schedule[t], &ni);
        int64_t ready = 0;
        for (int32_t k = 0; k < ni.n_inputs; k++) {
            pbl_value_info vi;
            pbl_graph_value_info(g, ni.inputs[k], &vi);
            if (vi.producer != PBL_NONE && finish[vi.producer] > ready)
                ready = finish[vi.producer];
        }
        finish[sp->schedule[t]] = ready + sp->cost[t];
        if (finish[sp->schedule[t]] > best)
            best = finish[sp->schedule[t]];
    }
    free(finish);
    return best;
}

static int in_list(const char *list, const char *name)
{
    if (!list)
        return 1;
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    const char *models = NULL, *streams = "1,2,4,8";
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--models") == 0 && i + 1 < argc)
            models = argv[++i];
        else if (strcmp(argv[i], "--streams") == 0 && i + 1 < argc)
            streams = argv[++i];
        else if (strcmp(argv[i], "--format") == 0 && i + 1 < argc)
            json = strcmp(argv[++i], "json") == 0;
        else {
            fprintf(stderr, "usage: streams_bench [--models a,b] [--streams 1,2,4,8] [--format table|json]\n");
            return 2;
        }
    }
    int counts[16], n_counts = 0;
    for (const char *p = streams; *p && n_counts < 16;) {
        counts[n_counts++] = atoi(p);
        p = strchr(p, ',');
        if (!p)
            break;
        p++;
    }
    const pbl_stream_strategy strat[] = { PBL_STREAM_STRATEGY_COLOUR, PBL_STREAM_STRATEGY_HB,
                                          PBL_STREAM_STRATEGY_HB_EVENTS };
    int failures = 0, first = 1;
    char err[1024];
    if (json)
        printf("{\"rows\": [\n");
    else
        printf("%-20s %3s %7s %6s %7s %6s %6s %7s %7s %9s %9s\n", "graph", "k", "records", "waits", "speedup", "sp_ev", "dag",
               "colour", "hb", "hb_events", "ms");
    for (int i = 0; i < zoo_count(); i++) {
        const char *name = zoo_name(i);
        if (!in_list(models, name))
            continue;
        pbl_graph *g;
        if (zoo_build(name, 0, &g, err, sizeof err) != PBL_OK) {
            fprintf(stderr, "streams_bench: %s: %s\n", name, err);
            failures++;
            continue;
        }
        pbl_graph_records gr;
        if (pbl_graph_liveness(g, NULL, &gr, err, sizeof err) != PBL_OK) {
            fprintf(stderr, "streams_bench: %s: %s\n", name, err);
            failures++;
            pbl_graph_destroy(g);
            continue;
        }
        int64_t lb = pbl_records_lower_bound(gr.records, gr.n_records);
        for (int c = 0; c < n_counts; c++) {
            pbl_stream_options so = pbl_stream_options_default();
            so.n_streams = counts[c];
            double ratio[3] = { 0 }, ms = 0;
            int32_t waits = 0, added = 0, records = 0, used = 0;
            double speedup = 0, dag = 0, speedup_ev = 0;
            for (int s = 0; s < 3; s++) {
                pbl_stream_plan sp;
                if (pbl_graph_streams(g, &so, &sp, err, sizeof err) != PBL_OK) {
                    fprintf(stderr, "streams_bench: %s, %d streams: %s\n", name, counts[c], err);
                    failures++;
                    break;
                }
                pbl_stream_storage_options o = pbl_stream_storage_options_default();
                o.strategy = strat[s];
                pbl_stream_storage st;
                double t0 = now_ms();
                pbl_status rc = pbl_graph_stream_storage(g, &sp, &o, &st, err, sizeof err);
                double t1 = now_ms();
                if (rc != PBL_OK) {
                    fprintf(stderr, "streams_bench: %s, %d streams, %s: %s\n", name, counts[c],
                            pbl_stream_strategy_name(strat[s]), err);
                    failures++;
                    pbl_stream_plan_free(&sp);
                    continue;
                }
                ratio[s] = (double)st.plan.arena / (double)lb;
                int64_t total, span = pbl_stream_plan_makespan(&sp, &total);
                if (s == 0) {
                    waits = sp.wait_start[sp.n_steps];
                    used = sp.n_streams;
                    records = st.live.n_records;
                    dag = (double)total / (double)dag_critical_path(g, &sp);
                    speedup = (double)total / (double)span;
                }
                if (s == 2) {
                    added = st.n_added_waits;
                    ms = t1 - t0;
                    speedup_ev = (double)total / (double)span;
                }
                pbl_stream_storage_free(&st);
                pbl_stream_plan_free(&sp);
            }
            char wbuf[32];
            snprintf(wbuf, sizeof wbuf, added ? "%d+%d" : "%d", (int)waits, (int)added);
            if (json)
                printf("%s  {\"graph\": \"%s\", \"streams\": %d, \"used\": %d, \"records\": %d, \"lower_bound\": %lld, "
                       "\"waits\": %d, \"added_waits\": %d, \"speedup\": %.3f, \"speedup_events\": %.3f, \"dag_speedup\": %.3f, "
                       "\"colour\": %.4f, \"hb\": %.4f, \"hb_events\": %.4f, \"ms\": %.1f}",
                       first ? "" : ",\n", name, counts[c], used, records, (long long)lb, waits, added, speedup, speedup_ev, dag,
                       ratio[0], ratio[1], ratio[2], ms);
            else
                printf("%-20s %3d %7d %6s %7.2f %6.2f %6.2f %7.3f %7.3f %9.3f %9.1f\n", name, used, records, wbuf,
                       speedup, speedup_ev, dag, ratio[0], ratio[1], ratio[2], ms);
            first = 0;
            fflush(stdout);
        }
        pbl_graph_records_free(&gr);
        pbl_graph_destroy(g);
    }
    if (json)
        printf("\n]}\n");
    return failures ? 1 : 0;
}
