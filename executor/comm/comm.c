/*
 * pbl_comm (pebble/exec.h): a communicator over a module that the library loads on first use.
 *
 * Why a module, as for CUDA (executor/cuda/loader.c): libmpi would otherwise be a dependency
 * of every program linking pebble (and of every static link), though most never start under
 * mpirun. libpebble_mpi.so links it; the library only dlopens it. It is opened RTLD_GLOBAL:
 * Open MPI loads its own components (transports, collectives) with dlopen and they resolve
 * libmpi's symbols globally.
 *
 * Where the module is looked for: $PEBBLE_MPI_MODULE (a path), next to the file holding this
 * code (libpebble.so, or the executable a static libpebble is linked into), then the dynamic
 * loader's search path. A build without MPI tries only $PEBBLE_MPI_MODULE. NCCL's module,
 * libpebble_nccl.so ($PEBBLE_NCCL_MODULE), is found the same way; it carries MPI's code too
 * (MPI brings the ranks together and moves NCCL's unique id), so a program uses one module
 * or the other: both at once would each count MPI's initialisation alone.
 */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "executor/comm/comm.h"
#include "executor/module.h"
#include "graph/base/errmsg.h"
#include "graph/base/export.h"

/* One module to load: MPI's, or NCCL's (libpebble_nccl.so, which holds MPI's code too). */
typedef struct module_slot {
    const char             *file, *symbol, *env, *missing; /* missing: why a build lacks it */
    int                     built;
    pthread_once_t          once;
    const pbl__comm_module *m;
    char                    error[512];
} module_slot;

#ifdef PEBBLE_HAVE_MPI
#define HAVE_MPI 1
#else
#define HAVE_MPI 0
#endif
#ifdef PEBBLE_HAVE_NCCL
#define HAVE_NCCL 1
#else
#define HAVE_NCCL 0
#endif

static module_slot mpi_slot = { "libpebble_mpi.so", "pbl_mpi_comm_module", "PEBBLE_MPI_MODULE",
                                "pebble was built without MPI (PEBBLE_MPI=OFF or no MPI found)", HAVE_MPI,
                                PTHREAD_ONCE_INIT, NULL, "" };
static module_slot nccl_slot = { "libpebble_nccl.so", "pbl_nccl_comm_module", "PEBBLE_NCCL_MODULE",
                                 "pebble was built without NCCL (PEBBLE_NCCL=OFF, or no NCCL, CUDA toolkit or MPI "
                                 "found)",
                                 HAVE_NCCL, PTHREAD_ONCE_INIT, NULL, "" };

struct pbl_comm {
    const pbl__comm_module *m;
    void                   *ctx;
    pbl__collective         coll;
    int32_t                 overlap_ok;
    char                    errmsg[512];
};

static void *try_open(module_slot *sl, const char *path)
{
    return pbl__module_open(path, RTLD_NOW | RTLD_GLOBAL, sl->error, sizeof sl->error);
}

static void load(module_slot *sl)
{
    const char *env = getenv(sl->env);
    void *h = NULL;
    if (env && *env) {
        h = try_open(sl, env);
    } else if (!sl->built) {
        snprintf(sl->error, sizeof sl->error, "%s", sl->missing);
        return;
    } else {
        char here[4096];
        if (pbl__module_beside_self(here, sizeof here, sl->file) && access(here, F_OK) == 0)
            h = try_open(sl, here);
        else
            h = try_open(sl, sl->file);
    }
    if (!h)
        return;
    sl->m = (const pbl__comm_module *)dlsym(h, sl->symbol);
    if (!sl->m)
        snprintf(sl->error, sizeof sl->error, "%s has no symbol %s", env && *env ? env : sl->file, sl->symbol);
    /* never dlclose: MPI cannot be initialised twice in a process */
}

static void load_mpi(void) { load(&mpi_slot); }
static void load_nccl(void) { load(&nccl_slot); }

PBL__API pbl_comm_options pbl_comm_options_default(void)
{
    return (pbl_comm_options){ .mpi_comm = NULL, .timeout_s = 60.0 };
}

static pbl_status sum_f32(void *ctx, float *data, int64_t n, int32_t failed, char *err, size_t errlen)
{
    pbl_comm *c = ctx;
    return c->m->sum_f32(c->ctx, data, n, failed, err, errlen);
}

PBL__API pbl_status pbl_comm_create_mpi(pbl_comm **out, const pbl_comm_options *opt, char *err, size_t errlen)
{
    pbl__errclear(err, errlen);
    if (!out)
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "comm_create_mpi: no output pointer");
    *out = NULL;
    pbl_comm_options o = opt ? *opt : pbl_comm_options_default();
    if (!(o.timeout_s > 0.0))
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "comm_create_mpi: timeout_s is %g; it must be positive",
                         o.timeout_s);
    pthread_once(&mpi_slot.once, load_mpi);
    const pbl__comm_module *module = mpi_slot.m;
    if (!module)
        return pbl__errf(err, errlen, PBL_ERR_UNSUPPORTED, "MPI is not available: %s", mpi_slot.error);
    pbl_comm *c = calloc(1, sizeof *c);
    if (!c)
        return pbl__errf(err, errlen, PBL_ERR_NOMEM, "comm_create_mpi: out of memory");
    c->m = module;
    pbl_status s = module->open(o.mpi_comm, o.timeout_s, &c->ctx, &c->coll.rank, &c->coll.size, &c->overlap_ok, err,
                                errlen);
    if (s != PBL_OK) {
        free(c);
        return s;
    }
    c->coll.ctx = c;
    c->coll.sum_f32 = sum_f32;
    *out = c;
    return PBL_OK;
}

static pbl_status sum_f32_device(void *ctx, float *data, int64_t n, void *stream, char *err, size_t errlen)
{
    pbl_comm *c = ctx;
    return c->m->sum_f32_device(c->ctx, data, n, stream, err, errlen);
}

static pbl_status wait_f32_device(void *ctx, char *err, size_t errlen)
{
    pbl_comm *c = ctx;
    return c->m->wait_f32_device(c->ctx, err, errlen);
}

PBL__API pbl_status pbl_comm_create_nccl(pbl_comm **out, const pbl_comm_options *opt, int32_t device, char *err,
                                         size_t errlen)
{
    pbl__errclear(err, errlen);
    if (!out)
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "comm_create_nccl: no output pointer");
    *out = NULL;
    pbl_comm_options o = opt ? *opt : pbl_comm_options_default();
    if (!(o.timeout_s > 0.0))
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "comm_create_nccl: timeout_s is %g; it must be positive",
                         o.timeout_s);
    if (device < 0)
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "comm_create_nccl: device is %d; it must be 0 or more",
                         (int)device);
    pthread_once(&nccl_slot.once, load_nccl);
    const pbl__comm_module *module = nccl_slot.m;
    if (!module)
        return pbl__errf(err, errlen, PBL_ERR_UNSUPPORTED, "NCCL is not available: %s", nccl_slot.error);
    if (!module->open_device || !module->sum_f32_device || !module->wait_f32_device)
        return pbl__errf(err, errlen, PBL_ERR_UNSUPPORTED,
                         "NCCL is not available: the module has no device sum (or no wait for one)");
    pbl_comm *c = calloc(1, sizeof *c);
    if (!c)
        return pbl__errf(err, errlen, PBL_ERR_NOMEM, "comm_create_nccl: out of memory");
    c->m = module;
    pbl_status s = module->open_device(o.mpi_comm, o.timeout_s, device, &c->ctx, &c->coll.rank, &c->coll.size,
                                       &c->overlap_ok, err, errlen);
    if (s != PBL_OK) {
        free(c);
        return s;
    }
    c->coll.ctx = c;
    c->coll.sum_f32 = sum_f32;
    c->coll.sum_f32_device = sum_f32_device;
    c->coll.wait_f32_device = wait_f32_device;
    *out = c;
    return PBL_OK;
}

PBL__API void pbl_comm_destroy(pbl_comm *c)
{
    if (!c)
        return;
    c->m->close(c->ctx);
    free(c);
}

PBL__API int32_t pbl_comm_rank(const pbl_comm *c) { return c ? c->coll.rank : 0; }
PBL__API int32_t pbl_comm_size(const pbl_comm *c) { return c ? c->coll.size : 1; }
PBL__API const char *pbl_comm_errmsg(const pbl_comm *c) { return c ? c->errmsg : "no communicator"; }

PBL__API pbl_status pbl_comm_allreduce_sum(pbl_comm *c, float *data, int64_t n)
{
    if (!c)
        return PBL_ERR_INVALID_ARG;
    if (n < 0 || (n > 0 && !data))
        return pbl__errf(c->errmsg, sizeof c->errmsg, PBL_ERR_INVALID_ARG, "allreduce_sum: bad arguments");
    pbl__errclear(c->errmsg, sizeof c->errmsg);
    return n ? c->m->sum_f32(c->ctx, data, n, 0, c->errmsg, sizeof c->errmsg) : PBL_OK;
}

PBL__API pbl_status pbl_comm_broadcast(pbl_comm *c, void *data, size_t bytes, int32_t root)
{
    if (!c)
        return PBL_ERR_INVALID_ARG;
    if ((bytes && !data) || root < 0 || root >= c->coll.size)
        return pbl__errf(c->errmsg, sizeof c->errmsg, PBL_ERR_INVALID_ARG, "broadcast: bad arguments (root %d of %d)",
                         (int)root, (int)c->coll.size);
    pbl__errclear(c->errmsg, sizeof c->errmsg);
    return bytes ? c->m->broadcast(c->ctx, data, bytes, root, c->errmsg, sizeof c->errmsg) : PBL_OK;
}

const pbl__collective *pbl__comm_collective(const pbl_comm *c) { return c ? &c->coll : NULL; }
int pbl__comm_device_ok(const pbl_comm *c) { return c && c->coll.sum_f32_device; }
int pbl__comm_overlap_ok(const pbl_comm *c) { return !c || c->overlap_ok; }

pbl_status pbl__comm_check_same(pbl_comm *c, uint64_t hash, char *err, size_t errlen)
{
    if (!c || c->coll.size <= 1)
        return PBL_OK;
    uint64_t lo = 0, hi = 0;
    pbl_status s = c->m->min_max_u64(c->ctx, hash, &lo, &hi, err, errlen);
    if (s != PBL_OK)
        return s;
    if (lo != hi)
        return pbl__errf(err, errlen, PBL_ERR_SHAPE,
                         "the %d ranks do not have the same graph (ops, shapes or names differ: graph hashes "
                         "%016llx .. %016llx; this rank's is %016llx)",
                         (int)c->coll.size, (unsigned long long)lo, (unsigned long long)hi, (unsigned long long)hash);
    return PBL_OK;
}
