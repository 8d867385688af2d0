/* Writing a file whole or not at all. A regular file (or a new one) is written under a
 * temporary name beside it, flushed to disk and renamed over it, so a reader never sees half
 * a file and a failure leaves the old content. The temporary, "<target>.tmp.<pid>.<12
 * random letters>", is created with O_EXCL|O_NOFOLLOW: a name planted in a shared folder (a
 * link toward someone's file) is never opened. Opening also removes the temporaries of
 * writers that were killed (kill -9) before they could: regular files of that form beside
 * the target whose pid no longer runs on this machine. A symbolic link is followed: its
 * target is replaced and the link stays. The replacement keeps the replaced file's
 * permission bits (a new file gets 0666 less the umask). Anything else that exists (a FIFO,
 * a terminal, /dev/stdout) cannot be replaced and is written in place; a directory is
 * refused.
 *
 *     pbl__file_out o;
 *     if ((s = pbl__file_out_open(&o, path, allocator, err, errlen)) != PBL_OK)
 *         return s;
 *     int ok = fputs(text, o.f) >= 0;
 *     return pbl__file_out_close(&o, ok, err, errlen);   // renames, or removes the temporary
 *
 * Messages start with the path as given. */
#ifndef PBL_FILE_OUT_H
#define PBL_FILE_OUT_H

#include <stdio.h>

#include "graph/base/mem.h"
#include "pebble/status.h"

typedef struct pbl__file_out {
    FILE       *f;      /* write here */
    const char *path;   /* as given (borrowed), for messages */
    char       *target; /* the name the temporary replaces: path, or a link's target */
    char       *tmp;    /* the temporary name; NULL when writing in place */
    pbl__mem    mem;
} pbl__file_out;

/* Opens o->f. PBL_OK, PBL_ERR_IO (err: "PATH: cannot create a temporary file beside it:
 * reason", "PATH: is a directory"), PBL_ERR_NOMEM; on failure nothing is left to close.
 * a may be NULL. */
pbl_status pbl__file_out_open(pbl__file_out *o, const char *path, const pbl_allocator *a, char *err,
                              size_t errlen);

/* Finishes o: with keep, flushes, syncs and renames the temporary over the target (PBL_ERR_IO
 * naming the path when any of it fails, and then the target keeps its old content); without
 * keep, discards what was written (returns PBL_OK). Always closes and frees. */
pbl_status pbl__file_out_close(pbl__file_out *o, int keep, char *err, size_t errlen);

#endif
