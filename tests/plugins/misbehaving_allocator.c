/* misbehaving_allocator.c - a plug-in allocator that fails on purpose, to
 * test that one case's crash, abort or hang never costs another case its
 * results: option mode=segv|abort|hang|orphan|overlap|ok, applied to the Nth
 * allocation (option at=N, default 10); orphan leaves a process in a session
 * of its own that holds the case's output pipes for 30 s; overlap hands out,
 * from the Nth allocation on, one block inside the previous one while that
 * is still live (the harness's verifier must see it). Option instance=K
 * limits the misbehaviour to the Kth instance the process creates (a
 * scenario's trial instances come after the case's own). Otherwise it
 * passes requests to the upstream. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allocators/cmb_allocator.h"

typedef struct state {
    cmb_upstream *up;
    char mode[16];
    unsigned long at, n;
    unsigned long instance, only_instance;
    void *last;      /* the latest block from the upstream, while live */
    size_t last_size;
    void *planted;   /* overlap: the block inside `last` */
    int overlapped;
    cmb_alloc_stats st;
} state;

static unsigned long instances_created;

static cmb_status create(const cmb_config *cfg, cmb_upstream *up, void **out)
{
    state *s = calloc(1, sizeof *s);
    if (!s)
        return CMB_ERR_HOST_NOMEM;
    s->up = up;
    strcpy(s->mode, "ok");
    s->at = 10;
    for (size_t i = 0; i < cfg->n_options; i++) {
        if (!strcmp(cfg->options[i].key, "mode"))
            strncpy(s->mode, cfg->options[i].value, sizeof s->mode - 1);
        else if (!strcmp(cfg->options[i].key, "at"))
            s->at = strtoul(cfg->options[i].value, NULL, 10);
        else if (!strcmp(cfg->options[i].key, "instance"))
            s->only_instance = strtoul(cfg->options[i].value, NULL, 10);
        else {
            free(s);
            return CMB_ERR_INVALID;
        }
    }
    s->instance = ++instances_created;
    if (s->only_instance && s->only_instance != s->instance)
        strcpy(s->mode, "ok");
    *out = s;
    return CMB_OK;
}

static void misbehave(state *s)
{
    if (!strcmp(s->mode, "segv"))
        raise(SIGSEGV);
    if (!strcmp(s->mode, "abort"))
        abort();
    if (!strcmp(s->mode, "hang"))
        for (;;)
            pause();
    if (!strcmp(s->mode, "orphan") && fork() == 0) {
        setsid();
        sleep(30);
        _exit(0);
    }
}

static int overlap_due(const state *s)
{
    return !strcmp(s->mode, "overlap") && !s->overlapped && s->n >= s->at && s->last && s->last_size > 512;
}

static cmb_status allocate(void *p, size_t size, cmb_stream stream, void **ptr)
{
    state *s = p;
    cmb_status st = CMB_OK;
    if (++s->n == s->at)
        misbehave(s);
    if (overlap_due(s)) {
        *ptr = s->planted = (char *)s->last + 256;
        s->overlapped = 1;
    } else if ((st = cmb_up_alloc(s->up, size, stream, ptr)) == CMB_OK) {
        s->last = *ptr;
        s->last_size = size;
    }
    if (st == CMB_OK) {
        cmb_stat_increase(&s->st.requested, (int64_t)size);
        cmb_stat_increase(&s->st.blocks, 1);
    }
    return st;
}

static cmb_status deallocate(void *p, void *ptr, size_t size, cmb_stream stream)
{
    state *s = p;
    cmb_status st = CMB_OK;
    if (ptr == s->last)
        s->last = NULL;
    if (ptr == s->planted)
        s->planted = NULL; /* never the upstream's */
    else
        st = cmb_up_free(s->up, ptr, size, stream);
    if (st == CMB_OK) {
        cmb_stat_decrease(&s->st.requested, (int64_t)size);
        cmb_stat_decrease(&s->st.blocks, 1);
    }
    return st;
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

static const cmb_allocator_methods methods = {
    .abi_version = CMB_ALLOCATOR_ABI_VERSION,
    .name = "misbehaving",
    .summary = "test plug-in that crashes, aborts or hangs on purpose",
    .flags = CMB_ALLOC_USES_UPSTREAM,
    .create = create,
    .allocate = allocate,
    .deallocate = deallocate,
    .stats = stats,
    .destroy = destroy,
};

const cmb_allocator_methods *cmb_plugin_allocator(uint32_t abi_version)
{
    return abi_version == CMB_ALLOCATOR_ABI_VERSION ? &methods : NULL;
}
