/* upstream_sim.c - a deterministic simulated device.
 *
 * Model: a device of `sim_capacity` bytes. alloc() consumes its size rounded
 * up to `sim_alignment` and never fragments physically, because the CUDA
 * driver remaps pages behind cudaMalloc (measured on an H200: after a
 * checkerboard free of 63 GiB of 1-64 MiB blocks the largest new cudaMalloc
 * equalled all reported free memory; see DESIGN.md). map() consumes whole
 * pages of `sim_granularity`. Addresses come from a bump pointer in a 64-bit
 * space and are never reused, so a stale pointer can never alias a new block;
 * large allocations are aligned to the granularity as cudaMalloc's are.
 * Nothing is behind the addresses: they must never be dereferenced.
 *
 * Several simulated devices (the multi-gpu scenario): each device is an
 * upstream of its own; streams made by cmb_sim_stream belong to one device,
 * and the process has a current device (cmb_sim_set_device). Events follow
 * CUDA's rule: an event belongs to the device current when it is made, and
 * recording it on a stream of another device fails (CUDA C++ Programming
 * Guide, Multi-Device System, "Stream and Event Behavior"). Untagged
 * streams and the default current device (-1) are never refused.
 */
#include <stdio.h>
#include <stdlib.h>

#include "../common/cmb_size.h"
#include "upstream.h"

typedef struct sim_state {
    uint64_t capacity;
    uint64_t alignment;
    uint64_t granularity;
    uint64_t used;       /* bytes consumed after rounding */
    uint64_t used_peak;
    uintptr_t next_va;   /* bump pointer */
} sim_state;

#define SIM_VA_BASE ((uintptr_t)1 << 44)

static int sim_current_device = -1;

void cmb_sim_set_device(int device)
{
    sim_current_device = device;
}

int cmb_sim_stream_device(cmb_stream s)
{
    uintptr_t v = (uintptr_t)s;
    return (v & CMB_SIM_STREAM_TAG) ? (int)((v >> 16) & 0xff) : -1;
}

/* An event handle carries its device (bits 8..15, plus one) for rerecord. */
static int event_device(cmb_event ev)
{
    return (int)(((uintptr_t)ev >> 8) & 0xff) - 1;
}

static int devices_differ(int a, int b)
{
    return a >= 0 && b >= 0 && a != b;
}

static uint64_t round_up(uint64_t x, uint64_t a)
{
    return cmb_size_round_up_sat(x, a); /* saturates: a huge x never wraps to a small one */
}

static cmb_status sim_open(const cmb_upstream_config *cfg, void **state, size_t *granularity,
                           size_t *alignment, char *err, size_t errlen)
{
    uint64_t a = cfg->sim_alignment, g = cfg->sim_granularity;
    if (!cfg->sim_capacity || !a || (a & (a - 1)) || !g || (g & (g - 1)) || a < 256 || g < a) {
        snprintf(err, errlen,
                 "sim upstream: capacity must be > 0, alignment a power of two >= 256 and "
                 "granularity a power of two >= alignment");
        return CMB_ERR_INVALID;
    }
    sim_state *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "host out of memory");
        return CMB_ERR_HOST_NOMEM;
    }
    s->capacity = cfg->sim_capacity;
    s->alignment = a;
    s->granularity = g;
    s->next_va = SIM_VA_BASE;
    *state = s;
    *granularity = (size_t)g;
    *alignment = (size_t)a;
    return CMB_OK;
}

static void sim_close(void *state)
{
    free(state);
}

static cmb_status consume(sim_state *s, uint64_t bytes)
{
    if (bytes > s->capacity - s->used)
        return CMB_ERR_OOM;
    s->used += bytes;
    if (s->used > s->used_peak)
        s->used_peak = s->used;
    return CMB_OK;
}

static void *take_va(sim_state *s, uint64_t size, uint64_t align)
{
    uintptr_t va = (uintptr_t)round_up(s->next_va, align);
    s->next_va = va + (uintptr_t)round_up(size, s->alignment);
    return (void *)va;
}

static cmb_status sim_alloc(void *state, size_t size, cmb_stream stream, void **ptr)
{
    sim_state *s = state;
    (void)stream;
    uint64_t need = round_up(size, s->alignment);
    cmb_status st = consume(s, need);
    if (st != CMB_OK)
        return st;
    *ptr = take_va(s, size, size >= s->granularity ? s->granularity : s->alignment);
    return CMB_OK;
}

static cmb_status sim_free(void *state, void *ptr, size_t size, cmb_stream stream)
{
    sim_state *s = state;
    (void)ptr;
    (void)stream;
    s->used -= round_up(size, s->alignment);
    return CMB_OK;
}

static cmb_status sim_va_reserve(void *state, size_t size, void **va)
{
    sim_state *s = state;
    *va = take_va(s, size, s->granularity);
    /* leave a guard page so two reservations are never adjacent */
    s->next_va += s->granularity;
    return CMB_OK;
}

static cmb_status sim_va_release(void *state, void *va, size_t size)
{
    (void)state;
    (void)va;
    (void)size;
    return CMB_OK;
}

static cmb_status sim_map(void *state, void *va, size_t size)
{
    (void)va;
    return consume(state, size);
}

static cmb_status sim_unmap(void *state, void *va, size_t size)
{
    sim_state *s = state;
    (void)va;
    s->used -= size;
    return CMB_OK;
}

/* Moving a handle keeps its memory consumed; dropping one gives it back. */
static cmb_status sim_park(void *state, void *va, size_t size)
{
    (void)state, (void)va, (void)size;
    return CMB_OK;
}

/* Sim work is done as soon as it is issued: nothing left to wait for. */
static cmb_status sim_park_after(void *state, void *va, size_t size, cmb_stream stream)
{
    (void)stream;
    return sim_park(state, va, size);
}

static cmb_status sim_unpark(void *state, void *va, size_t size)
{
    (void)state, (void)va, (void)size;
    return CMB_OK;
}

static cmb_status sim_drop_parked(void *state, size_t size)
{
    ((sim_state *)state)->used -= size;
    return CMB_OK;
}

/* Sim work completes as soon as it is issued, so events are always done. */
static cmb_status sim_event_record(void *state, cmb_stream stream, cmb_event *ev)
{
    (void)state;
    if (devices_differ(sim_current_device, cmb_sim_stream_device(stream)))
        return CMB_ERR_CUDA; /* cudaErrorInvalidResourceHandle on a GPU */
    *ev = (cmb_event)(uintptr_t)(1 | (uintptr_t)(sim_current_device + 1) << 8);
    return CMB_OK;
}

static cmb_status sim_event_rerecord(void *state, cmb_stream stream, cmb_event ev)
{
    (void)state;
    if (devices_differ(event_device(ev), cmb_sim_stream_device(stream)))
        return CMB_ERR_CUDA;
    return CMB_OK;
}

static cmb_status sim_event_query(void *state, cmb_event ev)
{
    (void)state;
    (void)ev;
    return CMB_OK;
}

static cmb_status sim_event_destroy(void *state, cmb_event ev)
{
    (void)state;
    (void)ev;
    return CMB_OK;
}

static cmb_status sim_stream_sync(void *state, cmb_stream stream)
{
    (void)state;
    (void)stream;
    return CMB_OK;
}

static cmb_status sim_mem_info(void *state, size_t *free_bytes, size_t *total_bytes)
{
    sim_state *s = state;
    *free_bytes = (size_t)(s->capacity - s->used);
    *total_bytes = (size_t)s->capacity;
    return CMB_OK;
}

static uint64_t sim_device_used(void *state)
{
    return ((sim_state *)state)->used;
}

static uint64_t sim_device_peak(void *state)
{
    return ((sim_state *)state)->used_peak;
}

const _cmb_backend _cmb_backend_sim = {
    .name = "sim",
    .open = sim_open,
    .close = sim_close,
    .alloc = sim_alloc,
    .free = sim_free,
    .va_reserve = sim_va_reserve,
    .va_release = sim_va_release,
    .map = sim_map,
    .unmap = sim_unmap,
    .park = sim_park,
    .park_after = sim_park_after,
    .unpark = sim_unpark,
    .drop_parked = sim_drop_parked,
    .event_record = sim_event_record,
    .event_query = sim_event_query,
    .event_rerecord = sim_event_rerecord,
    .event_destroy = sim_event_destroy,
    .stream_sync = sim_stream_sync,
    .mem_info = sim_mem_info,
    .device_used = sim_device_used,
    .device_peak = sim_device_peak,
};
