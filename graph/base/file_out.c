/* Whole-or-nothing file output (graph/base/file_out.h): one copy of the temporary-name, fsync
 * and rename dance that JSON graphs, assignment CSVs, tensors, checkpoints and the command
 * line's pictures share. */
#define _XOPEN_SOURCE 700 /* fchmod, fsync, lstat, realpath */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph/base/errmsg.h"
#include "graph/base/file_out.h"

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
    o->tmp = pbl__mem_alloc(&o->mem, target_len + 32);
    if (o->target)
        memcpy(o->target, target, target_len + 1);
    free(real);
    if (!o->target || !o->tmp) {
        pbl__mem_free(&o->mem, o->target, target_len + 1);
        pbl__mem_free(&o->mem, o->tmp, target_len + 32);
        o->target = o->tmp = NULL;
        return pbl__errf(err, errlen, PBL_ERR_NOMEM, "%s: out of memory", path);
    }
    snprintf(o->tmp, target_len + 32, "%s.tmp.%ld", o->target, (long)getpid());
    errno = 0;
    o->f = fopen(o->tmp, "wb");
    /* the replacement keeps the permission bits of the file it replaces: a private 0600
     * file must not come back as 0644 */
    if (o->f && exists && fchmod(fileno(o->f), st.st_mode & 07777) != 0) {
        int e = errno;
        fclose(o->f);
        o->f = NULL;
        remove(o->tmp);
        errno = e;
    }
    if (!o->f) {
        pbl_status s = pbl__errf(err, errlen, PBL_ERR_IO, "%s: cannot create '%s': %s", path, o->tmp,
                                 strerror(errno ? errno : EIO));
        pbl__mem_free(&o->mem, o->target, target_len + 1);
        pbl__mem_free(&o->mem, o->tmp, target_len + 32);
        o->target = o->tmp = NULL;
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
        size_t target_len = strlen(o->target);
        pbl__mem_free(&o->mem, o->tmp, target_len + 32);
        pbl__mem_free(&o->mem, o->target, target_len + 1);
        o->tmp = o->target = NULL;
    }
    return s;
}
