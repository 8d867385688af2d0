/* The command-line convention of args.h: one loop over the arguments for every program and
 * subcommand, its messages, and flag values as numbers. */
#define _XOPEN_SOURCE 700 /* sigaction; realpath, readlink, lstat (args_same_file) */

#include "args.h"

#include <errno.h>
#include <signal.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The length of the well-formed UTF-8 sequence at p (1 to 4), or 0 when it is not one
 * (a stray continuation byte, a truncated sequence, an overlong form, a surrogate, > U+10FFFF). */
static size_t utf8_len(const unsigned char *p)
{
    unsigned c = p[0];
    size_t n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (n == 0 || (n == 2 && c < 0xc2) || (n == 4 && c > 0xf4))
        return 0;
    for (size_t k = 1; k < n; k++)
        if ((p[k] & 0xc0) != 0x80)
            return 0;
    if ((n == 3 && c == 0xe0 && p[1] < 0xa0) || (n == 3 && c == 0xed && p[1] >= 0xa0) ||
        (n == 4 && c == 0xf0 && p[1] < 0x90) || (n == 4 && c == 0xf4 && p[1] >= 0x90))
        return 0;
    return n;
}

size_t args_escape(char *out, size_t outlen, const char *in)
{
    size_t o = 0;
    if (!outlen)
        return 0;
    for (const unsigned char *p = (const unsigned char *)in; *p;) {
        size_t n = utf8_len(p);
        char esc[5];
        const char *piece = (const char *)p;
        size_t len = n;
        if (n == 0 || (n == 1 && (*p < 0x20 || *p == 0x7f)) || (n == 2 && p[0] == 0xc2 && p[1] < 0xa0)) {
            /* a control character (C0, DEL, or C1 such as U+009B, the one-byte CSI) or a byte
             * that is not UTF-8: shown, never sent to the terminal as it is */
            snprintf(esc, sizeof esc, "\\x%02x", *p);
            piece = esc;
            len = 4;
            n = 1;
        }
        if (o + len >= outlen)
            break;
        memcpy(out + o, piece, len);
        o += len;
        p += n;
    }
    out[o] = '\0';
    return o;
}

void args_verror(const char *program, const char *fmt, va_list ap)
{
    char msg[2048], shown[4 * sizeof msg];
    vsnprintf(msg, sizeof msg, fmt, ap);
    for (char *c = msg; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    /* messages carry names from files and the command line (a value's name in a model, a
     * path): escape sequences or broken UTF-8 in them must not reach the terminal */
    args_escape(shown, sizeof shown, msg);
    fflush(stdout);
    fprintf(stderr, "%s: %s\n", program, shown);
}

void args_error(const char *program, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    args_verror(program, fmt, ap);
    va_end(ap);
}

/* Options every program takes, after its own (which a program may not redefine). */
static const args_flag builtin[] = { { "--help", 0 }, { "-h", 0 }, { "--version", 0 } };
enum { B_HELP, B_H, B_VERSION, N_BUILTIN };

/* The flag that arg (up to '=' if any) names: an index into spec->flags, or n_flags + k for
 * builtin k, or -1. */
static int find_flag(const args_spec *spec, const char *arg, size_t len)
{
    for (int k = 0; k < spec->n_flags + N_BUILTIN; k++) {
        const char *name = k < spec->n_flags ? spec->flags[k].name : builtin[k - spec->n_flags].name;
        if (strlen(name) == len && strncmp(arg, name, len) == 0)
            return k;
    }
    return -1;
}

int args_parse(const args_spec *spec, int argc, char **argv, void *ctx)
{
    char help[64];
    if (spec->command)
        snprintf(help, sizeof help, "%s %s --help", spec->program, spec->command);
    else
        snprintf(help, sizeof help, "%s --help", spec->program);
    int only_positional = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        int rc;
        if (only_positional || arg[0] != '-' || strcmp(arg, "-") == 0) {
            if ((rc = spec->take(ctx, ARGS_POSITIONAL, arg)) != 0)
                return rc;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            only_positional = 1;
            continue;
        }
        const char *eq = strchr(arg, '=');
        int k = find_flag(spec, arg, eq ? (size_t)(eq - arg) : strlen(arg));
        if (k < 0) {
            if (spec->command)
                args_error(spec->program, "unknown option '%s' for '%s %s' (see %s)", arg, spec->program,
                           spec->command, help);
            else
                args_error(spec->program, "unknown option '%s' (see %s)", arg, help);
            return ARGS_USAGE;
        }
        const args_flag *f = k < spec->n_flags ? &spec->flags[k] : &builtin[k - spec->n_flags];
        const char *value = NULL;
        if (f->has_value) {
            if (eq) {
                value = eq + 1;
            } else if (i + 1 < argc) {
                value = argv[++i];
            } else {
                args_error(spec->program, "%s needs a value", f->name);
                return ARGS_USAGE;
            }
        } else if (eq) {
            args_error(spec->program, "%s takes no value", f->name);
            return ARGS_USAGE;
        }
        if (k == spec->n_flags + B_HELP || k == spec->n_flags + B_H) {
            spec->usage(stdout);
            return 0;
        }
        if (k == spec->n_flags + B_VERSION) {
            printf("%s %s\n", spec->program, spec->version);
            return 0;
        }
        if ((rc = spec->take(ctx, k, value)) != 0)
            return rc;
    }
    return ARGS_GO_ON;
}

int args_int(const char *program, const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0' || s[0] == ' ' || s[0] == '\t') {
        args_error(program, "%s: '%s' is not an integer", flag, s);
        return -1;
    }
    if (errno == ERANGE || v < lo || v > hi) {
        args_error(program, "%s: %s is out of range (%lld..%lld)", flag, s, (long long)lo, (long long)hi);
        return -1;
    }
    *out = v;
    return 0;
}

int args_double(const char *program, const char *flag, const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || s[0] == ' ' || s[0] == '\t' || !isfinite(v)) {
        args_error(program, "%s: '%s' is not a number", flag, s);
        return -1;
    }
    if (errno == ERANGE || v < lo || v > hi) {
        args_error(program, "%s: %s is out of range (%g..%g)", flag, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

/* ---- dying of a signal without leaving temporaries ------------------------------------- */

static int (*volatile signal_cleanup)(void);

static void on_signal(int sig)
{
    int (*cleanup)(void) = signal_cleanup;
    if (cleanup)
        cleanup();
    /* then die of the signal itself, so the parent sees what happened (exit status 128+sig) */
    signal(sig, SIG_DFL);
    raise(sig);
}

void args_on_signals(int (*cleanup)(void))
{
    static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGPIPE };
    signal_cleanup = cleanup;
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old, sa;
        /* a signal the parent chose to ignore (nohup's SIGHUP, a shell's SIGPIPE) stays ignored */
        if (sigaction(sigs[i], NULL, &old) != 0 || old.sa_handler == SIG_IGN)
            continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}

/* ---- output names ---------------------------------------------------------------------- */

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

/* The name a write to path creates when path does not exist: path itself, or where a
 * dangling link (or a chain of them) points, the writer following links the same way
 * (graph/base/file_out.c). NULL when out of memory or the links loop. Caller frees. */
static char *dangling_end(const char *path)
{
    char *cur = strdup(path);
    for (int hops = 0; cur && hops < 40; hops++) {
        struct stat lst;
        char to[4096];
        ssize_t n;
        if (lstat(cur, &lst) != 0 || !S_ISLNK(lst.st_mode) || (n = readlink(cur, to, sizeof to - 1)) < 0)
            return cur;
        to[n] = '\0';
        const char *slash = to[0] == '/' ? NULL : strrchr(cur, '/');
        size_t keep = slash ? (size_t)(slash - cur) + 1 : 0;
        char *next = malloc(keep + (size_t)n + 1);
        if (next) {
            memcpy(next, cur, keep);
            memcpy(next + keep, to, (size_t)n + 1);
        }
        free(cur);
        cur = next;
    }
    free(cur);
    return NULL;
}

int args_same_file(const char *a, const char *b)
{
    if (strcmp(a, b) == 0)
        return 1;
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    /* one does not exist (yet): compare the names the writes would create, a dangling link
     * counting as the name it points to */
    char *ea = dangling_end(a), *eb = dangling_end(b);
    char *ra = ea ? resolved_path(ea) : NULL, *rb = eb ? resolved_path(eb) : NULL;
    free(ea);
    free(eb);
    int same = ra && rb && strcmp(ra, rb) == 0;
    free(ra);
    free(rb);
    return same;
}
