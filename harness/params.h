/* params.h - scenario parameter values: validation against a scenario's
 * spec, canonical spelling, and expansion of presets and --param overrides
 * into the list of parameter sets (one case each). */
#ifndef CMB_PARAMS_H
#define CMB_PARAMS_H

#include <stddef.h>

#include "../scenarios/scenario.h"

#define CMB_MAX_PARAMS 40
#define CMB_PARAM_VALUE_MAX 160
#define CMB_MAX_PARAM_SETS 4096 /* cases one scenario may expand to (each is a process) */

typedef struct cmb_param_set {
    size_t n;
    const cmb_param_spec *spec[CMB_MAX_PARAMS];
    char value[CMB_MAX_PARAMS][CMB_PARAM_VALUE_MAX]; /* canonical spelling */
} cmb_param_set;

/* A --param given on the command line: name and a comma list of values. */
typedef struct cmb_param_override {
    const char *name;
    const char *values;
} cmb_param_override;

typedef enum cmb_preset { CMB_PRESET_QUICK = 0, CMB_PRESET_FULL = 1 } cmb_preset;

/* Checks one value against its spec and writes its canonical spelling
 * (sizes in the largest exact binary unit, e.g. 64MiB). 0 or -1 + err. */
/* "range [1B, 1TiB]" for an INT, SIZE or REAL parameter, as --list shows
 * it and as an out-of-range value is refused; "" for the others. */
void cmb_param_range(const cmb_param_spec *spec, char *out, size_t outlen);

int cmb_param_canonical(const cmb_param_spec *spec, const char *value, char *out, size_t outlen,
                        char *err, size_t errlen);

const cmb_param_spec *cmb_param_spec_find(const cmb_scenario *s, const char *name);

/* All parameter sets of a scenario for a preset and overrides. Overrides
 * that name no parameter of this scenario are ignored here (the CLI checks
 * that each names a parameter of some selected scenario). *out is
 * malloc'd. Returns 0, or -1 with a one-line reason in err. */
int cmb_params_expand(const cmb_scenario *s, cmb_preset preset, const cmb_param_override *ov,
                      size_t n_ov, cmb_param_set **out, size_t *n_out, char *err, size_t errlen);

/* Value of a parameter in a set, or NULL. */
const char *cmb_param_set_get(const cmb_param_set *ps, const char *name);

/* "n=1000;max_size=64MiB" (for the CSV) and "n:1000/max_size:64MiB" (names). */
void cmb_param_set_format(const cmb_param_set *ps, char sep_kv, char sep_item, char *out, size_t outlen);

#endif /* CMB_PARAMS_H */
