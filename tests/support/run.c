/* run.c - helpers for tests that drive the binary. */
#include "run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int cmb_test_sh(const char *cmd, char *out, size_t outlen)
{
    char full[8192];
    snprintf(full, sizeof full, "(%s) 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p)
        return -1;
    size_t n = 0;
    if (out && outlen) {
        out[0] = '\0';
        size_t r;
        char buf[4096];
        while ((r = fread(buf, 1, sizeof buf, p)) > 0) {
            size_t take = r < outlen - 1 - n ? r : outlen - 1 - n;
            memcpy(out + n, buf, take);
            n += take;
        }
        out[n] = '\0';
    } else {
        char buf[4096];
        while (fread(buf, 1, sizeof buf, p) > 0)
            ;
    }
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int cmb_test_run(const char *args, char *out, size_t outlen)
{
    char cmd[8192];
    const char *bin = getenv("CMB_BIN");
    snprintf(cmd, sizeof cmd, "'%s' %s", bin ? bin : "./cumembench", args);
    return cmb_test_sh(cmd, out, outlen);
}

/* --- temporary directories: removed when the test exits ------------------------------------ */

#define MAX_TMPDIRS 256

static char *tmpdirs[MAX_TMPDIRS];
static size_t n_tmpdirs;
static pid_t tmpdirs_owner; /* a forked child leaving by exit() removes nothing */

/* CMB_TEST_KEEP=1 keeps them (to look at a failure). */
static void remove_tmpdirs(void)
{
    const char *keep = getenv("CMB_TEST_KEEP");
    if (getpid() != tmpdirs_owner)
        return;
    for (size_t i = 0; i < n_tmpdirs; i++) {
        if (!keep || strcmp(keep, "1") != 0) {
            char cmd[600];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdirs[i]);
            if (system(cmd) != 0)
                fprintf(stderr, "test: could not remove %s\n", tmpdirs[i]);
        }
        free(tmpdirs[i]);
    }
    n_tmpdirs = 0;
}

const char *cmb_test_tmpdir(void)
{
    static char dir[512];
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/cmb-test-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(dir) || n_tmpdirs == MAX_TMPDIRS) {
        fprintf(stderr, "test: cannot make a temporary directory %s\n", dir);
        exit(1);
    }
    if (!n_tmpdirs && !tmpdirs_owner) {
        tmpdirs_owner = getpid();
        atexit(remove_tmpdirs);
    }
    if (!(tmpdirs[n_tmpdirs++] = strdup(dir))) {
        fprintf(stderr, "test: out of host memory\n");
        exit(1);
    }
    return dir;
}

const char *cmb_test_src(void)
{
    const char *s = getenv("CMB_SRC");
    return s ? s : ".";
}

int cmb_test_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

const char *const cmb_test_torch_traces[CMB_TEST_TORCH_TRACES] = {
    "torch_transformer_sweep.trace", "torch_mlp_sweep_default.trace", "torch_convnet.trace", "torch_llm_decode.trace"};

int cmb_test_sample(const char *name, char *path, size_t pathlen)
{
    snprintf(path, pathlen, "%s/traces/samples/%s", cmb_test_src(), name);
    return cmb_test_exists(path);
}
