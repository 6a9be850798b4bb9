/* holder.c - the process that holds device memory for the contention
 * scenario (see holder.h). */
#define _GNU_SOURCE
#include "holder.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "../common/cmb_clock.h"

extern char **environ;

/* --- the parent's side ------------------------------------------------------ */

static int spawn_holder(int device, uint64_t bytes, int in_r, int out_w, pid_t *pid)
{
    char self[PATH_MAX], dev[16], amount[32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return -1;
    self[n] = '\0';
    snprintf(dev, sizeof dev, "%d", device);
    snprintf(amount, sizeof amount, "%llu", (unsigned long long)bytes);
    char *argv[] = {self, "--hold-memory", amount, "--device", dev, NULL};

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in_r, 0);
    posix_spawn_file_actions_adddup2(&fa, out_w, 1);
    int rc = posix_spawn(pid, self, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    return rc ? -1 : 0;
}

/* Reads the holder's one-line answer; 0 on "ready". */
static int await_ready(int fd, double timeout_s, char *err, size_t errlen)
{
    char line[256];
    size_t have = 0;
    double t0 = cmb_now_s();
    while (have + 1 < sizeof line) {
        double left = timeout_s - (cmb_now_s() - t0);
        if (left <= 0) {
            snprintf(err, errlen, "memory holder did not answer within %.0f s", timeout_s);
            return -1;
        }
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, (int)(left * 1000) + 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            continue;
        ssize_t got = read(fd, line + have, sizeof line - 1 - have);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        have += (size_t)got;
        line[have] = '\0';
        if (strchr(line, '\n'))
            break;
    }
    line[have] = '\0';
    line[strcspn(line, "\n")] = '\0';
    if (!strncmp(line, "ready", 5))
        return 0;
    snprintf(err, errlen, "memory holder failed: %s", have ? line : "it exited without an answer");
    return strncmp(line, "oom", 3) ? -1 : -2;
}

static void reap(pid_t pid)
{
    int status;
    double t0 = cmb_now_s();
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (cmb_now_s() - t0 > 10) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return;
        }
        usleep(1000);
    }
}

int cmb_holder_start(cmb_holder *h, int device, uint64_t bytes, double timeout_s, char *err, size_t errlen)
{
    int in[2], out[2];
    memset(h, 0, sizeof *h);
    h->to_child = -1;
    if (pipe2(in, O_CLOEXEC)) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    if (pipe2(out, O_CLOEXEC)) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        goto out_close_in;
    }
    if (spawn_holder(device, bytes, in[0], out[1], &h->pid)) {
        snprintf(err, errlen, "could not start the memory holder process");
        goto out_close_out;
    }
    close(in[0]);
    close(out[1]);
    h->to_child = in[1];
    h->bytes = bytes;
    int rc = await_ready(out[0], timeout_s, err, errlen);
    close(out[0]);
    if (rc)
        cmb_holder_stop(h);
    return rc;

out_close_out:
    close(out[0]);
    close(out[1]);
out_close_in:
    close(in[0]);
    close(in[1]);
    return -1;
}

void cmb_holder_stop(cmb_holder *h)
{
    if (!h->pid)
        return;
    close(h->to_child); /* end of file: the holder exits */
    reap(h->pid);
    h->pid = 0;
    h->to_child = -1;
    h->bytes = 0;
}

/* --- the holder's side --------------------------------------------------------- */

int cmb_holder_main(int device, uint64_t bytes)
{
    void *p = NULL;
    char buf[64];
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1)
        return 1; /* the parent is already gone */
    /* Inherited descriptors (the case's result pipe) must not be kept open. */
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess)
        e = cudaMalloc(&p, bytes);
    if (e == cudaSuccess)
        e = cudaMemset(p, 0, bytes); /* really resident, not only reserved */
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        printf("%s cudaMalloc of %llu bytes: %s\n", e == cudaErrorMemoryAllocation ? "oom" : "fail",
               (unsigned long long)bytes, cudaGetErrorString(e));
        fflush(stdout);
        return 1;
    }
    printf("ready %llu\n", (unsigned long long)bytes);
    fflush(stdout);
    for (;;) {
        ssize_t n = read(0, buf, sizeof buf);
        if (n == 0 || (n < 0 && errno != EINTR))
            break;
    }
    cudaFree(p);
    return 0;
}
