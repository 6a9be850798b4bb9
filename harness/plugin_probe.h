/* plugin_probe.h - plug-ins loaded and checked in a short-lived process, so
 * cumembench's parent never runs a line of plug-in code.
 *
 * The parent installs a plug-in loader (allocators/external.h). Each
 * plug-in it is asked for (external:PATH, or a real: plug-in) is probed
 * once, by the binary itself started through spawn.c:
 *
 *     cumembench --probe-plugin PATH [--probe-real real:NAME]
 *
 * The probe loads the library (dlopen: its constructors run there), asks
 * it for its table and checks the ABI version (external.c, real.c), and,
 * for a table that can run without a GPU, creates an instance over the
 * sim upstream with the allocator's defaults and destroys it. It reports on
 * descriptor 3, one record a line, before each step and at the end: the
 * table's name, summary, flags and option declarations. The parent makes
 * from the report a table that describes the plug-in and whose methods
 * refuse to run (plan, option checks and --list need nothing more); the
 * plug-in runs only in the case processes.
 *
 * A probe that crashes, ends without its report, or does not finish within
 * CMB_PLUGIN_PROBE_TIMEOUT_S (SIGKILL to its process group) is one line
 * naming the step it was in; SIGINT/SIGTERM of the parent kill it at once.
 */
#ifndef CMB_PLUGIN_PROBE_H
#define CMB_PLUGIN_PROBE_H

#include <stddef.h>
#include <stdio.h>

#include "../allocators/cmb_allocator.h"

/* How long a probe may take, in seconds; the environment variable
 * CMB_PLUGIN_PROBE_TIMEOUT (seconds, up to 600) overrides it. Loading a
 * large library (libtorch) from a cold disk takes a few seconds. */
#define CMB_PLUGIN_PROBE_TIMEOUT_S 10.0
#define CMB_PLUGIN_PROBE_TIMEOUT_ENV "CMB_PLUGIN_PROBE_TIMEOUT"

/* The internal options that start a probe (cli.c). */
#define CMB_ARG_PROBE_PLUGIN "--probe-plugin"
#define CMB_ARG_PROBE_REAL "--probe-real"

/* In the parent: route every plug-in load to a probe process. */
void cmb_plugin_probe_install(void);

/* The probe process: loads and checks the plug-in at `path` (a real:
 * plug-in's table `real_name`, or NULL for external:), reporting on
 * descriptor 3. Its exit status: 0, or 1 with an error record. */
int cmb_plugin_probe_main(const char *path, const char *real_name);

/* --- the report (exposed for tests/test_plugin_report.c) ------------------------- */

/* The records of a table: "table" and one "option" per declaration. */
void cmb_plugin_report_table(FILE *f, const cmb_allocator_methods *m);

/* What a probe reported, read from its records. */
typedef struct cmb_plugin_report {
    const cmb_allocator_methods *methods; /* the describing table (kept for the process); NULL: none */
    int ok;                               /* the "ok" record came                                     */
    char stage[16];                       /* the last step begun ("load", "table", "create", ...)      */
    char error[512];                      /* the "error" record's reason, or a malformed report's      */
} cmb_plugin_report;

/* Reads the records in text (NUL-terminated). 0, or -1 for a malformed
 * report (r->error says why). */
int cmb_plugin_report_read(const char *text, cmb_plugin_report *r);

/* Frees the describing table of a report that is not kept. */
void cmb_plugin_report_release(cmb_plugin_report *r);

#endif /* CMB_PLUGIN_PROBE_H */
