/* test_parent_death.c - a case process does not outlive its parent: when
 * the parent is killed with SIGKILL (no handler runs), the kernel kills the
 * case too (harness/spawn.c: PR_SET_PDEATHSIG, and getppid checked after,
 * for a parent that died before the child asked). The case hangs in the
 * misbehaving plug-in (mode=hang) so only its parent's death can end it
 * before the 60 s case timeout. */
#include <dirent.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/run.h"

/* A process whose parent is `parent`, or 0. */
static pid_t child_of(pid_t parent)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    pid_t found = 0;
    while (d && !found && (e = readdir(d))) {
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        char *close = strrchr(buf, ')');
        int ppid;
        if (close && sscanf(close + 2, "%*c %d", &ppid) == 1 && ppid == parent)
            found = (pid_t)atoi(e->d_name);
    }
    if (d)
        closedir(d);
    return found;
}

static int alive(pid_t pid)
{
    char path[64], state = 0;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int n = fscanf(f, "%*d (%*[^)]) %c", &state);
    fclose(f);
    return n == 1 && state != 'Z';
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void case_dies_with_sigkilled_parent(void **state)
{
    (void)state;
    char out[600], plugin[512];
    snprintf(out, sizeof out, "%s/o", cmb_test_tmpdir());
    snprintf(plugin, sizeof plugin, "external:%s:mode=hang:at=1", getenv("CMB_MISBEHAVING"));
    pid_t parent = fork();
    assert_true(parent >= 0);
    if (parent == 0) {
        execl(getenv("CMB_BIN"), "cumembench", "--mode", "sim", "--quiet", "--scenario", "churn", "--allocator",
              plugin, "--param", "n=100", "--param", "max_size=1MiB", "--param", "checkerboard=false", "--param",
              "dist=uniform", "--repetitions", "1", "--case-timeout", "60", "--out", out, (char *)NULL);
        _exit(127);
    }
    pid_t child = 0;
    for (int i = 0; i < 200 && !child; i++) {
        sleep_ms(50);
        child = child_of(parent);
    }
    if (!child) {
        kill(parent, SIGKILL);
        waitpid(parent, NULL, 0);
        fail_msg("no case process started");
    }
    sleep_ms(300); /* the case is hanging in its first allocation */
    kill(parent, SIGKILL);
    waitpid(parent, NULL, 0);
    int gone = 0;
    for (int i = 0; i < 40 && !gone; i++) { /* 2 s at most */
        sleep_ms(50);
        gone = !alive(child);
    }
    if (!gone) {
        kill(child, SIGKILL);
        fail_msg("the case process %d outlived its SIGKILLed parent", (int)child);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(case_dies_with_sigkilled_parent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
