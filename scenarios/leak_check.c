/* leak_check.c - the error path that forgets to free, repeated.
 *
 * Question: my program hits an error (here: an allocation that fails) and
 * returns early; does memory leak, how much, and does the allocator give it
 * back when it is torn down?
 *
 * Each iteration does what the classic example does: allocate an input
 * buffer of `size` bytes, (GPU) fill it with a kernel, then allocate an
 * output buffer of the same size, fill it and free both. Every
 * `fail_every`-th iteration fails after the input was allocated:
 *   failure=error - the work reports an error (as user code raising an
 *                   exception would) before the output is allocated;
 *   failure=oom   - the output request is impossibly large (the case's
 *                   capacity plus `size`) and the allocator reports out of
 *                   memory: this also exercises each allocator's
 *                   out-of-memory path (free-cache-and-retry where it has
 *                   one), which costs some allocators seconds per failure.
 * The error path then returns:
 *   variant=leak  - without freeing the input (the bug);
 *   variant=clean - after freeing it (goto-style cleanup).
 * The leaking variant keeps its blocks to the end (cmb_case_keep_live_blocks):
 * the harness reports live_at_end_bytes (what the program never freed,
 * expected_leak_bytes exactly) and leaked_bytes (what is still held from
 * the upstream after the allocator was destroyed: 0 for a pool that frees
 * everything in its destructor, the leaked blocks for plain cudaMalloc).
 * The clean variant shows 0 for both. The failing requests also exercise
 * each allocator's out-of-memory path (free-cache-and-retry where it has one).
 * Sim mode runs the same traffic; only the fill kernels are skipped.
 */
#include <stdio.h>

#include "../kernels/cmb_kernels.h"
#include "scenario.h"
#include "scn_util.h"

typedef struct leak_tally {
    uint64_t iterations, failures, leaked_blocks, leaked_bytes;
} leak_tally;

static cmb_status touch(cmb_case *c, void *p, size_t size)
{
    if (!_cmb_gpu(c))
        return CMB_OK;
    return _cmb_cuda(c, cmb_kernel_fill_u32(p, size, 0xfeedu, cmb_case_stream(c, 0)), "fill kernel");
}

/* One iteration; *leaked is set when the error path dropped the input. */
static cmb_status one_iteration(cmb_case *c, uint64_t i, int leak, leak_tally *t)
{
    uint64_t size = cmb_param_u64(c, "size");
    int fail = (i + 1) % cmb_param_u64(c, "fail_every") == 0;
    cmb_stream s = cmb_case_stream(c, 0);
    void *in, *out;

    cmb_status st = cmb_alloc(c, size, s, &in);
    if (st != CMB_OK)
        return cmb_case_fail(c, st, "input allocation of %llu bytes failed", (unsigned long long)size);
    st = touch(c, in, size);
    if (st != CMB_OK)
        return st;
    int oom = cmb_param_str(c, "failure")[0] == 'o', failed = fail && !oom; /* the work failed */
    uint64_t out_size = fail && oom ? cmb_case_capacity(c) + size : size;
    if (!failed) {
        st = cmb_alloc(c, out_size, s, &out);
        failed = fail && st == CMB_ERR_OOM;
        if (failed && !t->failures && _cmb_explain_wanted()) /* the first error path, explained */
            _cmb_explain_request(c, out_size, 0, s);
    }
    if (failed) {
        t->failures++;
        if (leak) { /* the bug: return without freeing `in` */
            t->leaked_blocks++;
            t->leaked_bytes += size;
            return CMB_OK;
        }
        goto out_free_in;
    }
    if (st != CMB_OK)
        return cmb_case_fail(c, st, "output allocation of %llu bytes %s", (unsigned long long)out_size,
                             fail ? "did not fail with out of memory" : "failed");
    st = touch(c, out, size);
    if (st == CMB_OK)
        st = cmb_free(c, out, s);
    if (st != CMB_OK)
        return cmb_case_fail(c, st, "output free failed");
out_free_in:
    st = cmb_free(c, in, s);
    return st == CMB_OK ? CMB_OK : cmb_case_fail(c, st, "input free failed");
}

static cmb_status leak_run(cmb_case *c)
{
    leak_tally t = {0};
    int leak = cmb_param_str(c, "variant")[0] == 'l';
    uint64_t n = cmb_param_u64(c, "iterations");
    cmb_status st = CMB_OK;

    if (!_cmb_gpu(c))
        cmb_case_note(c, "fill kernels skipped in sim mode");
    double t0 = cmb_case_clock(c);
    for (uint64_t i = 0; i < n && st == CMB_OK; i++, t.iterations++)
        st = one_iteration(c, i, leak, &t);
    if (st == CMB_OK)
        st = cmb_case_sync(c);
    cmb_case_set_time(c, cmb_case_clock(c) - t0);
    if (leak)
        cmb_case_keep_live_blocks(c);
    cmb_case_counter(c, "iterations_run", (double)t.iterations); /* not "iterations": a key of every JSON entry */
    cmb_case_counter(c, "error_paths", (double)t.failures);
    cmb_case_counter(c, "expected_leak_bytes", (double)t.leaked_bytes);
    cmb_case_counter(c, "expected_leak_blocks", (double)t.leaked_blocks);
    return st;
}

static int leak_check(const cmb_case *c, char *reason, size_t len)
{
    uint64_t size = cmb_param_u64(c, "size"), n = cmb_param_u64(c, "iterations");
    uint64_t every = cmb_param_u64(c, "fail_every");
    uint64_t leaked = n / every * size;
    if (leaked + 2 * size > cmb_case_capacity(c)) {
        snprintf(reason, len, "leak-check: %llu leaked blocks of %llu MiB do not fit the device",
                 (unsigned long long)(n / every), (unsigned long long)(size >> 20));
        return 1;
    }
    return 0;
}

static const cmb_param_spec leak_params[] = {
    {"variant", CMB_P_CHOICE, "leak,clean", "leak,clean", 0, 0, "leak|clean",
     "leak: the error path returns without freeing; clean: it frees first"},
    {"iterations", CMB_P_INT, "200", "2000", 1, 1e7, NULL, "times the allocate-fail-return sequence runs"},
    {"fail_every", CMB_P_INT, "4", "4", 1, 1e9, NULL, "every Nth iteration takes the error path"},
    /* oom is not in a preset: an allocator that grows page by page (torch-expandable over vmm) maps
     * the whole device before an impossible request fails */
    {"failure", CMB_P_CHOICE, "error", "error", 0, 0, "error|oom",
     "error: the work fails; oom: an impossibly large allocation fails"},
    {"size", CMB_P_SIZE, "4MiB", "64MiB", 512, 1099511627776.0, NULL, "bytes of each buffer"},
};

/* The leaking variant leaks on purpose: what was left live, and what the
 * allocator kept after it was destroyed. */
static const cmb_headline leak_headline = {
    "measured", "leaked_bytes", "-", NULL,
    {"left live {live_at_end_bytes} (expected {expected_leak_bytes})", "after destroy {leaked_bytes}",
     "{error_paths} error paths", NULL},
};

const cmb_scenario cmb_scenario_leak_check = {
    .name = "leak-check",
    .question = "When an error path returns without freeing, how much leaks, and does the allocator give it back "
                "when it is destroyed?",
    .params = leak_params,
    .n_params = sizeof leak_params / sizeof leak_params[0],
    .flags = CMB_SCN_NO_PROBE,
    .check = leak_check,
    .run = leak_run,
    .headline = &leak_headline,
};
