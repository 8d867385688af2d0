/*
 * The op descriptor: everything pebble knows about one op, kept together — its inputs and
 * attributes, shape rule, gradient rule, which data the gradient reads (the rest may die
 * early), in-place offers, mandatory aliasing for updates, its cost and its CPU kernel.
 */
#ifndef PBL_OP_H
#define PBL_OP_H

#include "graph/base/errmsg.h"
#include "graph/ir/graph_internal.h"

#define PBL__MAX_IN  16
#define PBL__MAX_OUT 4

typedef struct pbl__attr_spec {
    const char   *name;
    pbl_attr_type type;
    int32_t       required;
    int64_t       i;      /* default for INT */
    double        f;      /* default for FLOAT (INTS default to empty) */
} pbl__attr_spec;

/* What a shape rule sees: input metas and attribute slots; it fills out[] and, on error,
 * writes a detail into err ("x is [4, 3] but w is [5, 2]"). */
typedef struct pbl__infer_ctx {
    const pbl__meta     *in;
    int32_t              n_in;
    const pbl__attr_val *attr;
    pbl__meta           *out;
    char                *err;
    size_t               errlen;
} pbl__infer_ctx;

/* What a gradient rule sees. It sets dx[i] for inputs with need[i], emitting nodes through
 * pbl__grad_emit. Arrays are copies: the graph grows while the rule runs. An output nobody
 * differentiated has dy PBL_NONE; single-output rules are only called with dy[0] set. */
typedef struct pbl__grad_ctx {
    pbl_graph           *g;
    const char          *fwd_name;  /* the forward node's name */
    const pbl_value     *x;         /* its inputs */
    const pbl_value     *y;         /* its outputs */
    const pbl__attr_val *attr;
    int32_t              n_in;
    const pbl_value     *dy;        /* per output: incoming gradient or PBL_NONE */
    pbl_value           *dx;        /* per input: result, PBL_NONE when not set */
    const int32_t       *need;      /* per input: a gradient is wanted */
    pbl_status           status;    /* first failure of an emit */
} pbl__grad_ctx;

/* Emits one backward node `op` named "<fwd_name>/<suffix>" and returns its first output,
 * or PBL_NONE (c->status set) on failure. */
pbl_value pbl__grad_emit(pbl__grad_ctx *c, const char *op, const char *suffix,
                         const pbl_value *in, int32_t n_in, const pbl_attr *attrs, int32_t n_attrs);

/* Splitting one kernel's loop over threads (executor/cpu/pool.c). run calls fn(ctx, lo, hi)
 * over `parts` disjoint ranges covering [0, n), each a multiple of `align` long but the
 * last, each on whichever thread claims it first (the caller's or a worker), and returns
 * when all are done. A kernel reaches it through pbl__cpu_for (ops/cpu/kernels.h), which
 * decides whether a loop is long enough to be worth splitting and into how many parts. */
typedef void (*pbl__range_fn)(void *ctx, int64_t lo, int64_t hi);
typedef struct pbl__par {
    void   *pool;
    int32_t threads;  /* the caller and threads - 1 workers */
    int64_t min_work; /* the least work (elements x their cost) worth one part */
    int32_t products; /* 1: large matrix products split over the pool too, each part one
                         single-threaded BLAS call (BLAS's own threads are off); 0: BLAS
                         threads them itself (ops/cpu/linear.c) */
    void  (*run)(void *pool, int64_t n, int64_t align, int32_t parts, pbl__range_fn fn, void *ctx);
} pbl__par;

/* What a collective kernel (ops/comm/collective.c: allreduce) calls to reach the other ranks; the
 * executor fills it from its communicator (executor/comm/). sum_f32 sums n floats in place
 * across the ranks (every rank gets the same bits). `failed`: this rank's run has already
 * failed; it takes part all the same, marking the sum, so every rank fails at this
 * collective instead of waiting for one that never comes. Fails with a status and err when
 * a rank marked it, or does not take part in time. */
typedef struct pbl__collective {
    void      *ctx;
    int32_t    rank, size;
    pbl_status (*sum_f32)(void *ctx, float *data, int64_t n, int32_t failed, char *err, size_t errlen);
    /* The same sum over GPU memory, enqueued on `stream` (a cudaStream_t): it returns once the
     * engine has accepted the sum, not when the sum is done, so the host goes on enqueueing the
     * rest of the run (the backward pass overlaps the sum). NULL when the communicator reaches
     * host memory only (MPI). Fails when the communicator was aborted by an earlier failure. */
    pbl_status (*sum_f32_device)(void *ctx, float *data, int64_t n, void *stream, char *err, size_t errlen);
    /* The bounded wait of the device sums (NULL exactly when sum_f32_device is): waits until
     * every sum sum_f32_device enqueued since the previous call has completed on the device,
     * up to the communicator's timeout counted from this call. Past it, or on an asynchronous
     * engine error, it aborts the communicator (the pending sums end, every later device sum
     * fails) and returns PBL_ERR_TIMEOUT or PBL_ERR_DEVICE with err; PBL_OK at once when
     * nothing is pending. A backend calls it at the end of every run in which a kernel reached
     * sum_f32_device, before it blocks on its streams: a sum whose peer never comes would
     * otherwise block that synchronisation forever. */
    pbl_status (*wait_f32_device)(void *ctx, char *err, size_t errlen);
} pbl__collective;

/* What a kernel sees. Pointers are to the data of each input and output. */
typedef struct pbl__kargs {
    void *const         *in;
    void *const         *out;
    const pbl__meta     *in_meta;
    const pbl__meta     *out_meta;
    const pbl__attr_val *attr;
    int32_t              n_in, n_out;
    uint64_t             run;       /* run counter (seeds dropout masks) */
    char                *err;       /* a kernel that fails on its data explains here */
    size_t               errlen;
    const pbl__par      *par;       /* CPU: threads to split long loops over, or NULL (serial) */
    void                *scratch;   /* CPU: host memory for this kernel alone while it runs (its
                                       stream's), at least the op's cpu_scratch bytes */
    size_t               scratch_bytes;
    const pbl__collective *coll;    /* collective ops: the ranks to reduce over; NULL: one rank
                                       (the sum is the data itself) */
} pbl__kargs;

/* A node's work, from its shapes alone: the one cost model of pebble. graph/ir/cost.h turns
 * it into the number each consumer needs (stream colouring, DTR, static recomputation).
 *
 * flops counts arithmetic operations. A product counts its multiply-adds as two (2·m·n·k);
 * every other op counts one operation per element per pass over its data: a map (relu, add,
 * gelu, a copy) one per element written whatever its formula, a reduction one per element
 * read, softmax and the norms three per element (two passes for their statistics, one for the
 * output). Activations are thus one operation, as FLOP counters (fvcore, ptflops) count them:
 * such ops are bound by their memory traffic, not by their arithmetic. Bytes are what the
 * node's inputs and outputs hold: a kernel reads each input and writes each output once. */
typedef struct pbl__cost {
    int64_t flops;
    int64_t bytes_read;
    int64_t bytes_written;
} pbl__cost;

/* What a cost rule sees: the node's input and output metas and its attribute slots. */
typedef struct pbl__cost_ctx {
    const pbl__meta     *in;
    int32_t              n_in;
    const pbl__meta     *out;
    int32_t              n_out;
    const pbl__attr_val *attr;
} pbl__cost_ctx;

/* A cost rule is called with *out holding the default — bytes read and written, and one
 * operation per element written (a map) — and corrects what its op does otherwise (the
 * products' multiply-adds, a reduction's reads, a window's taps). */
typedef void (*pbl__cost_fn)(const pbl__cost_ctx *c, pbl__cost *out);

/* Kernels fail only on bad data (a label out of range); everything else was checked when the
 * node was built. */
typedef pbl_status (*pbl__cpu_fn)(const pbl__kargs *a);

typedef struct pbl__op {
    const char           *name;
    int32_t               n_in_min, n_in_max, n_out;
    const pbl__attr_spec *attrs;
    int32_t               n_attrs;
    pbl_status          (*infer)(pbl__infer_ctx *c);
    pbl_status          (*grad)(pbl__grad_ctx *c);  /* NULL: not differentiable */
    uint32_t              grad_reads_in;    /* bit i: the gradient reads input i's data */
    uint32_t              grad_reads_out;   /* bit k: the gradient reads output k's data */
    const int8_t        (*inplace)[2];      /* {out, in}: out may overwrite in (an offer) */
    int32_t               n_inplace;
    const int8_t        (*mutates)[2];      /* {out, in}: out IS in's storage (updates) */
    int32_t               n_mutates;
    pbl__cost_fn          cost;             /* NULL: a map (the default of pbl__cost_fn) */
    pbl__cpu_fn           cpu;              /* NULL: shape-only, planned but never run */
    /* Optional: the host scratch bytes the CPU kernel needs for a node (from the kargs'
     * metas and attrs; data pointers unset). The executor allocates the most any step
     * needs once per stream, at create, through its accounted allocator, so kernels never
     * allocate. NULL: none. */
    size_t              (*cpu_scratch)(const pbl__kargs *a);
    /* 1 + the index of an INT attribute that counts samples of the planned batch times a
     * constant (batch_norm_update's set_size, N·S): pbl_exec_set_batch(e, n) hands the kernel
     * that attribute scaled by n / planned batch, as the inputs it was derived from are not
     * the node's. 0: none (every other op reads its sizes from its metas). */
    int32_t               batch_attr;
    /* Optional: what the CPU backend runs instead of the kernel once an earlier kernel of the
     * run has failed (every other kernel is skipped then): collectives take part, marking the
     * failure, so the other ranks fail too rather than wait. NULL: skipped like the rest. */
    pbl__cpu_fn           cpu_after_failure;
} pbl__op;

/* Helpers shared by shape rules. */
pbl_status pbl__infer_same_as_input(pbl__infer_ctx *c);                 /* out[0] = in[0] */
pbl_status pbl__infer_check_f32(pbl__infer_ctx *c, int32_t i, const char *what);
pbl_status pbl__infer_check_same(pbl__infer_ctx *c, int32_t i, int32_t j, const char *a, const char *b);
/* (dy, saved) -> dx shaped like dy: the rule of the *_grad ops. */
pbl_status pbl__infer_grad_pair(pbl__infer_ctx *c);
/* A "shape" attribute as a shape: at most PBL_MAX_DIMS positive dims. */
pbl_status pbl__infer_shape_attr(pbl__infer_ctx *c, const pbl__attr_val *a, pbl_shape *out);
/* Fails a shape rule with status s and the detail in c->err (the one formatter). */
#define pbl__infer_fail(c, s, ...) pbl__errf((c)->err, (c)->errlen, (s), __VA_ARGS__)

/* Helpers shared by cost rules (graph/ir/cost.c). */
int64_t pbl__cost_numel(const pbl__meta *m);                /* elements; 1 for a scalar */
void    pbl__cost_reduce(const pbl__cost_ctx *c, pbl__cost *out); /* one per element of input 0 */

#endif
