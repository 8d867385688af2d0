/* What the pebble command line's files share: exit statuses, one-line messages, option
 * scanning and number parsing. Each subcommand is `int cli_<name>(int argc, char **argv)`,
 * called with argv[0] being the subcommand's name, returning the process exit status. */
#ifndef PEBBLE_CLI_H
#define PEBBLE_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "args.h" /* tools/args: the command-line convention pebble and train_mlp share */
#include "pebble/pebble.h"
#include "pebble/plan_io.h"

/* Exit statuses: 0 success, 1 a failure (a plan that does not verify, a file that cannot be
 * written), 2 a bad command line or malformed input file. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = ARGS_USAGE };

/* Prints `pebble: <message>` as exactly one line on stderr (newlines in the message, which
 * may quote a library or file, are flattened). */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* An untrusted name (a value's, a file's) made safe for a terminal, into buf: control
 * characters and bytes that are not UTF-8 as \xHH (args_escape); for the human-readable
 * lines printed on stdout, as cli_error does for every message. Returns buf. */
const char *cli_shown(const char *name, char *buf, size_t n);
#define CLI_NAME_SHOWN 1024 /* bytes of a name a caller's buffer (4 x this: "\xHH") holds */

/* Flushes stdout; returns 0, or the errno of the first failure to write it (remembered, so
 * that a later call still reports it). */
int cli_flush_stdout(void);

/* Parses the arguments of subcommand `command` (argv[0] is its name) through the one loop
 * every pebble command and train_mlp share (tools/args/args.h): take gets each flag of flags
 * and each positional argument (which == ARGS_POSITIONAL); --help prints usage on stdout,
 * --version the version. Returns ARGS_GO_ON (-1) to go on, or the exit status to stop with. */
int cli_parse(const char *command, const args_flag *flags, int n_flags, int (*take)(void *ctx, int which, const char *v),
              void (*usage)(FILE *f), int argc, char **argv, void *ctx);

/* Parse a flag's value; on failure report `FLAG: 'S' is not ...` and return -1. */
int cli_parse_int(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out);
int cli_parse_double(const char *flag, const char *s, double lo, double hi, double *out);
/* --capacity's value: C >= 1 bytes, or "none" (PBL_PLAN_NO_CAPACITY, the default); 0 is
 * refused rather than silently meaning "no limit". */
int cli_parse_capacity(const char *s, int64_t *out);

/* Store positional argument v in *slot, the command's only WHAT (FILE, MODEL, ...); a second
 * one reports `COMMAND: unexpected argument 'V' (one WHAT only)` and returns -1. "-" claims
 * standard input for WHAT (cli_stdin_claim). */
int cli_take_file(const char *command, const char *what, const char **slot, const char *v);

/* ---- "-": standard input and output (tools/cli/stdin.c) ---------------------------------- */

/* What messages call standard input and output. */
#define CLI_STDIN_NAME  "<stdin>"
#define CLI_STDOUT_NAME "<stdout>"

/* Whether path is "-": standard input where a file is read, standard output where one is
 * written. */
int         cli_is_stdio(const char *path);
/* path for messages and reports: CLI_STDIN_NAME for "-", else path itself. */
const char *cli_display_name(const char *path);
/* Reserves standard input for the argument `what` ("FILE -", "--input x=-"), while parsing:
 * a second claim reports `WHAT: standard input is already read by FIRST; it can be read
 * once` and returns CLI_USAGE. Returns CLI_OK otherwise. */
int         cli_stdin_claim(const char *what);
/* Standard input's bytes, read whole on the first call (later calls return the same bytes):
 * CLI_OK, or CLI_USAGE beyond the limit (1 GiB, or PEBBLE_STDIN_MAX bytes), CLI_FAIL when it
 * cannot be read, after one message. The bytes live until cli_stdin_release. */
int         cli_stdin_read(const unsigned char **data, size_t *len);
void        cli_stdin_release(void);
/* What bytes hold, told from their content: a JSON graph (the first non-blank byte is '{'),
 * a records CSV (a first line of text) or else an ONNX model (binary protobuf). */
enum { CLI_CONTENT_RECORDS, CLI_CONTENT_JSON, CLI_CONTENT_ONNX };
int         cli_content_of(const unsigned char *data, size_t len);

/* Whether standard input is the regular file path names (same device and inode): `FILE -`
 * with `< path` reads that file, which an output must not replace. */
int cli_same_as_stdin(const char *path);

/* Whether path is the regular file standard output fills (`> path`), named other than through
 * a descriptor (/dev/stdout writes through it): replacing path would orphan what the command
 * prints there. */
int cli_is_stdout_file(const char *path);

/* Refuses outputs that would overwrite the input or each other: out[i] (given by option
 * flag[i]; NULL when not given) must name neither `input` (nor, when that is "-", the file
 * standard input reads) nor another out[j]; at most one may be "-" (standard output), which
 * is never the input, and then no other may be the file or pipe standard output writes
 * (`--svg - > F` beside `--html F`). Returns CLI_OK, or CLI_USAGE after
 * one message; CLI_FAIL after one when an output could not be written (a missing or read-only
 * folder, a directory). Checked before any work, so nothing is written. */
int cli_check_outputs(const char *input, const char *const *flag, const char *const *out, int n);
/* Whether an output the last cli_check_outputs passed is `file` (which this run reads:
 * `what`, e.g. "MODEL's external weights FILE"); 1 with "FLAG OUT: that is WHAT; ..." in err. */
int cli_output_named(const char *file, const char *what, char *err, size_t errlen);

/* CLI_OK when name is a planner strategy ("best" is one), or "all" when allow_all; else
 * CLI_USAGE after a message listing the names. */
int cli_check_strategy(const char *name, int allow_all);
/* CLI_OK when name is a schedule kind (pebble/schedule.h), or "both" when allowed; else
 * CLI_USAGE after a message listing the names. */
int cli_check_schedule(const char *name, int allow_both);

/* The subcommands. */
int cli_plan(int argc, char **argv);
int cli_check(int argc, char **argv);

int cli_export(int argc, char **argv);
int cli_run(int argc, char **argv);
int cli_explain(int argc, char **argv);

/* Tensor files (tools/cli/tensor_file.c): PATH ending .pb (ONNX TensorProto) or .npy (NumPy;
 * f4/f8 read as f32, i4/i8 as i32). Return CLI_OK or an exit status after one message. */
int cli_tensor_read(const char *path, pbl_onnx_tensor *t);
int cli_tensor_write(const char *path, const pbl_onnx_tensor *t); /* .pb, else .npy */

/* Model graphs (tools/cli/model.c): SOURCE is "zoo:NAME", "-" (standard input: a JSON graph
 * or an ONNX model, told from its content) or a file whose extension names its format (see
 * cli_model_extensions; a format is one row of model.c's table, whose loader writes messages
 * that start with the file's name; standard input's start with "<stdin>").
 *
 * cli_model_load builds the graph into *out (the caller destroys it with pbl_graph_destroy):
 * a zoo graph for `batch` samples (0: the model's default; a file takes no batch). Returns
 * CLI_OK, or an exit status after printing one line (`pebble: FILE: $.nodes[3]: ...`):
 * CLI_USAGE for an unknown model or extension or a malformed file, CLI_FAIL for a file that
 * cannot be read or out of memory; *out is then NULL. An ONNX model's initializers are
 * dropped (planning); cli_model_load_with passes onnx (may be NULL) to the ONNX loader, e.g.
 * to keep them (onnx->weights). */
int         cli_model_load(const char *source, int64_t batch, pbl_graph **out);
int         cli_model_load_with(const char *source, int64_t batch, const pbl_onnx_options *onnx, pbl_graph **out);
/* Whether SOURCE names a graph (zoo:, a known extension, or "-" holding one: standard input
 * is read to tell) rather than a records CSV, in *is_graph. CLI_OK, or an exit status after
 * a message (standard input could not be read). */
int         cli_source_is_graph(const char *source, int *is_graph);
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
    /* graphs: the order the records come from ("program" unless --schedule asked otherwise)
     * and, with min_peak or both, both orders' lower bounds */
    const char       *schedule;       /* "program", "min_peak" or "both" */
    int64_t           program_lower_bound, min_peak_lower_bound;
    const char       *schedule_method; /* the candidate min_peak kept */
    int               schedule_exact;  /* min_peak proved minimal */
    double            schedule_ms;     /* time pbl_graph_schedule took */
} cli_records;

/* Loads what `source` names ("-": standard input, a records CSV or a graph). For graphs, batch (0: the model's default) sizes a zoo model
 * and liveness rounds record sizes up to align (0: 64). Returns CLI_OK, or an exit status
 * after reporting the problem (CLI_USAGE for a malformed file or unknown model, CLI_FAIL
 * otherwise). */
int  cli_records_load(const char *source, int64_t batch, int64_t align, cli_records *out);
/* The same, the graph's nodes in the order `schedule` names ("program", "min_peak", or
 * "both": min_peak's records, both bounds kept); a records CSV with anything but "program"
 * is a usage error. */
int  cli_records_load_scheduled(const char *source, int64_t batch, int64_t align, const char *schedule,
                                cli_records *out);
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
/* Milliseconds of this thread's CPU time: the clock the planner's --time-limit counts. */
double cli_cpu_ms(void);

#endif
