/*
 * The CUDA backend as the executor sees it: a table that loads the real one from a module
 * (libpebble_cuda.so, built from executor/cuda/backend.c and the kernels in ops/cuda/) the first time a
 * CUDA executor is asked for, and forwards every call to it.
 *
 * Why a module: cuBLAS and cuBLASLt are large, and the dynamic loader touches their pages
 * while relocating them, so linking them into libpebble cost every process ~200 MiB of
 * resident memory (`pebble --help` peaked at 225 MiB, a CPU-only `pebble run` of an MLP at 170
 * MiB instead of 20) even when no GPU is ever used. Loaded on demand, a CPU user pays nothing.
 *
 * Where the module is looked for: $PEBBLE_CUDA_MODULE (a path); next to the file holding
 * this code (libpebble.so, or the executable a static libpebble is linked into); for such an
 * executable in an install tree's bindir, in the libdir beside it (the relative path
 * PEBBLE_CUDA_MODULE_BIN_TO_LIB, "../lib"); then the dynamic loader's own search path (the
 * caller's RUNPATH, which the build tree's programs point at the module, LD_LIBRARY_PATH,
 * ld.so.cache). The first file that exists is the module: one that cannot be opened says why
 * rather than being passed over. No directory of the machine that built the library is
 * compiled in, so an installed tree may be moved. A build without CUDA searches nothing (only
 * $PEBBLE_CUDA_MODULE is tried: the host emulator of test/cuda_emu needs no toolkit), and any
 * failure to load says why, as PBL_ERR_UNSUPPORTED.
 */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "executor/backend.h"
#include "executor/module.h"

#define MODULE_NAME   "libpebble_cuda.so"
#define MODULE_SYMBOL "pbl_cuda_backend_module"

static pthread_once_t      load_once = PTHREAD_ONCE_INIT;
static const pbl__backend *module;          /* the loaded table, or NULL */
static char                load_error[512]; /* why it is NULL */

static void *try_open(const char *path)
{
    return pbl__module_open(path, RTLD_NOW | RTLD_LOCAL, load_error, sizeof load_error);
}

static void load(void)
{
    const char *env = getenv("PEBBLE_CUDA_MODULE");
    void *h = NULL;
    if (env && *env) {
        h = try_open(env); /* also without a toolkit: test/cuda_emu's host emulator module */
    } else {
#ifndef PEBBLE_CUDA_MODULE_BIN_TO_LIB
        snprintf(load_error, sizeof load_error, "pebble was built without CUDA (PEBBLE_CUDA=OFF or no toolkit found)");
        return;
#else
        /* the first file that exists is the one: if it cannot be opened (say, no libcudart),
         * its dlerror is the message, not a later "no such file" */
        char here[4096];
        if (pbl__module_beside_self(here, sizeof here, MODULE_NAME) && access(here, F_OK) == 0)
            h = try_open(here);
        else if (pbl__module_beside_self(here, sizeof here, PEBBLE_CUDA_MODULE_BIN_TO_LIB "/" MODULE_NAME) &&
                 access(here, F_OK) == 0)
            h = try_open(here);
        else
            h = try_open(MODULE_NAME);
#endif
    }
    if (!h)
        return;
    module = (const pbl__backend *)dlsym(h, MODULE_SYMBOL);
    if (!module)
        snprintf(load_error, sizeof load_error, "%s has no symbol %s", env && *env ? env : MODULE_NAME, MODULE_SYMBOL);
    /* never dlclose: executors may hold function pointers into it until exit */
}

static const pbl__backend *get(void)
{
    pthread_once(&load_once, load);
    return module;
}

static pbl_status unavailable(char *err, size_t errlen)
{
    snprintf(err, errlen, "the CUDA backend is not available: %s", load_error);
    return PBL_ERR_UNSUPPORTED;
}

static pbl_status fwd_probe(char *err, size_t errlen)
{
    const pbl__backend *m = get();
    if (!m)
        return unavailable(err, errlen);
    return m->probe ? m->probe(err, errlen) : PBL_OK;
}

static pbl_status fwd_open(pbl__mem *host, const pbl__backend_config *cfg, void **ctx, char *err, size_t errlen)
{
    const pbl__backend *m = get();
    *ctx = NULL;
    return m ? m->open(host, cfg, ctx, err, errlen) : unavailable(err, errlen);
}

/* Everything below is reached only through an instance that fwd_open created, so the module
 * is loaded; has_kernel is the exception (ctx may be NULL) and answers 0 without one. */
static void fwd_close(void *ctx)
{
    if (ctx)
        module->close(ctx);
}

static void *fwd_alloc(void *ctx, size_t bytes) { return module->alloc(ctx, bytes); }
static void fwd_free(void *ctx, void *p, size_t bytes) { module->free(ctx, p, bytes); }
static pbl_status fwd_upload(void *ctx, void *dst, const void *src, size_t n) { return module->upload(ctx, dst, src, n); }
static pbl_status fwd_download(void *ctx, void *dst, const void *src, size_t n) { return module->download(ctx, dst, src, n); }
static pbl_status fwd_fill(void *ctx, int32_t stream, void *dst, int byte, size_t n) { return module->fill(ctx, stream, dst, byte, n); }
static pbl_status fwd_run(void *ctx, int32_t stream, const pbl__op *op, const pbl__kargs *a) { return module->run(ctx, stream, op, a); }
static pbl_status fwd_record(void *ctx, int32_t stream, int32_t event) { return module->record(ctx, stream, event); }
static pbl_status fwd_wait(void *ctx, int32_t stream, int32_t event) { return module->wait(ctx, stream, event); }
static pbl_status fwd_sync(void *ctx, const pbl__kargs **failed) { return module->sync(ctx, failed); }

static int fwd_has_kernel(void *ctx, const pbl__op *op)
{
    const pbl__backend *m = get();
    return m ? m->has_kernel(ctx, op) : 0;
}

static void fwd_run_begin(void *ctx)
{
    if (module->run_begin)
        module->run_begin(ctx);
}

static void fwd_run_end(void *ctx)
{
    if (module->run_end)
        module->run_end(ctx);
}

static pbl_status fwd_graph_begin(void *ctx)
{
    return module->graph_begin ? module->graph_begin(ctx) : PBL_ERR_UNSUPPORTED;
}

static pbl_status fwd_graph_end(void *ctx)
{
    return module->graph_end ? module->graph_end(ctx) : PBL_ERR_UNSUPPORTED;
}

static pbl_status fwd_graph_launch(void *ctx, uint64_t run)
{
    return module->graph_launch ? module->graph_launch(ctx, run) : PBL_ERR_UNSUPPORTED;
}

static const char *fwd_errmsg(void *ctx) { return module->errmsg ? module->errmsg(ctx) : NULL; }
static const char *fwd_device(void *ctx) { return module->device ? module->device(ctx) : NULL; }

const pbl__backend pbl__backend_cuda = {
    .name = "cuda",
    .device_memory = 1,
    .probe = fwd_probe,
    .open = fwd_open,
    .close = fwd_close,
    .alloc = fwd_alloc,
    .free = fwd_free,
    .upload = fwd_upload,
    .download = fwd_download,
    .fill = fwd_fill,
    .has_kernel = fwd_has_kernel,
    .run = fwd_run,
    .record = fwd_record,
    .wait = fwd_wait,
    .sync = fwd_sync,
    .run_begin = fwd_run_begin,
    .run_end = fwd_run_end,
    .graph_begin = fwd_graph_begin,
    .graph_end = fwd_graph_end,
    .graph_launch = fwd_graph_launch,
    .errmsg = fwd_errmsg,
    .device = fwd_device,
};
