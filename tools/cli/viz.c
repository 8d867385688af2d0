/* `pebble viz`: pictures of a memory plan. --html writes one self-contained page (the
 * template tools/cli/viz.html with every strategy's plan embedded as JSON, from
 * pbl_viz_write_json); --svg a static picture of one strategy. Files are written whole or
 * not at all (graph/base/file_out.h). */
#include <string.h>

#include "cli.h"
#include "graph/base/file_out.h" /* private to the library; the CLI links it statically */

/* Where the template takes the JSON. */
#define DATA_MARKER "@PEBBLE_VIZ_DATA@"
/* --schedule both: the min_peak order's data, in a second element the page's toggle reads */
#define MIN_PEAK_MARKER "@PEBBLE_VIZ_MIN_PEAK@"

static void print_usage(FILE *f)
{
    fprintf(f,
            "usage: pebble viz FILE [--html OUT] [--svg OUT] [--dot OUT] [options]\n"
            "\n"
            "Plans FILE's usage records with every strategy and draws the plans: one rectangle\n"
            "per tensor, its lifetime across and its bytes up, at its offset in the arena.\n"
            "FILE is a records CSV (id,lower,upper,size), a graph file (%s) or\n"
            "zoo:NAME, a model of tools/zoo"
#ifndef PEBBLE_HAVE_ZOO
            " (not in this build)"
#endif
            ". For graphs, hovering a tensor shows its values, shape,\n"
            "producer and consumers. FILE - reads standard input (its format told from its\n"
            "content); OUT - writes standard output (one of --html, --svg, --dot at most).\n"
            "\n"
            "options:\n"
            "  --html OUT         one self-contained page: every strategy's plan, the live-bytes\n"
            "                     curve and the lower bound, a switch between strategies, and\n"
            "                     each tensor's details on hover (no network needed)\n"
            "  --svg OUT          a static picture of one strategy\n"
            "  --strategy NAME    the strategy --svg draws (default: best, the smallest arena)\n"
            "  --dot OUT          graphs only: Graphviz DOT of the scheduled graph, nodes filled\n"
            "                     by stream, values labelled with bytes and arena offset, waits\n"
            "                     between streams dashed red (render: dot -Tsvg OUT)\n"
            "  --streams N        --dot: colour the schedule into N streams (default 1)\n"
            "  --stream-strategy NAME  --dot: colour, hb or hb_events (default hb)\n"
            "  --align N          offsets are multiples of N (default 1 for CSV, 64 for graphs)\n"
            "  --time-limit S     CPU seconds (not wall-clock time) for all the strategies\n"
            "                     together (default: none):\n"
            "                     each gets what is left divided by those still to run, and\n"
            "                     one still working then stops (marked cut off on the page)\n"
            "  --batch N          zoo graphs: the batch size (default: the model's)\n"
            "  --schedule S       graphs: the node order, program (default) or min_peak (the\n"
            "                     order with the smallest lower bound; see pebble plan); both:\n"
            "                     --html only, a page with both orders and a toggle between them\n"
            "  -h, --help         this text\n"
            "\n"
            "Exit status: 0 written, 1 a failure (no valid plan, a file not written), 2 for a bad\n"
            "command line or a malformed FILE.\n",
            cli_model_extensions());
}

typedef struct viz_opts {
    const char *file, *html, *svg, *strategy, *dot, *stream_strategy, *schedule;
    int64_t     align, batch, streams;
    double      time_limit;
} viz_opts;

static const args_flag viz_flags[] = { { "--html", 1 },  { "--svg", 1 },   { "--strategy", 1 },
                                       { "--align", 1 }, { "--batch", 1 }, { "--time-limit", 1 },
                                       { "--dot", 1 },   { "--streams", 1 }, { "--stream-strategy", 1 },
                                       { "--schedule", 1 } };
enum { F_HTML, F_SVG, F_STRATEGY, F_ALIGN, F_BATCH, F_TIME, F_DOT, F_STREAMS, F_STREAM_STRATEGY, F_SCHEDULE };

static int take_arg(void *ctx, int which, const char *v)
{
    viz_opts *o = ctx;
    switch (which) {
    case ARGS_POSITIONAL:
        return cli_take_file("viz", "FILE", &o->file, v) ? CLI_USAGE : 0;
    case F_HTML:
    case F_SVG:
    case F_DOT:
        if (!v[0]) {
            cli_error("%s: empty file name", viz_flags[which].name);
            return CLI_USAGE;
        }
        *(which == F_HTML ? &o->html : which == F_SVG ? &o->svg : &o->dot) = v;
        return 0;
    case F_STRATEGY:
        o->strategy = v;
        return 0;
    case F_STREAMS:
        return cli_parse_int("--streams", v, 1, PBL_MAX_STREAMS, &o->streams) ? CLI_USAGE : 0;
    case F_STREAM_STRATEGY:
        o->stream_strategy = v;
        return 0;
    case F_SCHEDULE:
        o->schedule = v;
        return cli_check_schedule(v, 1) != CLI_OK ? CLI_USAGE : 0;
    case F_ALIGN:
        return cli_parse_int("--align", v, 1, INT64_C(1) << 30, &o->align) ? CLI_USAGE : 0;
    case F_BATCH:
        return cli_parse_int("--batch", v, 1, INT64_C(1) << 20, &o->batch) ? CLI_USAGE : 0;
    default: /* F_TIME */
        return cli_parse_double("--time-limit", v, 1e-6, 1e6, &o->time_limit) ? CLI_USAGE : 0;
    }
}

/* Returns -1 to go on, or the exit status to stop with. */
static int parse_args(int argc, char **argv, viz_opts *o)
{
    *o = (viz_opts){ .strategy = "best", .streams = 1, .stream_strategy = "hb", .schedule = "program" };
    int rc = cli_parse("viz", viz_flags, (int)(sizeof viz_flags / sizeof viz_flags[0]), take_arg, print_usage, argc,
                       argv, o);
    if (rc != ARGS_GO_ON)
        return rc;
    if (!o->file) {
        cli_error("viz: no FILE given (see pebble viz --help)");
        return CLI_USAGE;
    }
    if (!o->html && !o->svg && !o->dot) {
        cli_error("viz: nothing to write: give --html OUT, --svg OUT and/or --dot OUT");
        return CLI_USAGE;
    }
    /* an option that changes nothing is a mistake worth saying: the user expected an effect */
    if (strcmp(o->strategy, "best") != 0 && !o->svg) {
        cli_error("--strategy chooses what --svg draws (the page has every strategy); give --svg OUT");
        return CLI_USAGE;
    }
    if ((o->streams != 1 || strcmp(o->stream_strategy, "hb") != 0) && !o->dot) {
        cli_error("--streams and --stream-strategy apply to --dot; give --dot OUT");
        return CLI_USAGE;
    }
    if (strcmp(o->schedule, "both") == 0 && (o->svg || o->dot || !o->html)) {
        cli_error("--schedule both applies to --html only (a page with a toggle between the orders)");
        return CLI_USAGE;
    }
    const char *const flag[] = { "--html", "--svg", "--dot" };
    const char *const out[] = { o->html, o->svg, o->dot };
    int checked = cli_check_outputs(o->file, flag, out, 3);
    if (checked != CLI_OK)
        return checked;
    return -1;
}

/* The strategy --svg draws: best (the smallest arena), or the one named (the plan has every
 * strategy but best), which must have given a valid plan. */
static int svg_strategy(const pbl_viz_plan *p, const char *name, int32_t *k)
{
    *k = p->best;
    for (int32_t i = 0; i < p->n_strategies && strcmp(name, "best") != 0; i++)
        if (strcmp(p->strategies[i].name, name) == 0) {
            if (!p->strategies[i].valid) {
                cli_error("--strategy %s: no valid plan: %s", name, p->strategies[i].error);
                return CLI_FAIL;
            }
            *k = i;
        }
    return CLI_OK;
}

typedef struct viz_job {
    const pbl_viz_plan   *plan;
    const pbl_viz_labels *labels;
    const pbl_viz_plan   *alt_plan;   /* --schedule both: the min_peak order's (else NULL) */
    const pbl_viz_labels *alt_labels;
    int32_t               strategy; /* for SVG */
    const pbl_graph          *graph;   /* for DOT */
    const pbl_stream_plan    *streams;
    const pbl_stream_storage *storage;
    char                  err[1024];
} viz_job;

typedef int (*write_fn)(FILE *f, viz_job *job);

static int write_html(FILE *f, viz_job *job)
{
    const char *mark = strstr(cli_viz_html, DATA_MARKER);
    const char *alt = mark ? strstr(mark, MIN_PEAK_MARKER) : NULL;
    if (!mark || !alt) { /* the build embeds tools/cli/viz.html, which has both, in order */
        snprintf(job->err, sizeof job->err, "the embedded page has no %s or %s", DATA_MARKER, MIN_PEAK_MARKER);
        return -1;
    }
    size_t head = (size_t)(mark - cli_viz_html), mid = head + strlen(DATA_MARKER);
    size_t alt_at = (size_t)(alt - cli_viz_html), tail = alt_at + strlen(MIN_PEAK_MARKER);
    fwrite(cli_viz_html, 1, head, f);
    if (pbl_viz_write_json(job->plan, job->labels, f, job->err, sizeof job->err) != PBL_OK)
        return -1;
    fwrite(cli_viz_html + mid, 1, alt_at - mid, f);
    if (job->alt_plan && pbl_viz_write_json(job->alt_plan, job->alt_labels, f, job->err, sizeof job->err) != PBL_OK)
        return -1;
    fwrite(cli_viz_html + tail, 1, cli_viz_html_len - tail, f);
    return 0;
}

static int write_svg(FILE *f, viz_job *job)
{
    cli_viz_svg(f, job->plan, job->strategy, job->labels);
    return 0;
}

static int write_file(const char *path, write_fn fn, viz_job *job);

static int write_dot(FILE *f, viz_job *job)
{
    return pbl_graph_write_dot(job->graph, job->streams, job->storage, f, job->err, sizeof job->err) == PBL_OK ? 0 : -1;
}

/* --dot: the graph coloured into o->streams streams, its memory planned over them with the
 * stream strategy (verified race-free), drawn as DOT. */
static int viz_dot(const viz_opts *o)
{
    int32_t k = 0;
    while (pbl_stream_strategy_name((pbl_stream_strategy)k) &&
           strcmp(pbl_stream_strategy_name((pbl_stream_strategy)k), o->stream_strategy) != 0)
        k++;
    if (!pbl_stream_strategy_name((pbl_stream_strategy)k)) {
        cli_error("--stream-strategy: unknown strategy '%s' (one of: colour, hb, hb_events)", o->stream_strategy);
        return CLI_USAGE;
    }
    int is_graph, rc = cli_source_is_graph(o->file, &is_graph);
    if (rc != CLI_OK)
        return rc;
    if (!is_graph) {
        cli_error("--dot: %s is not a graph (give zoo:NAME or a graph file: %s)", cli_display_name(o->file),
                  cli_model_extensions());
        return CLI_USAGE;
    }
    pbl_graph *g;
    rc = cli_model_load(o->file, o->batch, &g);
    if (rc != CLI_OK)
        return rc;
    char err[1024];
    pbl_stream_options so = pbl_stream_options_default();
    so.n_streams = (int32_t)o->streams;
    pbl_stream_plan sp = { 0 };
    pbl_stream_storage st = { 0 };
    pbl_schedule sc = { 0 };
    pbl_status s = PBL_OK;
    if (strcmp(o->schedule, "program") != 0) {
        pbl_schedule_options sco = pbl_schedule_options_default();
        sco.kind = PBL_SCHEDULE_MIN_PEAK;
        s = pbl_graph_schedule(g, &sco, &sc, err, sizeof err);
        so.order = sc.order;
        so.n_order = sc.n_steps;
    }
    if (s == PBL_OK)
        s = pbl_graph_streams(g, &so, &sp, err, sizeof err);
    if (s == PBL_OK) {
        pbl_stream_storage_options po = pbl_stream_storage_options_default();
        po.strategy = (pbl_stream_strategy)k;
        if (o->align)
            po.align = o->align;
        s = pbl_graph_stream_storage(g, &sp, &po, &st, err, sizeof err);
    }
    if (s != PBL_OK) {
        cli_error("%s: %s", cli_display_name(o->file), err);
        rc = CLI_FAIL;
    } else {
        viz_job job = { .graph = g, .streams = &sp, .storage = &st };
        rc = write_file(o->dot, write_dot, &job);
    }
    pbl_stream_storage_free(&st);
    pbl_stream_plan_free(&sp);
    pbl_schedule_free(&sc);
    pbl_graph_destroy(g);
    return rc;
}

/* Writes path whole or not at all through the library's one safe writer
 * (graph/base/file_out.h: an exclusive, unpredictable temporary beside the target, renamed
 * over it; a link followed; a FIFO or device written in place); "-" is standard output. */
static int write_file(const char *path, write_fn fn, viz_job *job)
{
    job->err[0] = '\0';
    if (cli_is_stdio(path)) { /* standard output: written as it comes, nothing to rename */
        int bad = fn(stdout, job);
        int e = cli_flush_stdout();
        if (bad || e) {
            cli_error("%s: %s", CLI_STDOUT_NAME, bad ? job->err : strerror(e));
            return CLI_FAIL;
        }
        return CLI_OK;
    }
    char err[1024];
    pbl__file_out o;
    if (pbl__file_out_open(&o, path, NULL, err, sizeof err) != PBL_OK) {
        cli_error("%s", err);
        return CLI_FAIL;
    }
    int bad = fn(o.f, job);
    if (bad) {
        pbl__file_out_close(&o, 0, err, sizeof err); /* discards the temporary */
        cli_error("%s: %s", path, job->err);
        return CLI_FAIL;
    }
    if (pbl__file_out_close(&o, 1, err, sizeof err) != PBL_OK) {
        cli_error("%s", err);
        return CLI_FAIL;
    }
    return CLI_OK;
}

/* What one page's data needs: the records in one order, every strategy's plan of them, and
 * (for --html) pbl_explain's per-step lists. */
typedef struct viz_data {
    cli_records    src;
    pbl_viz_plan   plan;
    pbl_explain    ex;
    pbl_viz_labels labels;
} viz_data;

static void viz_data_free(viz_data *d)
{
    pbl_explain_free(&d->ex);
    pbl_viz_plan_free(&d->plan);
    cli_records_free(&d->src);
}

static int viz_prepare(const viz_opts *op, const char *schedule, viz_data *d)
{
    const viz_opts o = *op;
    int rc = cli_records_load_scheduled(o.file, o.batch, o.align, schedule, &d->src);
    if (rc != CLI_OK)
        return rc;
    pbl_viz_options vo = pbl_viz_options_default();
    vo.align = o.align ? o.align : d->src.default_align;
    vo.time_limit = o.time_limit;
    char err[1024];
    pbl_status s = pbl_viz_plan_records(d->src.file.records, d->src.file.n, &vo, &d->plan, err, sizeof err);
    if (s != PBL_OK) {
        cli_error("%s: %s", cli_display_name(o.file), err);
        return s == PBL_ERR_INVALID_ARG ? CLI_USAGE : CLI_FAIL;
    }
    if (d->plan.best < 0) {
        cli_error("%s: no strategy gave a valid plan", cli_display_name(o.file));
        return CLI_FAIL;
    }
    d->labels = (pbl_viz_labels){ .title = cli_display_name(o.file), .ids = (const char *const *)d->src.file.ids };
    if (d->src.graph) {
        d->labels.graph = d->src.graph;
        d->labels.graph_records = &d->src.graph_records;
    }
    /* the page lists, per step, what `pebble explain` lists: the same call on the same
     * records, with the strategy the page shows first (planned once more: a fast one) */
    if (o.html) {
        pbl_explain_options eo = pbl_explain_options_default();
        eo.align = vo.align;
        eo.time_limit = o.time_limit;
        eo.strategy = d->plan.strategies[d->plan.best].name;
        s = pbl_explain_records(d->src.file.records, d->src.file.n, (const char *const *)d->src.file.ids,
                                d->labels.graph, d->labels.graph_records, &eo, &d->ex, err, sizeof err);
        if (s == PBL_OK) {
            d->labels.explain = &d->ex;
        } else if (s == PBL_ERR_INVALID_ARG) { /* too many steps to list: the page works without */
            cli_error("%s: the page marks no peak and lists steps itself: %s", cli_display_name(o.file), err);
        } else {
            cli_error("%s: %s", cli_display_name(o.file), err);
            return CLI_FAIL;
        }
    }
    return CLI_OK;
}

int cli_viz(int argc, char **argv)
{
    viz_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (cli_check_strategy(o.strategy, 0) != CLI_OK) /* before the planning, not after */
        return CLI_USAGE;
    if (o.dot) {
        rc = viz_dot(&o);
        if (rc != CLI_OK || (!o.html && !o.svg))
            return rc;
    }

    int both = strcmp(o.schedule, "both") == 0;
    viz_data d[2];
    memset(d, 0, sizeof d);
    rc = viz_prepare(&o, both ? "program" : o.schedule, &d[0]);
    if (rc == CLI_OK && both)
        rc = viz_prepare(&o, "min_peak", &d[1]);
    if (rc == CLI_OK) {
        viz_job job = { .plan = &d[0].plan, .labels = &d[0].labels };
        if (both) {
            job.alt_plan = &d[1].plan;
            job.alt_labels = &d[1].labels;
        }
        if (o.svg)
            rc = svg_strategy(&d[0].plan, o.strategy, &job.strategy);
        if (rc == CLI_OK && o.html)
            rc = write_file(o.html, write_html, &job);
        if (rc == CLI_OK && o.svg)
            rc = write_file(o.svg, write_svg, &job);
    }
    viz_data_free(&d[1]);
    viz_data_free(&d[0]);
    return rc;
}
