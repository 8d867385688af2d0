/* `pebble plan`: plan records (a CSV file or a zoo graph) with one strategy or all of them,
 * verify each result, and print bytes, the lower bound, their ratio and the time taken. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

enum format { FORMAT_TABLE, FORMAT_CSV, FORMAT_JSON };

static void print_usage(FILE *f)
{
    fprintf(f,
            "usage: pebble plan FILE [options]\n"
            "\n"
            "Plans the memory of FILE's usage records and checks every result with the verifier.\n"
            "FILE is a records CSV (id,lower,upper,size; lifetimes [lower, upper)), a graph file\n"
            "(%s; see pebble export) or zoo:NAME, a model of tools/zoo"
#ifndef PEBBLE_HAVE_ZOO
            " (not in this build)"
#endif
            ";\na graph's records come from liveness, named after its values. FILE - reads standard\n"
            "input, whose format is told from its content.\n"
            "\n"
            "options:\n"
            "  --strategy NAME|all  a strategy, or all of them (default: best)\n"
            "  --align N            offsets are multiples of N (default 1 for CSV, 64 for graphs,\n"
            "                       whose record sizes are rounded up to it)\n"
            "  --capacity C         the arena must fit in C bytes, C >= 1 (default, or none: no\n"
            "                       limit)\n"
            "  --time-limit S       seconds of CPU time (the planning thread's, not wall-clock\n"
            "                       time, so a busy machine gives the same result, only later)\n"
            "                       each strategy may take: one still working then stops with\n"
            "                       what it verifiably has and is reported cut off; exact\n"
            "                       searches that long; best's whole budget (default 1 up to\n"
            "                       30,000 records, a second more per 20,000 beyond, at most 10);\n"
            "                       with all, the whole run's: each strategy gets what is left\n"
            "                       divided by the strategies still to run. A wall-clock cap of\n"
            "                       ten times the limit stops a starved run all the same (best's\n"
            "                       report then says so)\n"
            "  --batch N            zoo graphs: the batch size (default: the model's)\n"
            "  --schedule S         graphs: the node order the records come from: program (the\n"
            "                       default), min_peak (the order with the smallest lower bound\n"
            "                       pebble's scheduler finds), or both (min_peak's records, and\n"
            "                       both orders' lower bounds reported)\n"
            "  --out FILE           write the assignment (id,lower,upper,size,offset); with\n"
            "                       --strategy all, the smallest valid one; - for standard output\n"
            "                       (the report then goes to standard error)\n"
            "  --format F           table (default), csv or json\n"
            "  -h, --help           this text\n"
            "\n"
            "strategies:",
            cli_model_extensions());
    for (int32_t i = 0; i < pbl_plan_strategy_count(); i++)
        fprintf(f, " %s", pbl_plan_strategy_name(i));
    fprintf(f, "\n\nExit status: 0 when the plan (with all: at least one) verifies, 1 when not or on\n"
               "another failure, 2 for a bad command line or a malformed FILE.\n");
}

typedef struct plan_opts {
    const char *file, *strategy, *out, *schedule;
    int64_t     align;     /* 0: the source's default */
    int64_t     capacity;
    int64_t     batch;
    double      time_limit;
    int         format;
} plan_opts;

static const args_flag plan_flags[] = { { "--strategy", 1 }, { "--align", 1 },  { "--capacity", 1 },
                                        { "--time-limit", 1 }, { "--out", 1 }, { "--format", 1 },
                                        { "--batch", 1 }, { "--schedule", 1 } };
enum { F_STRATEGY, F_ALIGN, F_CAPACITY, F_TIME, F_OUT, F_FORMAT, F_BATCH, F_SCHEDULE };

static int take_arg(void *ctx, int which, const char *v)
{
    plan_opts *o = ctx;
    switch (which) {
    case ARGS_POSITIONAL:
        return cli_take_file("plan", "FILE", &o->file, v) ? CLI_USAGE : 0;
    case F_STRATEGY:
        o->strategy = v;
        return 0;
    case F_ALIGN:
        return cli_parse_int("--align", v, 1, INT64_C(1) << 30, &o->align) ? CLI_USAGE : 0;
    case F_CAPACITY:
        return cli_parse_capacity(v, &o->capacity) ? CLI_USAGE : 0;
    case F_TIME:
        return cli_parse_double("--time-limit", v, 1e-6, 1e6, &o->time_limit) ? CLI_USAGE : 0;
    case F_OUT:
        if (!v[0]) {
            cli_error("--out: empty file name");
            return CLI_USAGE;
        }
        o->out = v;
        return 0;
    case F_FORMAT:
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
    case F_SCHEDULE:
        o->schedule = v;
        return cli_check_schedule(v, 1) != CLI_OK ? CLI_USAGE : 0;
    default: /* F_BATCH */
        return cli_parse_int("--batch", v, 1, INT64_C(1) << 20, &o->batch) ? CLI_USAGE : 0;
    }
}

/* Returns -1 to go on, or the exit status to stop with. */
static int parse_args(int argc, char **argv, plan_opts *o)
{
    *o = (plan_opts){ .strategy = "best", .format = FORMAT_TABLE, .schedule = "program" };
    int rc = cli_parse("plan", plan_flags, (int)(sizeof plan_flags / sizeof plan_flags[0]), take_arg, print_usage,
                       argc, argv, o);
    if (rc != ARGS_GO_ON)
        return rc;
    if (!o->file) {
        cli_error("plan: no FILE given (see pebble plan --help)");
        return CLI_USAGE;
    }
    if (cli_check_strategy(o->strategy, 1) != CLI_OK)
        return CLI_USAGE;
    const char *const flag[] = { "--out" };
    const char *const out[] = { o->out };
    /* --out F > F: the report goes to F's old inode, which the rename then orphans */
    if (o->out && !cli_is_stdio(o->out) && cli_is_stdout_file(o->out)) {
        cli_error("--out %s: that is the file standard output (the report) writes; it would replace the report"
                  " (give another file, or --out - for the assignment on standard output)", o->out);
        return CLI_USAGE;
    }
    int checked = cli_check_outputs(o->file, flag, out, 1);
    if (checked != CLI_OK)
        return checked;
    return -1;
}

/* One strategy's outcome. */
typedef struct plan_row {
    const char *name;
    int         planned;  /* pbl_plan_records returned PBL_OK */
    int         valid;    /* and pbl_plan_verify accepted the result */
    int         optimal;  /* valid, and proven optimal */
    int         cut_off;  /* planned, but the time limit stopped it early */
    int64_t     bytes;
    int64_t     bound;    /* valid: the lower bound the strategy proved (exact), 0: none */
    double      ms;
    char        error[1024]; /* why not planned or not valid; "" when valid */
    pbl_plan_report best;    /* `best` only: what each strategy did */
    int         has_report;
    char        note[1024];  /* `best` only: who won, why the others stopped */
} plan_row;

/* "won by X (reached the lower bound); cut off: ...; skipped (budget spent): ...; ..." */
static void describe_best(plan_row *p)
{
    const pbl_plan_report *rep = &p->best;
    size_t at = 0, cap = sizeof p->note;
    at += (size_t)snprintf(p->note, cap, "won by %s%s in %.3f of %.3f s of CPU (%.3f s wall)%s",
                           rep->winner ? rep->winner : "none", rep->reached_lower_bound ? " (reached the lower bound)" : "",
                           rep->cpu_seconds, rep->budget, rep->seconds,
                           rep->wall_capped ? "; stopped by the wall-clock cap (ten times the budget): the result "
                                              "depends on the machine's load"
                                            : "");
    for (int32_t o = PBL_PLAN_NOT_RUN; o <= PBL_PLAN_REJECTED && at < cap; o++) {
        if (o == PBL_PLAN_FINISHED)
            continue;
        int n = 0;
        for (int32_t k = 0; k < rep->n_steps && at < cap; k++) {
            if (rep->step[k].outcome != o)
                continue;
            if (n++ == 0)
                at += (size_t)snprintf(p->note + at, cap - at, "; %s: %s", pbl_plan_outcome_str(o), rep->step[k].strategy);
            else
                at += (size_t)snprintf(p->note + at, cap - at, ", %s", rep->step[k].strategy);
        }
    }
}

typedef struct plan_report {
    const char     *source;
    int32_t         n_records;
    int64_t         lower_bound, align, capacity;
    const plan_row *rows;
    int             n_rows;
    const cli_records *src; /* the schedule's figures, for graphs */
} plan_report;

static double ratio(int64_t bytes, int64_t lower_bound)
{
    return lower_bound > 0 ? (double)bytes / (double)lower_bound : 1.0;
}

/* With several strategies, one line naming those the time limit stopped (with or without a
 * result), so that a bounded `all` says what it did not finish. */
static void print_cut_off(FILE *f, const plan_report *r)
{
    int n = 0;
    for (int i = 0; i < r->n_rows; i++)
        if (r->n_rows > 1 && r->rows[i].cut_off)
            fprintf(f, "%s%s", n++ ? ", " : "\ncut off at the time limit: ", r->rows[i].name);
    if (n)
        fprintf(f, "\n");
}

static void print_table(FILE *f, const plan_report *r)
{
    fprintf(f, "records: %s (%d records, align %lld, capacity ", r->source, (int)r->n_records, (long long)r->align);
    if (r->capacity)
        fprintf(f, "%lld)\n", (long long)r->capacity);
    else
        fprintf(f, "none)\n");
    fprintf(f, "lower bound: %lld bytes\n", (long long)r->lower_bound);
    const cli_records *s = r->src;
    if (s->from_graph && strcmp(s->schedule, "program") != 0)
        fprintf(f, "schedule: %s (records in min_peak order): lower bound %lld bytes in program order, %lld in "
                   "min_peak order (%.4f; %s%s, %.1f ms)\n",
                s->schedule, (long long)s->program_lower_bound, (long long)s->min_peak_lower_bound,
                ratio(s->min_peak_lower_bound, s->program_lower_bound), s->schedule_method,
                s->schedule_exact ? ", proven minimal" : "", s->schedule_ms);
    fprintf(f, "\n");
    int w = 8;
    for (int i = 0; i < r->n_rows; i++)
    {
        if ((int)strlen(r->rows[i].name) > w)
            w = (int)strlen(r->rows[i].name);
        for (int32_t k = 0; r->rows[i].has_report && k < r->rows[i].best.n_steps; k++)
            if ((int)strlen(r->rows[i].best.step[k].strategy) > w)
                w = (int)strlen(r->rows[i].best.step[k].strategy);
    }
    fprintf(f, "%-*s  %15s  %7s  %5s  %10s\n", w, "strategy", "bytes", "ratio", "valid", "ms");
    for (int i = 0; i < r->n_rows; i++) {
        const plan_row *p = &r->rows[i];
        fprintf(f, "%-*s  ", w, p->name);
        if (p->planned)
            fprintf(f, "%15lld  %7.4f", (long long)p->bytes, ratio(p->bytes, r->lower_bound));
        else
            fprintf(f, "%15s  %7s", "-", "-");
        fprintf(f, "  %5s  %10.3f", p->valid ? "yes" : "no", p->ms);
        if (p->error[0])
            fprintf(f, "  %s", p->error);
        else if (p->optimal)
            fprintf(f, "  optimal");
        else if (p->bound > 0) /* exact: the gap it proved */
            fprintf(f, "  proven within %.4fx (no packing below %lld)", ratio(p->bytes, p->bound), (long long)p->bound);
        if (p->cut_off && p->planned) /* without a result, the error says so */
            fprintf(f, "%scut off at the time limit", p->error[0] || p->optimal ? "; " : "  ");
        fprintf(f, "\n");
    }
    print_cut_off(f, r);
    for (int i = 0; i < r->n_rows; i++) {
        const plan_row *p = &r->rows[i];
        if (!p->has_report)
            continue;
        fprintf(f, "\n%s: %s\n", p->name, p->note);
        fprintf(f, "  %-*s  %15s  %10s  %s\n", w, "strategy", "bytes", "ms", "outcome");
        for (int32_t k = 0; k < p->best.n_steps; k++) {
            const pbl_plan_step *st = &p->best.step[k];
            fprintf(f, "  %-*s  ", w, st->strategy);
            if (st->arena >= 0)
                fprintf(f, "%15lld", (long long)st->arena);
            else
                fprintf(f, "%15s", "-");
            fprintf(f, "  %10.3f  %s", st->seconds * 1e3, pbl_plan_outcome_str(st->outcome));
            if (st->outcome == PBL_PLAN_FAILED || st->outcome == PBL_PLAN_REJECTED)
                fprintf(f, " (%s)", pbl_status_name((pbl_status)st->status));
            fprintf(f, "\n");
        }
    }
}

static void print_csv(FILE *f, const plan_report *r)
{
    fprintf(f, "strategy,bytes,lower_bound,ratio,valid,optimal,cut_off,ms,error,note\n");
    for (int i = 0; i < r->n_rows; i++) {
        const plan_row *p = &r->rows[i];
        cli_csv_field(f, p->name);
        if (p->planned)
            fprintf(f, ",%lld,%lld,%.6f", (long long)p->bytes, (long long)r->lower_bound, ratio(p->bytes, r->lower_bound));
        else
            fprintf(f, ",,%lld,", (long long)r->lower_bound);
        fprintf(f, ",%s,%s,%s,%.3f,", p->valid ? "true" : "false", p->optimal ? "true" : "false",
                p->cut_off ? "true" : "false", p->ms);
        cli_csv_field(f, p->error);
        fprintf(f, ",");
        cli_csv_field(f, p->note);
        fprintf(f, "\n");
    }
}

static void print_json(FILE *f, const plan_report *r)
{
    fprintf(f, "{\"lower_bound\": %lld, ", (long long)r->lower_bound);
    const cli_records *s = r->src;
    if (s->from_graph && strcmp(s->schedule, "program") != 0) {
        fprintf(f, "\"schedule\": {\"name\": \"%s\", \"program_lower_bound\": %lld, \"min_peak_lower_bound\": %lld, "
                   "\"ratio\": %.6f, \"method\": \"%s\", \"exact\": %s, \"ms\": %.3f}, ",
                s->schedule, (long long)s->program_lower_bound, (long long)s->min_peak_lower_bound,
                ratio(s->min_peak_lower_bound, s->program_lower_bound), s->schedule_method,
                s->schedule_exact ? "true" : "false", s->schedule_ms);
    }
    fprintf(f, "\"strategies\": [");
    for (int i = 0; i < r->n_rows; i++) {
        const plan_row *p = &r->rows[i];
        fprintf(f, "%s\n  {\"name\": ", i ? "," : "");
        cli_json_string(f, p->name);
        if (p->planned)
            fprintf(f, ", \"bytes\": %lld, \"ratio\": %.6f", (long long)p->bytes, ratio(p->bytes, r->lower_bound));
        else
            fprintf(f, ", \"bytes\": null, \"ratio\": null");
        fprintf(f, ", \"valid\": %s, \"ms\": %.3f, \"optimal\": %s, \"cut_off\": %s", p->valid ? "true" : "false",
                p->ms, p->optimal ? "true" : "false", p->cut_off ? "true" : "false");
        if (p->bound > 0)
            fprintf(f, ", \"proven_bound\": %lld", (long long)p->bound);
        if (p->error[0]) {
            fprintf(f, ", \"error\": ");
            cli_json_string(f, p->error);
        }
        if (p->has_report) {
            fprintf(f, ", \"winner\": ");
            if (p->best.winner)
                cli_json_string(f, p->best.winner);
            else
                fprintf(f, "null");
            fprintf(f,
                    ", \"reached_lower_bound\": %s, \"budget_s\": %.3f, \"cpu_s\": %.3f, \"wall_s\": %.3f, "
                    "\"wall_capped\": %s, \"steps\": [",
                    p->best.reached_lower_bound ? "true" : "false", p->best.budget, p->best.cpu_seconds,
                    p->best.seconds, p->best.wall_capped ? "true" : "false");
            for (int32_t k = 0; k < p->best.n_steps; k++) {
                const pbl_plan_step *st = &p->best.step[k];
                fprintf(f, "%s{\"name\": ", k ? ", " : "");
                cli_json_string(f, st->strategy);
                fprintf(f, ", \"outcome\": ");
                cli_json_string(f, pbl_plan_outcome_str(st->outcome));
                if (st->arena >= 0)
                    fprintf(f, ", \"bytes\": %lld", (long long)st->arena);
                else
                    fprintf(f, ", \"bytes\": null");
                fprintf(f, ", \"ms\": %.3f}", st->seconds * 1e3);
            }
            fprintf(f, "]");
        }
        fprintf(f, "}");
    }
    fprintf(f, "\n]}\n");
}

int cli_plan(int argc, char **argv)
{
    plan_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;

    cli_records src;
    rc = cli_records_load_scheduled(o.file, o.batch, o.align, o.schedule, &src);
    if (rc != CLI_OK)
        return rc;
    const pbl_records_file *f = &src.file;
    int64_t align = o.align ? o.align : src.default_align;
    int64_t lower_bound = pbl_records_lower_bound(f->records, f->n);
    int all = strcmp(o.strategy, "all") == 0;
    int n_rows = all ? pbl_plan_strategy_count() : 1;
    plan_row *rows = calloc((size_t)n_rows, sizeof *rows);
    if (lower_bound < 0 || !rows) {
        cli_error("out of memory");
        free(rows);
        cli_records_free(&src);
        return CLI_FAIL;
    }

    pbl_plan_options opt = pbl_plan_options_default();
    opt.align = align;
    opt.capacity = o.capacity;
    opt.time_limit = o.time_limit;
    pbl_assignment kept = { 0 }; /* the smallest valid assignment, for --out */
    int have_kept = 0, n_valid = 0;
    double start = cli_cpu_ms(); /* the time limit counts CPU time, as the planner does */
    for (int i = 0; i < n_rows; i++) {
        plan_row *p = &rows[i];
        p->name = all ? pbl_plan_strategy_name(i) : o.strategy;
        pbl_assignment a;
        char err[sizeof p->error / 2];
        int is_best = strcmp(p->name, "best") == 0;
        opt.report = is_best ? &p->best : NULL;
        if (all && o.time_limit > 0) {
            /* one budget for the whole run: what is left, shared by the strategies still to
             * run, so time a quick one leaves goes to those after it */
            double left = o.time_limit - (cli_cpu_ms() - start) / 1e3;
            opt.time_limit = left / (double)(n_rows - i);
            if (opt.time_limit < 1e-6) /* spent: each still runs until its first clock check */
                opt.time_limit = 1e-6;
        }
        double t0 = cli_now_ms();
        pbl_status s = pbl_plan_records(f->records, f->n, p->name, &opt, &a, err, sizeof err);
        p->ms = cli_now_ms() - t0;
        if (is_best && p->best.n_steps > 0) {
            p->has_report = 1;
            describe_best(p);
            for (int32_t k = 0; k < p->best.n_steps; k++)
                if (p->best.step[k].outcome == PBL_PLAN_CUT_OFF || p->best.step[k].outcome == PBL_PLAN_SKIPPED_BUDGET)
                    p->cut_off = 1;
        }
        if (s != PBL_OK) {
            snprintf(p->error, sizeof p->error, "%s (%s)", err[0] ? err : pbl_status_str(s), pbl_status_name(s));
            p->cut_off = p->cut_off || s == PBL_ERR_TIMEOUT;
            continue;
        }
        p->planned = 1;
        p->bytes = a.arena;
        p->cut_off = p->cut_off || a.cut_off;
        s = pbl_plan_verify(f->records, f->n, &a, align, o.capacity, err, sizeof err);
        if (s != PBL_OK) {
            snprintf(p->error, sizeof p->error, "rejected by the verifier: %s", err);
            pbl_assignment_free(&a);
            continue;
        }
        p->valid = 1;
        p->optimal = a.optimal != 0; /* only a verified plan is called optimal */
        p->bound = a.bound;
        n_valid++;
        if (!have_kept || a.arena < kept.arena) {
            pbl_assignment_free(&kept);
            kept = a;
            have_kept = 1;
        } else {
            pbl_assignment_free(&a);
        }
    }

    /* with --out -, the assignment is standard output, so the report goes to stderr */
    FILE *rf = o.out && cli_is_stdio(o.out) ? stderr : stdout;
    plan_report report = { cli_display_name(o.file), f->n, lower_bound, align, o.capacity, rows, n_rows, &src };
    if (o.format == FORMAT_JSON)
        print_json(rf, &report);
    else if (o.format == FORMAT_CSV)
        print_csv(rf, &report);
    else
        print_table(rf, &report);
    cli_flush_stdout();

    rc = CLI_OK;
    if (!all && !rows[0].valid) {
        if (rows[0].planned || rows[0].has_report) /* the strategies' messages name themselves */
            cli_error("strategy '%s': %s", rows[0].name, rows[0].error);
        else
            cli_error("%s", rows[0].error);
        rc = CLI_FAIL;
    } else if (n_valid == 0) {
        cli_error("no strategy gave a valid plan");
        rc = CLI_FAIL;
    }
    if (o.out && rc == CLI_OK) {
        char err[2048];
        pbl_status s = cli_is_stdio(o.out) ? pbl_assignment_print_csv(f, &kept, stdout, err, sizeof err)
                                           : pbl_assignment_write_csv(o.out, f, &kept, err, sizeof err);
        if (s != PBL_OK && cli_is_stdio(o.out)) {
            cli_error("%s: %s", CLI_STDOUT_NAME, err);
            rc = CLI_FAIL;
        } else if (s != PBL_OK) {
            cli_error("%s", err);
            rc = CLI_FAIL;
        }
    }
    pbl_assignment_free(&kept);
    free(rows);
    cli_records_free(&src);
    return rc;
}
