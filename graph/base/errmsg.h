/* The one way library functions that take (char *err, size_t errlen) fill them: format the
 * message into err (err may be NULL or errlen 0: no message wanted) and return the status,
 * so a failure reads `return pbl__errf(err, errlen, PBL_ERR_FORMAT, "line %d: ...", n);`. */
#ifndef PBL_ERRMSG_H
#define PBL_ERRMSG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include "pebble/status.h"

static inline pbl_status pbl__errf(char *err, size_t errlen, pbl_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline pbl_status pbl__errf(char *err, size_t errlen, pbl_status s, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return s;
}

#endif
