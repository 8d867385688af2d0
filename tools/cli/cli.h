/* What the pebble command line's files share: exit statuses, one-line messages, option
 * scanning and number parsing. Each subcommand is `int cli_<name>(int argc, char **argv)`,
 * called with argv[0] being the subcommand's name, returning the process exit status. */
#ifndef PEBBLE_CLI_H
#define PEBBLE_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "pebble/pebble.h"
#include "pebble/plan_io.h"

/* Exit statuses: 0 success, 1 a failure (a plan that does not verify, a file that cannot be
 * written), 2 a bad command line or malformed input file. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

/* Prints `pebble: <message>` as exactly one line on stderr (newlines in the message, which
 * may quote a library or file, are flattened). */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Flushes stdout; returns 0, or the errno of the first failure to write it (remembered, so
 * that a later call still reports it). */
int cli_flush_stdout(void);

/* One option a subcommand takes: "--align" with a value, "--help" without. */
typedef struct cli_flag {
    const char *name;
    int         has_value;
} cli_flag;

typedef struct cli_args {
    int          argc;
    char       **argv;
    int          i;           /* next argument to look at */
    int          only_files;  /* after "--" */
    const char  *command;     /* "plan", for messages */
} cli_args;

enum { CLI_ARG_END, CLI_ARG_FLAG, CLI_ARG_FILE, CLI_ARG_BAD };

/* The next argument: CLI_ARG_FLAG (*which indexes flags, *value is its value or NULL; both
 * "--flag value" and "--flag=value" work), CLI_ARG_FILE (*value is a positional argument),
 * CLI_ARG_END, or CLI_ARG_BAD (an unknown flag or a missing value; already reported). */
int cli_next_arg(cli_args *a, const cli_flag *flags, int n_flags, int *which, const char **value);

/* Parse a flag's value; on failure report `FLAG: 'S' is not ...` and return -1. */
int cli_parse_int(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out);
int cli_parse_double(const char *flag, const char *s, double lo, double hi, double *out);

/* Store positional argument v in *slot, the command's only WHAT (FILE, MODEL, ...); a second
 * one reports `COMMAND: unexpected argument 'V' (one WHAT only)` and returns -1. */
int cli_take_file(const char *command, const char *what, const char **slot, const char *v);

/* Whether paths a and b name one file: the same string, or two names of one existing file
 * (same device and inode: a link, "./x" beside "x"). */
int cli_same_file(const char *a, const char *b);

/* Refuses outputs that would overwrite the input or each other: out[i] (given by option
 * flag[i]; NULL when not given) must name neither `input` nor another out[j]. Returns CLI_OK,
 * or CLI_USAGE after one message. Checked before any work, so nothing is written. */
int cli_check_outputs(const char *input, const char *const *flag, const char *const *out, int n);

/* CLI_OK when name is a planner strategy ("best" is one), or "all" when allow_all; else
 * CLI_USAGE after a message listing the names. */
int cli_check_strategy(const char *name, int allow_all);

/* The subcommands. */
int cli_plan(int argc, char **argv);
int cli_check(int argc, char **argv);

int cli_export(int argc, char **argv);
int cli_run(int argc, char **argv);

/* Tensor files (tools/cli/tensor_file.c): PATH ending .pb (ONNX TensorProto) or .npy (NumPy;
 * f4/f8 read as f32, i4/i8 as i32). Return CLI_OK or an exit status after one message. */
int cli_tensor_read(const char *path, pbl_onnx_tensor *t);
int cli_tensor_write(const char *path, const pbl_onnx_tensor *t); /* .pb, else .npy */

/* Model graphs (tools/cli/model.c): SOURCE is "zoo:NAME" or a file whose extension names its
 * format (see cli_model_extensions; a format is one row of model.c's table, whose loader
 * writes messages that start with the file's name).
 *
 * cli_model_load builds the graph into *out (the caller destroys it with pbl_graph_destroy):
 * a zoo graph for `batch` samples (0: the model's default; a file takes no batch). Returns
 * CLI_OK, or an exit status after printing one line (`pebble: FILE: $.nodes[3]: ...`):
 * CLI_USAGE for an unknown model or extension or a malformed file, CLI_FAIL for a file that
 * cannot be read or out of memory; *out is then NULL. */
int         cli_model_load(const char *source, int64_t batch, pbl_graph **out);
/* Whether SOURCE names a graph (zoo: or a known extension) rather than a records CSV. */
int         cli_model_is_graph(const char *source);
/* The known extensions, ".json" (", .onnx" ...), for messages and help. */
const char *cli_model_extensions(void);

/* Records from a CSV file or a graph (see cli_model_load). */
typedef struct cli_records {
    pbl_records_file file;          /* records, ids (CSV: as read; zoo: value names) */
    int64_t          default_align; /* 1 for CSV records, 64 for graphs (the executor's) */
    int              from_graph;
    /* graphs: the ids' storage, the graph and its liveness (records == graph_records.records),
     * kept for pebble viz's labels */
    char            **own_ids;
    char             *own_id_text;
    pbl_graph        *graph;
    pbl_graph_records graph_records;
} cli_records;

/* Loads what `source` names. For graphs, batch (0: the model's default) sizes a zoo model
 * and liveness rounds record sizes up to align (0: 64). Returns CLI_OK, or an exit status
 * after reporting the problem (CLI_USAGE for a malformed file or unknown model, CLI_FAIL
 * otherwise). */
int  cli_records_load(const char *source, int64_t batch, int64_t align, cli_records *out);
void cli_records_free(cli_records *r);

/* `pebble viz`, and the viewer page it fills (tools/cli/viz.html, made a C string at build
 * time by tools/embed.cmake). */
int cli_viz(int argc, char **argv);
extern const char   cli_viz_html[];
extern const size_t cli_viz_html_len;
/* Writes the static SVG picture of strategy k of p, named and coloured from l, to f. */
void cli_viz_svg(FILE *f, const pbl_viz_plan *p, int32_t k, const pbl_viz_labels *l);

/* Writes s as a JSON string (quotes included). */
void cli_json_string(FILE *f, const char *s);
/* Writes s as a CSV field, quoted (with doubled quotes) when it holds a comma, quote or
 * line end. */
void cli_csv_field(FILE *f, const char *s);

/* Milliseconds on CLOCK_MONOTONIC. */
double cli_now_ms(void);

#endif
