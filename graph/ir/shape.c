/* Shapes and dtypes: the small value types of pebble/graph.h. */
#include <stdio.h>
#include <string.h>

#include "graph/ir/graph_internal.h"

PBL__API pbl_shape pbl_shape_make(int32_t ndim, const int64_t *dims)
{
    pbl_shape s;
    memset(&s, 0, sizeof s);
    if (ndim < 0 || ndim > PBL_MAX_DIMS) {
        s.ndim = -1; /* rejected wherever a shape is taken in */
        return s;
    }
    s.ndim = ndim;
    for (int32_t i = 0; i < ndim; i++)
        s.dim[i] = dims[i];
    return s;
}

PBL__API int64_t pbl_shape_numel(const pbl_shape *s)
{
    int64_t n = 1;
    for (int32_t i = 0; i < s->ndim; i++)
        n *= s->dim[i];
    return n;
}

PBL__API int pbl_shape_equal(const pbl_shape *a, const pbl_shape *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int32_t i = 0; i < a->ndim; i++)
        if (a->dim[i] != b->dim[i])
            return 0;
    return 1;
}

PBL__API char *pbl_shape_str(const pbl_shape *s, char *buf, size_t size)
{
    size_t at = 0;
    if (size == 0)
        return buf;
    buf[0] = '\0';
    at += (size_t)snprintf(buf + at, size - at, "[");
    for (int32_t i = 0; i < s->ndim && at < size; i++)
        at += (size_t)snprintf(buf + at, size - at, i ? ", %lld" : "%lld", (long long)s->dim[i]);
    if (at < size)
        snprintf(buf + at, size - at, "]");
    return buf;
}

PBL__API size_t pbl_dtype_size(pbl_dtype t)
{
    switch (t) {
    case PBL_F32: return 4;
    case PBL_I32: return 4;
    }
    return 0;
}

PBL__API const char *pbl_dtype_name(pbl_dtype t)
{
    switch (t) {
    case PBL_F32: return "f32";
    case PBL_I32: return "i32";
    }
    return "?";
}

PBL__API const char *pbl_value_kind_name(pbl_value_kind k)
{
    static const char *const names[] = { "input", "param", "label", "state", "node", "scalar" };
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

size_t pbl__meta_bytes(const pbl__meta *m)
{
    return (size_t)pbl_shape_numel(&m->shape) * pbl_dtype_size(m->dtype);
}
