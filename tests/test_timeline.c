/* test_timeline.c - the memory timeline: bounded sample count at an even
 * step, exact peaks and end point, the CSV it writes, file names; the
 * segments at moments and the upstream's walk they come from. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness/metered.h"
#include "allocators/upstream.h"
#include "harness/timeline.h"
#include "support/conformance.h"

typedef struct fixture {
    cmb_upstream *up;
    const cmb_allocator_methods *m;
    void *state;
    cmb_metered mt;
    cmb_timeline tl;
} fixture;

static void open_fixture_of(fixture *f, const char *allocator, size_t max_points)
{
    memset(f, 0, sizeof *f);
    cmb_test_open(allocator, NULL, 1ull << 30, NULL, &f->up, &f->m, &f->state);
    assert_int_equal(cmb_metered_init(&f->mt, f->m, f->state, f->up, 1024, 1), CMB_OK);
    assert_int_equal(cmb_timeline_init(&f->tl, max_points), 0);
    assert_int_equal(cmb_metered_add_observer(&f->mt, cmb_timeline_observe, &f->tl), 0);
}

static void open_fixture(fixture *f, size_t max_points)
{
    open_fixture_of(f, "cuda", max_points);
}

static void close_fixture(fixture *f)
{
    cmb_metered_free_all(&f->mt, NULL);
    cmb_metered_free(&f->mt);
    cmb_timeline_free(&f->tl);
    f->m->destroy(f->state);
    cmb_upstream_close(f->up);
}

/* A ramp up to `top` live blocks of `size`, then all freed: the peak of
 * requested bytes is at op `top`. */
static void ramp(fixture *f, int top, size_t size)
{
    void **p = calloc((size_t)top, sizeof *p);
    assert_non_null(p);
    for (int i = 0; i < top; i++)
        assert_int_equal(cmb_metered_alloc(&f->mt, size, NULL, &p[i]), CMB_OK);
    for (int i = 0; i < top; i++)
        assert_int_equal(cmb_metered_dealloc(&f->mt, p[i], NULL), CMB_OK);
    free(p);
}

static void samples_stay_bounded_at_an_even_step(void **state)
{
    (void)state;
    fixture f;
    open_fixture(&f, 32);
    for (int round = 0; round < 40; round++)
        ramp(&f, 250, 4096);
    assert_int_equal(f.tl.ops, 40 * 500);
    assert_true(f.tl.n >= 16 && f.tl.n <= 32);
    assert_true((f.tl.every & (f.tl.every - 1)) == 0); /* a power of two */
    for (size_t i = 0; i < f.tl.n; i++) {
        assert_int_equal(f.tl.samples[i].op % f.tl.every, 0);
        if (i)
            assert_int_equal(f.tl.samples[i].op - f.tl.samples[i - 1].op, f.tl.every);
    }
    close_fixture(&f);
}

static void peaks_and_end_are_exact(void **state)
{
    (void)state;
    fixture f;
    open_fixture(&f, 16);
    ramp(&f, 100, 1000);
    ramp(&f, 777, 1000); /* the peak: 777 blocks live after op 200 + 777 */
    ramp(&f, 300, 1000);
    void *keep;
    assert_int_equal(cmb_metered_alloc(&f.mt, 5000, NULL, &keep), CMB_OK);
    cmb_timeline_finish(&f.tl, &f.mt);

    cmb_timeline_point pts[32];
    size_t n = cmb_timeline_points(&f.tl, pts, 32);
    assert_true(n <= 16 + 3);
    int saw_req = 0, saw_res = 0;
    for (size_t i = 0; i < n; i++) {
        if (i)
            assert_true(pts[i].op >= pts[i - 1].op);
        if (pts[i].kind == CMB_TL_PEAK_REQUESTED) {
            saw_req = 1;
            assert_int_equal(pts[i].op, 200 + 777);
            assert_int_equal(pts[i].requested, 777 * 1000);
            assert_int_equal(pts[i].requested, f.mt.requested.peak);
        }
        if (pts[i].kind == CMB_TL_PEAK_RESERVED) {
            saw_res = 1;
            assert_int_equal(pts[i].reserved, f.up->stats.held_peak);
        }
    }
    assert_true(saw_req && saw_res);
    assert_int_equal(pts[n - 1].kind, CMB_TL_END);
    assert_int_equal(pts[n - 1].requested, 5000);
    assert_int_equal(pts[n - 1].op, f.tl.ops);
    close_fixture(&f);
}

static char *slurp(const char *path)
{
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    char *buf = calloc(1, 1 << 20);
    assert_non_null(buf);
    size_t got = fread(buf, 1, (1 << 20) - 1, fp);
    buf[got] = '\0';
    fclose(fp);
    return buf;
}

static void writes_a_self_describing_csv(void **state)
{
    (void)state;
    fixture f;
    char dir[] = "/tmp/cmb-timeline-XXXXXX", sub[64], name[256], path[512], err[256];
    assert_non_null(mkdtemp(dir));
    snprintf(sub, sizeof sub, "%s/timelines", dir);
    open_fixture(&f, 64);
    ramp(&f, 50, 300);
    cmb_timeline_finish(&f.tl, &f.mt);
    const char *case_name = "churn/cuda/n:10/max_size:1MiB";
    assert_int_equal(cmb_timeline_write(&f.tl, sub, case_name, 0, err, sizeof err), 0);
    cmb_timeline_file_name(case_name, name, sizeof name);
    assert_int_equal(strncmp(name, "churn_cuda_n_10_max_size_1MiB-", 30), 0);
    snprintf(path, sizeof path, "%s/%s.csv", sub, name);
    char *text = slurp(path);
    assert_non_null(strstr(text, "# case: churn/cuda/n:10/max_size:1MiB\n"));
    assert_non_null(strstr(text, "\nop,time_s,kind,requested_bytes,allocated_bytes,reserved_bytes,"
                                 "largest_free_bytes,device_used_bytes\n"));
    /* sim: no device reading, so the last field is empty, never 0 */
    assert_non_null(strstr(text, ",end,0,0,0,0,\n"));
    assert_null(strstr(text, ".tmp"));
    free(text);
    unlink(path);
    /* over an upstream, the segments beside it: 50 allocations of cuda's, the last moment empty */
    snprintf(path, sizeof path, "%s/%s.segments", sub, name);
    text = slurp(path);
    assert_non_null(strstr(text, "# cumembench segments\n# case: churn/cuda/n:10/max_size:1MiB\n"));
    assert_non_null(strstr(text, "\nm 50 peak_reserved 15000 "));
    assert_non_null(strstr(text, "\nm 100 end 0 0 0 0 0 0\n"));
    free(text);
    unlink(path);
    rmdir(sub);
    rmdir(dir);
    close_fixture(&f);
}

static void long_names_are_cut_with_a_hash(void **state)
{
    (void)state;
    char longname[600], a[256], b[256];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    cmb_timeline_file_name(longname, a, sizeof a);
    longname[500] = 'y';
    cmb_timeline_file_name(longname, b, sizeof b);
    assert_true(strlen(a) <= 200);
    assert_int_equal(strlen(a), strlen(b));
    assert_string_not_equal(a, b); /* the hash tells them apart */
}

/* Two replay traces whose names differ only in '/' against '_' wrote one
 * timeline file: a name with a character replaced ends in a hash of the
 * whole case name. */
static void replaced_characters_keep_names_apart(void **state)
{
    (void)state;
    char a[256], b[256], c[256];
    cmb_timeline_file_name("replay/cuda/trace:runs/a_b.trace", a, sizeof a);
    cmb_timeline_file_name("replay/cuda/trace:runs/a/b.trace", b, sizeof b);
    cmb_timeline_file_name("replay_cuda_trace_runs_a_b.trace", c, sizeof c);
    assert_string_not_equal(a, b);
    assert_string_not_equal(a, c);
    assert_string_not_equal(b, c);
    assert_string_equal(c, "replay_cuda_trace_runs_a_b.trace"); /* nothing replaced: the name as it is */
}

/* --- the segments at moments ---------------------------------------------------------------- */

/* Every moment's segments lie apart in address order and add up to the
 * upstream's held bytes then; the blocks inside them to the requested bytes. */
static void check_moment(const cmb_timeline_moment *m)
{
    uint64_t held = 0, covered = 0, in = 0;
    for (size_t i = 0; i < m->n_seg; i++) {
        const cmb_timeline_segment *g = &m->seg[i];
        if (i)
            assert_true(m->seg[i - 1].start + m->seg[i - 1].size <= g->start);
        assert_true(g->covered + g->largest_free <= g->size);
        held += g->size;
        covered += g->covered;
        in += g->blocks;
    }
    assert_int_equal(held, m->reserved);
    assert_int_equal(covered, m->requested);
    assert_int_equal(in + m->outside, m->blocks);
    assert_int_equal(m->outside, 0);
    assert_int_equal(m->n_kept, m->blocks < CMB_TIMELINE_MOMENT_BLOCKS ? m->blocks : CMB_TIMELINE_MOMENT_BLOCKS);
    for (size_t i = 0; i < m->n_kept; i++) { /* in place, apart, by segment and offset */
        const cmb_timeline_block *k = &m->kept[i];
        assert_true(k->seg < m->n_seg);
        assert_true(k->offset + k->size <= m->seg[k->seg].size);
        if (i)
            assert_true(k[-1].seg < k->seg || k[-1].offset + k[-1].size <= k->offset);
    }
}

static void segments_add_up_at_every_moment(void **state)
{
    (void)state;
    static const char *const policies[] = {"cuda", "torch-caching", "torch-expandable", "rmm-pool", "buddy"};
    for (size_t k = 0; k < sizeof policies / sizeof *policies; k++) {
        fixture f;
        open_fixture_of(&f, policies[k], 64);
        void *p[300];
        for (int round = 0; round < 6; round++) { /* growing, half freed, then all */
            for (int i = 0; i < 300; i++)
                assert_int_equal(cmb_metered_alloc(&f.mt, (size_t)(i % 7 + 1) * (1000 + 50000 * round), NULL, &p[i]),
                                 CMB_OK);
            for (int i = 0; i < 300; i += 2)
                assert_int_equal(cmb_metered_dealloc(&f.mt, p[i], NULL), CMB_OK);
            for (int i = 1; i < 300; i += 2)
                assert_int_equal(cmb_metered_dealloc(&f.mt, p[i], NULL), CMB_OK);
        }
        cmb_timeline_finish(&f.tl, &f.mt);
        assert_true(f.tl.mo.n >= 32 && f.tl.mo.n <= 64); /* bounded as the samples are */
        assert_true(f.tl.mo.have_peak && f.tl.mo.have_end && !f.tl.mo.failed);
        for (size_t i = 0; i < f.tl.mo.n; i++) {
            assert_int_equal(f.tl.mo.at[i].op % f.tl.mo.every, 0);
            check_moment(&f.tl.mo.at[i]);
        }
        check_moment(&f.tl.mo.peak);
        check_moment(&f.tl.mo.end);
        assert_true(f.tl.mo.peak.op <= f.tl.peak_reserved.op);
        close_fixture(&f);
    }
}

/* A case over thousands of segments: its file stays under the bound, every
 * k-th moment written at an even step, the peak and the end kept. */
static void a_segments_file_stays_under_its_bound(void **state)
{
    (void)state;
    fixture f;
    char dir[] = "/tmp/cmb-timeline-XXXXXX", sub[64], name[256], path[600], err[256];
    assert_non_null(mkdtemp(dir));
    snprintf(sub, sizeof sub, "%s/timelines", dir);
    open_fixture(&f, 512); /* cuda: a segment per live block */
    for (int round = 0; round < 4; round++)
        ramp(&f, 4000, 1000);
    cmb_timeline_finish(&f.tl, &f.mt);
    assert_true(f.tl.mo.n > 256);
    const char *case_name = "churn/cuda/n:16000";
    assert_int_equal(cmb_timeline_write(&f.tl, sub, case_name, 0, err, sizeof err), 0);
    cmb_timeline_file_name(case_name, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s.segments", sub, name);
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    char line[256];
    size_t bytes = 0, samples = 0, peaks = 0, ends = 0, written = 0, taken = 0;
    unsigned long long op, prev = 0, step = 0;
    char kind[32];
    while (fgets(line, sizeof line, fp)) {
        bytes += strlen(line);
        if (sscanf(line, "# %zu of %zu moments taken written", &written, &taken) == 2)
            continue;
        if (sscanf(line, "m %llu %31s", &op, kind) != 2)
            continue;
        peaks += op == f.tl.mo.peak.op; /* the peak's moment (labelled a sample where it lies before the peak) */
        ends += !strcmp(kind, "end");
        if (strcmp(kind, "sample") || op == f.tl.mo.peak.op)
            continue;
        if (samples++ > 1 && op - prev != step)
            fail_msg("moments at an uneven step: %llu after %llu (step %llu)", op, prev, step);
        step = samples > 1 ? op - prev : 0;
        prev = op;
    }
    fclose(fp);
    assert_true(bytes <= CMB_TIMELINE_SEGMENTS_FILE_MAX);
    assert_true(bytes > CMB_TIMELINE_SEGMENTS_FILE_MAX / 4); /* thinned, not emptied */
    assert_int_equal(peaks, 1);
    assert_int_equal(ends, 1);
    assert_int_equal(written, samples); /* the samples that could be left out (the peak's moment is not) */
    assert_true(taken <= f.tl.mo.n && taken + 2 >= f.tl.mo.n);
    assert_true(samples >= 4 && samples < taken);
    assert_int_equal(step % f.tl.mo.every, 0);
    assert_true(((step / f.tl.mo.every) & (step / f.tl.mo.every - 1)) == 0); /* every k-th, k a power of two */
    unlink(path);
    snprintf(path, sizeof path, "%s/%s.csv", sub, name);
    unlink(path);
    rmdir(sub);
    rmdir(dir);
    close_fixture(&f);
}

/* The upstream's walk: alloc() results and runs of mapped pages inside a
 * reservation, in address order, adding up to the held bytes. */
static void upstream_segments_are_ranges_and_mapped_runs(void **state)
{
    (void)state;
    cmb_upstream_config cfg;
    cmb_upstream *u;
    char err[128];
    cmb_upstream_config_default(&cfg);
    assert_int_equal(cmb_upstream_open(&cfg, &u, err, sizeof err), CMB_OK);
    size_t g = u->granularity;
    void *va, *a, *b;
    assert_int_equal(cmb_up_va_reserve(u, 8 * g, &va), CMB_OK);
    assert_int_equal(cmb_up_map(u, va, 2 * g), CMB_OK);                     /* pages 0-1 */
    assert_int_equal(cmb_up_map(u, (char *)va + 2 * g, g), CMB_OK);         /* 2: one run with 0-1 */
    assert_int_equal(cmb_up_map(u, (char *)va + 5 * g, 3 * g), CMB_OK);     /* 5-7, to the end */
    assert_int_equal(cmb_up_alloc(u, 4096, NULL, &a), CMB_OK);
    assert_int_equal(cmb_up_alloc(u, 3 * g, NULL, &b), CMB_OK);
    cmb_upstream_segment seg[8];
    assert_int_equal(cmb_upstream_segments(u, seg, 1), 4); /* the count, whatever fits */
    size_t n = cmb_upstream_segments(u, seg, 8);
    assert_int_equal(n, 4);
    uint64_t held = 0;
    int mapped = 0;
    for (size_t i = 0; i < n; i++) {
        if (i)
            assert_true(seg[i - 1].start + seg[i - 1].size <= seg[i].start);
        held += seg[i].size;
        if (seg[i].reserved_at) {
            assert_int_equal(seg[i].reserved_at, (uintptr_t)va);
            assert_true(seg[i].start == (uintptr_t)va ? seg[i].size == 3 * g
                                                      : seg[i].start == (uintptr_t)va + 5 * g && seg[i].size == 3 * g);
            mapped++;
        } else {
            assert_true((seg[i].start == (uintptr_t)a && seg[i].size == 4096) ||
                        (seg[i].start == (uintptr_t)b && seg[i].size == 3 * g));
        }
    }
    assert_int_equal(mapped, 2);
    assert_int_equal(held, (uint64_t)u->stats.held_current);
    assert_int_equal(cmb_up_unmap(u, va, 2 * g), CMB_OK); /* page 2 stays: a run of its own */
    n = cmb_upstream_segments(u, seg, 8);
    assert_int_equal(n, 4);
    /* whole bytes of the page map: pages 8-23 and 30-43 of 44 */
    void *big;
    assert_int_equal(cmb_up_va_reserve(u, 44 * g, &big), CMB_OK);
    assert_int_equal(cmb_up_map(u, (char *)big + 8 * g, 16 * g), CMB_OK);
    assert_int_equal(cmb_up_map(u, (char *)big + 30 * g, 14 * g), CMB_OK);
    n = cmb_upstream_segments(u, seg, 8);
    assert_int_equal(n, 6);
    held = 0;
    int found = 0;
    for (size_t i = 0; i < n; i++) {
        held += seg[i].size;
        if (seg[i].reserved_at == (uintptr_t)big)
            found += (seg[i].start == (uintptr_t)big + 8 * g && seg[i].size == 16 * g) ||
                     (seg[i].start == (uintptr_t)big + 30 * g && seg[i].size == 14 * g);
    }
    assert_int_equal(found, 2);
    assert_int_equal(held, (uint64_t)u->stats.held_current);
    cmb_upstream_close(u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(samples_stay_bounded_at_an_even_step),
        cmocka_unit_test(peaks_and_end_are_exact),
        cmocka_unit_test(writes_a_self_describing_csv),
        cmocka_unit_test(long_names_are_cut_with_a_hash),
        cmocka_unit_test(replaced_characters_keep_names_apart),
        cmocka_unit_test(segments_add_up_at_every_moment),
        cmocka_unit_test(a_segments_file_stays_under_its_bound),
        cmocka_unit_test(upstream_segments_are_ranges_and_mapped_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
