/* A string -> id map (open addressing, FNV-1a), so name lookups stay O(1) on 100k-node graphs.
 * Keys are borrowed: the map stores pointers to strings the graph owns. */
#ifndef PBL_NAMES_H
#define PBL_NAMES_H

#include <stdint.h>

#include "graph/base/mem.h"

typedef struct pbl__names {
    const char **keys;  /* NULL: empty slot */
    int32_t     *ids;
    int32_t      cap;   /* power of two */
    int32_t      count;
} pbl__names;

void    pbl__names_free(pbl__names *t, pbl__mem *m);
int32_t pbl__names_get(const pbl__names *t, const char *key);       /* -1 if absent */
/* Inserts or re-points key; PBL_OK or PBL_ERR_NOMEM. */
int     pbl__names_put(pbl__names *t, pbl__mem *m, const char *key, int32_t id);
/* Removes key if present (used to undo a failed build step). */
void    pbl__names_del(pbl__names *t, const char *key);

#endif
