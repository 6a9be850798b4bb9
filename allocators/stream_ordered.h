/* stream_ordered.h - per-stream free lists in stream order, written once.
 *
 * RMM keeps this logic in one base class,
 * rmm::mr::detail::stream_ordered_memory_resource
 * (include/rmm/mr/device/detail/stream_ordered_memory_resource.hpp, RMM
 * 24.02 - 25.x), and its pool_memory_resource and fixed_size_memory_resource
 * only fill in how a free list finds, splits, merges and grows blocks. The
 * same split here: this file owns the streams, their events and the order in
 * which lists are searched; a policy (alloc_rmm_pool.c, alloc_binning.c)
 * fills cmb_so_hooks; alloc_arena.c uses only the per-stream table.
 *
 * The rules (stream_ordered_memory_resource::get_block and
 * do_deallocate):
 *  - One free list per stream, created when the stream is first seen. The
 *    policy's list struct starts with a cmb_so_list.
 *  - deallocate on S: record S's event (one event per stream, re-recorded
 *    at every free; cmb_so_record_free), then the policy puts the block in
 *    S's list.
 *  - get_block(size, S) (cmb_so_get_block):
 *      1. a block of S's own list: no wait;
 *      2. for every other list, in the order the streams first appeared:
 *         a block of that list; when one is found, S waits for that list's
 *         event and the remainder stays in that list;
 *      3. for every other non-empty list in the same order: wait for its
 *         event, merge the whole list into S's, and try S's list again;
 *      4. expand: the policy takes new memory and serves the request from it.
 *    A wait is a host wait on the event (event_query until it completes),
 *    where RMM issues cudaStreamWaitEvent on the device: the upstream has no
 *    stream-wait call, and a completed event costs one query.
 *  - destroy: wait for every event, destroy it, then the policy frees what
 *    its lists still hold.
 *
 * Differences from RMM (docs/rmm.md): other lists are visited in the order
 * their streams appeared, where RMM's std::map orders them by event handle;
 * step 3 skips empty lists, where RMM also drops their (empty) map entries;
 * a stream's event is made at its first free, where RMM makes it when the
 * stream first allocates (no difference in which memory is reused).
 *
 * Costs: a stream lookup is O(1) when the stream is the last one seen, else
 * O(streams); steps 2 and 3 visit every other list once.
 */
#ifndef CMB_STREAM_ORDERED_H
#define CMB_STREAM_ORDERED_H

#include <stddef.h>
#include <stdint.h>

#include "cmb_upstream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The head of a policy's per-stream free list. */
typedef struct cmb_so_list {
    cmb_stream stream;
    cmb_event event; /* recorded at the last free on this stream; NULL before */
} cmb_so_list;

/* What a policy's free list does. `ctx` is the one given to cmb_so_init. */
typedef struct cmb_so_hooks {
    /* Bytes of the policy's list struct, which starts with a cmb_so_list;
     * the helper allocates it zeroed. */
    size_t list_size;
    /* After the zeroed allocation; may be NULL. */
    void (*list_init)(void *ctx, cmb_so_list *l);
    /* Frees the records the list still holds (not the memory they describe,
     * which the policy returns to its upstream); may be NULL. */
    void (*list_fini)(void *ctx, cmb_so_list *l);
    /* The hooks below are needed by cmb_so_get_block only. */
    int (*list_empty)(const cmb_so_list *l);
    /* A block of l with room for `size` bytes, still linked, or NULL. */
    void *(*find)(void *ctx, cmb_so_list *l, uint64_t size);
    /* Hands out `size` bytes of block b of l (found by find); the rest of b
     * stays in l. Returns the pointer handed out. */
    void *(*take)(void *ctx, cmb_so_list *l, void *b, uint64_t size);
    /* Moves every block of src into dst (coalescing where the list does). */
    void (*merge)(void *ctx, cmb_so_list *dst, cmb_so_list *src);
    /* Takes new memory for own and hands out `size` bytes of it;
     * CMB_ERR_OOM when the policy cannot grow. */
    cmb_status (*expand)(void *ctx, cmb_so_list *own, uint64_t size, void **out);
} cmb_so_hooks;

typedef struct cmb_stream_ordered {
    cmb_upstream *up;
    const cmb_so_hooks *hooks;
    void *ctx;
    cmb_so_list **lists; /* in the order their streams first appeared */
    size_t n, cap;
    size_t last; /* index of the list last looked up */
} cmb_stream_ordered;

void cmb_so_init(cmb_stream_ordered *so, cmb_upstream *up, const cmb_so_hooks *hooks, void *ctx);

/* Waits for and destroys every event, calls list_fini on every list, frees
 * the lists. The structure may be initialised again afterwards. */
void cmb_so_destroy(cmb_stream_ordered *so);

/* The list of stream s, created on first use; NULL when the host is out of
 * memory. */
cmb_so_list *_cmb_so_list_new(cmb_stream_ordered *so, cmb_stream s);
static inline cmb_so_list *cmb_so_list_of(cmb_stream_ordered *so, cmb_stream s)
{
    if (so->n && so->lists[so->last]->stream == s)
        return so->lists[so->last];
    for (size_t i = 0; i < so->n; i++) {
        if (so->lists[i]->stream == s) {
            so->last = i;
            return so->lists[i];
        }
    }
    return _cmb_so_list_new(so, s);
}

static inline size_t cmb_so_count(const cmb_stream_ordered *so)
{
    return so->n;
}

static inline cmb_so_list *cmb_so_at(const cmb_stream_ordered *so, size_t i)
{
    return so->lists[i];
}

/* The allocating stream may use blocks freed on `other` only after those
 * frees completed: a host wait for other's event. CMB_OK at once when it
 * has none; else the upstream's error. */
cmb_status cmb_so_wait_for(cmb_stream_ordered *so, cmb_so_list *other);

/* A free on l's stream: re-record its event (made at the first free). When
 * no event can be recorded the stream is synchronised and left without
 * one, so the free is complete and any stream may reuse the block. */
void cmb_so_record_free(cmb_stream_ordered *so, cmb_so_list *l);

/* Steps 2-4 of get_block (own list missed). */
cmb_status _cmb_so_get_block_slow(cmb_stream_ordered *so, cmb_so_list *own, uint64_t size, void **out);

/* get_block(size, own's stream): the four steps above. The policy's error
 * (CMB_ERR_OOM from expand) or the upstream's (from a wait). */
static inline cmb_status cmb_so_get_block(cmb_stream_ordered *so, cmb_so_list *own, uint64_t size, void **out)
{
    void *b = so->hooks->find(so->ctx, own, size);
    if (b) {
        *out = so->hooks->take(so->ctx, own, b, size);
        return CMB_OK;
    }
    return _cmb_so_get_block_slow(so, own, size, out);
}

#ifdef __cplusplus
}
#endif

#endif /* CMB_STREAM_ORDERED_H */
