/* coverage.c - the online step planner of plan-online.patch (allocators/cmb_plan.c) run alone over
 * a trace: how many allocations it finds a period for and gives a planned offset, with every
 * layout it makes (period, blocks laid out, the layout's span against the most its blocks hold at
 * once, and the bytes live in the whole program then). No allocator, no pages: the planner's view.
 * Build (repository root, patch applied): gcc -O2 -I. -o coverage results/sim/cmb-steady/plan-online/coverage.c
 *   allocators/cmb_plan.c common/cmb_hashmap.c
 * Run: ./coverage TRACE [PASSES]  (a pass replays the trace's events again; blocks left live stay). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocators/cmb_plan.h"

int main(int argc, char **argv)
{
    FILE *f = argc > 1 ? fopen(argv[1], "r") : NULL;
    if (!f) {
        fprintf(stderr, "coverage: cannot read trace %s\n", argc > 1 ? argv[1] : "(none given)");
        return 2;
    }
    int passes = argc > 2 ? atoi(argv[2]) : 1;
    size_t cap = 1 << 20, n = 0;
    char line[256], *ops = malloc(cap);
    uint64_t *ids = malloc(cap * 8), *sz = malloc(cap * 8), maxid = 0;
    while (fgets(line, sizeof line, f)) {
        char op, s[64];
        unsigned long long id;
        if ((line[0] != 'a' && line[0] != 'f') || sscanf(line, "%c %llu %63s", &op, &id, s) != 3)
            continue;
        if (n == cap) {
            cap *= 2;
            ops = realloc(ops, cap);
            ids = realloc(ids, cap * 8);
            sz = realloc(sz, cap * 8);
        }
        ops[n] = op;
        ids[n] = id;
        sz[n] = op == 'a' ? (strtoull(s, 0, 10) + 511) / 512 * 512 : 0; /* cmb's rounding */
        maxid = id > maxid ? id : maxid;
        n++;
    }
    cmb_plan *p = _cmb_plan_new(8192);
    uint64_t *idx = calloc(maxid + 1, 8), *bsz = calloc(maxid + 1, 8), live = 0, allocs = 0, plans = 0;
    for (int ps = 0; ps < passes; ps++)
        for (size_t e = 0; e < n; e++) {
            if (ops[e] == 'a') {
                uint64_t off, life;
                idx[ids[e]] = _cmb_plan_alloc(p, sz[e], 1, &off, &life);
                bsz[ids[e]] = sz[e];
                live += sz[e];
                allocs++;
            } else {
                _cmb_plan_freed(p, idx[ids[e]]);
                live -= bsz[ids[e]];
            }
            cmb_plan_stats st;
            _cmb_plan_stats(p, &st);
            if (st.plans != plans) {
                plans = st.plans;
                printf("  layout %llu at event %zu of pass %d: period %llu, %llu laid out, span %.1f MB, "
                       "most held at once %.1f MB (span / that %.4f), live in the program %.1f MB\n",
                       (unsigned long long)plans, e, ps, (unsigned long long)st.period,
                       (unsigned long long)st.planned, st.extent / 1e6, st.peak / 1e6,
                       st.peak ? (double)st.extent / (double)st.peak : 0.0, live / 1e6);
            }
        }
    cmb_plan_stats st;
    _cmb_plan_stats(p, &st);
    printf("%s, %d pass(es): %llu allocations, %llu given a planned offset (%.3f), layouts made %llu, "
           "sequence breaks %llu, found again %llu\n",
           argv[1], passes, (unsigned long long)allocs, (unsigned long long)st.served,
           allocs ? (double)st.served / (double)allocs : 0.0, (unsigned long long)st.plans,
           (unsigned long long)st.misses, (unsigned long long)st.resyncs);
    _cmb_plan_free(p);
    return 0;
}
