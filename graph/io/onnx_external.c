/*
 * External tensor data: initializers whose bytes live in a file beside the model, as
 * torch.onnx.export (the torch.export-based exporter, PyTorch's default since 2.9) and
 * onnx.save(..., save_as_external_data=True) write them. A TensorProto then names, in
 * external_data, a `location` relative to the model's folder, an `offset` and a `length`
 * (decimal strings; ONNX's IR spec, onnx.proto's TensorProto.external_data).
 *
 * A model is untrusted input, and the location is a path it chooses, so only a plain relative
 * path is followed: no absolute path, no `..` component, nothing empty; the file must be a
 * regular file (graph/base/file_in.c's checks), and the range must lie inside it and hold
 * exactly the tensor's bytes. Only that range is read, so a data file of any size costs the
 * tensor's bytes in memory.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/base/file_in.h"
#include "graph/io/onnx_internal.h"

/* A data file may hold every weight of a model: its own size is not the limit, each tensor's
 * range is (PBL__ONNX_MAX_NUMEL elements at most, like any tensor). */
#define EXTERNAL_FILE_MAX ((uint64_t)1 << 46)

/* external_data's value of `key`, or NULL. */
static const char *entry(const Onnx__TensorProto *t, const char *key)
{
    for (size_t i = 0; i < t->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = t->external_data[i];
        if (e && e->key && strcmp(e->key, key) == 0)
            return e->value ? e->value : "";
    }
    return NULL;
}

/* A non-negative decimal integer, the whole string; -1 when it is not one. */
static int64_t decimal(const char *s)
{
    if (!s || !*s)
        return -1;
    int64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || v > (INT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

/* 1 when loc is a relative path with no empty, "." -only or ".." component ("a/b.data"). */
static int plain_relative(const char *loc)
{
    if (!*loc || *loc == '/')
        return 0;
    for (const char *p = loc; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 0 || (n == 2 && p[0] == '.' && p[1] == '.'))
            return 0;
        p += n;
        p += *p == '/';
    }
    return 1;
}

/* Bytes per element of the raw form of the types pbl__onnx_data_decode reads; 0 otherwise. */
static size_t element_bytes(int32_t type)
{
    switch (type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: return 4;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: return 8;
    default: return 0;
    }
}

/* t as if its bytes[0..len) were inline raw data: decode checks and converts it like any other. */
static pbl_status decode_inline(pbl__onnx_ctx *c, const Onnx__TensorProto *t, uint8_t *bytes, size_t len,
                                pbl__onnx_data *out, const char *what)
{
    Onnx__TensorProto inner = *t;
    inner.has_data_location = 0;
    inner.n_external_data = 0;
    inner.has_raw_data = 1;
    inner.raw_data.len = len;
    inner.raw_data.data = bytes;
    return pbl__onnx_data_decode(&inner, &c->w->mem, &c->mem, out, what, c->err, c->errlen);
}

/* Lists path among the files the weights were read from (pbl_onnx_weights_file_at), once:
 * a caller that writes files (pebble run --output-dir) must not replace one of them. */
static pbl_status note_file(pbl__onnx_ctx *c, const char *path)
{
    pbl_onnx_weights *w = c->w;
    if (!w)
        return PBL_OK;
    for (int32_t i = 0; i < w->n_files; i++)
        if (strcmp(w->files[i], path) == 0)
            return PBL_OK;
    char *copy = NULL;
    if (pbl__mem_reserve(&w->mem, (void **)&w->files, &w->cap_files, w->n_files + 1, sizeof *w->files) != PBL_OK ||
        !(copy = pbl__mem_strdup(&w->mem, path)))
        return pbl__onnx_fail(c, PBL_ERR_NOMEM, "out of memory");
    w->files[w->n_files++] = copy;
    return PBL_OK;
}

pbl_status pbl__onnx_external_decode(pbl__onnx_ctx *c, const Onnx__TensorProto *t, pbl__onnx_data *out, const char *what)
{
    memset(out, 0, sizeof *out);
    if (!c->dir)
        return pbl__onnx_fail(c, PBL_ERR_UNSUPPORTED, "%s: its data is in an external file, which only a model loaded from "
                              "its file can name (pbl_graph_load_onnx, not pbl_graph_from_onnx)", what);
    const char *loc = entry(t, "location"), *off_s = entry(t, "offset"), *len_s = entry(t, "length");
    if (!loc)
        return pbl__onnx_fail(c, PBL_ERR_FORMAT, "%s: external data without a location", what);
    if (!plain_relative(loc))
        return pbl__onnx_fail(c, PBL_ERR_FORMAT, "%s: external data location '%s' is not a relative path inside the "
                              "model's folder (no leading '/', no '..')", what, loc);
    int64_t offset = off_s ? decimal(off_s) : 0, length = len_s ? decimal(len_s) : -2;
    if (offset < 0 || length == -1)
        return pbl__onnx_fail(c, PBL_ERR_FORMAT, "%s: external data %s '%s' is not a non-negative integer", what,
                              offset < 0 ? "offset" : "length", offset < 0 ? off_s : len_s);
    /* The tensor's own bytes, from its dims and type: what the range must hold. */
    size_t esize = element_bytes(t->has_data_type ? t->data_type : 0);
    int64_t numel = 1;
    for (size_t k = 0; k < t->n_dims && esize; k++) {
        int64_t d = t->dims[k];
        if (d < 0 || (d > 0 && numel > PBL__ONNX_MAX_NUMEL / d))
            return pbl__onnx_fail(c, PBL_ERR_FORMAT, "%s: dim %zu is %lld, %s", what, k, (long long)d,
                                  d < 0 ? "negative" : "too large (over 2^40 elements in all)");
        numel *= d;
    }
    if (!esize || numel == 0 || t->n_dims > PBL_MAX_DIMS) /* decode's own message says why */
        return decode_inline(c, t, NULL, 0, out, what);
    int64_t want = numel * (int64_t)esize;
    if (length >= 0 && length != want)
        return pbl__onnx_fail(c, PBL_ERR_FORMAT, "%s: external data length is %lld bytes, but its dims and type need %lld",
                              what, (long long)length, (long long)want);

    size_t dl = strlen(c->dir), ll = strlen(loc);
    char *path = pbl__mem_alloc(&c->mem, dl + ll + 2);
    if (!path)
        return pbl__onnx_fail(c, PBL_ERR_NOMEM, "out of memory");
    memcpy(path, c->dir, dl);
    path[dl] = '/';
    memcpy(path + dl + 1, loc, ll + 1);
    FILE *f = NULL;
    uint64_t size = 0;
    uint8_t *bytes = NULL;
    char why[512] = "";
    pbl_status s = pbl__file_in_open(path, "an external tensor data file", EXTERNAL_FILE_MAX, &f, &size, why, sizeof why);
    if (s != PBL_OK) { /* "PATH: cannot open: ..." under the initializer's name */
        s = pbl__onnx_fail(c, s, "%s: external data: %s", what, why);
        goto done;
    }
    if ((uint64_t)offset > size || (uint64_t)want > size - (uint64_t)offset) {
        s = pbl__onnx_fail(c, PBL_ERR_FORMAT, "%s: external data bytes %lld to %lld are past the end of %s (%llu bytes)",
                           what, (long long)offset, (long long)(offset + want), path, (unsigned long long)size);
        goto done;
    }
    bytes = pbl__mem_alloc(&c->mem, (size_t)want);
    if (!bytes) {
        s = pbl__onnx_fail(c, PBL_ERR_NOMEM, "%s: out of memory for its %lld bytes", what, (long long)want);
        goto done;
    }
    if (fseeko(f, (off_t)offset, SEEK_SET) != 0 || fread(bytes, 1, (size_t)want, f) != (size_t)want) {
        s = pbl__onnx_fail(c, PBL_ERR_IO, "%s: reading %lld bytes at %lld of %s: %s", what, (long long)want,
                           (long long)offset, path, ferror(f) ? strerror(errno) : "the file is shorter than that");
        goto done;
    }
    s = decode_inline(c, t, bytes, (size_t)want, out, what);
    if (s == PBL_OK)
        s = note_file(c, path);
done:
    if (f)
        fclose(f);
    pbl__mem_free(&c->mem, bytes, (size_t)want);
    pbl__mem_free(&c->mem, path, dl + ll + 2);
    return s;
}
