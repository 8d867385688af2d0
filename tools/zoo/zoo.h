/*
 * zoo.h — well-known models as pebble graphs, for planning benchmarks and tests.
 *
 * Each model comes in an inference form ("resnet50": the forward pass, output "logits"; BERT's
 * is "sequence_output", the last hidden states) and a training form ("resnet50_train":
 * forward, loss, the backward pass of pbl_graph_gradient with respect to every parameter, and
 * one optimizer update per parameter, so one run of the graph is one training step; outputs
 * "logits" and "loss" besides). Graphs are built through the public API
 * only, with readable node names ("layer3.2.conv1", "layer7.attn.softmax") and parameters
 * named after the node that reads them ("layer3.2.conv1.weight").
 *
 *     pbl_graph *g;
 *     char err[256];
 *     if (zoo_build("bert_base_train", 0, &g, err, sizeof err) != PBL_OK)
 *         fprintf(stderr, "%s\n", err);
 *     ...  // plan it, dump it, count its bytes
 *     pbl_graph_destroy(g);
 *
 * The models (see zoo_describe for details):
 *   mlp           784-256-128-10, relu; the MLP of examples/train_mlp (batch 128, Adam)
 *   mlp50         784 -> 49 hidden layers of 512 -> 10, relu (batch 128, SGD with momentum)
 *   mlp100        784 -> 99 hidden layers of 128 -> 10, relu (batch 1024, SGD with momentum)
 *   resnet50      ImageNet ResNet-50 v1.5, 224x224 (batch 32, SGD with momentum)
 *   mobilenet_v2  ImageNet MobileNet v2 1.0, 224x224 (batch 32, SGD with momentum)
 *   bert_base     BERT-base encoder, sequence 128 (batch 8, Adam; MLM loss when training)
 *
 * Every op has a CPU kernel: every model runs on the CPU (resnet50_train at batch 32 plans a
 * 5.5 GiB arena; bert_base_train 2.6 GiB).
 *
 * Everything here is thread-safe: no state is shared between calls.
 */
#ifndef PEBBLE_ZOO_H
#define PEBBLE_ZOO_H

#include <stddef.h>
#include <stdint.h>

#include "pebble/pebble.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The number of models (inference and training forms counted separately), and the name and
 * a one-line description of model i (NULL when i is out of range). */
int         zoo_count(void);
const char *zoo_name(int i);
const char *zoo_describe(int i);

/* Builds the named model for `batch` samples (0: the model's default) into a new graph *out,
 * which the caller destroys with pbl_graph_destroy. The graph has been validated.
 * Returns PBL_ERR_NOT_FOUND (no such model), PBL_ERR_INVALID_ARG (NULL name or out, negative
 * batch), PBL_ERR_NOMEM, or what pebble returned while building; then *out is NULL and err
 * (may be NULL; errlen bytes) says what went wrong. */
pbl_status zoo_build(const char *name, int64_t batch, pbl_graph **out, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
