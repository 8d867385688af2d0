/* Private to the executor: what the executor's files share beyond the public API. */
#ifndef PBL_EXEC_INTERNAL_H
#define PBL_EXEC_INTERNAL_H

#include "pebble/exec.h"

/* The graph the executor was created from. */
const pbl_graph *pbl__exec_graph(const pbl_exec *e);

/* Records `fmt` as e's error message and returns `s` (so callers can `return pbl__exec_fail(...)`). */
pbl_status pbl__exec_fail(pbl_exec *e, pbl_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Host memory through e's allocator (accounted in pbl_exec_stats). */
void *pbl__exec_malloc(pbl_exec *e, size_t bytes);
void  pbl__exec_free(pbl_exec *e, void *p, size_t bytes);
/* e's allocator hook, for helpers that keep their own accounting (NULL: malloc). */
const pbl_allocator *pbl__exec_allocator(const pbl_exec *e);

/* Sets the run counter pbl_exec_run_count reports and the next run's dropout masks draw from:
 * a loaded checkpoint continues the counter of the run that saved it (executor/checkpoint.c). */
void pbl__exec_set_run_count(pbl_exec *e, uint64_t runs);

/* pbl_exec_create with each node's stream given: stream_of_node[node] in [0, n_streams) for
 * every node the schedule runs. The cross-stream waits come from the graph's dependencies.
 * Several streams need PBL_STORAGE_UNSHARED (the serial plan would share bytes between steps
 * that may now run at the same time): PBL_ERR_UNSUPPORTED otherwise. For tests of the stream
 * runtime with any assignment. */
pbl_status pbl__exec_create_assigned(pbl_exec **out, const pbl_graph *g, const pbl_exec_options *opt,
                                     int32_t n_streams, const int32_t *stream_of_node, char *errmsg,
                                     size_t errlen);

/* The stream node n runs on in e's schedule, or -1 when the schedule does not run it (tests:
 * where the communication nodes went). */
int32_t pbl__exec_node_stream(const pbl_exec *e, pbl_node n);

#endif
