/* The command line's plumbing: one-line messages, option scanning, numbers, quoting for JSON
 * and CSV output, the clock. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

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
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (char *c = msg; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    cli_flush_stdout(); /* what was printed so far comes first when both go to one terminal */
    fprintf(stderr, "pebble: %s\n", msg);
}

int cli_next_arg(cli_args *a, const cli_flag *flags, int n_flags, int *which, const char **value)
{
    *which = -1;
    *value = NULL;
    if (a->i >= a->argc)
        return CLI_ARG_END;
    const char *arg = a->argv[a->i++];
    if (a->only_files || arg[0] != '-' || strcmp(arg, "-") == 0) {
        *value = arg;
        return CLI_ARG_FILE;
    }
    if (strcmp(arg, "--") == 0) {
        a->only_files = 1;
        return cli_next_arg(a, flags, n_flags, which, value);
    }
    const char *eq = strchr(arg, '=');
    size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
    for (int k = 0; k < n_flags; k++) {
        const char *name = flags[k].name;
        if (strlen(name) != name_len || strncmp(arg, name, name_len) != 0)
            continue;
        *which = k;
        if (!flags[k].has_value) {
            if (eq) {
                cli_error("%s takes no value", name);
                return CLI_ARG_BAD;
            }
            return CLI_ARG_FLAG;
        }
        if (eq) {
            *value = eq + 1;
        } else if (a->i < a->argc) {
            *value = a->argv[a->i++];
        } else {
            cli_error("%s needs a value", name);
            return CLI_ARG_BAD;
        }
        return CLI_ARG_FLAG;
    }
    cli_error("unknown option '%s' for 'pebble %s' (see pebble %s --help)", arg, a->command, a->command);
    return CLI_ARG_BAD;
}

int cli_parse_int(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0' || s[0] == ' ' || s[0] == '\t') {
        cli_error("%s: '%s' is not an integer", flag, s);
        return -1;
    }
    if (errno == ERANGE || v < lo || v > hi) {
        cli_error("%s: %s is out of range (%lld..%lld)", flag, s, (long long)lo, (long long)hi);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_double(const char *flag, const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || s[0] == ' ' || s[0] == '\t' || !isfinite(v)) {
        cli_error("%s: '%s' is not a number", flag, s);
        return -1;
    }
    if (errno == ERANGE || v < lo || v > hi) {
        cli_error("%s: %s is out of range (%g..%g)", flag, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
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
