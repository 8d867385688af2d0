/* `pebble explain`: why the peak is what it is (pbl_explain_graph, pbl_explain_records): the
 * peak step, every value live there, the chosen strategy's waste, and what would lower it. */
#include <string.h>

#include "cli.h"

enum format { FORMAT_TABLE, FORMAT_CSV, FORMAT_JSON };

static void print_usage(FILE *f)
{
    fprintf(f,
            "usage: pebble explain FILE [options]\n"
            "\n"
            "Explains FILE's peak: the step where the most bytes are live (the lower bound no\n"
            "plan can beat), every value live there (name, shape, bytes, producer, last reader,\n"
            "kind), which sum to the lower bound; the strategy's arena and where it exceeds the\n"
            "live bytes (steps and address ranges); and, for graphs, what would lower the peak\n"
            "(fusion, recomputing an activation kept for backward, the min_peak node order),\n"
            "each measured on the rewritten graph. FILE is a graph file (%s), zoo:NAME"
#ifndef PEBBLE_HAVE_ZOO
            " (not in this build)"
#endif
            ", or a records\nCSV (id,lower,upper,size: no names beyond the ids, no suggestions); - reads standard input.\n"
            "\n"
            "kinds: temporary, saved_activation (a forward value kept for backward), output,\n"
            "parameter_gradient, gradient, record (a CSV's); outside the arena (the caller's):\n"
            "input, label, parameter, optimizer_state.\n"
            "\n"
            "options:\n"
            "  --strategy NAME   the strategy whose arena is explained (default: best)\n"
            "  --align N         offsets are multiples of N (default 1 for CSV, 64 for graphs)\n"
            "  --time-limit S    CPU seconds for searching strategies (default: their own)\n"
            "  --batch N         zoo graphs: the batch size (default: the model's)\n"
            "  --schedule S      graphs: the node order explained, program (default) or min_peak\n"
            "                    (the order of least lower bound pebble's scheduler finds)\n"
            "  --format F        table (default), csv (the values live at the peak) or json\n"
            "  -h, --help        this text\n"
            "\n"
            "Exit status: 0 explained, 1 a failure (no valid plan, a file that cannot be read),\n"
            "2 for a bad command line or a malformed FILE.\n",
            cli_model_extensions());
}

typedef struct explain_opts {
    const char *file, *strategy;
    pbl_schedule_kind schedule;
    int         schedule_given;
    int64_t     align, batch;
    double      time_limit;
    int         format;
} explain_opts;

static const args_flag explain_flags[] = { { "--strategy", 1 },   { "--align", 1 },  { "--batch", 1 },
                                           { "--time-limit", 1 }, { "--format", 1 },  { "--schedule", 1 } };
enum { F_STRATEGY, F_ALIGN, F_BATCH, F_TIME, F_FORMAT, F_SCHEDULE };

static int take_arg(void *ctx, int which, const char *v)
{
    explain_opts *o = ctx;
    switch (which) {
    case ARGS_POSITIONAL:
        return cli_take_file("explain", "FILE", &o->file, v) ? CLI_USAGE : 0;
    case F_STRATEGY:
        o->strategy = v;
        return 0;
    case F_ALIGN:
        return cli_parse_int("--align", v, 1, INT64_C(1) << 30, &o->align) ? CLI_USAGE : 0;
    case F_BATCH:
        return cli_parse_int("--batch", v, 1, INT64_C(1) << 20, &o->batch) ? CLI_USAGE : 0;
    case F_TIME:
        return cli_parse_double("--time-limit", v, 1e-6, 1e6, &o->time_limit) ? CLI_USAGE : 0;
    case F_SCHEDULE:
        if (cli_check_schedule(v, 0) != CLI_OK)
            return CLI_USAGE;
        o->schedule_given = 1;
        return pbl_schedule_kind_parse(v, &o->schedule) == PBL_OK ? 0 : CLI_USAGE;
    default: /* F_FORMAT */
        if (strcmp(v, "table") == 0)
            o->format = FORMAT_TABLE;
        else if (strcmp(v, "csv") == 0)
            o->format = FORMAT_CSV;
        else if (strcmp(v, "json") == 0)
            o->format = FORMAT_JSON;
        else {
            cli_error("--format: '%s' is not one of table, csv, json", v);
            return CLI_USAGE;
        }
        return 0;
    }
}

/* "fc1" or NULL */
static const char *node_name(const pbl_graph *g, pbl_node n)
{
    pbl_node_info ni;
    return g && n != PBL_NONE && pbl_graph_node_info(g, n, &ni) == PBL_OK ? ni.name : NULL;
}

static const char *node_op(const pbl_graph *g, pbl_node n)
{
    pbl_node_info ni;
    return g && n != PBL_NONE && pbl_graph_node_info(g, n, &ni) == PBL_OK ? ni.op : NULL;
}

static void json_str_or_null(FILE *f, const char *s)
{
    if (s)
        cli_json_string(f, s);
    else
        fputs("null", f);
}

static void json_record(FILE *f, const pbl_graph *g, const pbl_explain_record *r, int planned)
{
    fputs("{\"name\": ", f);
    json_str_or_null(f, r->name);
    fputs(", \"shape\": ", f);
    if (r->value == PBL_NONE) {
        fputs("null", f);
    } else {
        fputc('[', f);
        for (int32_t d = 0; d < r->shape.ndim; d++)
            fprintf(f, d ? ", %lld" : "%lld", (long long)r->shape.dim[d]);
        fprintf(f, "], \"dtype\": \"%s\"", pbl_dtype_name(r->dtype));
    }
    fprintf(f, ", \"bytes\": %lld, \"kind\": \"%s\", \"producer\": ", (long long)r->bytes,
            pbl_explain_kind_name(r->kind));
    json_str_or_null(f, node_name(g, r->producer));
    fputs(", \"producer_op\": ", f);
    json_str_or_null(f, node_op(g, r->producer));
    fputs(", \"last_reader\": ", f);
    json_str_or_null(f, node_name(g, r->last_reader));
    if (planned)
        fprintf(f, ", \"first\": %lld, \"last\": %lld, \"offset\": %lld, \"values\": %d", (long long)r->first,
                (long long)r->last, (long long)r->offset, (int)r->n_values);
    fputc('}', f);
}

/* {"step", "live", "top", "unused", "holes"}: unused is arena - live at the peak (holes over
 * the whole arena), top - live elsewhere (holes below the top: fragmentation) */
static void json_holes(FILE *f, const pbl_explain *e, int32_t step, int64_t end, const pbl_explain_range *h,
                       int32_t n)
{
    if (step < 0) {
        fputs("null", f);
        return;
    }
    fprintf(f, "{\"step\": %d, \"live\": %lld, \"top\": %lld, \"unused\": %lld, \"holes\": [", (int)step,
            (long long)e->live[step], (long long)e->top[step], (long long)(end - e->live[step]));
    for (int32_t k = 0; k < n; k++)
        fprintf(f, k ? ", [%lld, %lld]" : "[%lld, %lld]", (long long)h[k].lo, (long long)h[k].hi);
    fputs("]}", f);
}

static const char *fix_name(pbl_explain_fix x)
{
    return x == PBL_EXPLAIN_FIX_FUSION ? "fusion" : x == PBL_EXPLAIN_FIX_RECOMPUTE ? "recompute" : "schedule";
}

static void print_json(FILE *f, const char *file, const pbl_graph *g, const pbl_explain *e,
                       const char *schedule)
{
    fputs("{\"file\": ", f);
    cli_json_string(f, file);
    fputs(", \"schedule\": ", f);
    json_str_or_null(f, schedule);
    fprintf(f, ", \"strategy\": \"%s\", \"lower_bound\": %lld, \"peak_step\": %d, \"n_peak_steps\": %d, "
               "\"n_steps\": %d, \"peak_node\": ",
            e->strategy, (long long)e->lower_bound, (int)e->peak_step, (int)e->n_peak_steps, (int)e->n_steps);
    json_str_or_null(f, e->peak_step >= 0 && e->peak_step < e->graph_records.n_steps
                            ? node_name(g, e->graph_records.schedule[e->peak_step])
                            : NULL);
    fprintf(f, ", \"arena\": %lld,\n\"live_at_peak\": [", (long long)e->arena);
    for (int32_t k = 0; k < e->n_live_at_peak; k++) {
        fputs(k ? ",\n  " : "\n  ", f);
        json_record(f, g, &e->rec[e->live_at_peak[k]], 1);
    }
    fprintf(f, "],\n\"outside_arena\": {\"bytes\": %lld, \"values\": [", (long long)e->outside_bytes);
    for (int32_t k = 0; k < e->n_outside; k++) {
        fputs(k ? ",\n  " : "\n  ", f);
        json_record(f, g, &e->outside[k], 0);
    }
    fprintf(f, "]},\n\"waste\": {\"arena_step\": %d, \"at_peak\": ", (int)e->arena_step);
    json_holes(f, e, e->peak_step, e->arena, e->holes_at_peak, e->n_holes_at_peak);
    fputs(", \"most_fragmented\": ", f);
    json_holes(f, e, e->worst_step, e->worst_step >= 0 ? e->top[e->worst_step] : 0, e->holes_at_worst,
               e->n_holes_at_worst);
    fputs("},\n\"live_bytes\": [", f);
    for (int32_t t = 0; t < e->n_steps; t++)
        fprintf(f, t ? ",%lld" : "%lld", (long long)e->live[t]);
    fputs("],\n\"top_bytes\": [", f);
    for (int32_t t = 0; t < e->n_steps; t++)
        fprintf(f, t ? ",%lld" : "%lld", (long long)e->top[t]);
    fputs("],\n\"suggestions\": [", f);
    for (int32_t k = 0; k < e->n_suggestions; k++) {
        const pbl_explain_suggestion *x = &e->suggestions[k];
        fprintf(f, "%s{\"fix\": \"%s\", \"value\": ", k ? ",\n  " : "\n  ", fix_name(x->fix));
        json_str_or_null(f, x->name);
        fprintf(f, ", \"estimated\": %s, ", x->estimated ? "true" : "false");
        if (x->estimated)
            fprintf(f, "\"lower_bound\": %lld, \"saves\": %lld", (long long)x->lower_bound, (long long)x->saves);
        else
            fputs("\"lower_bound\": null, \"saves\": null", f);
        fputs(", \"note\": ", f);
        cli_json_string(f, x->note);
        fputc('}', f);
    }
    fputs("]}\n", f);
}

static void print_csv(FILE *f, const pbl_graph *g, const pbl_explain *e)
{
    fputs("name,shape,bytes,kind,producer,last_reader,first,last,offset\n", f);
    for (int32_t k = 0; k < e->n_live_at_peak; k++) {
        const pbl_explain_record *r = &e->rec[e->live_at_peak[k]];
        char shape[160] = "";
        if (r->value != PBL_NONE)
            pbl_shape_str(&r->shape, shape, sizeof shape);
        cli_csv_field(f, r->name ? r->name : "");
        fputc(',', f);
        cli_csv_field(f, shape);
        fprintf(f, ",%lld,%s,", (long long)r->bytes, pbl_explain_kind_name(r->kind));
        cli_csv_field(f, node_name(g, r->producer) ? node_name(g, r->producer) : "");
        fputc(',', f);
        cli_csv_field(f, node_name(g, r->last_reader) ? node_name(g, r->last_reader) : "");
        fprintf(f, ",%lld,%lld,%lld\n", (long long)r->first, (long long)r->last, (long long)r->offset);
    }
}

/* A name for the terminal (escaped), "-" for none. */
static const char *shown(const char *s, char *buf, size_t n)
{
    return s ? cli_shown(s, buf, n) : "-";
}

static void print_holes(FILE *f, const pbl_explain_range *h, int32_t n)
{
    for (int32_t k = 0; k < n && k < 8; k++)
        fprintf(f, "%s[%lld, %lld)", k ? ", " : " ", (long long)h[k].lo, (long long)h[k].hi);
    if (n > 8)
        fprintf(f, " and %d more", (int)(n - 8));
}

static void print_table(FILE *f, const char *file, const pbl_graph *g, const pbl_explain *e,
                        const char *schedule)
{
    char a[4 * CLI_NAME_SHOWN], b[4 * CLI_NAME_SHOWN], c[4 * CLI_NAME_SHOWN];
    fprintf(f, "%s: lower bound %lld bytes, at step %d of %d", shown(file, a, sizeof a), (long long)e->lower_bound,
            (int)e->peak_step, (int)e->n_steps);
    const char *peak_node = e->peak_step >= 0 && e->peak_step < e->graph_records.n_steps
                                ? node_name(g, e->graph_records.schedule[e->peak_step])
                                : NULL;
    if (peak_node)
        fprintf(f, " (%s, %s)", shown(peak_node, b, sizeof b),
                node_op(g, e->graph_records.schedule[e->peak_step]));
    if (schedule && strcmp(schedule, "program") != 0)
        fprintf(f, ", nodes in %s order", schedule);
    fputc('\n', f);
    if (e->n_peak_steps > 1)
        fprintf(f, "  (%d steps reach it; the first is shown)\n", (int)e->n_peak_steps);
    fprintf(f, "\nlive at the peak: %d value%s, %lld bytes (the lower bound)\n", (int)e->n_live_at_peak,
            e->n_live_at_peak == 1 ? "" : "s", (long long)e->lower_bound);
    fprintf(f, "  %12s  %-18s  %-24s  %-18s  %-20s  %s\n", "bytes", "kind", "name", "shape", "producer", "last reader");
    for (int32_t k = 0; k < e->n_live_at_peak; k++) {
        const pbl_explain_record *r = &e->rec[e->live_at_peak[k]];
        char shape[160] = "-";
        if (r->value != PBL_NONE)
            pbl_shape_str(&r->shape, shape, sizeof shape);
        fprintf(f, "  %12lld  %-18s  %-24s  %-18s  %-20s  %s\n", (long long)r->bytes, pbl_explain_kind_name(r->kind),
                shown(r->name, a, sizeof a), shape, shown(node_name(g, r->producer), b, sizeof b),
                shown(node_name(g, r->last_reader), c, sizeof c));
    }
    if (e->n_outside) {
        int64_t by[PBL_EXPLAIN_OPTIMIZER_STATE + 1] = { 0 };
        for (int32_t k = 0; k < e->n_outside; k++)
            by[e->outside[k].kind] += e->outside[k].bytes;
        fprintf(f, "\noutside the arena (the caller's, live throughout): %lld bytes: parameters %lld, optimizer "
                   "state %lld, inputs %lld, labels %lld\n",
                (long long)e->outside_bytes, (long long)by[PBL_EXPLAIN_PARAMETER],
                (long long)by[PBL_EXPLAIN_OPTIMIZER_STATE], (long long)by[PBL_EXPLAIN_INPUT],
                (long long)by[PBL_EXPLAIN_LABEL]);
    }
    fprintf(f, "\narena (%s): %lld bytes, %lld over the lower bound", e->strategy, (long long)e->arena,
            (long long)(e->arena - e->lower_bound));
    if (e->peak_step >= 0 && e->n_holes_at_peak) {
        fprintf(f, "\n  unused at the peak (step %d):", (int)e->peak_step);
        print_holes(f, e->holes_at_peak, e->n_holes_at_peak);
    }
    if (e->arena_step >= 0)
        fprintf(f, "\n  first reached at step %d", (int)e->arena_step);
    if (e->worst_step >= 0) {
        fprintf(f, "\n  most fragmented at step %d: %lld bytes live below byte %lld, %lld unused:", (int)e->worst_step,
                (long long)e->live[e->worst_step], (long long)e->top[e->worst_step],
                (long long)(e->top[e->worst_step] - e->live[e->worst_step]));
        print_holes(f, e->holes_at_worst, e->n_holes_at_worst);
    } else {
        fprintf(f, "\n  no fragmentation: at every step the live bytes fill the arena up to the highest in use");
    }
    fputc('\n', f);
    if (e->n_suggestions)
        fprintf(f, "\nwhat would lower the peak (the lower bound of the rewritten graph):\n");
    for (int32_t k = 0; k < e->n_suggestions; k++) {
        const pbl_explain_suggestion *x = &e->suggestions[k];
        char what[4 * CLI_NAME_SHOWN + 16];
        snprintf(what, sizeof what, "%s%s%s", fix_name(x->fix), x->name ? " " : "", x->name ? shown(x->name, a, sizeof a) : "");
        if (x->estimated)
            fprintf(f, "  %-32s  saves %12lld  (lower bound %lld)  %s\n", what, (long long)x->saves,
                    (long long)x->lower_bound, x->note);
        else
            fprintf(f, "  %-32s  %s\n", what, x->note);
    }
}

int cli_explain(int argc, char **argv)
{
    explain_opts o = { .strategy = "best", .format = FORMAT_TABLE };
    int rc = cli_parse("explain", explain_flags, (int)(sizeof explain_flags / sizeof explain_flags[0]), take_arg,
                       print_usage, argc, argv, &o);
    if (rc != ARGS_GO_ON)
        return rc;
    if (!o.file) {
        cli_error("explain: no FILE given (see pebble explain --help)");
        return CLI_USAGE;
    }
    if (cli_check_strategy(o.strategy, 0) != CLI_OK)
        return CLI_USAGE;
    int is_graph;
    if ((rc = cli_source_is_graph(o.file, &is_graph)) != CLI_OK)
        return rc;
    pbl_explain_options eo = pbl_explain_options_default();
    eo.strategy = o.strategy;
    eo.time_limit = o.time_limit;
    pbl_explain e = { 0 };
    pbl_graph *g = NULL;
    cli_records src = { 0 };
    int have_src = 0;
    char err[2048];
    pbl_status s;
    if (is_graph) {
        if ((rc = cli_model_load(o.file, o.batch, &g)) != CLI_OK)
            return rc;
        eo.align = o.align ? o.align : 64;
        eo.schedule = o.schedule;
        s = pbl_explain_graph(g, &eo, &e, err, sizeof err);
    } else {
        if (o.batch || o.schedule_given) {
            cli_error("%s: %s", cli_display_name(o.file),
                      o.batch ? "--batch applies to zoo graphs only" : "--schedule applies to graphs only");
            return CLI_USAGE;
        }
        if ((rc = cli_records_load(o.file, 0, o.align, &src)) != CLI_OK)
            return rc;
        have_src = 1;
        eo.align = o.align ? o.align : src.default_align;
        s = pbl_explain_records(src.file.records, src.file.n, (const char *const *)src.file.ids, NULL, NULL, &eo, &e,
                                err, sizeof err);
    }
    if (s != PBL_OK) {
        cli_error("%s: %s", cli_display_name(o.file), err);
        rc = s == PBL_ERR_INVALID_ARG || s == PBL_ERR_NOT_FOUND || s == PBL_ERR_CYCLE ? CLI_USAGE : CLI_FAIL;
        goto done;
    }
    const char *schedule = g ? pbl_schedule_kind_name(o.schedule) : NULL;
    if (o.format == FORMAT_JSON)
        print_json(stdout, cli_display_name(o.file), g, &e, schedule);
    else if (o.format == FORMAT_CSV)
        print_csv(stdout, g, &e);
    else
        print_table(stdout, cli_display_name(o.file), g, &e, schedule);
done:
    pbl_explain_free(&e);
    pbl_graph_destroy(g);
    if (have_src)
        cli_records_free(&src);
    return rc;
}
