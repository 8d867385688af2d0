/*
 * pbl_onnx_weights_bind (pebble/onnx.h): an ONNX model's weights handed to an executor. It
 * lives on the executor's side of the layers — the graph layer loads the model and never
 * calls the executor — and uses nothing but the two public APIs.
 */
#include <stdio.h>

#include "graph/base/errmsg.h"
#include "graph/base/export.h"
#include "pebble/exec.h"
#include "pebble/onnx.h"

PBL__API pbl_status pbl_onnx_weights_bind(const pbl_onnx_weights *w, pbl_exec *e, char *err, size_t errlen)
{
    if (!w || !e)
        return PBL_ERR_INVALID_ARG;
    for (int32_t i = 0; i < pbl_onnx_weights_count(w); i++) {
        pbl_value v = PBL_NONE;
        void *data;
        size_t bytes;
        pbl_status s = pbl_onnx_weights_at(w, i, &v, &data, &bytes);
        if (s == PBL_OK)
            s = pbl_exec_bind(e, v, data, bytes);
        if (s != PBL_OK) {
            return pbl__errf(err, errlen, s, "binding weight %d (value %d): %s", (int)i, (int)v, pbl_exec_errmsg(e));
        }
    }
    return PBL_OK;
}
