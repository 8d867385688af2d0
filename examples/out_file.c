/* out_file: whole-or-nothing writes for train_mlp (see out_file.h). */
#define _POSIX_C_SOURCE 200809L /* mkstemp, fsync, realpath */
#define _DEFAULT_SOURCE         /* realpath, mkstemp on glibc */

#include "out_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The temporary being written, for out_file_cleanup; set only while it exists. */
static char temp_name[PATH_MAX + 32];
static volatile sig_atomic_t temp_live;

int out_file_cleanup(void)
{
    if (!temp_live)
        return 0;
    temp_live = 0;
    return unlink(temp_name) == 0;
}

/* The folder of `path` ("." for a bare name) into dir. */
static void folder_of(const char *path, char *dir, size_t size)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, size, ".");
    else if (slash == path)
        snprintf(dir, size, "/");
    else
        snprintf(dir, size, "%.*s", (int)(slash - path), path);
}

int out_file_check(const char *path, char *err, size_t errlen)
{
    struct stat st;
    char dir[PATH_MAX];
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            snprintf(err, errlen, "%s: is a directory", path);
            return -1;
        }
        if (!S_ISREG(st.st_mode)) /* a FIFO or device: written in place */
            return 0;
    }
    char real[PATH_MAX];
    const char *target = realpath(path, real) ? real : path; /* a link's target decides */
    folder_of(target, dir, sizeof dir);
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: %s", path, stat(dir, &st) != 0 ? strerror(errno) : "its folder is not a directory");
        return -1;
    }
    if (access(dir, W_OK) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* write(2) until all is written or it fails. */
static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int out_file_write(const char *path, const void *data, size_t n, char *err, size_t errlen)
{
    struct stat st;
    char real[PATH_MAX];
    const char *target = path;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode) && realpath(path, real))
        target = real; /* replace the link's target, not the link */
    int exists = stat(target, &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: is a directory", path);
        return -1;
    }
    if (exists && !S_ISREG(st.st_mode)) { /* FIFO, device: in place */
        int fd = open(target, O_WRONLY | O_CLOEXEC);
        int bad = fd < 0 || write_all(fd, data, n) != 0;
        int saved = errno;
        if (fd >= 0)
            close(fd);
        if (bad)
            snprintf(err, errlen, "%s: %s", path, strerror(saved));
        return bad ? -1 : 0;
    }
    if (snprintf(temp_name, sizeof temp_name, "%s.tmp.XXXXXX", target) >= (int)sizeof temp_name) {
        snprintf(err, errlen, "%s: name too long", path);
        return -1;
    }
    int fd = mkstemp(temp_name);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    temp_live = 1;
    mode_t mode;
    if (exists)
        mode = st.st_mode & 07777;
    else {
        mode_t mask = umask(0);
        umask(mask);
        mode = 0666 & ~mask;
    }
    if (write_all(fd, data, n) != 0 || fchmod(fd, mode) != 0 || fsync(fd) != 0) {
        int saved = errno;
        close(fd);
        out_file_cleanup();
        snprintf(err, errlen, "%s: %s", path, strerror(saved));
        return -1;
    }
    if (close(fd) != 0 || rename(temp_name, target) != 0) {
        int saved = errno;
        out_file_cleanup();
        snprintf(err, errlen, "%s: %s", path, strerror(saved));
        return -1;
    }
    temp_live = 0;
    return 0;
}
