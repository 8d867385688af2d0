/* Whole-or-nothing file output (graph/base/file_out.h): one copy of the temporary-file, fsync
 * and rename dance that JSON graphs, assignment CSVs, tensors, checkpoints and the command
 * line's pictures share, and the list of temporaries a signal handler may remove. */
#define _GNU_SOURCE /* O_TMPFILE, linkat, getentropy, O_NOFOLLOW, dirfd, fstatat, unlinkat */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "graph/base/errmsg.h"
#include "graph/base/export.h"
#include "graph/base/file_out.h"

/* "<target>.tmp.<pid>.<letters>": the pid says whose it is, so a later write can tell a
 * killed writer's leftover from a running one's; 12 letters of 32 give 60 bits to guess */
#define TMP_LETTERS 12
#define TMP_EXTRA   (sizeof ".tmp." - 1 + 20 + 1 + TMP_LETTERS + 1)
/* The most bytes of the target's own name a temporary's name repeats: a file name may have
 * 255 bytes (NAME_MAX), and a temporary of a 240-byte name would not fit beside it with its
 * suffix; 200 bytes and the suffix (at most 38) always do. */
#define TMP_BASE_MAX 200

static const char letters[] = "abcdefghijklmnopqrstuvwxyz012345";

/* ---- the temporaries a signal handler removes ------------------------------------------ */

/* While a temporary has a name (from its creation, or its link, to its rename or removal) the
 * name sits in one of these slots, so that pbl_cleanup_temporaries can unlink it from a
 * SIGINT or SIGTERM handler. This is the one piece of process-wide state in the library: a
 * handler has no other way to find the names. The names are copied here (not pointed to)
 * because a handler may run while the writer frees its own copy; the slots are claimed with
 * lock-free atomics, which a handler may use. A name longer than a slot, or a 33rd write at
 * once, goes unlisted: a signal then leaves that temporary, and the next write to the target
 * removes it as a dead process's leftover.
 *
 * Giving a temporary its name and listing it is one step as far as the handler can tell:
 * the writer's thread blocks signals for it (so the handler never runs there, in between),
 * and counts itself in `naming`; a handler on another thread first sets `dying` and then
 * waits for `naming` to drop to 0 before it unlinks. A writer that starts naming after that
 * sees `dying` and gives up, so no name can appear behind the handler's back while the process
 * dies of the signal. */
#define PENDING_SLOTS 32
#define PENDING_NAME  4096
enum { SLOT_FREE, SLOT_BUSY, SLOT_ARMED };
static struct {
    atomic_int state;
    char       name[PENDING_NAME];
} pending[PENDING_SLOTS];
static atomic_int naming, dying;

/* Lists name; returns its slot, or -1 when it could not be listed. */
static int pending_add(const char *name)
{
    size_t n = strlen(name);
    if (n >= PENDING_NAME)
        return -1;
    for (int i = 0; i < PENDING_SLOTS; i++) {
        int want = SLOT_FREE;
        if (atomic_compare_exchange_strong(&pending[i].state, &want, SLOT_BUSY)) {
            memcpy(pending[i].name, name, n + 1);
            atomic_store(&pending[i].state, SLOT_ARMED);
            return i;
        }
    }
    return -1;
}

/* Takes slot off the list (-1: nothing to do). */
static void pending_drop(int slot)
{
    if (slot >= 0)
        atomic_store(&pending[slot].state, SLOT_FREE);
}

/* Starts naming a temporary (see above): 0, or -1 with errno EINTR when a handler has
 * already cleaned up (the process is dying of a signal; nothing may be named now). Every
 * naming_begin, either result, is followed by naming_end with the same mask. */
static int naming_begin(sigset_t *old)
{
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, old);
    atomic_fetch_add(&naming, 1);
    if (atomic_load(&dying)) {
        errno = EINTR;
        return -1;
    }
    return 0;
}

static void naming_end(const sigset_t *old)
{
    int e = errno;
    atomic_fetch_sub(&naming, 1);
    pthread_sigmask(SIG_SETMASK, old, NULL);
    errno = e;
}

PBL__API int pbl_cleanup_temporaries(void)
{
    int saved = errno, removed = 0;
    atomic_store(&dying, 1);
    /* a writer naming a temporary on another thread finishes (and lists it) first; a bound
     * of two seconds, in case that thread is stuck in a slow filesystem */
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (atomic_load(&naming) > 0) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > 2)
            break;
    }
    for (int i = 0; i < PENDING_SLOTS; i++) {
        int want = SLOT_ARMED;
        /* BUSY while we unlink: a writer's pending_drop then simply frees the slot after */
        if (atomic_compare_exchange_strong(&pending[i].state, &want, SLOT_BUSY)) {
            removed += unlink(pending[i].name) == 0;
            atomic_store(&pending[i].state, SLOT_FREE);
        }
    }
    errno = saved;
    return removed;
}

/* ---- temporary names ------------------------------------------------------------------- */

/* Fills tmp with "<target>.tmp.<pid>.<12 random letters>" (the target's own name cut at
 * TMP_BASE_MAX bytes). The letters come from getentropy; where
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
    const char *slash = strrchr(target, '/');
    size_t dir_len = slash ? (size_t)(slash - target) + 1 : 0, n = strlen(target);
    if (n - dir_len > TMP_BASE_MAX)
        n = dir_len + TMP_BASE_MAX;
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

/* Splits a copy of target in scratch (room for target) into its folder and base name. */
static void split_path(const char *target, char *scratch, const char **dir, const char **base)
{
    strcpy(scratch, target);
    char *slash = strrchr(scratch, '/');
    *dir = ".";
    *base = scratch;
    if (slash) {
        *slash = '\0';
        *dir = slash == scratch ? "/" : scratch;
        *base = slash + 1;
    }
}

/* Removes the temporaries a killed writer left beside target (kill -9 gives no chance to
 * clean up): regular files named by temp_name whose process no longer runs on this machine.
 * A running process's temporary (ours included), a link and anything else stay. Best
 * effort: a folder that cannot be read is left as it is. `scratch` has room for target. */
static void remove_stale_temps(const char *target, char *scratch)
{
    const char *dir, *base;
    split_path(target, scratch, &dir, &base);
    size_t base_len = strlen(base);
    if (base_len > TMP_BASE_MAX) /* as temp_name cuts it */
        base_len = TMP_BASE_MAX;
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

/* ---- creating the temporary ------------------------------------------------------------ */

/* An unnamed file in target's folder (O_TMPFILE): nothing to clean up if the process dies
 * before it is linked, and nothing a planted name can redirect. -1 where the filesystem or
 * kernel has no O_TMPFILE, or where the link that names it later (through /proc/self/fd, which
 * needs no privilege) would not be possible; PEBBLE_NO_O_TMPFILE=1 in the environment says the
 * same (the tests use it to exercise the named path that such filesystems take). */
static int create_anonymous(const char *target, char *scratch)
{
#ifdef O_TMPFILE
    const char *no = getenv("PEBBLE_NO_O_TMPFILE");
    if ((no && *no && strcmp(no, "0") != 0) || access("/proc/self/fd", X_OK) != 0)
        return -1;
    const char *dir, *base;
    split_path(target, scratch, &dir, &base);
    return open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
#else
    (void)target, (void)scratch;
    return -1;
#endif
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

/* Gives the unnamed file fd the name tmp (a fresh random one each attempt) beside target.
 * 0, or -1 with errno. */
static int link_anonymous(int fd, char *tmp, const char *target)
{
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    for (unsigned attempt = 0; attempt < 100; attempt++) {
        temp_name(tmp, target, attempt);
        if (linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) == 0)
            return 0;
        if (errno != EEXIST)
            return -1;
    }
    return -1;
}

/* Syncs the folder holding target, so that the rename itself survives a crash. Best effort:
 * the new content is already in place and synced, and some filesystems refuse to sync a
 * folder (EINVAL); a failure here is not worth reporting the write as failed. */
static void sync_folder(const char *target, char *scratch)
{
    const char *dir, *base;
    split_path(target, scratch, &dir, &base);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* ---- where a path leads --------------------------------------------------------------- */

/* The descriptor `link` is when it is one of this process's own open files as /proc shows
 * them: /dev/stdout, /dev/fd/3, /proc/self/fd/1, /proc/<our pid>/task/<tid>/fd/2 (the folder
 * holding the link resolves to our /proc/PID/fd). Such a link leads to whatever the descriptor
 * has open, and a new open (which truncates) or a rename over that file would lose what the
 * descriptor means: `>> log` appends, and replacing log would drop what it held. -1 otherwise. */
static int own_descriptor(const char *link)
{
    const char *slash = strrchr(link, '/');
    if (!slash || !slash[1] || strspn(slash + 1, "0123456789") != strlen(slash + 1) || strlen(slash + 1) > 9)
        return -1;
    size_t dir_len = slash == link ? 1 : (size_t)(slash - link);
    char *dir = malloc(dir_len + 1);
    if (!dir)
        return -1;
    memcpy(dir, link, dir_len);
    dir[dir_len] = '\0';
    char *real = realpath(dir, NULL);
    free(dir);
    if (!real)
        return -1;
    char proc[64];
    int n = snprintf(proc, sizeof proc, "/proc/%ld/", (long)getpid());
    size_t len = strlen(real);
    int ours = strncmp(real, proc, (size_t)n) == 0 && len >= 3 && strcmp(real + len - 3, "/fd") == 0 &&
               (len == (size_t)n + 2 || strncmp(real + n, "task/", 5) == 0);
    free(real);
    return ours ? atoi(slash + 1) : -1;
}

/* Follows path's symbolic links one at a time, as the kernel would (40 at most): a malloc'd
 * copy of the first name on the way that is not a link, which may not exist (a dangling
 * link: the file is created where the link points, and the link stays a link). *fd is set
 * when a link on the way is one of this process's descriptors (own_descriptor), which ends
 * the walk. NULL with errno on failure (ELOOP, ENOMEM). */
static char *follow_links(const char *path, int *fd)
{
    *fd = -1;
    char *cur = malloc(strlen(path) + 1);
    if (!cur)
        return NULL;
    strcpy(cur, path);
    for (int hops = 0; hops < 40; hops++) {
        struct stat lst;
        if (lstat(cur, &lst) != 0 || !S_ISLNK(lst.st_mode) || (*fd = own_descriptor(cur)) >= 0)
            return cur;
        char to[4096];
        ssize_t n = readlink(cur, to, sizeof to - 1);
        if (n < 0)
            return cur; /* let the open say what is wrong */
        to[n] = '\0';
        /* a relative link is relative to the folder holding it */
        const char *slash = to[0] == '/' ? NULL : strrchr(cur, '/');
        size_t keep = slash ? (size_t)(slash - cur) + 1 : 0;
        char *next = malloc(keep + (size_t)n + 1);
        if (!next) {
            free(cur);
            return NULL;
        }
        memcpy(next, cur, keep);
        memcpy(next + keep, to, (size_t)n + 1);
        free(cur);
        cur = next;
    }
    free(cur);
    errno = ELOOP;
    return NULL;
}

int pbl__file_out_descriptor(const char *path)
{
    int fd;
    free(follow_links(path, &fd));
    return fd;
}

/* Frees o's target and temporary names (either may be NULL), allocated for a target of
 * target_len bytes. */
static void drop_names(pbl__file_out *o, size_t target_len)
{
    pbl__mem_free(&o->mem, o->target, target_len + 1);
    pbl__mem_free(&o->mem, o->tmp, target_len + TMP_EXTRA);
    o->target = o->tmp = NULL;
}

/* Removes o's named temporary (if it has one) and takes it off the signal list. */
static void drop_temp(pbl__file_out *o)
{
    if (o->named)
        unlink(o->tmp);
    pending_drop(o->slot);
    o->slot = -1;
    o->named = 0;
}

pbl_status pbl__file_out_open(pbl__file_out *o, const char *path, const pbl_allocator *a, char *err,
                              size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->slot = -1;
    pbl__mem_init(&o->mem, a);
    o->path = path;
    if (!path || !*path)
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "no file name");
    /* a link: replace the file it names (or create it, when the link dangles) and keep the
     * link; a link to one of our own descriptors is written through that descriptor */
    int own_fd;
    char *real = follow_links(path, &own_fd);
    if (!real)
        return pbl__errf(err, errlen, errno == ENOMEM ? PBL_ERR_NOMEM : PBL_ERR_IO, "%s: cannot open: %s", path,
                         strerror(errno ? errno : EIO));
    if (own_fd >= 0) {
        free(real);
        /* /dev/stdout with `>> log`: the shell's descriptor, its offset and O_APPEND kept */
        int d = dup(own_fd);
        if (d < 0 || !(o->f = fdopen(d, "wb"))) {
            int e = errno;
            if (d >= 0)
                close(d);
            return pbl__errf(err, errlen, PBL_ERR_IO, "%s: cannot open: %s", path, strerror(e ? e : EIO));
        }
        return PBL_OK;
    }
    struct stat st;
    int exists = stat(real, &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
        free(real);
        return pbl__errf(err, errlen, PBL_ERR_IO, "%s: is a directory", path);
    }
    if (exists && !S_ISREG(st.st_mode)) {
        /* a FIFO or a device (pebble export m --json /dev/null): renaming over it would
         * replace the device node, so write into it */
        errno = 0;
        o->f = fopen(real, "wb");
        free(real);
        if (!o->f)
            return pbl__errf(err, errlen, PBL_ERR_IO, "%s: cannot open: %s", path, strerror(errno ? errno : EIO));
        return PBL_OK;
    }
    const char *target = real;
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
    int fd = create_anonymous(o->target, o->tmp);
    if (fd < 0) {
        sigset_t old_mask;
        if (naming_begin(&old_mask) == 0 && (fd = create_temp(o->tmp, o->target)) >= 0) {
            o->named = 1;
            o->slot = pending_add(o->tmp);
        }
        naming_end(&old_mask);
    }
    /* the replacement keeps the permission bits of the file it replaces: a private 0600
     * file must not come back as 0644 */
    if (fd >= 0 && ((exists && fchmod(fd, st.st_mode & 07777) != 0) || !(o->f = fdopen(fd, "wb")))) {
        int e = errno;
        close(fd);
        drop_temp(o);
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
    /* an unnamed temporary gets its name while its descriptor is still open, just before
     * the rename: that is the only moment a kill -9 can leave it behind */
    if (keep && !bad && o->tmp && !o->named) {
        sigset_t old_mask;
        if (naming_begin(&old_mask) != 0 || link_anonymous(fileno(o->f), o->tmp, o->target) != 0) {
            bad = 1;
            e = errno;
        } else {
            o->named = 1;
            o->slot = pending_add(o->tmp);
        }
        naming_end(&old_mask);
    }
    if (fclose(o->f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    o->f = NULL;
    if (keep && bad)
        s = pbl__errf(err, errlen, PBL_ERR_IO, "%s: writing: %s", o->path, strerror(e ? e : EIO));
    if (keep && !bad && o->tmp) {
        if (rename(o->tmp, o->target) != 0)
            s = pbl__errf(err, errlen, PBL_ERR_IO, "%s: cannot replace it: %s", o->path, strerror(errno ? errno : EIO));
        else {
            o->named = 0; /* the name is the target's now: nothing to remove */
            sync_folder(o->target, o->tmp);
        }
    }
    if (o->tmp) {
        drop_temp(o);
        drop_names(o, strlen(o->target));
    }
    return s;
}

pbl_status pbl__file_out_check(const char *path, const pbl_allocator *a, char *err, size_t errlen)
{
    struct stat st;
    /* a FIFO or a device is written in place: opening one to try would block (a FIFO with no
     * reader) or touch the device, so its existence is the check */
    if (path && *path && stat(path, &st) == 0 && !S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
        return PBL_OK;
    pbl__file_out o;
    pbl_status s = pbl__file_out_open(&o, path, a, err, errlen);
    if (s == PBL_OK)
        s = pbl__file_out_close(&o, 0, err, errlen);
    return s;
}

PBL__API pbl_status pbl_file_check(const char *path, char *err, size_t errlen)
{
    return pbl__file_out_check(path, NULL, err, errlen);
}

PBL__API pbl_status pbl_file_write(const char *path, const void *data, size_t n, char *err, size_t errlen)
{
    pbl__file_out o;
    pbl_status s = pbl__file_out_open(&o, path, NULL, err, errlen);
    if (s != PBL_OK)
        return s;
    int ok = n == 0 || fwrite(data, 1, n, o.f) == n;
    s = pbl__file_out_close(&o, ok, err, errlen);
    if (s == PBL_OK && !ok)
        s = pbl__errf(err, errlen, PBL_ERR_IO, "%s: writing failed", path);
    return s;
}
