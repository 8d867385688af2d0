/*
 * pebble/pebble.h — everything: build a graph, differentiate it, run it.
 *
 *   version.h   the version: PBL_VERSION_MAJOR/MINOR/PATCH, pbl_version() with the commit
 *   status.h    status codes, pbl_status_str
 *   alloc.h     the optional host allocator hook
 *   graph.h     the graph: variables, op nodes, outputs, validation, dump
 *   builder.h   one-line helpers per op
 *   ops.h       the op list and each op's inputs and attributes
 *   autodiff.h  the gradient pass, optimizer update nodes, clipping, learning-rate schedules
 *   exec.h      the executor: bind, run, read, checkpoints
 *   plan.h      the memory planner's core: usage records in, arena offsets out
 *   plan_io.h   records and assignments as CSV (MiniMalloc's format)
 *   liveness.h  from a graph to usage records
 *   schedule.h  the node order: program order, or the one with the smallest lower bound
 *   streams.h   several streams: colouring, race-free (happens-before) memory planning
 *   bfc.h       a best-fit-with-coalescing memory pool for dynamic mode
 *   json.h      graphs saved and loaded as JSON
 *   onnx.h      ONNX models as graphs, ONNX tensor files
 *   viz.h       every strategy's plan and the live-bytes curve, as data and JSON, for pictures;
 *               the peak explained: what is live there, where the arena wastes, what would lower it
 *   recompute.h static recomputation: drop forward values, compute them again in backward
 *   fuse.h      operator fusion: dense layers and element-wise chains as single nodes
 *
 * The example at the top of each header is compiled and linked by the test suite, and run
 * when it is a whole program or assumes nothing (test/doc_examples.sh: how they are written).
 */
#ifndef PEBBLE_PEBBLE_H
#define PEBBLE_PEBBLE_H

#include "pebble/version.h"
#include "pebble/status.h"
#include "pebble/alloc.h"
#include "pebble/graph.h"
#include "pebble/builder.h"
#include "pebble/ops.h"
#include "pebble/autodiff.h"
#include "pebble/exec.h"
#include "pebble/plan.h"
#include "pebble/plan_io.h"
#include "pebble/liveness.h"
#include "pebble/schedule.h"
#include "pebble/bfc.h"
#include "pebble/json.h"
#include "pebble/streams.h"
#include "pebble/onnx.h"
#include "pebble/viz.h"
#include "pebble/recompute.h"
#include "pebble/fuse.h"

#endif
