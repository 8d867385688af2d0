/*
 * idx.h — reading IDX files (the MNIST / Fashion-MNIST container), gzip-compressed or not.
 *
 * An IDX file is a 4-byte magic (0, 0, element type, rank), `rank` big-endian u32 dims, then
 * the elements. Only unsigned-byte elements (type 0x08) are read here: that is what the
 * MNIST family uses.
 *
 *     idx_array a;
 *     char err[256];
 *     if (idx_read(&a, "train-images-idx3-ubyte.gz", 3, err, sizeof err) != 0)
 *         fprintf(stderr, "%s\n", err);
 *     ... a.dims[0] images of a.dims[1] x a.dims[2] bytes in a.data ...
 *     idx_array_free(&a);
 */
#ifndef PEBBLE_EXAMPLES_IDX_H
#define PEBBLE_EXAMPLES_IDX_H

#include <stddef.h>
#include <stdint.h>

#define IDX_MAX_RANK 4
/* Refuse anything larger: a corrupt header must not make us allocate gigabytes. */
#define IDX_MAX_BYTES ((size_t)1 << 30)

typedef struct idx_array {
    int      rank;
    uint32_t dims[IDX_MAX_RANK];
    uint8_t *data;  /* dims[0] * ... * dims[rank-1] bytes, malloc'd */
    size_t   size;  /* that product */
} idx_array;

/* Reads an unsigned-byte IDX file of rank `rank` (1 for labels, 3 for images) from `path`
 * (gzip or plain). Returns 0, or -1 with a one-line message in err naming the file and what
 * is wrong: cannot open, not a regular file (a FIFO, a device: refused without waiting), a
 * file larger than IDX_MAX_BYTES of data, bad magic, wrong rank, a zero or oversized
 * dimension, truncated data (a gzip stream without its CRC-32/length trailer included),
 * trailing data. On failure *out holds nothing to free. */
int  idx_read(idx_array *out, const char *path, int rank, char *err, size_t errlen);
void idx_array_free(idx_array *a); /* accepts an array that failed to read */

#endif
