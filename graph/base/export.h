/* PBL__API marks the functions the shared library exports (the library is built with
 * -fvisibility=hidden, so everything else stays internal). */
#ifndef PBL_EXPORT_H
#define PBL_EXPORT_H

#define PBL__API __attribute__((visibility("default")))

#endif
