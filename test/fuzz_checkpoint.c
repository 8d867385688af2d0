/* libFuzzer target for the checkpoint loader (pbl_exec_load, executor/checkpoint.c): any file
 * must load into the executor's matching variables or be refused with a negative status and a
 * message, never a crash, a leak or an allocation the file cannot back. The executor is the
 * one test/data/fuzz_checkpoint_seeds/ was saved from (fuzz_checkpoint --write-seed FILE):
 * x [2, 3] input, w [2, 3] and b [3] parameters, s [4] state, and the runtime scalar lr
 * (w_b_s.ckpt is a version-1 file of the library before scalars; w_b_s_lr.ckpt a version-2
 * file with lr and the run counter). */
#define _XOPEN_SOURCE 700 /* mkdtemp */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "pebble/pebble.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static pbl_graph *g;
static pbl_exec *e;

static void make_exec(void)
{
    pbl_value s, lr;
    if (pbl_graph_create(&g, NULL) != PBL_OK)
        abort();
    pbl_value x = pbl_input(g, "x", PBL_SHAPE(2, 3)), w = pbl_param(g, "w", PBL_SHAPE(2, 3)),
              b = pbl_param(g, "b", PBL_SHAPE(3));
    if (pbl_graph_set_output(g, "y", pbl_add(g, pbl_add(g, x, w), b)) != PBL_OK ||
        pbl_graph_add_variable(g, "s", PBL_VALUE_STATE, PBL_F32, PBL_SHAPE(4), &s) != PBL_OK ||
        pbl_graph_set_output(g, "z", pbl_relu(g, s)) != PBL_OK || pbl_graph_add_scalar(g, "lr", 0.5, &lr) != PBL_OK ||
        pbl_graph_set_output(g, "r", pbl_relu(g, lr)) != PBL_OK || pbl_graph_build_status(g) != PBL_OK)
        abort();
    char err[256];
    if (pbl_exec_create(&e, g, NULL, err, sizeof err) != PBL_OK) {
        fprintf(stderr, "pbl_exec_create: %s\n", err);
        abort();
    }
}

/* `fuzz_checkpoint --write-seed FILE` saves the executor's checkpoint (w, b, s counting up)
 * as a seed and exits. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    make_exec();
    for (int i = 1; i + 1 < *argc; i++)
        if (strcmp((*argv)[i], "--write-seed") == 0) {
            float v[6] = { 1, 2, 3, 4, 5, 6 };
            pbl_exec_write(e, pbl_graph_find_value(g, "w"), v, 6 * sizeof *v);
            pbl_exec_write(e, pbl_graph_find_value(g, "b"), v, 3 * sizeof *v);
            pbl_exec_write(e, pbl_graph_find_value(g, "s"), v, 4 * sizeof *v);
            pbl_exec_set_scalar(e, "lr", 0.125);
            if (pbl_exec_save(e, (*argv)[i + 1]) != PBL_OK) {
                fprintf(stderr, "%s\n", pbl_exec_errmsg(e));
                exit(1);
            }
            exit(0);
        }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char dir[64], path[96];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/fuzz_checkpoint.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        if (!mkdtemp(dir))
            abort();
        snprintf(path, sizeof path, "%s/c.ckpt", dir);
    }
    /* About half the inputs (those whose last byte is odd, a byte the fix replaces) get their
     * last 4 bytes replaced by the CRC-32 of the rest, little-endian as the file stores it, so
     * the fuzzer also reaches the record walk behind the checksum instead of only ever being
     * told "bad CRC". */
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size)
        abort();
    if (size > 4 && (data[size - 1] & 1)) {
        uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), data, (uInt)(size - 4));
        unsigned char le[4] = { (unsigned char)crc, (unsigned char)(crc >> 8), (unsigned char)(crc >> 16),
                                (unsigned char)(crc >> 24) };
        if (fseek(f, (long)(size - 4), SEEK_SET) != 0 || fwrite(le, 1, 4, f) != 4)
            abort();
    }
    if (fclose(f) != 0)
        abort();
    pbl_status s = pbl_exec_load(e, path);
    if (s != PBL_OK && (s >= 0 || !pbl_exec_errmsg(e)[0])) {
        fprintf(stderr, "an error without a message: %d\n", (int)s);
        abort();
    }
    unlink(path);
    return 0;
}
