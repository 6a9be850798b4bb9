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

#include "test_plugin.h"

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

/* tag=: a declared option, taken and unused */
static int tag_option(void *s, const cmb_option *o)
{
    (void)s;
    return strcmp(o->key, "tag") ? -1 : 0;
}

static cmb_status create(const cmb_config *cfg, cmb_upstream *up, void **out)
{
#ifdef HOSTILE_CREATE_SEGV
    *(volatile int *)nowhere = (int)cfg->n_options;
#endif
    return tp_create(cfg, up, sizeof(tp_base), 0, tag_option, out);
}

static cmb_status allocate(void *p, size_t size, cmb_stream stream, void **ptr)
{
    cmb_status st = cmb_up_alloc(((tp_base *)p)->up, size, stream, ptr);
    if (st == CMB_OK)
        tp_count_alloc(p, size);
    return st;
}

static cmb_status deallocate(void *p, void *ptr, size_t size, cmb_stream stream)
{
    tp_count_free(p, size);
    return cmb_up_free(((tp_base *)p)->up, ptr, size, stream);
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

TP_PLUGIN(BUILT_FOR, "hostile-loader", "test plug-in that misbehaves while it is loaded", tp_stats, options)
