/* hostile_loader.c - plug-ins that misbehave before any case runs: while
 * they are loaded, asked for their table or created. Built once per
 * behaviour (tests/CMakeLists.txt), chosen with one macro:
 *   HOSTILE_CTOR_SEGV    a constructor that dereferences NULL;
 *   HOSTILE_CTOR_EXIT    a constructor that calls _exit(0);
 *   HOSTILE_CTOR_BLOCK   a constructor that blocks forever (SIGINT, SIGTERM ignored);
 *   HOSTILE_ABI_FUTURE   a table only for an allocator ABI version not yet made;
 *   HOSTILE_CREATE_SEGV  create() dereferences NULL;
 *   none                 a well-behaved allocator whose constructor appends
 *                        its process id to the file $CMB_PLUGIN_WITNESS:
 *                        which processes ran its code.
 * The allocator itself passes every request to its upstream. */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allocators/cmb_allocator.h"

/* An address the compiler cannot prove is NULL (a plain NULL store is
 * undefined behaviour it may drop). */
static volatile uintptr_t nowhere;

__attribute__((constructor)) static void on_load(void)
{
#if defined(HOSTILE_CTOR_SEGV)
    *(volatile int *)nowhere = 1;
#elif defined(HOSTILE_CTOR_EXIT)
    _exit(0);
#elif defined(HOSTILE_CTOR_BLOCK)
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    for (;;)
        pause();
#else
    const char *w = getenv("CMB_PLUGIN_WITNESS");
    if (w && *w) {
        char line[32];
        int fd = open(w, O_WRONLY | O_CREAT | O_APPEND, 0644);
        int n = snprintf(line, sizeof line, "%ld\n", (long)getpid());
        if (fd >= 0 && write(fd, line, (size_t)n) != n)
            n = 0;
        if (fd >= 0)
            close(fd);
    }
#endif
}

typedef struct state {
    cmb_upstream *up;
    cmb_alloc_stats st;
} state;

static cmb_status create(const cmb_config *cfg, cmb_upstream *up, void **out)
{
    (void)cfg;
#ifdef HOSTILE_CREATE_SEGV
    *(volatile int *)nowhere = (int)cfg->n_options;
#endif
    state *s = calloc(1, sizeof *s);
    if (!s)
        return CMB_ERR_HOST_NOMEM;
    s->up = up;
    *out = s;
    return CMB_OK;
}

static cmb_status allocate(void *p, size_t size, cmb_stream stream, void **ptr)
{
    state *s = p;
    cmb_status st = cmb_up_alloc(s->up, size, stream, ptr);
    if (st == CMB_OK) {
        cmb_stat_increase(&s->st.requested, (int64_t)size);
        cmb_stat_increase(&s->st.blocks, 1);
    }
    return st;
}

static cmb_status deallocate(void *p, void *ptr, size_t size, cmb_stream stream)
{
    state *s = p;
    cmb_stat_decrease(&s->st.requested, (int64_t)size);
    cmb_stat_decrease(&s->st.blocks, 1);
    return cmb_up_free(s->up, ptr, size, stream);
}

static cmb_status stats(void *p, cmb_alloc_stats *out)
{
    state *s = p;
    *out = s->st;
    out->valid = CMB_STAT_REQUESTED | CMB_STAT_BLOCKS;
    return CMB_OK;
}

static cmb_status destroy(void *p)
{
    free(p);
    return CMB_OK;
}

static const cmb_option_decl options[] = {
    CMB_OPTION("tag", CMB_OPT_STRING, "none", NULL, NULL, NULL, "a label,\tunused (tab and\nnewline on purpose)"),
    CMB_OPTION_END,
};

#ifdef HOSTILE_ABI_FUTURE
#define BUILT_FOR (CMB_ALLOCATOR_ABI_VERSION + 1u)
#else
#define BUILT_FOR CMB_ALLOCATOR_ABI_VERSION
#endif

static const cmb_allocator_methods methods = {
    .abi_version = BUILT_FOR,
    .name = "hostile-loader",
    .summary = "test plug-in that misbehaves while it is loaded",
    .flags = CMB_ALLOC_USES_UPSTREAM,
    .create = create,
    .allocate = allocate,
    .deallocate = deallocate,
    .stats = stats,
    .destroy = destroy,
    .options = options,
};

const cmb_allocator_methods *cmb_plugin_allocator(uint32_t abi_version)
{
    return abi_version == BUILT_FOR ? &methods : NULL;
}
