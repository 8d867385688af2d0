/*
 * pebble/plan_io.h — usage records and assignments as CSV files (MiniMalloc's format).
 *
 * A records file has a header line naming its columns, then one line per record:
 *
 *     id,lower,upper,size
 *     b1,0,3,4
 *     b2,3,9,4
 *
 * `id` is a string naming the record, `lower` and `upper` bound its lifetime as the half-open
 * interval [lower, upper) (a pbl_usage_record's first and last), `size` is its bytes. An
 * assignment file adds an `offset` column: the record's offset in the arena.
 *
 *     // given const char *path;               // "input.12.csv", say
 *     pbl_records_file f;
 *     char err[512];
 *     if (pbl_records_read_csv(path, NULL, &f, err, sizeof err) != PBL_OK) {
 *         fprintf(stderr, "%s\n", err);           // "input.12.csv:4: size must be positive (got 0)"
 *         return 1;
 *     }
 *     pbl_assignment a;
 *     if (pbl_plan_records(f.records, f.n, "best", NULL, &a, err, sizeof err) == PBL_OK) {
 *         pbl_assignment_write_csv("plan.csv", &f, &a, err, sizeof err);
 *         pbl_assignment_free(&a);
 *     }
 *     pbl_records_file_free(&f);
 *
 * What the reader accepts, exactly:
 *
 * - The first line is the header: comma-separated column names, each once, in any order:
 *   `id`, `lower`, `upper`, `size` (all required) and `offset` (optional). MiniMalloc's other
 *   optional columns — `alignment`, `gaps`, `hint` — are rejected, not ignored: a plan that
 *   ignored them would silently break the constraints they state. Any other name is rejected.
 *   A UTF-8 byte order mark before the header is skipped.
 * - Every other non-blank line has exactly one field per column. Lines end in LF or CRLF;
 *   the last line may lack its line end. Blank lines (empty, or spaces and tabs only) are
 *   skipped. Spaces and tabs around a field are ignored. There is no quoting: a field runs
 *   to the next comma.
 * - An id is 1 or more bytes, unique in the file, without a double quote or a control
 *   character.
 * - Numbers are decimal integers (an optional sign, then digits). lower, upper, size and offset
 *   are at most PBL_RECORDS_CSV_VALUE_MAX, and the sizes of all records sum to at most
 *   PBL_RECORDS_CSV_VALUE_MAX: with these bounds no sum of sizes, offset + size or time·2 + 1
 *   computed by the planner can overflow int64_t. size > 0, lower >= 0, upper > lower,
 *   offset >= 0.
 * - A line holds at most PBL_RECORDS_CSV_LINE_MAX bytes, not counting its line end, and no
 *   NUL byte.
 * - A file with a header and no records is a valid, empty set of records. A file of 0 bytes
 *   is an error ("empty file"), as is one whose first line is not a header.
 *
 * Errors: err receives "PATH:LINE: message" (LINE counts from 1, the header) for anything
 * wrong with the contents, with PBL_ERR_FORMAT; "PATH: message" with PBL_ERR_IO when the
 * file cannot be opened or read; PBL_ERR_NOMEM when an allocation fails. No input makes the
 * reader crash, hang or leak.
 *
 * Everything here is thread-safe on distinct data.
 */
#ifndef PEBBLE_PLAN_IO_H
#define PEBBLE_PLAN_IO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pebble/alloc.h"
#include "pebble/plan.h"
#include "pebble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The longest line the reader takes, in bytes, not counting its LF or CRLF. */
#define PBL_RECORDS_CSV_LINE_MAX 4096
/* The largest lower, upper, size or offset, and the largest sum of all sizes: 2^62 - 1. */
#define PBL_RECORDS_CSV_VALUE_MAX ((int64_t)4611686018427387903)

/* Records as read from a CSV file, in file order. A caller may also fill records, ids (or
 * leave ids NULL) and n itself to write an assignment with pbl_assignment_write_csv; only
 * pbl_records_read_csv's and pbl_records_parse_csv's results may be passed to
 * pbl_records_file_free. */
typedef struct pbl_records_file {
    pbl_usage_record    *records;   /* n: size, first = lower, last = upper */
    char               **ids;       /* n NUL-terminated ids; NULL means "0", "1", ... (writer) */
    int64_t             *offsets;   /* n, or NULL when the file has no offset column */
    int32_t             *lines;     /* n: the line each record is on (the header is line 1) */
    int32_t              n;
    size_t               id_bytes;  /* bytes of the one block the ids point into (for free) */
    const pbl_allocator *allocator; /* what the arrays were allocated with */
} pbl_records_file;

/* Reads the records CSV at path into *out (freed with pbl_records_file_free), allocating
 * with al (NULL: malloc/free). Returns PBL_OK, PBL_ERR_FORMAT (err: "PATH:LINE: message"),
 * PBL_ERR_IO (err: "PATH: message"), PBL_ERR_NOMEM or PBL_ERR_INVALID_ARG (NULL path or out).
 * On failure *out is zeroed. err may be NULL. path must be a regular file (a FIFO or a
 * device: PBL_ERR_IO at once, the open never blocks) of at most 1 GiB (PBL_ERR_FORMAT). */
pbl_status pbl_records_read_csv(const char *path, const pbl_allocator *al, pbl_records_file *out,
                                char *err, size_t errlen);

/* The same from len bytes of CSV text (standard input, a buffer; no NUL needed): messages
 * name it `name` ("<stdin>:4: size must be positive (got 0)"; NULL: "<text>"). Returns what
 * pbl_records_read_csv does, without PBL_ERR_IO. */
pbl_status pbl_records_parse_csv(const char *text, size_t len, const char *name, const pbl_allocator *al,
                                 pbl_records_file *out, char *err, size_t errlen);

/* Frees what pbl_records_read_csv or pbl_records_parse_csv allocated and zeroes *f.
 * Accepts NULL and a zeroed or freed struct. */
void       pbl_records_file_free(pbl_records_file *f);

/* Writes in's records with a's offsets to path as `id,lower,upper,size,offset` (one line
 * per record, in order, LF line ends), in a form pbl_records_read_csv reads back exactly.
 * The file is written beside path as "PATH.tmp.<pid>.<random letters>" (created exclusively,
 * so a link planted there is never followed), flushed to disk and renamed over path,
 * so path holds either its old contents or the complete new file, never a partial one; on
 * failure the temporary file is removed. Returns PBL_OK, PBL_ERR_INVALID_ARG (a and in
 * disagree on the number of records; what the reader would refuse — a bad record, an empty
 * or duplicate id, one with a comma, quote or control character, a line longer than
 * PBL_RECORDS_CSV_LINE_MAX),
 * PBL_ERR_IO (err: "PATH: message"), PBL_ERR_NOMEM. Offsets come from a, not in->offsets. */
pbl_status pbl_assignment_write_csv(const char *path, const pbl_records_file *in, const pbl_assignment *a,
                                    char *err, size_t errlen);

/* Writes the same lines to the open stream f (standard output, a pipe) as they come, and
 * flushes it: nothing is renamed, so a failure part-way leaves part of the text written.
 * Returns what pbl_assignment_write_csv does (PBL_ERR_IO: "writing the assignment: reason"). */
pbl_status pbl_assignment_print_csv(const pbl_records_file *in, const pbl_assignment *a, FILE *f,
                                    char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
