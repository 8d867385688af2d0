/* What the ONNX loader (graph/onnx_load.c) and the tensor files (graph/onnx_tensor.c) share:
 * protobuf-c allocations through a pbl__mem, and TensorProto decoding with every size checked
 * against the data present. */
#ifndef PBL_ONNX_INTERNAL_H
#define PBL_ONNX_INTERNAL_H

#include <protobuf-c/protobuf-c.h>

#include "graph/mem.h"
#include "onnx/onnx.pb-c.h"
#include "pebble/onnx.h"

/* protobuf-c's allocator over m (sizes are kept in a small header, since protobuf-c's free
 * is not told them). protobuf-c reports a failed allocation as a failed unpack, like
 * malformed input: `failed` tells the two apart. */
typedef struct pbl__onnx_pb {
    pbl__mem *m;
    int       failed;
} pbl__onnx_pb;

ProtobufCAllocator pbl__onnx_pb_allocator(pbl__onnx_pb *pb);

/* The most elements one tensor may have: 2^40 (4 TiB of floats). Larger shapes are absurd
 * for this library and would overflow byte counts. */
#define PBL__ONNX_MAX_NUMEL ((int64_t)1 << 40)

/* A decoded tensor: floats (FLOAT, DOUBLE) or 64-bit integers (INT32, INT64). */
typedef struct pbl__onnx_data {
    pbl_shape shape;
    int64_t   numel;
    int       is_int;    /* 1: ints holds the data; 0: f holds it */
    float    *f;         /* numel floats from the weights' memory */
    int64_t  *ints;      /* numel int64 from the loader's memory */
} pbl__onnx_data;

/* Decodes t. Float data is allocated from fmem, integer data from imem. PBL_ERR_FORMAT (dims
 * negative or absurd, data size not matching the dims, raw data of the wrong length),
 * PBL_ERR_UNSUPPORTED (another element type, external data, rank above PBL_MAX_DIMS),
 * PBL_ERR_NOMEM. `what` names the tensor in messages. */
pbl_status pbl__onnx_data_decode(const Onnx__TensorProto *t, pbl__mem *fmem, pbl__mem *imem,
                                 pbl__onnx_data *out, const char *what, char *err, size_t errlen);
void       pbl__onnx_data_free(pbl__onnx_data *d, pbl__mem *fmem, pbl__mem *imem);

/* Reads a whole file into memory from m. PBL_ERR_IO names the path and errno text. */
pbl_status pbl__onnx_read_file(const char *path, pbl__mem *m, uint8_t **data, size_t *len,
                               char *err, size_t errlen);

#endif
