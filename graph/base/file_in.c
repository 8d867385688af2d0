/* Bounded input files (graph/base/file_in.h): one copy of "is it a regular file, is it small
 * enough, open it without blocking" for every reader in the library and the command line. */
#define _XOPEN_SOURCE 700 /* fdopen, O_NOCTTY */

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph/base/errmsg.h"
#include "graph/base/file_in.h"

/* What a non-regular file is, in the words of the message. */
static const char *kind_of(mode_t m)
{
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    if (S_ISSOCK(m))
        return "a socket";
    return "not a plain file";
}

/* "1 GiB", "2 GiB", else bytes: the limits are whole GiB, but the message must stay true. */
static void size_words(char *buf, size_t n, uint64_t bytes)
{
    if (bytes >= ((uint64_t)1 << 30) && bytes % ((uint64_t)1 << 30) == 0)
        snprintf(buf, n, "%llu GiB", (unsigned long long)(bytes >> 30));
    else
        snprintf(buf, n, "%llu bytes", (unsigned long long)bytes);
}

static pbl_status over_limit(const char *path, const char *what, uint64_t got, int at_least, uint64_t max, char *err,
                             size_t errlen)
{
    char lim[32];
    size_words(lim, sizeof lim, max);
    return pbl__errf(err, errlen, PBL_ERR_FORMAT, "%s: %s%llu bytes is more than %s may hold (%s)", path,
                     at_least ? "at least " : "", (unsigned long long)got, what, lim);
}

/* Opens path without blocking and checks it: *fd open on a regular file of at most max bytes. */
static pbl_status open_checked(const char *path, const char *what, uint64_t max, int *fd, uint64_t *size, char *err,
                               size_t errlen)
{
    *fd = -1;
    /* O_NONBLOCK: opening a FIFO for reading waits for a writer, forever if none comes; with
     * it, the open returns and fstat says what the file is */
    int d = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (d < 0)
        return pbl__errf(err, errlen, PBL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    pbl_status s;
    if (fstat(d, &st) != 0) {
        s = pbl__errf(err, errlen, PBL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        goto fail_close;
    }
    if (!S_ISREG(st.st_mode)) {
        s = pbl__errf(err, errlen, PBL_ERR_IO, "%s: is %s, not a regular file", path, kind_of(st.st_mode));
        goto fail_close;
    }
    if ((uint64_t)st.st_size > max) {
        s = over_limit(path, what, (uint64_t)st.st_size, 0, max, err, errlen);
        goto fail_close;
    }
    /* a regular file never blocks; reads go back to the ordinary mode all the same */
    int fl = fcntl(d, F_GETFL);
    if (fl >= 0)
        (void)fcntl(d, F_SETFL, fl & ~O_NONBLOCK);
    *fd = d;
    if (size)
        *size = (uint64_t)st.st_size;
    return PBL_OK;
fail_close:
    close(d);
    return s;
}

pbl_status pbl__file_in_open(const char *path, const char *what, uint64_t max, FILE **f, uint64_t *size,
                             char *err, size_t errlen)
{
    *f = NULL;
    int fd;
    pbl_status s = open_checked(path, what, max, &fd, size, err, errlen);
    if (s != PBL_OK)
        return s;
    if (!(*f = fdopen(fd, "rb"))) {
        s = pbl__errf(err, errlen, PBL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        close(fd);
    }
    return s;
}

pbl_status pbl__file_in_read(const char *path, const char *what, uint64_t max, pbl__mem *m, unsigned char **data,
                             size_t *len, char *err, size_t errlen)
{
    *data = NULL;
    *len = 0;
    int fd = -1;
    uint64_t size = 0;
    pbl_status s = open_checked(path, what, max, &fd, &size, err, errlen);
    if (s != PBL_OK)
        return s;
    /* room for the whole file and one more byte: a read that fills it means the file grew
     * (or is a /proc file whose size says 0), and the buffer doubles up to the limit */
    size_t cap = (size_t)size + 1 < 4096 ? 4096 : (size_t)size + 1, n = 0;
    unsigned char *buf = pbl__mem_alloc(m, cap);
    if (!buf) {
        s = pbl__errf(err, errlen, PBL_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, cap);
        goto fail_close;
    }
    for (;;) {
        if (n + 1 == cap) {
            if (n > max) {
                s = over_limit(path, what, n, 1, max, err, errlen);
                goto fail_free;
            }
            size_t ncap = cap * 2 > max + 2 ? (size_t)max + 2 : cap * 2;
            unsigned char *nb = pbl__mem_resize(m, buf, cap, ncap);
            if (!nb) {
                s = pbl__errf(err, errlen, PBL_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, ncap);
                goto fail_free;
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t got = read(fd, buf + n, cap - 1 - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            s = pbl__errf(err, errlen, PBL_ERR_IO, "%s: read error: %s", path, strerror(errno));
            goto fail_free;
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    if (n > max) {
        s = over_limit(path, what, n, 1, max, err, errlen);
        goto fail_free;
    }
    close(fd);
    if (n + 1 != cap) { /* the caller frees exactly *len + 1 bytes */
        unsigned char *nb = pbl__mem_resize(m, buf, cap, n + 1);
        if (!nb) {
            pbl__mem_free(m, buf, cap);
            return pbl__errf(err, errlen, PBL_ERR_NOMEM, "%s: out of memory", path);
        }
        buf = nb;
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return PBL_OK;
fail_free:
    pbl__mem_free(m, buf, cap);
fail_close:
    close(fd);
    return s;
}
