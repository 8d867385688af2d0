/*
 * The executor: schedule -> storage -> bind -> run.
 *
 *   create: validate, pick the nodes the targets need, order them (graph/ir/schedule.c), place
 *           every value (executor/storage.c), allocate the arena and the variable region
 *           on the backend, and lay out one step per node (its kernel arguments).
 *   bind:   a caller buffer replaces a variable's place; pointers are refreshed before the
 *           next run.
 *   run:    each step's kernel enqueued in schedule order on its stream, with the waits for
 *           steps of other streams before it and an event record after it when another
 *           stream waits for it; then one sync (executor/backend.h describes the protocol).
 *           One stream (the default) runs everything in order on the calling thread.
 *           In dynamic mode the DTR runtime (executor/dynamic/dtr.c) runs the schedule instead,
 *           allocating from a pool as it goes.
 */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "pebble/version.h"
#include "executor/backend.h"
#include "executor/comm/comm.h"
#include "executor/dynamic/dtr.h"
#include "executor/exec_internal.h"
#include "executor/storage.h"
#include "executor/stream_sync.h"
#include "graph/base/errmsg.h"
#include "graph/ir/schedule.h"
#include "graph/ir/registry.h"

/* One scheduled node with its kernel arguments laid out. */
typedef struct step {
    const pbl__op *op;
    pbl_node       node;
    int32_t        stream;
    int32_t        event;  /* recorded after the step when another stream waits for it, else -1 */
    pbl__kargs     args;   /* in/out point into the executor's pointer pool */
} step;

/* Kernel messages: one buffer per stream, so two failing streams never write the same bytes. */
#define KERR 256

struct pbl_exec {
    pbl__mem            mem;
    const pbl_graph    *g;
    const pbl__backend *be;
    void               *bctx;         /* the backend instance */
    int32_t             n_streams;
    pbl__stream_sync    sync;         /* per step: events to wait for and to record */
    pbl__storage        st;
    step               *steps;
    int32_t             n_steps;
    void              **ptr;          /* per value: its data now, NULL if not computed */
    void              **bound;        /* per value: caller buffer, or NULL */
    uint8_t            *has_data;     /* per variable: written, bound or zero-filled */
    pbl_value          *inputs_read;  /* variables the schedule reads */
    int32_t             n_inputs_read;
    void              **io_pool;      /* every step's in/out pointer arrays */
    pbl__meta          *meta_pool;    /* every step's in/out metas (at the current batch) */
    pbl__meta          *vmeta;        /* per value: its meta at the current batch */
    int64_t             batch;        /* the current batch (pbl_exec_set_batch) */
    int64_t             max_batch;    /* the planned batch: the inputs' first dimension, 0 if none */
    pbl__attr_val     **batch_attrs;  /* per step: its attributes at the current batch when its op
                                         counts the batch in one (pbl__op.batch_attr), else NULL */
    size_t              n_io;
    void               *arena;
    void               *variables;
    pbl__dtr           *dtr;          /* dynamic mode's runtime, else NULL */
    int                 dirty;        /* bindings changed: refresh pointers before running */
    int32_t            *poison_start; /* poison: records whose last access is step t - 1 are */
    int32_t            *poison_rec;   /* poison_rec[poison_start[t] .. poison_start[t+1]) */
    int                 ran;          /* a run finished: unkept values are stale */
    int                 cuda_graph;   /* capture the run once and replay it (backend graphs) */
    int                 captured;     /* the backend holds a capture of the current pointers */
    uint64_t            runs;
    char               *kernel_err;   /* n_streams * KERR */
    char               *scratch;      /* CPU kernels' scratch: n_streams * scratch_bytes */
    size_t              scratch_bytes;
    pbl_comm           *comm;         /* the ranks allreduce sums over, or NULL (one rank) */
    char                errmsg[512];
};

PBL__API pbl_exec_options pbl_exec_options_default(void)
{
    pbl_exec_options o = { .allocator = NULL, .backend = PBL_BACKEND_CPU, .storage = PBL_STORAGE_PLANNED,
                           .strategy = NULL, .poison = 0, .threads = 0, .flush_denormals = 1,
                           .targets = NULL, .n_targets = 0, .budget = 0, .trace = NULL, .evict_log = NULL,
                           .streams = 0, .cuda_graph = 0, .blas_threads = 0,
                           .schedule = PBL_SCHEDULE_PROGRAM, .comm = NULL, .comm_overlap = 1 };
    return o;
}

pbl_status pbl__exec_fail(pbl_exec *e, pbl_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pbl__verrf(e->errmsg, sizeof e->errmsg, s, fmt, ap);
    va_end(ap);
    return s;
}

/* The backend's reason for its last failure (pbl__backend.errmsg), or NULL: a device call
 * that failed says which call and why, not only that a copy or a launch failed. */
static const char *be_reason(const pbl_exec *e)
{
    const char *r = e->be->errmsg && e->bctx ? e->be->errmsg(e->bctx) : NULL;
    return r && *r ? r : NULL;
}
/* two arguments for "%s%s": ": reason", or nothing */
#define BE_WHY(e) (be_reason(e) ? ": " : ""), (be_reason(e) ? be_reason(e) : "")

const pbl_graph *pbl__exec_graph(const pbl_exec *e) { return e->g; }
void *pbl__exec_malloc(pbl_exec *e, size_t bytes) { return pbl__mem_alloc(&e->mem, bytes); }
void pbl__exec_free(pbl_exec *e, void *p, size_t bytes) { pbl__mem_free(&e->mem, p, bytes); }
const pbl_allocator *pbl__exec_allocator(const pbl_exec *e) { return e->mem.hook.alloc ? &e->mem.hook : NULL; }

PBL__API const char *pbl_exec_errmsg(const pbl_exec *e) { return e ? e->errmsg : "no executor"; }

PBL__API const char *pbl_exec_device(const pbl_exec *e)
{
    if (!e)
        return "no executor";
    const char *d = e->be->device && e->bctx ? e->be->device(e->bctx) : NULL;
    return d && *d ? d : pbl_cpu_describe();
}

#define NV(e) ((size_t)((e)->g->n_values ? (e)->g->n_values : 1))

PBL__API void pbl_exec_destroy(pbl_exec *e)
{
    if (!e)
        return;
    pbl__dtr_destroy(e->dtr); /* before the backend closes: it frees pool memory there */
    if (e->bctx) {
        e->be->free(e->bctx, e->arena, e->st.arena_bytes);
        e->be->free(e->bctx, e->variables, e->st.variable_bytes);
        e->be->close(e->bctx);
    }
    size_t nsteps1 = (size_t)e->n_steps + 1;
    pbl__stream_sync_free(&e->sync, &e->mem);
    pbl__mem_free(&e->mem, e->kernel_err, (size_t)(e->n_streams ? e->n_streams : 1) * KERR);
    pbl__mem_free(&e->mem, e->scratch, (size_t)e->n_streams * e->scratch_bytes);
    for (int32_t i = 0; e->batch_attrs && i < e->n_steps; i++)
        if (e->batch_attrs[i])
            pbl__mem_free(&e->mem, e->batch_attrs[i], (size_t)e->steps[i].op->n_attrs * sizeof **e->batch_attrs);
    pbl__mem_free(&e->mem, e->batch_attrs, (size_t)(e->n_steps ? e->n_steps : 1) * sizeof *e->batch_attrs);
    pbl__mem_free(&e->mem, e->steps, (size_t)(e->n_steps ? e->n_steps : 1) * sizeof *e->steps);
    pbl__mem_free(&e->mem, e->io_pool, (e->n_io ? e->n_io : 1) * sizeof *e->io_pool);
    pbl__mem_free(&e->mem, e->meta_pool, (e->n_io ? e->n_io : 1) * sizeof *e->meta_pool);
    pbl__mem_free(&e->mem, e->ptr, NV(e) * sizeof *e->ptr);
    pbl__mem_free(&e->mem, e->vmeta, NV(e) * sizeof *e->vmeta);
    pbl__mem_free(&e->mem, e->bound, NV(e) * sizeof *e->bound);
    pbl__mem_free(&e->mem, e->has_data, NV(e));
    pbl__mem_free(&e->mem, e->inputs_read, NV(e) * sizeof *e->inputs_read);
    pbl__mem_free(&e->mem, e->poison_start, nsteps1 * sizeof *e->poison_start);
    pbl__mem_free(&e->mem, e->poison_rec, (size_t)(e->st.live.n_records ? e->st.live.n_records : 1) * sizeof *e->poison_rec);
    pbl__storage_free(&e->st, &e->mem);
    pbl__mem m = e->mem;
    pbl__mem_free(&m, e, sizeof *e);
}

/* Lays out each step's kernel arguments (metas now, pointers at refresh). */
static pbl_status build_steps(pbl_exec *e, const int32_t *order, const int32_t *stream, int32_t n)
{
    const pbl_graph *g = e->g;
    e->n_steps = n;
    e->n_io = 0;
    e->kernel_err = pbl__mem_calloc(&e->mem, (size_t)e->n_streams * KERR);
    if (!e->kernel_err)
        return pbl__exec_fail(e, PBL_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; i < n; i++)
        e->n_io += (size_t)(g->nodes[order[i]].n_in + g->nodes[order[i]].n_out);
    e->steps = pbl__mem_calloc(&e->mem, (size_t)(n ? n : 1) * sizeof *e->steps);
    e->io_pool = pbl__mem_calloc(&e->mem, (e->n_io ? e->n_io : 1) * sizeof *e->io_pool);
    e->meta_pool = pbl__mem_calloc(&e->mem, (e->n_io ? e->n_io : 1) * sizeof *e->meta_pool);
    if (!e->steps || !e->io_pool || !e->meta_pool)
        return pbl__exec_fail(e, PBL_ERR_NOMEM, "out of memory");
    size_t at = 0;
    for (int32_t i = 0; i < n; i++) {
        const pbl__node *nd = &g->nodes[order[i]];
        step *s = &e->steps[i];
        s->op = pbl__op_get(nd->op);
        s->node = order[i];
        s->stream = stream ? stream[i] : 0;
        s->event = -1;
        for (int32_t k = 0; k < nd->n_in; k++)
            e->meta_pool[at + k] = g->values[nd->in[k]].meta;
        for (int32_t k = 0; k < nd->n_out; k++)
            e->meta_pool[at + nd->n_in + k] = g->values[nd->out[k]].meta;
        s->args = (pbl__kargs){ .in = &e->io_pool[at], .out = &e->io_pool[at + nd->n_in],
                                .in_meta = &e->meta_pool[at], .out_meta = &e->meta_pool[at + nd->n_in],
                                .attr = nd->attr, .n_in = nd->n_in, .n_out = nd->n_out,
                                .err = e->kernel_err + (size_t)s->stream * KERR, .errlen = KERR,
                                .coll = nd->op == PBL__OP_allreduce ? pbl__comm_collective(e->comm) : NULL };
        at += (size_t)(nd->n_in + nd->n_out);
        if (e->be == &pbl__backend_cpu && s->op->cpu_scratch) {
            size_t need = s->op->cpu_scratch(&s->args);
            if (need > e->scratch_bytes)
                e->scratch_bytes = need;
        }
    }
    /* one scratch per stream, the most any step needs: kernels on two streams run at once */
    if (e->scratch_bytes) {
        e->scratch = pbl__mem_alloc(&e->mem, (size_t)e->n_streams * e->scratch_bytes);
        if (!e->scratch) {
            e->scratch_bytes = 0;
            return pbl__exec_fail(e, PBL_ERR_NOMEM, "out of memory for the kernels' scratch");
        }
        for (int32_t i = 0; i < n; i++) {
            e->steps[i].args.scratch = e->scratch + (size_t)e->steps[i].stream * e->scratch_bytes;
            e->steps[i].args.scratch_bytes = e->scratch_bytes;
        }
    }
    return PBL_OK;
}

/* Resolves every value's pointer from its place and the current bindings. */
static void refresh_pointers(pbl_exec *e)
{
    const pbl_graph *g = e->g;
    for (pbl_value v = 0; v < g->n_values; v++) {
        switch ((pbl__place)e->st.place[v]) {
        case PBL__PLACE_VARIABLE:
            e->ptr[v] = e->bound[v] && !e->be->device_memory ? e->bound[v] : (char *)e->variables + e->st.offset[v];
            break;
        case PBL__PLACE_ARENA:
            e->ptr[v] = (char *)e->arena + e->st.offset[v];
            break;
        case PBL__PLACE_ALIAS:
        case PBL__PLACE_NONE:
            e->ptr[v] = NULL;
            break;
        case PBL__PLACE_DYNAMIC: /* the dynamic runtime sets it (kept outputs after a run) */
            break;
        }
    }
    /* aliases point at values placed earlier in the schedule or at variables: resolve after */
    for (pbl_value v = 0; v < g->n_values; v++)
        if (e->st.place[v] == PBL__PLACE_ALIAS)
            e->ptr[v] = e->ptr[e->st.alias[v]];
    for (int32_t i = 0; i < e->n_steps; i++) {
        const pbl__node *nd = &g->nodes[e->steps[i].node];
        void **in = (void **)e->steps[i].args.in, **out = (void **)e->steps[i].args.out;
        for (int32_t k = 0; k < nd->n_in; k++)
            in[k] = e->ptr[nd->in[k]];
        for (int32_t k = 0; k < nd->n_out; k++)
            out[k] = e->ptr[nd->out[k]];
    }
    e->dirty = 0;
    e->captured = 0; /* a captured graph holds the old pointers */
}

/* The variables the schedule reads, each once, so run can check they have data. */
static pbl_status collect_inputs(pbl_exec *e)
{
    const pbl_graph *g = e->g;
    uint8_t *seen = pbl__mem_calloc(&e->mem, NV(e));
    if (!seen)
        return pbl__exec_fail(e, PBL_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; i < e->n_steps; i++) {
        const pbl__node *nd = &g->nodes[e->steps[i].node];
        for (int32_t k = 0; k < nd->n_in; k++) {
            pbl_value v = nd->in[k];
            if (g->values[v].producer == PBL_NONE && !seen[v]) {
                seen[v] = 1;
                e->inputs_read[e->n_inputs_read++] = v;
            }
        }
    }
    pbl__mem_free(&e->mem, seen, NV(e));
    return PBL_OK;
}

/* The step after which record r is NaN-filled (its last access), or -1 (kept to the end). */
static int32_t poison_step(const pbl_exec *e, int32_t r)
{
    const pbl__storage *st = &e->st;
    if (st->multi)
        return st->sr.to_end[r] || st->sr.access_start[r] == st->sr.access_start[r + 1]
                   ? -1 : st->sr.access[st->sr.access_start[r + 1] - 1];
    return st->live.records[r].last < e->n_steps ? (int32_t)st->live.records[r].last - 1 : -1;
}

/* For the poison option: the records whose last access is step t - 1 (slot t). */
static pbl_status build_poison_lists(pbl_exec *e)
{
    int32_t n = e->n_steps, nr = e->st.live.n_records;
    e->poison_start = pbl__mem_calloc(&e->mem, (size_t)(n + 1) * sizeof *e->poison_start);
    e->poison_rec = pbl__mem_alloc(&e->mem, (size_t)(nr ? nr : 1) * sizeof *e->poison_rec);
    if (!e->poison_start || !e->poison_rec)
        return pbl__exec_fail(e, PBL_ERR_NOMEM, "out of memory");
    for (int32_t r = 0; r < nr; r++)
        if (poison_step(e, r) >= 0)
            e->poison_start[poison_step(e, r) + 1]++;
    for (int32_t t = 0; t < n; t++)
        e->poison_start[t + 1] += e->poison_start[t];
    /* fill back to front, so poison_start[t] ends as the start of slot t */
    for (int32_t r = nr - 1; r >= 0; r--)
        if (poison_step(e, r) >= 0)
            e->poison_rec[--e->poison_start[poison_step(e, r) + 1]] = r;
    return PBL_OK;
}

/* Which earlier steps each step must see beyond its own stream: the stream plan's waits
 * (dependencies, and the ordering its memory plan relies on) and, with poison, for a fill
 * after step L of a record whose last access is L, that record's accesses on other streams.
 * Then the events that give it (stream_sync.h). */
static pbl_status build_sync(pbl_exec *e, int poison)
{
    const pbl__storage *st = &e->st;
    int32_t n = e->n_steps, k = e->n_streams;
    int32_t *start = pbl__mem_calloc(&e->mem, (size_t)(n + 1) * sizeof *start);
    int32_t *fill = pbl__mem_alloc(&e->mem, (size_t)(n + 1) * sizeof *fill);
    int32_t *stream = pbl__mem_alloc(&e->mem, (size_t)(n ? n : 1) * sizeof *stream);
    int32_t *need = NULL, n_need = 0;
    char why[256] = "";
    pbl_status s = start && fill && stream ? PBL_OK : pbl__exec_fail(e, PBL_ERR_NOMEM, "out of memory");
    for (int32_t t = 0; s == PBL_OK && t < n; t++)
        stream[t] = e->steps[t].stream;
    for (int pass = 0; s == PBL_OK && st->multi && pass < 2; pass++) {
        if (pass == 1) {
            for (int32_t t = 0; t < n; t++)
                start[t + 1] += start[t];
            memcpy(fill, start, (size_t)(n + 1) * sizeof *fill);
            n_need = start[n];
            need = pbl__mem_alloc(&e->mem, (size_t)(n_need ? n_need : 1) * sizeof *need);
            if (!need) {
                s = pbl__exec_fail(e, PBL_ERR_NOMEM, "out of memory");
                break;
            }
        }
        for (int32_t t = 0; t < n; t++)
            for (int32_t w = st->sp.wait_start[t]; w < st->sp.wait_start[t + 1]; w++) {
                if (pass == 0)
                    start[t + 1]++;
                else
                    need[fill[t]++] = st->sp.wait[w];
            }
        for (int32_t r = 0; poison && r < st->sr.n_records; r++) {
            int32_t last = poison_step(e, r);
            for (int32_t a = st->sr.access_start[r]; last >= 0 && a < st->sr.access_start[r + 1]; a++) {
                if (stream[st->sr.access[a]] == stream[last])
                    continue;
                if (pass == 0)
                    start[last + 1]++;
                else
                    need[fill[last]++] = st->sr.access[a];
            }
        }
    }
    if (s == PBL_OK) {
        int32_t none = 0;
        s = pbl__stream_sync_build(n, k, stream, start, need ? need : &none, &e->mem, &e->sync, why, sizeof why);
        if (s != PBL_OK)
            pbl__exec_fail(e, s, "synchronising %d streams: %s", (int)k, why);
    }
    for (int32_t t = 0; s == PBL_OK && t < n; t++)
        e->steps[t].event = e->sync.event[t];
    pbl__mem_free(&e->mem, need, (size_t)(n_need ? n_need : 1) * sizeof *need);
    pbl__mem_free(&e->mem, start, (size_t)(n + 1) * sizeof *start);
    pbl__mem_free(&e->mem, fill, (size_t)(n + 1) * sizeof *fill);
    pbl__mem_free(&e->mem, stream, (size_t)(n ? n : 1) * sizeof *stream);
    return s;
}

/* Plans storage (on streams when asked) and lays out the steps, the poison lists and the
 * waits. stream_of_node: per node of the graph its stream (n_streams of them), or NULL. */
static pbl_status create_steps(pbl_exec *e, const pbl_exec_options *o, int32_t n_streams, const int32_t *stream_of_node)
{
    const pbl_graph *g = e->g;
    char why[512] = "";
    pbl_status s = pbl__storage_plan(g, o, n_streams, stream_of_node, &e->mem, &e->st, why, sizeof why);
    if (s != PBL_OK)
        return pbl__exec_fail(e, s, "%s", why);
    /* the colouring may use fewer streams than asked for */
    e->n_streams = e->st.multi ? e->st.sp.n_streams : 1;
    const int32_t *order = e->st.live.schedule;
    int32_t n_order = e->st.live.n_steps;
    for (int32_t i = 0; i < n_order && s == PBL_OK; i++) {
        const pbl__node *nd = &g->nodes[order[i]];
        const pbl__op *op = pbl__op_get(nd->op);
        if (!e->be->has_kernel(NULL, op))
            s = pbl__exec_fail(e, PBL_ERR_UNSUPPORTED, "node '%s' (%s): the %s backend has no kernel for this op (it can be planned, not run)",
                               nd->name, op->name, e->be->name);
    }
    if (s == PBL_OK)
        s = build_steps(e, order, e->st.multi ? e->st.sp.stream : NULL, n_order);
    if (s == PBL_OK && o->poison && o->storage != PBL_STORAGE_DYNAMIC)
        s = build_poison_lists(e); /* dynamic mode frees bytes instead of reusing them */
    if (s == PBL_OK)
        s = build_sync(e, o->poison);
    return s;
}

/* The batch the executor was planned for: the first dimension shared by every input and
 * label the schedule reads, or 0 (with why, when given) when there is none to vary. */
static int64_t planned_batch(const pbl_exec *e, char *why, size_t whylen)
{
    const pbl_graph *g = e->g;
    int64_t b = 0;
    pbl_value first = PBL_NONE;
    for (int32_t i = 0; i < e->n_inputs_read; i++) {
        const pbl__value *x = &g->values[e->inputs_read[i]];
        if (x->kind != PBL_VALUE_INPUT && x->kind != PBL_VALUE_LABEL)
            continue;
        if (x->meta.shape.ndim < 1) {
            pbl__errf(why, whylen, PBL_ERR_UNSUPPORTED, "%s '%s' has no first dimension to vary",
                      pbl_value_kind_name(x->kind), x->name);
            return 0;
        }
        if (first != PBL_NONE && x->meta.shape.dim[0] != b) {
            pbl__errf(why, whylen, PBL_ERR_UNSUPPORTED,
                      "the inputs do not share a batch: '%s' starts with %lld, '%s' with %lld", g->values[first].name,
                      (long long)b, x->name, (long long)x->meta.shape.dim[0]);
            return 0;
        }
        if (first == PBL_NONE) {
            first = e->inputs_read[i];
            b = x->meta.shape.dim[0];
        }
    }
    if (first == PBL_NONE)
        pbl__errf(why, whylen, PBL_ERR_UNSUPPORTED, "the executor reads no input or label to take a batch from");
    return b;
}

/* Data parallelism: with overlap, communication nodes on a stream of their own (1), every
 * other node on stream 0: a worker thread on the CPU, a CUDA stream on the CUDA backend.
 * asked_streams: pbl_exec_options.streams as the caller gave it (0: the backend's default,
 * which overlap makes one compute stream). *comm_streams is NULL when the graph has none or
 * they stay inline. */
static pbl_status place_comm(pbl_exec *e, const pbl_exec_options *o, int32_t asked_streams,
                             const int32_t *stream_of_node, int32_t **comm_streams)
{
    *comm_streams = NULL;
    if (!o->comm_overlap || stream_of_node || o->storage == PBL_STORAGE_DYNAMIC)
        return PBL_OK;
    int32_t n_comm = 0;
    if (pbl__comm_streams(e->g, o->targets, o->n_targets, &e->mem, comm_streams, &n_comm) != PBL_OK)
        return pbl__exec_fail(e, PBL_ERR_NOMEM, "out of memory");
    if (n_comm == 0)
        return PBL_OK;
    if (asked_streams > 1)
        return pbl__exec_fail(e, PBL_ERR_UNSUPPORTED,
                              "comm_overlap puts the communication nodes on a stream of their own beside one "
                              "compute stream; %d compute streams on the %s backend were asked for "
                              "(set streams = 1, or comm_overlap = 0)",
                              (int)asked_streams, e->be->name);
    if (e->be == &pbl__backend_cpu && !pbl__comm_overlap_ok(o->comm))
        return pbl__exec_fail(e, PBL_ERR_UNSUPPORTED,
                              "comm_overlap calls MPI from the communication thread, which needs MPI initialised "
                              "with MPI_THREAD_SERIALIZED or more (set comm_overlap = 0)");
    return PBL_OK;
}

/* The CUDA backend's allreduce sums GPU memory: only a communicator with a device sum (NCCL)
 * can, and its sums are waited for on the host with a timeout (the backend's sync), which a
 * replayed CUDA graph would not give: a graph launch could hang on a missing peer. */
static pbl_status check_comm_backend(pbl_exec *e, const pbl_exec_options *o)
{
    if (!o->comm || e->be != &pbl__backend_cuda)
        return PBL_OK;
    if (pbl_comm_size(o->comm) > 1 && !pbl__comm_device_ok(o->comm))
        return pbl__exec_fail(e, PBL_ERR_UNSUPPORTED,
                              "data parallelism on the CUDA backend needs an NCCL communicator "
                              "(pbl_comm_create_nccl): this one (MPI) reaches host memory only");
    if (e->cuda_graph && pbl__comm_device_ok(o->comm))
        return pbl__exec_fail(e, PBL_ERR_UNSUPPORTED,
                              "cuda_graph with an NCCL communicator is not supported yet "
                              "(set cuda_graph = 0)");
    return PBL_OK;
}

/* Every rank must run the same graph: compared by hash, a collective over the communicator. */
static pbl_status check_ranks_agree(pbl_exec *e)
{
    char why[384] = "";
    pbl_status s = pbl__comm_check_same(e->comm, pbl__graph_hash(e->g), why, sizeof why);
    return s == PBL_OK ? s : pbl__exec_fail(e, s, "rank %d: %s", (int)pbl_comm_rank(e->comm), why);
}

/* pbl_exec_create, with every node's stream given (stream_of_node, n_streams) or, when
 * stream_of_node is NULL, o->streams streams coloured by pbl_graph_streams. */
static pbl_status create(pbl_exec **out, const pbl_graph *g, const pbl_exec_options *opt, int32_t n_streams,
                         const int32_t *stream_of_node, char *errmsg, size_t errlen)
{
    pbl__errclear(errmsg, errlen);
    if (!out || !g)
        return pbl__errf(errmsg, errlen, PBL_ERR_INVALID_ARG, "exec_create: no %s", out ? "graph" : "output pointer");
    *out = NULL;
    pbl_exec_options o = opt ? *opt : pbl_exec_options_default();
    pbl__mem m;
    pbl__mem_init(&m, o.allocator);
    pbl_exec *e = pbl__mem_calloc(&m, sizeof *e);
    if (!e)
        return pbl__errf(errmsg, errlen, PBL_ERR_NOMEM, "exec_create: out of memory");
    e->mem = m;
    e->g = g;
    e->n_streams = 1;
    pbl_status s = PBL_OK;
    e->be = o.backend == PBL_BACKEND_CUDA ? &pbl__backend_cuda : &pbl__backend_cpu;
    if (o.backend != PBL_BACKEND_CPU && o.backend != PBL_BACKEND_CUDA)
        s = pbl__exec_fail(e, PBL_ERR_INVALID_ARG, "backend %d is not a pbl_backend_kind", (int)o.backend);
    if (s == PBL_OK && o.blas_threads < 0)
        s = pbl__exec_fail(e, PBL_ERR_INVALID_ARG, "blas_threads is %d; need 0 (as threads) or more",
                           (int)o.blas_threads);
    if (s == PBL_OK && e->be->probe) {
        char why[256] = "";
        s = e->be->probe(why, sizeof why);
        if (s != PBL_OK)
            pbl__exec_fail(e, s, "%s", why);
    }
    int32_t asked_streams = o.streams;
    if (o.streams == 0) /* the backend's default: several streams pay off on a GPU */
        o.streams = e->be == &pbl__backend_cuda && o.storage != PBL_STORAGE_DYNAMIC ? 2 : 1;
    e->cuda_graph = o.cuda_graph && e->be->graph_begin && e->be->graph_end && e->be->graph_launch &&
                    o.storage != PBL_STORAGE_DYNAMIC;
    /* Validation only reads g (several executors may be created from one graph at once) and
     * reports into the executor's message. */
    if (s == PBL_OK)
        s = pbl__graph_check(g, &e->mem, e->errmsg, sizeof e->errmsg);
    if (s == PBL_OK) {
        e->ptr = pbl__mem_calloc(&e->mem, NV(e) * sizeof *e->ptr);
        e->bound = pbl__mem_calloc(&e->mem, NV(e) * sizeof *e->bound);
        e->has_data = pbl__mem_calloc(&e->mem, NV(e));
        e->inputs_read = pbl__mem_alloc(&e->mem, NV(e) * sizeof *e->inputs_read);
        e->vmeta = pbl__mem_alloc(&e->mem, NV(e) * sizeof *e->vmeta);
        if (!e->ptr || !e->bound || !e->has_data || !e->inputs_read || !e->vmeta)
            s = pbl__exec_fail(e, PBL_ERR_NOMEM, "out of memory");
    }
    e->comm = o.comm;
    int32_t *comm_streams = NULL;
    if (s == PBL_OK)
        s = check_comm_backend(e, &o);
    if (s == PBL_OK)
        s = place_comm(e, &o, asked_streams, stream_of_node, &comm_streams);
    if (s == PBL_OK && comm_streams)
        s = create_steps(e, &o, 2, comm_streams);
    else if (s == PBL_OK)
        s = create_steps(e, &o, stream_of_node ? n_streams : o.streams, stream_of_node);
    if (comm_streams)
        pbl__mem_free(&e->mem, comm_streams, (size_t)g->n_nodes * sizeof *comm_streams);
    if (s == PBL_OK)
        s = check_ranks_agree(e);
    if (s == PBL_OK)
        s = collect_inputs(e);
    if (s == PBL_OK) {
        for (pbl_value v = 0; v < g->n_values; v++)
            e->vmeta[v] = g->values[v].meta;
        e->max_batch = e->batch = planned_batch(e, NULL, 0);
    }
    if (s == PBL_OK) {
        pbl__backend_config cfg = { .n_streams = e->n_streams, .n_events = e->sync.n_events, .threads = o.threads,
                                    .blas_threads = o.blas_threads ? o.blas_threads : o.threads,
                                    .split_products = o.blas_threads == 0,
                                    .flush_denormals = o.flush_denormals };
        char why[256] = "";
        s = e->be->open(&e->mem, &cfg, &e->bctx, why, sizeof why);
        if (s != PBL_OK)
            pbl__exec_fail(e, s, "%s", why);
    }
    if (s == PBL_OK) {
        e->arena = e->st.arena_bytes ? e->be->alloc(e->bctx, e->st.arena_bytes) : NULL;
        e->variables = e->st.variable_bytes ? e->be->alloc(e->bctx, e->st.variable_bytes) : NULL;
        if ((e->st.arena_bytes && !e->arena) || (e->st.variable_bytes && !e->variables))
            s = pbl__exec_fail(e, PBL_ERR_NOMEM, "out of memory allocating %llu arena and %llu variable bytes",
                               (unsigned long long)e->st.arena_bytes, (unsigned long long)e->st.variable_bytes);
    }
    if (s == PBL_OK && e->variables) {
        s = e->be->fill(e->bctx, 0, e->variables, 0, e->st.variable_bytes);
        if (s == PBL_OK)
            s = e->be->sync(e->bctx, NULL);
        if (s != PBL_OK)
            pbl__exec_fail(e, s, "zero-filling the variables on the %s backend failed%s%s", e->be->name, BE_WHY(e));
    }
    for (pbl_value v = 0; v < g->n_values && s == PBL_OK; v++) /* scalars start at their initial value */
        if (g->values[v].kind == PBL_VALUE_SCALAR) {
            float x = (float)g->values[v].initial;
            s = e->be->upload(e->bctx, (char *)e->variables + e->st.offset[v], &x, sizeof x);
            if (s != PBL_OK)
                pbl__exec_fail(e, s, "setting scalar '%s' on the %s backend failed%s%s", g->values[v].name, e->be->name,
                               BE_WHY(e));
        }
    if (s == PBL_OK && o.storage == PBL_STORAGE_DYNAMIC) {
        pbl__dtr_config dc = { .g = g, .st = &e->st, .be = e->be, .bctx = e->bctx, .mem = &e->mem,
                               .budget = o.budget, .trace = o.trace, .log = o.evict_log };
        char why[512] = "";
        s = pbl__dtr_create(&e->dtr, &dc, why, sizeof why);
        if (s != PBL_OK)
            pbl__exec_fail(e, s, "%s", why);
    }
    if (s == PBL_OK) {
        for (pbl_value v = 0; v < g->n_values; v++)
            e->has_data[v] = g->values[v].kind == PBL_VALUE_STATE || g->values[v].kind == PBL_VALUE_SCALAR;
        refresh_pointers(e);
        *out = e;
        return PBL_OK;
    }
    pbl__errf(errmsg, errlen, s, "%s", e->errmsg);
    pbl_exec_destroy(e);
    return s;
}

PBL__API pbl_status pbl_exec_create(pbl_exec **out, const pbl_graph *g, const pbl_exec_options *opt,
                                    char *errmsg, size_t errlen)
{
    return create(out, g, opt, 0, NULL, errmsg, errlen);
}

pbl_status pbl__exec_create_assigned(pbl_exec **out, const pbl_graph *g, const pbl_exec_options *opt,
                                     int32_t n_streams, const int32_t *stream_of_node, char *errmsg, size_t errlen)
{
    return create(out, g, opt, n_streams, stream_of_node, errmsg, errlen);
}

/* Checks v is a value of the graph of `bytes` bytes; `what` names the call. Sizes are those
 * at the current batch, or with `planned` those the executor was planned for (a bound buffer
 * must hold the planned batch: a later pbl_exec_set_batch may grow the batch back). */
static pbl_status check_value(pbl_exec *e, pbl_value v, size_t bytes, const char *what, int planned)
{
    if (v < 0 || v >= e->g->n_values)
        return pbl__exec_fail(e, PBL_ERR_INVALID_ARG, "%s: %d names no value", what, (int)v);
    const pbl__value *x = &e->g->values[v];
    const pbl__meta *m = planned ? &x->meta : &e->vmeta[v];
    size_t need = pbl__meta_bytes(m);
    if (bytes != need) {
        char sh[96];
        return pbl__exec_fail(e, PBL_ERR_INVALID_ARG, "%s: '%s' is %s %s = %zu bytes%s, got %zu", what, x->name,
                              pbl_shape_str(&m->shape, sh, sizeof sh), pbl_dtype_name(m->dtype), need,
                              !planned && e->batch != e->max_batch ? " at the current batch" : "", bytes);
    }
    return PBL_OK;
}

PBL__API pbl_status pbl_exec_bind(pbl_exec *e, pbl_value v, void *data, size_t bytes)
{
    if (!e)
        return PBL_ERR_INVALID_ARG;
    pbl_status s = check_value(e, v, bytes, "bind", 1);
    if (s != PBL_OK)
        return s;
    if (e->g->values[v].producer != PBL_NONE)
        return pbl__exec_fail(e, PBL_ERR_INVALID_ARG, "bind: '%s' is a node output; only variables can be bound",
                              e->g->values[v].name);
    if (!data)
        return pbl__exec_fail(e, PBL_ERR_INVALID_ARG, "bind: no buffer for '%s'", e->g->values[v].name);
    e->bound[v] = data;
    e->has_data[v] = 1;
    e->dirty = 1;
    return PBL_OK;
}

PBL__API pbl_status pbl_exec_write(pbl_exec *e, pbl_value v, const void *data, size_t bytes)
{
    if (!e)
        return PBL_ERR_INVALID_ARG;
    pbl_status s = check_value(e, v, bytes, "write", 0);
    if (s != PBL_OK)
        return s;
    if (e->dirty)
        refresh_pointers(e);
    if (!e->ptr[v])
        return pbl__exec_fail(e, PBL_ERR_INVALID_ARG, "write: '%s' is not computed by this executor", e->g->values[v].name);
    if (!data && bytes)
        return pbl__exec_fail(e, PBL_ERR_INVALID_ARG, "write: no data for '%s'", e->g->values[v].name);
    if (e->bound[v] && e->be->device_memory) { /* the caller's buffer is the truth; runs upload it */
        memcpy(e->bound[v], data, bytes);
        return PBL_OK;
    }
    s = e->be->upload(e->bctx, e->ptr[v], data, bytes); /* runs end with a sync: nothing is queued */
    if (s != PBL_OK)
        return pbl__exec_fail(e, s, "write: copying '%s' to the device failed%s%s", e->g->values[v].name, BE_WHY(e));
    e->has_data[v] = 1;
    return PBL_OK;
}

PBL__API pbl_status pbl_exec_read(pbl_exec *e, pbl_value v, void *data, size_t bytes)
{
    if (!e)
        return PBL_ERR_INVALID_ARG;
    pbl_status s = check_value(e, v, bytes, "read", 0);
    if (s != PBL_OK)
        return s;
    if (e->dirty)
        refresh_pointers(e);
    if (!e->ptr[v])
        return pbl__exec_fail(e, PBL_ERR_INVALID_ARG, "read: '%s' is not computed by this executor", e->g->values[v].name);
    if (e->ran && !e->st.kept[v])
        return pbl__exec_fail(e, PBL_ERR_INVALID_ARG,
                              "read: '%s' is not kept after a run (later values reuse its bytes): make it a graph output",
                              e->g->values[v].name);
    if (!data && bytes)
        return pbl__exec_fail(e, PBL_ERR_INVALID_ARG, "read: no buffer for '%s'", e->g->values[v].name);
    if (e->bound[v] && e->be->device_memory) { /* runs download parameters and state into it */
        memcpy(data, e->bound[v], bytes);
        return PBL_OK;
    }
    s = e->be->download(e->bctx, data, e->ptr[v], bytes); /* runs end with a sync */
    return s == PBL_OK ? PBL_OK : pbl__exec_fail(e, s, "read: copying '%s' from the device failed%s%s", e->g->values[v].name,
                                                    BE_WHY(e));
}

/* Finds the scalar variable called `name` (PBL_ERR_NOT_FOUND, PBL_ERR_INVALID_ARG: not a scalar). */
static pbl_status find_scalar(pbl_exec *e, const char *name, const char *what, pbl_value *out)
{
    pbl_value v = name ? pbl_graph_find_value(e->g, name) : PBL_NONE;
    if (v == PBL_NONE)
        return pbl__exec_fail(e, PBL_ERR_NOT_FOUND, "%s: the graph has no scalar '%s'", what, name ? name : "(null)");
    if (e->g->values[v].kind != PBL_VALUE_SCALAR)
        return pbl__exec_fail(e, PBL_ERR_INVALID_ARG, "%s: '%s' is a %s, not a scalar", what, name,
                              pbl_value_kind_name(e->g->values[v].kind));
    *out = v;
    return PBL_OK;
}

PBL__API pbl_status pbl_exec_set_scalar(pbl_exec *e, const char *name, double value)
{
    if (!e)
        return PBL_ERR_INVALID_ARG;
    pbl_value v = PBL_NONE;
    pbl_status s = find_scalar(e, name, "set_scalar", &v);
    if (s != PBL_OK)
        return s;
    /* a NaN or infinite rate would silently turn every weight into NaN at the next run */
    if (!(fabs(value) <= FLT_MAX)) /* NaN too; and no out-of-range conversion to float */
        return pbl__exec_fail(e, PBL_ERR_INVALID_ARG, "set_scalar: '%s' = %g is not a finite f32", name, value);
    float x = (float)value;
    return pbl_exec_write(e, v, &x, sizeof x);
}

PBL__API pbl_status pbl_exec_get_scalar(pbl_exec *e, const char *name, double *value)
{
    if (!e)
        return PBL_ERR_INVALID_ARG;
    if (!value)
        return pbl__exec_fail(e, PBL_ERR_INVALID_ARG, "get_scalar: no place for '%s'", name ? name : "(null)");
    pbl_value v = PBL_NONE;
    pbl_status s = find_scalar(e, name, "get_scalar", &v);
    if (s != PBL_OK)
        return s;
    float x = 0.0f;
    s = pbl_exec_read(e, v, &x, sizeof x);
    if (s == PBL_OK)
        *value = x;
    return s;
}

/* Shapes of every scheduled value at batch n (the inputs' first dimension n, the rest by the
 * ops' shape rules) into m, each checked to fit the bytes planned for it; and the CPU
 * kernels' scratch at n checked against what was allocated. */
static pbl_status metas_at_batch(pbl_exec *e, int64_t n, pbl__meta *m)
{
    const pbl_graph *g = e->g;
    for (pbl_value v = 0; v < g->n_values; v++)
        m[v] = g->values[v].meta;
    for (int32_t i = 0; i < e->n_inputs_read; i++) {
        pbl_value v = e->inputs_read[i];
        if (g->values[v].kind == PBL_VALUE_INPUT || g->values[v].kind == PBL_VALUE_LABEL)
            m[v].shape.dim[0] = n;
    }
    for (int32_t i = 0; i < e->n_steps; i++) {
        const pbl__node *nd = &g->nodes[e->steps[i].node];
        pbl__meta out[PBL__MAX_OUT], in[PBL__MAX_IN];
        char why[448] = "";
        pbl_status s = pbl__graph_infer_node_with(g, nd, m, out, why, sizeof why);
        if (s != PBL_OK)
            return pbl__exec_fail(e, PBL_ERR_UNSUPPORTED, "set_batch: at batch %lld, %s", (long long)n, why);
        for (int32_t k = 0; k < nd->n_out; k++) {
            const pbl__value *x = &g->values[nd->out[k]];
            if (out[k].dtype != x->meta.dtype || pbl__meta_bytes(&out[k]) > pbl__meta_bytes(&x->meta)) {
                char a[96], b[96];
                return pbl__exec_fail(e, PBL_ERR_UNSUPPORTED,
                                      "set_batch: at batch %lld '%s' would be %s, larger than the %s it was planned for",
                                      (long long)n, x->name, pbl_shape_str(&out[k].shape, a, sizeof a),
                                      pbl_shape_str(&x->meta.shape, b, sizeof b));
            }
            m[nd->out[k]] = out[k];
        }
        const pbl__op *op = e->steps[i].op;
        if (op->batch_attr && nd->attr[op->batch_attr - 1].i % e->max_batch != 0)
            return pbl__exec_fail(e, PBL_ERR_UNSUPPORTED,
                                  "set_batch: node '%s' (%s) counts %lld samples, not a multiple of the planned batch %lld",
                                  nd->name, op->name, (long long)nd->attr[op->batch_attr - 1].i, (long long)e->max_batch);
        if (e->be == &pbl__backend_cpu && op->cpu_scratch) {
            for (int32_t k = 0; k < nd->n_in; k++)
                in[k] = m[nd->in[k]];
            pbl__kargs a = e->steps[i].args;
            a.in_meta = in;
            a.out_meta = out;
            if (op->cpu_scratch(&a) > e->scratch_bytes)
                return pbl__exec_fail(e, PBL_ERR_UNSUPPORTED, "set_batch: at batch %lld node '%s' needs more scratch than planned",
                                      (long long)n, nd->name);
        }
    }
    return PBL_OK;
}

/* The per-step attribute copies of steps whose op counts the batch in an attribute, made on
 * the first pbl_exec_set_batch; their kernels read the copies from then on. */
static pbl_status batch_attrs_alloc(pbl_exec *e)
{
    if (e->batch_attrs)
        return PBL_OK;
    e->batch_attrs = pbl__mem_calloc(&e->mem, (size_t)(e->n_steps ? e->n_steps : 1) * sizeof *e->batch_attrs);
    if (!e->batch_attrs)
        return pbl__exec_fail(e, PBL_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; i < e->n_steps; i++) {
        const pbl__op *op = e->steps[i].op;
        if (!op->batch_attr)
            continue;
        size_t bytes = (size_t)op->n_attrs * sizeof **e->batch_attrs;
        e->batch_attrs[i] = pbl__mem_alloc(&e->mem, bytes);
        if (!e->batch_attrs[i])
            return pbl__exec_fail(e, PBL_ERR_NOMEM, "out of memory");
        memcpy(e->batch_attrs[i], e->g->nodes[e->steps[i].node].attr, bytes);
        e->steps[i].args.attr = e->batch_attrs[i];
    }
    return PBL_OK;
}

PBL__API pbl_status pbl_exec_set_batch(pbl_exec *e, int64_t n)
{
    if (!e)
        return PBL_ERR_INVALID_ARG;
    if (e->max_batch == 0) {
        char why[384] = "";
        planned_batch(e, why, sizeof why);
        return pbl__exec_fail(e, PBL_ERR_UNSUPPORTED, "set_batch: %s", why);
    }
    if (n < 1 || n > e->max_batch)
        return pbl__exec_fail(e, PBL_ERR_INVALID_ARG,
                              "set_batch: batch %lld is outside [1, %lld] (the executor was planned for batch %lld)",
                              (long long)n, (long long)e->max_batch, (long long)e->max_batch);
    if (n == e->batch)
        return PBL_OK;
    if (e->dtr)
        return pbl__exec_fail(e, PBL_ERR_UNSUPPORTED, "set_batch: dynamic storage runs only the batch it was created for (%lld)",
                              (long long)e->max_batch);
    pbl__meta *m = pbl__mem_alloc(&e->mem, NV(e) * sizeof *m);
    if (!m)
        return pbl__exec_fail(e, PBL_ERR_NOMEM, "out of memory");
    pbl_status s = metas_at_batch(e, n, m);
    if (s == PBL_OK)
        s = batch_attrs_alloc(e);
    if (s == PBL_OK) {
        memcpy(e->vmeta, m, (size_t)e->g->n_values * sizeof *m);
        for (int32_t i = 0; i < e->n_steps; i++) {
            const pbl__node *nd = &e->g->nodes[e->steps[i].node];
            pbl__meta *in = (pbl__meta *)e->steps[i].args.in_meta, *out = (pbl__meta *)e->steps[i].args.out_meta;
            for (int32_t k = 0; k < nd->n_in; k++)
                in[k] = m[nd->in[k]];
            for (int32_t k = 0; k < nd->n_out; k++)
                out[k] = m[nd->out[k]];
            if (e->batch_attrs[i]) {
                int32_t j = e->steps[i].op->batch_attr - 1;
                e->batch_attrs[i][j].i = nd->attr[j].i / e->max_batch * n;
            }
        }
        e->batch = n;
        e->captured = 0; /* a captured CUDA graph holds the old shapes */
    }
    pbl__mem_free(&e->mem, m, NV(e) * sizeof *m);
    return s;
}

/* Enqueues NaN fills (0xFF bytes) of the records whose last access was the step before `slot`
 * (slot < n_steps), on that step's stream: build_sync made the step wait for the records'
 * accesses on other streams. */
static pbl_status poison_after(pbl_exec *e, int32_t slot)
{
    const pbl_graph_records *lv = &e->st.live;
    for (int32_t k = e->poison_start[slot]; k < e->poison_start[slot + 1]; k++) {
        int32_t r = e->poison_rec[k];
        pbl_status s = e->be->fill(e->bctx, e->steps[slot - 1].stream,
                                   e->arena ? (char *)e->arena + e->st.plan.offset[r] : NULL, 0xFF,
                                   (size_t)lv->records[r].size);
        if (s != PBL_OK)
            return pbl__exec_fail(e, s, "poison: filling '%s' failed%s%s", e->g->values[lv->record_value[r]].name,
                                  BE_WHY(e));
    }
    return PBL_OK;
}

/* Enqueues step i with its waits before it, its poison fills and its event after it. */
static pbl_status enqueue_step(pbl_exec *e, int32_t i)
{
    step *st = &e->steps[i];
    pbl_status s = PBL_OK;
    for (int32_t w = e->sync.wait_start[i]; w < e->sync.wait_start[i + 1] && s == PBL_OK; w++)
        s = e->be->wait(e->bctx, st->stream, e->sync.wait_ev[w]);
    st->args.run = e->runs;
    if (s == PBL_OK)
        s = e->be->run(e->bctx, st->stream, st->op, &st->args);
    if (s == PBL_OK && e->poison_start && i + 1 < e->n_steps) /* nothing dies after the last step */
        s = poison_after(e, i + 1);
    if (s == PBL_OK && st->event >= 0)
        s = e->be->record(e->bctx, st->stream, st->event);
    if (s != PBL_OK)
        pbl__exec_fail(e, s, "node '%s' (%s): enqueueing on stream %d failed%s%s", e->g->nodes[st->node].name,
                       st->op->name, (int)st->stream, BE_WHY(e));
    return s;
}

/* Device-memory backends: bound variables live in executor storage during a run; their
 * caller buffers are copied in before it (to_device) and, for parameters and state (which
 * updates write), out after it. */
static pbl_status copy_bound(pbl_exec *e, int to_device)
{
    for (pbl_value v = 0; e->be->device_memory && v < e->g->n_values; v++) {
        const pbl__value *x = &e->g->values[v];
        if (!e->bound[v] || (!to_device && x->kind != PBL_VALUE_PARAM && x->kind != PBL_VALUE_STATE))
            continue;
        size_t n = pbl__meta_bytes(&e->vmeta[v]); /* inputs: the current batch's prefix */
        pbl_status s = to_device ? e->be->upload(e->bctx, e->ptr[v], e->bound[v], n)
                                 : e->be->download(e->bctx, e->bound[v], e->ptr[v], n);
        if (s != PBL_OK)
            return pbl__exec_fail(e, s, "run: copying bound '%s' %s the %s device failed%s%s", x->name,
                                  to_device ? "to" : "from", e->be->name, BE_WHY(e));
    }
    return PBL_OK;
}

/* Enqueues every step, or with cuda_graph captures them once (again after a bind moved a
 * pointer) and launches the capture. */
static pbl_status enqueue_all(pbl_exec *e)
{
    pbl_status s = PBL_OK;
    if (!e->cuda_graph) {
        for (int32_t i = 0; i < e->n_steps && s == PBL_OK; i++)
            s = enqueue_step(e, i);
        return s;
    }
    if (!e->captured) {
        s = e->be->graph_begin(e->bctx);
        if (s != PBL_OK)
            return pbl__exec_fail(e, s, "run: starting the %s graph capture failed%s%s", e->be->name, BE_WHY(e));
        for (int32_t i = 0; i < e->n_steps && s == PBL_OK; i++)
            s = enqueue_step(e, i);
        pbl_status es = e->be->graph_end(e->bctx); /* always: it ends the capture */
        if (s == PBL_OK && es != PBL_OK)
            s = pbl__exec_fail(e, es, "run: capturing the schedule as a %s graph failed%s%s", e->be->name,
                               BE_WHY(e));
        if (s != PBL_OK)
            return s;
        e->captured = 1;
    }
    s = e->be->graph_launch(e->bctx, e->runs);
    return s == PBL_OK ? PBL_OK : pbl__exec_fail(e, s, "run: launching the %s graph failed%s%s", e->be->name, BE_WHY(e));
}

PBL__API pbl_status pbl_exec_run(pbl_exec *e)
{
    if (!e)
        return PBL_ERR_INVALID_ARG;
    for (int32_t i = 0; i < e->n_inputs_read; i++) {
        pbl_value v = e->inputs_read[i];
        if (!e->has_data[v])
            return pbl__exec_fail(e, PBL_ERR_UNBOUND, "%s '%s' has no data: bind it or write it before running",
                                  pbl_value_kind_name(e->g->values[v].kind), e->g->values[v].name);
    }
    if (e->dirty)
        refresh_pointers(e);
    if (e->be->run_begin)
        e->be->run_begin(e->bctx);
    pbl_status s = copy_bound(e, 1);
    if (s == PBL_OK && e->dtr) {
        char why[512] = "";
        s = pbl__dtr_run(e->dtr, e->ptr, e->runs, why, sizeof why);
        if (s != PBL_OK)
            pbl__exec_fail(e, s, "%s", why);
    }
    if (s == PBL_OK && !e->dtr)
        s = enqueue_all(e);
    /* always sync: queued work must finish before the caller touches its buffers */
    const pbl__kargs *failed = NULL;
    pbl_status ks = e->be->sync(e->bctx, &failed);
    if (ks != PBL_OK && (s == PBL_OK || failed)) { /* a kernel's own message says more */
        s = ks;
        if (failed) {
            const step *st = (const step *)(const void *)((const char *)failed - offsetof(step, args));
            pbl__exec_fail(e, s, "node '%s' (%s): %s", e->g->nodes[st->node].name, st->op->name, failed->err);
        } else {
            pbl__exec_fail(e, s, "run: waiting for the %s backend failed%s%s", e->be->name, BE_WHY(e));
        }
    }
    if (s == PBL_OK)
        s = copy_bound(e, 0);
    if (e->be->run_end)
        e->be->run_end(e->bctx);
    if (s == PBL_OK)
        e->runs++;
    e->ran = 1;
    return s;
}

PBL__API uint64_t pbl_exec_run_count(const pbl_exec *e) { return e ? e->runs : 0; }

void pbl__exec_set_run_count(pbl_exec *e, uint64_t runs) { e->runs = runs; }

int32_t pbl__exec_node_stream(const pbl_exec *e, pbl_node n)
{
    for (int32_t i = 0; i < e->n_steps; i++)
        if (e->steps[i].node == n)
            return e->steps[i].stream;
    return -1;
}

PBL__API pbl_status pbl_exec_stats_get(const pbl_exec *e, pbl_exec_stats *out)
{
    if (!e || !out)
        return PBL_ERR_INVALID_ARG;
    *out = (pbl_exec_stats){ .nodes = e->n_steps, .arena_bytes = e->st.arena_bytes,
                             .variable_bytes = e->st.variable_bytes, .host_bytes = e->mem.live,
                             .host_peak = e->mem.peak, .naive_bytes = e->st.naive_bytes,
                             .unshared_bytes = e->st.unshared_bytes,
                             .lower_bound = e->st.lower_bound, .records = e->st.live.n_records,
                             .inplace = e->st.live.n_inplace, .strategy = e->st.strategy,
                             .streams = e->n_streams, .waits = e->sync.n_waits,
                             .batch = e->batch, .planned_batch = e->max_batch };
    if (e->dtr) {
        pbl__dtr_stats ds;
        pbl__dtr_stats_get(e->dtr, &ds);
        out->dynamic_budget = ds.budget;
        out->dynamic_min_budget = ds.min_budget;
        out->dynamic_peak = ds.peak;
        out->dynamic_unlimited_peak = ds.unlimited_peak;
        out->evictions = ds.evictions;
        out->remat_ops = ds.remat_ops;
        out->remat_depth = ds.max_depth > 0 ? ds.max_depth - 1 : 0;
        out->dynamic_pool_bytes = ds.pool_bytes;
        out->dynamic_pool_peak_in_use = ds.pool_peak_in_use;
    }
    return PBL_OK;
}

static int cmp_by_offset(const void *a, const void *b, void *ctx)
{
    const int64_t *off = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (off[x] != off[y])
        return off[x] < off[y] ? -1 : 1;
    return (x > y) - (x < y);
}

PBL__API pbl_status pbl_exec_dump_plan(const pbl_exec *e, FILE *f)
{
    if (!e || !f)
        return PBL_ERR_INVALID_ARG;
    if (e->dtr) {
        pbl_exec_stats st;
        pbl_exec_stats_get(e, &st);
        fprintf(f, "dynamic mode: nothing planned; budget %llu bytes (0: none), largest working set %llu, "
                   "peak %llu (without a budget %llu); last run: %lld evictions, %lld kernels re-run\n",
                (unsigned long long)st.dynamic_budget, (unsigned long long)st.dynamic_min_budget,
                (unsigned long long)st.dynamic_peak, (unsigned long long)st.dynamic_unlimited_peak,
                (long long)st.evictions, (long long)st.remat_ops);
        return ferror(f) ? PBL_ERR_IO : PBL_OK;
    }
    const pbl_graph_records *lv = &e->st.live;
    const pbl_graph *g = e->g;
    int32_t nr = lv->n_records;
    pbl__mem m;
    pbl__mem_init(&m, NULL);
    int32_t *idx = pbl__mem_alloc(&m, (size_t)(nr ? nr : 1) * sizeof *idx);
    if (!idx)
        return PBL_ERR_NOMEM;
    for (int32_t r = 0; r < nr; r++)
        idx[r] = r;
    /* insertion sort by offset: plans are printed for people, so they are small */
    for (int32_t i = 1; i < nr; i++)
        for (int32_t j = i; j > 0 && cmp_by_offset(&idx[j - 1], &idx[j], e->st.plan.offset) > 0; j--) {
            int32_t t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
    fprintf(f, "%10s %10s  %-11s %s\n", "offset", "bytes", "steps", "values (in place: a <- b)");
    for (int32_t i = 0; i < nr; i++) {
        int32_t r = idx[i];
        char steps[32];
        snprintf(steps, sizeof steps, "[%lld, %lld)", (long long)lv->records[r].first, (long long)lv->records[r].last);
        fprintf(f, "%10lld %10lld  %-11s %s", (long long)e->st.plan.offset[r], (long long)lv->records[r].size, steps,
                g->values[lv->record_value[r]].name);
        for (pbl_value v = 0; v < g->n_values; v++)
            if (lv->value_record[v] == r && v != lv->record_value[r])
                fprintf(f, " <- %s", g->values[v].name);
        fputc('\n', f);
    }
    fprintf(f, "arena %llu bytes (%s), naive %llu, unshared %llu, lower bound %llu; %d records, %d in place, %d steps\n",
            (unsigned long long)e->st.arena_bytes, e->st.strategy, (unsigned long long)e->st.naive_bytes,
            (unsigned long long)e->st.unshared_bytes,
            (unsigned long long)e->st.lower_bound, (int)nr, (int)lv->n_inplace, (int)lv->n_steps);
    pbl__mem_free(&m, idx, (size_t)(nr ? nr : 1) * sizeof *idx);
    return ferror(f) ? PBL_ERR_IO : PBL_OK;
}
