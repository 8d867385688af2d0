/* libFuzzer target for the ONNX loader: any bytes must give a graph or a clean error (a
 * negative status, a message, no graph, no weights), never a crash, a leak or a huge
 * allocation. A model that loads must validate, its weights must be parameters of their
 * exact size, and it must survive a JSON round trip. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pebble/json.h"
#include "pebble/onnx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pbl_graph *g = NULL;
    pbl_onnx_weights *w = NULL;
    pbl_onnx_options o = pbl_onnx_options_default();
    o.weights = &w;
    char err[1024] = "";
    pbl_status s = pbl_graph_from_onnx(&g, data, size, &o, err, sizeof err);
    if (s != PBL_OK) {
        if (g || w || !err[0] || s >= 0) {
            fprintf(stderr, "error without a clean result: %d '%s'\n", (int)s, err);
            abort();
        }
        return 0;
    }
    if (pbl_graph_validate(g) != PBL_OK) {
        fprintf(stderr, "a loaded graph does not validate: %s\n", pbl_graph_errmsg(g));
        abort();
    }
    for (int32_t i = 0; i < pbl_onnx_weights_count(w); i++) {
        pbl_value v;
        void *p;
        size_t bytes;
        pbl_value_info vi;
        if (pbl_onnx_weights_at(w, i, &v, &p, &bytes) != PBL_OK || pbl_graph_value_info(g, v, &vi) != PBL_OK ||
            vi.kind != PBL_VALUE_PARAM || bytes != (size_t)pbl_shape_numel(&vi.shape) * pbl_dtype_size(vi.dtype)) {
            fprintf(stderr, "weight %d does not match its parameter\n", (int)i);
            abort();
        }
    }
    char *t = NULL;
    size_t n = 0;
    pbl_graph *h = NULL;
    if (pbl_graph_to_json(g, &t, &n, err, sizeof err) == PBL_OK &&
        pbl_graph_from_json(&h, t, n, NULL, err, sizeof err) != PBL_OK) {
        fprintf(stderr, "a loaded ONNX graph does not survive JSON: %s\n", err);
        abort();
    }
    pbl_json_free(t);
    pbl_graph_destroy(h);
    pbl_onnx_weights_destroy(w);
    pbl_graph_destroy(g);
    return 0;
}
