/*
 * pebble/status.h — status codes shared by every pebble call.
 *
 * Every fallible call returns a pbl_status: 0 (PBL_OK) is success, negative is an error.
 * The handle the call was made on keeps a message naming what failed and where
 * (pbl_graph_errmsg(), pbl_exec_errmsg()).
 *
 *     // given pbl_graph *g;
 *     pbl_status s = pbl_graph_validate(g);
 *     if (s != PBL_OK)
 *         fprintf(stderr, "%s: %s\n", pbl_status_str(s), pbl_graph_errmsg(g));
 *
 * New codes go at the end of the list; existing values never change.
 */
#ifndef PEBBLE_STATUS_H
#define PEBBLE_STATUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, description) */
#define PBL_STATUS_LIST(X)                                                      \
    X(PBL_OK,                   0, "ok")                                        \
    X(PBL_ERR_INVALID_ARG,     -1, "invalid argument")                          \
    X(PBL_ERR_NOMEM,           -2, "out of memory")                             \
    X(PBL_ERR_UNKNOWN_OP,      -3, "unknown op")                                \
    X(PBL_ERR_ARITY,           -4, "wrong number of inputs")                    \
    X(PBL_ERR_ATTR,            -5, "bad attribute")                             \
    X(PBL_ERR_SHAPE,           -6, "shape mismatch")                            \
    X(PBL_ERR_DTYPE,           -7, "dtype mismatch")                            \
    X(PBL_ERR_CYCLE,           -8, "graph has a cycle")                         \
    X(PBL_ERR_DANGLING,        -9, "dangling value")                            \
    X(PBL_ERR_NOT_DIFFERENTIABLE, -10, "not differentiable")                    \
    X(PBL_ERR_UNSUPPORTED,    -11, "not supported")                             \
    X(PBL_ERR_UNBOUND,        -12, "variable has no data")                      \
    X(PBL_ERR_IO,             -13, "I/O error")                                 \
    X(PBL_ERR_FORMAT,         -14, "malformed input")                           \
    X(PBL_ERR_CHECKSUM,       -15, "checksum mismatch")                         \
    X(PBL_ERR_NOT_FOUND,      -16, "not found")                                 \
    X(PBL_ERR_DEVICE,         -17, "device error")                              \
    X(PBL_ERR_INFEASIBLE,     -18, "no packing fits the capacity")              \
    X(PBL_ERR_TIMEOUT,        -19, "time limit reached")                        \
    X(PBL_ERR_BUDGET,         -20, "memory budget too small")                   \
    X(PBL_ERR_RACE,           -21, "plan has a race")

typedef enum pbl_status {
#define PBL__STATUS_ENUM(name, value, text) name = value,
    PBL_STATUS_LIST(PBL__STATUS_ENUM)
#undef PBL__STATUS_ENUM
} pbl_status;

/* A static string describing `s` ("shape mismatch"); "unknown status" for other values.
 * Thread-safe. */
const char *pbl_status_str(pbl_status s);

/* The enum name of `s` ("PBL_ERR_SHAPE"). Thread-safe. */
const char *pbl_status_name(pbl_status s);

/* Interrupted writes. Every file pebble writes (pbl_exec_save, pbl_graph_save_json,
 * pbl_records_write, ...) goes to a temporary file beside it that is renamed over it when
 * complete. The library installs no signal handler; a program that wants no temporary left
 * behind when it is interrupted calls this from its own SIGINT/SIGTERM handler: it unlinks the
 * temporaries of the writes in progress in this process (the target files are untouched) and
 * returns how many it removed. Async-signal-safe and thread-safe (a temporary being created
 * on another thread is waited for and removed too). It is meant for a handler that then ends
 * the process: a write it interrupts fails, and so does every write started after it. Temporaries left by a process killed with SIGKILL are removed by the next write to
 * the same file. */
int pbl_cleanup_temporaries(void);

/* Writes n bytes of data to path through the same whole-or-nothing writer: a temporary file
 * beside it, synced and renamed over it (links followed, the mode kept, FIFOs and devices
 * written in place, /dev/stdout through its descriptor); on failure the old file is untouched.
 * For a program's own outputs (train_mlp's --plot). PBL_OK, PBL_ERR_IO or PBL_ERR_NOMEM with
 * "PATH: reason" in err. Thread-safe. */
pbl_status pbl_file_write(const char *path, const void *data, size_t n, char *err, size_t errlen);

/* Whether pbl_file_write(path, ...) could succeed, without writing anything: for a long job
 * to fail before its work rather than after. PBL_OK, or the status and message the write
 * would give. Thread-safe. */
pbl_status pbl_file_check(const char *path, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
