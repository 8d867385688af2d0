/* Reading an input file, bounded. Every reader of a user's file (JSON graphs, records CSVs,
 * ONNX models and TensorProto tensors, checkpoints, the command line's .npy tensors) opens it
 * here, so each refuses the same things the same way:
 *
 * - anything but a regular file: a FIFO, a terminal, /dev/zero, a socket or a directory is
 *   refused by name ("PATH: is a FIFO, not a regular file"). The open itself uses O_NONBLOCK,
 *   so a FIFO with no writer is refused at once instead of blocking in open(). (Standard
 *   input, `-` on the command line, is read by the caller with its own limit.)
 * - a file larger than the reader's limit (PBL__FILE_IN_MAX_*), before anything is read; a file
 *   that grows past the limit while it is read is refused too, so memory stays bounded.
 *
 *     FILE *f;
 *     if ((s = pbl__file_in_open(path, "a records CSV", PBL__FILE_IN_MAX_TEXT, &f, NULL, err, errlen)) != PBL_OK)
 *         return s;
 *
 * Messages start with the path as given. */
#ifndef PBL_FILE_IN_H
#define PBL_FILE_IN_H

#include <stdint.h>
#include <stdio.h>

#include "graph/base/mem.h"
#include "pebble/status.h"

/* The limits (README "Limits"): text inputs (JSON graphs, records CSVs) 1 GiB; protobuf inputs
 * (ONNX models, TensorProto .pb tensors, .npy tensors) 2 GiB, protobuf's own limit for one
 * message; checkpoints have their own (4 GiB, executor/checkpoint.c). */
#define PBL__FILE_IN_MAX_TEXT   ((uint64_t)1 << 30)
#define PBL__FILE_IN_MAX_BINARY ((uint64_t)2 << 30)

/* Opens path for reading as *f ("rb"), after checking it is a regular file of at most max
 * bytes; *size (may be NULL) is its length then. `what` names the kind of file for the
 * limit's message ("a JSON graph"). PBL_OK; PBL_ERR_IO (cannot open, not a regular file);
 * PBL_ERR_FORMAT (over the limit); on failure *f is NULL. */
pbl_status pbl__file_in_open(const char *path, const char *what, uint64_t max, FILE **f, uint64_t *size,
                             char *err, size_t errlen);

/* Reads all of path into *data through m: a block of *len + 1 bytes, the last one '\0', to free
 * with pbl__mem_free(m, *data, *len + 1). The same checks as pbl__file_in_open, and reading
 * stops with PBL_ERR_FORMAT when the file grows past max. PBL_ERR_NOMEM when m refuses. */
pbl_status pbl__file_in_read(const char *path, const char *what, uint64_t max, pbl__mem *m, unsigned char **data,
                             size_t *len, char *err, size_t errlen);

#endif
