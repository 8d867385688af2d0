/* Writing a file whole or not at all. A regular file (or a new one) is written to a temporary
 * file in the same folder, flushed to disk (fsync) and renamed over it, and then the folder is
 * synced too, so a reader never sees half a file and a failure leaves the old content.
 *
 * The temporary: where the filesystem has O_TMPFILE, an unnamed file that gets a name only
 * once it is complete and synced, just before the rename ("<target>.tmp.<pid>.<12 random
 * letters>", the target's own name cut at 200 bytes so that it fits in a file name, linked
 * through /proc/self/fd); elsewhere (or with PEBBLE_NO_O_TMPFILE=1 in the
 * environment, for tests) a file of that name created with O_EXCL|O_NOFOLLOW. Either way a
 * name planted in a shared folder (a link toward someone's file) is never opened. Every
 * error path removes the temporary. Opening also removes the temporaries of writers that were
 * killed (kill -9) while one had a name: regular files of that form beside the target whose
 * pid no longer runs on this machine.
 *
 * Signals: the library installs no handler. While a temporary has a name it is listed, and
 * pbl_cleanup_temporaries() (pebble/status.h: async-signal-safe) unlinks every listed one; the
 * programs (tools/cli/main.c, examples/train_mlp.c) call it from their SIGINT/SIGTERM/SIGHUP/
 * SIGPIPE handler (tools/args: args_on_signals) before dying of the signal.
 *
 * A symbolic link is followed: its target is replaced (or created, when the link dangles)
 * and the link stays; a loop of links is refused. A link to one of the process's own open
 * descriptors (/dev/stdout, /dev/fd/N, /proc/self/fd/N) is written through that descriptor,
 * so `--out /dev/stdout >> log` appends to log instead of replacing it. The replacement
 * keeps the replaced file's permission bits (a new file gets 0666 less the umask). Anything
 * else that exists (a FIFO, a terminal, a device such as /dev/full) cannot be replaced and is
 * written in place; a directory is refused.
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
    char       *tmp;    /* room for the temporary's name; NULL when writing in place */
    int         named;  /* whether tmp names a file now (so an error must remove it) */
    int         slot;   /* its entry in the list pbl_cleanup_temporaries empties, or -1 */
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

/* The descriptor a write to path goes through: N when path leads (through links) to one of
 * this process's own descriptors (/dev/stdout: 1, /dev/fd/N), else -1. */
int pbl__file_out_descriptor(const char *path);

/* Whether path could be written: what pbl__file_out_open does, without writing or leaving
 * anything (a temporary is created and discarded; a FIFO or device that exists is taken as
 * writable without opening it). PBL_OK, or open's status and message. For a long job to fail
 * before its work rather than after (train_mlp --save). */
pbl_status pbl__file_out_check(const char *path, const pbl_allocator *a, char *err, size_t errlen);

#endif
