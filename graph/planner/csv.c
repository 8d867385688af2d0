/* Records and assignments as CSV (pebble/plan_io.h): a reader that refuses every malformed
 * line with its file and line number, and a writer that replaces its file atomically. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph/base/errmsg.h"
#include "graph/base/file_in.h"
#include "graph/base/file_out.h"
#include "graph/planner/plan_internal.h"
#include "pebble/plan_io.h"

#define LINE_MAX_BYTES PBL_RECORDS_CSV_LINE_MAX
#define VALUE_MAX      PBL_RECORDS_CSV_VALUE_MAX
#define RECORDS_MAX    (INT32_MAX / 2) /* the planner sorts 2n events in int32_t indices */

enum column { COL_ID, COL_LOWER, COL_UPPER, COL_SIZE, COL_OFFSET, N_COLUMNS };
static const char *const column_name[N_COLUMNS] = { "id", "lower", "upper", "size", "offset" };

/* Copies at most 40 bytes of s[0..len) into dst for a message: bytes that are not printable
 * ASCII become '?', a cut is marked with "...". dst holds at least 48 bytes. */
static const char *shown(char *dst, const char *s, size_t len)
{
    size_t k = 0;
    for (; k < len && k < 40; k++) {
        unsigned char c = (unsigned char)s[k];
        dst[k] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    if (k < len) {
        memcpy(dst + k, "...", 3);
        k += 3;
    }
    dst[k] = '\0';
    return dst;
}

/* Why the reader would refuse this id, or NULL. */
static const char *id_problem(const char *s, size_t len)
{
    if (len == 0)
        return "empty id";
    for (size_t k = 0; k < len; k++) {
        unsigned char c = (unsigned char)s[k];
        if (c == '"')
            return "contains a double quote (fields are not quoted)";
        if (c == ',')
            return "contains a comma";
        if (c < 0x20 || c == 0x7f)
            return "contains a control character";
    }
    return NULL;
}

static int is_blank(char c) { return c == ' ' || c == '\t'; }

/* ---- a set of ids, for finding duplicates ------------------------------------------------ */

/* Open addressing over record indices; the ids themselves live with the caller. */
typedef struct idset {
    int32_t             *slot; /* cap entries: record index + 1, or 0 for empty */
    size_t               cap;  /* a power of two, > 2 * count */
    int32_t              count;
    const pbl_allocator *al;
} idset;

typedef const char *(*id_fn)(const void *ctx, int32_t i);

static uint64_t hash_id(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static void idset_free(idset *set)
{
    pbl__plan_free(set->al, set->slot, set->cap * sizeof *set->slot);
    set->slot = NULL;
    set->cap = 0;
    set->count = 0;
}

static int32_t *idset_probe(const idset *set, const char *id, id_fn id_of, const void *ctx)
{
    size_t mask = set->cap - 1;
    for (size_t k = hash_id(id) & mask;; k = (k + 1) & mask) {
        int32_t *s = &set->slot[k];
        if (*s == 0 || strcmp(id_of(ctx, *s - 1), id) == 0)
            return s;
    }
}

/* Adds record i (whose id is id_of(ctx, i)). Returns the index of an earlier record with the
 * same id, -1 when it was new, or -2 when out of memory. */
static int32_t idset_add(idset *set, int32_t i, id_fn id_of, const void *ctx)
{
    if ((size_t)set->count * 2 + 2 > set->cap) {
        size_t cap = set->cap ? set->cap * 2 : 64;
        int32_t *slot = pbl__plan_alloc(set->al, cap * sizeof *slot);
        if (!slot)
            return -2;
        memset(slot, 0, cap * sizeof *slot);
        idset bigger = { slot, cap, 0, set->al };
        for (size_t k = 0; k < set->cap; k++)
            if (set->slot[k])
                *idset_probe(&bigger, id_of(ctx, set->slot[k] - 1), id_of, ctx) = set->slot[k];
        bigger.count = set->count;
        idset_free(set);
        *set = bigger;
    }
    int32_t *s = idset_probe(set, id_of(ctx, i), id_of, ctx);
    if (*s)
        return *s - 1;
    *s = i + 1;
    set->count++;
    return -1;
}

/* ---- reading ---------------------------------------------------------------------------- */

typedef struct reader {
    const char          *path;
    const pbl_allocator *al;
    char                *err;
    size_t               errlen;

    FILE                *f;       /* the file read, or NULL: */
    uint64_t             file_read; /* bytes read from f so far */
    const unsigned char *mem;     /* the text parsed (pbl_records_parse_csv) */
    size_t               mem_len, mem_pos;
    unsigned char        chunk[16384];
    size_t        pos, len;
    int           at_eof;
    int32_t       line;                      /* the line last read, from 1 */
    char          text[LINE_MAX_BYTES + 2];  /* that line: its bytes, a CR perhaps, a NUL */

    int ncols;
    int field_col[N_COLUMNS + 1]; /* the column each field of a line holds (+1: a sixth name is refused) */
    int col_field[N_COLUMNS]; /* the field each column is in, -1 if absent */

    /* growing arrays, cap entries each */
    pbl_usage_record *rec;
    int64_t          *off;
    int32_t          *lines;
    size_t           *id_at; /* where each id starts in pool */
    int32_t           n, cap;
    char             *pool;
    size_t            pool_len, pool_cap;
    idset             ids;
    int64_t           size_sum;
} reader;

static pbl_status fail_at(reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static pbl_status fail_at(reader *r, const char *fmt, ...)
{
    pbl__errf(r->err, r->errlen, PBL_ERR_FORMAT, "%s:%ld: ", r->path, (long)r->line);
    va_list ap;
    va_start(ap, fmt);
    pbl__verrf_append(r->err, r->errlen, PBL_ERR_FORMAT, fmt, ap);
    va_end(ap);
    return PBL_ERR_FORMAT;
}

static pbl_status fail_nomem(reader *r)
{
    return pbl__errf(r->err, r->errlen, PBL_ERR_NOMEM, "%s:%ld: out of memory", r->path, (long)r->line);
}

/* Reads the next line into r->text without its LF or CRLF. Sets *got to 0 at the end of the
 * file, else 1 and *len. */
static pbl_status read_line(reader *r, int *got, size_t *len)
{
    size_t k = 0;
    int any = 0;
    *got = 0;
    for (;;) {
        if (r->pos == r->len) {
            if (r->at_eof)
                break;
            r->pos = 0;
            if (r->f) {
                r->len = fread(r->chunk, 1, sizeof r->chunk, r->f);
                /* the size was checked at open; a file that grows while it is read is held to
                 * the same limit */
                if ((r->file_read += r->len) > PBL__FILE_IN_MAX_TEXT)
                    return pbl__errf(r->err, r->errlen, PBL_ERR_FORMAT,
                                     "%s: grew past %llu bytes while read, more than a records CSV may hold (1 GiB)",
                                     r->path, (unsigned long long)PBL__FILE_IN_MAX_TEXT);
            } else {
                r->len = r->mem_len - r->mem_pos < sizeof r->chunk ? r->mem_len - r->mem_pos : sizeof r->chunk;
                if (r->len)
                    memcpy(r->chunk, r->mem + r->mem_pos, r->len);
                r->mem_pos += r->len;
            }
            if (r->len == 0) {
                if (r->f && ferror(r->f))
                    return pbl__errf(r->err, r->errlen, PBL_ERR_IO, "%s: cannot read: %s", r->path,
                               strerror(errno ? errno : EIO));
                r->at_eof = 1;
                break;
            }
        }
        unsigned char c = r->chunk[r->pos++];
        if (!any) {
            any = 1;
            r->line++;
        }
        if (c == '\n')
            break;
        if (c == '\0')
            return fail_at(r, "NUL byte at column %zu", k + 1);
        if (k == LINE_MAX_BYTES + 1)
            return fail_at(r, "line is longer than %d bytes", LINE_MAX_BYTES);
        r->text[k++] = (char)c;
    }
    if (!any)
        return PBL_OK;
    if (k > 0 && r->text[k - 1] == '\r')
        k--;
    if (k > LINE_MAX_BYTES)
        return fail_at(r, "line is longer than %d bytes", LINE_MAX_BYTES);
    r->text[k] = '\0';
    *got = 1;
    *len = k;
    return PBL_OK;
}

typedef struct field {
    const char *s;
    size_t      len;
} field;

/* Splits text[0..len) at commas into at most max fields, trimming spaces and tabs; returns
 * how many fields the line has (possibly more than max). */
static int split(const char *text, size_t len, field *out, int max)
{
    int n = 0;
    size_t start = 0;
    for (size_t k = 0; k <= len; k++) {
        if (k < len && text[k] != ',')
            continue;
        if (n < max) {
            size_t a = start, b = k;
            while (a < b && is_blank(text[a]))
                a++;
            while (b > a && is_blank(text[b - 1]))
                b--;
            out[n] = (field){ text + a, b - a };
        }
        n++;
        start = k + 1;
    }
    return n;
}

static int field_is(field f, const char *name)
{
    return f.len == strlen(name) && memcmp(f.s, name, f.len) == 0;
}

static pbl_status read_header(reader *r, size_t len)
{
    const char *text = r->text;
    if (r->line == 1 && len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) {
        text += 3;
        len -= 3;
    }
    char buf[48];
    field f[N_COLUMNS + 1];
    int nf = split(text, len, f, N_COLUMNS + 1);
    int shown_nf = nf < N_COLUMNS + 1 ? nf : N_COLUMNS + 1;

    /* A first line that names no column at all is data or something else: say so plainly. */
    static const char *const known[] = { "id", "lower", "upper", "size", "offset", "alignment", "gaps",
                                         "hint", "buffer", "start", "end" };
    int any_known = 0;
    for (int i = 0; i < shown_nf; i++)
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            any_known |= field_is(f[i], known[k]);
    if (!any_known)
        return fail_at(r, "missing header: the first line must name the columns id,lower,upper,size"
                          " (it reads '%s')", shown(buf, text, len));
    for (int i = 0; i < shown_nf; i++)
        if (field_is(f[i], "buffer") || field_is(f[i], "start") || field_is(f[i], "end"))
            return fail_at(r, "old MiniMalloc header (buffer,start,end,size with an inclusive end):"
                              " write id,lower,upper,size with upper = end + 1");

    for (int c = 0; c < N_COLUMNS; c++)
        r->col_field[c] = -1;
    for (int i = 0; i < shown_nf; i++) {
        if (f[i].len == 0)
            return fail_at(r, "empty column name (column %d of the header)", i + 1);
        int c = 0;
        while (c < N_COLUMNS && !field_is(f[i], column_name[c]))
            c++;
        if (c == N_COLUMNS) {
            if (field_is(f[i], "alignment") || field_is(f[i], "gaps") || field_is(f[i], "hint"))
                return fail_at(r, "column '%s' is not supported (MiniMalloc's alignment, gaps and hint"
                                  " are refused, not ignored)", shown(buf, f[i].s, f[i].len));
            return fail_at(r, "unknown column '%s' (the columns are id, lower, upper, size and"
                              " optionally offset)", shown(buf, f[i].s, f[i].len));
        }
        if (r->col_field[c] >= 0)
            return fail_at(r, "column '%s' appears twice", column_name[c]);
        r->col_field[c] = i;
        r->field_col[i] = c;
    }
    if (nf > N_COLUMNS) /* unreachable: a sixth name repeats or is unknown; kept for safety */
        return fail_at(r, "too many columns (%d)", nf);
    for (int c = 0; c < COL_OFFSET; c++)
        if (r->col_field[c] < 0)
            return fail_at(r, "missing column '%s' (the header must name id, lower, upper and size)",
                           column_name[c]);
    r->ncols = nf;
    return PBL_OK;
}

/* Parses a decimal integer. 0: *out is its value (negative ones clamped to -VALUE_MAX);
 * 1: not an integer; 2: above VALUE_MAX. */
static int parse_int(field f, int64_t *out)
{
    size_t k = 0;
    int neg = 0;
    if (k < f.len && (f.s[k] == '-' || f.s[k] == '+'))
        neg = f.s[k++] == '-';
    if (k == f.len)
        return 1;
    int64_t v = 0;
    int big = 0;
    for (; k < f.len; k++) {
        if (f.s[k] < '0' || f.s[k] > '9')
            return 1;
        if (!big && v > (VALUE_MAX - (f.s[k] - '0')) / 10)
            big = 1;
        if (!big)
            v = v * 10 + (f.s[k] - '0');
    }
    if (big && !neg)
        return 2;
    *out = neg ? (big ? -VALUE_MAX : -v) : v;
    return 0;
}

/* Grows the four per-record arrays together, so they always share r->cap. */
static pbl_status grow_records(reader *r)
{
    size_t old = (size_t)r->cap, cap = old ? old * 2 : 64;
    if (cap > RECORDS_MAX)
        cap = RECORDS_MAX;
    int with_off = r->col_field[COL_OFFSET] >= 0;
    pbl_usage_record *rec = pbl__plan_alloc(r->al, cap * sizeof *rec);
    int32_t *lines = pbl__plan_alloc(r->al, cap * sizeof *lines);
    size_t *id_at = pbl__plan_alloc(r->al, cap * sizeof *id_at);
    int64_t *off = with_off ? pbl__plan_alloc(r->al, cap * sizeof *off) : NULL;
    if (!rec || !lines || !id_at || (with_off && !off)) {
        pbl__plan_free(r->al, rec, cap * sizeof *rec);
        pbl__plan_free(r->al, lines, cap * sizeof *lines);
        pbl__plan_free(r->al, id_at, cap * sizeof *id_at);
        pbl__plan_free(r->al, off, cap * sizeof *off);
        return fail_nomem(r);
    }
    if (old) {
        memcpy(rec, r->rec, old * sizeof *rec);
        memcpy(lines, r->lines, old * sizeof *lines);
        memcpy(id_at, r->id_at, old * sizeof *id_at);
        if (with_off)
            memcpy(off, r->off, old * sizeof *off);
    }
    pbl__plan_free(r->al, r->rec, old * sizeof *rec);
    pbl__plan_free(r->al, r->lines, old * sizeof *lines);
    pbl__plan_free(r->al, r->id_at, old * sizeof *id_at);
    pbl__plan_free(r->al, r->off, old * sizeof *off);
    r->rec = rec;
    r->lines = lines;
    r->id_at = id_at;
    r->off = off;
    r->cap = (int32_t)cap;
    return PBL_OK;
}

static const char *pool_id(const void *ctx, int32_t i)
{
    const reader *r = ctx;
    return r->pool + r->id_at[i];
}

static pbl_status add_record(reader *r, const field *f, const int64_t *v)
{
    char buf[48];
    if (r->n == RECORDS_MAX)
        return fail_at(r, "too many records (at most %d)", RECORDS_MAX);
    if (r->n == r->cap) {
        pbl_status s = grow_records(r);
        if (s != PBL_OK)
            return s;
    }
    field id = f[r->col_field[COL_ID]];
    if (r->pool_len + id.len + 1 > r->pool_cap) {
        size_t cap = r->pool_cap ? r->pool_cap : 1024;
        while (cap < r->pool_len + id.len + 1)
            cap *= 2;
        char *pool = pbl__plan_alloc(r->al, cap);
        if (!pool)
            return fail_nomem(r);
        if (r->pool_len)
            memcpy(pool, r->pool, r->pool_len);
        pbl__plan_free(r->al, r->pool, r->pool_cap);
        r->pool = pool;
        r->pool_cap = cap;
    }
    int32_t i = r->n;
    r->id_at[i] = r->pool_len;
    memcpy(r->pool + r->pool_len, id.s, id.len);
    r->pool[r->pool_len + id.len] = '\0';
    int32_t first = idset_add(&r->ids, i, pool_id, r);
    if (first == -2)
        return fail_nomem(r);
    if (first >= 0)
        return fail_at(r, "duplicate id '%s' (first on line %ld)", shown(buf, id.s, id.len),
                       (long)r->lines[first]);
    r->pool_len += id.len + 1;
    r->rec[i] = (pbl_usage_record){ .size = v[COL_SIZE], .first = v[COL_LOWER], .last = v[COL_UPPER] };
    if (r->off)
        r->off[i] = v[COL_OFFSET];
    r->lines[i] = r->line;
    r->n++;
    return PBL_OK;
}

static pbl_status read_record(reader *r, size_t len)
{
    char buf[48];
    field f[N_COLUMNS];
    int nf = split(r->text, len, f, N_COLUMNS);
    if (nf != r->ncols) {
        char cols[64] = "";
        for (int i = 0; i < r->ncols; i++) {
            strcat(cols, i ? "," : "");
            strcat(cols, column_name[r->field_col[i]]);
        }
        return fail_at(r, "expected %d fields (%s), found %d", r->ncols, cols, nf);
    }
    field id = f[r->col_field[COL_ID]];
    const char *why = id_problem(id.s, id.len);
    if (why)
        return id.len ? fail_at(r, "id '%s' %s", shown(buf, id.s, id.len), why) : fail_at(r, "%s", why);

    int64_t v[N_COLUMNS] = { 0 };
    for (int c = COL_LOWER; c < N_COLUMNS; c++) {
        if (r->col_field[c] < 0)
            continue;
        field x = f[r->col_field[c]];
        int e = parse_int(x, &v[c]);
        if (e == 1)
            return fail_at(r, "%s: '%s' is not an integer", column_name[c], shown(buf, x.s, x.len));
        if (e == 2)
            return fail_at(r, "%s: '%s' is out of range (at most %lld)", column_name[c],
                           shown(buf, x.s, x.len), (long long)VALUE_MAX);
    }
    field size = f[r->col_field[COL_SIZE]], lower = f[r->col_field[COL_LOWER]];
    if (v[COL_SIZE] <= 0)
        return fail_at(r, "size must be positive (got '%s')", shown(buf, size.s, size.len));
    if (v[COL_LOWER] < 0)
        return fail_at(r, "lower must not be negative (got '%s')", shown(buf, lower.s, lower.len));
    if (v[COL_UPPER] <= v[COL_LOWER])
        return fail_at(r, "upper (%lld) must be greater than lower (%lld): lifetimes are [lower, upper)",
                       (long long)v[COL_UPPER], (long long)v[COL_LOWER]);
    if (r->col_field[COL_OFFSET] >= 0 && v[COL_OFFSET] < 0) {
        field off = f[r->col_field[COL_OFFSET]];
        return fail_at(r, "offset must not be negative (got '%s')", shown(buf, off.s, off.len));
    }
    if (v[COL_SIZE] > VALUE_MAX - r->size_sum)
        return fail_at(r, "the sizes add up to more than %lld", (long long)VALUE_MAX);
    r->size_sum += v[COL_SIZE];
    return add_record(r, f, v);
}

static void reader_free(reader *r)
{
    size_t cap = (size_t)r->cap;
    pbl__plan_free(r->al, r->rec, cap * sizeof *r->rec);
    pbl__plan_free(r->al, r->off, cap * sizeof *r->off);
    pbl__plan_free(r->al, r->lines, cap * sizeof *r->lines);
    pbl__plan_free(r->al, r->id_at, cap * sizeof *r->id_at);
    pbl__plan_free(r->al, r->pool, r->pool_cap);
    idset_free(&r->ids);
}

/* Moves the records into exactly sized arrays in *out (so free needs only n and id_bytes). */
static pbl_status reader_finish(reader *r, pbl_records_file *out)
{
    size_t n = (size_t)r->n;
    pbl_records_file f = { .n = r->n, .allocator = r->al, .id_bytes = r->pool_len };
    f.records = pbl__plan_alloc(r->al, n * sizeof *f.records);
    f.ids = pbl__plan_alloc(r->al, n * sizeof *f.ids);
    f.lines = pbl__plan_alloc(r->al, n * sizeof *f.lines);
    char *pool = pbl__plan_alloc(r->al, f.id_bytes);
    if (r->col_field[COL_OFFSET] >= 0)
        f.offsets = pbl__plan_alloc(r->al, n * sizeof *f.offsets);
    if (!f.records || !f.ids || !f.lines || !pool || (r->col_field[COL_OFFSET] >= 0 && !f.offsets)) {
        pbl__plan_free(r->al, f.records, n * sizeof *f.records);
        pbl__plan_free(r->al, f.ids, n * sizeof *f.ids);
        pbl__plan_free(r->al, f.lines, n * sizeof *f.lines);
        pbl__plan_free(r->al, f.offsets, n * sizeof *f.offsets);
        pbl__plan_free(r->al, pool, f.id_bytes);
        return fail_nomem(r);
    }
    if (n) {
        memcpy(f.records, r->rec, n * sizeof *f.records);
        memcpy(f.lines, r->lines, n * sizeof *f.lines);
        memcpy(pool, r->pool, f.id_bytes);
        if (f.offsets)
            memcpy(f.offsets, r->off, n * sizeof *f.offsets);
    }
    for (size_t i = 0; i < n; i++)
        f.ids[i] = pool + r->id_at[i];
    if (n == 0)
        pbl__plan_free(r->al, pool, f.id_bytes); /* ids[0] is how free finds the block */
    *out = f;
    return PBL_OK;
}

/* Reads r's lines (from r->f or r->mem) into *out. */
static pbl_status read_records(reader *r, pbl_records_file *out)
{
    int got;
    size_t len;
    pbl_status s = read_line(r, &got, &len);
    if (s != PBL_OK)
        return s;
    if (!got) {
        r->line = 1;
        return fail_at(r, "empty file (expected a header: id,lower,upper,size)");
    }
    s = read_header(r, len);
    while (s == PBL_OK) {
        s = read_line(r, &got, &len);
        if (s != PBL_OK || !got)
            break;
        size_t k = 0;
        while (k < len && is_blank(r->text[k]))
            k++;
        if (k < len)
            s = read_record(r, len);
    }
    if (s != PBL_OK)
        return s;
    return reader_finish(r, out);
}

/* A reader for `name` (messages start with it), or NULL after PBL_ERR_NOMEM in err. */
static reader *reader_new(const char *name, const pbl_allocator *al, char *err, size_t errlen)
{
    reader *r = pbl__plan_alloc(al, sizeof *r);
    if (!r) {
        pbl__errf(err, errlen, PBL_ERR_NOMEM, "%s: out of memory", name);
        return NULL;
    }
    memset(r, 0, sizeof *r);
    r->path = name;
    r->al = al;
    r->ids.al = al;
    r->err = err;
    r->errlen = errlen;
    return r;
}

static void reader_destroy(reader *r)
{
    reader_free(r);
    pbl__plan_free(r->al, r, sizeof *r);
}

PBL__API pbl_status pbl_records_read_csv(const char *path, const pbl_allocator *al, pbl_records_file *out,
                                         char *err, size_t errlen)
{
    pbl__errclear(err, errlen);
    if (out)
        memset(out, 0, sizeof *out);
    if (!path || !out)
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "read records: NULL path or result");

    reader *r = reader_new(path, al, err, errlen);
    if (!r)
        return PBL_ERR_NOMEM;
    pbl_status s;
    s = pbl__file_in_open(path, "a records CSV", PBL__FILE_IN_MAX_TEXT, &r->f, NULL, err, errlen);
    if (s != PBL_OK)
        goto fail_free_reader;
    s = read_records(r, out);
    fclose(r->f);
fail_free_reader:
    reader_destroy(r);
    if (s != PBL_OK)
        memset(out, 0, sizeof *out);
    return s;
}

PBL__API pbl_status pbl_records_parse_csv(const char *text, size_t len, const char *name, const pbl_allocator *al,
                                          pbl_records_file *out, char *err, size_t errlen)
{
    pbl__errclear(err, errlen);
    if (out)
        memset(out, 0, sizeof *out);
    if ((!text && len) || !out)
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "parse records: NULL text or result");
    reader *r = reader_new(name ? name : "<text>", al, err, errlen);
    if (!r)
        return PBL_ERR_NOMEM;
    r->mem = (const unsigned char *)text;
    r->mem_len = len;
    pbl_status s = read_records(r, out);
    reader_destroy(r);
    if (s != PBL_OK)
        memset(out, 0, sizeof *out);
    return s;
}

PBL__API void pbl_records_file_free(pbl_records_file *f)
{
    if (!f)
        return;
    const pbl_allocator *al = f->allocator;
    size_t n = f->n > 0 ? (size_t)f->n : 0;
    if (n && f->ids)
        pbl__plan_free(al, f->ids[0], f->id_bytes);
    if (f->records || f->ids) { /* read_csv allocates all or none */
        pbl__plan_free(al, f->records, n * sizeof *f->records);
        pbl__plan_free(al, f->ids, n * sizeof *f->ids);
        pbl__plan_free(al, f->lines, n * sizeof *f->lines);
        pbl__plan_free(al, f->offsets, n * sizeof *f->offsets);
    }
    memset(f, 0, sizeof *f);
}

/* ---- writing ---------------------------------------------------------------------------- */

typedef struct id_src {
    char *const *ids;
} id_src;

static const char *given_id(const void *ctx, int32_t i) { return ((const id_src *)ctx)->ids[i]; }

/* Checks that every record and id would be read back as written. */
static pbl_status check_writable(const pbl_records_file *in, const pbl_assignment *a, char *err, size_t errlen)
{
    char buf[48];
    int64_t sum = 0;
    for (int32_t i = 0; i < in->n; i++) {
        const pbl_usage_record *r = &in->records[i];
        const char *why = r->size <= 0 ? "size must be positive"
                        : r->first < 0 ? "first must not be negative"
                        : r->last <= r->first ? "last must be greater than first"
                        : r->size > VALUE_MAX || r->last > VALUE_MAX ? "a value is above 2^62 - 1"
                        : a->offset[i] < 0 ? "offset must not be negative"
                        : a->offset[i] > VALUE_MAX ? "offset is above 2^62 - 1"
                        : r->size > VALUE_MAX - sum ? "the sizes add up to more than 2^62 - 1" : NULL;
        if (why)
            return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "record %d (size %lld, [%lld, %lld), offset %lld): %s",
                       (int)i, (long long)r->size, (long long)r->first, (long long)r->last,
                       (long long)a->offset[i], why);
        sum += r->size;
        if (in->ids) {
            if (!in->ids[i])
                return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "record %d has no id", (int)i);
            size_t len = strlen(in->ids[i]);
            why = id_problem(in->ids[i], len);
            if (why && len == 0)
                return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "record %d has an empty id", (int)i);
            if (why)
                return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "record %d: id '%s' %s", (int)i,
                           shown(buf, in->ids[i], len), why);
        }
    }
    for (int32_t i = 0; i < in->n; i++) {
        const pbl_usage_record *r = &in->records[i];
        int numbers = snprintf(NULL, 0, ",%lld,%lld,%lld,%lld", (long long)r->first, (long long)r->last,
                               (long long)r->size, (long long)a->offset[i]);
        size_t len = in->ids ? strlen(in->ids[i]) : (size_t)snprintf(NULL, 0, "%d", (int)i);
        if (numbers < 0 || len + (size_t)numbers > LINE_MAX_BYTES)
            return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "record %d: its line would be longer than %d bytes"
                       " (an id of %zu bytes)", (int)i, LINE_MAX_BYTES, len);
    }
    if (!in->ids)
        return PBL_OK;
    idset set = { .al = a->allocator };
    id_src src = { in->ids };
    pbl_status s = PBL_OK;
    for (int32_t i = 0; i < in->n && s == PBL_OK; i++) {
        int32_t first = idset_add(&set, i, given_id, &src);
        if (first == -2)
            s = pbl__errf(err, errlen, PBL_ERR_NOMEM, "writing records: out of memory");
        else if (first >= 0)
            s = pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "records %d and %d have the same id '%s'", (int)first,
                    (int)i, shown(buf, in->ids[i], strlen(in->ids[i])));
    }
    idset_free(&set);
    return s;
}

/* The checks both writers make before writing anything. */
static pbl_status check_args(const pbl_records_file *in, const pbl_assignment *a, char *err, size_t errlen)
{
    if (!in || !a || in->n < 0 || (in->n > 0 && (!in->records || !a->offset)))
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "write assignment: NULL or negative arguments");
    if (a->n_records != in->n)
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "write assignment: %d records but %d offsets", (int)in->n,
                   (int)a->n_records);
    return check_writable(in, a, err, errlen);
}

/* The header and one line per record; 0, or -1 when a write failed (errno says why). */
static int write_rows(FILE *f, const pbl_records_file *in, const pbl_assignment *a)
{
    errno = 0;
    int bad = fputs("id,lower,upper,size,offset\n", f) < 0;
    for (int32_t i = 0; i < in->n && !bad; i++) {
        const pbl_usage_record *r = &in->records[i];
        if (in->ids)
            bad = fprintf(f, "%s,%lld,%lld,%lld,%lld\n", in->ids[i], (long long)r->first, (long long)r->last,
                          (long long)r->size, (long long)a->offset[i]) < 0;
        else
            bad = fprintf(f, "%d,%lld,%lld,%lld,%lld\n", (int)i, (long long)r->first, (long long)r->last,
                          (long long)r->size, (long long)a->offset[i]) < 0;
    }
    return bad ? -1 : 0;
}

PBL__API pbl_status pbl_assignment_write_csv(const char *path, const pbl_records_file *in, const pbl_assignment *a,
                                             char *err, size_t errlen)
{
    pbl__errclear(err, errlen);
    if (!path)
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "write assignment: NULL or negative arguments");
    pbl_status s = check_args(in, a, err, errlen);
    if (s != PBL_OK)
        return s;

    pbl__file_out o;
    s = pbl__file_out_open(&o, path, a->allocator, err, errlen);
    if (s != PBL_OK)
        return s;
    int bad = write_rows(o.f, in, a) != 0;
    if (bad)
        s = pbl__errf(err, errlen, PBL_ERR_IO, "%s: writing: %s", path, strerror(errno ? errno : EIO));
    pbl_status c = pbl__file_out_close(&o, !bad, err, errlen);
    return s != PBL_OK ? s : c;
}

PBL__API pbl_status pbl_assignment_print_csv(const pbl_records_file *in, const pbl_assignment *a, FILE *f,
                                             char *err, size_t errlen)
{
    pbl__errclear(err, errlen);
    if (!f)
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "write assignment: NULL or negative arguments");
    pbl_status s = check_args(in, a, err, errlen);
    if (s != PBL_OK)
        return s;
    if (write_rows(f, in, a) != 0 || fflush(f) != 0 || ferror(f))
        return pbl__errf(err, errlen, PBL_ERR_IO, "writing the assignment: %s", strerror(errno ? errno : EIO));
    return PBL_OK;
}
