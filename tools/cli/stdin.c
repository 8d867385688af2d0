/* Standard input where a file is named `-`. It is read whole, once, into memory (up to a
 * limit), because its format is told from its content: `pebble plan -` takes a records CSV,
 * a JSON graph or an ONNX model alike, and `pebble viz - --dot D --html H` loads it twice.
 * Messages name it "<stdin>". Which argument reads it is settled while parsing (only one
 * can: two inputs cannot both be standard input), before anything runs. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static char claimed_by[160];    /* the argument that reads standard input ("FILE -", "--input x=-") */
static unsigned char *bytes;    /* what was read, once; NULL before */
static size_t n_bytes;

int cli_is_stdio(const char *path)
{
    return path && strcmp(path, "-") == 0;
}

const char *cli_display_name(const char *path)
{
    return cli_is_stdio(path) ? CLI_STDIN_NAME : path;
}

int cli_stdin_claim(const char *what)
{
    if (claimed_by[0]) {
        cli_error("%s: standard input is already read by %s; it can be read once", what, claimed_by);
        return CLI_USAGE;
    }
    snprintf(claimed_by, sizeof claimed_by, "%s", what);
    return CLI_OK;
}

/* The most bytes read from standard input: PEBBLE_STDIN_MAX when set to a positive integer,
 * else 1 GiB, so a runaway producer is an error rather than all of memory. */
static size_t stdin_max(void)
{
    const char *s = getenv("PEBBLE_STDIN_MAX");
    char *end;
    if (s && s[0]) {
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (*end == '\0' && errno == 0 && v > 0 && s[0] != '-')
            return v < SIZE_MAX / 4 ? (size_t)v : SIZE_MAX / 4;
    }
    return (size_t)1 << 30;
}

int cli_stdin_read(const unsigned char **data, size_t *len)
{
    if (bytes) {
        *data = bytes;
        *len = n_bytes;
        return CLI_OK;
    }
    size_t max = stdin_max(), cap = 0, n = 0;
    unsigned char *buf = NULL;
    for (;;) {
        if (n == cap) {
            if (cap > max) {
                cli_error("%s: more than %zu bytes on standard input (the limit; PEBBLE_STDIN_MAX=BYTES raises it);"
                          " give a file name instead", CLI_STDIN_NAME, max);
                free(buf);
                return CLI_USAGE;
            }
            size_t ncap = cap ? cap * 2 : 65536;
            if (ncap > max + 1)
                ncap = max + 1; /* one byte past the limit tells "exactly max" from "more" */
            unsigned char *nb = realloc(buf, ncap);
            if (!nb) {
                cli_error("%s: out of memory reading standard input (%zu bytes so far)", CLI_STDIN_NAME, n);
                free(buf);
                return CLI_FAIL;
            }
            buf = nb;
            cap = ncap;
        }
        errno = 0;
        size_t got = fread(buf + n, 1, cap - n, stdin);
        n += got;
        if (got == 0) {
            if (ferror(stdin)) {
                cli_error("%s: cannot read: %s", CLI_STDIN_NAME, strerror(errno ? errno : EIO));
                free(buf);
                return CLI_FAIL;
            }
            break;
        }
    }
    bytes = buf ? buf : malloc(1);
    if (!bytes) {
        cli_error("%s: out of memory", CLI_STDIN_NAME);
        return CLI_FAIL;
    }
    n_bytes = n;
    *data = bytes;
    *len = n_bytes;
    return CLI_OK;
}

int cli_content_of(const unsigned char *data, size_t len)
{
    size_t i = 0;
    while (i < len && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r' || data[i] == '\n'))
        i++;
    if (i < len && data[i] == '{')
        return CLI_CONTENT_JSON;
    /* A records CSV's first line is its header, text; an ONNX model is a protobuf, which
     * starts with a field tag (ir_version: 0x08) and has binary lengths: a control byte
     * before the first line end. */
    for (i = 0; i < len && data[i] != '\n' && i < PBL_RECORDS_CSV_LINE_MAX + 2; i++)
        if ((data[i] < 0x20 && data[i] != '\t' && data[i] != '\r') || data[i] == 0x7f)
            return CLI_CONTENT_ONNX;
    return CLI_CONTENT_RECORDS;
}

void cli_stdin_release(void)
{
    free(bytes);
    bytes = NULL;
    n_bytes = 0;
}
