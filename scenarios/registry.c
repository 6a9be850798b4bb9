/* registry.c - the scenarios, in the order runs and --list show them. */
#include <string.h>

#include "scenario.h"

extern const cmb_scenario cmb_scenario_churn;
extern const cmb_scenario cmb_scenario_replay;
extern const cmb_scenario cmb_scenario_stream_async;
extern const cmb_scenario cmb_scenario_shared_mem;
extern const cmb_scenario cmb_scenario_gemm_chunked;
extern const cmb_scenario cmb_scenario_batch_sweep;
extern const cmb_scenario cmb_scenario_leak_check;
extern const cmb_scenario cmb_scenario_pinned;
extern const cmb_scenario cmb_scenario_contention;
extern const cmb_scenario cmb_scenario_fastpath;
extern const cmb_scenario cmb_scenario_multi_gpu;
extern const cmb_scenario cmb_scenario_serving;
/* test-only scenarios, found by name alone (scenarios/planted.c) */
const cmb_scenario *_cmb_scenario_hidden(const char *name);

static const cmb_scenario *const scenarios[] = {
    &cmb_scenario_churn,
    &cmb_scenario_replay,
    &cmb_scenario_stream_async,
    &cmb_scenario_shared_mem,
    &cmb_scenario_gemm_chunked,
    &cmb_scenario_batch_sweep,
    &cmb_scenario_leak_check,
    &cmb_scenario_pinned,
    &cmb_scenario_contention,
    &cmb_scenario_fastpath,
    &cmb_scenario_multi_gpu,
    &cmb_scenario_serving,
};

size_t cmb_scenario_count(void)
{
    return sizeof scenarios / sizeof scenarios[0];
}

const cmb_scenario *cmb_scenario_at(size_t i)
{
    return i < cmb_scenario_count() ? scenarios[i] : NULL;
}

const cmb_scenario *cmb_scenario_find(const char *name)
{
    for (size_t i = 0; i < cmb_scenario_count(); i++)
        if (!strcmp(scenarios[i]->name, name))
            return scenarios[i];
    return _cmb_scenario_hidden(name);
}
