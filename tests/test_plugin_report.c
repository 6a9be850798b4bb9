/* test_plugin_report.c - the report a plug-in's probe process sends the
 * parent (harness/plugin_probe.h): a table read back describes the plug-in
 * in every field (NULL, empty, tabs and newlines kept), its methods refuse
 * to run, and a report cut short or malformed is never taken as a verdict.
 * The processes themselves: tests/test_plugin_probe.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness/plugin_probe.h"

static const cmb_option_decl decls[] = {
    CMB_OPTION_EX("arena", CMB_OPT_SIZE, "4GiB", "1MiB", "max", "MiB", "the arena,\tin MiB\nor with a unit", NULL,
                  CMB_OPT_MAX_OK | CMB_OPT_POW2, "arena_bytes"),
    CMB_OPTION_EX("mode", CMB_OPT_ENUM, "", NULL, NULL, NULL, "back\\slash", "a|b", 0u, NULL),
    CMB_OPTION_END,
};

static cmb_status never(void *s)
{
    (void)s;
    return CMB_OK;
}

static const cmb_allocator_methods table = {
    .abi_version = 2,
    .name = "mine",
    .summary = NULL,
    .flags = CMB_ALLOC_USES_UPSTREAM | CMB_ALLOC_NEEDS_VMM,
    .destroy = never,
    .options = decls,
};

static char *report_of(const cmb_allocator_methods *m, const char *before, const char *after)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    fputs(before, f);
    cmb_plugin_report_table(f, m);
    fputs(after, f);
    fclose(f);
    return text;
}

static void same_text(const char *a, const char *b)
{
    if (!a || !b)
        assert_ptr_equal(a, b);
    else
        assert_string_equal(a, b);
}

static void a_table_round_trips(void **state)
{
    (void)state;
    cmb_plugin_report r;
    char *text = report_of(&table, "stage\tload\nstage\ttable\n", "stage\tcreate\nstage\texit\nok\n");
    assert_int_equal(cmb_plugin_report_read(text, &r), 0);
    free(text);
    assert_true(r.ok);
    assert_string_equal(r.stage, "exit");
    const cmb_allocator_methods *m = r.methods;
    assert_non_null(m);
    assert_int_equal(m->abi_version, CMB_ALLOCATOR_ABI_VERSION); /* its options are read */
    assert_string_equal(m->name, "mine");
    assert_null(m->summary);
    assert_int_equal(m->flags, table.flags);
    for (size_t i = 0; i < 2; i++) {
        const cmb_option_decl *a = &decls[i], *b = &m->options[i];
        assert_int_equal(a->type, b->type);
        assert_int_equal(a->flags, b->flags);
        const char *x[] = {a->name, a->dflt, a->min, a->max, a->unit, a->help, a->choices, a->excludes};
        const char *y[] = {b->name, b->dflt, b->min, b->max, b->unit, b->help, b->choices, b->excludes};
        for (size_t k = 0; k < 8; k++)
            same_text(x[k], y[k]);
    }
    assert_null(m->options[2].name);
    cmb_plugin_report_release(&r);
    assert_null(r.methods);
}

static void its_methods_refuse(void **state)
{
    (void)state;
    cmb_plugin_report r;
    char why[256] = "";
    void *inst = NULL;
    char *text = report_of(&table, "", "ok\n");
    assert_int_equal(cmb_plugin_report_read(text, &r), 0);
    free(text);
    cmb_config cfg = {.error = why, .error_len = sizeof why};
    assert_int_equal(r.methods->create(&cfg, NULL, &inst), CMB_ERR_UNSUPPORTED);
    assert_non_null(strstr(why, "never in cumembench's parent"));
    assert_null(inst);
    cmb_plugin_report_release(&r);
}

static void no_verdict_without_ok(void **state)
{
    (void)state;
    cmb_plugin_report r;
    /* cut after the table: the probe died creating it */
    char *text = report_of(&table, "stage\tload\nstage\ttable\n", "stage\tcreate\n");
    assert_int_equal(cmb_plugin_report_read(text, &r), 0);
    free(text);
    assert_false(r.ok);
    assert_null(r.methods);
    assert_string_equal(r.stage, "create");
    /* an error record */
    assert_int_equal(cmb_plugin_report_read("stage\ttable\nerror\tno table\\tfor ABI 3\n", &r), 0);
    assert_false(r.ok);
    assert_string_equal(r.error, "no table\tfor ABI 3");
    /* "ok" before any table is malformed */
    assert_int_equal(cmb_plugin_report_read("stage\tload\nok\n", &r), -1);
}

static void malformed_reports_are_refused(void **state)
{
    (void)state;
    cmb_plugin_report r;
    const char *bad[] = {
        "hello\n",                               /* unknown record */
        "table\t3\t0\t\\0\tsummary\nok\n",       /* a table without a name */
        "table\t3\t0\tx\ty\textra\nok\n",        /* too many fields */
        "table\t3\t0\tx\ty\noption\t1\t0\n",     /* an option cut short */
        "table\t3\t0\tx\\q\ty\nok\n",            /* an escape nobody writes */
        "stage\tmuch-too-long-a-stage-name\n",   /* longer than any stage */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(cmb_plugin_report_read(bad[i], &r), -1);
        assert_null(r.methods);
        assert_non_null(strstr(r.error, "malformed"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_table_round_trips),
        cmocka_unit_test(its_methods_refuse),
        cmocka_unit_test(no_verdict_without_ok),
        cmocka_unit_test(malformed_reports_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
