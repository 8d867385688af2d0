/*
 * pebble/exec.h — running a graph.
 *
 * An executor compiles a graph once — schedule, storage for every value, kernels — and then
 * runs it as often as asked. Variables take their data from caller buffers (pbl_exec_bind,
 * zero-copy; the buffer must outlive the executor or the next bind) or from executor-owned
 * storage written with pbl_exec_write. State variables start zero-filled. Node outputs live
 * in executor storage and are read back with pbl_exec_read.
 *
 *     // given pbl_graph *g; pbl_value x, y, w1, loss; float w1_data[256 * 784];
 *     // given const float *batch; const int32_t *labels; size_t batch_bytes, label_bytes;
 *     pbl_exec *e;
 *     char err[256];
 *     pbl_exec_options o = pbl_exec_options_default();
 *     if (pbl_exec_create(&e, g, &o, err, sizeof err) != PBL_OK) {
 *         fprintf(stderr, "%s\n", err);
 *         return 1;
 *     }
 *     pbl_exec_bind(e, w1, w1_data, sizeof w1_data);      // parameters: caller-owned
 *     for (int step = 0; step < 100; step++) {
 *         pbl_exec_write(e, x, batch, batch_bytes);         // inputs: copied in
 *         pbl_exec_write(e, y, labels, label_bytes);
 *         if (pbl_exec_run(e) != PBL_OK)                    // forward, backward, update
 *             fprintf(stderr, "%s\n", pbl_exec_errmsg(e));
 *         float l;
 *         pbl_exec_read(e, loss, &l, sizeof l);
 *     }
 *     pbl_exec_destroy(e);
 *
 * By default an executor computes every graph output and every update node; `targets` in the
 * options restricts it to what some outputs need (an evaluation executor over a training
 * graph runs only the forward pass, sharing parameters through pbl_exec_bind).
 *
 * Dynamic mode (storage = PBL_STORAGE_DYNAMIC). Nothing is planned ahead: the schedule runs
 * node by node, each node output is allocated from a pool when its node runs and freed after
 * its last reader (graph outputs stay until the next run). With `budget` set, the pool's
 * charged bytes (each tensor rounded up to 256) never exceed it: when an allocation would,
 * the resident tensor with the smallest h_DTR = cost / (bytes x staleness) is evicted, its
 * cost including that of the evicted tensors around it (h_DTR^eq of Kirisame et al., "Dynamic
 * Tensor Rematerialization", ICLR 2021, as MegEngine implements it), and an evicted tensor is
 * recomputed by re-running its producer when it is read again. Costs are estimated from shapes
 * (multiply-adds and elements touched), staleness counts kernels, so runs are reproducible.
 * Never evicted: variables (they are outside the pool and the budget), update outputs, the
 * running node's inputs and outputs, and any tensor that could only be recomputed after an
 * update overwrote a weight it depends on. Results are bit-identical to planned storage.
 * pbl_exec_create checks the budget with a dry run (no kernels, the same decisions) and
 * returns PBL_ERR_BUDGET, naming the smallest budget that works, when it cannot run the graph.
 * The pool is a BFC pool (pebble/bfc.h) over the backend's memory, told to split every chunk
 * so that a tensor's chunk is its size rounded up to 256: the budget is the pool's in-use
 * bytes; the regions it holds may exceed it by fragmentation (dynamic_pool_bytes).
 * `trace` is the pool's allocation trace (pbl_bfc_options.trace: "op,id,bytes" rows, the
 * format bench/bfc_replay reads); `evict_log` gets a CSV row per eviction and
 * rematerialisation: `event,run,clock,value,bytes,detail` (detail: h_DTR^eq of the victim;
 * the nesting of a rematerialisation).
 *
 * Bits. For one graph and the same inputs, unshared, planned and dynamic storage, any number of
 * streams and any `threads` give the same bits as long as the products run the same way (the
 * same blas_threads >= 1; blas_threads 0 with threads > 1 splits them by `threads`), and
 * BLAS's kernel (OpenBLAS picks one per CPU; OPENBLAS_CORETYPE overrides it) and the OpenBLAS
 * build stay the same; several streams run BLAS single-threaded, so they match one stream with
 * blas_threads = 1. Across BLAS thread counts, kernels and CPUs (whose libm and whose
 * instruction set, for fully_connected_packed's AVX-512 kernel, differ too) results agree to
 * rounding, not to the bit.
 *
 * The graph must outlive the executor and must not change while it exists.
 * Thread-safety: one executor is used by one thread at a time; executors are independent, and
 * several threads may create executors from one graph at once (creation only reads it).
 */
#ifndef PEBBLE_EXEC_H
#define PEBBLE_EXEC_H

#include "pebble/graph.h"
#include "pebble/schedule.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pbl_exec pbl_exec;

/* ---- communicators: the ranks of a data-parallel job ------------------------------------
 *
 * A pbl_comm joins this process to the others of a job started by a launcher (mpirun -np N):
 * each rank builds the same training graph with pbl_graph_data_parallel (pebble/autodiff.h)
 * over its share of the batch and gives the communicator to its executor
 * (pbl_exec_options.comm); the executor's allreduce nodes then sum the gradients over the
 * ranks. docs/data_parallel.md shows a whole program and the commands.
 *
 *     pbl_comm *c;
 *     pbl_comm_options co = pbl_comm_options_default();   // MPI_COMM_WORLD
 *     if (pbl_comm_create_mpi(&c, &co, err, sizeof err) != PBL_OK) { ... }
 *     pbl_exec_options o = pbl_exec_options_default();
 *     o.comm = c;
 *     pbl_exec_create(&e, g, &o, err, sizeof err);         // checks every rank has this graph
 *     ...
 *     pbl_exec_destroy(e);
 *     pbl_comm_destroy(c);                                 // after every executor using it
 *
 * MPI is an optional component: the library loads it from a module, libpebble_mpi.so, the
 * first time a communicator is asked for (as the CUDA backend), so a pebble built without
 * MPI works unchanged and says so (PBL_ERR_UNSUPPORTED) when asked for one. A rank whose run
 * fails still joins its all-reduces, marked, so the other ranks' runs fail at the same node
 * (PBL_ERR_DEVICE, "1 of the 2 ranks failed their run"); every collective waits at most
 * timeout_s for the others, so a rank that stops makes them fail with PBL_ERR_TIMEOUT, not hang. A communicator is used by one thread at a time; the
 * executor's communication stream uses it during pbl_exec_run only.
 */
typedef struct pbl_comm pbl_comm;

typedef struct pbl_comm_options {
    const void *mpi_comm;  /* NULL (default): MPI_COMM_WORLD; else a pointer to the caller's
                              MPI_Comm (MPI initialised by the caller, at least
                              MPI_THREAD_SERIALIZED for overlap), which pebble duplicates.
                              With NULL, pebble initialises MPI unless the program has, and
                              finalises it when the last communicator it made is destroyed. */
    double      timeout_s; /* most seconds one collective waits for the others (default 60; > 0) */
} pbl_comm_options;

pbl_comm_options pbl_comm_options_default(void);

/* PBL_ERR_UNSUPPORTED: pebble was built without MPI (or its module cannot be loaded: the
 * message says why); PBL_ERR_DEVICE: MPI failed (its error string in err);
 * PBL_ERR_INVALID_ARG: bad options. */
pbl_status pbl_comm_create_mpi(pbl_comm **out, const pbl_comm_options *opt, char *err, size_t errlen);
/* NCCL on GPU `device`, its unique id broadcast over MPI (opt as for MPI), for executors on
 * PBL_BACKEND_CUDA (cuda_graph = 0). Loaded from libpebble_nccl.so as MPI's
 * module is. PBL_ERR_UNSUPPORTED when pebble was built without NCCL (err says why);
 * PBL_ERR_DEVICE when CUDA or NCCL fails on any rank (every rank fails); PBL_ERR_INVALID_ARG:
 * device < 0 or bad options. Ran on one GPU with one rank (docs/data_parallel.md). */
pbl_status pbl_comm_create_nccl(pbl_comm **out, const pbl_comm_options *opt, int32_t device, char *err,
                                size_t errlen);
void        pbl_comm_destroy(pbl_comm *c); /* accepts NULL */
int32_t     pbl_comm_rank(const pbl_comm *c); /* 0 .. size-1; 0 for NULL */
int32_t     pbl_comm_size(const pbl_comm *c); /* 1 for NULL */
const char *pbl_comm_errmsg(const pbl_comm *c);
/* Sums n floats in place over the ranks (every rank gets the same bits), for the caller's
 * own numbers (a loss to print, an accuracy). */
pbl_status pbl_comm_allreduce_sum(pbl_comm *c, float *data, int64_t n);
/* Copies `bytes` bytes from rank `root` to every rank. */
pbl_status pbl_comm_broadcast(pbl_comm *c, void *data, size_t bytes, int32_t root);

typedef enum pbl_backend_kind {
    PBL_BACKEND_CPU,
    PBL_BACKEND_CUDA, /* an NVIDIA GPU: cudaMalloc'd arena, kernels on cudaStreams, cuBLAS for
                         products. pbl_exec_create returns PBL_ERR_UNSUPPORTED when pebble was
                         built without CUDA or no device is present. Bound variables are
                         copied to the device before each run and parameters and state back
                         after it (the device cannot use the caller's buffer in place);
                         values written with pbl_exec_write stay on the device. */
} pbl_backend_kind;

typedef enum pbl_storage_mode {
    PBL_STORAGE_UNSHARED, /* every node output its own bytes in the arena: no reuse and no
                             in-place sharing, so every value stays readable after a run
                             (the arena is pbl_exec_stats.unshared_bytes) */
    PBL_STORAGE_NAIVE = PBL_STORAGE_UNSHARED, /* its former name: "naive" now means only the
                             planner strategy (pebble/plan.h), which shares in place */
    PBL_STORAGE_PLANNED, /* liveness + in-place + a planner strategy: one small arena (default) */
    PBL_STORAGE_DYNAMIC, /* eager: each output allocated from a pool as its node runs and freed
                            after its last reader; with a `budget`, Dynamic Tensor
                            Rematerialization evicts and recomputes tensors to stay within it
                            (see "Dynamic mode" above) */
} pbl_storage_mode;

typedef struct pbl_exec_options {
    const pbl_allocator *allocator; /* host allocations; NULL: malloc/free */
    pbl_backend_kind     backend;   /* default PBL_BACKEND_CPU */
    pbl_storage_mode     storage;   /* default PBL_STORAGE_PLANNED */
    const char          *strategy;  /* planner strategy (pebble/plan.h); NULL: "best" */
    int32_t              poison;    /* debug: after a value's last use, fill its bytes with NaN
                                       (0xFF bytes), so a planning bug shows as a wrong result */
    int32_t              threads;   /* CPU threads; 0 (the default): the BLAS library's own
                                       thread count and no worker threads of pebble's. With
                                       one stream and threads > 1 the executor starts
                                       threads - 1 worker threads of its own (at create, until
                                       destroy) over which long element-wise kernels, bias-
                                       gradient sums and optimizer updates split their loops;
                                       each element is computed as with one thread, so the
                                       split never changes a bit. With blas_threads left at
                                       0, large matrix products split over those threads
                                       too, along rows or columns of their result, each part
                                       one single-threaded BLAS call (OpenBLAS held at one
                                       thread); like BLAS's own threading this may change
                                       the last bits of products (see blas_threads). With
                                       several streams BLAS runs single-threaded (see streams). */
    int32_t              flush_denormals; /* default 1: during a run, the calling thread treats
                                       denormal floats as zero (x86 FTZ+DAZ; restored after).
                                       Denormals are ~1e4x slower on x86 and Adam's moments
                                       decay into them; TensorFlow flushes them likewise.
                                       0 keeps full IEEE gradual underflow. */
    const char *const   *targets;   /* output names to compute; NULL: all outputs + updates */
    int32_t              n_targets;
    uint64_t             budget;    /* PBL_STORAGE_DYNAMIC: most pool bytes (each tensor counted
                                       rounded up to 256, as the pool's chunks are); 0: no limit */
    FILE                *trace;     /* PBL_STORAGE_DYNAMIC: NULL, or a stream for the pool's
                                       allocation trace (see "Dynamic mode" above); it must stay
                                       open until the executor is destroyed */
    FILE                *evict_log; /* PBL_STORAGE_DYNAMIC: NULL, or a stream for a CSV row per
                                       eviction and rematerialisation; open until the last run */
    int32_t              streams;   /* 1..PBL_MAX_STREAMS, or 0 (the default): the backend's default,
                                       1 on CPU, 2 on CUDA (1 in dynamic mode). Above
                                       1, pbl_graph_streams colours the schedule (it may use
                                       fewer), storage is planned happens-before-safe and
                                       verified (pebble/streams.h), and the CPU backend runs
                                       one worker thread per stream with BLAS single-threaded
                                       (OpenBLAS 0.3.21 is not safe with several threaded
                                       sgemm callers). Results are bit-identical to one stream
                                       whose BLAS is single-threaded too (blas_threads = 1).
                                       The default is 1 on CPU because one stream runs inline
                                       on the calling thread with no hand-off, spreads large
                                       products over `threads` (see blas_threads) and uses
                                       the smallest arena;
                                       several streams pay off for graphs with independent
                                       branches of small ops (bench/streams_bench). */
    int32_t              cuda_graph; /* default 0. CUDA backend: the first run is captured as a
                                       CUDA Graph (all streams, forked from and joined into
                                       stream 0) and every run replays it, one launch instead
                                       of one per kernel; a bind that changes a pointer
                                       captures again. Dropout's run counter is passed through
                                       device memory, so replays draw new masks. Ignored on CPU
                                       and in dynamic mode. */
    int32_t              blas_threads; /* OpenBLAS threads for the products with one stream on
                                       the CPU; 0 (the default): with threads > 1, the
                                       products are split over pebble's threads (see
                                       threads) and OpenBLAS runs each part on one thread;
                                       with threads 0 or 1 the count is `threads`, and when
                                       that is 0 the library's setting is left alone. A
                                       count of 1 or more keeps every product one BLAS call
                                       on that many threads; negative:
                                       PBL_ERR_INVALID_ARG. OpenBLAS keeps one count per
                                       process, so the executor sets it at create and again
                                       at the start of every run (executors asking for
                                       different counts take turns). Its threaded products do
                                       not always round like its single-threaded ones: with
                                       some CPU kernels (OpenBLAS 0.3.21's Haswell and Zen)
                                       the last bit of some elements changes with the count,
                                       and the kernel is chosen per CPU. Results therefore
                                       repeat bit for bit for one count, kernel and OpenBLAS
                                       build, not across them; blas_threads = 1 with threads
                                       > 1 keeps pebble's worker threads and gives exactly
                                       the bits of threads = 1. Ignored with several streams
                                       (BLAS single-threaded) and by the CUDA backend. */
    pbl_schedule_kind    schedule;  /* the node order (pebble/schedule.h): PBL_SCHEDULE_PROGRAM
                                       (the default) or PBL_SCHEDULE_MIN_PEAK, the order with
                                       the smallest lower bound pbl_graph_schedule finds (on
                                       several streams the colouring is made from it). Each
                                       node still runs after what it depends on, so results
                                       are the same bits either way (test_schedule). */
    pbl_comm            *comm;      /* data parallelism: the ranks the graph's allreduce nodes
                                       sum over (it must outlive the executor); NULL: one rank
                                       (allreduce copies). With more than one rank,
                                       pbl_exec_create checks, by a collective over a hash of
                                       the graph (ops, shapes, names), that every rank builds
                                       the same graph: PBL_ERR_SHAPE when they differ. */
    int32_t              comm_overlap; /* default 1: bucket_pack, allreduce and bucket_unpack
                                       nodes run on a stream of their own (a worker thread on
                                       the CPU, a CUDA stream on the CUDA backend), every other
                                       node on stream 0, so each bucket's all-reduce overlaps
                                       the rest of the backward pass; the storage is planned
                                       happens-before-safe and verified (pebble/streams.h).
                                       Needs `streams` 0 or 1 (0 then means one compute stream
                                       on CUDA too) and planned or unshared storage.
                                       0: everything on one stream, in order. */
} pbl_exec_options;

pbl_exec_options pbl_exec_options_default(void);

/* Validates g, schedules it and allocates its storage. Returns the validation statuses of
 * pbl_graph_validate, PBL_ERR_NOT_FOUND (a target names no output), PBL_ERR_UNSUPPORTED
 * (an op in the schedule has no kernel on the backend: shape-only ops), PBL_ERR_NOMEM.
 * On failure *out is NULL and, when given, errmsg (size errlen) holds the message. */
pbl_status pbl_exec_create(pbl_exec **out, const pbl_graph *g, const pbl_exec_options *opt,
                           char *errmsg, size_t errlen);
void       pbl_exec_destroy(pbl_exec *e); /* accepts NULL */
const char *pbl_exec_errmsg(const pbl_exec *e);
/* The device the executor runs on, one line for people (a log, a benchmark's header):
 * PBL_BACKEND_CPU: pbl_cpu_describe() (pebble/version.h); PBL_BACKEND_CUDA: the GPU as
 * cudaGetDeviceProperties names it, "NVIDIA H200 (device 0, compute capability 9.0, 139.8
 * GiB)". Valid until the executor is destroyed; "no executor" for NULL. Thread-safe. */
const char *pbl_exec_device(const pbl_exec *e);

/* Makes variable v read and write `data` (bytes must equal the value's size) instead of
 * executor storage. PBL_ERR_INVALID_ARG for a node output or a size mismatch. */
pbl_status pbl_exec_bind(pbl_exec *e, pbl_value v, void *data, size_t bytes);
/* Copies into / out of a value's current storage (bytes must equal its size). Reading a
 * node output the executor does not compute gives PBL_ERR_INVALID_ARG; so does reading, after
 * a run with planned storage, a node output that is not a graph output (its bytes are reused
 * by later values: make it an output to keep it). */
pbl_status pbl_exec_write(pbl_exec *e, pbl_value v, const void *data, size_t bytes);
pbl_status pbl_exec_read(pbl_exec *e, pbl_value v, void *data, size_t bytes);

/* Runtime scalars (pbl_graph_add_scalar: learning rate, weight decay, Adam's step, the
 * training switch). set writes the scalar called `name` (as f32) for the following runs;
 * nothing is re-planned or re-captured (kernels read it from executor storage, CUDA graph
 * replays included). get reads it back. Every executor starts each scalar at its initial
 * value. PBL_ERR_NOT_FOUND: no value of that name; PBL_ERR_INVALID_ARG: the value is not a
 * scalar, or `value` is NaN, infinite or beyond f32's range (the executor keeps the old
 * value). Cheap: one 4-byte copy (a host-to-device copy on CUDA). */
pbl_status pbl_exec_set_scalar(pbl_exec *e, const char *name, double value);
pbl_status pbl_exec_get_scalar(pbl_exec *e, const char *name, double *value);

/* Partial batches. An executor is planned for the batch its graph was built with: the first
 * dimension shared by every input and label it reads (x: [128, 784], labels: [128] -> 128).
 * pbl_exec_set_batch(e, n) runs the following runs on the first n samples instead, for any
 * 1 <= n <= that planned batch, in the same arena with the same plan: every input and label
 * becomes [n, ...], every other value takes the shape the ops' shape rules give it at n
 * (activations [n, ...]; weights, their gradients and the loss keep theirs), and each fits in
 * the bytes planned for it, so the planned offsets stay valid. Kernels read their shapes at
 * run time: a mean over the batch (softmax_cross_entropy, mse_loss, batch_norm) is over the n
 * real rows and its gradient is scaled by 1/n, so a run at n gives what an executor planned
 * for n gives (the same bits where BLAS's thread count is the same: test_train).
 *   After set_batch, pbl_exec_write and pbl_exec_read of batch-carrying values take the bytes
 * at n (write x's first n rows); pbl_exec_bind still takes a buffer of the planned size (runs
 * read and write its first n rows). The batch stays until set again; set it back to the
 * planned batch for full batches. A CUDA graph capture is redone at the next run.
 *   PBL_ERR_INVALID_ARG: n < 1 or n above the planned batch (the executor keeps its batch).
 * PBL_ERR_UNSUPPORTED: the inputs and labels do not share a first dimension (or there are
 * none), dynamic storage (it runs only its planned batch), or a shape rule that does not
 * follow the batch, e.g. a reshape to a fixed [128, 784], or the gradient of a pbl_mean over
 * the batch (its broadcast_to and 1/count scale hold the planned batch; softmax_cross_entropy
 * and mse_loss follow it) — the message names the node.
 * pbl_exec_stats.batch / .planned_batch report both. Cost: shape inference over the schedule
 * (microseconds); nothing is allocated but a temporary per-value table. */
pbl_status pbl_exec_set_batch(pbl_exec *e, int64_t n);

/* Runs the schedule once. Every input and label must have been bound or written, every
 * parameter too (PBL_ERR_UNBOUND otherwise). Increments the run counter (dropout masks
 * and the like depend on it). */
pbl_status pbl_exec_run(pbl_exec *e);
uint64_t   pbl_exec_run_count(const pbl_exec *e);

typedef struct pbl_exec_stats {
    int32_t  nodes;          /* nodes in the schedule */
    uint64_t arena_bytes;    /* executor storage for node outputs (the planned arena) */
    uint64_t variable_bytes; /* executor storage for unbound variables */
    uint64_t host_bytes;     /* all host memory held through the allocator */
    uint64_t host_peak;
    uint64_t naive_bytes;    /* the `naive` strategy's arena for these records (pebble/plan.h):
                                every record its own bytes, values sharing a record in place
                                counted once; what `pebble plan --strategy naive` prints for
                                the graph. (Before unshared_bytes existed, this field held
                                what unshared_bytes holds.) */
    uint64_t unshared_bytes; /* the arena if every node output had its own bytes (64-aligned),
                                in place or not: the arena of PBL_STORAGE_UNSHARED */
    uint64_t lower_bound;    /* the most bytes live at one step: no plan of these records is smaller */
    int32_t  records;        /* usage records planned (values sharing in place count once) */
    int32_t  inplace;        /* in-place offers taken */
    const char *strategy;    /* the strategy that planned the arena ("dynamic" in dynamic mode) */
    /* dynamic mode (zero otherwise) */
    uint64_t dynamic_budget;    /* the budget (0: none) */
    uint64_t dynamic_min_budget;/* the largest single-node working set: no smaller budget works */
    uint64_t dynamic_peak;      /* most pool bytes held at once in the last run (charged) */
    uint64_t dynamic_unlimited_peak; /* the same with no budget (checked at create) */
    int64_t  evictions;         /* tensors evicted in the last run */
    int64_t  remat_ops;         /* kernels re-run to rematerialise in the last run */
    int32_t  remat_depth;       /* deepest nesting of rematerialisations in the last run
                                   (a tensor recomputed to recompute another: 2, ...) */
    uint64_t dynamic_pool_bytes;/* bytes the pool holds from the backend now */
    uint64_t dynamic_pool_peak_in_use; /* the pool's own count of its peak in-use bytes: equal
                                   to the largest dynamic_peak of any run */
    int32_t  streams;        /* streams the schedule runs on */
    int32_t  waits;          /* cross-stream event waits per run */
    int64_t  batch;          /* the batch runs use now (pbl_exec_set_batch) */
    int64_t  planned_batch;  /* the batch the executor was planned for; 0: its inputs share
                                no first dimension, so the batch cannot vary */
} pbl_exec_stats;

/* Writes the storage plan: one line per record (offset, bytes, live steps, the values in it),
 * sorted by offset, then the arena beside the naive and unshared sizes and the lower bound
 * ("arena 939072 bytes (best), naive 1344192, unshared 1737408, lower bound 939072; ..."). */
pbl_status pbl_exec_dump_plan(const pbl_exec *e, FILE *f);

pbl_status pbl_exec_stats_get(const pbl_exec *e, pbl_exec_stats *out);

/* Saves every parameter and state variable (name, dtype, shape, data), every runtime scalar
 * (name, its f32 value) and the run counter to `path` (format version 2, docs/training.md
 * "Checkpoints and resuming"), written to a temporary file and renamed, so an existing file is never left half-written and keeps its
 * mode. A symbolic link is followed (its target is replaced, the link stays); a FIFO or a
 * device is written in place. The file ends with a CRC-32 of everything before it.
 * PBL_ERR_IO names the path and errno text. */
pbl_status pbl_exec_save(pbl_exec *e, const char *path);
/* Checks, without writing anything, that pbl_exec_save could write `path`: it is not a
 * directory and a temporary file can be created in its folder (the folder exists, is
 * writable, is not on a read-only filesystem). Call it before a long training run, so that a
 * bad --save fails before the work rather than after. PBL_OK, or PBL_ERR_IO with the reason. */
pbl_status pbl_exec_save_check(pbl_exec *e, const char *path);
/* Loads a file written by pbl_exec_save into the matching variables. The whole file is read
 * and checked (magic, version, CRC-32, every name present with the same dtype and shape)
 * before any variable is written: PBL_ERR_IO, PBL_ERR_FORMAT, PBL_ERR_CHECKSUM,
 * PBL_ERR_NOT_FOUND or PBL_ERR_SHAPE leave the executor unchanged. Runtime scalars: each of
 * the file's that the graph has as a scalar is restored, one the graph lacks is skipped, one
 * whose name the graph gives a non-scalar is PBL_ERR_NOT_FOUND, a NaN or infinite value
 * PBL_ERR_FORMAT; the graph's scalars the file lacks keep their values. The run counter
 * (pbl_exec_run_count) becomes the file's. Files of version 1 (no scalars, no run counter)
 * load, leaving both as they are. path must be a regular file
 * of at most 4 GiB: a FIFO or a device is PBL_ERR_IO at once (the open never blocks), a larger
 * file PBL_ERR_FORMAT, before anything is read. */
pbl_status pbl_exec_load(pbl_exec *e, const char *path);

#ifdef __cplusplus
}
#endif
#endif
