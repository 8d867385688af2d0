/*
 * One command-line convention for pebble's programs: the `pebble` tool (each subcommand) and
 * the examples (train_mlp) parse their arguments here, so they accept the same forms:
 *
 *     --flag value, --flag=value   a flag's value (either form; "--flag=" gives an empty one)
 *     -                            an argument like any other: by convention standard input
 *                                  or output where a file is named
 *     --                           every later argument is positional, even if it starts with '-'
 *     --help, -h                   the usage text on stdout; exit status 0
 *     --version                    "PROGRAM VERSION" on stdout; exit status 0
 *     anything else starting '-'   an unknown option: one line on stderr; exit status 2
 *
 * Messages are one line, `PROGRAM: message`, on stderr. The helper uses only the C library,
 * so an example that copies it needs nothing more.
 *
 *     static int take(void *ctx, int which, const char *value) { ... return 0; }
 *     static const args_flag flags[] = { { "--epochs", 1 }, { "--plan", 0 } };
 *     args_spec spec = { "train_mlp", NULL, pbl_version(), flags, 2, take, print_usage };
 *     int rc = args_parse(&spec, argc, argv, &options);
 *     if (rc != ARGS_GO_ON)
 *         return rc;   // 0 after --help or --version, 2 after a bad argument
 */
#ifndef PEBBLE_ARGS_H
#define PEBBLE_ARGS_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

/* The exit status of a bad command line (and of malformed input, for the pebble tool). */
#define ARGS_USAGE 2
/* args_parse's "all arguments taken, go on"; also take's `which` for a positional argument. */
#define ARGS_GO_ON      (-1)
#define ARGS_POSITIONAL (-1)

/* One option: "--epochs" with a value, "--plan" without. */
typedef struct args_flag {
    const char *name;
    int         has_value;
} args_flag;

typedef struct args_spec {
    const char      *program; /* "pebble", "train_mlp": starts every message */
    const char      *command; /* a subcommand ("plan") for messages, or NULL */
    const char      *version; /* what --version prints after the program's name */
    const args_flag *flags;
    int              n_flags;
    /* Called for each argument in order: a flag (which: its index in flags; value: its value,
     * or NULL for a flag without one) or a positional argument (which: ARGS_POSITIONAL).
     * Returns 0 to go on, or the exit status to stop with after printing one message. */
    int  (*take)(void *ctx, int which, const char *value);
    void (*usage)(FILE *f); /* the --help text */
} args_spec;

/* Walks argv[1..argc). Returns ARGS_GO_ON when every argument was taken; else the exit
 * status to stop with: 0 after --help or --version (printed on stdout), ARGS_USAGE after one
 * message (an unknown option, a flag without its value, a value given to a flag that takes
 * none), or what take returned. */
int args_parse(const args_spec *spec, int argc, char **argv, void *ctx);

/* Copies in to out (outlen bytes, always terminated, cut at a whole piece) with every control
 * character (C0, DEL, C1) and every byte that is not part of well-formed UTF-8 written as
 * "\xHH": text from untrusted names made safe for a terminal. Returns the length written.
 * args_verror passes every message through it. */
size_t args_escape(char *out, size_t outlen, const char *in);

/* Prints `PROGRAM: message` as exactly one line on stderr: newlines in the message (which may
 * quote a file or a library) are flattened. stdout is flushed first, so what was printed
 * before comes first when both go to one terminal. */
void args_error(const char *program, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void args_verror(const char *program, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* A flag's value as a number in [lo, hi]: 0, or -1 after `FLAG: 'S' is not an integer` (or
 * `... is not a number`, `FLAG: S is out of range (LO..HI)`). Leading blanks are refused. */
int args_int(const char *program, const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out);
int args_double(const char *program, const char *flag, const char *s, double lo, double hi, double *out);

/* Installs a handler for SIGINT, SIGTERM, SIGHUP and SIGPIPE (each not already ignored) that
 * calls cleanup, then dies of the signal as it would have (its default action). cleanup must
 * be async-signal-safe: the programs pass pbl_cleanup_temporaries (pebble/status.h), which
 * unlinks the temporary file of a write in progress; the library installs no handler itself. */
void args_on_signals(int (*cleanup)(void));

/* Whether writing a and b would touch one file: the same name, one existing file (a link,
 * "./x" beside "x"), or, where one does not exist yet, the same name once its folder is
 * resolved, a dangling link counting as the name it points to (the writer follows it). */
int args_same_file(const char *a, const char *b);

#endif
