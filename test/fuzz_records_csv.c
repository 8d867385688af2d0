/* libFuzzer target for the records CSV reader (graph/planner/csv.c), built with clang only.
 *
 * For any bytes: pbl_records_read_csv returns PBL_OK or PBL_ERR_FORMAT with a message that
 * starts "PATH:LINE: " (never a crash, a leak or undefined behaviour: built with ASan and
 * UBSan). What it accepts, the planner accepts too, and writing those records with naive
 * offsets and reading them back gives the same ids, records and offsets.
 *
 *     fuzz_records_csv -max_total_time=60 CORPUS_DIR
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pebble/plan.h"
#include "pebble/plan_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *what, const char *err)
{
    fprintf(stderr, "fuzz_records_csv: %s: %s\n", what, err);
    abort();
}

static char in_path[512], out_path[512];

static void remove_files(void)
{
    remove(in_path);
    remove(out_path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!in_path[0]) {
        atexit(remove_files);
        const char *dir = getenv("TMPDIR");
        snprintf(in_path, sizeof in_path, "%s/fuzz_records_csv.%ld.in", dir && *dir ? dir : "/tmp", (long)getpid());
        snprintf(out_path, sizeof out_path, "%s/fuzz_records_csv.%ld.out", dir && *dir ? dir : "/tmp", (long)getpid());
    }
    remove(in_path); /* a new file: ext4 flushes a truncated-and-rewritten one on close */
    FILE *f = fopen(in_path, "wb");
    if (!f)
        die("cannot create", in_path);
    if (size && fwrite(data, 1, size, f) != size)
        die("cannot write", in_path);
    fclose(f);

    char err[1024];
    pbl_records_file r;
    pbl_status s = pbl_records_read_csv(in_path, NULL, &r, err, sizeof err);
    size_t plen = strlen(in_path);
    if (s != PBL_OK) {
        if (s != PBL_ERR_FORMAT || strncmp(err, in_path, plen) != 0 || err[plen] != ':' || err[plen + 1] < '1' ||
            err[plen + 1] > '9')
            die("a refusal without PBL_ERR_FORMAT and PATH:LINE", err);
        return 0;
    }
    pbl_assignment a;
    if (pbl_plan_records(r.records, r.n, "naive", NULL, &a, err, sizeof err) != PBL_OK)
        die("the planner refused what the reader accepted", err);
    s = pbl_assignment_write_csv(out_path, &r, &a, err, sizeof err);
    if (s == PBL_ERR_INVALID_ARG && strstr(err, "its line would be longer than")) {
        /* a long id with short numbers read, but with the offset column its line is too long */
        pbl_assignment_free(&a);
        pbl_records_file_free(&r);
        return 0;
    }
    if (s != PBL_OK)
        die("the writer refused what the reader accepted", err);
    pbl_records_file back;
    if (pbl_records_read_csv(out_path, NULL, &back, err, sizeof err) != PBL_OK)
        die("the reader refused what the writer wrote", err);
    if (back.n != r.n || !back.offsets)
        die("round trip", "record count or offset column differs");
    for (int32_t i = 0; i < r.n; i++)
        if (strcmp(back.ids[i], r.ids[i]) != 0 || back.records[i].size != r.records[i].size ||
            back.records[i].first != r.records[i].first || back.records[i].last != r.records[i].last ||
            back.offsets[i] != a.offset[i])
            die("round trip", "a record differs");
    pbl_records_file_free(&back);
    pbl_assignment_free(&a);
    pbl_records_file_free(&r);
    return 0;
}
