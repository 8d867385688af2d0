/* Host memory with byte accounting and the optional user allocator hook (pebble/alloc.h).
 * Every handle owns one pbl__mem; nothing here is global. */
#ifndef PBL_MEM_H
#define PBL_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "graph/base/export.h"
#include "pebble/alloc.h"

typedef struct pbl__mem {
    pbl_allocator hook;  /* .alloc NULL: malloc/free */
    size_t live;         /* bytes held now */
    size_t peak;         /* most bytes ever held at once */
} pbl__mem;

void  pbl__mem_init(pbl__mem *m, const pbl_allocator *hook);
void *pbl__mem_alloc(pbl__mem *m, size_t bytes);            /* NULL on failure or 0 bytes */
void *pbl__mem_calloc(pbl__mem *m, size_t bytes);
void  pbl__mem_free(pbl__mem *m, void *p, size_t bytes);     /* p may be NULL */
/* Grows (or shrinks) a block from old_bytes to new_bytes; NULL on failure, p still valid. */
void *pbl__mem_resize(pbl__mem *m, void *p, size_t old_bytes, size_t new_bytes);
char *pbl__mem_strdup(pbl__mem *m, const char *s);
void  pbl__mem_strfree(pbl__mem *m, char *s);

/* Grows an array *pp of *cap elements of `elem` bytes to hold at least `need`; PBL_OK or
 * PBL_ERR_NOMEM. Doubling, so appends are amortised O(1). */
int   pbl__mem_reserve(pbl__mem *m, void **pp, int32_t *cap, int32_t need, size_t elem);

#endif
