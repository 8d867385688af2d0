/*
 * The CPU backend: host memory, the ops' CPU kernels, OpenBLAS threads, and streams.
 *
 * One stream runs every enqueued kernel at once on the caller's thread: no hand-off, the
 * same thread, the same order and the same bits as the executor before streams existed.
 * Several streams get one worker thread each, started at open and stopped at close (never
 * per run); each worker drains its stream's ring of commands in order, and events are
 * counters: a record publishes a generation, a wait blocks until the generation it captured
 * when it was enqueued has been published (CUDA's cudaStreamWaitEvent rule).
 *
 * BLAS with several streams. OpenBLAS keeps its thread count per process
 * (openblas_set_num_threads) and, in Debian's 0.3.21 pthread build, a multithreaded level-3
 * call hands work to the one shared server pool under a mutex that is a function-local
 * static of gemm_driver — one per transpose variant, so an NN and an NT sgemm from two
 * threads can enter the pool together (OpenBLAS issue #5836 reports corrupted results;
 * #1851 wrong results from several callers of a threaded dgemm). A call that finds the
 * count at 1 runs entirely on the calling thread, and its buffer allocation is locked in
 * threaded builds (#2126, #2136). So with several streams the backend sets the count to 1:
 * the streams are the parallelism, each a core; `threads` (the budget) caps nothing more.
 * With one stream the count is blas_threads (pbl_exec_options: by default `threads`, but 1
 * where the pool carries the products, below), set at open and again before each run, since
 * another executor may have changed it in between.
 * OpenBLAS's threaded sgemm does not always round like its single-threaded one (measured
 * with 0.3.21's Haswell and Zen kernels: last-bit differences in some elements), so a
 * caller that wants the bits of one thread with the pool on asks for blas_threads = 1.
 *
 * Element-wise work with one stream. BLAS spreads each product over `threads` cores, but the
 * kernels between the products (activations and their gradients, bias-gradient sums, the
 * optimizer updates) ran on the calling thread alone, so with 2 threads an MLP step took
 * 1.15-1.3x its products' time. With one stream and threads > 1 the backend starts a pool
 * of threads - 1 workers (executor/cpu/pool.c) and hands it to every kernel (kargs->par);
 * kernels split their long loops over it (pbl__cpu_for), element for element the same code.
 *
 * Products with one stream. OpenBLAS 0.3.21's threaded sgemm hands each call's work to its
 * server threads, which wait for it by sched_yield; at batch 128 that hand-off and the pool's
 * workers and OpenBLAS's threads taking turns on the same cores cost an MLP step a fifth of
 * its time, and at batch 1024 its two threads reached 1.72x one thread on 784-512-512-10.
 * So when the caller leaves blas_threads at 0 (cfg->split_products) and the pool exists, the
 * pool carries the products too: large ones are split along an output dimension into
 * single-threaded sgemm calls (pbl__cpu_sgemm, ops/cpu/linear.c: every kernel's products go
 * through it, the convolutions' too), OpenBLAS is held at one thread, and the
 * pool's workers, polling between parts, are the only threads at work besides the caller's. An explicit
 * blas_threads (1 for the bits of one thread, or a count for OpenBLAS's own threading)
 * keeps the products whole, as before.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "executor/backend.h"
#include "executor/cpu/pool.h"

#ifdef PEBBLE_HAVE_OPENBLAS_THREADS
#include <cblas.h>
#endif
#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#define PBL__HAVE_MXCSR 1
#endif

enum { CMD_KERNEL, CMD_FILL, CMD_RECORD, CMD_WAIT };

typedef struct cmd {
    int32_t           kind;
    int32_t           event;   /* RECORD, WAIT */
    uint64_t          gen;     /* RECORD: the generation it publishes; WAIT: the one it needs */
    const pbl__op    *op;      /* KERNEL */
    const pbl__kargs *a;
    void             *dst;     /* FILL */
    int               byte;
    size_t            n;
} cmd;

/* A part of a split kernel gets at least this much work (elements x cost, pbl__cpu_for):
 * 64 KiB of floats, some 5-10 us of a streaming pass, above what claiming a part costs. */
#define PAR_MIN_WORK 16384

/* The pool's polls before a worker sleeps (pbl__cpu_pool_create): 256 pauses, some 10-40 us,
 * while OpenBLAS's own threads run the products between split kernels and want the cores;
 * when the pool carries the products, 256 sched_yield calls more (some 0.1-0.3 ms on an
 * otherwise idle core), so the workers stay awake through the short kernels between two
 * products (at batch 128 a few microseconds each: waking a sleeping thread costs more, and
 * with 256 polls alone the split step of 784-256-128-10 at batch 128 on 2 threads took
 * about 1.25x its time with these), yet give the core to other work that wants it and
 * sleep between the steps of a loop that does something else in between. */
#define SPIN_SHORT 256
#define SPIN_LONG  512

/* The ring holds this many commands; the executor blocks when it is full (see backend.h:
 * what is queued can always drain). 1024 keep a worker busy for a long while. */
#define RING 1024u

typedef struct cpu_ctx cpu_ctx;

typedef struct cpu_stream {
    cpu_ctx        *ctx;
    pthread_t       thread;
    pthread_mutex_t mu;
    pthread_cond_t  work;     /* to the worker: a command or stop */
    pthread_cond_t  changed;  /* to the executor: room in the ring, or drained */
    cmd            *ring;     /* RING commands */
    uint32_t        head, count;
    int             busy;     /* the worker is executing a command it popped */
    int             stop;
    int             started;
} cpu_stream;

struct cpu_ctx {
    pbl__mem         *host;
    int32_t           n_streams, n_events;
    int               flush_denormals;
    int32_t           blas_threads; /* set before each run; 0: leave the library's count */
    uint32_t          saved_csr;   /* the executor thread's MXCSR during a run */
    cpu_stream       *streams;     /* n_streams > 1 only */
    pbl__cpu_pool    *pool;        /* one stream with threads > 1 only */
    pbl__par          par;         /* the pool as kernels see it */
    uint64_t         *recorded;    /* per event: generations enqueued (executor thread only) */
    uint64_t         *reached;     /* per event: generation published by a worker (under ev_mu) */
    pthread_mutex_t   ev_mu;
    pthread_cond_t    ev_cond;
    pthread_mutex_t   fail_mu;
    atomic_int        failed;      /* a kernel failed: skip kernels and fills until sync */
    pbl_status        fail_status; /* the first failure (under fail_mu) */
    const pbl__kargs *fail_args;
};

/* 64-byte alignment for vector loads; the original pointer sits just below the block. */
static void *cpu_alloc(void *ctx, size_t bytes)
{
    cpu_ctx *c = ctx;
    size_t total = bytes + 64 + sizeof(void *);
    char *raw = pbl__mem_alloc(c->host, total);
    if (!raw)
        return NULL;
    uintptr_t p = ((uintptr_t)raw + sizeof(void *) + 63) & ~(uintptr_t)63;
    ((void **)p)[-1] = raw;
    return (void *)p;
}

static void cpu_free(void *ctx, void *p, size_t bytes)
{
    cpu_ctx *c = ctx;
    if (p)
        pbl__mem_free(c->host, ((void **)p)[-1], bytes + 64 + sizeof(void *));
}

static pbl_status cpu_copy(void *ctx, void *dst, const void *src, size_t n)
{
    (void)ctx;
    if (n && dst != src)
        memcpy(dst, src, n);
    return PBL_OK;
}

static int cpu_has_kernel(void *ctx, const pbl__op *op)
{
    (void)ctx;
    return op->cpu != NULL;
}

static void set_blas_threads(int32_t threads)
{
#ifdef PEBBLE_HAVE_OPENBLAS_THREADS
    if (threads > 0 && openblas_get_num_threads() != threads)
        openblas_set_num_threads(threads);
#else
    (void)threads;
#endif
}

/* Whether the pool carries the products too (see "Products with one stream" above): only
 * where the caller left blas_threads to us and the backend can hold OpenBLAS to one thread, so
 * the parts never run a BLAS that threads again under them. */
static int products_on_pool(const pbl__backend_config *cfg)
{
#ifdef PEBBLE_HAVE_OPENBLAS_THREADS
    return cfg->split_products;
#else
    (void)cfg;
    return 0;
#endif
}

/* Denormal arithmetic takes a slow microcode path on x86 (tens of times slower): Adam's moments
 * for weights that stop receiving gradient decay into that range and can slow a whole epoch
 * 2-3x. As TensorFlow does on its CPU threads, flush them (FTZ) and read them as zero (DAZ). */
static void set_flush_denormals(int flush, uint32_t *saved)
{
#ifdef PBL__HAVE_MXCSR
    *saved = _mm_getcsr();
    if (flush)
        _mm_setcsr(*saved | 0x8040u); /* FTZ (bit 15) | DAZ (bit 6) */
#else
    (void)flush;
    *saved = 0;
#endif
}

/* ---- executing one command (on the executor's thread with one stream, else a worker) ---- */

static void note_failure(cpu_ctx *c, pbl_status s, const pbl__kargs *a)
{
    pthread_mutex_lock(&c->fail_mu);
    if (c->fail_status == PBL_OK) {
        c->fail_status = s;
        c->fail_args = a;
    }
    pthread_mutex_unlock(&c->fail_mu);
    atomic_store_explicit(&c->failed, 1, memory_order_release);
}

static void execute(cpu_ctx *c, const cmd *k)
{
    switch (k->kind) {
    case CMD_KERNEL:
        if (!atomic_load_explicit(&c->failed, memory_order_acquire)) {
            pbl_status s;
            if (c->pool) { /* the executor's kargs are const to us: a copy that carries the pool */
                pbl__kargs a = *k->a;
                a.par = &c->par;
                s = k->op->cpu(&a);
            } else {
                s = k->op->cpu(k->a);
            }
            if (s != PBL_OK)
                note_failure(c, s, k->a);
        } else if (k->op->cpu_after_failure) { /* a collective: tell the other ranks */
            (void)k->op->cpu_after_failure(k->a); /* the run's first failure stands */
        }
        break;
    case CMD_FILL:
        if (k->n && !atomic_load_explicit(&c->failed, memory_order_acquire))
            memset(k->dst, k->byte, k->n);
        break;
    case CMD_RECORD:
        pthread_mutex_lock(&c->ev_mu);
        if (c->reached[k->event] < k->gen)
            c->reached[k->event] = k->gen;
        pthread_cond_broadcast(&c->ev_cond);
        pthread_mutex_unlock(&c->ev_mu);
        break;
    case CMD_WAIT:
        pthread_mutex_lock(&c->ev_mu);
        while (c->reached[k->event] < k->gen)
            pthread_cond_wait(&c->ev_cond, &c->ev_mu);
        pthread_mutex_unlock(&c->ev_mu);
        break;
    }
}

static void *worker_main(void *arg)
{
    cpu_stream *st = arg;
    uint32_t unused;
    set_flush_denormals(st->ctx->flush_denormals, &unused);
    pthread_mutex_lock(&st->mu);
    for (;;) {
        while (st->count == 0 && !st->stop)
            pthread_cond_wait(&st->work, &st->mu);
        if (st->count == 0)
            break; /* stop, and nothing left */
        cmd k = st->ring[st->head];
        st->head = (st->head + 1) % RING;
        st->count--;
        st->busy = 1;
        pthread_mutex_unlock(&st->mu);
        execute(st->ctx, &k);
        pthread_mutex_lock(&st->mu);
        st->busy = 0;
        if (st->count == 0 || st->count == RING - 1)
            pthread_cond_broadcast(&st->changed);
    }
    pthread_mutex_unlock(&st->mu);
    return NULL;
}

/* Runs k now (one stream) or queues it on its stream's worker. */
static pbl_status submit(cpu_ctx *c, int32_t stream, const cmd *k)
{
    if (stream < 0 || stream >= c->n_streams)
        return PBL_ERR_INVALID_ARG;
    if (!c->streams) {
        execute(c, k);
        return PBL_OK;
    }
    cpu_stream *st = &c->streams[stream];
    pthread_mutex_lock(&st->mu);
    while (st->count == RING)
        pthread_cond_wait(&st->changed, &st->mu);
    st->ring[(st->head + st->count) % RING] = *k;
    st->count++;
    pthread_cond_signal(&st->work);
    pthread_mutex_unlock(&st->mu);
    return PBL_OK;
}

static pbl_status cpu_fill(void *ctx, int32_t stream, void *dst, int byte, size_t n)
{
    cmd k = { .kind = CMD_FILL, .dst = dst, .byte = byte, .n = n };
    return submit(ctx, stream, &k);
}

static pbl_status cpu_run(void *ctx, int32_t stream, const pbl__op *op, const pbl__kargs *a)
{
    cmd k = { .kind = CMD_KERNEL, .op = op, .a = a };
    return submit(ctx, stream, &k);
}

static pbl_status cpu_record(void *ctx, int32_t stream, int32_t event)
{
    cpu_ctx *c = ctx;
    if (event < 0 || event >= c->n_events)
        return PBL_ERR_INVALID_ARG;
    if (!c->streams) /* one stream: everything already ran in order */
        return stream == 0 ? PBL_OK : PBL_ERR_INVALID_ARG;
    cmd k = { .kind = CMD_RECORD, .event = event, .gen = ++c->recorded[event] };
    return submit(c, stream, &k);
}

static pbl_status cpu_wait(void *ctx, int32_t stream, int32_t event)
{
    cpu_ctx *c = ctx;
    if (event < 0 || event >= c->n_events)
        return PBL_ERR_INVALID_ARG;
    if (!c->streams)
        return stream == 0 ? PBL_OK : PBL_ERR_INVALID_ARG;
    cmd k = { .kind = CMD_WAIT, .event = event, .gen = c->recorded[event] };
    return submit(c, stream, &k);
}

static pbl_status cpu_sync(void *ctx, const pbl__kargs **failed)
{
    cpu_ctx *c = ctx;
    for (int32_t i = 0; c->streams && i < c->n_streams; i++) {
        cpu_stream *st = &c->streams[i];
        pthread_mutex_lock(&st->mu);
        while (st->count || st->busy)
            pthread_cond_wait(&st->changed, &st->mu);
        pthread_mutex_unlock(&st->mu);
    }
    pthread_mutex_lock(&c->fail_mu);
    pbl_status s = c->fail_status;
    if (failed)
        *failed = c->fail_args;
    c->fail_status = PBL_OK;
    c->fail_args = NULL;
    atomic_store_explicit(&c->failed, 0, memory_order_release);
    pthread_mutex_unlock(&c->fail_mu);
    return s;
}

static void cpu_run_begin(void *ctx)
{
    cpu_ctx *c = ctx;
    /* another executor in the process may have changed the count since open */
    set_blas_threads(c->blas_threads);
    set_flush_denormals(c->flush_denormals, &c->saved_csr);
}

static void cpu_run_end(void *ctx)
{
#ifdef PBL__HAVE_MXCSR
    _mm_setcsr(((cpu_ctx *)ctx)->saved_csr);
#else
    (void)ctx;
#endif
}

static void stop_workers(cpu_ctx *c)
{
    for (int32_t i = 0; c->streams && i < c->n_streams; i++) {
        cpu_stream *st = &c->streams[i];
        if (!st->started)
            continue;
        pthread_mutex_lock(&st->mu);
        st->stop = 1;
        pthread_cond_signal(&st->work);
        pthread_mutex_unlock(&st->mu);
        pthread_join(st->thread, NULL);
        st->started = 0;
    }
}

static void cpu_close(void *ctx)
{
    cpu_ctx *c = ctx;
    if (!c)
        return;
    stop_workers(c);
    pbl__cpu_pool_destroy(c->pool);
    for (int32_t i = 0; c->streams && i < c->n_streams; i++) {
        cpu_stream *st = &c->streams[i];
        pthread_mutex_destroy(&st->mu);
        pthread_cond_destroy(&st->work);
        pthread_cond_destroy(&st->changed);
        pbl__mem_free(c->host, st->ring, RING * sizeof *st->ring);
    }
    if (c->streams)
        pbl__mem_free(c->host, c->streams, (size_t)c->n_streams * sizeof *c->streams);
    size_t ne = (size_t)(c->n_events ? c->n_events : 1);
    pbl__mem_free(c->host, c->recorded, ne * sizeof *c->recorded);
    pbl__mem_free(c->host, c->reached, ne * sizeof *c->reached);
    pthread_mutex_destroy(&c->ev_mu);
    pthread_cond_destroy(&c->ev_cond);
    pthread_mutex_destroy(&c->fail_mu);
    pbl__mem_free(c->host, c, sizeof *c);
}

static pbl_status cpu_open(pbl__mem *host, const pbl__backend_config *cfg, void **ctx, char *err, size_t errlen)
{
    *ctx = NULL;
    if (cfg->n_streams < 1 || cfg->n_events < 0) {
        snprintf(err, errlen, "cpu backend: %d streams and %d events (need >= 1 and >= 0)", (int)cfg->n_streams,
                 (int)cfg->n_events);
        return PBL_ERR_INVALID_ARG;
    }
    cpu_ctx *c = pbl__mem_calloc(host, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "cpu backend: out of memory");
        return PBL_ERR_NOMEM;
    }
    c->host = host;
    c->n_streams = cfg->n_streams;
    c->n_events = cfg->n_events;
    c->flush_denormals = cfg->flush_denormals;
    atomic_init(&c->failed, 0);
    pthread_mutex_init(&c->ev_mu, NULL);
    pthread_cond_init(&c->ev_cond, NULL);
    pthread_mutex_init(&c->fail_mu, NULL);
    size_t ne = (size_t)(c->n_events ? c->n_events : 1);
    c->recorded = pbl__mem_calloc(host, ne * sizeof *c->recorded);
    c->reached = pbl__mem_calloc(host, ne * sizeof *c->reached);
    pbl_status s = c->recorded && c->reached ? PBL_OK : PBL_ERR_NOMEM;
    if (s == PBL_OK && c->n_streams > 1) {
        c->streams = pbl__mem_calloc(host, (size_t)c->n_streams * sizeof *c->streams);
        if (!c->streams)
            s = PBL_ERR_NOMEM;
        for (int32_t i = 0; c->streams && i < c->n_streams; i++) { /* close expects them all */
            cpu_stream *st = &c->streams[i];
            st->ctx = c;
            pthread_mutex_init(&st->mu, NULL);
            pthread_cond_init(&st->work, NULL);
            pthread_cond_init(&st->changed, NULL);
            st->ring = pbl__mem_alloc(host, RING * sizeof *st->ring);
            if (!st->ring)
                s = PBL_ERR_NOMEM;
        }
        for (int32_t i = 0; s == PBL_OK && i < c->n_streams; i++) {
            if (pthread_create(&c->streams[i].thread, NULL, worker_main, &c->streams[i]) != 0)
                s = PBL_ERR_NOMEM;
            else
                c->streams[i].started = 1;
        }
    }
    if (s == PBL_OK && c->n_streams == 1 && cfg->threads > 1) {
        int products = products_on_pool(cfg);
        s = pbl__cpu_pool_create(host, cfg->threads, products ? SPIN_LONG : SPIN_SHORT, &c->pool);
        c->par = pbl__cpu_pool_par(c->pool, PAR_MIN_WORK);
        c->par.products = products;
    }
    if (s != PBL_OK) {
        snprintf(err, errlen, "cpu backend: out of memory or threads starting %d streams (%d threads)",
                 (int)cfg->n_streams, (int)cfg->threads);
        cpu_close(c);
        return s;
    }
    c->blas_threads = c->streams || c->par.products ? 1 : cfg->blas_threads;
    set_blas_threads(c->blas_threads);
    *ctx = c;
    return PBL_OK;
}

const pbl__backend pbl__backend_cpu = {
    .name = "cpu",
    .open = cpu_open,
    .close = cpu_close,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .fill = cpu_fill,
    .has_kernel = cpu_has_kernel,
    .run = cpu_run,
    .record = cpu_record,
    .wait = cpu_wait,
    .sync = cpu_sync,
    .run_begin = cpu_run_begin,
    .run_end = cpu_run_end,
    .graph_begin = NULL,
    .graph_end = NULL,
    .graph_launch = NULL,
};
