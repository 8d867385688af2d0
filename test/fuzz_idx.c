/* libFuzzer target for the IDX reader (examples/idx.c, what train_mlp reads Fashion-MNIST
 * with): any bytes, gzip-compressed or plain, must give an array whose size is the product of
 * its dims, or -1 with a message: never a crash, a leak or an allocation the file cannot back.
 * Each input is read as images (rank 3) and as labels (rank 1). */
#define _XOPEN_SOURCE 700 /* mkdtemp */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "examples/idx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char dir[64], path[96];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/fuzz_idx.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        if (!mkdtemp(dir))
            abort();
        snprintf(path, sizeof path, "%s/data.gz", dir);
    }
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
        abort();
    for (int rank = 1; rank <= 3; rank += 2) {
        idx_array a;
        char err[512] = "";
        if (idx_read(&a, path, rank, err, sizeof err) == 0) {
            size_t n = 1;
            for (int d = 0; d < a.rank; d++)
                n *= a.dims[d];
            if (a.rank != rank || a.size != n || !a.data) {
                fprintf(stderr, "rank %d: an array that does not hold its dims\n", rank);
                abort();
            }
        } else if (!err[0] || a.data) {
            fprintf(stderr, "rank %d: a failure without a message, or with data left\n", rank);
            abort();
        }
        idx_array_free(&a);
    }
    unlink(path);
    return 0;
}
