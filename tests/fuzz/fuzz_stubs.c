/* fuzz_stubs.c - what cli.c calls outside the parsers fuzzed here: the
 * cost file is read by harness/costs.c, which needs the whole case machinery
 * (tests/test_costs.c and test_cli.c test it); the command line's fuzzer stops
 * at the option's text. */
#include <stddef.h>

#include "harness/costs.h"

int cmb_costs_use_file(const char *path, char *err, size_t errlen)
{
    (void)path, (void)err, (void)errlen;
    return 0;
}

int cmb_costs_use_gpu_model(const char *model, char *err, size_t errlen)
{
    (void)model, (void)err, (void)errlen;
    return 0;
}
