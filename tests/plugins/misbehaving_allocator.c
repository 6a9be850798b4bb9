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

#include "test_plugin.h"

typedef struct state {
    tp_base b;
    unsigned long instance, only_instance;
    void *last;      /* the latest block from the upstream, while live */
    size_t last_size;
    void *planted;   /* overlap: the block inside `last` */
    int overlapped;
} state;

static unsigned long instances_created;

static int instance_option(void *p, const cmb_option *o)
{
    state *s = p;
    if (strcmp(o->key, "instance"))
        return -1;
    s->only_instance = strtoul(o->value, NULL, 10);
    return 0;
}

static cmb_status create(const cmb_config *cfg, cmb_upstream *up, void **out)
{
    cmb_status st = tp_create(cfg, up, sizeof(state), 10, instance_option, out);
    if (st != CMB_OK)
        return st;
    state *s = *out;
    s->instance = ++instances_created;
    if (s->only_instance && s->only_instance != s->instance)
        strcpy(s->b.mode, "ok");
    return CMB_OK;
}

static void misbehave(state *s)
{
    const char *mode = s->b.mode;
    if (!strcmp(mode, "segv"))
        raise(SIGSEGV);
    if (!strcmp(mode, "abort"))
        abort();
    if (!strcmp(mode, "hang"))
        for (;;)
            pause();
    if (!strcmp(mode, "orphan") && fork() == 0) {
        setsid();
        sleep(30);
        _exit(0);
    }
}

static int overlap_due(const state *s)
{
    return tp_due(&s->b, "overlap") && !s->overlapped && s->last && s->last_size > 512;
}

static cmb_status allocate(void *p, size_t size, cmb_stream stream, void **ptr)
{
    state *s = p;
    cmb_status st = CMB_OK;
    if (++s->b.n == s->b.at)
        misbehave(s);
    if (overlap_due(s)) {
        *ptr = s->planted = (char *)s->last + 256;
        s->overlapped = 1;
    } else if ((st = cmb_up_alloc(s->b.up, size, stream, ptr)) == CMB_OK) {
        s->last = *ptr;
        s->last_size = size;
    }
    if (st == CMB_OK)
        tp_count_alloc(&s->b, size);
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
        st = cmb_up_free(s->b.up, ptr, size, stream);
    if (st == CMB_OK)
        tp_count_free(&s->b, size);
    return st;
}

TP_PLUGIN(CMB_ALLOCATOR_ABI_VERSION, "misbehaving", "test plug-in that crashes, aborts or hangs on purpose", tp_stats,
          NULL)
