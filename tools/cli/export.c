/* `pebble export`: write a graph (a zoo model, or a graph file in another format) as JSON. */
#include <string.h>

#include "cli.h"

static void print_usage(FILE *f)
{
    fprintf(f,
            "usage: pebble export SOURCE --json OUT [--batch N]\n"
            "\n"
            "Writes SOURCE's graph as a JSON graph file (format: include/pebble/json.h): every\n"
            "variable, node (forward, backward and optimizer updates, with their attributes) and\n"
            "output, so `pebble plan OUT` plans exactly what `pebble plan SOURCE` does.\n"
            "SOURCE is zoo:NAME (a model of tools/zoo, e.g. zoo:mlp_train) or a graph file (%s).\n"
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

int cli_export(int argc, char **argv)
{
    static const cli_flag flags[] = { { "--json", 1 }, { "--batch", 1 }, { "--help", 0 }, { "-h", 0 } };
    enum { F_JSON, F_BATCH };
    cli_args args = { .argc = argc, .argv = argv, .i = 1, .command = "export" };
    const char *source = NULL, *json = NULL;
    int64_t batch = 0;
    int which;
    const char *v;
    for (;;) {
        int k = cli_next_arg(&args, flags, (int)(sizeof flags / sizeof flags[0]), &which, &v);
        if (k == CLI_ARG_END)
            break;
        if (k == CLI_ARG_BAD)
            return CLI_USAGE;
        if (k == CLI_ARG_FILE) {
            if (cli_take_file("export", "SOURCE", &source, v))
                return CLI_USAGE;
        } else if (which == F_JSON) {
            if (!v[0]) {
                cli_error("--json: empty file name");
                return CLI_USAGE;
            }
            json = v;
        } else if (which == F_BATCH) {
            if (cli_parse_int("--batch", v, 1, INT64_C(1) << 20, &batch))
                return CLI_USAGE;
        } else {
            print_usage(stdout);
            return CLI_OK;
        }
    }
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
    if (strcmp(json, "-") != 0 && cli_check_outputs(source, flag, out, 1) != CLI_OK)
        return CLI_USAGE;
    pbl_graph *g;
    int rc = cli_model_load(source, batch, &g);
    if (rc != CLI_OK)
        return rc;
    char err[2048];
    pbl_status s;
    if (strcmp(json, "-") == 0) {
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
