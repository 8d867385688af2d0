/*
 * pebble — the command-line program: plan memory for usage records or model graphs, and
 * check assignments.
 *
 *     pebble plan FILE [--strategy NAME|all] [--align N] [--capacity C] [--time-limit S]
 *                      [--out FILE] [--format table|csv|json]
 *     pebble check FILE [--capacity C] [--align N]
 *     pebble export SOURCE --json OUT [--batch N]
 *     pebble viz FILE [--html OUT] [--svg OUT] [--dot OUT] [--strategy NAME] [--align N]
 *     pebble explain FILE [--strategy NAME] [--align N] [--format table|csv|json]
 *     pebble run MODEL [--input NAME=FILE ...] [--repeat N] [--output-dir D] [--expect NAME=FILE]
 *
 * Every command takes --flag VALUE or --flag=VALUE, --help (usage on stdout, exit 0) and
 * --version (tools/args/args.h: the convention train_mlp shares). A FILE, MODEL or SOURCE of
 * "-" is standard input (its format told from its content: a JSON graph starts with '{', a
 * records CSV with its header line, else an ONNX model); an output of "-" (plan --out,
 * export --json, viz --html/--svg/--dot) is standard output, written as it comes.
 *
 * Errors are one line, `pebble: <message>` (`pebble: FILE:LINE: <message>` for a malformed
 * file; standard input is named <stdin>), on stderr. Exit status: 0 success, 1 a failure (a
 * plan that does not verify, a file that cannot be read or written), 2 a bad command line or
 * a malformed input file.
 */
#include <string.h>

#include "cli.h"

typedef struct subcommand {
    const char *name;
    int       (*run)(int argc, char **argv);
    const char *summary;
} subcommand;

static const subcommand subcommands[] = {
    { "plan", cli_plan, "plan FILE's records with one strategy or all; print bytes, bound, time" },
    { "check", cli_check, "verify an assignment CSV (records with offsets), or validate a graph" },
    { "run", cli_run, "run a model (ONNX, JSON graph, zoo:NAME) on input tensors; print or save outputs" },
    { "export", cli_export, "write a graph (zoo:NAME or a graph file) as a JSON graph file" },
    { "explain", cli_explain, "the peak step: every value live there, the arena's waste, what would lower it" },
    { "viz", cli_viz, "draw FILE's plans (an HTML page comparing strategies, an SVG) or its graph (DOT)" },
};
#define N_SUBCOMMANDS ((int)(sizeof subcommands / sizeof subcommands[0]))

static void print_usage(FILE *f)
{
    fprintf(f, "usage: pebble COMMAND [options]\n"
               "       pebble COMMAND --help\n"
               "\n"
               "commands:\n");
    for (int i = 0; i < N_SUBCOMMANDS; i++)
        fprintf(f, "  %-8s %s\n", subcommands[i].name, subcommands[i].summary);
    fprintf(f, "\n"
               "options:\n"
               "  -h, --help  this text\n"
               "  --version   the program's version and commit\n"
               "\n"
               "Options take --flag VALUE or --flag=VALUE. A file named - is standard input (its\n"
               "format told from its content) or, for an output, standard output.\n"
               "\n"
               "Records files are CSV with the header id,lower,upper,size (MiniMalloc's format):\n"
               "each record needs size bytes during the steps [lower, upper).\n"
               "Graphs are zoo:NAME (a model of tools/zoo, e.g. zoo:mlp_train) or graph files (%s);\n"
               "`pebble export zoo:NAME --json OUT` writes a zoo model as a JSON graph file.\n",
            cli_model_extensions());
}

static int dispatch(int argc, char **argv)
{
    if (argc < 2) {
        print_usage(stderr);
        return CLI_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "help") == 0 && argc > 2) {
        for (int i = 0; i < N_SUBCOMMANDS; i++)
            if (strcmp(argv[2], subcommands[i].name) == 0) {
                char *sub[] = { argv[2], (char *)"--help", NULL };
                return subcommands[i].run(2, sub);
            }
        cli_error("unknown command '%s' (see pebble --help)", argv[2]);
        return CLI_USAGE;
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        print_usage(stdout);
        return CLI_OK;
    }
    if (strcmp(cmd, "--version") == 0) { /* as tools/args prints it for a subcommand */
        printf("pebble %s\n", pbl_version());
        return CLI_OK;
    }
    for (int i = 0; i < N_SUBCOMMANDS; i++)
        if (strcmp(cmd, subcommands[i].name) == 0)
            return subcommands[i].run(argc - 1, argv + 1);
    if (cmd[0] == '-')
        cli_error("unknown option '%s' (see pebble --help)", cmd);
    else
        cli_error("unknown command '%s' (see pebble --help)", cmd);
    return CLI_USAGE;
}

int main(int argc, char **argv)
{
    /* an interrupted write (--out, --json, --html, --output-dir) leaves no temporary file:
     * the library lists them, and this program's handler removes them (pebble/status.h) */
    args_on_signals(pbl_cleanup_temporaries);
    int rc = dispatch(argc, argv);
    cli_stdin_release();
    /* a full disk or a closed pipe: the output did not arrive, so the run did not succeed
     * (said once: a command that failed has said why already, perhaps this very write) */
    int e = cli_flush_stdout();
    if (e && rc == CLI_OK) {
        cli_error("writing the output: %s", strerror(e));
        return CLI_FAIL;
    }
    return rc;
}
