/* cmb_assert.c - the failure path of cmb_assert_internal (cmb_assert.h). */
#include "cmb_assert.h"

#include <stdio.h>
#include <stdlib.h>

void _cmb_assert_fail(const char *expr, const char *file, unsigned line, const char *func)
{
    fprintf(stderr, "cumembench: internal invariant broken: %s (%s:%u, %s)\n", expr, file, line, func);
    fflush(stderr);
    abort();
}

int _cmb_walk_fail(cmb_walk *w, const char *expr, const char *file, unsigned line, const char *func)
{
    if (w) {
        w->expr = expr;
        w->file = file;
        w->line = line;
        w->func = func;
    }
    return 1;
}
