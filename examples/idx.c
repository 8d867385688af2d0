/* IDX reader over zlib's gz* calls, which read gzip and plain files alike. */
#include "idx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

/* Reads exactly n bytes or reports how many it got. gzread takes an unsigned length, so big
 * reads go in pieces. Returns 0, or -1 with err set. */
static int read_exact(gzFile f, const char *path, const char *what, uint8_t *p, size_t n,
                      char *err, size_t errlen)
{
    size_t got = 0;
    while (got < n) {
        size_t want = n - got > (1u << 30) ? (1u << 30) : n - got;
        int r = gzread(f, p + got, (unsigned)want);
        if (r < 0) {
            int zerr;
            const char *msg = gzerror(f, &zerr);
            if (zerr == Z_BUF_ERROR) /* zlib's word for a compressed stream cut short */
                snprintf(err, errlen, "%s: truncated: the gzip stream ends inside %s", path,
                         what);
            else
                snprintf(err, errlen, "%s: reading %s: %s", path, what,
                         zerr == Z_ERRNO ? strerror(errno) : msg);
            return -1;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    if (got < n) {
        /* A gzip stream cut short reads as a short count with an "unexpected end of file"
         * error; a plain file cut short as a short count alone. Either way: truncated. */
        snprintf(err, errlen, "%s: truncated: %s needs %zu bytes, the file has %zu", path, what,
                 n, got);
        return -1;
    }
    return 0;
}

int idx_read(idx_array *out, const char *path, int rank, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (rank < 1 || rank > IDX_MAX_RANK) {
        snprintf(err, errlen, "%s: rank %d is not supported", path, rank);
        return -1;
    }
    errno = 0;
    gzFile f = gzopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open %s: %s", path,
                 errno ? strerror(errno) : "out of memory");
        return -1;
    }

    uint8_t head[4 + 4 * IDX_MAX_RANK];
    if (read_exact(f, path, "the header", head, 4 + 4 * (size_t)rank, err, errlen) != 0)
        goto fail_close;
    const uint32_t magic = (uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 |
                           (uint32_t)head[2] << 8 | head[3];
    const uint32_t want_magic = 0x00000800u | (uint32_t)rank;
    if (magic != want_magic) {
        snprintf(err, errlen,
                 "%s: bad magic 0x%08x (expected 0x%08x: unsigned bytes, %d dimension%s)", path,
                 magic, want_magic, rank, rank == 1 ? "" : "s");
        goto fail_close;
    }
    size_t size = 1;
    for (int d = 0; d < rank; d++) {
        const uint8_t *b = head + 4 + 4 * d;
        uint32_t dim = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
        if (dim == 0 || dim > IDX_MAX_BYTES || size > IDX_MAX_BYTES / dim) {
            snprintf(err, errlen, "%s: dimension %d is %u, which is %s", path, d, dim,
                     dim == 0 ? "empty" : "too large");
            goto fail_close;
        }
        out->dims[d] = dim;
        size *= dim;
    }
    out->rank = rank;
    out->size = size;
    out->data = malloc(size);
    if (!out->data) {
        snprintf(err, errlen, "%s: out of memory (%zu bytes)", path, size);
        goto fail_close;
    }
    if (read_exact(f, path, "the data", out->data, size, err, errlen) != 0)
        goto fail_free_data;
    /* Trailing bytes mean the header and the data disagree: the file is not what it claims. */
    uint8_t extra;
    int r = gzread(f, &extra, 1);
    if (r != 0) {
        if (r > 0)
            snprintf(err, errlen, "%s: more data than the header's dimensions describe", path);
        else
            snprintf(err, errlen, "%s: reading past the data: %s", path, gzerror(f, &r));
        goto fail_free_data;
    }
    gzclose(f);
    return 0;

fail_free_data:
    free(out->data);
fail_close:
    gzclose(f);
    memset(out, 0, sizeof *out);
    return -1;
}

void idx_array_free(idx_array *a)
{
    free(a->data);
    memset(a, 0, sizeof *a);
}
