/* The process-wide igraph lock (see graph/base/igraph_lock.h): the only static state pebble has. */
#include "graph/base/igraph_lock.h"

#include <pthread.h>

#include <igraph.h>

#if !IGRAPH_THREAD_SAFE
static pthread_mutex_t igraph_lock = PTHREAD_MUTEX_INITIALIZER;
#endif

void pbl__igraph_lock(void)
{
#if !IGRAPH_THREAD_SAFE
    pthread_mutex_lock(&igraph_lock);
#endif
}

void pbl__igraph_unlock(void)
{
#if !IGRAPH_THREAD_SAFE
    pthread_mutex_unlock(&igraph_lock);
#endif
}
