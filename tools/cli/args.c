/* The command line's plumbing: one-line messages, option scanning, numbers, quoting for JSON
 * and CSV output, the clock. */
#define _XOPEN_SOURCE 700 /* clock_gettime, realpath */

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

int cli_take_file(const char *command, const char *what, const char **slot, const char *v)
{
    if (*slot) {
        cli_error("%s: unexpected argument '%s' (one %s only)", command, v, what);
        return -1;
    }
    *slot = v;
    return 0;
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

/* path with its directory resolved (links, "." and ".."), so that names of a file that does
 * not exist yet compare too; NULL when the directory cannot be resolved. Caller frees. */
static char *resolved_path(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t dir_len = slash ? (size_t)(slash - path) : 0;
    char *dir = malloc(dir_len + 2);
    if (!dir)
        return NULL;
    if (!slash)
        strcpy(dir, ".");
    else if (dir_len == 0)
        strcpy(dir, "/");
    else {
        memcpy(dir, path, dir_len);
        dir[dir_len] = '\0';
    }
    char *real = realpath(dir, NULL);
    free(dir);
    if (!real)
        return NULL;
    size_t n = strlen(real) + strlen(base) + 2;
    char *full = malloc(n);
    if (full)
        snprintf(full, n, "%s/%s", real, base);
    free(real);
    return full;
}

int cli_same_file(const char *a, const char *b)
{
    if (strcmp(a, b) == 0)
        return 1;
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    char *ra = resolved_path(a), *rb = resolved_path(b);
    int same = ra && rb && strcmp(ra, rb) == 0;
    free(ra);
    free(rb);
    return same;
}

int cli_check_outputs(const char *input, const char *const *flag, const char *const *out, int n)
{
    for (int i = 0; i < n; i++) {
        if (!out[i])
            continue;
        if (input && cli_same_file(input, out[i])) {
            cli_error("%s %s: that is the input FILE; it would be overwritten", flag[i], out[i]);
            return CLI_USAGE;
        }
        for (int j = 0; j < i; j++)
            if (out[j] && cli_same_file(out[j], out[i])) {
                cli_error("%s %s: the same file as %s; give each output its own name", flag[i], out[i], flag[j]);
                return CLI_USAGE;
            }
    }
    return CLI_OK;
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
