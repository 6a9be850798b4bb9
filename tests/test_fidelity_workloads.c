/* test_fidelity_workloads.c - the third fidelity check, on traffic the
 * emulations were not written against: an LLM decode loop with a growing KV
 * cache and a ResNet-50 training sweep, recorded with PyTorch 2.11 on an
 * NVIDIA H100 (scripts/record_torch_workload.py; PyTorch's own peaks in
 * results/nvidia-h100/torch-workloads/), replayed in sim mode on a device
 * of the H100's size. Expandable segments reproduce PyTorch's reserved
 * peak exactly on both; the caching allocator does on the decode loop and
 * lands within 1% on the convnet (cuDNN's workspaces are freed and
 * reallocated in an order the snapshot's free_requested events only
 * approximate; docs/torch.md). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/run.h"

typedef struct workload {
    const char *trace;       /* traces/samples/...                       */
    const char *allocator;
    const char *pytorch_json; /* results/nvidia-h100/torch-workloads/... */
    double tolerance;        /* relative, on the reserved peak            */
} workload;

static const workload workloads[] = {
    {"torch_llm_decode.trace", "torch-caching", "llm-decode.json", 0},
    {"torch_llm_decode.trace", "torch-expandable", "llm-decode-expandable.json", 0},
    {"torch_convnet.trace", "torch-caching", "convnet.json", 0.01},
    {"torch_convnet.trace", "torch-expandable", "convnet-expandable.json", 0},
};

#define H100_BYTES "85017493504"

static double number_of(const char *cmd)
{
    char out[256];
    if (cmb_test_sh(cmd, out, sizeof out) != 0 || !out[0])
        fail_msg("no value from: %s", cmd);
    return strtod(out, NULL);
}

/* A metric of one allocator in a run's results.csv, read by column name. */
static double metric_of(const char *dir, const char *allocator, const char *metric)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "python3 -c \"import csv,sys; r=[x['value'] for x in csv.DictReader(open('%s/results.csv')) "
             "if x['allocator']=='%s' and x['metric']=='%s']; print(r[0] if r else '')\"",
             dir, allocator, metric);
    return number_of(cmd);
}

static void workload_peaks(void **state)
{
    (void)state;
    char args[4096], out[65536], cmd[2048], dir[1024], json[1024];
    const char *src = cmb_test_src(), *tmp = cmb_test_tmpdir();
    for (size_t i = 0; i < sizeof workloads / sizeof workloads[0]; i++) {
        const workload *w = &workloads[i];
        snprintf(dir, sizeof dir, "%s/r%zu", tmp, i);
        snprintf(args, sizeof args,
                 "--mode sim --scenario replay --capacity " H100_BYTES " --repetitions 1 --quiet --timeline off "
                 "--param trace=%s/traces/samples/%s --param find_min_capacity=false --allocator %s --out %s",
                 src, w->trace, w->allocator, dir);
        if (cmb_test_run(args, out, sizeof out) != 0)
            fail_msg("replay failed: %s", out);
        snprintf(json, sizeof json, "%s/results/nvidia-h100/torch-workloads/%s", src, w->pytorch_json);
        snprintf(cmd, sizeof cmd, "python3 -c \"import json; print(json.load(open('%s'))['reserved_bytes.all.peak'])\"",
                 json);
        double want = number_of(cmd);
        snprintf(cmd, sizeof cmd, "python3 -c \"import json; print(json.load(open('%s'))['requested_bytes.all.peak'])\"",
                 json);
        double want_requested = number_of(cmd);
        double got = metric_of(dir, w->allocator, "peak_reserved_bytes");
        double got_requested = metric_of(dir, w->allocator, "peak_requested_bytes");
        double rel = fabs(got - want) / want;
        print_message("%-24s %-18s PyTorch %.0f, replay %.0f (%+.3f%%)\n", w->trace, w->allocator, want, got,
                      100.0 * (got - want) / want);
        /* the trace carries PyTorch's own requests: the requested peak is exact */
        assert_true(got_requested == want_requested);
        if (rel > w->tolerance)
            fail_msg("%s under %s: reserved peak %.0f, PyTorch's %.0f: off by %.4f%% (allowed %.2f%%)", w->trace,
                     w->allocator, got, want, 100 * rel, 100 * w->tolerance);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(workload_peaks)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
