/* libFuzzer target for the tensor readers `pebble run` uses: ONNX TensorProto (.pb, through
 * pbl_onnx_tensor_parse and, from a file, pbl_onnx_tensor_read) and NumPy .npy (the command
 * line's reader, tools/cli/tensor_file.c). Any bytes must give a tensor whose byte count is
 * its shape's element count times 4, or a clean error (a message, nothing to free): never a
 * crash, a leak or an allocation the data cannot back (a header promising 2^40 elements). */
#define _XOPEN_SOURCE 700 /* mkdtemp */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pebble/onnx.h"
#include "tools/cli/cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const pbl_onnx_tensor *t, const char *what)
{
    size_t numel = (size_t)pbl_shape_numel(&t->shape);
    if (t->bytes != numel * 4 || (numel && !t->data) || !t->name || (t->dtype != PBL_F32 && t->dtype != PBL_I32)) {
        fprintf(stderr, "%s: a tensor that does not hold its shape (%zu bytes for %zu elements)\n", what, t->bytes,
                numel);
        abort();
    }
}

/* the bytes as a file named by their content: .npy with NumPy's magic, else .pb */
static const char *as_file(const uint8_t *data, size_t size)
{
    static char dir[64], path[96];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/fuzz_tensor.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        if (!mkdtemp(dir))
            abort();
    }
    int npy = size >= 6 && memcmp(data, "\x93NUMPY", 6) == 0;
    snprintf(path, sizeof path, "%s/t.%s", dir, npy ? "npy" : "pb");
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
        abort();
    return path;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pbl_onnx_tensor t;
    char err[1024] = "";
    pbl_status s = pbl_onnx_tensor_parse(data, size, "<fuzz>", &t, err, sizeof err);
    if (s == PBL_OK)
        check(&t, "pbl_onnx_tensor_parse");
    else if (s >= 0 || !err[0] || t.data || t.name) {
        fprintf(stderr, "pbl_onnx_tensor_parse: an error without a clean result: %d '%s'\n", (int)s, err);
        abort();
    }
    pbl_onnx_tensor_free(&t);

    const char *path = as_file(data, size);
    if (cli_tensor_read(path, &t) == CLI_OK)
        check(&t, path);
    else if (t.data || t.name) {
        fprintf(stderr, "%s: a failed read left data behind\n", path);
        abort();
    }
    pbl_onnx_tensor_free(&t);
    unlink(path);
    return 0;
}
