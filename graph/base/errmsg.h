/* The one way library functions fill an error-message buffer (char *err, size_t errlen, or a
 * handle's own errmsg array): format the message into it (err may be NULL or errlen 0: no
 * message wanted) and return the status, so a failure reads
 * `return pbl__errf(err, errlen, PBL_ERR_FORMAT, "line %d: ...", n);`.
 *
 * pbl__verrf is the same with a va_list, for the handles' own variadic fail functions
 * (pbl__graph_fail, pbl__exec_fail, ...), which pass their buffer; pbl__verrf_append adds to
 * a message already begun (a reader's "file:line: " prefix); pbl__errclear empties the buffer
 * at the start of a call, so a success leaves no stale message. */
#ifndef PBL_ERRMSG_H
#define PBL_ERRMSG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "pebble/status.h"

static inline pbl_status pbl__verrf(char *err, size_t errlen, pbl_status s, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
static inline pbl_status pbl__verrf(char *err, size_t errlen, pbl_status s, const char *fmt, va_list ap)
{
    if (err && errlen)
        vsnprintf(err, errlen, fmt, ap);
    return s;
}

static inline pbl_status pbl__errf(char *err, size_t errlen, pbl_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline pbl_status pbl__errf(char *err, size_t errlen, pbl_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pbl__verrf(err, errlen, s, fmt, ap);
    va_end(ap);
    return s;
}

/* Formats after the text err already holds; a full buffer stays as it is (the result is the
 * prefix and the message cut together at errlen - 1 bytes, as one snprintf would). */
static inline pbl_status pbl__verrf_append(char *err, size_t errlen, pbl_status s, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
static inline pbl_status pbl__verrf_append(char *err, size_t errlen, pbl_status s, const char *fmt, va_list ap)
{
    size_t n = err && errlen ? strlen(err) : 0;
    if (err && n + 1 < errlen)
        pbl__verrf(err + n, errlen - n, s, fmt, ap);
    return s;
}

static inline void pbl__errclear(char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
}

#endif
