/* fuzz_params.c - libFuzzer target over the parameter expansion
 * (harness/params.c, cmb_params_expand) and the command line
 * (harness/cli.c, cmb_cli_parse).
 *
 * The input's lines are command-line arguments: cmb_cli_parse must accept
 * or refuse them with a one-line message; the --param overrides it keeps,
 * and a preset grid taken from the first line, are expanded over a
 * scenario with one parameter of every type. Oracles: every expanded set
 * holds a canonical value for every parameter (its canonical form is
 * itself) and no two sets are equal. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/cli.h"
#include "harness/params.h"

#define MAX_ARGS 64

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_params: invariant broken: %s\n", what);
        abort();
    }
}

static const cmb_param_spec PARAMS[] = {
    {"n", CMB_P_INT, "1000", "10,100", 1, 1e8, NULL, ""},
    {"max_size", CMB_P_SIZE, "1MiB,64MiB", "1MiB", 1, 1099511627776.0, NULL, ""},
    {"fill", CMB_P_REAL, "0.75", "0.5,0.75", 0, 0.95, NULL, ""},
    {"checkerboard", CMB_P_BOOL, "true", "true,false", 0, 0, NULL, ""},
    {"dist", CMB_P_CHOICE, "uniform,bimodal", "uniform", 0, 0, "uniform|loguniform|bimodal", ""},
    {"trace", CMB_P_TEXT, "a.trace", "a.trace,b.trace", 0, 0, NULL, ""},
};

static int same_set(const cmb_param_set *a, const cmb_param_set *b)
{
    for (size_t p = 0; p < a->n; p++)
        if (strcmp(a->value[p], b->value[p]))
            return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    memcpy(text, data, size);
    text[size] = '\0';
    argv[argc++] = "cumembench";
    char *grid = NULL;
    for (char *line = text, *next; line && argc <= MAX_ARGS; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (!grid)
            grid = line;
        else
            argv[argc++] = line;
    }
    argv[argc] = NULL;

    cmb_cli cli;
    char err[512] = "";
    if (cmb_cli_parse(argc, argv, &cli, err, sizeof err)) {
        check(err[0] != '\0' && !strchr(err, '\n'), "a refusal is one non-empty line");
        cli.n_overrides = 0;
    }
    const char *grids[] = {grid ? grid : "", "", NULL};
    cmb_scenario s = {
        .name = "fuzz",
        .question = "",
        .params = PARAMS,
        .n_params = sizeof PARAMS / sizeof PARAMS[0],
        .quick_grids = grids,
    };
    for (int preset = 0; preset < 2; preset++) {
        cmb_param_set *sets = NULL;
        size_t n = 0;
        if (cmb_params_expand(&s, (cmb_preset)preset, cli.overrides, cli.n_overrides, &sets, &n, err, sizeof err)) {
            check(err[0] != '\0' && sets == NULL && n == 0, "a refused expansion says why and returns nothing");
            continue;
        }
        for (size_t k = 0; k < n; k++) {
            check(sets[k].n == s.n_params, "every parameter has a value");
            for (size_t p = 0; p < sets[k].n; p++) {
                char again[CMB_PARAM_VALUE_MAX];
                check(cmb_param_canonical(sets[k].spec[p], sets[k].value[p], again, sizeof again, err,
                                          sizeof err) == 0 && !strcmp(again, sets[k].value[p]),
                      "expanded values are canonical");
            }
            for (size_t q = 0; q < k && k < 256; q++)
                check(!same_set(&sets[q], &sets[k]), "no set twice");
        }
        free(sets);
    }
    free(text);
    return 0;
}
