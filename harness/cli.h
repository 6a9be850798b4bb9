/* cli.h - the command line of cumembench. */
#ifndef CMB_CLI_H
#define CMB_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "../allocators/upstream.h"
#include "params.h"

#define CMB_MAX_OVERRIDES 64

typedef enum cmb_mode_choice { CMB_CHOOSE_AUTO = -1, CMB_CHOOSE_SIM = 0, CMB_CHOOSE_GPU = 1 } cmb_mode_choice;

typedef struct cmb_cli {
    int list, help, version;
    int child;             /* internal: run exactly one case                 */
    int probe_env;         /* internal: print the GPU environment            */
    int probe_mem;         /* internal: print the device's memory use        */
    int result_fd;         /* internal: where a child writes its results     */
    const char *scenarios; /* comma list or "all"                            */
    const char *allocators;/* comma list or "all"                            */
    cmb_preset preset;
    cmb_param_override overrides[CMB_MAX_OVERRIDES];
    size_t n_overrides;
    uint64_t seed;
    cmb_mode_choice mode;
    const char *out;
    int repetitions;       /* 0: the preset's default                        */
    uint64_t capacity;     /* 0: default (sim 80 GiB; GPU none)              */
    int device;
    double case_timeout_s;
    int quiet;
    cmb_fault_spec fault;
    uint64_t hold_memory;  /* internal: be the contention scenario's holder  */
    int multi_gpu_rank;    /* internal: be a rank of the multi-gpu scenario  */
    const char *record_trace; /* write the traffic of the (single) case */
    const char *resume;    /* continue the run in this directory            */
    int timeline;              /* -1 auto (scenarios that ask), 0 off, 1 on  */
    unsigned timeline_points;  /* 0: the default                             */
    const char *timeline_dir;  /* internal: where a child writes its timeline */
} cmb_cli;

/* 0 on success; -1 with a one-line message in err. */
int cmb_cli_parse(int argc, char **argv, cmb_cli *cli, char *err, size_t errlen);
void cmb_cli_usage(FILE *f);

#define CMB_DEFAULT_SIM_CAPACITY (80ull << 30)
#define CMB_DEFAULT_SEED 42

#endif /* CMB_CLI_H */
