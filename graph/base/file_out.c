/* Whole-or-nothing file output (graph/base/file_out.h): one copy of the temporary-name, fsync
 * and rename dance that JSON graphs, assignment CSVs, tensors, checkpoints and the command
 * line's pictures share. */
#define _XOPEN_SOURCE 700 /* fchmod, fdopen, fsync, lstat, realpath */
#define _DEFAULT_SOURCE   /* getentropy, O_NOFOLLOW, dirfd, fstatat, unlinkat */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "graph/base/errmsg.h"
#include "graph/base/file_out.h"

/* "<target>.tmp.<pid>.<letters>": the pid says whose it is, so a later write can tell a
 * killed writer's leftover from a running one's; 12 letters of 32 give 60 bits to guess */
#define TMP_LETTERS 12
#define TMP_EXTRA   (sizeof ".tmp." - 1 + 20 + 1 + TMP_LETTERS + 1)

static const char letters[] = "abcdefghijklmnopqrstuvwxyz012345";

/* Fills tmp with "<target>.tmp.<pid>.<12 random letters>". The letters come from getentropy; where
 * that fails, from the clock, the process id and the attempt, which still differ from one
 * attempt to the next (the exclusive open below is what makes it safe, the randomness makes
 * a planted name unlikely to be hit at all). */
static void temp_name(char *tmp, const char *target, unsigned attempt)
{
    unsigned char r[TMP_LETTERS];
    if (getentropy(r, sizeof r) != 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 30 ^ (uint64_t)getpid() << 20 ^ attempt;
        for (size_t i = 0; i < sizeof r; i++) {
            x = x * 6364136223846793005u + 1442695040888963407u; /* an LCG step to spread the bits */
            r[i] = (unsigned char)(x >> 56);
        }
    }
    size_t n = strlen(target);
    memcpy(tmp, target, n);
    n += (size_t)snprintf(tmp + n, TMP_EXTRA, ".tmp.%ld.", (long)getpid());
    for (size_t i = 0; i < TMP_LETTERS; i++)
        tmp[n + i] = letters[r[i] % 32];
    tmp[n + TMP_LETTERS] = '\0';
}

/* The pid in `name` when it is "<base>.tmp.<pid>.<TMP_LETTERS of letters[]>", else 0. */
static long temp_owner(const char *name, const char *base, size_t base_len)
{
    if (strncmp(name, base, base_len) != 0 || strncmp(name + base_len, ".tmp.", 5) != 0)
        return 0;
    const char *p = name + base_len + 5;
    long pid = 0;
    for (; *p >= '0' && *p <= '9' && pid < 100000000L; p++)
        pid = pid * 10 + (*p - '0');
    if (*p++ != '.' || strlen(p) != TMP_LETTERS || strspn(p, letters) != TMP_LETTERS)
        return 0;
    return pid;
}

/* Removes the temporaries a killed writer left beside target (kill -9 gives no chance to
 * clean up): regular files named by temp_name whose process no longer runs on this machine.
 * A running process's temporary (ours included), a link and anything else stay. Best
 * effort: a folder that cannot be read is left as it is. `scratch` has room for target. */
static void remove_stale_temps(const char *target, char *scratch)
{
    strcpy(scratch, target);
    char *slash = strrchr(scratch, '/');
    const char *dir = ".", *base = scratch;
    if (slash) {
        *slash = '\0';
        dir = slash == scratch ? "/" : scratch;
        base = slash + 1;
    }
    size_t base_len = strlen(base);
    DIR *d = opendir(dir);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        long pid = temp_owner(e->d_name, base, base_len);
        struct stat st;
        if (pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
            unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

/* Creates tmp exclusively: O_EXCL refuses any name that exists, a symbolic link planted there
 * included (O_NOFOLLOW says so twice), so nothing but a new file of ours is ever written.
 * Returns the descriptor or -1 with errno. */
static int create_temp(char *tmp, const char *target)
{
    for (unsigned attempt = 0; attempt < 100; attempt++) {
        temp_name(tmp, target, attempt);
        /* 0666: the umask then gives a new file the mode any other new file would get */
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    return -1; /* errno is EEXIST: a hundred names taken, someone is guessing */
}

/* Frees o's target and temporary names (either may be NULL), allocated for a target of
 * target_len bytes. */
static void drop_names(pbl__file_out *o, size_t target_len)
{
    pbl__mem_free(&o->mem, o->target, target_len + 1);
    pbl__mem_free(&o->mem, o->tmp, target_len + TMP_EXTRA);
    o->target = o->tmp = NULL;
}

pbl_status pbl__file_out_open(pbl__file_out *o, const char *path, const pbl_allocator *a, char *err,
                              size_t errlen)
{
    memset(o, 0, sizeof *o);
    pbl__mem_init(&o->mem, a);
    o->path = path;
    if (!path || !*path)
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "no file name");
    struct stat st;
    int exists = stat(path, &st) == 0;
    if (exists && S_ISDIR(st.st_mode))
        return pbl__errf(err, errlen, PBL_ERR_IO, "%s: is a directory", path);
    if (exists && !S_ISREG(st.st_mode)) {
        /* a FIFO or a device (pebble export m --json /dev/stdout): renaming over it would
         * replace the device node, so write into it */
        errno = 0;
        o->f = fopen(path, "wb");
        if (!o->f)
            return pbl__errf(err, errlen, PBL_ERR_IO, "%s: cannot open: %s", path, strerror(errno ? errno : EIO));
        return PBL_OK;
    }
    /* a link to a regular file: replace the file it names, keep the link */
    struct stat lst;
    char *real = NULL;
    if (exists && lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode))
        real = realpath(path, NULL);
    const char *target = real ? real : path;
    size_t target_len = strlen(target);
    o->target = pbl__mem_alloc(&o->mem, target_len + 1);
    o->tmp = pbl__mem_alloc(&o->mem, target_len + TMP_EXTRA);
    if (o->target)
        memcpy(o->target, target, target_len + 1);
    free(real);
    if (!o->target || !o->tmp) {
        drop_names(o, target_len);
        return pbl__errf(err, errlen, PBL_ERR_NOMEM, "%s: out of memory", path);
    }
    remove_stale_temps(o->target, o->tmp);
    errno = 0;
    int fd = create_temp(o->tmp, o->target);
    /* the replacement keeps the permission bits of the file it replaces: a private 0600
     * file must not come back as 0644 */
    if (fd >= 0 && ((exists && fchmod(fd, st.st_mode & 07777) != 0) || !(o->f = fdopen(fd, "wb")))) {
        int e = errno;
        close(fd);
        remove(o->tmp);
        fd = -1;
        errno = e;
    }
    if (fd < 0) {
        /* the temporary's name is random: the message names the folder's problem, not it */
        pbl_status s = pbl__errf(err, errlen, PBL_ERR_IO, "%s: cannot create a temporary file beside it: %s", path,
                                 strerror(errno ? errno : EIO));
        drop_names(o, target_len);
        return s;
    }
    return PBL_OK;
}

pbl_status pbl__file_out_close(pbl__file_out *o, int keep, char *err, size_t errlen)
{
    pbl_status s = PBL_OK;
    if (!o->f)
        return s;
    errno = 0;
    /* fsync before rename: otherwise a crash soon after could leave the name pointing at a
     * file whose blocks never reached the disk */
    int bad = ferror(o->f) || fflush(o->f) != 0 || (o->tmp && fsync(fileno(o->f)) != 0);
    int e = errno;
    if (fclose(o->f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    o->f = NULL;
    if (keep && bad)
        s = pbl__errf(err, errlen, PBL_ERR_IO, "%s: writing: %s", o->path, strerror(e ? e : EIO));
    if (keep && !bad && o->tmp && rename(o->tmp, o->target) != 0)
        s = pbl__errf(err, errlen, PBL_ERR_IO, "%s: cannot replace it: %s", o->path, strerror(errno ? errno : EIO));
    if (o->tmp) {
        if (!keep || s != PBL_OK)
            remove(o->tmp);
        drop_names(o, strlen(o->target));
    }
    return s;
}
