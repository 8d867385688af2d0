/* ONNX TensorProto: decoding with every size checked (shared with the loader), and the tensor
 * files of pebble/onnx.h (ONNX's test_data_set_N/input_K.pb). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph/base/errmsg.h"
#include "graph/base/export.h"
#include "graph/base/file_in.h"
#include "graph/base/file_out.h"
#include "graph/io/onnx_internal.h"

/* ---- protobuf-c through pbl__mem ----------------------------------------------------------- */

/* 16 bytes before each block hold its size, keeping malloc's alignment. */
enum { PB_HEADER = 16 };

static void *pb_alloc(void *user, size_t size)
{
    pbl__onnx_pb *pb = user;
    char *p = size > SIZE_MAX - PB_HEADER ? NULL : pbl__mem_alloc(pb->m, size + PB_HEADER);
    if (!p) {
        pb->failed = 1;
        return NULL;
    }
    memcpy(p, &size, sizeof size);
    return p + PB_HEADER;
}

static void pb_free(void *user, void *ptr)
{
    if (!ptr)
        return;
    char *p = (char *)ptr - PB_HEADER;
    size_t size;
    memcpy(&size, p, sizeof size);
    pbl__mem_free(((pbl__onnx_pb *)user)->m, p, size + PB_HEADER);
}

ProtobufCAllocator pbl__onnx_pb_allocator(pbl__onnx_pb *pb)
{
    pb->failed = 0;
    return (ProtobufCAllocator){ .alloc = pb_alloc, .free = pb_free, .allocator_data = pb };
}

/* ---- decoding -------------------------------------------------------------------------------- */

const char *pbl__onnx_type_name(int32_t t)
{
    static const char *const names[] = { "UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16",
                                         "INT32", "INT64", "STRING", "BOOL", "FLOAT16", "DOUBLE",
                                         "UINT32", "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16" };
    return t >= 0 && t < (int32_t)(sizeof names / sizeof names[0]) ? names[t] : "an unknown type";
}

pbl_status pbl__onnx_data_decode(const Onnx__TensorProto *t, pbl__mem *fmem, pbl__mem *imem,
                                 pbl__onnx_data *out, const char *what, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    int32_t type = t->has_data_type ? t->data_type : 0;
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return pbl__errf(err, errlen, PBL_ERR_UNSUPPORTED, "%s: external tensor data is not supported", what);
    if (type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && type != ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE &&
        type != ONNX__TENSOR_PROTO__DATA_TYPE__INT32 && type != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 &&
        type != ONNX__TENSOR_PROTO__DATA_TYPE__BOOL)
        return pbl__errf(err, errlen, PBL_ERR_UNSUPPORTED, "%s: element type %s (%d) is not supported "
                    "(FLOAT, DOUBLE, INT32, INT64, BOOL are)", what, pbl__onnx_type_name(type), (int)type);
    /* BOOL is stored as one byte per element (raw) or in int32_data: integers 0/1 from here on */
    int is_bool = type == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    if (t->n_dims > PBL_MAX_DIMS)
        return pbl__errf(err, errlen, PBL_ERR_UNSUPPORTED, "%s: rank %zu is above pebble's limit of %d", what,
                    t->n_dims, PBL_MAX_DIMS);
    int64_t numel = 1;
    out->shape.ndim = (int32_t)t->n_dims;
    for (size_t k = 0; k < t->n_dims; k++) {
        int64_t d = t->dims[k];
        if (d < 0 || (d > 0 && numel > PBL__ONNX_MAX_NUMEL / d))
            return pbl__errf(err, errlen, PBL_ERR_FORMAT, "%s: dim %zu is %lld, %s", what, k, (long long)d,
                        d < 0 ? "negative" : "too large (over 2^40 elements in all)");
        numel *= d;
        out->shape.dim[k] = d;
    }
    out->numel = numel;
    out->is_int = type == ONNX__TENSOR_PROTO__DATA_TYPE__INT32 || type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 || is_bool;
    /* an empty tensor (Resize's unused roi, an absent scales) holds no data: marked empty,
     * pbl__onnx_get refuses it as a value, converters and folding may read it as a list */
    if (numel == 0) {
        out->empty = 1;
        return PBL_OK;
    }
    size_t esize = is_bool ? 1 : type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || type == ONNX__TENSOR_PROTO__DATA_TYPE__INT32 ? 4 : 8;
    size_t have;
    if (t->has_raw_data)
        have = t->raw_data.len / esize;
    else if (type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        have = t->n_float_data;
    else if (type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE)
        have = t->n_double_data;
    else if (type == ONNX__TENSOR_PROTO__DATA_TYPE__INT32 || is_bool)
        have = t->n_int32_data;
    else
        have = t->n_int64_data;
    if ((t->has_raw_data && t->raw_data.len % esize != 0) || have != (size_t)numel)
        return pbl__errf(err, errlen, PBL_ERR_FORMAT, "%s: dims give %lld elements but the data holds %zu %s", what,
                    (long long)numel, t->has_raw_data ? t->raw_data.len : have,
                    t->has_raw_data ? "raw bytes" : "elements");
    const uint8_t *raw = t->has_raw_data ? t->raw_data.data : NULL;
    if (out->is_int) {
        out->ints = pbl__mem_alloc(imem, (size_t)numel * sizeof *out->ints);
        if (!out->ints)
            return pbl__errf(err, errlen, PBL_ERR_NOMEM, "%s: out of memory", what);
        for (int64_t i = 0; i < numel; i++) {
            if (is_bool) {
                out->ints[i] = raw ? raw[i] != 0 : t->int32_data[i] != 0;
            } else if (type == ONNX__TENSOR_PROTO__DATA_TYPE__INT32) {
                int32_t v;
                if (raw)
                    memcpy(&v, raw + 4 * i, 4); /* little-endian by the format; so is every host we build on */
                else
                    v = t->int32_data[i];
                out->ints[i] = v;
            } else if (raw) {
                memcpy(&out->ints[i], raw + 8 * i, 8);
            } else {
                out->ints[i] = t->int64_data[i];
            }
        }
    } else {
        out->f = pbl__mem_alloc(fmem, (size_t)numel * sizeof *out->f);
        if (!out->f)
            return pbl__errf(err, errlen, PBL_ERR_NOMEM, "%s: out of memory", what);
        if (type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) {
            memcpy(out->f, raw ? (const void *)raw : (const void *)t->float_data, (size_t)numel * 4);
        } else {
            for (int64_t i = 0; i < numel; i++) {
                double v;
                if (raw)
                    memcpy(&v, raw + 8 * i, 8);
                else
                    v = t->double_data[i];
                out->f[i] = (float)v;
            }
        }
    }
    return PBL_OK;
}

void pbl__onnx_data_free(pbl__onnx_data *d, pbl__mem *fmem, pbl__mem *imem)
{
    if (!d)
        return;
    pbl__mem_free(fmem, d->f, (size_t)d->numel * sizeof *d->f);
    pbl__mem_free(imem, d->ints, (size_t)d->numel * sizeof *d->ints);
    d->f = NULL;
    d->ints = NULL;
}

pbl_status pbl__onnx_read_file(const char *path, pbl__mem *m, uint8_t **data, size_t *len,
                               char *err, size_t errlen)
{
    return pbl__file_in_read(path, "a protobuf file", PBL__FILE_IN_MAX_BINARY, m, data, len, err, errlen);
}

/* ---- tensor files ---------------------------------------------------------------------------- */

/* Decodes the TensorProto in bytes[0..len) into *out (zeroed on entry); messages start with
 * path, the file's name or what the caller calls the bytes. */
static pbl_status tensor_parse(const uint8_t *bytes, size_t len, const char *path, pbl__mem *m,
                               pbl_onnx_tensor *out, char *err, size_t errlen)
{
    pbl_status s = PBL_OK;
    pbl__onnx_pb pb = { .m = m };
    /* heap: what the caller gets; pbl_onnx_tensor has no allocator, so that is malloc'd (a
     * pbl__mem without a hook), and pbl_onnx_tensor_free frees it the same way */
    pbl__mem heap;
    pbl__mem_init(&heap, NULL);
    ProtobufCAllocator pa = pbl__onnx_pb_allocator(&pb);
    Onnx__TensorProto *t = onnx__tensor_proto__unpack(&pa, len, bytes);
    pbl__onnx_data d = { 0 };
    if (!t) {
        s = pb.failed ? pbl__errf(err, errlen, PBL_ERR_NOMEM, "%s: out of memory", path)
                      : pbl__errf(err, errlen, PBL_ERR_FORMAT, "%s: not a valid TensorProto (protobuf decoding failed)", path);
        goto done;
    }
    char what[512];
    snprintf(what, sizeof what, "%s", path);
    s = pbl__onnx_data_decode(t, &heap, m, &d, what, err, errlen);
    if (s != PBL_OK)
        goto done;
    out->shape = d.shape;
    out->name = pbl__mem_strdup(&heap, t->name ? t->name : "");
    if (d.is_int) {
        out->dtype = PBL_I32;
        int32_t *v = pbl__mem_alloc(&heap, (size_t)d.numel * sizeof *v);
        if (v) {
            for (int64_t i = 0; i < d.numel; i++) {
                if (d.ints[i] < INT32_MIN || d.ints[i] > INT32_MAX) {
                    pbl__mem_free(&heap, v, (size_t)d.numel * sizeof *v);
                    pbl__mem_strfree(&heap, out->name);
                    memset(out, 0, sizeof *out);
                    s = pbl__errf(err, errlen, PBL_ERR_UNSUPPORTED, "%s: element %lld is %lld, outside int32", path,
                             (long long)i, (long long)d.ints[i]);
                    goto done;
                }
                v[i] = (int32_t)d.ints[i];
            }
        }
        out->data = v;
        out->bytes = (size_t)d.numel * sizeof *v;
    } else {
        out->dtype = PBL_F32;
        out->data = d.f; /* from heap: ownership passes to the caller */
        d.f = NULL;
        out->bytes = (size_t)d.numel * sizeof(float);
    }
    if (!out->data || !out->name) {
        pbl_onnx_tensor_free(out);
        s = pbl__errf(err, errlen, PBL_ERR_NOMEM, "%s: out of memory", path);
    }
done:
    pbl__mem_free(&heap, d.f, (size_t)d.numel * sizeof *d.f);
    pbl__mem_free(m, d.ints, d.ints ? (size_t)d.numel * sizeof *d.ints : 0);
    if (t)
        onnx__tensor_proto__free_unpacked(t, &pa);
    return s;
}

PBL__API pbl_status pbl_onnx_tensor_read(const char *path, pbl_onnx_tensor *out, char *err, size_t errlen)
{
    if (!out)
        return PBL_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    if (!path)
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "no path given");
    pbl__mem m;
    pbl__mem_init(&m, NULL);
    uint8_t *bytes;
    size_t len;
    pbl_status s = pbl__onnx_read_file(path, &m, &bytes, &len, err, errlen);
    if (s != PBL_OK)
        return s;
    s = tensor_parse(bytes, len, path, &m, out, err, errlen);
    pbl__mem_free(&m, bytes, len + 1);
    return s;
}

PBL__API pbl_status pbl_onnx_tensor_parse(const void *data, size_t len, const char *name, pbl_onnx_tensor *out,
                                          char *err, size_t errlen)
{
    if (!out)
        return PBL_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    if (!data && len)
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "no data given");
    pbl__mem m;
    pbl__mem_init(&m, NULL);
    return tensor_parse(data ? (const uint8_t *)data : (const uint8_t *)"", len, name ? name : "<bytes>", &m, out, err,
                        errlen);
}

PBL__API pbl_status pbl_onnx_tensor_write(const char *path, const pbl_onnx_tensor *t, char *err, size_t errlen)
{
    if (!path || !t || (!t->data && t->bytes))
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "pbl_onnx_tensor_write: a path and a tensor are required");
    if (t->shape.ndim < 0 || t->shape.ndim > PBL_MAX_DIMS ||
        (size_t)pbl_shape_numel(&t->shape) * pbl_dtype_size(t->dtype) != t->bytes)
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "%s: the tensor's bytes (%zu) do not match its shape", path, t->bytes);
    Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
    int64_t dims[PBL_MAX_DIMS];
    for (int32_t k = 0; k < t->shape.ndim; k++)
        dims[k] = t->shape.dim[k];
    tp.n_dims = (size_t)t->shape.ndim;
    tp.dims = dims;
    tp.has_data_type = 1;
    tp.data_type = t->dtype == PBL_F32 ? ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT : ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
    tp.name = t->name ? t->name : (char *)"";
    tp.has_raw_data = 1;
    tp.raw_data.len = t->bytes;
    tp.raw_data.data = t->data;
    size_t n = onnx__tensor_proto__get_packed_size(&tp);
    pbl__mem m;
    pbl__mem_init(&m, NULL);
    uint8_t *buf = pbl__mem_alloc(&m, n ? n : 1);
    if (!buf)
        return pbl__errf(err, errlen, PBL_ERR_NOMEM, "%s: out of memory", path);
    onnx__tensor_proto__pack(&tp, buf);
    /* whole or nothing; a symlink's target is replaced, a FIFO or device written in place */
    pbl__file_out o;
    pbl_status s = pbl__file_out_open(&o, path, NULL, err, errlen);
    if (s == PBL_OK) {
        errno = 0;
        int ok = fwrite(buf, 1, n, o.f) == n;
        if (!ok)
            s = pbl__errf(err, errlen, PBL_ERR_IO, "%s: writing: %s", path, strerror(errno ? errno : EIO));
        pbl_status c = pbl__file_out_close(&o, ok, err, errlen);
        if (s == PBL_OK)
            s = c;
    }
    pbl__mem_free(&m, buf, n ? n : 1);
    return s;
}

PBL__API void pbl_onnx_tensor_free(pbl_onnx_tensor *t)
{
    if (!t)
        return;
    pbl__mem m; /* as pbl_onnx_tensor_read allocated them: no hook */
    pbl__mem_init(&m, NULL);
    pbl__mem_strfree(&m, t->name);
    pbl__mem_free(&m, t->data, t->bytes);
    memset(t, 0, sizeof *t);
}
