/* spawn.c - child processes with captured output, timeouts and clean kills. */
#define _GNU_SOURCE
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/cmb_clock.h"

extern char **environ;

volatile sig_atomic_t cmb_interrupted;

static void on_signal(int sig)
{
    (void)sig;
    cmb_interrupted = 1;
}

void cmb_spawn_install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

void cmb_spawn_buffer_append(void *ctx, const char *data, size_t len)
{
    cmb_spawn_buffer *b = ctx;
    size_t room = b->cap - 1 - b->len;
    if (len > room)
        len = room;
    memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
}

static void keep_tail(cmb_child_result *res, const char *data, size_t len)
{
    size_t cap = sizeof res->tail - 1, have = strlen(res->tail);
    if (len >= cap) {
        memcpy(res->tail, data + len - cap, cap);
        res->tail[cap] = '\0';
        return;
    }
    if (have + len > cap) {
        size_t drop = have + len - cap;
        memmove(res->tail, res->tail + drop, have - drop);
        have -= drop;
    }
    memcpy(res->tail + have, data, len);
    res->tail[have + len] = '\0';
}

/* --- the child's tie to its parent ----------------------------------------------- */

/* The parent's pid, for the child to compare getppid() with: a parent
 * that died between posix_spawn and the child's prctl is not signalled
 * again. Set before every spawn (a case that starts processes of its own
 * is their parent). */
#define CMB_PARENT_PID_ENV "CMB_PARENT_PID"

static void export_parent_pid(void)
{
    char pid[24];
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    setenv(CMB_PARENT_PID_ENV, pid, 1);
}

void cmb_spawn_die_with_parent(void)
{
    const char *v = getenv(CMB_PARENT_PID_ENV);
    if (!v)
        return; /* not started by cumembench's spawn */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != (pid_t)atol(v))
        _exit(128 + SIGKILL); /* the parent is gone already */
}

static int start_child(char *const argv[], int res_w, int out_w, pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    int rc;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    if (res_w >= 0)
        posix_spawn_file_actions_adddup2(&fa, res_w, 3);
    posix_spawn_file_actions_adddup2(&fa, out_w, 1);
    posix_spawn_file_actions_adddup2(&fa, out_w, 2);
    posix_spawnattr_setpgroup(&attr, 0);
    sigset_t dflt;
    sigemptyset(&dflt);
    sigaddset(&dflt, SIGINT);
    sigaddset(&dflt, SIGTERM);
    sigaddset(&dflt, SIGPIPE);
    sigaddset(&dflt, SIGHUP);
    posix_spawnattr_setsigdefault(&attr, &dflt);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF);
    export_parent_pid();
    rc = posix_spawn(pid, argv[0], &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    return rc;
}

/* Reads what is available on fd; returns 0 at EOF, 1 otherwise. */
static int drain(int fd, cmb_spawn_data_fn fn, void *ctx, FILE *log, cmb_child_result *res, int is_output)
{
    char buf[65536];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0)
        return errno == EINTR || errno == EAGAIN ? 1 : 0;
    if (n == 0)
        return 0;
    if (fn)
        fn(ctx, buf, (size_t)n);
    if (is_output) {
        if (log)
            fwrite(buf, 1, (size_t)n, log);
        keep_tail(res, buf, (size_t)n);
    }
    return 1;
}

int cmb_spawn_run(char *const argv[], double timeout_s, cmb_spawn_data_fn result_fn, void *result_ctx,
                  cmb_spawn_data_fn out_fn, void *out_ctx, FILE *log, cmb_child_result *res)
{
    int res_pipe[2] = {-1, -1}, out_pipe[2];
    pid_t pid;
    memset(res, 0, sizeof *res);
    if (pipe2(out_pipe, O_CLOEXEC))
        return -1;
    if (result_fn && pipe2(res_pipe, O_CLOEXEC)) {
        close(out_pipe[0]);
        close(out_pipe[1]);
        return -1;
    }
    double t0 = cmb_now_s();
    int rc = start_child(argv, res_pipe[1], out_pipe[1], &pid);
    close(out_pipe[1]);
    if (res_pipe[1] >= 0)
        close(res_pipe[1]);
    if (rc) {
        close(out_pipe[0]);
        if (res_pipe[0] >= 0)
            close(res_pipe[0]);
        return -1;
    }

    struct pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {res_pipe[0], POLLIN, 0}};
    int open_fds = res_pipe[0] >= 0 ? 2 : 1;
    int killed = 0, reaped = 0, status = 0;
    double reaped_at = 0;
    while (open_fds > 0) {
        /* A process the child started (in a session of its own, out of
         * reach of the group kill) may hold the pipes after the child has
         * gone: read what is there, then stop waiting for it. */
        if (!reaped && waitpid(pid, &status, WNOHANG) == pid) {
            reaped = 1;
            reaped_at = cmb_now_s();
        } else if (reaped && cmb_now_s() - reaped_at > CMB_SPAWN_DRAIN_S) {
            res->pipes_held = 1;
            break;
        }
        double left = timeout_s > 0 ? timeout_s - (cmb_now_s() - t0) : 1.0;
        if (!killed && (cmb_interrupted || (timeout_s > 0 && left <= 0))) {
            res->timed_out = !cmb_interrupted;
            res->interrupted = cmb_interrupted;
            kill(-pid, SIGKILL);
            killed = 1;
        }
        int ms = left > 0.2 || left <= 0 ? 200 : (int)(left * 1000) + 1;
        int n = poll(fds, 2, ms);
        if (n < 0 && errno != EINTR)
            break;
        for (int i = 0; i < 2 && n > 0; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            int more = i == 0 ? drain(fds[i].fd, out_fn, out_ctx, log, res, 1)
                              : drain(fds[i].fd, result_fn, result_ctx, log, res, 0);
            if (!more) {
                close(fds[i].fd);
                fds[i].fd = -1;
                open_fds--;
            }
        }
    }
    for (int i = 0; i < 2; i++)
        if (fds[i].fd >= 0)
            close(fds[i].fd);
    while (!reaped && waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    kill(-pid, SIGKILL); /* anything the child left behind in its group */
    res->seconds = cmb_now_s() - t0;
    res->exited = WIFEXITED(status);
    res->exit_code = res->exited ? WEXITSTATUS(status) : -1;
    res->signaled = WIFSIGNALED(status);
    res->signal_no = res->signaled ? WTERMSIG(status) : 0;
    res->ok = res->exited && res->exit_code == 0 && !res->timed_out && !res->interrupted;
    if (log && res->pipes_held)
        fprintf(log, "cumembench: the case process ended, but a process it started still holds its output; "
                     "not waiting for it\n");
    if (log)
        fflush(log);
    return 0;
}

void cmb_child_result_describe(const cmb_child_result *res, char *out, size_t len)
{
    if (res->interrupted)
        snprintf(out, len, "interrupted");
    else if (res->timed_out)
        snprintf(out, len, "timed out after %.0f s", res->seconds);
    else if (res->signaled)
        snprintf(out, len, "killed by signal %d (%s)", res->signal_no, strsignal(res->signal_no));
    else if (res->exited)
        snprintf(out, len, "exit status %d", res->exit_code);
    else
        snprintf(out, len, "ended abnormally");
}
