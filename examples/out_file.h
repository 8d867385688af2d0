/*
 * out_file — writes a whole file or nothing, for train_mlp's --plot: the bytes go to a
 * temporary file beside the target (TARGET.tmp.XXXXXX, mode 0600 until complete), are synced,
 * then renamed over the target, so a failed or interrupted write leaves the old file as it was.
 * A symbolic link is followed to its target, an existing file keeps its mode, and a FIFO or
 * device is written in place. (The library's own writer does the same for pbl_exec_save and
 * pbl_graph_save_json, but is not part of the public API: examples use only that.)
 */
#ifndef TRAIN_MLP_OUT_FILE_H
#define TRAIN_MLP_OUT_FILE_H

#include <stddef.h>

/* 0 when `path` can be written (its folder exists and is writable, it is no directory), else
 * -1 with "PATH: reason" in err. Checked before training, so a bad name fails early. */
int out_file_check(const char *path, char *err, size_t errlen);

/* Writes `n` bytes to `path`: 0, or -1 with "PATH: reason" in err and the old file untouched. */
int out_file_write(const char *path, const void *data, size_t n, char *err, size_t errlen);

/* Removes the temporary of a write in progress (for a signal handler: async-signal-safe);
 * returns how many it removed (0 or 1). */
int out_file_cleanup(void);

#endif
