/*
 * The CUDA backend of a build without CUDA (PEBBLE_CUDA=OFF, or AUTO with no toolkit): the
 * same symbol as executor/cuda/backend.c, so the executor core has no #ifdef; it has no
 * kernels and cannot be opened.
 */
#include <stdio.h>

#include "executor/backend.h"

static pbl_status none_probe(char *err, size_t errlen)
{
    snprintf(err, errlen, "the CUDA backend is not available: pebble was built without CUDA (PEBBLE_CUDA=OFF or no toolkit found)");
    return PBL_ERR_UNSUPPORTED;
}

static pbl_status none_open(pbl__mem *host, const pbl__backend_config *cfg, void **ctx, char *err, size_t errlen)
{
    *ctx = NULL;
    return none_probe(err, errlen);
}

static void none_close(void *ctx) {}
static void *none_alloc(void *ctx, size_t bytes) { return NULL; }
static void none_free(void *ctx, void *p, size_t bytes) {}
static pbl_status none_copy(void *ctx, void *dst, const void *src, size_t n) { return PBL_ERR_UNSUPPORTED; }
static pbl_status none_fill(void *ctx, int32_t stream, void *dst, int byte, size_t n) { return PBL_ERR_UNSUPPORTED; }
static int none_has_kernel(void *ctx, const pbl__op *op) { return 0; }
static pbl_status none_run(void *ctx, int32_t stream, const pbl__op *op, const pbl__kargs *a) { return PBL_ERR_UNSUPPORTED; }
static pbl_status none_event(void *ctx, int32_t stream, int32_t event) { return PBL_ERR_UNSUPPORTED; }

static pbl_status none_sync(void *ctx, const pbl__kargs **failed)
{
    if (failed)
        *failed = NULL;
    return PBL_ERR_UNSUPPORTED;
}

const pbl__backend pbl__backend_cuda = {
    .name = "cuda",
    .device_memory = 1,
    .probe = none_probe,
    .open = none_open,
    .close = none_close,
    .alloc = none_alloc,
    .free = none_free,
    .upload = none_copy,
    .download = none_copy,
    .fill = none_fill,
    .has_kernel = none_has_kernel,
    .run = none_run,
    .record = none_event,
    .wait = none_event,
    .sync = none_sync,
};
