/* coverage.c - the online step planner of plan-online.patch (allocators/cmb_plan.c) run alone over
 * a trace: how many allocations it finds a period for and gives a planned offset, with every
 * layout it makes (period, blocks laid out, the layout's span against the most its blocks hold at
 * once, and the bytes live in the whole program then). No allocator, no pages: the planner's view,
 * with every request given one stream tag (the patch tags requests by their stream).
 * Build (repository root, patch applied): gcc -O2 -I. -o coverage
 *   results/sim/cmb-steady/plan-online/coverage.c allocators/cmb_plan.c common/cmb_hashmap.c
 *   common/cmb_units.c traces/trace_load.c traces/trace_reader.c
 * Run: ./coverage TRACE [PASSES]  (a pass replays the trace's events again; blocks left live stay).
 * A trace the suite would refuse, or PASSES not a whole number from 1, is one line and exit 2. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocators/cmb_plan.h"
#include "traces/trace.h"

int main(int argc, char **argv)
{
    char err[640], *end = NULL;
    cmb_trace_loaded t;
    long passes = argc > 2 ? strtol(argv[2], &end, 10) : 1;
    if (argc < 2 || argc > 3 || passes < 1 || (end && *end)) {
        fprintf(stderr, "coverage: usage: coverage TRACE [PASSES], PASSES a whole number from 1\n");
        return 2;
    }
    if (cmb_trace_load(&t, argv[1], err, sizeof err)) {
        fprintf(stderr, "coverage: %s\n", err);
        return 2;
    }
    cmb_plan *p = _cmb_plan_new(8192);
    uint64_t *idx = calloc(t.slots + 1, sizeof *idx), *bsz = calloc(t.slots + 1, sizeof *bsz);
    if (!p || !idx || !bsz) {
        fprintf(stderr, "coverage: out of host memory\n");
        return 2;
    }
    uint64_t live = 0, allocs = 0, plans = 0;
    for (long ps = 0; ps < passes; ps++)
        for (size_t e = 0; e < t.n; e++) {
            const cmb_trace_packed *ev = &t.ev[e];
            if (ev->op == CMB_TRACE_ALLOC) {
                uint64_t off, life, s = (ev->size + 511) / 512 * 512; /* cmb's rounding */
                idx[ev->slot] = _cmb_plan_alloc(p, s, 1, &off, &life);
                bsz[ev->slot] = s;
                live += s;
                allocs++;
            } else if (ev->op == CMB_TRACE_FREE) {
                _cmb_plan_freed(p, idx[ev->slot]);
                live -= bsz[ev->slot];
            } else {
                continue; /* a synchronization: not an event of the planner */
            }
            cmb_plan_stats st;
            _cmb_plan_stats(p, &st);
            if (st.plans != plans) {
                plans = st.plans;
                printf("  layout %llu at event %zu of pass %ld: period %llu, %llu laid out, span %.1f MB, "
                       "most held at once %.1f MB (span / that %.4f), live in the program %.1f MB\n",
                       (unsigned long long)plans, e, ps, (unsigned long long)st.period,
                       (unsigned long long)st.planned, st.extent / 1e6, st.peak / 1e6,
                       st.peak ? (double)st.extent / (double)st.peak : 0.0, live / 1e6);
            }
        }
    cmb_plan_stats st;
    _cmb_plan_stats(p, &st);
    printf("%s, %ld pass(es): %llu allocations, %llu given a planned offset (%.3f), layouts made %llu, "
           "sequence breaks %llu, found again %llu\n",
           argv[1], passes, (unsigned long long)allocs, (unsigned long long)st.served,
           allocs ? (double)st.served / (double)allocs : 0.0, (unsigned long long)st.plans,
           (unsigned long long)st.misses, (unsigned long long)st.resyncs);
    _cmb_plan_free(p);
    free(idx);
    free(bsz);
    cmb_trace_unload(&t);
    return 0;
}
