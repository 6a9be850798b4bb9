/* test_soak.c - the sim soak (scripts/sim-soak.sh) in a size for every CI
 * run: churn under every sim allocator, three distributions, three
 * repetitions, every block checked; statistics consistent, nothing leaked
 * or misused, and the case processes' host heap exactly as large after
 * each repetition as before it. The full soak (over 100 million
 * operations) is the script; its summary is committed in
 * results/reliability/sim-soak.txt. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/run.h"

static void a_short_soak_stays_consistent(void **state)
{
    (void)state;
    char cmd[4096], out[1 << 16];
    const char *bin = getenv("CMB_BIN");
    char build[1024];
    snprintf(build, sizeof build, "%s", bin);
    char *slash = strrchr(build, '/');
    if (slash)
        *slash = '\0';
    snprintf(cmd, sizeof cmd, "CMB_SOAK_MIN_OPS=1000000 sh %s/scripts/sim-soak.sh %s %s/soak 20000",
             cmb_test_src(), build, cmb_test_tmpdir());
    int rc = cmb_test_sh(cmd, out, sizeof out);
    printf("%s", out);
    if (rc)
        fail_msg("soak: %s", out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_short_soak_stays_consistent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
