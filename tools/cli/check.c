/* `pebble check`: read an assignment CSV (records plus offsets) and verify it, or load a graph
 * and validate it. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void print_usage(FILE *f)
{
    fprintf(f, "usage: pebble check FILE [options]\n"
               "\n"
               "Verifies the assignment in FILE (id,lower,upper,size,offset, as written by\n"
               "pebble plan --out): records live at the same step do not overlap in bytes, every\n"
               "offset is a multiple of the alignment, and the arena fits the capacity.\n"
               "Prints 'ok' with the arena bytes and the lower bound, or what is wrong.\n"
               "FILE may also be a graph (zoo:NAME or a graph file: %s): it is loaded and\n"
               "validated (ops, attributes, shapes, no cycle), and its counts are printed.\n"
               "FILE - reads standard input (an assignment CSV or a graph, told from its content).\n"
               "\n"
               "options:\n"
               "  --capacity C  the arena must fit in C bytes, C >= 1 (default, or none: no limit)\n"
               "  --align N     offsets must be multiples of N (default 1)\n"
               "  -h, --help    this text\n"
               "\n"
               "Exit status: 0 valid, 1 not valid or another failure, 2 for a bad command line or\n"
               "a malformed FILE.\n",
            cli_model_extensions());
}

/* A graph: loading validates it; say what it holds. */
static int check_graph(const char *file)
{
    pbl_graph *g;
    int rc = cli_model_load(file, 0, &g);
    if (rc != CLI_OK)
        return rc;
    int32_t vars = 0, backward = 0;
    for (pbl_value v = 0; v < pbl_graph_value_count(g); v++) {
        pbl_value_info vi;
        if (pbl_graph_value_info(g, v, &vi) == PBL_OK && vi.producer == PBL_NONE)
            vars++;
    }
    for (pbl_node n = 0; n < pbl_graph_node_count(g); n++) {
        pbl_node_info ni;
        if (pbl_graph_node_info(g, n, &ni) == PBL_OK && ni.is_backward)
            backward++;
    }
    char shown[4 * CLI_NAME_SHOWN];
    printf("%s: ok: a valid graph: %d variables, %d nodes (%d backward), %d values, %d outputs\n",
           cli_shown(cli_display_name(file), shown, sizeof shown), (int)vars,
           (int)pbl_graph_node_count(g), (int)backward, (int)pbl_graph_value_count(g), (int)pbl_graph_output_count(g));
    pbl_graph_destroy(g);
    return CLI_OK;
}

/* Copies the verifier's message into out, naming each record it mentions by index ("record 3",
 * "records 3 and 7") with its id and line as well. */
static void with_ids(const char *msg, const pbl_records_file *f, char *out, size_t cap)
{
    size_t k = 0;
    int naming = 0; /* just after "record " or "records " (or "and " in that phrase) */
    for (const char *c = msg; *c && k + 1 < cap;) {
        if (naming && isdigit((unsigned char)*c)) {
            char *end;
            long i = strtol(c, &end, 10);
            int n = i >= 0 && i < f->n
                  ? snprintf(out + k, cap - k, "%.*s (id '%s', line %d)", (int)(end - c), c, f->ids[i], (int)f->lines[i])
                  : snprintf(out + k, cap - k, "%.*s", (int)(end - c), c);
            k = n < 0 ? k : k + (size_t)n < cap ? k + (size_t)n : cap - 1;
            c = end;
            naming = strncmp(c, " and ", 5) == 0;
            if (naming) {
                int m = snprintf(out + k, cap - k, " and ");
                k = m < 0 ? k : k + (size_t)m < cap ? k + (size_t)m : cap - 1;
                c += 5;
            }
            continue;
        }
        naming = strncmp(c, "record ", 7) == 0 || strncmp(c, "records ", 8) == 0;
        if (naming) {
            size_t len = c[6] == 's' ? 8 : 7;
            for (size_t j = 0; j < len && k + 1 < cap; j++)
                out[k++] = *c++;
            continue;
        }
        out[k++] = *c++;
    }
    out[k] = '\0';
}

typedef struct check_opts {
    const char *file;
    int64_t     capacity, align;
    int         capacity_given, align_given;
} check_opts;

static const args_flag check_flags[] = { { "--capacity", 1 }, { "--align", 1 } };
enum { F_CAPACITY, F_ALIGN };

static int take_arg(void *ctx, int which, const char *v)
{
    check_opts *o = ctx;
    if (which == ARGS_POSITIONAL)
        return cli_take_file("check", "FILE", &o->file, v) ? CLI_USAGE : 0;
    if (which == F_CAPACITY) {
        o->capacity_given = 1;
        return cli_parse_capacity(v, &o->capacity) ? CLI_USAGE : 0;
    }
    o->align_given = 1;
    return cli_parse_int("--align", v, 1, INT64_C(1) << 30, &o->align) ? CLI_USAGE : 0;
}

int cli_check(int argc, char **argv)
{
    check_opts o = { .align = 1 };
    int rc = cli_parse("check", check_flags, (int)(sizeof check_flags / sizeof check_flags[0]), take_arg, print_usage,
                       argc, argv, &o);
    if (rc != ARGS_GO_ON)
        return rc;
    const char *file = o.file, *name = cli_display_name(o.file);
    int64_t capacity = o.capacity, align = o.align;
    if (!file) {
        cli_error("check: no FILE given (see pebble check --help)");
        return CLI_USAGE;
    }

    int is_graph;
    if ((rc = cli_source_is_graph(file, &is_graph)) != CLI_OK)
        return rc;
    if (is_graph) {
        if (o.capacity_given || o.align_given) {
            cli_error("%s: --capacity and --align check an assignment file; a graph has no offsets"
                      " (plan it: pebble plan %s --capacity C)", name, file);
            return CLI_USAGE;
        }
        return check_graph(file);
    }
    pbl_records_file f;
    char err[2048];
    pbl_status s;
    if (cli_is_stdio(file)) {
        const unsigned char *data;
        size_t len;
        if ((rc = cli_stdin_read(&data, &len)) != CLI_OK)
            return rc;
        s = pbl_records_parse_csv((const char *)data, len, CLI_STDIN_NAME, NULL, &f, err, sizeof err);
    } else {
        s = pbl_records_read_csv(file, NULL, &f, err, sizeof err);
    }
    if (s != PBL_OK) {
        cli_error("%s", err);
        return s == PBL_ERR_FORMAT ? CLI_USAGE : CLI_FAIL;
    }
    if (!f.offsets) {
        cli_error("%s:1: no offset column: check needs an assignment (id,lower,upper,size,offset),"
                  " as written by pebble plan --out", name);
        pbl_records_file_free(&f);
        return CLI_USAGE;
    }
    /* The reader bounds offsets and sizes by 2^62 - 1, so offset + size cannot overflow. */
    pbl_assignment a = { .offset = f.offsets, .n_records = f.n };
    for (int32_t i = 0; i < f.n; i++)
        if (f.offsets[i] + f.records[i].size > a.arena)
            a.arena = f.offsets[i] + f.records[i].size;
    int64_t lower_bound = pbl_records_lower_bound(f.records, f.n);
    rc = CLI_OK;
    if (lower_bound < 0) {
        cli_error("out of memory");
        rc = CLI_FAIL;
    } else if ((s = pbl_plan_verify(f.records, f.n, &a, align, capacity, err, sizeof err)) != PBL_OK) {
        char msg[4096];
        with_ids(err, &f, msg, sizeof msg);
        cli_error("%s: invalid: %s", name, msg);
        rc = CLI_FAIL;
    } else {
        char shown[4 * CLI_NAME_SHOWN];
        printf("%s: ok: %d records, arena %lld bytes, lower bound %lld bytes (ratio %.4f)\n",
               cli_shown(name, shown, sizeof shown), (int)f.n,
               (long long)a.arena, (long long)lower_bound,
               lower_bound > 0 ? (double)a.arena / (double)lower_bound : 1.0);
    }
    pbl_records_file_free(&f);
    return rc;
}
