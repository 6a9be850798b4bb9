/* options.h - reading an allocator's options through its declarations
 * (cmb_option_decl, cmb_allocator.h).
 *
 *     static const cmb_option_decl opts[] = {
 *         {"slack", CMB_OPT_REAL, "0.005", "0", "1", "fraction", "..."},
 *         {NULL}};
 *     cmb_options o;
 *     if (cmb_options_read(&o, "cmb", opts, cfg) != CMB_OK)
 *         return CMB_ERR_INVALID;           (cfg->error says why)
 *     double slack = cmb_opt_real(&o, "slack");
 *
 * cmb_options_read refuses unknown keys, malformed values, values out of
 * bounds and options that exclude each other, with the messages of
 * cmb_option_check.h; the getters then return the value given (the last
 * one: registry defaults come first) or the declared default. An option
 * whose default is a rule ("(50% of free memory)") reads as 0 when absent:
 * create() asks cmb_opt_given and applies the rule.
 *
 * Before anything runs, the harness checks a whole spec with
 * cmb_allocator_check_options, and --list prints the declarations with
 * cmb_allocator_describe_options (both registry.h).
 */
#ifndef CMB_OPTIONS_H
#define CMB_OPTIONS_H

#include <stdint.h>
#include <stdio.h>

#include "cmb_allocator.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CMB_OPTIONS_MAX 32 /* declarations per allocator */

typedef struct cmb_options {
    const char *allocator;
    const cmb_option_decl *decls;
    const char *value[CMB_OPTIONS_MAX]; /* per declaration: the value given, or NULL */
} cmb_options;

cmb_status cmb_options_read(cmb_options *o, const char *allocator, const cmb_option_decl *decls,
                            const cmb_config *cfg);

int cmb_opt_given(const cmb_options *o, const char *name);
uint64_t cmb_opt_size(const cmb_options *o, const char *name); /* "max": UINT64_MAX */
double cmb_opt_real(const cmb_options *o, const char *name);
int64_t cmb_opt_int(const cmb_options *o, const char *name);
int cmb_opt_bool(const cmb_options *o, const char *name);
const char *cmb_opt_str(const cmb_options *o, const char *name); /* ENUM and STRING; NULL when no default */

/* --- whole specs (the harness, before anything runs; --list) ------------------------ */

/* Checks the user's options "k=v:k=v" (NULL or "" for none) of allocator
 * `name` (a registry name, real:NAME or external:PATH) against its
 * declarations: unknown keys, malformed values, values out of bounds, a
 * key given twice, two options that say the same thing. 0, or -1 with one
 * line in err ("allocator 'bfc': unknown option 'foo' (options: ...)").
 * Allocators that declare nothing (old plug-ins) pass: create() checks. */
int cmb_allocator_check_options(const char *name, const char *optstr, char *err, size_t errlen);

/* Prints the options of `name` for --list, two lines each; -1 for an
 * unknown name. */
int cmb_allocator_describe_options(const char *name, FILE *f);

#ifdef __cplusplus
}
#endif

#endif /* CMB_OPTIONS_H */
