/*
 * pebble/alloc.h — the optional host allocator hook.
 *
 * Every host allocation a handle makes goes through its allocator, with byte accounting.
 * Pass NULL (the default in every options struct) for malloc/free. A hook lets an embedder
 * route memory to its own pool, cap it, or — in tests — fail the Nth allocation and check
 * that the call returns PBL_ERR_NOMEM and leaks nothing.
 *
 *     #include <pebble/pebble.h>
 *     #include <stdlib.h>
 *
 *     typedef struct pool { size_t used, cap; } pool;
 *
 *     static void *pool_alloc(void *user, size_t n)
 *     {
 *         pool *p = user;
 *         if (n > p->cap - p->used)
 *             return NULL;                        // the call fails with PBL_ERR_NOMEM
 *         p->used += n;
 *         return malloc(n);
 *     }
 *     static void pool_free(void *user, void *ptr, size_t n)
 *     {
 *         ((pool *)user)->used -= n;              // n: the size alloc was asked for
 *         free(ptr);
 *     }
 *
 *     int main(void)
 *     {
 *         pool p = { 0, 1 << 20 };                // at most 1 MiB
 *         pbl_allocator a = { pool_alloc, pool_free, &p };
 *         pbl_graph_options o = pbl_graph_options_default();
 *         o.allocator = &a;
 *         pbl_graph *g;
 *         if (pbl_graph_create(&g, &o) != PBL_OK)
 *             return 1;
 *         pbl_input(g, "x", PBL_SHAPE(4, 1));
 *         pbl_graph_destroy(g);
 *         // p.used == 0
 *         return 0;
 *     }
 *
 * The allocator struct must outlive every handle created with it. `alloc` returns memory
 * aligned at least as malloc's, or NULL; `free` gets the same size that was asked for.
 */
#ifndef PEBBLE_ALLOC_H
#define PEBBLE_ALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pbl_allocator {
    void *(*alloc)(void *user, size_t bytes);            /* NULL on failure */
    void  (*free)(void *user, void *ptr, size_t bytes);  /* ptr may be NULL */
    void *user;
} pbl_allocator;

#ifdef __cplusplus
}
#endif
#endif
