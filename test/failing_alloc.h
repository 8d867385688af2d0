/*
 * failing_alloc.h: an allocator hook (pebble/alloc.h) that fails the fail_at-th allocation
 * and counts the bytes still live, for tests that fail every allocation in turn and check for
 * a clean PBL_ERR_NOMEM and no leak.
 */
#ifndef PBL_TEST_FAILING_ALLOC_H
#define PBL_TEST_FAILING_ALLOC_H

#include <stddef.h>
#include <stdlib.h>

typedef struct failing {
    long   count, fail_at; /* fail the fail_at-th allocation (1-based); 0: never */
    size_t live;
} failing;

static void *failing_alloc(void *user, size_t n)
{
    failing *f = user;
    if (++f->count == f->fail_at)
        return NULL;
    void *p = malloc(n);
    if (p)
        f->live += n;
    return p;
}

static void failing_free(void *user, void *p, size_t n)
{
    failing *f = user;
    if (p)
        f->live -= n;
    free(p);
}

#endif
