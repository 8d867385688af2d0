/*
 * The objects in use while a shared-object strategy walks the records by first step: a
 * binary min-heap keyed by (the holder's last step, id), so the objects come back in the
 * order of their release, the lower id first on a tie. The caller owns the array (room for
 * every object) and the count.
 */
#ifndef PBL_PLAN_BUSY_HEAP_H
#define PBL_PLAN_BUSY_HEAP_H

#include <stdint.h>

typedef struct pbl__busy {
    int64_t last; /* the holder's last step */
    int32_t id;   /* the object (or whatever the caller releases) */
} pbl__busy;

static inline int pbl__busy_before(pbl__busy a, pbl__busy b)
{
    return a.last < b.last || (a.last == b.last && a.id < b.id);
}

static inline void pbl__busy_push(pbl__busy *h, int32_t *n, pbl__busy x)
{
    int32_t i = (*n)++;
    while (i > 0 && pbl__busy_before(x, h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = x;
}

/* Removes h[0], the first to be released. */
static inline void pbl__busy_pop(pbl__busy *h, int32_t *n)
{
    pbl__busy x = h[--(*n)];
    int32_t i = 0;
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && pbl__busy_before(h[c + 1], h[c]))
            c++;
        if (!pbl__busy_before(h[c], x))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
}

#endif
