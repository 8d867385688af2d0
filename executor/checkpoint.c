/* Checkpoints: every parameter and state variable of an executor's graph, its runtime
 * scalars and its run counter, saved to and loaded from one file.
 *
 * File format, version 2 (version 1 is the same without the part marked "version 2"; both
 * load). Every integer is little-endian; so is tensor data (each element is stored in the
 * byte order of a little-endian host, whatever the host's own order is).
 *
 *     offset  bytes          field
 *     0       8              magic "PBLCKPT\0"
 *     8       4              u32 version (2)
 *     12      4              u32 count: number of tensors that follow
 *     then `count` records, in the graph's value order:
 *             4              u32 name_len
 *             name_len       name (UTF-8 as given to the graph, no NUL)
 *             4              u32 dtype (pbl_dtype: 0 f32, 1 i32)
 *             4              u32 ndim (0..PBL_MAX_DIMS)
 *             8 * ndim       i64 dims
 *             8              u64 nbytes (= numel * dtype size)
 *             nbytes         data
 *     version 2:
 *             8              u64 runs: pbl_exec_run_count (dropout masks draw from it)
 *             4              u32 n_scalars: number of runtime scalars that follow
 *     then `n_scalars` records, in the graph's value order:
 *             4              u32 name_len
 *             name_len       name (no NUL)
 *             4              f32 value (its bits, little-endian; finite)
 *     end-4   4              u32 CRC-32 (zlib's crc32) of every byte before it
 *
 * Scalars hold what the loop set (the learning rate of the schedule's step, Adam's step, the
 * training switch): without them a resumed run would restart Adam's bias correction and the
 * schedule. On load, a scalar of the file that the graph has as a scalar is restored; one the
 * graph does not have is skipped (the graph keeps that hyper-parameter as a constant, or not
 * at all); a name the graph gives a non-scalar value is PBL_ERR_NOT_FOUND. A scalar of the
 * graph the file lacks (every scalar, for a version-1 file) keeps its current value. The run
 * counter is restored from a version-2 file and kept with a version-1 file.
 *
 * Saving goes through graph/base/file_out.h: a regular file (or the file a symbolic link
 * names) is written under a temporary name beside it, flushed, fsynced and renamed over it,
 * keeping its mode: rename within a directory is atomic, so a reader sees the old file or
 * the new one, never a mixture, and a failed save leaves the old file as it was. A FIFO or a
 * device is written in place (renaming over it would replace the node).
 *
 * Loading reads the whole file into memory and checks all of it — structure, CRC, and every
 * record against the graph — before the first pbl_exec_write, so a bad file cannot leave the
 * executor half-loaded.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <zlib.h>

#include "executor/exec_internal.h"
#include "graph/base/export.h"
#include "graph/base/file_in.h"
#include "graph/base/file_out.h"

#define CKPT_VERSION      2u /* written; 1 and 2 are read */
#define CKPT_VERSION_MIN  1u
#define CKPT_MAGIC_LEN    8
#define CKPT_HEADER_LEN   (CKPT_MAGIC_LEN + 4 + 4)
#define CKPT_CRC_LEN      4
/* The whole file is held in memory while it is checked; beyond this it is surely not ours. */
#define CKPT_MAX_FILE     ((uint64_t)4 << 30)

static const unsigned char ckpt_magic[CKPT_MAGIC_LEN] = { 'P', 'B', 'L', 'C', 'K', 'P', 'T', 0 };

static int is_saved_kind(pbl_value_kind k)
{
    return k == PBL_VALUE_PARAM || k == PBL_VALUE_STATE;
}

static int host_is_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* Converts `bytes` of elements of `elem` bytes between host order and little-endian (the
 * same operation both ways). A no-op on little-endian hosts. */
static void swap_to_little(unsigned char *p, size_t bytes, size_t elem)
{
    if (host_is_little_endian() || elem < 2)
        return;
    for (size_t i = 0; i + elem <= bytes; i += elem)
        for (size_t a = 0, b = elem - 1; a < b; a++, b--) {
            unsigned char t = p[i + a];
            p[i + a] = p[i + b];
            p[i + b] = t;
        }
}

/* zlib's crc32 takes a uInt length; feed it in pieces so tensors over 4 GiB still work. */
static uLong crc_update(uLong crc, const unsigned char *p, size_t n)
{
    while (n > 0) {
        uInt piece = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = crc32(crc, p, piece);
        p += piece;
        n -= piece;
    }
    return crc;
}

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* ---- saving ---------------------------------------------------------------------------- */

/* A FILE that keeps the running CRC of what went through it and remembers the first error,
 * so the record loop can write straight through and check once. */
typedef struct ckpt_writer {
    FILE *f;
    uLong crc;
    int   err; /* errno of the first failed write, 0 if none */
} ckpt_writer;

static void writer_put(ckpt_writer *w, const void *p, size_t n)
{
    if (w->err || n == 0)
        return;
    if (fwrite(p, 1, n, w->f) != n) {
        w->err = errno ? errno : EIO;
        return;
    }
    w->crc = crc_update(w->crc, p, n);
}

static void writer_u32(ckpt_writer *w, uint32_t v)
{
    unsigned char b[4];
    put_u32(b, v);
    writer_put(w, b, sizeof b);
}

static void writer_u64(ckpt_writer *w, uint64_t v)
{
    unsigned char b[8];
    put_u64(b, v);
    writer_put(w, b, sizeof b);
}

static size_t value_bytes(const pbl_value_info *vi)
{
    return (size_t)pbl_shape_numel(&vi->shape) * pbl_dtype_size(vi->dtype);
}

PBL__API pbl_status pbl_exec_save_check(pbl_exec *e, const char *path)
{
    if (!e)
        return PBL_ERR_INVALID_ARG;
    if (!path || !*path)
        return pbl__exec_fail(e, PBL_ERR_INVALID_ARG, "pbl_exec_save_check: no path given");
    char why[256];
    pbl_status s = pbl__file_out_check(path, pbl__exec_allocator(e), why, sizeof why);
    return s == PBL_OK ? s : pbl__exec_fail(e, s, "saving %s", why);
}

/* Version 2's tail of the records: the run counter, then every runtime scalar's current
 * value (its f32 bits, so a resumed run continues from exactly what was set). */
static pbl_status write_scalars(pbl_exec *e, const char *path, const pbl_graph *g, ckpt_writer *w)
{
    const int32_t n_values = pbl_graph_value_count(g);
    uint32_t n_scalars = 0;
    for (pbl_value v = 0; v < n_values; v++) {
        pbl_value_info vi;
        n_scalars += pbl_graph_value_info(g, v, &vi) == PBL_OK && vi.kind == PBL_VALUE_SCALAR;
    }
    writer_u64(w, pbl_exec_run_count(e));
    writer_u32(w, n_scalars);
    for (pbl_value v = 0; v < n_values && !w->err; v++) {
        pbl_value_info vi;
        if (pbl_graph_value_info(g, v, &vi) != PBL_OK || vi.kind != PBL_VALUE_SCALAR)
            continue;
        float x;
        pbl_status s = pbl_exec_read(e, v, &x, sizeof x);
        if (s != PBL_OK) {
            char why[256];
            snprintf(why, sizeof why, "%s", pbl_exec_errmsg(e));
            return pbl__exec_fail(e, s, "saving '%s': reading scalar '%s': %s", path, vi.name, why);
        }
        uint32_t bits;
        memcpy(&bits, &x, sizeof bits);
        size_t name_len = strlen(vi.name);
        writer_u32(w, (uint32_t)name_len);
        writer_put(w, vi.name, name_len);
        writer_u32(w, bits);
    }
    return PBL_OK;
}

PBL__API pbl_status pbl_exec_save(pbl_exec *e, const char *path)
{
    if (!e)
        return PBL_ERR_INVALID_ARG;
    if (!path || !*path)
        return pbl__exec_fail(e, PBL_ERR_INVALID_ARG, "pbl_exec_save: no path given");

    const pbl_graph *g = pbl__exec_graph(e);
    const int32_t n_values = pbl_graph_value_count(g);
    pbl_status s = PBL_OK;
    char why[256];

    /* One scratch buffer the size of the largest tensor carries every tensor to the file. */
    uint32_t count = 0;
    size_t max_bytes = 0;
    for (pbl_value v = 0; v < n_values; v++) {
        pbl_value_info vi;
        if (pbl_graph_value_info(g, v, &vi) != PBL_OK || !is_saved_kind(vi.kind))
            continue;
        count++;
        if (value_bytes(&vi) > max_bytes)
            max_bytes = value_bytes(&vi);
    }

    unsigned char *buf = NULL;
    if (max_bytes > 0) {
        buf = pbl__exec_malloc(e, max_bytes);
        if (!buf)
            return pbl__exec_fail(e, PBL_ERR_NOMEM, "saving '%s': out of memory (%zu bytes)", path,
                                  max_bytes);
    }

    /* file_out decides how the bytes reach path: a temporary renamed over a regular file (or
     * a link's target), in place for a FIFO or a device. */
    pbl__file_out o;
    s = pbl__file_out_open(&o, path, pbl__exec_allocator(e), why, sizeof why);
    if (s != PBL_OK) {
        s = pbl__exec_fail(e, s, "saving %s", why);
        goto fail_free_buf;
    }
    ckpt_writer w = { .f = o.f, .crc = crc32(0L, Z_NULL, 0), .err = 0 };

    writer_put(&w, ckpt_magic, sizeof ckpt_magic);
    writer_u32(&w, CKPT_VERSION);
    writer_u32(&w, count);
    for (pbl_value v = 0; v < n_values && !w.err; v++) {
        pbl_value_info vi;
        if (pbl_graph_value_info(g, v, &vi) != PBL_OK || !is_saved_kind(vi.kind))
            continue;
        size_t bytes = value_bytes(&vi);
        s = pbl_exec_read(e, v, buf, bytes);
        if (s != PBL_OK) {
            /* e's message is about to be overwritten by our own: keep a copy to quote. */
            snprintf(why, sizeof why, "%s", pbl_exec_errmsg(e));
            s = pbl__exec_fail(e, s, "saving '%s': reading '%s': %s", path, vi.name, why);
            goto fail_discard;
        }
        swap_to_little(buf, bytes, pbl_dtype_size(vi.dtype));
        size_t name_len = strlen(vi.name);
        writer_u32(&w, (uint32_t)name_len);
        writer_put(&w, vi.name, name_len);
        writer_u32(&w, (uint32_t)vi.dtype);
        writer_u32(&w, (uint32_t)vi.shape.ndim);
        for (int32_t d = 0; d < vi.shape.ndim; d++)
            writer_u64(&w, (uint64_t)vi.shape.dim[d]);
        writer_u64(&w, (uint64_t)bytes);
        writer_put(&w, buf, bytes);
    }
    if (!w.err) {
        s = write_scalars(e, path, g, &w);
        if (s != PBL_OK)
            goto fail_discard;
    }
    unsigned char crc[CKPT_CRC_LEN];
    put_u32(crc, (uint32_t)w.crc);
    writer_put(&w, crc, sizeof crc);
    if (w.err) {
        s = pbl__exec_fail(e, PBL_ERR_IO, "saving %s: writing: %s", path, strerror(w.err));
        goto fail_discard;
    }
    /* flushes, fsyncs and renames; on failure the target keeps its old content */
    s = pbl__file_out_close(&o, 1, why, sizeof why);
    if (s != PBL_OK)
        s = pbl__exec_fail(e, s, "saving %s", why);
    pbl__exec_free(e, buf, max_bytes);
    return s;

fail_discard:
    pbl__file_out_close(&o, 0, NULL, 0);
fail_free_buf:
    pbl__exec_free(e, buf, max_bytes);
    return s;
}

/* ---- loading --------------------------------------------------------------------------- */

/* One tensor record as found in the file; pointers point into the file's bytes. */
typedef struct ckpt_record {
    const unsigned char *name;
    uint32_t             name_len;
    uint32_t             dtype;
    uint32_t             ndim;
    const unsigned char *dims;   /* ndim little-endian i64 */
    uint64_t             nbytes;
    unsigned char       *data;   /* not const: converted to host order in place */
    uint64_t             offset; /* of the record in the file, for messages */
} ckpt_record;

/* Walks the records of a version-1 file in p[0..end) (end excludes the CRC), checking only
 * that every length stays inside the file. Fills rec[0..count-1] when rec is not NULL.
 * Returns 0, or -1 with *bad_record and *bad_offset saying where the walk left the file;
 * *tail is the first byte after the last record. */
static int walk_records(unsigned char *p, uint64_t end, uint32_t count, ckpt_record *rec,
                        uint32_t *bad_record, uint64_t *bad_offset, uint64_t *tail)
{
    uint64_t at = CKPT_HEADER_LEN;
    for (uint32_t i = 0; i < count; i++) {
        ckpt_record r = { .offset = at };
        *bad_record = i;
        *bad_offset = at;
        if (end - at < 4)
            return -1;
        r.name_len = get_u32(p + at);
        at += 4;
        if (end - at < (uint64_t)r.name_len + 8)
            return -1;
        r.name = p + at;
        at += r.name_len;
        r.dtype = get_u32(p + at);
        r.ndim = get_u32(p + at + 4);
        at += 8;
        if ((end - at) / 8 < (uint64_t)r.ndim + 1)
            return -1;
        r.dims = p + at;
        at += 8 * (uint64_t)r.ndim;
        r.nbytes = get_u64(p + at);
        at += 8;
        if (end - at < r.nbytes)
            return -1;
        r.data = p + at;
        at += r.nbytes;
        if (rec)
            rec[i] = r;
    }
    *tail = at;
    return 0;
}

/* One runtime scalar as found in a version-2 file. */
typedef struct ckpt_scalar {
    const unsigned char *name;
    uint32_t             name_len;
    uint32_t             bits; /* the f32's bits, host order */
} ckpt_scalar;

/* Version 2's tail in p[at..end): the run counter, the scalar count, the scalars. Same
 * contract as walk_records; *bad_record counts scalars (0: the counts themselves). */
static int walk_scalars(const unsigned char *p, uint64_t at, uint64_t end, uint64_t *runs,
                        uint32_t *n_scalars, ckpt_scalar *sc, uint32_t *bad_record,
                        uint64_t *bad_offset, uint64_t *tail)
{
    *bad_record = 0;
    *bad_offset = at;
    if (end - at < 12)
        return -1;
    *runs = get_u64(p + at);
    *n_scalars = get_u32(p + at + 8);
    at += 12;
    for (uint32_t i = 0; i < *n_scalars; i++) {
        *bad_record = i + 1;
        *bad_offset = at;
        if (end - at < 4)
            return -1;
        ckpt_scalar r = { .name_len = get_u32(p + at) };
        at += 4;
        if (end - at < (uint64_t)r.name_len + 4)
            return -1;
        r.name = p + at;
        r.bits = get_u32(p + at + r.name_len);
        at += (uint64_t)r.name_len + 4;
        if (sc)
            sc[i] = r;
    }
    *tail = at;
    return 0;
}

/* Reads all of `path` into memory through e's allocator. */
static pbl_status read_whole_file(pbl_exec *e, const char *path, unsigned char **out,
                                  size_t *out_len)
{
    pbl_status s = PBL_OK;
    *out = NULL;
    *out_len = 0;
    /* a regular file of at most CKPT_MAX_FILE bytes, opened without blocking on a FIFO */
    FILE *f;
    uint64_t size;
    char why[1024];
    s = pbl__file_in_open(path, "a checkpoint", CKPT_MAX_FILE < SIZE_MAX ? CKPT_MAX_FILE : SIZE_MAX, &f, &size,
                          why, sizeof why);
    if (s != PBL_OK)
        return pbl__exec_fail(e, s, "loading %s", why);
    size_t len = (size_t)size;
    unsigned char *p = pbl__exec_malloc(e, len ? len : 1);
    if (!p) {
        s = pbl__exec_fail(e, PBL_ERR_NOMEM, "loading '%s': out of memory (%zu bytes)", path,
                           len);
        goto fail_close;
    }
    size_t got = fread(p, 1, len, f);
    if (got != len || ferror(f)) {
        /* The file shrank under us, or the read failed: either way not what fstat promised. */
        s = pbl__exec_fail(e, PBL_ERR_IO, "loading '%s': read %zu of %zu bytes: %s", path, got,
                           len, ferror(f) ? strerror(errno) : "file changed while reading");
        pbl__exec_free(e, p, len ? len : 1);
        goto fail_close;
    }
    fclose(f);
    *out = p;
    *out_len = len;
    return PBL_OK;

fail_close:
    fclose(f);
    return s;
}

/* What check_file found: the version and the counts of a file whose records exactly fill it. */
typedef struct ckpt_layout {
    uint32_t version;
    uint32_t count;     /* tensors */
    uint32_t n_scalars; /* 0 in version 1 */
    uint64_t runs;      /* version 2: the saved run counter */
    uint64_t scalars_at; /* version 2: offset of the run counter (the end of the tensors) */
} ckpt_layout;

/* Walks every record of the file (both sections of a version-2 file). 0, or -1 with the
 * part that runs past `end` named in where[] ("tensor 2 of 3", "scalar 1 of 2", ...) and
 * its offset in *bad_offset, for the message. */
static int walk_file(unsigned char *p, uint64_t end, ckpt_layout *l, char *where, size_t where_len,
                     uint64_t *bad_offset, uint64_t *tail)
{
    uint32_t bad = 0;
    if (walk_records(p, end, l->count, NULL, &bad, bad_offset, tail) != 0) {
        snprintf(where, where_len, "tensor %u of %u", bad + 1, l->count);
        return -1;
    }
    if (l->version < 2)
        return 0;
    l->scalars_at = *tail;
    if (walk_scalars(p, *tail, end, &l->runs, &l->n_scalars, NULL, &bad, bad_offset, tail) != 0) {
        if (bad == 0)
            snprintf(where, where_len, "the scalar section");
        else
            snprintf(where, where_len, "scalar %u of %u", bad, l->n_scalars);
        return -1;
    }
    return 0;
}

/* Checks the file's length, magic, CRC, version and that its records exactly fill it. */
static pbl_status check_file(pbl_exec *e, const char *path, unsigned char *p, size_t len,
                             ckpt_layout *l)
{
    memset(l, 0, sizeof *l);
    if (len < CKPT_HEADER_LEN + CKPT_CRC_LEN)
        return pbl__exec_fail(e, PBL_ERR_FORMAT,
                              "loading '%s': %zu bytes is too short for a checkpoint "
                              "(truncated?)", path, len);
    if (memcmp(p, ckpt_magic, CKPT_MAGIC_LEN) != 0)
        return pbl__exec_fail(e, PBL_ERR_FORMAT,
                              "loading '%s': not a pebble checkpoint (bad magic)", path);

    const uint64_t end = len - CKPT_CRC_LEN;
    const uint32_t stored = get_u32(p + end);
    const uint32_t computed = (uint32_t)crc_update(crc32(0L, Z_NULL, 0), p, end);
    l->version = get_u32(p + CKPT_MAGIC_LEN);
    l->count = get_u32(p + CKPT_MAGIC_LEN + 4);
    const int known = l->version >= CKPT_VERSION_MIN && l->version <= CKPT_VERSION;

    char where[64] = "";
    uint64_t bad_offset = 0, tail = 0;
    int walked = known ? walk_file(p, end, l, where, sizeof where, &bad_offset, &tail) : -1;
    if (stored != computed) {
        /* A CRC mismatch is corruption, unless the records run off the end: then the likelier
         * story is a file cut short, and saying so helps more. */
        if (known && walked != 0)
            return pbl__exec_fail(e, PBL_ERR_FORMAT,
                                  "loading '%s': truncated: %s (at byte %llu) runs past the end "
                                  "of the %zu-byte file", path, where,
                                  (unsigned long long)bad_offset, len);
        return pbl__exec_fail(e, PBL_ERR_CHECKSUM,
                              "loading '%s': CRC-32 mismatch (file says %08x, contents give "
                              "%08x): the file is corrupt", path, stored, computed);
    }
    if (!known)
        return pbl__exec_fail(e, PBL_ERR_FORMAT,
                              "loading '%s': checkpoint version %u, this library reads "
                              "versions %u to %u", path, l->version, CKPT_VERSION_MIN,
                              CKPT_VERSION);
    if (walked != 0)
        return pbl__exec_fail(e, PBL_ERR_FORMAT,
                              "loading '%s': %s (at byte %llu) runs past the end of the file",
                              path, where, (unsigned long long)bad_offset);
    if (tail != end)
        return pbl__exec_fail(e, PBL_ERR_FORMAT,
                              "loading '%s': %llu unexpected bytes after the last %s", path,
                              (unsigned long long)(end - tail),
                              l->version < 2 ? "tensor" : "record");
    return PBL_OK;
}

/* Checks one record on its own (dtype, rank, dims, byte count) and against the graph.
 * On success *v is the variable it loads into. `seen` marks variables already loaded. */
static pbl_status match_record(pbl_exec *e, const char *path, const ckpt_record *r,
                               uint32_t index, char *name, unsigned char *seen, pbl_value *v)
{
    const pbl_graph *g = pbl__exec_graph(e);
    memcpy(name, r->name, r->name_len);
    name[r->name_len] = '\0';
    if (memchr(r->name, '\0', r->name_len))
        return pbl__exec_fail(e, PBL_ERR_FORMAT, "loading '%s': tensor %u has a NUL in its name",
                              path, index + 1);
    if (r->dtype != PBL_F32 && r->dtype != PBL_I32)
        return pbl__exec_fail(e, PBL_ERR_FORMAT, "loading '%s': tensor '%s' has unknown dtype %u",
                              path, name, r->dtype);
    if (r->ndim > PBL_MAX_DIMS)
        return pbl__exec_fail(e, PBL_ERR_FORMAT,
                              "loading '%s': tensor '%s' has rank %u (at most %d)", path, name,
                              r->ndim, PBL_MAX_DIMS);
    pbl_shape file_shape = { .ndim = (int32_t)r->ndim };
    uint64_t numel = 1;
    for (uint32_t d = 0; d < r->ndim; d++) {
        int64_t dim = (int64_t)get_u64(r->dims + 8 * d);
        /* Bounding each dim by the byte count keeps the product from overflowing. */
        if (dim <= 0 || (uint64_t)dim > r->nbytes)
            return pbl__exec_fail(e, PBL_ERR_FORMAT,
                                  "loading '%s': tensor '%s' has dimension %lld", path, name,
                                  (long long)dim);
        file_shape.dim[d] = dim;
        numel *= (uint64_t)dim;
        if (numel > r->nbytes)
            break; /* reported just below as a byte-count mismatch */
    }
    const pbl_dtype file_dtype = (pbl_dtype)r->dtype;
    if (numel > r->nbytes || numel * pbl_dtype_size(file_dtype) != r->nbytes)
        return pbl__exec_fail(e, PBL_ERR_FORMAT,
                              "loading '%s': tensor '%s' holds %llu bytes, its shape needs more "
                              "or fewer", path, name, (unsigned long long)r->nbytes);

    *v = pbl_graph_find_value(g, name);
    pbl_value_info vi;
    if (*v == PBL_NONE || pbl_graph_value_info(g, *v, &vi) != PBL_OK || !is_saved_kind(vi.kind))
        return pbl__exec_fail(e, PBL_ERR_NOT_FOUND,
                              "loading '%s': tensor '%s' is not a parameter or state variable of "
                              "the graph", path, name);
    if (seen[*v])
        return pbl__exec_fail(e, PBL_ERR_FORMAT, "loading '%s': tensor '%s' appears twice", path,
                              name);
    if (vi.dtype != file_dtype || !pbl_shape_equal(&vi.shape, &file_shape)) {
        char fs[128], gs[128];
        pbl_shape_str(&file_shape, fs, sizeof fs);
        pbl_shape_str(&vi.shape, gs, sizeof gs);
        return pbl__exec_fail(e, PBL_ERR_SHAPE,
                              "loading '%s': tensor '%s' is %s %s in the file but %s %s in the "
                              "graph", path, name, pbl_dtype_name(file_dtype), fs,
                              pbl_dtype_name(vi.dtype), gs);
    }
    seen[*v] = 1;
    return PBL_OK;
}

/* Checks one scalar of the file: a name without NUL, a finite value, and a graph value of
 * that name that is a scalar, not already given. *v is that scalar, or PBL_NONE when the
 * graph has no value of that name (the file's scalar is then skipped). */
static pbl_status match_scalar(pbl_exec *e, const char *path, const ckpt_scalar *r, uint32_t index,
                               char *name, unsigned char *seen, pbl_value *v)
{
    const pbl_graph *g = pbl__exec_graph(e);
    memcpy(name, r->name, r->name_len);
    name[r->name_len] = '\0';
    *v = PBL_NONE;
    if (memchr(r->name, '\0', r->name_len))
        return pbl__exec_fail(e, PBL_ERR_FORMAT, "loading '%s': scalar %u has a NUL in its name",
                              path, index + 1);
    float x;
    memcpy(&x, &r->bits, sizeof x);
    /* pbl_exec_set_scalar refuses these: a NaN rate would turn every weight into NaN */
    if (!isfinite(x))
        return pbl__exec_fail(e, PBL_ERR_FORMAT,
                              "loading '%s': scalar '%s' is %s (bits %08x); a scalar must be finite",
                              path, name, isnan(x) ? "NaN" : "infinite", r->bits);
    pbl_value found = pbl_graph_find_value(g, name);
    if (found == PBL_NONE)
        return PBL_OK;
    pbl_value_info vi;
    if (pbl_graph_value_info(g, found, &vi) != PBL_OK || vi.kind != PBL_VALUE_SCALAR)
        return pbl__exec_fail(e, PBL_ERR_NOT_FOUND,
                              "loading '%s': scalar '%s' is a %s in the graph, not a scalar", path,
                              name, pbl_value_kind_name(vi.kind));
    if (seen[found])
        return pbl__exec_fail(e, PBL_ERR_FORMAT, "loading '%s': scalar '%s' appears twice", path,
                              name);
    seen[found] = 1;
    *v = found;
    return PBL_OK;
}

PBL__API pbl_status pbl_exec_load(pbl_exec *e, const char *path)
{
    if (!e)
        return PBL_ERR_INVALID_ARG;
    if (!path || !*path)
        return pbl__exec_fail(e, PBL_ERR_INVALID_ARG, "pbl_exec_load: no path given");

    const pbl_graph *g = pbl__exec_graph(e);
    const int32_t n_values = pbl_graph_value_count(g);
    unsigned char *p;
    size_t len;
    pbl_status s = read_whole_file(e, path, &p, &len);
    if (s != PBL_OK)
        return s;
    const size_t p_bytes = len ? len : 1;

    ckpt_layout l;
    s = check_file(e, path, p, len, &l);
    if (s != PBL_OK)
        goto free_file;
    const uint32_t count = l.count, n_scalars = l.n_scalars;

    /* check_file walked every record inside the file, so count and n_scalars are bounded by
     * its length (a tensor takes at least 20 bytes, a scalar 8) and these allocations are too. */
    size_t rec_bytes = (size_t)(count ? count : 1) * sizeof(ckpt_record);
    size_t sc_bytes = (size_t)(n_scalars ? n_scalars : 1) * sizeof(ckpt_scalar);
    size_t target_bytes = (size_t)((uint64_t)count + n_scalars + 1) * sizeof(pbl_value);
    ckpt_record *rec = pbl__exec_malloc(e, rec_bytes);
    ckpt_scalar *sc = pbl__exec_malloc(e, sc_bytes);
    pbl_value *target = pbl__exec_malloc(e, target_bytes); /* tensors', then scalars' */
    size_t seen_bytes = (size_t)(n_values ? n_values : 1);
    unsigned char *seen = pbl__exec_malloc(e, seen_bytes);
    size_t name_bytes = 1;
    char *name = NULL;
    if (!rec || !sc || !target || !seen) {
        s = pbl__exec_fail(e, PBL_ERR_NOMEM, "loading '%s': out of memory", path);
        goto free_tables;
    }
    memset(seen, 0, seen_bytes);
    uint32_t bad_record;
    uint64_t bad_offset, tail, runs;
    uint32_t n_walked;
    /* check_file walked both already: these walks fill the tables and cannot fail */
    walk_records(p, len - CKPT_CRC_LEN, count, rec, &bad_record, &bad_offset, &tail);
    if (l.version >= 2)
        walk_scalars(p, l.scalars_at, len - CKPT_CRC_LEN, &runs, &n_walked, sc, &bad_record,
                     &bad_offset, &tail);

    for (uint32_t i = 0; i < count; i++)
        if ((size_t)rec[i].name_len + 1 > name_bytes)
            name_bytes = (size_t)rec[i].name_len + 1;
    for (uint32_t i = 0; i < n_scalars; i++)
        if ((size_t)sc[i].name_len + 1 > name_bytes)
            name_bytes = (size_t)sc[i].name_len + 1;
    name = pbl__exec_malloc(e, name_bytes);
    if (!name) {
        s = pbl__exec_fail(e, PBL_ERR_NOMEM, "loading '%s': out of memory", path);
        goto free_tables;
    }
    for (uint32_t i = 0; i < count; i++) {
        s = match_record(e, path, &rec[i], i, name, seen, &target[i]);
        if (s != PBL_OK)
            goto free_tables;
    }
    for (uint32_t i = 0; i < n_scalars; i++) {
        s = match_scalar(e, path, &sc[i], i, name, seen, &target[count + i]);
        if (s != PBL_OK)
            goto free_tables;
    }
    for (pbl_value v = 0; v < n_values; v++) {
        pbl_value_info vi;
        if (pbl_graph_value_info(g, v, &vi) == PBL_OK && is_saved_kind(vi.kind) && !seen[v]) {
            s = pbl__exec_fail(e, PBL_ERR_NOT_FOUND,
                               "loading '%s': the graph's %s '%s' is not in the file", path,
                               vi.kind == PBL_VALUE_PARAM ? "parameter" : "state variable",
                               vi.name);
            goto free_tables;
        }
    }

    /* Everything checked: only now touch the executor. */
    for (uint32_t i = 0; i < count; i++) {
        size_t elem = pbl_dtype_size((pbl_dtype)rec[i].dtype);
        swap_to_little(rec[i].data, (size_t)rec[i].nbytes, elem);
        s = pbl_exec_write(e, target[i], rec[i].data, (size_t)rec[i].nbytes);
        if (s != PBL_OK) {
            memcpy(name, rec[i].name, rec[i].name_len);
            name[rec[i].name_len] = '\0';
            goto fail_write;
        }
    }
    for (uint32_t i = 0; i < n_scalars; i++) {
        if (target[count + i] == PBL_NONE)
            continue; /* a scalar the graph does not have */
        float x;
        memcpy(&x, &sc[i].bits, sizeof x);
        s = pbl_exec_write(e, target[count + i], &x, sizeof x);
        if (s != PBL_OK) {
            memcpy(name, sc[i].name, sc[i].name_len);
            name[sc[i].name_len] = '\0';
            goto fail_write;
        }
    }
    if (l.version >= 2)
        pbl__exec_set_run_count(e, l.runs);
    goto free_tables;

fail_write: {
        char why[256];
        snprintf(why, sizeof why, "%s", pbl_exec_errmsg(e));
        s = pbl__exec_fail(e, s, "loading '%s': writing '%s': %s", path, name, why);
    }
free_tables:
    pbl__exec_free(e, name, name_bytes);
    pbl__exec_free(e, seen, seen_bytes);
    pbl__exec_free(e, target, target_bytes);
    pbl__exec_free(e, sc, sc_bytes);
    pbl__exec_free(e, rec, rec_bytes);
free_file:
    pbl__exec_free(e, p, p_bytes);
    return s;
}
