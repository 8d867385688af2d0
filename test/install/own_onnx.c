/* A program with ONNX code of its own: protobuf-c's output for onnx.proto defines these names
 * in it too, and it calls pebble's ONNX loader, so libpebble.a's ONNX code is linked in
 * beside them. The link fails with "multiple definition" unless libpebble.a keeps its copy of
 * protobuf-c's onnx__* symbols to itself. */
#include <pebble/pebble.h>

const char onnx__model_proto__descriptor[] = "the program's own";
int onnx__model_proto__get_packed_size(void);
int onnx__model_proto__get_packed_size(void) { return 0; }

pbl_onnx_options own_onnx_options(void);
pbl_onnx_options own_onnx_options(void) { return pbl_onnx_options_default(); }
