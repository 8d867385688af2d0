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

#endif
