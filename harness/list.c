/* list.c - cumembench --list: scenarios with their questions and
 * parameters, and allocators with what they need. */
#include "list.h"

#include "params.h"

#include <stdio.h>

#include "../allocators/options.h"
#include "../allocators/real.h"
#include "../allocators/registry.h"
#include "../scenarios/scenario.h"

static const char *type_name(cmb_param_type t)
{
    switch (t) {
    case CMB_P_INT: return "int";
    case CMB_P_SIZE: return "size";
    case CMB_P_REAL: return "real";
    case CMB_P_BOOL: return "bool";
    case CMB_P_CHOICE: return "choice";
    case CMB_P_TEXT: return "text";
    }
    return "?";
}

/* A preset with grids runs their union, each grid over the preset's values
 * of the parameters it does not set; the parameter lines alone would hide that. */
static void list_grids(FILE *f, const char *preset, const char *const *grids)
{
    if (!grids)
        return;
    fprintf(f, "    %s runs these grids, each over the %s values of the parameters it leaves out:\n", preset, preset);
    for (size_t g = 0; grids[g]; g++)
        fprintf(f, "      %s\n", grids[g][0] ? grids[g] : "(the parameters above)");
}

void cmb_list(FILE *f)
{
    fprintf(f, "scenarios:\n");
    for (size_t i = 0; i < cmb_scenario_count(); i++) {
        const cmb_scenario *s = cmb_scenario_at(i);
        fprintf(f, "\n  %s%s\n    %s\n", s->name, (s->flags & CMB_SCN_NEEDS_GPU) ? "  (GPU only)" : "",
                s->question);
        for (size_t k = 0; k < s->n_params; k++) {
            const cmb_param_spec *p = &s->params[k];
            char range[96];
            cmb_param_range(p, range, sizeof range);
            fprintf(f, "    --param %-14s %-6s quick=%s full=%s%s%s%s%s\n      %s\n", p->name, type_name(p->type),
                    p->quick, p->full, p->choices ? " one of " : "", p->choices ? p->choices : "", range[0] ? " " : "",
                    range, p->help);
        }
        list_grids(f, "quick", s->quick_grids);
        list_grids(f, "full", s->full_grids);
    }
    /* before "allocators": scripts read that section to its end (tests/test_resume.c) */
    cmb_real_list(f);
    fprintf(f, "\nallocators (NAME[:key=value...][@cuda|@vmm|@sim], external:/path/lib.so, or real:NAME above):\n");
    for (size_t i = 0; i < cmb_allocator_count(); i++) {
        const cmb_allocator_entry *e = cmb_allocator_at(i);
        const cmb_allocator_methods *m = e->methods;
        fprintf(f, "  %-20s %s%s\n", e->name, e->summary ? e->summary : m->summary,
                (m->flags & CMB_ALLOC_NEEDS_GPU) ? "  [GPU only]" : "");
        cmb_allocator_describe_options(e->name, f); /* indented: scripts read the lines above */
    }
}
