/*
 * A small pool of worker threads that splits one CPU kernel's loop (pbl__par, graph/ir/op.h).
 *
 * The CPU backend opens one for an executor that runs on one stream with threads > 1. It lets
 * the element-wise kernels, the bias-gradient sums and the optimizer updates between the
 * matrix products use the same cores instead of running on the caller's alone (each element
 * still computed by the same code, so results do not depend on the split), and, unless the
 * caller fixed BLAS's thread count, it splits the large products too (ops/cpu/linear.c).
 *
 * Workers start at create and stop at destroy (never per run or per kernel). Between jobs a
 * worker polls for the next one for a short while before it sleeps, so a run of consecutive
 * split kernels (the updates of every parameter) does not pay a wake-up each time. Each job
 * runs under the dispatching thread's MXCSR (flush-to-zero, denormals-are-zero, rounding),
 * so a part computes the same bits on a worker as on the caller.
 *
 * Thread-safety: one dispatching thread at a time (the executor's).
 */
#ifndef PBL_CPU_POOL_H
#define PBL_CPU_POOL_H

#include "graph/base/mem.h"
#include "graph/ir/op.h"

typedef struct pbl__cpu_pool pbl__cpu_pool;

/* Starts threads - 1 workers (threads >= 2) that poll `spin` times for the next job before
 * they sleep, as the dispatcher does for the last part of its job: the first 256 polls are
 * pause instructions (some 40-150 ns each on current x86 cores), any further ones
 * sched_yield calls (about a microsecond each where nothing else wants the core). PBL_ERR_NOMEM when memory or a thread cannot be had;
 * *out is NULL then. `host` must outlive the pool. */
pbl_status pbl__cpu_pool_create(pbl__mem *host, int32_t threads, int32_t spin, pbl__cpu_pool **out);
void       pbl__cpu_pool_destroy(pbl__cpu_pool *p); /* accepts NULL; joins the workers */

/* The pool as kernels see it (kargs->par). min_work: pbl__par.min_work. */
pbl__par   pbl__cpu_pool_par(pbl__cpu_pool *p, int64_t min_work);

/* Jobs dispatched so far (tests check that a kernel really split). */
uint64_t   pbl__cpu_pool_jobs(const pbl__cpu_pool *p);

#endif
