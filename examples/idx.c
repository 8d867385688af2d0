/* IDX reader over zlib's gz* calls, which read gzip and plain files alike. */
#define _XOPEN_SOURCE 700 /* O_NOCTTY, O_CLOEXEC */
#include "idx.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

/* zlib's message for f's error, without the "<fd:3>: " it starts with (f is opened by
 * descriptor, so that is the name zlib knows). */
static const char *gz_message(gzFile f)
{
    int zerr;
    const char *msg = gzerror(f, &zerr);
    const char *cut = msg && strncmp(msg, "<fd:", 4) == 0 ? strstr(msg, ">: ") : NULL;
    return cut ? cut + 3 : msg;
}

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
            const char *msg = gz_message(f);
            gzerror(f, &zerr);
            if (zerr == Z_BUF_ERROR) /* zlib's word for a compressed stream cut short */
                snprintf(err, errlen, "%s: truncated: the gzip stream ends inside %s", path,
                         what);
            else if (zerr == Z_DATA_ERROR) /* zlib reads ahead: not always inside `what` */
                snprintf(err, errlen, "%s: corrupt gzip data: %s", path, msg);
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

/* Opens path for gzread after checking it is a regular file no larger than an IDX file may be
 * (plain, the largest header and IDX_MAX_BYTES of data; compressed, less). The open does not
 * wait on a FIFO (O_NONBLOCK), so a FIFO, a device or a directory is refused at once, by name.
 * NULL with err set on failure. */
static gzFile open_bounded(const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        goto fail_close;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: is %s, not a regular file", path,
                 S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO"
                 : S_ISCHR(st.st_mode) ? "a character device" : "not a plain file");
        goto fail_close;
    }
    if ((uint64_t)st.st_size > IDX_MAX_BYTES + 4 + 4 * IDX_MAX_RANK) {
        snprintf(err, errlen, "%s: %lld bytes is more than an IDX file may hold (%zu bytes of data)",
                 path, (long long)st.st_size, IDX_MAX_BYTES);
        goto fail_close;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    gzFile f = gzdopen(fd, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open %s: out of memory", path);
        goto fail_close;
    }
    return f;
fail_close:
    close(fd);
    return NULL;
}

int idx_read(idx_array *out, const char *path, int rank, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (rank < 1 || rank > IDX_MAX_RANK) {
        snprintf(err, errlen, "%s: rank %d is not supported", path, rank);
        return -1;
    }
    gzFile f = open_bounded(path, err, errlen);
    if (!f)
        return -1;

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
            snprintf(err, errlen, "%s: reading past the data: %s", path, gz_message(f));
        goto fail_free_data;
    }
    /* The data is all there, but a gzip stream cut inside its 8-byte trailer (the CRC-32 and
     * length that prove the data intact) reads exactly as a whole one; zlib says so only
     * when the file is closed. */
    int closed = gzclose(f);
    if (closed != Z_OK) {
        snprintf(err, errlen, "%s: truncated: the gzip stream ends %s", path,
                 closed == Z_BUF_ERROR ? "before its trailer (CRC-32 and length)" : "with an error");
        free(out->data);
        memset(out, 0, sizeof *out);
        return -1;
    }
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
