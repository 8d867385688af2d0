/* The command line's plumbing: one-line messages, the option loop and numbers (both through
 * tools/args, which train_mlp shares), quoting for JSON and CSV output, the clock, outputs
 * that must not overwrite the input. */
#define _XOPEN_SOURCE 700 /* clock_gettime, realpath */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "graph/base/file_out.h" /* private to the library; the CLI links it statically */

/* The first error writing stdout (an errno value), for main to report once at the end. */
static int stdout_errno;

int cli_flush_stdout(void)
{
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        if (!stdout_errno)
            stdout_errno = errno ? errno : EIO;
        return stdout_errno;
    }
    return 0;
}

void cli_error(const char *fmt, ...)
{
    cli_flush_stdout(); /* what was printed so far comes first; a failure to write it is kept */
    va_list ap;
    va_start(ap, fmt);
    args_verror("pebble", fmt, ap);
    va_end(ap);
}

const char *cli_shown(const char *name, char *buf, size_t n)
{
    args_escape(buf, n, name);
    return buf;
}

int cli_parse(const char *command, const args_flag *flags, int n_flags, int (*take)(void *ctx, int which, const char *v),
              void (*usage)(FILE *f), int argc, char **argv, void *ctx)
{
    args_spec spec = { "pebble", command, pbl_version(), flags, n_flags, take, usage };
    return args_parse(&spec, argc, argv, ctx);
}

int cli_take_file(const char *command, const char *what, const char **slot, const char *v)
{
    if (*slot) {
        cli_error("%s: unexpected argument '%s' (one %s only)", command, v, what);
        return -1;
    }
    char claim[64];
    snprintf(claim, sizeof claim, "%s -", what);
    if (cli_is_stdio(v) && cli_stdin_claim(claim) != CLI_OK)
        return -1;
    *slot = v;
    return 0;
}

int cli_parse_int(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    return args_int("pebble", flag, s, lo, hi, out);
}

int cli_parse_double(const char *flag, const char *s, double lo, double hi, double *out)
{
    return args_double("pebble", flag, s, lo, hi, out);
}

int cli_parse_capacity(const char *s, int64_t *out)
{
    if (strcmp(s, "none") == 0) {
        *out = PBL_PLAN_NO_CAPACITY;
        return 0;
    }
    if (strcmp(s, "0") == 0) { /* the library's 0 means "no limit": never let a typed 0 mean that */
        cli_error("--capacity: 0 bytes holds nothing; give C >= 1, or none (the default) for no limit");
        return -1;
    }
    return cli_parse_int("--capacity", s, 1, PBL_RECORDS_CSV_VALUE_MAX, out);
}

/* The length of the valid UTF-8 sequence at c (1..4), or 0 if it is not one. */
static int utf8_len(const unsigned char *c)
{
    int n = c[0] < 0x80 ? 1 : (c[0] & 0xe0) == 0xc0 ? 2 : (c[0] & 0xf0) == 0xe0 ? 3 : (c[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (n == 2 && c[0] < 0xc2)
        return 0; /* overlong */
    for (int k = 1; k < n; k++)
        if ((c[k] & 0xc0) != 0x80)
            return 0;
    return n;
}

void cli_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c;) {
        int n = utf8_len(c);
        if (n == 0) {
            fputs("\\ufffd", f); /* a byte that is not UTF-8 (a path, say): JSON must be */
            c++;
            continue;
        }
        if (*c == '"' || *c == '\\')
            fprintf(f, "\\%c", *c);
        else if (*c == '\n')
            fputs("\\n", f);
        else if (*c < 0x20 || *c == 0x7f)
            fprintf(f, "\\u%04x", *c);
        else if (n == 2 && c[0] == 0xc2 && c[1] < 0xa0) /* U+0080..U+009F: C1 controls (CSI) */
            fprintf(f, "\\u%04x", c[1]);
        else
            fwrite(c, 1, (size_t)n, f);
        c += n;
    }
    fputc('"', f);
}

void cli_csv_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (const char *c = s; *c; c++) {
        if (*c == '"')
            fputc('"', f);
        fputc(*c, f);
    }
    fputc('"', f);
}

double cli_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

double cli_cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int cli_same_as_stdin(const char *path)
{
    struct stat si, sp;
    return fstat(0, &si) == 0 && S_ISREG(si.st_mode) && stat(path, &sp) == 0 && si.st_dev == sp.st_dev &&
           si.st_ino == sp.st_ino;
}

/* Whether path is the file or pipe standard output writes to (same device and inode): `--svg -`
 * with `> path` beside `--html path` would rename a new file over the one standard output
 * fills, losing one of them; /dev/stdout beside `-` mixes two outputs in one pipe. A device
 * (/dev/null, a terminal) loses nothing. */
static int same_as_stdout(const char *path)
{
    struct stat so, sp;
    return fstat(1, &so) == 0 && (S_ISREG(so.st_mode) || S_ISFIFO(so.st_mode)) && stat(path, &sp) == 0 &&
           so.st_dev == sp.st_dev && so.st_ino == sp.st_ino;
}

int cli_is_stdout_file(const char *path)
{
    struct stat so;
    return fstat(1, &so) == 0 && S_ISREG(so.st_mode) && same_as_stdout(path) && pbl__file_out_descriptor(path) < 0;
}

/* The outputs the last cli_check_outputs passed, for cli_output_named: the model's own
 * files (an ONNX model's external weights) are known only once it is loaded, after that check. */
#define MAX_OUTPUTS 8
static struct {
    const char *flag, *path;
} checked[MAX_OUTPUTS];
static int n_checked;

int cli_output_named(const char *file, const char *what, char *err, size_t errlen)
{
    for (int i = 0; i < n_checked; i++)
        if (!cli_is_stdio(checked[i].path) && args_same_file(checked[i].path, file)) {
            snprintf(err, errlen, "%s %s: that is %s; it would be overwritten", checked[i].flag, checked[i].path, what);
            return 1;
        }
    return 0;
}

int cli_check_outputs(const char *input, const char *const *flag, const char *const *out, int n)
{
    n_checked = 0;
    for (int i = 0; i < n && n_checked < MAX_OUTPUTS; i++)
        if (out[i]) {
            checked[n_checked].flag = flag[i];
            checked[n_checked++].path = out[i];
        }
    for (int i = 0; i < n; i++) {
        if (!out[i])
            continue;
        if (cli_is_stdio(out[i])) { /* standard output: never the input, even when that is "-" */
            for (int j = 0; j < i; j++)
                if (out[j] && (cli_is_stdio(out[j]) || same_as_stdout(out[j]))) {
                    cli_error("%s -: %s %s already writes to standard output; only one output can", flag[i], flag[j],
                              out[j]);
                    return CLI_USAGE;
                }
            continue;
        }
        for (int j = 0; j < i; j++)
            if (out[j] && cli_is_stdio(out[j]) && same_as_stdout(out[i])) {
                cli_error("%s %s: that is the file standard output writes (%s -); give each output its own file",
                          flag[i], out[i], flag[j]);
                return CLI_USAGE;
            }
        if (input && !cli_is_stdio(input) && args_same_file(input, out[i])) {
            cli_error("%s %s: that is the input FILE; it would be overwritten", flag[i], out[i]);
            return CLI_USAGE;
        }
        /* FILE - with `< out`: the file standard input reads is the input all the same */
        if (input && cli_is_stdio(input) && cli_same_as_stdin(out[i])) {
            cli_error("%s %s: that is the file standard input reads (FILE -); it would be overwritten", flag[i],
                      out[i]);
            return CLI_USAGE;
        }
        for (int j = 0; j < i; j++)
            if (out[j] && !cli_is_stdio(out[j]) && args_same_file(out[j], out[i])) {
                cli_error("%s %s: the same file as %s; give each output its own name", flag[i], out[i], flag[j]);
                return CLI_USAGE;
            }
    }
    /* an output that cannot be written (a missing or read-only folder, a directory) fails
     * now, not after minutes of planning: the same test the writer makes, leaving nothing */
    for (int i = 0; i < n; i++) {
        char err[1024];
        if (out[i] && !cli_is_stdio(out[i]) && pbl__file_out_check(out[i], NULL, err, sizeof err) != PBL_OK) {
            cli_error("%s", err);
            return CLI_FAIL;
        }
    }
    return CLI_OK;
}

int cli_check_schedule(const char *name, int allow_both)
{
    pbl_schedule_kind k;
    if (pbl_schedule_kind_parse(name, &k) == PBL_OK || (allow_both && strcmp(name, "both") == 0))
        return CLI_OK;
    char names[256] = "";
    for (int32_t i = 0; i < pbl_schedule_kind_count(); i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                 pbl_schedule_kind_name((pbl_schedule_kind)i));
    cli_error("--schedule: unknown schedule '%s' (one of: %s%s)", name, names, allow_both ? ", both" : "");
    return CLI_USAGE;
}

int cli_check_strategy(const char *name, int allow_all)
{
    char names[1024] = "";
    for (int32_t i = 0; i < pbl_plan_strategy_count(); i++) {
        if (strcmp(pbl_plan_strategy_name(i), name) == 0)
            return CLI_OK;
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", pbl_plan_strategy_name(i));
    }
    if (allow_all && strcmp(name, "all") == 0)
        return CLI_OK;
    cli_error("--strategy: unknown strategy '%s' (one of: %s%s)", name, names, allow_all ? ", all" : "");
    return CLI_USAGE;
}
