/* multi_gpu.c - one process per GPU, as distributed training runs.
 *
 * Question: on a host with several GPUs and one process per GPU, what does
 * each process take on every device - its own and the others - with and
 * without the usual mistakes (a CUDA call before cudaSetDevice makes a
 * context on device 0; the allocator first used before the device is set),
 * what does peer access to a stream-ordered pool cost, and what happens to
 * a block freed from another device's stream?
 *
 * The case process coordinates: it starts one rank process per device
 * (this binary as `cumembench --multi-gpu-rank`, multi_gpu_rank.c) and
 * steps them in turn (init, traffic, free; then rank 0 alone: xfree, peer,
 * map), reading every device's used memory before and after each step. On
 * a GPU that is cudaMemGetInfo on each device from this process, which
 * made a context on every device before the ranks started (so those
 * contexts are in the baseline, not in any rank's numbers); a rank's
 * numbers are the sums of its steps' differences, exact while nothing else
 * runs on the devices. In sim each rank reports what its simulated
 * devices hold (contexts modelled as CMB_MGPU_SIM_CONTEXT), and a device's
 * use is the sum over the ranks.
 *
 * Counters (R rank, D device, both 0..devices-1):
 *   rR_dD_bytes      what rank R holds on device D after its traffic was
 *                    freed: its contexts, what the allocator keeps;
 *   dD_bytes         device D's use above the baseline at that moment,
 *                    measured directly; sum_disagree_bytes is the largest
 *                    gap between it and the sum of the ranks' rR_dD_bytes;
 *   foreign_d0_bytes what the ranks other than 0 hold on device 0 (the
 *                    mistakes' cost); foreign_bytes: on devices not theirs;
 *   context_bytes, context_ms  rank 0's init step: one context;
 *   init_ms_max      the slowest rank's init (a mistaken rank makes two);
 *   rR_pool_reserved_bytes / rR_pool_used_bytes  with the traffic live,
 *   rR_pool_cached_bytes  after it was freed, rR_stray_pool_reserved_bytes
 *                    the device-0 pool after the pool0 mistake: the
 *                    cudaMemPool attributes, where the allocator's blocks
 *                    come from a cudaMemPool (cuPointerGetAttribute);
 *   xfree_verdict    0 works, 1 refused, 2 corrupts (the note says what);
 *                    xfree_refused, xfree_reused (the freed block came back
 *                    on device 0's stream), xfree_misuse (bad upstream
 *                    calls), xfree_changed_words (GPU: check kernels);
 *   peer_map_first_us, peer_map_again_us  cudaMemPoolSetAccess for device
 *                    1 on rank 0's pool, first and second call;
 *                    peer_added_dD_bytes what the first mapping added on
 *                    each device; peer_read_ok a kernel on device 1 read
 *                    the block back;
 *   unreturned_bytes device memory still used after every rank exited;
 *   rank_leaked_bytes what the ranks' upstreams still held at destroy.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "../common/cmb_units.h"
#include "../common/cmb_clock.h"
#include "multi_gpu.h"
#include "scenario.h"
#include "scn_util.h"

#define MAXD CMB_MGPU_MAX_DEVICES
#define STEP_TIMEOUT_S 120.0
#define EXIT_TIMEOUT_S 30.0
#define SETTLE_S 3.0                 /* as harness/devcheck.h waits for a process's memory */
#define SETTLE_SLACK (32ull << 20)   /* and the noise it ignores */

extern char **environ;

typedef struct proc {
    pid_t pid;
    int to, from;                    /* its stdin, its answers */
    char buf[4096];
    size_t have;
    int64_t take[MAXD];              /* sim: what it says it holds */
    int64_t held[MAXD];              /* the sum of its steps' differences */
} proc;

typedef struct mgpu {
    cmb_case *c;
    int gpu, n, home, tests;
    proc p[MAXD];
    int64_t base[MAXD];
    int64_t delta[MAXD];             /* the last step's differences */
    char line[2400];                 /* the last answer */
    double init_max;
    int64_t context;                 /* rank 0's init: one context on device 0 */
    int64_t leaked;
} mgpu;

/* --- the rank processes ------------------------------------------------------------- */

static int write_all(int fd, const char *s)
{
    size_t len = strlen(s), off = 0;
    while (off < len) {
        ssize_t w = write(fd, s + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        off += (size_t)w;
    }
    return 0;
}

static int spawn_rank(proc *p, const char *job)
{
    char self[PATH_MAX];
    int in[2], out[2], rc;
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0 || pipe2(in, O_CLOEXEC))
        return -1;
    if (pipe2(out, O_CLOEXEC)) {
        close(in[0]);
        close(in[1]);
        return -1;
    }
    self[n] = '\0';
    char *argv[] = {self, "--multi-gpu-rank", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 3);
    rc = posix_spawn(&p->pid, self, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    p->to = in[1];
    p->from = out[0];
    if (rc) {
        p->pid = 0;
        return -1;
    }
    return write_all(p->to, job);
}

/* The rank's next answer line into g->line; -1 when it timed out, -2 when
 * its end of the pipe closed (it ended). */
static int read_answer(mgpu *g, proc *p, double timeout_s)
{
    double t0 = cmb_now_s();
    for (;;) {
        char *nl = memchr(p->buf, '\n', p->have);
        if (nl) {
            size_t len = (size_t)(nl - p->buf);
            snprintf(g->line, sizeof g->line, "%.*s", (int)len, p->buf);
            memmove(p->buf, nl + 1, p->have - len - 1);
            p->have -= len + 1;
            return 0;
        }
        if (p->have == sizeof p->buf)
            p->have = 0; /* an overlong line: dropped */
        double left = timeout_s - (cmb_now_s() - t0);
        struct pollfd pf = {p->from, POLLIN, 0};
        if (left <= 0)
            return -1;
        int rc = poll(&pf, 1, (int)(left * 1000) + 1);
        if (rc <= 0)
            continue;
        ssize_t got = read(p->from, p->buf + p->have, sizeof p->buf - p->have);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return -2;
        p->have += (size_t)got;
    }
}

/* Waits for the rank to end (kills it after timeout_s); its wait status,
 * or -1 when it had to be killed or was already reaped. */
static int reap(proc *p, double timeout_s)
{
    int status = -1;
    double t0 = cmb_now_s();
    if (!p->pid)
        return -1;
    while (waitpid(p->pid, &status, WNOHANG) == 0) {
        if (cmb_now_s() - t0 > timeout_s) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &status, 0);
            status = -1;
            break;
        }
        usleep(2000);
    }
    p->pid = 0;
    return status;
}

static void kill_all(mgpu *g)
{
    for (int r = 0; r < g->n; r++) {
        if (g->p[r].pid)
            kill(g->p[r].pid, SIGKILL);
        reap(&g->p[r], 5);
        if (g->p[r].to > 0)
            close(g->p[r].to);
        if (g->p[r].from > 0)
            close(g->p[r].from);
        g->p[r].to = g->p[r].from = -1;
    }
}

/* --- measuring ------------------------------------------------------------------------ */

static cmb_status measure(mgpu *g, int64_t used[MAXD])
{
    for (int d = 0; d < g->n; d++) {
        used[d] = 0;
        if (!g->gpu) {
            for (int r = 0; r < g->n; r++)
                used[d] += g->p[r].take[d];
            continue;
        }
        size_t f = 0, t = 0;
        cudaError_t e = cudaSetDevice(d);
        if (e == cudaSuccess)
            e = cudaMemGetInfo(&f, &t);
        if (e != cudaSuccess)
            return _cmb_cuda(g->c, e, "cudaMemGetInfo");
        used[d] = (int64_t)(t - f);
    }
    if (g->gpu)
        cudaSetDevice(g->home);
    return CMB_OK;
}

/* A context on every device, so that measuring adds nothing later. */
static cmb_status choose_devices(mgpu *g)
{
    int asked = (int)cmb_param_u64(g->c, "devices"), count = 0;
    g->n = asked;
    if (!g->gpu)
        return CMB_OK;
    cudaGetDevice(&g->home);
    if (cudaGetDeviceCount(&count) != cudaSuccess)
        return _cmb_cuda(g->c, cudaGetLastError(), "cudaGetDeviceCount");
    if (count < asked) {
        g->n = count;
        cmb_case_note(g->c, "%d GPU(s) visible, %d asked: %s", count, asked,
                      count < 2 ? "the mistakes, the cross-device free and peer access need two, skipped" : "");
    }
    if (g->n < 1)
        return cmb_case_fail(g->c, CMB_ERR_CUDA, "no GPU visible to the case process");
    for (int d = 0; d < g->n; d++)
        if (cudaSetDevice(d) != cudaSuccess || cudaFree(0) != cudaSuccess)
            return _cmb_cuda(g->c, cudaGetLastError(), "a context on every device");
    cudaSetDevice(g->home);
    return CMB_OK;
}

/* --- answers -------------------------------------------------------------------------- */

/* A rank's pool attributes, named after the rank; 0 when key is not one. */
static int per_rank(cmb_case *c, int r, const char *key, double x)
{
    char name[96];
    if (!strcmp(key, "pool_reserved_bytes"))
        snprintf(name, sizeof name, "r%d_pool_reserved_bytes", r);
    else if (!strcmp(key, "pool_used_bytes"))
        snprintf(name, sizeof name, "r%d_pool_used_bytes", r);
    else if (!strcmp(key, "pool_cached_bytes"))
        snprintf(name, sizeof name, "r%d_pool_cached_bytes", r);
    else if (!strcmp(key, "stray_pool_reserved_bytes"))
        snprintf(name, sizeof name, "r%d_stray_pool_reserved_bytes", r);
    else
        return 0;
    cmb_case_counter(c, name, x);
    return 1;
}

/* Rank 0's test results, kept under their own names. */
static const char *const passed_through[] = {
    "xfree_verdict", "xfree_refused", "xfree_reused", "xfree_misuse", "xfree_changed_words",
    "peer_pool_reserved_bytes", "peer_map_first_us", "peer_map_again_us", "peer_read_ok",
};

static void field(mgpu *g, int r, const char *key, const char *v)
{
    cmb_case *c = g->c;
    double x = strtod(v, NULL);
    if (!strcmp(key, "take")) {
        const char *s = v;
        for (int d = 0; d < g->n && *s; d++) {
            g->p[r].take[d] = strtoll(s, (char **)&s, 10);
            s += *s == ',';
        }
    } else if (!strcmp(key, "init_ms")) {
        if (r == 0 && g->gpu)
            cmb_case_counter(c, "context_ms", x);
        g->init_max = x > g->init_max ? x : g->init_max;
    } else if (!strcmp(key, "leaked_bytes")) {
        g->leaked += (int64_t)x;
    } else if (!per_rank(c, r, key, x)) {
        for (size_t i = 0; i < sizeof passed_through / sizeof passed_through[0]; i++)
            if (!strcmp(key, passed_through[i]))
                cmb_case_counter(c, passed_through[i], x);
    }
}

/* The fields of an "ok" answer: key=value words, then note= (the rest). */
static void take_fields(mgpu *g, int r, char *fields)
{
    while (fields && *fields) {
        while (*fields == ' ')
            fields++;
        if (!strncmp(fields, "note=", 5)) {
            cmb_case_note(g->c, "%s", fields + 5);
            return;
        }
        char *end = strchr(fields, ' ');
        if (end)
            *end = '\0';
        char *eq = strchr(fields, '=');
        if (eq) {
            *eq = '\0';
            field(g, r, fields, eq + 1);
        }
        fields = end ? end + 1 : NULL;
    }
}

/* Why a rank gave no answer: it ended (reaped here), or it hangs (killed). */
static void describe_end(proc *p, int ended, char *out, size_t len)
{
    int status = 0;
    pid_t w = -1;
    if (p->pid && !ended) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, &status, 0);
        snprintf(out, len, "no answer for %.0f s: killed", STEP_TIMEOUT_S);
        p->pid = 0;
        return;
    }
    for (double t0 = cmb_now_s(); p->pid && (w = waitpid(p->pid, &status, WNOHANG)) == 0;) {
        if (cmb_now_s() - t0 > EXIT_TIMEOUT_S) { /* closed its pipe but lives on */
            kill(p->pid, SIGKILL);
            w = waitpid(p->pid, &status, 0);
            break;
        }
        usleep(2000);
    }
    if (w > 0 && WIFSIGNALED(status))
        snprintf(out, len, "the rank process was killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else if (w > 0)
        snprintf(out, len, "the rank process exited with status %d", WEXITSTATUS(status));
    else
        snprintf(out, len, "the rank process is gone");
    p->pid = 0;
}

/* "go STEP" to rank r and its answer, with every device's use before and
 * after (g->delta, added to what the rank holds). 0 ok; 1 skipped (noted);
 * -1 failed (the case failed with the rank's reason); -2 no answer (the
 * rank ended or hangs: g->line says which; the case is not failed here). */
static int ask(mgpu *g, int r, const char *step)
{
    int64_t before[MAXD], after[MAXD];
    char go[32];
    size_t sl = strlen(step);
    proc *p = &g->p[r];
    if (measure(g, before) != CMB_OK)
        return -1;
    snprintf(go, sizeof go, "go %s\n", step);
    int got = write_all(p->to, go) ? -2 : read_answer(g, p, STEP_TIMEOUT_S);
    if (got) {
        describe_end(p, got == -2, g->line, sizeof g->line);
        return -2;
    }
    char *l = g->line;
    if (!strncmp(l, "fail ", 5)) {
        cmb_case_fail(g->c, CMB_ERR_STATE, "rank %d, step %s", r, l + 5);
        return -1;
    }
    if (!strncmp(l, "skip ", 5) && !strncmp(l + 5, step, sl) && l[5 + sl] == ' ') {
        cmb_case_note(g->c, "%s skipped: %s", step, l + 6 + sl);
        return 1;
    }
    if (strncmp(l, "ok ", 3) || strncmp(l + 3, step, sl) || (l[3 + sl] && l[3 + sl] != ' ')) {
        cmb_case_fail(g->c, CMB_ERR_STATE, "rank %d, step %s: unexpected answer '%.200s'", r, step, l);
        return -1;
    }
    take_fields(g, r, l + 3 + sl);
    if (measure(g, after) != CMB_OK)
        return -1;
    for (int d = 0; d < g->n; d++) {
        g->delta[d] = after[d] - before[d];
        p->held[d] += g->delta[d];
    }
    return 0;
}

/* ask(), where anything but an answer fails the case. */
static cmb_status ask_or_fail(mgpu *g, int r, const char *step, int *rc)
{
    *rc = ask(g, r, step);
    if (*rc == -2)
        return cmb_case_fail(g->c, CMB_ERR_STATE, "rank %d, step %s: %s (its output is in the run's log)", r, step,
                             g->line);
    if (*rc == 1 && strcmp(step, "peer") && strcmp(step, "map"))
        return cmb_case_fail(g->c, CMB_ERR_STATE, "rank %d skipped step %s", r, step);
    return *rc < 0 ? CMB_ERR_STATE : CMB_OK;
}

/* --- the run ---------------------------------------------------------------------------- */

static cmb_status start_ranks(mgpu *g)
{
    cmb_case *c = g->c;
    const char *mistake = cmb_param_str(c, "mistake");
    char line[1024];
    cmb_mgpu_job job = {
        .gpu = g->gpu,
        .devices = g->n,
        .mistake = !strcmp(mistake, "ctx0") ? CMB_MGPU_CTX0 : !strcmp(mistake, "pool0") ? CMB_MGPU_POOL0
                                                                                           : CMB_MGPU_NONE,
        .size = cmb_param_u64(c, "size"),
        .stray = cmb_param_u64(c, "stray"),
        .capacity = g->gpu ? cmb_param_u64(c, "capacity") : cmb_case_capacity(c),
        .seed = cmb_case_seed(c),
    };
    snprintf(job.alloc, sizeof job.alloc, "%s", cmb_case_allocator_spec(c));
    if (measure(g, g->base) != CMB_OK)
        return CMB_ERR_CUDA;
    for (int r = 0; r < g->n; r++) {
        job.rank = r;
        if (cmb_mgpu_job_format(&job, line, sizeof line))
            return cmb_case_fail(c, CMB_ERR_INVALID, "the allocator spec does not fit a rank's job line");
        if (spawn_rank(&g->p[r], line))
            return cmb_case_fail(c, CMB_ERR_STATE, "could not start rank %d: %s", r, strerror(errno));
    }
    return CMB_OK;
}

static cmb_status run_steps(mgpu *g)
{
    static const char *const steps[] = {"init", "traffic", "free"};
    int rc;
    for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
        for (int r = 0; r < g->n; r++) {
            if (ask_or_fail(g, r, steps[s], &rc) != CMB_OK)
                return CMB_ERR_STATE;
            if (s == 0 && r == 0)
                g->context = g->delta[0];
        }
    }
    return CMB_OK;
}

/* Every rank has freed its traffic: who holds what, where. */
static cmb_status steady(mgpu *g)
{
    cmb_case *c = g->c;
    int64_t used[MAXD], foreign0 = 0, foreign = 0, disagree = 0;
    char name[64];
    if (measure(g, used) != CMB_OK)
        return CMB_ERR_CUDA;
    cmb_case_counter(c, "ranks", g->n);
    for (int d = 0; d < g->n; d++) {
        int64_t sum = 0;
        for (int r = 0; r < g->n; r++) {
            int64_t h = g->p[r].held[d];
            snprintf(name, sizeof name, "r%d_d%d_bytes", r, d);
            cmb_case_counter(c, name, (double)h);
            sum += h;
            foreign += r != d ? h : 0;
            foreign0 += d == 0 && r != 0 ? h : 0;
        }
        snprintf(name, sizeof name, "d%d_bytes", d);
        cmb_case_counter(c, name, (double)(used[d] - g->base[d]));
        int64_t gap = llabs(used[d] - g->base[d] - sum);
        disagree = gap > disagree ? gap : disagree;
    }
    cmb_case_counter(c, "foreign_d0_bytes", (double)foreign0);
    cmb_case_counter(c, "foreign_bytes", (double)foreign);
    cmb_case_counter(c, "sum_disagree_bytes", (double)disagree);
    cmb_case_counter(c, "context_bytes", (double)g->context);
    if (g->gpu)
        cmb_case_counter(c, "init_ms_max", g->init_max);
    return CMB_OK;
}

static cmb_status rank0_tests(mgpu *g)
{
    cmb_case *c = g->c;
    char name[64];
    int rc = ask(g, 0, "xfree");
    if (rc == -2) { /* the rank died of it, in its own process */
        cmb_case_counter(c, "xfree_verdict", 2);
        cmb_case_note(g->c, "cross-device free corrupts: %s", g->line);
        return CMB_OK;
    }
    if (rc < 0)
        return CMB_ERR_STATE;
    if (ask_or_fail(g, 0, "peer", &rc) != CMB_OK || rc == 1)
        return rc == 1 ? CMB_OK : CMB_ERR_STATE;
    if (ask_or_fail(g, 0, "map", &rc) != CMB_OK)
        return CMB_ERR_STATE;
    for (int d = 0; rc == 0 && d < g->n; d++) {
        snprintf(name, sizeof name, "peer_added_d%d_bytes", d);
        cmb_case_counter(c, name, (double)g->delta[d]);
    }
    return CMB_OK;
}

/* End of file to each rank in turn: it frees, answers and exits; then the
 * devices must come back to the baseline. */
static void end_ranks(mgpu *g)
{
    cmb_case *c = g->c;
    int64_t used[MAXD], left = 0;
    for (int r = 0; r < g->n; r++) {
        proc *p = &g->p[r];
        int gone = !p->pid;
        close(p->to);
        p->to = -1;
        if (!gone && read_answer(g, p, EXIT_TIMEOUT_S) == 0 && !strncmp(g->line, "ok exit", 7))
            take_fields(g, r, g->line + 7);
        else if (!gone)
            cmb_case_note(c, "rank %d did not end cleanly", r);
        int status = reap(p, EXIT_TIMEOUT_S);
        if (!gone && status != 0)
            cmb_case_note(c, "rank %d: %s", r, status < 0 ? "killed after 30 s" : "a non-zero exit status");
        close(p->from);
        p->from = -1;
        memset(p->take, 0, sizeof p->take); /* sim: its devices are gone with it */
    }
    double t0 = cmb_now_s();
    do {
        if (measure(g, used) != CMB_OK)
            return;
        left = 0;
        for (int d = 0; d < g->n; d++)
            left = used[d] - g->base[d] > left ? used[d] - g->base[d] : left;
        if ((uint64_t)left <= SETTLE_SLACK)
            break;
        usleep(20000); /* a process's memory may take a moment to come back */
    } while (cmb_now_s() - t0 < SETTLE_S);
    cmb_case_counter(c, "unreturned_bytes", (uint64_t)left <= SETTLE_SLACK ? 0 : (double)left);
    cmb_case_counter(c, "rank_leaked_bytes", (double)g->leaked);
}

static cmb_status multi_gpu_run(cmb_case *c)
{
    mgpu *g = calloc(1, sizeof *g);
    if (!g)
        return cmb_case_fail(c, CMB_ERR_HOST_NOMEM, "host out of memory");
    g->c = c;
    g->gpu = _cmb_gpu(c);
    for (int r = 0; r < MAXD; r++)
        g->p[r].to = g->p[r].from = -1;
    void (*old_pipe)(int) = signal(SIGPIPE, SIG_IGN); /* a rank that died must not kill the case */
    cmb_status st = choose_devices(g);
    g->tests = g->n >= 2 && !strcmp(cmb_param_str(c, "mistake"), "none");
    if (!g->gpu)
        cmb_case_note(c, "sim: a context is modelled as %llu MiB; peer access and data checks need a GPU",
                      CMB_MGPU_SIM_CONTEXT >> 20);
    double t0 = cmb_case_clock(c);
    if (st == CMB_OK)
        st = start_ranks(g);
    if (st == CMB_OK)
        st = run_steps(g);
    if (st == CMB_OK)
        st = steady(g);
    if (st == CMB_OK && g->tests)
        st = rank0_tests(g);
    if (st == CMB_OK)
        end_ranks(g);
    else
        kill_all(g);
    cmb_case_set_time(c, cmb_case_clock(c) - t0);
    signal(SIGPIPE, old_pipe);
    free(g);
    return st;
}

static int multi_gpu_check(const cmb_case *c, char *reason, size_t len)
{
    uint64_t cap = cmb_param_u64(c, "capacity"), size = cmb_param_u64(c, "size");
    if (cap && cap < 2 * size + cmb_param_u64(c, "stray")) {
        snprintf(reason, len, "multi-gpu: capacity must hold twice size plus stray (rank 0's tests)");
        return -1;
    }
    return 0;
}

static const cmb_param_spec multi_gpu_params[] = {
    {"devices", CMB_P_INT, "2", "2", 1, CMB_MGPU_MAX_DEVICES, NULL,
     "ranks, one per device (GPU: at most the visible GPUs; sim: simulated devices)"},
    {"mistake", CMB_P_CHOICE, "none,ctx0,pool0", "none,ctx0,pool0", 0, 0, "none|ctx0|pool0",
     "none; ctx0: a CUDA call before cudaSetDevice (a context on device 0); pool0: and the allocator's first "
     "block there"},
    {"size", CMB_P_SIZE, "256MiB", "1GiB", 8388608, 1099511627776.0, NULL, "bytes each rank allocates (8 blocks)"},
    {"stray", CMB_P_SIZE, "1MiB", "1MiB", 1, 1099511627776.0, NULL, "the block pool0 allocates on device 0"},
    {"capacity", CMB_P_SIZE, "4GiB", "4GiB", 0, 1099511627776.0, NULL,
     "sim: each device's size; GPU: what an upstream policy may take per instance (0: no cap)"},
};

/* Its finding is what the ranks other than 0 leave on device 0 (a context or
 * a pool made there by mistake costs what the allocator reserves), not a
 * peak on one device. */
static const cmb_headline multi_gpu_headline = {
    NULL, "foreign_d0_bytes", "-", NULL,
    {"time {time}", "device 0 held by other ranks {foreign_d0_bytes}", "context {context_bytes}",
     "left after exit {unreturned_bytes}", NULL},
};

const cmb_scenario cmb_scenario_multi_gpu = {
    .name = "multi-gpu",
    .question = "With one process per GPU, what does each process take on every device, what do a context or a "
                "pool made on device 0 by mistake cost, what does peer access to a pool cost, and is a block freed "
                "from another device's stream handled?",
    .params = multi_gpu_params,
    .n_params = sizeof multi_gpu_params / sizeof multi_gpu_params[0],
    .flags = CMB_SCN_NO_PROBE | CMB_SCN_OWN_PROCESSES,
    .check = multi_gpu_check,
    .run = multi_gpu_run,
    .headline = &multi_gpu_headline,
};
