/* test_wire.c - what passes between the parent and a case's child
 * (harness/wire.h): a case record read back gives the same case in every
 * field, a malformed one is refused with a reason, a run record survives
 * the pipe, and the child's command line uses the CLI table's internal
 * options. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness/case.h"
#include "harness/cli.h"
#include "harness/wire.h"

/* A case whose every field differs from its default. */
static void full_spec(cmb_case_spec *cs)
{
    char err[512];
    cmb_param_override ov[] = {{"trace", "traces/samples/churn_small.trace"}, {"passes", "3"}};
    cmb_param_set *sets = NULL;
    size_t n = 0;
    memset(cs, 0, sizeof *cs);
    cs->scenario = cmb_scenario_find("replay");
    assert_non_null(cs->scenario);
    assert_int_equal(cmb_params_expand(cs->scenario, CMB_PRESET_FULL, ov, 2, &sets, &n, err, sizeof err), 0);
    assert_int_equal(n, 1);
    cs->params = sets[0];
    free(sets);
    assert_int_equal(cmb_alloc_spec_parse("torch-caching:roundup_power2_divisions=256=1/512=8/>=4:"
                                          "max_split_size_mb=64@vmm", &cs->alloc, err, sizeof err), 0);
    cs->mode = CMB_MODE_GPU;
    cs->seed = 7;
    cs->device = 3;
    cs->capacity = 12345678901ull;
    cs->repetitions = 5;
    cs->fault = (cmb_fault_spec){.fail_nth = 3, .fail_every = 4, .fail_prob = 0.25, .seed = 9, .cap_bytes = 777};
    snprintf(cs->record_trace, sizeof cs->record_trace, "/tmp/one case.trace");
    snprintf(cs->timeline_dir, sizeof cs->timeline_dir, "/tmp/run/timelines");
    cs->timeline_points = 64;
    assert_int_equal(cmb_case_spec_make_name(cs, err, sizeof err), 0);
}

static void a_case_record_round_trips(void **state)
{
    (void)state;
    char err[512];
    cmb_case_spec *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    full_spec(a);
    /* a field added to cmb_case_spec must be added to wire.c's record and
     * to this test: the size says one was */
    assert_int_equal(sizeof(cmb_case_spec), 11720);
    char *record = cmb_wire_case_encode(a, err, sizeof err);
    assert_non_null(record);
    assert_int_equal(cmb_wire_case_decode(record, b, err, sizeof err), 0);
    assert_ptr_equal(b->scenario, a->scenario);
    assert_string_equal(b->alloc.text, a->alloc.text);
    assert_string_equal(b->alloc.name, "torch-caching");
    assert_ptr_equal(b->alloc.entry, a->alloc.entry);
    assert_int_equal(b->alloc.has_upstream, 1);
    assert_int_equal(b->alloc.upstream, CMB_UPSTREAM_VMM);
    assert_int_equal(b->alloc.n_options, a->alloc.n_options);
    assert_true(cmb_alloc_spec_owns_options(&b->alloc));
    for (size_t i = 0; i < a->alloc.n_options; i++) {
        assert_string_equal(b->alloc.options[i].key, a->alloc.options[i].key);
        assert_string_equal(b->alloc.options[i].value, a->alloc.options[i].value);
    }
    assert_int_equal(b->params.n, a->params.n);
    for (size_t i = 0; i < a->params.n; i++) {
        assert_ptr_equal(b->params.spec[i], a->params.spec[i]);
        assert_string_equal(b->params.value[i], a->params.value[i]);
    }
    assert_int_equal(b->mode, a->mode);
    assert_int_equal(b->seed, a->seed);
    assert_int_equal(b->device, a->device);
    assert_int_equal(b->capacity, a->capacity);
    assert_int_equal(b->repetitions, a->repetitions);
    assert_memory_equal(&b->fault, &a->fault, sizeof a->fault);
    assert_string_equal(b->record_trace, a->record_trace);
    assert_string_equal(b->timeline_dir, a->timeline_dir);
    assert_int_equal(b->timeline_points, a->timeline_points);
    assert_string_equal(b->name, a->name);
    char *again = cmb_wire_case_encode(b, err, sizeof err);
    assert_string_equal(again, record);
    free(again);
    free(record);
    free(a);
    free(b);
}

static void a_copy_owns_its_options(void **state)
{
    (void)state;
    cmb_case_spec *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    full_spec(a);
    cmb_case_spec_copy(b, a);
    assert_true(cmb_alloc_spec_owns_options(&b->alloc));
    memset(a, 0x5a, sizeof *a); /* the original gone: the copy still reads */
    assert_string_equal(b->alloc.options[b->alloc.n_options - 1].key, "max_split_size_mb");
    free(a);
    free(b);
}

static void malformed_records_are_refused(void **state)
{
    (void)state;
    char err[512], *bad;
    cmb_case_spec *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    full_spec(a);
    char *record = cmb_wire_case_encode(a, err, sizeof err);
    static const struct {
        const char *from, *to, *why;
    } edits[] = {
        {"seed\t7", "sead\t7", "malformed line"},
        {"seed\t7\n", "", "fields missing"},
        {"passes=3", "passes=-3", "passes=-3"},
        {"passes=3", "nosuch=3", "no parameter 'nosuch'"},
        {"@vmm\n", "@sim\n", "does not match"},
        {"mode\tgpu", "mode\tfast", "neither gpu nor sim"},
        {"fault\t3 4", "fault\tx 4", "fault"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        const char *at = strstr(record, edits[i].from);
        assert_non_null(at);
        bad = malloc(strlen(record) + 64);
        sprintf(bad, "%.*s%s%s", (int)(at - record), record, edits[i].to, at + strlen(edits[i].from));
        err[0] = '\0';
        assert_int_equal(cmb_wire_case_decode(bad, b, err, sizeof err), -1);
        if (!strstr(err, edits[i].why))
            fail_msg("edit %zu: '%s' lacks '%s'", i, err, edits[i].why);
        free(bad);
    }
    snprintf(a->record_trace, sizeof a->record_trace, "a\tb");
    assert_null(cmb_wire_case_encode(a, err, sizeof err));
    assert_non_null(strstr(err, "record_trace"));
    free(record);
    free(a);
    free(b);
}

static void a_run_record_round_trips(void **state)
{
    (void)state;
    int fd[2];
    cmb_bench_run *r = calloc(1, sizeof *r);
    cmb_wire_reader *rd = malloc(sizeof *rd);
    char buf[1 << 16];
    snprintf(r->name, sizeof r->name, "churn/bfc/n:1");
    r->repetition_index = 2;
    r->repetitions = 3;
    r->iterations = 1;
    r->real_accumulated_time = 0.1 + 0.2; /* not exact in decimal */
    r->error_occurred = 1;
    snprintf(r->error_message, sizeof r->error_message, "out of\tmemory");
    snprintf(r->counters[0].name, sizeof r->counters[0].name, "peak_reserved_bytes");
    r->counters[0].value = 1.0 / 3.0;
    r->n_counters = 1;
    assert_int_equal(pipe(fd), 0);
    assert_int_equal(cmb_wire_write_run(fd[1], r), 0);
    close(fd[1]);
    ssize_t n = read(fd[0], buf, sizeof buf);
    close(fd[0]);
    cmb_wire_reader_init(rd);
    for (ssize_t i = 0; i < n; i++) /* a byte at a time: records split across reads */
        assert_int_equal(cmb_wire_feed(rd, buf + i, 1), 0);
    assert_int_equal(rd->n, 1);
    assert_string_equal(rd->runs[0].name, r->name);
    assert_true(rd->runs[0].real_accumulated_time == r->real_accumulated_time);
    assert_true(rd->runs[0].counters[0].value == r->counters[0].value);
    assert_string_equal(rd->runs[0].error_message, "out of memory");
    cmb_wire_reader_free(rd);
    free(rd);
    free(r);
}

static void the_child_options_are_internal(void **state)
{
    (void)state;
    const char *internal[] = {CMB_ARG_CHILD, CMB_ARG_RESULT_FD, CMB_ARG_CASE, "--probe-env", "--probe-mem", "--probe-plugin", "--probe-real",
                              "--hold-memory", "--multi-gpu-rank"};
    for (size_t i = 0; i < sizeof internal / sizeof internal[0]; i++) {
        const cmb_cli_option *o = cmb_cli_find(internal[i]);
        assert_non_null(o);
        assert_true(o->flags & CMB_OPT_INTERNAL);
    }
    assert_non_null(cmb_cli_find(CMB_ARG_CASE)->metavar);
    assert_null(cmb_cli_find(CMB_ARG_CHILD)->metavar);
    /* and --help names none of them, but every user option */
    char text[8192] = "";
    FILE *f = fmemopen(text, sizeof text - 1, "w");
    cmb_cli_usage(f);
    fclose(f);
    const cmb_cli_option *o;
    for (size_t i = 0; (o = cmb_cli_option_at(i)); i++) {
        char head[64], flag[64];
        snprintf(head, sizeof head, "  %s ", o->name); /* "  --opt VALUE" or "  --opt   help" */
        snprintf(flag, sizeof flag, "  %s,", o->name); /* "  --quiet, -q" */
        int listed = strstr(text, head) || strstr(text, flag);
        if ((o->flags & CMB_OPT_INTERNAL) ? listed : !listed)
            fail_msg("--help and %s disagree", o->name);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_case_record_round_trips),  cmocka_unit_test(a_copy_owns_its_options),
        cmocka_unit_test(malformed_records_are_refused), cmocka_unit_test(a_run_record_round_trips),
        cmocka_unit_test(the_child_options_are_internal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
