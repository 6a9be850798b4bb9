/* options.h - parsing of allocator options (key=value pairs). Each allocator
 * reads its own keys; unknown keys are an error so a typo never silently
 * benchmarks the defaults. */
#ifndef CMB_OPTIONS_H
#define CMB_OPTIONS_H

#include <stdint.h>

#include "cmb_allocator.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cmb_option_reader {
    const cmb_config *cfg;
    char *err;     /* where a one-line error goes */
    size_t errlen;
    int failed;
    uint64_t used; /* bit i set when option i was read */
} cmb_option_reader;

void cmb_options_begin(cmb_option_reader *r, const cmb_config *cfg, char *err, size_t errlen);
/* Each returns the default when the key is absent; on a malformed value it
 * records an error and returns the default. */
uint64_t cmb_options_size(cmb_option_reader *r, const char *key, uint64_t dflt);
uint64_t cmb_options_u64(cmb_option_reader *r, const char *key, uint64_t dflt);
double cmb_options_double(cmb_option_reader *r, const char *key, double dflt);
int cmb_options_bool(cmb_option_reader *r, const char *key, int dflt);
const char *cmb_options_str(cmb_option_reader *r, const char *key, const char *dflt);
/* 0 when every option was known and well-formed; else CMB_ERR_INVALID. */
cmb_status cmb_options_end(cmb_option_reader *r, const char *allocator);

#ifdef __cplusplus
}
#endif

#endif /* CMB_OPTIONS_H */
