/* cmb_status.c - names of status codes. */
#include "cmb_upstream.h"

const char *cmb_status_str(cmb_status s)
{
    switch (s) {
    case CMB_OK: return "ok";
    case CMB_ERR_OOM: return "out of memory";
    case CMB_ERR_INVALID: return "invalid argument";
    case CMB_ERR_UNSUPPORTED: return "not supported";
    case CMB_ERR_CUDA: return "CUDA error";
    case CMB_ERR_HOST_NOMEM: return "host out of memory";
    case CMB_ERR_NOT_FOUND: return "not found";
    case CMB_ERR_IO: return "I/O error";
    case CMB_ERR_PARSE: return "malformed input";
    case CMB_ERR_STATE: return "invalid state";
    }
    return "unknown status";
}
