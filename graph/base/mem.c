/* Accounted host allocation through the user's hook or malloc. */
#include "graph/base/mem.h"

#include <stdlib.h>
#include <string.h>

#include "pebble/status.h"

void pbl__mem_init(pbl__mem *m, const pbl_allocator *hook)
{
    memset(m, 0, sizeof *m);
    if (hook && hook->alloc && hook->free)
        m->hook = *hook;
}

void *pbl__mem_alloc(pbl__mem *m, size_t bytes)
{
    if (bytes == 0)
        return NULL;
    void *p = m->hook.alloc ? m->hook.alloc(m->hook.user, bytes) : malloc(bytes);
    if (!p)
        return NULL;
    m->live += bytes;
    if (m->live > m->peak)
        m->peak = m->live;
    return p;
}

void *pbl__mem_calloc(pbl__mem *m, size_t bytes)
{
    void *p = pbl__mem_alloc(m, bytes);
    if (p)
        memset(p, 0, bytes);
    return p;
}

void pbl__mem_free(pbl__mem *m, void *p, size_t bytes)
{
    if (!p)
        return;
    m->live -= bytes;
    if (m->hook.alloc)
        m->hook.free(m->hook.user, p, bytes);
    else
        free(p);
}

void *pbl__mem_resize(pbl__mem *m, void *p, size_t old_bytes, size_t new_bytes)
{
    void *q = pbl__mem_alloc(m, new_bytes);
    if (!q)
        return NULL;
    if (p)
        memcpy(q, p, old_bytes < new_bytes ? old_bytes : new_bytes);
    pbl__mem_free(m, p, old_bytes);
    return q;
}

char *pbl__mem_strdup(pbl__mem *m, const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = pbl__mem_alloc(m, n);
    if (d)
        memcpy(d, s, n);
    return d;
}

void pbl__mem_strfree(pbl__mem *m, char *s)
{
    if (s)
        pbl__mem_free(m, s, strlen(s) + 1);
}

int pbl__mem_reserve(pbl__mem *m, void **pp, int32_t *cap, int32_t need, size_t elem)
{
    if (need <= *cap)
        return PBL_OK;
    int32_t ncap = *cap ? *cap : 16;
    while (ncap < need) {
        if (ncap > (1 << 29))
            return PBL_ERR_NOMEM;
        ncap *= 2;
    }
    void *q = pbl__mem_resize(m, *pp, (size_t)*cap * elem, (size_t)ncap * elem);
    if (!q)
        return PBL_ERR_NOMEM;
    *pp = q;
    *cap = ncap;
    return PBL_OK;
}
