/* main.c - the cumembench command. */
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "../scenarios/multi_gpu.h"
#include "build_info.h"
#include "calibrate.h"
#include "cli.h"
#include "devcheck.h"
#include "env.h"
#include "holder.h"
#include "list.h"
#include "plan.h"
#include "plugin_probe.h"
#include "resume.h"
#include "runner.h"
#include "spawn.h"
#include "tune.h"

int main(int argc, char **argv)
{
    cmb_cli cli;
    char err[512];
    if (argc > 1 && !strcmp(argv[1], "calibrate")) /* a command of its own: docs/costs.md */
        return cmb_calibrate_main(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "tune")) /* a command of its own: docs/tune.md */
        return cmb_tune_main(argc, argv);
    cmb_resume_remember_args(argc, argv);
    if (cmb_cli_parse(argc, argv, &cli, err, sizeof err)) {
        fprintf(stderr, "cumembench: %s (see cumembench --help)\n", err);
        return 2;
    }
    if (cli.help) {
        cmb_cli_usage(stdout);
        return 0;
    }
    if (cli.version) {
        printf("cumembench %s (%s build, CUDA %d.%d)\n", CMB_GIT_REVISION, CMB_BUILD_TYPE,
               CUDART_VERSION / 1000, (CUDART_VERSION % 1000) / 10);
        return 0;
    }
    if (cli.child || cli.probe_env || cli.probe_mem || cli.probe_plugin) /* started by cmb_spawn_run */
        cmb_spawn_die_with_parent();
    if (cli.hold_memory)
        return cmb_holder_main(cli.device, cli.hold_memory);
    if (cli.multi_gpu_rank)
        return cmb_multi_gpu_rank_main();
    if (cli.probe_env)
        return cmb_env_probe_main(cli.device);
    if (cli.probe_mem)
        return cmb_devcheck_probe_main(cli.device);
    if (cli.probe_plugin)
        return cmb_plugin_probe_main(cli.probe_plugin, cli.probe_real);
    if (!cli.child) /* the parent plans and lists: plug-ins run only in probes and cases */
        cmb_plugin_probe_install();
    if (cli.list) {
        if (cmb_plan_check_names(&cli, err, sizeof err)) {
            fprintf(stderr, "cumembench: %s\n", err);
            return 2;
        }
        cmb_list(stdout);
        return 0;
    }
    if (cli.child)
        return cmb_run_child(&cli);
    if (cli.resume && cmb_resume_prepare(argc, argv, &cli, err, sizeof err)) {
        fprintf(stderr, "cumembench: %s\n", err);
        cmb_resume_release();
        return 2;
    }
    int rc = cmb_run(&cli, argv[0]);
    cmb_resume_release();
    return rc;
}
