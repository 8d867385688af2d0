/*
 * One lock around every igraph section in pebble. Debian's igraph is built without
 * thread-local state (IGRAPH_THREAD_SAFE 0): its error-cleanup ("finally") stack is a process
 * global that every call pushes to, so two igraph calls running at once corrupt each other,
 * even from different pebble files (the coloring strategy, the stream colouring). Every file
 * that calls igraph brackets the calls with these. The lock holds no data.
 */
#ifndef PBL_IGRAPH_LOCK_H
#define PBL_IGRAPH_LOCK_H

void pbl__igraph_lock(void);
void pbl__igraph_unlock(void);

#endif
