/* pbl_records_read_csv / pbl_assignment_write_csv: good files read exactly; every kind of
 * malformed file is refused with PBL_ERR_FORMAT and "PATH:LINE: message"; assignments
 * round-trip; a failed write leaves the old file as it was and no temporary file behind;
 * failed allocations are clean; random damage to a file never crashes the reader. The text
 * forms (pbl_records_parse_csv, pbl_assignment_print_csv: standard input and output) give
 * what the file forms give. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, setrlimit */

#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "pebble/pebble.h"
#include "pebble/plan_io.h"

static char tmpdir[256];
static char err[1024];

/* The path of a file NAME in the test's directory (a static buffer per call site's need). */
static const char *in_tmp(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", tmpdir, name);
    return buf;
}

/* Writes len bytes of text (NULs allowed) to the file NAME and returns its path. */
static const char *put(const char *name, const char *text, size_t len)
{
    static char path[512];
    in_tmp(path, sizeof path, name);
    /* a new file rather than a truncated one: ext4 flushes a truncated-and-rewritten file on
     * close (auto_da_alloc), which makes thousands of rewrites slow */
    unlink(path);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    return path;
}
#define PUT(name, literal) put(name, literal, sizeof literal - 1)

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static char buf[1 << 16];
    *len = fread(buf, 1, sizeof buf - 1, f);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

static int count_tmp_files(void)
{
    DIR *d = opendir(tmpdir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

/* ---- good files --------------------------------------------------------------------------- */

static void test_example_file(void **state)
{
    (void)state;
    const char *p = PUT("input12.csv", "id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\nb3,0,9,4\nb4,9,21,4\nb5,0,21,4\n");
    pbl_records_file f;
    assert_int_equal(pbl_records_read_csv(p, NULL, &f, err, sizeof err), PBL_OK);
    assert_string_equal(err, "");
    assert_int_equal(f.n, 5);
    assert_null(f.offsets);
    static const char *ids[] = { "b1", "b2", "b3", "b4", "b5" };
    static const pbl_usage_record want[] = { { 4, 0, 3 }, { 4, 3, 9 }, { 4, 0, 9 }, { 4, 9, 21 }, { 4, 0, 21 } };
    for (int i = 0; i < 5; i++) {
        assert_string_equal(f.ids[i], ids[i]);
        assert_int_equal(f.records[i].size, want[i].size);
        assert_int_equal(f.records[i].first, want[i].first);
        assert_int_equal(f.records[i].last, want[i].last);
        assert_int_equal(f.lines[i], i + 2);
    }
    assert_int_equal(pbl_records_lower_bound(f.records, f.n), 12);
    pbl_records_file_free(&f);
    assert_int_equal(f.n, 0);
    assert_null(f.records);
    pbl_records_file_free(&f); /* twice is fine */
    pbl_records_file_free(NULL);
    printf("input.12 example: 5 records, ids b1..b5, lower bound 12\n");
}

/* Variations a reader must take: CRLF, no final newline, blank lines, spaces, another column
 * order, a byte order mark, an offset column, signs, leading zeros. */
static void test_accepted_variations(void **state)
{
    (void)state;
    static const struct {
        const char *name, *text;
        int         n, with_offset;
        int64_t     first_size, last_upper, last_line;
    } cases[] = {
        { "crlf", "id,lower,upper,size\r\na,0,1,8\r\nb,1,2,8\r\n", 2, 0, 8, 2, 3 },
        { "no final newline", "id,lower,upper,size\na,0,1,8\nb,1,2,8", 2, 0, 8, 2, 3 },
        { "blank lines", "id,lower,upper,size\n\na,0,1,8\n  \t\n\r\nb,1,2,8\n\n", 2, 0, 8, 2, 6 },
        { "spaces around fields", "id , lower,upper ,\tsize\n a ,0 , 1,\t8\t\nb,1,2,8\n", 2, 0, 8, 2, 3 },
        { "columns reordered", "size,upper,id,lower\n8,1,a,0\n8,2,b,1\n", 2, 0, 8, 2, 3 },
        { "byte order mark", "\xEF\xBB\xBFid,lower,upper,size\na,0,1,8\nb,1,2,8\n", 2, 0, 8, 2, 3 },
        { "offset column", "id,lower,upper,size,offset\na,0,1,8,0\nb,1,2,8,16\n", 2, 1, 8, 2, 3 },
        { "signs and zeros", "id,lower,upper,size\na,+0,0001,+08\nb,-0,2,8\n", 2, 0, 8, 2, 3 },
        { "header only", "id,lower,upper,size\n", 0, 0, 0, 0, 0 },
        { "header only, no newline", "id,lower,upper,size", 0, 0, 0, 0, 0 },
        { "header only, offset", "id,lower,upper,size,offset\r\n", 0, 1, 0, 0, 0 },
        { "largest values", "id,lower,upper,size\nbig,4611686018427387902,4611686018427387903,4611686018427387903\n",
          1, 0, INT64_C(4611686018427387903), INT64_C(4611686018427387903), 2 },
        { "ids with odd bytes", "id,lower,upper,size\n\xC3\xA9t\xC3\xA9 1,0,1,8\n{x}/y:z,1,2,8\n", 2, 0, 8, 2, 3 },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *p = put("good.csv", cases[k].text, strlen(cases[k].text));
        pbl_records_file f;
        pbl_status s = pbl_records_read_csv(p, NULL, &f, err, sizeof err);
        printf("%-24s -> %s%s%s\n", cases[k].name, pbl_status_name(s), err[0] ? ": " : "", err);
        assert_int_equal(s, PBL_OK);
        assert_int_equal(f.n, cases[k].n);
        assert_int_equal(f.offsets != NULL, cases[k].with_offset);
        if (f.n) {
            assert_int_equal(f.records[0].size, cases[k].first_size);
            assert_int_equal(f.records[f.n - 1].last, cases[k].last_upper);
            assert_int_equal(f.lines[f.n - 1], cases[k].last_line);
            assert_true(f.records[0].first == 0 || f.n == 1);
        }
        if (k == 3) { /* trimmed */
            assert_string_equal(f.ids[0], "a");
        }
        if (k == 6) {
            assert_int_equal(f.offsets[0], 0);
            assert_int_equal(f.offsets[1], 16);
        }
        if (k == 12) {
            assert_string_equal(f.ids[0], "\xC3\xA9t\xC3\xA9 1");
            assert_string_equal(f.ids[1], "{x}/y:z");
        }
        pbl_records_file_free(&f);
    }
}

/* A line of exactly PBL_RECORDS_CSV_LINE_MAX bytes is taken (with LF or CRLF); one byte more
 * is refused. */
static void test_line_limit(void **state)
{
    (void)state;
    static char text[3 * PBL_RECORDS_CSV_LINE_MAX];
    const char *tail = ",0,1,8";
    for (int extra = 0; extra <= 1; extra++) {
        for (int crlf = 0; crlf <= 1; crlf++) {
            size_t id_len = PBL_RECORDS_CSV_LINE_MAX - strlen(tail) + (size_t)extra;
            int k = sprintf(text, "id,lower,upper,size\n");
            memset(text + k, 'x', id_len);
            k += (int)id_len;
            k += sprintf(text + k, "%s%s", tail, crlf ? "\r\n" : "\n");
            const char *p = put("long.csv", text, (size_t)k);
            pbl_records_file f;
            pbl_status s = pbl_records_read_csv(p, NULL, &f, err, sizeof err);
            printf("line of %zu bytes%s -> %s %s\n", id_len + strlen(tail), crlf ? " + CRLF" : " + LF",
                   pbl_status_name(s), err);
            if (!extra) {
                assert_int_equal(s, PBL_OK);
                assert_int_equal(f.n, 1);
                assert_int_equal(strlen(f.ids[0]), id_len);
            } else {
                assert_int_equal(s, PBL_ERR_FORMAT);
                assert_non_null(strstr(err, "long.csv:2: line is longer than 4096 bytes"));
            }
            pbl_records_file_free(&f);
        }
    }
}

/* ---- bad files ---------------------------------------------------------------------------- */

typedef struct bad_case {
    const char *what;
    const char *text;
    size_t      len;     /* 0: strlen(text) */
    int         line;
    const char *message; /* a part of the message after "PATH:LINE: " */
} bad_case;

#define H "id,lower,upper,size\n"

static void test_malformed(void **state)
{
    (void)state;
    static const bad_case cases[] = {
        { "0-byte file", "", 0, 1, "empty file" },
        { "first line empty", "\n" "a,0,1,8\n", 0, 1, "missing header" },
        { "no header", "b1,0,3,4\nb2,3,9,4\n", 0, 1, "missing header: the first line must name the columns" },
        { "header of numbers", "1,2,3,4\n", 0, 1, "missing header" },
        { "missing column", "id,lower,size\na,0,8\n", 0, 1, "missing column 'upper'" },
        { "column twice", "id,lower,upper,size,size\n", 0, 1, "column 'size' appears twice" },
        { "unknown column", "id,lower,upper,size,colour\n", 0, 1, "unknown column 'colour'" },
        { "alignment column", "id,lower,upper,size,alignment\n", 0, 1, "column 'alignment' is not supported" },
        { "gaps column", "id,lower,upper,size,gaps\n", 0, 1, "column 'gaps' is not supported" },
        { "hint column", "id,lower,upper,size,offset,hint\n", 0, 1, "column 'hint' is not supported" },
        { "old header", "buffer,start,end,size\n0,0,2,8\n", 0, 1, "old MiniMalloc header" },
        { "empty column name", "id,lower,,upper,size\n", 0, 1, "empty column name (column 3" },
        { "six columns", "id,lower,upper,size,offset,id\n", 0, 1, "column 'id' appears twice" },
        { "too few fields", H "a,0,1,8\nb,0,1\n", 0, 3, "expected 4 fields (id,lower,upper,size), found 3" },
        { "too many fields", H "a,0,1,8,9\n", 0, 2, "expected 4 fields (id,lower,upper,size), found 5" },
        { "offset missing", "id,lower,upper,size,offset\na,0,1,8\n", 0, 2, "expected 5 fields" },
        { "empty id", H ",0,1,8\n", 0, 2, "empty id" },
        { "quoted id", H "\"a\",0,1,8\n", 0, 2, "id '\"a\"' contains a double quote" },
        { "control character in id", H "a\bc,0,1,8\n", 0, 2, "id 'a?c' contains a control character" },
        { "not an integer", H "a,zero,1,8\n", 0, 2, "lower: 'zero' is not an integer" },
        { "a fraction", H "a,0,1,8.5\n", 0, 2, "size: '8.5' is not an integer" },
        { "an exponent", H "a,0,1e3,8\n", 0, 2, "upper: '1e3' is not an integer" },
        { "hexadecimal", H "a,0,1,0x10\n", 0, 2, "size: '0x10' is not an integer" },
        { "empty number", H "a,0,,8\n", 0, 2, "upper: '' is not an integer" },
        { "sign only", H "a,-,1,8\n", 0, 2, "lower: '-' is not an integer" },
        { "inner space", H "a,0,1 0,8\n", 0, 2, "upper: '1 0' is not an integer" },
        { "lone CR", H "a,0,1\r,8\n", 0, 2, "upper: '1?' is not an integer" },
        { "overflow", H "a,0,1,99999999999999999999\n", 0, 2, "size: '99999999999999999999' is out of range" },
        { "2^62", H "a,0,4611686018427387904,8\n", 0, 2, "upper: '4611686018427387904' is out of range" },
        { "2^63", H "a,0,1,9223372036854775808\n", 0, 2, "size: '9223372036854775808' is out of range" },
        { "zero size", H "a,0,1,8\nb,0,1,0\n", 0, 3, "size must be positive (got '0')" },
        { "negative size", H "a,0,1,-8\n", 0, 2, "size must be positive (got '-8')" },
        { "huge negative size", H "a,0,1,-99999999999999999999\n", 0, 2, "size must be positive" },
        { "negative lower", H "a,-1,1,8\n", 0, 2, "lower must not be negative (got '-1')" },
        { "upper = lower", H "a,3,3,8\n", 0, 2, "upper (3) must be greater than lower (3)" },
        { "upper < lower", H "a,5,3,8\n", 0, 2, "upper (3) must be greater than lower (5)" },
        { "negative offset", "id,lower,upper,size,offset\na,0,1,8,-4\n", 0, 2, "offset must not be negative" },
        { "duplicate id", H "b1,0,3,4\nb2,3,9,4\nb1,0,9,4\n", 0, 4, "duplicate id 'b1' (first on line 2)" },
        { "duplicate after blank lines", H "\n\nx,0,1,1\n\ny,0,1,1\nx,1,2,1\n", 0, 7,
          "duplicate id 'x' (first on line 4)" },
        { "sizes sum over 2^62", H "a,0,1,4611686018427387903\nb,5,6,1\n", 0, 3, "the sizes add up to more than" },
        { "NUL in a record", H "a,0,1,8\nb,0\0,1,8\n", sizeof(H "a,0,1,8\nb,0\0,1,8\n") - 1, 3,
          "NUL byte at column 4" },
        { "NUL in the header", "id,lower\0,upper,size\n", sizeof("id,lower\0,upper,size\n") - 1, 1, "NUL byte" },
        { "line numbers with CRLF", "id,lower,upper,size\r\na,0,1,8\r\nb,0,1,8\r\nc,0,x,8\r\n", 0, 4,
          "upper: 'x' is not an integer" },
        { "binary garbage", "\x89PNG\r\n\x1a\n", 0, 1, "missing header" },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const bad_case *c = &cases[k];
        const char *p = put("bad.csv", c->text, c->len ? c->len : strlen(c->text));
        char want[1024];
        snprintf(want, sizeof want, "%s:%d: ", p, c->line);
        pbl_records_file f;
        memset(&f, 0x5a, sizeof f);
        pbl_status s = pbl_records_read_csv(p, NULL, &f, err, sizeof err);
        printf("%-30s -> %s: %s\n", c->what, pbl_status_name(s), err);
        assert_int_equal(s, PBL_ERR_FORMAT);
        if (strncmp(err, want, strlen(want)) != 0)
            fail_msg("%s: message does not start with '%s'", c->what, want);
        if (!strstr(err, c->message))
            fail_msg("%s: message lacks '%s'", c->what, c->message);
        assert_null(f.records); /* zeroed on failure */
        assert_int_equal(f.n, 0);
        pbl_records_file_free(&f);

        /* the same text parsed from memory (standard input): the same status and message,
         * naming "<stdin>" instead of the path */
        char want_text[sizeof err + 8] = "<stdin>";
        strcat(want_text, err + strlen(p));
        memset(&f, 0x5a, sizeof f);
        s = pbl_records_parse_csv(c->text, c->len ? c->len : strlen(c->text), "<stdin>", NULL, &f, err, sizeof err);
        assert_int_equal(s, PBL_ERR_FORMAT);
        if (strcmp(err, want_text) != 0)
            fail_msg("%s: parsed from memory: '%s', from the file: '%s'", c->what, err, want_text);
        assert_null(f.records);
        pbl_records_file_free(&f);
    }
}

/* pbl_records_parse_csv reads exactly len bytes (no NUL needed), names its text as asked, and
 * gives what reading the same bytes from a file gives. */
static void test_parse_text(void **state)
{
    (void)state;
    static const char text[] = "id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\nb3,0,9,4\nGARBAGE";
    size_t len = sizeof text - 1 - strlen("GARBAGE"); /* the bytes after len must not be read */
    pbl_records_file f, g;
    assert_int_equal(pbl_records_parse_csv(text, len, "<stdin>", NULL, &f, err, sizeof err), PBL_OK);
    assert_string_equal(err, "");
    assert_int_equal(f.n, 3);
    const char *p = put("parsed.csv", text, len);
    assert_int_equal(pbl_records_read_csv(p, NULL, &g, err, sizeof err), PBL_OK);
    assert_int_equal(g.n, f.n);
    for (int32_t i = 0; i < f.n; i++) {
        assert_string_equal(f.ids[i], g.ids[i]);
        assert_memory_equal(&f.records[i], &g.records[i], sizeof f.records[i]);
        assert_int_equal(f.lines[i], g.lines[i]);
    }
    pbl_records_file_free(&f);
    pbl_records_file_free(&g);

    /* a line past len: the cut falls inside it, so the record is short */
    assert_int_equal(pbl_records_parse_csv(text, len - 3, "<stdin>", NULL, &f, err, sizeof err), PBL_ERR_FORMAT);
    assert_string_equal(err, "<stdin>:4: expected 4 fields (id,lower,upper,size), found 3");
    assert_int_equal(pbl_records_parse_csv("", 0, NULL, NULL, &f, err, sizeof err), PBL_ERR_FORMAT);
    assert_string_equal(err, "<text>:1: empty file (expected a header: id,lower,upper,size)");
    assert_int_equal(pbl_records_parse_csv(NULL, 0, "x", NULL, &f, err, sizeof err), PBL_ERR_FORMAT);
    assert_int_equal(pbl_records_parse_csv(NULL, 5, "x", NULL, &f, err, sizeof err), PBL_ERR_INVALID_ARG);
    assert_int_equal(pbl_records_parse_csv(text, len, "x", NULL, NULL, err, sizeof err), PBL_ERR_INVALID_ARG);

    /* more than one 16 KiB chunk of text, so the reader refills from memory */
    size_t cap = 1 << 20, n = 0;
    char *big = malloc(cap);
    assert_non_null(big);
    n += (size_t)snprintf(big, cap, "id,lower,upper,size\n");
    for (int i = 0; i < 5000; i++)
        n += (size_t)snprintf(big + n, cap - n, "r%d,%d,%d,%d\n", i, i, i + 3, 8 + i % 5);
    assert_int_equal(pbl_records_parse_csv(big, n, "<stdin>", NULL, &f, err, sizeof err), PBL_OK);
    assert_int_equal(f.n, 5000);
    assert_string_equal(f.ids[4999], "r4999");
    assert_int_equal(f.records[4999].size, 8 + 4999 % 5);
    assert_int_equal(f.lines[4999], 5001);
    pbl_records_file_free(&f);
    printf("parse: 3 records as from a file, bytes past len unread, %zu bytes (5000 records) across chunks\n", n);
    free(big);
}

static void test_long_lines(void **state)
{
    (void)state;
    /* a huge header line, and a huge record after good ones: the line is named, the reader
     * stops without reading the whole line */
    size_t big = 1 << 20;
    char *text = malloc(big + 64);
    assert_non_null(text);
    memset(text, 'a', big);
    const char *p = put("hugeheader.csv", text, big);
    pbl_records_file f;
    assert_int_equal(pbl_records_read_csv(p, NULL, &f, err, sizeof err), PBL_ERR_FORMAT);
    printf("1 MiB header line -> %s\n", err);
    assert_non_null(strstr(err, "hugeheader.csv:1: line is longer than 4096 bytes"));

    int k = sprintf(text, H "a,0,1,8\n");
    memset(text + k, '7', big);
    p = put("hugerecord.csv", text, (size_t)k + big);
    assert_int_equal(pbl_records_read_csv(p, NULL, &f, err, sizeof err), PBL_ERR_FORMAT);
    printf("1 MiB record line -> %s\n", err);
    assert_non_null(strstr(err, "hugerecord.csv:3: line is longer than 4096 bytes"));
    free(text);
}

static void test_unreadable(void **state)
{
    (void)state;
    char p[512];
    pbl_records_file f;
    in_tmp(p, sizeof p, "does-not-exist.csv");
    assert_int_equal(pbl_records_read_csv(p, NULL, &f, err, sizeof err), PBL_ERR_IO);
    printf("missing file -> %s\n", err);
    assert_non_null(strstr(err, "does-not-exist.csv: cannot open: No such file or directory"));

    assert_int_equal(pbl_records_read_csv(tmpdir, NULL, &f, err, sizeof err), PBL_ERR_IO);
    printf("a directory -> %s\n", err);
    assert_non_null(strstr(err, "is a directory, not a regular file"));

    assert_int_equal(pbl_records_read_csv(NULL, NULL, &f, err, sizeof err), PBL_ERR_INVALID_ARG);
    assert_int_equal(pbl_records_read_csv(p, NULL, NULL, NULL, 0), PBL_ERR_INVALID_ARG);
    /* err may be NULL or short */
    const char *q = PUT("short.csv", H "a,0,1,0\n");
    assert_int_equal(pbl_records_read_csv(q, NULL, &f, NULL, 0), PBL_ERR_FORMAT);
    char tiny[8];
    assert_int_equal(pbl_records_read_csv(q, NULL, &f, tiny, sizeof tiny), PBL_ERR_FORMAT);
    assert_int_equal(strlen(tiny), sizeof tiny - 1);
}

/* ---- writing ------------------------------------------------------------------------------ */

static void test_round_trip(void **state)
{
    (void)state;
    const char *p = PUT("in.csv", "id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\nb3,0,9,4\nb4,9,21,4\nb5,0,21,4\n");
    pbl_records_file f;
    assert_int_equal(pbl_records_read_csv(p, NULL, &f, err, sizeof err), PBL_OK);
    for (int32_t i = 0; i < pbl_plan_strategy_count(); i++) {
        const char *name = pbl_plan_strategy_name(i);
        pbl_assignment a;
        pbl_status s = pbl_plan_records(f.records, f.n, name, NULL, &a, err, sizeof err);
        if (s != PBL_OK) {
            printf("%s: %s (skipped)\n", name, err);
            continue;
        }
        char out[512];
        in_tmp(out, sizeof out, "plan.csv");
        assert_int_equal(pbl_assignment_write_csv(out, &f, &a, err, sizeof err), PBL_OK);
        pbl_records_file g;
        assert_int_equal(pbl_records_read_csv(out, NULL, &g, err, sizeof err), PBL_OK);
        assert_int_equal(g.n, f.n);
        assert_non_null(g.offsets);
        for (int32_t k = 0; k < f.n; k++) {
            assert_string_equal(g.ids[k], f.ids[k]);
            assert_memory_equal(&g.records[k], &f.records[k], sizeof f.records[k]);
            assert_int_equal(g.offsets[k], a.offset[k]);
        }
        /* the check subcommand's path: the offsets read back verify */
        pbl_assignment b = { .offset = g.offsets, .n_records = g.n, .arena = a.arena };
        assert_int_equal(pbl_plan_verify(g.records, g.n, &b, 1, 0, err, sizeof err), PBL_OK);
        printf("%-18s arena %lld: written, read back and verified\n", name, (long long)a.arena);
        if (strcmp(name, "naive") == 0) {
            size_t len;
            const char *text = slurp(out, &len);
            assert_string_equal(text, "id,lower,upper,size,offset\nb1,0,3,4,0\nb2,3,9,4,4\nb3,0,9,4,8\n"
                                      "b4,9,21,4,12\nb5,0,21,4,16\n");
        }
        /* printed to a stream (standard output): the file's bytes */
        size_t file_len, printed_len;
        static char file_text[1 << 16];
        memcpy(file_text, slurp(out, &file_len), sizeof file_text);
        char printed[512];
        in_tmp(printed, sizeof printed, "printed.csv");
        FILE *pf = fopen(printed, "wb");
        assert_non_null(pf);
        assert_int_equal(pbl_assignment_print_csv(&f, &a, pf, err, sizeof err), PBL_OK);
        assert_int_equal(fclose(pf), 0);
        assert_string_equal(slurp(printed, &printed_len), file_text);
        assert_int_equal(printed_len, file_len);
        pbl_records_file_free(&g);
        pbl_assignment_free(&a);
    }
    assert_int_equal(count_tmp_files(), 0);
    pbl_records_file_free(&f);
}

static void test_write_without_ids(void **state)
{
    (void)state;
    pbl_usage_record r[] = { { 16, 0, 2 }, { 8, 1, 3 } };
    int64_t off[] = { 0, 16 };
    pbl_records_file in = { .records = r, .n = 2 };
    pbl_assignment a = { .offset = off, .n_records = 2, .arena = 24 };
    char out[512];
    in_tmp(out, sizeof out, "noids.csv");
    assert_int_equal(pbl_assignment_write_csv(out, &in, &a, err, sizeof err), PBL_OK);
    size_t len;
    assert_string_equal(slurp(out, &len), "id,lower,upper,size,offset\n0,0,2,16,0\n1,1,3,8,16\n");

    /* empty: a header only, which reads back as no records */
    pbl_records_file none = { 0 };
    pbl_assignment empty = { 0 };
    assert_int_equal(pbl_assignment_write_csv(out, &none, &empty, err, sizeof err), PBL_OK);
    assert_string_equal(slurp(out, &len), "id,lower,upper,size,offset\n");
    pbl_records_file g;
    assert_int_equal(pbl_records_read_csv(out, NULL, &g, err, sizeof err), PBL_OK);
    assert_int_equal(g.n, 0);
    assert_non_null(g.offsets);
    pbl_records_file_free(&g);
}

/* What the reader would refuse, the writer refuses too, before touching the file. */
static void test_write_refuses(void **state)
{
    (void)state;
    char out[512];
    in_tmp(out, sizeof out, "refused.csv");
    unlink(out);
    static const struct {
        const char      *what, *id0, *id1;
        pbl_usage_record r0;
        int64_t          off0;
        const char      *message;
    } cases[] = {
        { "comma in id", "a,b", "c", { 8, 0, 1 }, 0, "id 'a,b' contains a comma" },
        { "newline in id", "a\nb", "c", { 8, 0, 1 }, 0, "control character" },
        { "empty id", "", "c", { 8, 0, 1 }, 0, "record 0 has an empty id" },
        { "duplicate ids", "c", "c", { 8, 0, 1 }, 0, "records 0 and 1 have the same id 'c'" },
        { "zero size", "a", "c", { 0, 0, 1 }, 0, "size must be positive" },
        { "empty lifetime", "a", "c", { 8, 1, 1 }, 0, "last must be greater than first" },
        { "negative offset", "a", "c", { 8, 0, 1 }, -8, "offset must not be negative" },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char *ids[] = { (char *)cases[k].id0, (char *)cases[k].id1 };
        pbl_usage_record r[] = { cases[k].r0, { 8, 0, 1 } };
        int64_t off[] = { cases[k].off0, 8 };
        pbl_records_file in = { .records = r, .ids = ids, .n = 2 };
        pbl_assignment a = { .offset = off, .n_records = 2, .arena = 16 };
        pbl_status s = pbl_assignment_write_csv(out, &in, &a, err, sizeof err);
        printf("%-16s -> %s: %s\n", cases[k].what, pbl_status_name(s), err);
        assert_int_equal(s, PBL_ERR_INVALID_ARG);
        assert_non_null(strstr(err, cases[k].message));
        assert_int_equal(access(out, F_OK), -1);
    }
    /* an id the reader took (a 4090-byte line) whose line with an offset is too long */
    static char long_id[PBL_RECORDS_CSV_LINE_MAX];
    memset(long_id, 'x', 4084);
    char *ids[] = { long_id };
    pbl_usage_record lr[] = { { 8, 0, 1 } };
    int64_t loff[] = { 1000000 };
    pbl_records_file lin = { .records = lr, .ids = ids, .n = 1 };
    pbl_assignment la = { .offset = loff, .n_records = 1, .arena = 1000008 };
    assert_int_equal(pbl_assignment_write_csv(out, &lin, &la, err, sizeof err), PBL_ERR_INVALID_ARG);
    printf("4084-byte id   -> %s\n", err);
    assert_non_null(strstr(err, "record 0: its line would be longer than 4096 bytes (an id of 4084 bytes)"));
    loff[0] = 0; /* 4084 + ",0,1,8,0" = 4092 bytes: fine */
    assert_int_equal(pbl_assignment_write_csv(out, &lin, &la, err, sizeof err), PBL_OK);
    unlink(out);

    pbl_usage_record r[] = { { 8, 0, 1 } };
    int64_t off[] = { 0, 0 };
    pbl_records_file in = { .records = r, .n = 1 };
    pbl_assignment a = { .offset = off, .n_records = 2 };
    assert_int_equal(pbl_assignment_write_csv(out, &in, &a, err, sizeof err), PBL_ERR_INVALID_ARG);
    assert_int_equal(pbl_assignment_write_csv(NULL, &in, &a, err, sizeof err), PBL_ERR_INVALID_ARG);
    assert_int_equal(count_tmp_files(), 0);
}

/* A write that fails leaves the target as it was, and no temporary file. */
static void test_write_failures(void **state)
{
    (void)state;
    enum { N = 5000 };
    static pbl_usage_record r[N];
    static int64_t off[N];
    for (int i = 0; i < N; i++) {
        r[i] = (pbl_usage_record){ 64, i, i + 1 };
        off[i] = 0;
    }
    pbl_records_file in = { .records = r, .n = N };
    pbl_assignment a = { .offset = off, .n_records = N, .arena = 64 };
    char p[512];

    in_tmp(p, sizeof p, "missing-dir/plan.csv");
    assert_int_equal(pbl_assignment_write_csv(p, &in, &a, err, sizeof err), PBL_ERR_IO);
    printf("into a missing directory -> %s\n", err);
    assert_non_null(strstr(err, "No such file or directory"));

    in_tmp(p, sizeof p, "adir");
    assert_int_equal(mkdir(p, 0700), 0);
    assert_int_equal(pbl_assignment_write_csv(p, &in, &a, err, sizeof err), PBL_ERR_IO);
    printf("over a directory -> %s\n", err);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(count_tmp_files(), 0);

    /* A real write error part-way: a file-size limit of 16 KiB makes the kernel refuse the
     * writes with EFBIG (SIGXFSZ ignored so write returns an error). The old file survives. */
    const char *old = PUT("keep.csv", "id,lower,upper,size,offset\nold,0,1,1,0\n");
    struct rlimit saved, small;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &saved), 0);
    small = saved;
    small.rlim_cur = 16384;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    pbl_status s = pbl_assignment_write_csv(old, &in, &a, err, sizeof err);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &saved), 0);
    signal(SIGXFSZ, prev);
    printf("5000 records under a 16 KiB file-size limit -> %s: %s\n", pbl_status_name(s), err);
    assert_int_equal(s, PBL_ERR_IO);
    assert_non_null(strstr(err, "File too large"));
    size_t len;
    assert_string_equal(slurp(old, &len), "id,lower,upper,size,offset\nold,0,1,1,0\n");
    assert_int_equal(count_tmp_files(), 0);

    /* and without the limit the same write replaces the file */
    assert_int_equal(pbl_assignment_write_csv(old, &in, &a, err, sizeof err), PBL_OK);
    pbl_records_file g;
    assert_int_equal(pbl_records_read_csv(old, NULL, &g, err, sizeof err), PBL_OK);
    assert_int_equal(g.n, N);
    assert_string_equal(g.ids[N - 1], "4999");
    pbl_records_file_free(&g);
    assert_int_equal(count_tmp_files(), 0);
}

/* ---- allocation failures ------------------------------------------------------------------ */

typedef struct counting {
    long   calls, fail_at; /* fail the call numbered fail_at (from 0); -1: never */
    size_t live;
} counting;

static void *count_alloc(void *user, size_t n)
{
    counting *c = user;
    if (c->calls++ == c->fail_at)
        return NULL;
    c->live += n;
    return malloc(n);
}

static void count_free(void *user, void *p, size_t n)
{
    counting *c = user;
    if (p)
        c->live -= n;
    free(p);
}

static void test_allocation_failures(void **state)
{
    (void)state;
    /* enough records and id bytes to make every array grow more than once */
    static char text[200000];
    int k = sprintf(text, "id,lower,upper,size,offset\n");
    for (int i = 0; i < 300; i++)
        k += sprintf(text + k, "record-with-a-long-name-%d,%d,%d,%d,%d\n", i, i, i + 2, 8 + i, 0);
    const char *p = put("many.csv", text, (size_t)k);
    long n_calls = -1;
    for (long fail = 0;; fail++) {
        counting c = { 0, fail, 0 };
        pbl_allocator al = { count_alloc, count_free, &c };
        pbl_records_file f;
        pbl_status s = pbl_records_read_csv(p, &al, &f, err, sizeof err);
        if (s == PBL_OK) {
            assert_int_equal(f.n, 300);
            assert_string_equal(f.ids[299], "record-with-a-long-name-299");
            pbl_records_file_free(&f);
            assert_int_equal(c.live, 0);
            n_calls = fail;
            break;
        }
        assert_int_equal(s, PBL_ERR_NOMEM);
        assert_non_null(strstr(err, "out of memory"));
        assert_int_equal(c.live, 0);
    }
    printf("read with each of its %ld allocations failing in turn: PBL_ERR_NOMEM, nothing leaked\n", n_calls);
    assert_true(n_calls > 5);
    for (long fail = 0;; fail++) { /* and parsing the same text from memory */
        counting c = { 0, fail, 0 };
        pbl_allocator al = { count_alloc, count_free, &c };
        pbl_records_file f;
        pbl_status s = pbl_records_parse_csv(text, (size_t)k, "<stdin>", &al, &f, err, sizeof err);
        if (s == PBL_OK) {
            assert_int_equal(f.n, 300);
            pbl_records_file_free(&f);
            assert_int_equal(c.live, 0);
            assert_int_equal(fail, n_calls);
            break;
        }
        assert_int_equal(s, PBL_ERR_NOMEM);
        assert_true(strncmp(err, "<stdin>", 7) == 0 && strstr(err, "out of memory"));
        assert_int_equal(c.live, 0);
    }
}

/* ---- random damage ------------------------------------------------------------------------ */

/* Thousands of copies of a good file, each with a few random bytes changed, inserted or
 * deleted: the reader returns OK or FORMAT, never crashes (run under the sanitizers in CI),
 * and on OK its records are all ones the planner accepts. */
static void test_random_damage(void **state)
{
    (void)state;
    static const char good[] = "id,lower,upper,size,offset\nb1,0,3,4,8\nb2,3,9,4,8\r\nb3,0,9,4,4\n\n"
                               "b4,9,21,4,4\nb5,0,21,4,0\n";
    static const char alphabet[] = "0123456789,-+\r\n\0 \"abxyz\t\xEF\xBB\xBF";
    unsigned seed = 12345;
    int ok = 0, bad = 0;
    char buf[256];
    for (int round = 0; round < 4000; round++) {
        size_t len = sizeof good - 1;
        memcpy(buf, good, len);
        int edits = 1 + rand_r(&seed) % 4;
        for (int e = 0; e < edits; e++) {
            size_t at = (size_t)rand_r(&seed) % (len + 1);
            char c = alphabet[rand_r(&seed) % (sizeof alphabet - 1)];
            switch (rand_r(&seed) % 3) {
            case 0: if (at < len) buf[at] = c; break;
            case 1: if (len < sizeof buf - 1) { memmove(buf + at + 1, buf + at, len - at); buf[at] = c; len++; } break;
            default: if (at < len) { memmove(buf + at, buf + at + 1, len - at - 1); len--; } break;
            }
        }
        if (round % 7 == 0)
            len = (size_t)rand_r(&seed) % (len + 1); /* truncated */
        const char *p = put("damaged.csv", buf, len);
        pbl_records_file f, m;
        pbl_status s = pbl_records_read_csv(p, NULL, &f, err, sizeof err);
        /* from memory: the same outcome, the same records or the same message */
        char merr[1024];
        pbl_status ms = pbl_records_parse_csv(buf, len, p, NULL, &m, merr, sizeof merr);
        assert_int_equal(ms, s);
        assert_string_equal(merr, err);
        assert_int_equal(m.n, f.n);
        for (int32_t i = 0; i < f.n; i++) {
            assert_string_equal(m.ids[i], f.ids[i]);
            assert_memory_equal(&m.records[i], &f.records[i], sizeof f.records[i]);
            assert_true((m.offsets == NULL) == (f.offsets == NULL));
            if (f.offsets)
                assert_int_equal(m.offsets[i], f.offsets[i]);
        }
        pbl_records_file_free(&m);
        if (s == PBL_OK) {
            ok++;
            for (int32_t i = 0; i < f.n; i++) {
                assert_true(f.records[i].size > 0);
                assert_true(f.records[i].first >= 0);
                assert_true(f.records[i].last > f.records[i].first);
            }
            pbl_assignment a;
            assert_int_equal(pbl_plan_records(f.records, f.n, "naive", NULL, &a, err, sizeof err), PBL_OK);
            pbl_assignment_free(&a);
        } else {
            bad++;
            assert_int_equal(s, PBL_ERR_FORMAT);
            assert_true(strncmp(err, p, strlen(p)) == 0 && err[strlen(p)] == ':');
        }
        pbl_records_file_free(&f);
    }
    printf("4000 damaged files: %d read, %d refused with PATH:LINE, no crash; parsed from memory alike\n", ok, bad);
    assert_true(ok > 0 && bad > 0);
}

static int setup(void **state)
{
    (void)state;
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/test_plan_csv.XXXXXX", base && *base ? base : "/tmp");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example_file),
        cmocka_unit_test(test_accepted_variations),
        cmocka_unit_test(test_line_limit),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_parse_text),
        cmocka_unit_test(test_long_lines),
        cmocka_unit_test(test_unreadable),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_write_without_ids),
        cmocka_unit_test(test_write_refuses),
        cmocka_unit_test(test_write_failures),
        cmocka_unit_test(test_allocation_failures),
        cmocka_unit_test(test_random_damage),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
