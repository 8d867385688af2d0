/* pbl_status_str / pbl_status_name: the status list of pebble/status.h as strings. */
#include "graph/base/export.h"
#include "pebble/status.h"

PBL__API const char *pbl_status_str(pbl_status s)
{
    switch (s) {
#define PBL__STATUS_TEXT(name, value, text) case name: return text;
        PBL_STATUS_LIST(PBL__STATUS_TEXT)
#undef PBL__STATUS_TEXT
    }
    return "unknown status";
}

PBL__API const char *pbl_status_name(pbl_status s)
{
    switch (s) {
#define PBL__STATUS_NAME(name, value, text) case name: return #name;
        PBL_STATUS_LIST(PBL__STATUS_NAME)
#undef PBL__STATUS_NAME
    }
    return "PBL_UNKNOWN";
}
