/*
 * The CPU backend's worker pool for splitting one kernel's loop (executor/cpu/pool.h).
 *
 * A job is cut into `parts` chunks that the dispatching thread and the workers claim one at a
 * time from a shared counter until none is left, so a worker that wakes late (a sleeping
 * thread takes tens of microseconds to get a core back, more on a busy machine) only claims
 * fewer chunks: the dispatcher never waits for a chunk nobody has started. The counter
 * carries the job's generation in its high half and a claim is a compare-and-swap on both,
 * so a worker still holding an old job can never claim a chunk of the next one.
 *
 * Workers poll the generation for a little while after each job (consecutive split kernels
 * follow each other within microseconds) and then sleep on a condition variable; the
 * dispatcher polls the count of finished chunks in the same way before it sleeps. How long
 * is the creator's choice (executor/cpu/backend.c): short while BLAS calls with threads of
 * their own come between split kernels and want these cores, longer when the pool carries
 * the products too and nothing else is waiting for them.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#include "executor/cpu/pool.h"

#if defined(__SSE2__) || defined(__x86_64__)
#include <emmintrin.h>
static inline uint32_t get_csr(void) { return _mm_getcsr(); }
static inline void set_csr(uint32_t v) { _mm_setcsr(v); }
static inline void relax(void) { _mm_pause(); }
#else
static inline uint32_t get_csr(void) { return 0; }
static inline void set_csr(uint32_t v) { (void)v; }
static inline void relax(void) {}
#endif

typedef struct worker {
    pbl__cpu_pool *pool;
    pthread_t      thread;
    int            started;
} worker;

/* Poll i of a wait: the first PAUSES pause instructions (the core stays ours, the answer
 * comes within a few hundred nanoseconds), then sched_yield, which lets any other runnable
 * thread on this core run first, as OpenBLAS's own threads wait: on a machine shared with
 * other work a waiting worker does not keep a core from it. */
enum { PAUSES = 256 };
static inline void poll_once(int32_t i)
{
    if (i < PAUSES)
        relax();
    else
        sched_yield();
}

/* One job as a thread that took it sees it. */
typedef struct job {
    pbl__range_fn fn;
    void         *ctx;
    int64_t       n, chunk;
    uint32_t      parts;
    uint32_t      gen;
    uint32_t      csr;
} job;

struct pbl__cpu_pool {
    pbl__mem        *host;
    int32_t          threads;
    int32_t          spin;    /* polls before sleeping (pbl__cpu_pool_create, poll_once) */
    worker          *workers; /* threads - 1 */
    pthread_mutex_t  mu;
    pthread_cond_t   work;    /* to the workers: a new job, or stop */
    pthread_cond_t   done;    /* to the dispatcher: the last chunk finished */
    atomic_uint_least32_t gen;     /* the current job's generation */
    atomic_uint_least64_t claim;   /* gen << 32 | the next chunk to claim */
    atomic_uint_least32_t finished;/* chunks of the current job finished */
    int              stop;    /* under mu */
    job              cur;     /* the current job (under mu) */
    uint64_t         jobs;    /* dispatcher thread only */
};

/* Claims and runs chunks of j until none is left; returns how many it ran. */
static uint32_t run_chunks(pbl__cpu_pool *p, const job *j)
{
    uint32_t ran = 0;
    uint64_t c = atomic_load_explicit(&p->claim, memory_order_relaxed);
    for (;;) {
        if ((uint32_t)(c >> 32) != j->gen || (uint32_t)c >= j->parts)
            return ran;
        if (!atomic_compare_exchange_weak_explicit(&p->claim, &c, c + 1, memory_order_relaxed,
                                                   memory_order_relaxed))
            continue; /* c now holds the counter's value */
        int64_t lo = (int64_t)(uint32_t)c * j->chunk, hi = lo + j->chunk < j->n ? lo + j->chunk : j->n;
        j->fn(j->ctx, lo, hi);
        ran++;
        c++;
        if (atomic_fetch_add_explicit(&p->finished, 1, memory_order_acq_rel) + 1 == j->parts) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
            return ran;
        }
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    pbl__cpu_pool *p = w->pool;
    uint32_t seen = 0, csr = get_csr();
    for (;;) {
        for (int32_t i = 0; i < p->spin && atomic_load_explicit(&p->gen, memory_order_relaxed) == seen; i++)
            poll_once(i);
        pthread_mutex_lock(&p->mu);
        while (atomic_load_explicit(&p->gen, memory_order_relaxed) == seen && !p->stop)
            pthread_cond_wait(&p->work, &p->mu);
        if (p->stop) {
            pthread_mutex_unlock(&p->mu);
            break;
        }
        job j = p->cur; /* the data the job reads was written before it was published */
        seen = j.gen;
        pthread_mutex_unlock(&p->mu);
        if (j.csr != csr)
            set_csr(csr = j.csr);
        run_chunks(p, &j);
    }
    return NULL;
}

static void pool_run(void *pool, int64_t n, int64_t align, int32_t parts, pbl__range_fn fn, void *ctx)
{
    pbl__cpu_pool *p = pool;
    if (align < 1)
        align = 1;
    int64_t chunk = parts > 1 ? (n + parts - 1) / parts : n;
    chunk = (chunk + align - 1) / align * align;
    if (chunk > 0)
        parts = (int32_t)((n + chunk - 1) / chunk);
    if (parts < 2) {
        fn(ctx, 0, n);
        return;
    }
    pthread_mutex_lock(&p->mu);
    uint32_t gen = atomic_load_explicit(&p->gen, memory_order_relaxed) + 1;
    p->cur = (job){ .fn = fn, .ctx = ctx, .n = n, .chunk = chunk, .parts = (uint32_t)parts, .gen = gen,
                    .csr = get_csr() };
    atomic_store_explicit(&p->finished, 0, memory_order_relaxed);
    atomic_store_explicit(&p->claim, (uint64_t)gen << 32, memory_order_relaxed);
    atomic_store_explicit(&p->gen, gen, memory_order_relaxed);
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    p->jobs++;

    job j = p->cur;
    run_chunks(p, &j);

    for (int32_t i = 0; i < p->spin && atomic_load_explicit(&p->finished, memory_order_acquire) != j.parts; i++)
        poll_once(i);
    if (atomic_load_explicit(&p->finished, memory_order_acquire) != j.parts) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load_explicit(&p->finished, memory_order_acquire) != j.parts)
            pthread_cond_wait(&p->done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}

void pbl__cpu_pool_destroy(pbl__cpu_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int32_t i = 0; i < p->threads - 1; i++)
        if (p->workers[i].started)
            pthread_join(p->workers[i].thread, NULL);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    pbl__mem_free(p->host, p->workers, (size_t)(p->threads - 1) * sizeof *p->workers);
    pbl__mem_free(p->host, p, sizeof *p);
}

pbl_status pbl__cpu_pool_create(pbl__mem *host, int32_t threads, int32_t spin, pbl__cpu_pool **out)
{
    *out = NULL;
    if (threads < 2)
        return PBL_ERR_INVALID_ARG;
    pbl__cpu_pool *p = pbl__mem_calloc(host, sizeof *p);
    if (!p)
        return PBL_ERR_NOMEM;
    p->host = host;
    p->workers = pbl__mem_calloc(host, (size_t)(threads - 1) * sizeof *p->workers);
    if (!p->workers) {
        pbl__mem_free(host, p, sizeof *p);
        return PBL_ERR_NOMEM;
    }
    p->threads = threads;
    p->spin = spin > 0 ? spin : 1;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->gen, 0);
    atomic_init(&p->claim, 0);
    atomic_init(&p->finished, 0);
    for (int32_t i = 0; i < threads - 1; i++) {
        worker *w = &p->workers[i];
        w->pool = p;
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            pbl__cpu_pool_destroy(p);
            return PBL_ERR_NOMEM;
        }
        w->started = 1;
    }
    *out = p;
    return PBL_OK;
}

pbl__par pbl__cpu_pool_par(pbl__cpu_pool *p, int64_t min_work)
{
    return (pbl__par){ .pool = p, .threads = p ? p->threads : 1, .min_work = min_work, .run = pool_run };
}

uint64_t pbl__cpu_pool_jobs(const pbl__cpu_pool *p) { return p ? p->jobs : 0; }
