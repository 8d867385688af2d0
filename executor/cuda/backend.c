/*
 * The CUDA backend: device memory from cudaMalloc, one cudaStream with its own cuBLAS
 * handle (and workspace) per executor stream, cudaEvents for the cross-stream edges, and
 * the ops' kernels in ops/cuda/ (kernels.h lists them; has_kernel reports exactly those).
 *
 * Failures. Every CUDA and cuBLAS return is checked through CU()/CUBLAS(), which write the
 * call, file and line into the instance's message and jump to the function's cleanup
 * label: a failure is a pbl_status (PBL_ERR_DEVICE, or PBL_ERR_UNSUPPORTED when there is no
 * device), never an abort. A kernel that fails to launch writes its message into its
 * kargs->err and becomes the run's failure: later kernels and fills of the run are skipped
 * (records and waits still happen), and sync returns it. Failures that depend on the data
 * (a label out of range) are detected on the device: the kernel claims a flag {tag + 1, row,
 * value} in device memory, tag being its index in this run's list of launched kargs, and
 * sync reads the flag once the streams are idle and turns it into the kernel's message.
 * A sticky device error (an illegal address) is returned by sync with *failed NULL.
 *
 * Device collectives. An allreduce kernel hands its bucket to the communicator's device sum
 * (NCCL), which only enqueues it; the instance remembers the collective, and sync first
 * calls its bounded wait (pbl__collective.wait_f32_device), before anything blocks on a
 * stream: a sum whose peer never comes times out there and the communicator is aborted, which
 * ends the sum, so the synchronisation after it returns. The wait's failure is the run's,
 * reported for the last allreduce launched, unless an earlier failure was first.
 *
 * CUDA Graphs. graph_begin starts capturing on stream 0 and forks the other streams from
 * it by an event, so the executor's records and waits between streams become graph edges;
 * graph_end joins them back into stream 0, ends the capture and instantiates the graph;
 * graph_launch(run) writes the run counter into device memory (the captured dropout
 * kernels read it there, so every replay draws a new mask) and launches the graph on
 * stream 0. The list of launched kargs is kept while a graph exists (its tags are frozen
 * in the captured kernels).
 */
#include <stdio.h>
#include <string.h>

#include "executor/backend.h"
#include "ops/cuda/kernels.h"

/* cuBLAS workspace per handle: set explicitly, so cuBLAS never allocates during a graph
 * capture (NVIDIA's cuBLAS guide recommends 32 MiB on Hopper). */
#define WORKSPACE_BYTES ((size_t)32 << 20)

typedef struct cuda_stream {
    cudaStream_t   s;
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    void          *workspace;
    cudaEvent_t    join;  /* graph capture: this stream's end, joined into stream 0 */
} cuda_stream;

/* A launch of this run (or of the captured graph): what its failure flag is reported for. */
typedef struct cuda_launched {
    const pbl__op    *op;
    const pbl__kargs *a;
} cuda_launched;

typedef struct cuda_ctx {
    pbl__mem          *host;
    int32_t            n_streams, n_events;
    cuda_stream       *st;
    cudaEvent_t       *ev;
    cudaEvent_t        fork;       /* graph capture: stream 0's start, forked to the others */
    cudaEvent_t        uploaded;   /* the last asynchronous upload, which every stream waits for */
    int                wait_uploads; /* the device reads pageable memory itself: uploads wait */
    int               *flag;       /* device int[3]: {tag + 1, row, value} */
    uint64_t          *run_dev;    /* device: the run counter captured kernels read */
    uint64_t           run_host;   /* its source for the copy in graph_launch */
    cuda_launched     *launched;   /* per tag: the op and kargs of the launch */
    int32_t            n_launched, cap_launched;
    pbl_status         failed;     /* first failure of this run at enqueue time */
    const pbl__kargs  *failed_args;
    const pbl__collective *coll;   /* a device collective this run's kernels reached, or NULL */
    const pbl__kargs  *coll_args;  /* the last launch that reached it */
    int                capturing;
    cudaGraph_t        graph;
    cudaGraphExec_t    graph_exec;
    char               msg[256];   /* the last backend-level failure (open, sync) */
    char               device[320]; /* "NAME (device N, compute capability X.Y, M GiB)" */
} cuda_ctx;

#define CU(call)                                                                               \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        if (e_ != cudaSuccess) {                                                               \
            snprintf(c->msg, sizeof c->msg, "%s failed at %s:%d: %s", #call, __FILE__, __LINE__, \
                     cudaGetErrorString(e_));                                                  \
            (void)cudaGetLastError(); /* reported here: not again by a later launch's check */  \
            s = PBL_ERR_DEVICE;                                                                \
            goto fail;                                                                         \
        }                                                                                      \
    } while (0)

#define CUBLAS(call)                                                                           \
    do {                                                                                       \
        cublasStatus_t e_ = (call);                                                            \
        if (e_ != CUBLAS_STATUS_SUCCESS) {                                                     \
            snprintf(c->msg, sizeof c->msg, "%s failed at %s:%d: %s", #call, __FILE__, __LINE__, \
                     cublasGetStatusString(e_));                                               \
            s = PBL_ERR_DEVICE;                                                                \
            goto fail;                                                                         \
        }                                                                                      \
    } while (0)

/* By name, not by descriptor address: this module holds its own copy of the op table, and
 * the executor passes the descriptors of the library that loaded it. */
static pbl__cuda_fn kernel_of(const pbl__op *op)
{
#define PBL__CUDA_CASE(n) \
    if (strcmp(op->name, #n) == 0) \
        return pbl__cuda_##n;
    PBL__CUDA_OP_LIST(PBL__CUDA_CASE)
#undef PBL__CUDA_CASE
    return NULL;
}

static int cuda_has_kernel(void *ctx, const pbl__op *op) { return op && kernel_of(op) != NULL; }

static pbl_status cuda_probe(char *err, size_t errlen)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        snprintf(err, errlen, "no CUDA device (cudaGetDeviceCount: %s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return PBL_ERR_UNSUPPORTED;
    }
    return PBL_OK;
}

static void *cuda_alloc(void *ctx, size_t bytes)
{
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        (void)cudaGetLastError(); /* an allocation failure is not sticky: clear it */
        return NULL;
    }
    return p; /* cudaMalloc aligns to at least 256 bytes */
}

static void cuda_free(void *ctx, void *p, size_t bytes)
{
    if (p)
        (void)cudaFree(p);
}

/* Copies on stream 0 and waits for it. Not cudaMemcpy: it runs on the legacy default
 * stream, which the backend's non-blocking streams do not wait for, and a pageable
 * host-to-device cudaMemcpy may return before its DMA lands. */
static pbl_status copy(cuda_ctx *c, void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    pbl_status s = PBL_OK;
    if (n) {
        CU(cudaMemcpyAsync(dst, src, n, kind, c->st[0].s));
        CU(cudaStreamSynchronize(c->st[0].s));
    }
fail:
    return s;
}

/* Zeroes n bytes of device memory on stream 0 and waits (cudaMemset would run on the
 * legacy stream, asynchronously, unordered with the backend's streams). */
static pbl_status zero(cuda_ctx *c, void *dst, size_t n)
{
    pbl_status s = PBL_OK;
    CU(cudaMemsetAsync(dst, 0, n, c->st[0].s));
    CU(cudaStreamSynchronize(c->st[0].s));
fail:
    return s;
}

/* Host to device without waiting: from pageable memory cudaMemcpyAsync returns once the
 * driver has staged the bytes (the caller may reuse its buffer at once), and the copy is
 * queued on stream 0; an event makes every other stream's later work wait for it, so a run,
 * a read (downloads queue on stream 0) and a zeroing all come after it. A training step's
 * writes (the batch, its labels, the learning rate) then cost no round trip each. Pinned
 * (page-locked) host memory is copied by DMA after the call returns, so a caller could change
 * it first: from such a buffer the upload waits, as before; so does every upload on a device
 * that reads pageable memory in place (cudaDeviceProp.pageableMemoryAccess), where NVIDIA
 * promises no staging either. */
static pbl_status cuda_upload(void *ctx, void *dst, const void *src, size_t n)
{
    cuda_ctx *c = ctx;
    pbl_status s = PBL_OK;
    struct cudaPointerAttributes at;
    if (!n)
        return PBL_OK;
    if (c->wait_uploads || cudaPointerGetAttributes(&at, src) != cudaSuccess ||
        at.type != cudaMemoryTypeUnregistered) {
        (void)cudaGetLastError(); /* not a pointer the runtime knows: the waiting copy says why */
        return copy(c, dst, src, n, cudaMemcpyHostToDevice);
    }
    CU(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, c->st[0].s));
    if (c->n_streams > 1) {
        CU(cudaEventRecord(c->uploaded, c->st[0].s));
        for (int32_t k = 1; k < c->n_streams; k++)
            CU(cudaStreamWaitEvent(c->st[k].s, c->uploaded, 0));
    }
fail:
    return s;
}

static pbl_status cuda_download(void *ctx, void *dst, const void *src, size_t n)
{
    return copy(ctx, dst, src, n, cudaMemcpyDeviceToHost);
}

static void note_failure(cuda_ctx *c, pbl_status s, const pbl__kargs *a)
{
    if (c->failed == PBL_OK) {
        c->failed = s;
        c->failed_args = a;
    }
}

static pbl_status cuda_fill(void *ctx, int32_t stream, void *dst, int byte, size_t n)
{
    cuda_ctx *c = ctx;
    pbl_status s = PBL_OK;
    if (c->failed == PBL_OK && n)
        CU(cudaMemsetAsync(dst, byte, n, c->st[stream].s));
fail:
    return s;
}

static pbl_status cuda_run(void *ctx, int32_t stream, const pbl__op *op, const pbl__kargs *a)
{
    cuda_ctx *c = ctx;
    pbl__cuda_fn fn = kernel_of(op);
    if (c->failed != PBL_OK)
        return PBL_OK; /* the run already failed: skip, sync reports the first failure */
    if (!fn) {
        snprintf(a->err, a->errlen, "no CUDA kernel for %s", op->name);
        note_failure(c, PBL_ERR_UNSUPPORTED, a);
        return PBL_OK;
    }
    if (pbl__mem_reserve(c->host, (void **)&c->launched, &c->cap_launched, c->n_launched + 1, sizeof *c->launched) != 0)
        return PBL_ERR_NOMEM;
    c->launched[c->n_launched] = (cuda_launched){ .op = op, .a = a };
    pbl__cuda_launch l = { .stream = c->st[stream].s, .blas = c->st[stream].blas, .lt = c->st[stream].lt,
                           .workspace = c->st[stream].workspace, .workspace_bytes = WORKSPACE_BYTES, .flag = c->flag,
                           .tag = c->n_launched, .run_dev = c->capturing ? c->run_dev : NULL };
    c->n_launched++;
    if (a->coll && a->coll->wait_f32_device) { /* sync waits for its sums, by its timeout */
        c->coll = a->coll;
        c->coll_args = a;
    }
    pbl_status s = fn(&l, a);
    if (s != PBL_OK)
        note_failure(c, s, a);
    return PBL_OK;
}

static pbl_status cuda_record(void *ctx, int32_t stream, int32_t event)
{
    cuda_ctx *c = ctx;
    pbl_status s = PBL_OK;
    CU(cudaEventRecord(c->ev[event], c->st[stream].s));
fail:
    return s;
}

static pbl_status cuda_wait(void *ctx, int32_t stream, int32_t event)
{
    cuda_ctx *c = ctx;
    pbl_status s = PBL_OK;
    CU(cudaStreamWaitEvent(c->st[stream].s, c->ev[event], 0));
fail:
    return s;
}

/* The failure flag f read back from the device: clears it there when set; the kernel's
 * failure, or PBL_OK. */
static pbl_status flag_status(cuda_ctx *c, const int f[3], const pbl__kargs **failed)
{
    pbl_status s = PBL_OK;
    if (f[0] == 0)
        return PBL_OK;
    s = zero(c, c->flag, 3 * sizeof(int));
    if (s != PBL_OK)
        return s;
    if (f[0] < 1 || f[0] > c->n_launched) {
        snprintf(c->msg, sizeof c->msg, "device failure flag names launch %d of %d", f[0] - 1, (int)c->n_launched);
        return PBL_ERR_DEVICE;
    }
    *failed = c->launched[f[0] - 1].a;
    return pbl__cuda_flag_message(c->launched[f[0] - 1].op, *failed, f[1], f[2]);
}

/* Makes stream 0 wait for everything queued so far on the other streams (an event each); the
 * first failing call's error, *at the stream it was joining. */
static cudaError_t join_into_stream0(cuda_ctx *c, int32_t *at)
{
    cudaError_t e = cudaSuccess;
    for (int32_t k = 1; k < c->n_streams && e == cudaSuccess; k++) {
        *at = k;
        e = cudaEventRecord(c->st[k].join, c->st[k].s);
        if (e == cudaSuccess)
            e = cudaStreamWaitEvent(c->st[0].s, c->st[k].join, 0);
    }
    return e;
}

/* The bounded wait for the device sums the run enqueued (see the top): the first failure of
 * the run when it fails first. */
static void wait_collective(cuda_ctx *c)
{
    const pbl__collective *coll = c->coll;
    const pbl__kargs *a = c->coll_args;
    c->coll = NULL;
    c->coll_args = NULL;
    if (!coll)
        return;
    char why[256] = "";
    pbl_status w = coll->wait_f32_device(coll->ctx, why, sizeof why);
    if (w != PBL_OK && c->failed == PBL_OK) { /* a->err may hold an earlier failure's message */
        snprintf(a->err, a->errlen, "%s", why);
        note_failure(c, w, a);
    }
}

/* The end of a run in one round trip to the device: the other streams join stream 0 (an
 * event each), stream 0 copies the failure flag back after them, and one synchronisation of
 * stream 0 covers all of it. (A synchronisation per stream and then the flag's copy and its
 * own synchronisation cost a small graph's replay as much as its kernels did.) Device sums
 * are waited for first, with their timeout. */
static pbl_status cuda_sync(void *ctx, const pbl__kargs **failed)
{
    cuda_ctx *c = ctx;
    pbl_status s = PBL_OK;
    const pbl__kargs *dummy;
    int f[3] = { 0, 0, 0 };
    if (!failed)
        failed = &dummy;
    *failed = NULL;
    wait_collective(c);
    int32_t at = 0;
    cudaError_t e = join_into_stream0(c, &at);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(f, c->flag, sizeof f, cudaMemcpyDeviceToHost, c->st[0].s);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(c->st[0].s);
    if (e != cudaSuccess) {
        snprintf(c->msg, sizeof c->msg, "synchronising the run's %d stream(s) failed: %s", (int)c->n_streams,
                 cudaGetErrorString(e));
        (void)cudaGetLastError(); /* reported here: not again by the next run's first launch */
        for (int32_t k = 0; k < c->n_streams; k++) /* leave nothing running on any stream */
            (void)cudaStreamSynchronize(c->st[k].s);
    }
    if (c->failed != PBL_OK) {
        s = c->failed;
        *failed = c->failed_args;
    } else if (e != cudaSuccess) {
        s = PBL_ERR_DEVICE;
    } else {
        s = flag_status(c, f, failed);
    }
    c->failed = PBL_OK;
    c->failed_args = NULL;
    if (!c->graph_exec)
        c->n_launched = 0; /* a graph's tags stay valid for its replays */
    return s;
}

static pbl_status cuda_graph_begin(void *ctx)
{
    cuda_ctx *c = ctx;
    pbl_status s = PBL_OK;
    if (c->graph_exec) {
        CU(cudaGraphExecDestroy(c->graph_exec));
        c->graph_exec = NULL;
    }
    if (c->graph) {
        CU(cudaGraphDestroy(c->graph));
        c->graph = NULL;
    }
    c->n_launched = 0;
    CU(cudaStreamBeginCapture(c->st[0].s, cudaStreamCaptureModeThreadLocal));
    c->capturing = 1;
    CU(cudaEventRecord(c->fork, c->st[0].s));
    for (int32_t k = 1; k < c->n_streams; k++)
        CU(cudaStreamWaitEvent(c->st[k].s, c->fork, 0));
fail:
    return s;
}

static pbl_status cuda_graph_end(void *ctx)
{
    cuda_ctx *c = ctx;
    pbl_status s = PBL_OK;
    cudaGraph_t g = NULL;
    if (!c->capturing) {
        snprintf(c->msg, sizeof c->msg, "graph_end without graph_begin");
        return PBL_ERR_INVALID_ARG;
    }
    int32_t at = 0;
    cudaError_t je = join_into_stream0(c, &at);
    if (je != cudaSuccess) {
        snprintf(c->msg, sizeof c->msg, "joining stream %d into the capture failed: %s", (int)at, cudaGetErrorString(je));
        s = PBL_ERR_DEVICE;
    }
    /* end the capture even after a failure, so stream 0 is usable again */
    c->capturing = 0;
    cudaError_t e = cudaStreamEndCapture(c->st[0].s, &g);
    if (s != PBL_OK) {
        (void)cudaGetLastError(); /* the failures above are reported: clear the runtime's record */
        goto fail;
    }
    if (e != cudaSuccess) {
        snprintf(c->msg, sizeof c->msg, "cudaStreamEndCapture failed: %s", cudaGetErrorString(e));
        (void)cudaGetLastError();
        s = PBL_ERR_DEVICE;
        goto fail;
    }
    if (c->failed != PBL_OK) {
        s = c->failed; /* a kernel failed to enqueue: sync reports it with its message */
        goto fail;
    }
    CU(cudaGraphInstantiate(&c->graph_exec, g, 0));
    c->graph = g;
    return PBL_OK;
fail:
    if (g)
        (void)cudaGraphDestroy(g);
    return s;
}

static pbl_status cuda_graph_launch(void *ctx, uint64_t run)
{
    cuda_ctx *c = ctx;
    pbl_status s = PBL_OK;
    if (!c->graph_exec) {
        snprintf(c->msg, sizeof c->msg, "graph_launch without a captured graph");
        return PBL_ERR_INVALID_ARG;
    }
    c->run_host = run;
    /* pageable source: the copy is staged before the call returns, so run_host may change */
    CU(cudaMemcpyAsync(c->run_dev, &c->run_host, sizeof c->run_host, cudaMemcpyHostToDevice, c->st[0].s));
    CU(cudaGraphLaunch(c->graph_exec, c->st[0].s));
fail:
    return s;
}

/* The last backend-level failure's message (CU/CUBLAS write it), for the executor. */
static const char *cuda_errmsg(void *ctx)
{
    const cuda_ctx *c = ctx;
    return c ? c->msg : NULL;
}

static const char *cuda_device(void *ctx)
{
    const cuda_ctx *c = ctx;
    return c ? c->device : NULL;
}

static void cuda_close(void *ctx)
{
    cuda_ctx *c = ctx;
    if (!c)
        return;
    for (int32_t k = 0; c->st && k < c->n_streams; k++)
        if (c->st[k].s)
            (void)cudaStreamSynchronize(c->st[k].s);
    if (c->graph_exec)
        (void)cudaGraphExecDestroy(c->graph_exec);
    if (c->graph)
        (void)cudaGraphDestroy(c->graph);
    for (int32_t k = 0; c->st && k < c->n_streams; k++) {
        if (c->st[k].blas)
            (void)cublasDestroy(c->st[k].blas);
        if (c->st[k].lt)
            (void)cublasLtDestroy(c->st[k].lt);
        if (c->st[k].workspace)
            (void)cudaFree(c->st[k].workspace);
        if (c->st[k].join)
            (void)cudaEventDestroy(c->st[k].join);
        if (c->st[k].s)
            (void)cudaStreamDestroy(c->st[k].s);
    }
    for (int32_t i = 0; c->ev && i < c->n_events; i++)
        if (c->ev[i])
            (void)cudaEventDestroy(c->ev[i]);
    if (c->fork)
        (void)cudaEventDestroy(c->fork);
    if (c->uploaded)
        (void)cudaEventDestroy(c->uploaded);
    if (c->flag)
        (void)cudaFree(c->flag);
    if (c->run_dev)
        (void)cudaFree(c->run_dev);
    pbl__mem *host = c->host;
    pbl__mem_free(host, c->launched, (size_t)c->cap_launched * sizeof *c->launched);
    pbl__mem_free(host, c->ev, (size_t)(c->n_events ? c->n_events : 1) * sizeof *c->ev);
    pbl__mem_free(host, c->st, (size_t)c->n_streams * sizeof *c->st);
    pbl__mem_free(host, c, sizeof *c);
}

static pbl_status cuda_open(pbl__mem *host, const pbl__backend_config *cfg, void **ctx, char *err, size_t errlen)
{
    *ctx = NULL;
    pbl_status s = cuda_probe(err, errlen);
    if (s != PBL_OK)
        return s;
    cuda_ctx *c = pbl__mem_calloc(host, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory opening the CUDA backend");
        return PBL_ERR_NOMEM;
    }
    c->host = host;
    /* the device current in this thread is the one every later call uses (docs/cuda.md) */
    int dev = 0;
    struct cudaDeviceProp prop;
    CU(cudaGetDevice(&dev));
    CU(cudaGetDeviceProperties(&prop, dev));
    snprintf(c->device, sizeof c->device, "%.256s (device %d, compute capability %d.%d, %.1f GiB)", prop.name, dev,
             prop.major, prop.minor, (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
    /* where the GPU can read pageable memory in place (HMM, or a coherent CPU-GPU link),
     * cudaMemcpyAsync need not stage it before returning: uploads then wait */
    c->wait_uploads = prop.pageableMemoryAccess != 0;
    c->n_streams = cfg->n_streams;
    c->n_events = cfg->n_events;
    c->st = pbl__mem_calloc(host, (size_t)c->n_streams * sizeof *c->st);
    c->ev = pbl__mem_calloc(host, (size_t)(c->n_events ? c->n_events : 1) * sizeof *c->ev);
    if (!c->st || !c->ev) {
        snprintf(c->msg, sizeof c->msg, "out of memory opening the CUDA backend");
        s = PBL_ERR_NOMEM;
        goto fail;
    }
    for (int32_t k = 0; k < c->n_streams; k++) {
        /* non-blocking: no implicit ordering with the legacy default stream */
        CU(cudaStreamCreateWithFlags(&c->st[k].s, cudaStreamNonBlocking));
        CU(cudaEventCreateWithFlags(&c->st[k].join, cudaEventDisableTiming));
        CU(cudaMalloc(&c->st[k].workspace, WORKSPACE_BYTES));
        CUBLAS(cublasCreate(&c->st[k].blas));
        CUBLAS(cublasLtCreate(&c->st[k].lt));
        CUBLAS(cublasSetStream(c->st[k].blas, c->st[k].s));
        CUBLAS(cublasSetWorkspace(c->st[k].blas, c->st[k].workspace, WORKSPACE_BYTES));
        /* full fp32 products (no TF32), so results compare with the CPU's sgemm */
        CUBLAS(cublasSetMathMode(c->st[k].blas, CUBLAS_DEFAULT_MATH));
    }
    for (int32_t i = 0; i < c->n_events; i++)
        CU(cudaEventCreateWithFlags(&c->ev[i], cudaEventDisableTiming));
    CU(cudaEventCreateWithFlags(&c->fork, cudaEventDisableTiming));
    CU(cudaEventCreateWithFlags(&c->uploaded, cudaEventDisableTiming));
    CU(cudaMalloc((void **)&c->flag, 3 * sizeof(int)));
    CU(cudaMalloc((void **)&c->run_dev, sizeof *c->run_dev));
    if ((s = zero(c, c->flag, 3 * sizeof(int))) != PBL_OK || (s = zero(c, c->run_dev, sizeof *c->run_dev)) != PBL_OK)
        goto fail;
    *ctx = c;
    return PBL_OK;
fail:
    snprintf(err, errlen, "%s", c->msg);
    cuda_close(c);
    return s;
}

/* The one symbol of libpebble_cuda.so: executor/cuda/loader.c finds it with dlsym. */
__attribute__((visibility("default"))) extern const pbl__backend pbl_cuda_backend_module;
const pbl__backend pbl_cuda_backend_module = {
    .name = "cuda",
    .device_memory = 1,
    .probe = cuda_probe,
    .open = cuda_open,
    .close = cuda_close,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .fill = cuda_fill,
    .has_kernel = cuda_has_kernel,
    .run = cuda_run,
    .record = cuda_record,
    .wait = cuda_wait,
    .sync = cuda_sync,
    .run_begin = NULL,
    .run_end = NULL,
    .graph_begin = cuda_graph_begin,
    .graph_end = cuda_graph_end,
    .graph_launch = cuda_graph_launch,
    .errmsg = cuda_errmsg,
    .device = cuda_device,
};
