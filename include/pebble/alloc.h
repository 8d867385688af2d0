/*
 * pebble/alloc.h — the optional host allocator hook.
 *
 * Every host allocation a handle makes goes through its allocator, with byte accounting.
 * Pass NULL (the default in every options struct) for malloc/free. A hook lets an embedder
 * route memory to its own pool, cap it, or — in tests — fail the Nth allocation and check
 * that the call returns PBL_ERR_NOMEM and leaks nothing.
 *
 *     static void *my_alloc(void *user, size_t n) { return n < LIMIT ? malloc(n) : NULL; }
 *     static void  my_free(void *user, void *p, size_t n) { free(p); }
 *     pbl_allocator a = { my_alloc, my_free, NULL };
 *     pbl_graph_options o = pbl_graph_options_default();
 *     o.allocator = &a;
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
