/* planted.c - a scenario that misbehaves on purpose, for the isolation
 * tests on a GPU (scripts/gpu-reliability.sh).
 *
 * Hidden: it is not in the scenario table, so --list and "all" never show
 * it, and cmb_scenario_find() returns it only when the environment has
 * CMB_PLANTED_FAULTS=1. It needs a GPU (skipped in sim mode).
 *
 *   kind=illegal-address  allocates a block through the allocator under test,
 *                         then launches a kernel that writes through an
 *                         unmapped address: the synchronization fails with
 *                         cudaErrorIllegalAddress, a sticky error. The case
 *                         fails with that reason; the next case, in a new
 *                         process, runs on a clean context.
 *   kind=orphan           starts a detached helper (its own session, so the
 *                         group kill after the case does not reach it) that
 *                         holds `hold` bytes for `hold_s` seconds, waits until
 *                         the memory is taken, and ends normally: the parent's
 *                         device check must report the memory as not returned
 *                         and the next case as run on a dirty device.
 *   kind=hold             the helper: cudaMalloc(hold), touch it, sleep.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "../common/cmb_clock.h"
#include "../kernels/cmb_kernels.h"
#include "scenario.h"

#define PLANTED_ENV "CMB_PLANTED_FAULTS"
#define HOLDER_START_TIMEOUT_S 60.0

extern char **environ;

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* --- illegal address ------------------------------------------------------------ */

static cmb_status bad_write(cmb_case *c)
{
    void *p;
    cmb_stream s = cmb_case_stream(c, 0);
    cmb_status st = cmb_alloc(c, 1u << 20, s, &p);
    if (st != CMB_OK)
        return cmb_case_fail(c, st, "planted-fault: the allocation before the bad kernel failed");
    int e = cmb_kernel_planted_bad_write(s);
    if (e)
        return cmb_case_fail(c, CMB_ERR_CUDA, "planted-fault: launch failed: %s",
                             cudaGetErrorString((cudaError_t)e));
    return cmb_case_sync(c); /* fails: an illegal memory access was encountered */
}

/* --- a helper that outlives the case ---------------------------------------------------- */

static cmb_status hold(cmb_case *c)
{
    void *p = NULL;
    size_t bytes = (size_t)cmb_param_u64(c, "hold");
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaSuccess)
        e = cudaMemset(p, 0x5a, bytes);
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    if (e != cudaSuccess)
        return cmb_case_fail(c, CMB_ERR_CUDA, "planted-fault hold: %s", cudaGetErrorString(e));
    sleep_s((double)cmb_param_u64(c, "hold_s"));
    cudaFree(p);
    return CMB_OK;
}

static int spawn_holder(cmb_case *c, pid_t *pid)
{
    char self[PATH_MAX], dev[16], hold_arg[64], secs_arg[64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return -1;
    self[n] = '\0';
    snprintf(dev, sizeof dev, "%d", cmb_case_device(c));
    snprintf(hold_arg, sizeof hold_arg, "hold=%s", cmb_param_str(c, "hold"));
    snprintf(secs_arg, sizeof secs_arg, "hold_s=%s", cmb_param_str(c, "hold_s"));
    char *argv[] = {self, "--child", "--result-fd", "1", "--mode", "gpu", "--scenario", "planted-fault",
                    "--allocator", "cuda", "--device", dev, "--repetitions", "1", "--param", "kind=hold",
                    "--param", hold_arg, "--param", secs_arg, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
    int rc = posix_spawn(pid, self, &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    return rc ? -1 : 0;
}

static cmb_status orphan(cmb_case *c)
{
    size_t free0, free_now, total;
    uint64_t bytes = cmb_param_u64(c, "hold");
    pid_t pid;
    if (cudaMemGetInfo(&free0, &total) != cudaSuccess)
        return cmb_case_fail(c, CMB_ERR_CUDA, "planted-fault: cudaMemGetInfo failed");
    if (spawn_holder(c, &pid))
        return cmb_case_fail(c, CMB_ERR_STATE, "planted-fault: cannot start the holder process");
    double t0 = cmb_now_s();
    for (;;) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid)
            return cmb_case_fail(c, CMB_ERR_STATE, "planted-fault: the holder process ended early");
        if (cudaMemGetInfo(&free_now, &total) == cudaSuccess && free0 > free_now &&
            free0 - free_now >= bytes / 2)
            break;
        if (cmb_now_s() - t0 > HOLDER_START_TIMEOUT_S) {
            kill(pid, SIGKILL);
            return cmb_case_fail(c, CMB_ERR_STATE, "planted-fault: the holder took no memory in %.0f s",
                                 HOLDER_START_TIMEOUT_S);
        }
        sleep_s(0.05);
    }
    cmb_case_counter(c, "planted_hold_bytes", (double)bytes);
    cmb_case_note(c, "left a helper process holding %llu bytes for %llu s", (unsigned long long)bytes,
                  (unsigned long long)cmb_param_u64(c, "hold_s"));
    return CMB_OK;
}

/* --- the scenario ------------------------------------------------------------------------ */

static cmb_status planted_run(cmb_case *c)
{
    const char *kind = cmb_param_str(c, "kind");
    if (!strcmp(kind, "illegal-address"))
        return bad_write(c);
    if (!strcmp(kind, "orphan"))
        return orphan(c);
    return hold(c);
}

static const cmb_param_spec planted_params[] = {
    {"kind", CMB_P_CHOICE, "illegal-address", "illegal-address", 0, 0, "illegal-address|orphan|hold",
     "the fault to plant"},
    {"hold", CMB_P_SIZE, "1GiB", "1GiB", 1048576.0, 68719476736.0, NULL, "orphan: bytes the helper holds"},
    {"hold_s", CMB_P_INT, "20", "20", 1, 3600, NULL, "orphan: seconds the helper holds them"},
};

static const cmb_scenario planted = {
    .name = "planted-fault",
    .question = "Does a sticky CUDA error or memory left behind by one case stay out of the next? (tests only)",
    .params = planted_params,
    .n_params = sizeof planted_params / sizeof planted_params[0],
    .flags = CMB_SCN_NEEDS_GPU | CMB_SCN_NO_PROBE,
    .run = planted_run,
};

const cmb_scenario *_cmb_scenario_hidden(const char *name)
{
    const char *on = getenv(PLANTED_ENV);
    if (on && !strcmp(on, "1") && !strcmp(name, planted.name))
        return &planted;
    return NULL;
}
