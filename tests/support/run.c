/* run.c - helpers for tests that drive the binary. */
#include "run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

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

const char *cmb_test_tmpdir(void)
{
    static char dir[256];
    snprintf(dir, sizeof dir, "/tmp/cmb-test-XXXXXX");
    if (!mkdtemp(dir))
        return "/tmp";
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
