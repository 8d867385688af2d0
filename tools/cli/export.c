/* `pebble export`: write a graph (a zoo model, or a graph file in another format) as JSON. */

#include "cli.h"

static void print_usage(FILE *f)
{
    fprintf(f,
            "usage: pebble export SOURCE --json OUT [--batch N]\n"
            "\n"
            "Writes SOURCE's graph as a JSON graph file (format: include/pebble/json.h): every\n"
            "variable, node (forward, backward and optimizer updates, with their attributes) and\n"
            "output, so `pebble plan OUT` plans exactly what `pebble plan SOURCE` does.\n"
            "SOURCE is zoo:NAME (a model of tools/zoo, e.g. zoo:mlp_train), a graph file (%s)\n"
            "or - for standard input (a JSON graph or an ONNX model, told from its content).\n"
            "\n"
            "options:\n"
            "  --json OUT   the file to write ('-': standard output); replaced whole or not at all\n"
            "  --batch N    zoo graphs: the batch size (default: the model's)\n"
            "  -h, --help   this text\n"
            "\n"
            "Exit status: 0 written, 1 a failure (OUT cannot be written), 2 for a bad command line\n"
            "or a malformed SOURCE.\n",
            cli_model_extensions());
}

typedef struct export_opts {
    const char *source, *json;
    int64_t     batch;
} export_opts;

static const args_flag export_flags[] = { { "--json", 1 }, { "--batch", 1 } };
enum { F_JSON, F_BATCH };

static int take_arg(void *ctx, int which, const char *v)
{
    export_opts *o = ctx;
    if (which == ARGS_POSITIONAL)
        return cli_take_file("export", "SOURCE", &o->source, v) ? CLI_USAGE : 0;
    if (which == F_JSON) {
        if (!v[0]) {
            cli_error("--json: empty file name");
            return CLI_USAGE;
        }
        o->json = v;
        return 0;
    }
    return cli_parse_int("--batch", v, 1, INT64_C(1) << 20, &o->batch) ? CLI_USAGE : 0;
}

int cli_export(int argc, char **argv)
{
    export_opts o = { 0 };
    int rc = cli_parse("export", export_flags, (int)(sizeof export_flags / sizeof export_flags[0]), take_arg,
                       print_usage, argc, argv, &o);
    if (rc != ARGS_GO_ON)
        return rc;
    const char *source = o.source, *json = o.json;
    int64_t batch = o.batch;
    if (!source) {
        cli_error("export: no SOURCE given (see pebble export --help)");
        return CLI_USAGE;
    }
    if (!json) {
        cli_error("export: no output given: --json OUT (see pebble export --help)");
        return CLI_USAGE;
    }
    const char *const flag[] = { "--json" };
    const char *const out[] = { json };
    int checked = cli_check_outputs(source, flag, out, 1);
    if (checked != CLI_OK)
        return checked;
    pbl_graph *g;
    rc = cli_model_load(source, batch, &g);
    if (rc != CLI_OK)
        return rc;
    char err[2048];
    pbl_status s;
    if (cli_is_stdio(json)) {
        char *text;
        size_t len;
        s = pbl_graph_to_json(g, &text, &len, err, sizeof err);
        if (s == PBL_OK) {
            fwrite(text, 1, len, stdout);
            pbl_json_free(text);
        }
    } else {
        s = pbl_graph_save_json(g, json, err, sizeof err);
    }
    if (s != PBL_OK) {
        cli_error("%s", err);
        rc = CLI_FAIL;
    }
    pbl_graph_destroy(g);
    return rc;
}
