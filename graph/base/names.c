/* Open-addressing string map with linear probing and backward-shift deletion. */
#include "graph/base/names.h"

#include <string.h>

#include "pebble/status.h"

static uint32_t hash_str(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

void pbl__names_free(pbl__names *t, pbl__mem *m)
{
    pbl__mem_free(m, t->keys, (size_t)t->cap * sizeof *t->keys);
    pbl__mem_free(m, t->ids, (size_t)t->cap * sizeof *t->ids);
    memset(t, 0, sizeof *t);
}

static int32_t find_slot(const pbl__names *t, const char *key)
{
    uint32_t mask = (uint32_t)t->cap - 1;
    for (uint32_t i = hash_str(key) & mask;; i = (i + 1) & mask)
        if (!t->keys[i] || strcmp(t->keys[i], key) == 0)
            return (int32_t)i;
}

int32_t pbl__names_get(const pbl__names *t, const char *key)
{
    if (t->cap == 0)
        return -1;
    int32_t i = find_slot(t, key);
    return t->keys[i] ? t->ids[i] : -1;
}

static int grow(pbl__names *t, pbl__mem *m)
{
    pbl__names n = { 0 };
    n.cap = t->cap ? t->cap * 2 : 64;
    n.keys = pbl__mem_calloc(m, (size_t)n.cap * sizeof *n.keys);
    n.ids = pbl__mem_alloc(m, (size_t)n.cap * sizeof *n.ids);
    if (!n.keys || !n.ids) {
        pbl__names_free(&n, m);
        return PBL_ERR_NOMEM;
    }
    for (int32_t i = 0; i < t->cap; i++) {
        if (!t->keys[i])
            continue;
        int32_t j = find_slot(&n, t->keys[i]);
        n.keys[j] = t->keys[i];
        n.ids[j] = t->ids[i];
    }
    n.count = t->count;
    pbl__names_free(t, m);
    *t = n;
    return PBL_OK;
}

int pbl__names_put(pbl__names *t, pbl__mem *m, const char *key, int32_t id)
{
    if ((t->count + 1) * 2 > t->cap && grow(t, m) != PBL_OK)
        return PBL_ERR_NOMEM;
    int32_t i = find_slot(t, key);
    if (!t->keys[i])
        t->count++;
    t->keys[i] = key;
    t->ids[i] = id;
    return PBL_OK;
}

void pbl__names_del(pbl__names *t, const char *key)
{
    if (t->cap == 0)
        return;
    uint32_t mask = (uint32_t)t->cap - 1;
    uint32_t i = (uint32_t)find_slot(t, key);
    if (!t->keys[i])
        return;
    t->keys[i] = NULL;
    t->count--;
    /* Shift later members of the probe run back so lookups still find them. */
    for (uint32_t j = (i + 1) & mask; t->keys[j]; j = (j + 1) & mask) {
        uint32_t home = hash_str(t->keys[j]) & mask;
        int between = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
        if (between)
            continue;
        t->keys[i] = t->keys[j];
        t->ids[i] = t->ids[j];
        t->keys[j] = NULL;
        i = j;
    }
}
