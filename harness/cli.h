/* cli.h - the command line of cumembench (one table of options, cli.c). */
#ifndef CMB_CLI_H
#define CMB_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "../allocators/upstream.h"
#include "params.h"

#define CMB_MAX_OVERRIDES 64

/* The defaults, written once. */
#define CMB_DEFAULT_SIM_CAPACITY (80ull << 30) /* an 80 GiB device: H100's class */
#define CMB_DEFAULT_SEED 42
#define CMB_DEFAULT_REPETITIONS 3
#define CMB_DEFAULT_CASE_TIMEOUT_S 900.0

typedef enum cmb_mode_choice { CMB_CHOOSE_AUTO = -1, CMB_CHOOSE_SIM = 0, CMB_CHOOSE_GPU = 1 } cmb_mode_choice;

typedef struct cmb_cli {
    int list, help, version;
    int child;             /* internal: run exactly one case                 */
    const char *case_record; /* internal: the case a child runs (wire.h)    */
    int probe_env;         /* internal: print the GPU environment            */
    int probe_mem;         /* internal: print the device's memory use        */
    const char *probe_plugin; /* internal: load and check this plug-in (plugin_probe.h) */
    const char *probe_real;   /* internal: ... as this real: allocator's        */
    int result_fd;         /* internal: where a child writes its results     */
    const char *scenarios; /* comma list or "all"                            */
    const char *allocators;/* comma list or "all"                            */
    cmb_preset preset;
    cmb_param_override overrides[CMB_MAX_OVERRIDES];
    char override_names[CMB_MAX_OVERRIDES][64]; /* behind overrides[].name  */
    size_t n_overrides;
    uint64_t seed;
    cmb_mode_choice mode;
    const char *out;
    int repetitions;       /* 0: the preset's default                        */
    uint64_t capacity;     /* 0: default (sim CMB_DEFAULT_SIM_CAPACITY; GPU none) */
    int device;
    int device_given;      /* --device was on the command line               */
    double case_timeout_s;
    int quiet;
    int verbose;           /* --verbose: case lines with full names (caseline.h) */
    cmb_fault_spec fault;
    uint64_t hold_memory;  /* internal: be the contention scenario's holder  */
    int multi_gpu_rank;    /* internal: be a rank of the multi-gpu scenario  */
    const char *record_trace; /* write the traffic of the (single) case */
    const char *costs;     /* --costs FILE: the cost file of predicted times  */
    const char *gpu_model; /* --gpu-model NAME: the committed cost file closest to it */
    const char *resume;    /* continue the run in this directory            */
    int timeline;              /* -1 auto (scenarios that ask), 0 off, 1 on  */
    unsigned timeline_points;  /* 0: the default                             */
    int explain_oom;           /* --explain-oom (sets CMB_EXPLAIN_OOM=1)     */
} cmb_cli;

/* --- the table of options --------------------------------------------------------- */

enum {
    CMB_OPT_INTERNAL = 1u << 0,  /* how the suite runs itself: not in --help   */
    CMB_OPT_RESUMABLE = 1u << 1, /* may be given beside --resume: it changes how
                                    the rest of a run is shown or policed, not
                                    what is measured                           */
    CMB_OPT_NONEMPTY = 1u << 2   /* an empty value is refused                  */
};

/* The internal options the parent starts a case's child with (runner.c). */
#define CMB_ARG_CHILD "--child"
#define CMB_ARG_RESULT_FD "--result-fd"
#define CMB_ARG_CASE "--case"

typedef struct cmb_choice {
    const char *word;
    int value;
} cmb_choice;

typedef struct cmb_cli_option {
    const char *name;       /* "--scenario"                                   */
    const char *alias;      /* "-q", or NULL                                  */
    const char *metavar;    /* the value in --help; NULL: takes no value      */
    unsigned flags;         /* CMB_OPT_*                                      */
    int (*set)(cmb_cli *cli, const struct cmb_cli_option *o, const char *value, char *err, size_t errlen);
    size_t offset;          /* of the cmb_cli field it sets                   */
    double lo, hi;          /* bounds of a number (a size: its least value)   */
    const char *what;       /* what the value must be, for the error          */
    const cmb_choice *choices;
    const char *help;       /* lines of --help, separated by '\n'             */
} cmb_cli_option;

/* The option an argument names ("--opt", "--opt=value", an alias), or NULL. */
const cmb_cli_option *cmb_cli_match(const char *arg);
/* The i-th option of the table (NULL past the last). */
const cmb_cli_option *cmb_cli_option_at(size_t i);
/* The option named exactly `name` ("--child"), or NULL. */
const cmb_cli_option *cmb_cli_find(const char *name);

/* The value of the option at argv[*i] (after its '=', or the next argument,
 * which *i then points to); NULL with err set when it has none, NULL
 * without err for an option that takes none. */
const char *cmb_cli_value(int argc, char **argv, int *i, char *err, size_t errlen);

/* 0 on success; -1 with a one-line message in err. The strings point into
 * argv, which must outlive the cli, and overrides[] into the cli itself:
 * parse into the cli that is used, never copy one. */
int cmb_cli_parse(int argc, char **argv, cmb_cli *cli, char *err, size_t errlen);
void cmb_cli_usage(FILE *f);

#endif /* CMB_CLI_H */
