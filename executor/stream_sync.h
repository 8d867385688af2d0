/*
 * Stream synchronisation: from "step t must see the effects of step a" (dependencies, the
 * stream plan's waits, the poison option's fills) to the fewest event waits that give it.
 *
 * Steps run in schedule order on their streams; a step sees every earlier step of its own
 * stream. For a need on another stream, step t waits for the event recorded after step a,
 * unless t's stream already knows a step at or after a of that stream: each stream carries a
 * vector clock (the latest step of every stream it has seen, directly or through the steps it
 * waited for), so waits implied by earlier ones are dropped.
 */
#ifndef PBL_STREAM_SYNC_H
#define PBL_STREAM_SYNC_H

#include "graph/base/mem.h"
#include "pebble/status.h"

typedef struct pbl__stream_sync {
    int32_t *wait_start; /* n_steps + 1: step t waits for events wait_ev[wait_start[t] .. [t+1]) */
    int32_t *wait_ev;
    int32_t *event;      /* per step: the event recorded after it, or -1 (no stream waits for it) */
    int32_t  n_steps, n_waits, n_events;
} pbl__stream_sync;

/* need_start (n_steps + 1) / need: for each step, earlier steps (any stream, duplicates
 * allowed) whose effects it must see. stream[t] in [0, n_streams). PBL_ERR_INVALID_ARG when a
 * need names a step that is not earlier (err explains), PBL_ERR_NOMEM. */
pbl_status pbl__stream_sync_build(int32_t n_steps, int32_t n_streams, const int32_t *stream,
                                  const int32_t *need_start, const int32_t *need, pbl__mem *m,
                                  pbl__stream_sync *out, char *err, size_t errlen);
void       pbl__stream_sync_free(pbl__stream_sync *s, pbl__mem *m); /* accepts a zeroed struct */

#endif
