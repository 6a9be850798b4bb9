/* pluggable.c - the configuration, the per-device instances and the
 * allocation paths of libcmb_pluggable.
 *
 * The policy spec is parsed with the harness' own grammar
 * (harness/alloc_spec.c) and its options checked at configure time by
 * creating the policy once over a sim upstream, so a typo is refused before
 * the host program allocates anything. Each device gets its instance on its
 * first allocation, under the global lock, with that device made current
 * for the upstream's set-up and the previous device restored after, as
 * PyTorch's allocator guards every call that may touch another device
 * (c10/cuda/CUDACachingAllocator.cpp, CUDAGuard in malloc/free). Every
 * later call on a device holds only that device's mutex.
 */
#define _GNU_SOURCE /* PTHREAD_MUTEX_ADAPTIVE_NP */
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cmb_clock.h"
#include "../common/cmb_size.h"
#include "../allocators/external.h"
#include "../allocators/registry.h"
#include "../allocators/upstream.h"
#include "../common/cmb_units.h"
#include "../allocators/policy.h"
#include "pl_internal.h"

pl_device _cmb_pl_devices[CMB_PLUGGABLE_MAX_DEVICES];
pthread_mutex_t _cmb_pl_global_lock = PTHREAD_MUTEX_INITIALIZER;

/* --- configuration ----------------------------------------------------------- */

typedef struct pl_config {
    int state;                       /* PL_NONE, PL_READY, PL_FAILED          */
    cmb_alloc_spec *spec;            /* heap: its options point into itself   */
    const cmb_allocator_methods *m;
    cmb_upstream_kind kind;
    uint64_t capacity;               /* 0 = the device as it is               */
    int torch_raises;
    int profile;                     /* CMB_PROFILE=1                         */
    char error[PL_ERR_LEN];          /* why state is PL_FAILED                */
    int error_printed;
    /* A bad CMB_CAPACITY, CMB_TORCH_OOM, CMB_PROFILE or CMB_TRACE: unlike a bad
     * CMB_ALLOCATOR, which configure() replaces, it refuses every use. */
    char env_error[PL_ERR_LEN];
    int env_error_printed;
} pl_config;

static pl_config cfg;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

/* --- errors ---------------------------------------------------------------------- */

static _Thread_local char tl_error[PL_ERR_LEN];
static char last_error[PL_ERR_LEN];
static pthread_mutex_t error_lock = PTHREAD_MUTEX_INITIALIZER;

void _cmb_pl_error(int print, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tl_error, sizeof tl_error, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&error_lock);
    memcpy(last_error, tl_error, sizeof last_error);
    pthread_mutex_unlock(&error_lock);
    if (print)
        fprintf(stderr, "cumembench pluggable: %s\n", tl_error);
}

const char *cmb_pluggable_last_error(void)
{
    /* This thread's own failure if it had one, else the process's last. */
    if (!tl_error[0]) {
        pthread_mutex_lock(&error_lock);
        memcpy(tl_error, last_error, sizeof tl_error);
        pthread_mutex_unlock(&error_lock);
    }
    return tl_error;
}

/* --- parsing and checking a spec ------------------------------------------------------ */

static int allow_sim(void)
{
    const char *v = getenv("CMB_PLUGGABLE_ALLOW_SIM");
    return v && !strcmp(v, "1");
}

/* Creates the policy once over a sim upstream and destroys it: the options
 * are checked by the allocator's own create(), with no GPU involved. */
static int check_options(const cmb_alloc_spec *s, const cmb_allocator_methods *m, char *err, size_t errlen)
{
    cmb_upstream_config ucfg;
    cmb_upstream *up = NULL;
    void *state = NULL;
    char why[320] = "";
    int rc = -1;
    if (!(m->flags & CMB_ALLOC_USES_UPSTREAM) || !s->entry)
        return 0; /* driver allocators and plug-ins check theirs on the GPU */
    cmb_upstream_config_default(&ucfg);
    if (cmb_upstream_open(&ucfg, &up, why, sizeof why) != CMB_OK) {
        snprintf(err, errlen, "cannot check the options of '%s': %s", s->text, why);
        return -1;
    }
    cmb_config c = {.options = s->options, .n_options = s->n_options, .device = 0, .sim = 1,
                    .error = why, .error_len = sizeof why};
    cmb_status st = m->create(&c, up, &state);
    if (st != CMB_OK) {
        snprintf(err, errlen, "allocator '%s': %s", s->text, why[0] ? why : cmb_status_str(st));
        goto out_close;
    }
    m->destroy(state);
    rc = 0;
out_close:
    cmb_upstream_close(up);
    return rc;
}

/* Parses `text` into a new spec and resolves everything that can be known
 * without a GPU. 0 with *out set, or -1 with a one-line reason. */
static int parse_spec(const char *text, cmb_alloc_spec **out, const cmb_allocator_methods **mout,
                      cmb_upstream_kind *kout, char *err, size_t errlen)
{
    char why[400];
    const cmb_allocator_methods *m = NULL;
    cmb_alloc_spec *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "host out of memory");
        return -1;
    }
    if (cmb_alloc_spec_parse(text, s, why, sizeof why)) {
        snprintf(err, errlen, "allocator '%s': %s", text, why);
        goto out_free;
    }
    if (s->entry) {
        m = s->entry->methods;
    } else if (cmb_external_load(s->external_path, &m, why, sizeof why)) {
        snprintf(err, errlen, "%s", why);
        goto out_free;
    }
    cmb_upstream_kind kind = s->has_upstream ? s->upstream
                             : (m->flags & CMB_ALLOC_NEEDS_VMM) ? CMB_UPSTREAM_VMM
                                                                : CMB_UPSTREAM_CUDA;
    if (kind == CMB_UPSTREAM_SIM && !allow_sim()) {
        snprintf(err, errlen, "allocator '%s': the sim upstream has no memory behind its addresses; "
                 "use @cuda or @vmm (@sim is for tests, with CMB_PLUGGABLE_ALLOW_SIM=1)", text);
        goto out_free;
    }
    if (kind == CMB_UPSTREAM_SIM && (m->flags & CMB_ALLOC_NEEDS_GPU)) {
        snprintf(err, errlen, "allocator '%s' allocates through the CUDA driver and cannot run over @sim", text);
        goto out_free;
    }
    if (kind == CMB_UPSTREAM_CUDA && (m->flags & CMB_ALLOC_NEEDS_VMM) && (m->flags & CMB_ALLOC_USES_UPSTREAM)) {
        snprintf(err, errlen, "allocator '%s' maps pages and needs the vmm upstream (@vmm)", text);
        goto out_free;
    }
    if (check_options(s, m, err, errlen))
        goto out_free;
    *out = s;
    *mout = m;
    *kout = kind;
    return 0;
out_free:
    free(s);
    return -1;
}

/* Takes a parsed spec as the configuration (global lock held). */
static void set_spec(cmb_alloc_spec *s, const cmb_allocator_methods *m, cmb_upstream_kind kind)
{
    free(cfg.spec);
    cfg.spec = s;
    cfg.m = m;
    cfg.kind = kind;
    cfg.state = PL_READY;
    cfg.error[0] = '\0';
    cfg.error_printed = 0;
}

static void set_config_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_config_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cfg.error, sizeof cfg.error, fmt, ap);
    va_end(ap);
    cfg.state = PL_FAILED;
    cfg.error_printed = 0;
}

/* CMB_CAPACITY as the command line reads --capacity: "64MB" is refused as
 * ambiguous, never read as MiB; at most CMB_SIZE_MAX_CAPACITY. */
static void read_capacity(const char *v)
{
    char why[160];
    uint64_t bytes;
    if (cmb_parse_size_strict(v, "B", &bytes, why, sizeof why))
        snprintf(cfg.env_error, sizeof cfg.env_error, "CMB_CAPACITY='%s' is not a size (e.g. 8GiB): %s", v, why);
    else if (bytes > CMB_SIZE_MAX_CAPACITY)
        snprintf(cfg.env_error, sizeof cfg.env_error, "CMB_CAPACITY='%s': at most " CMB_SIZE_MAX_CAPACITY_TEXT, v);
    else
        cfg.capacity = bytes;
}

static void read_thread_cache(const char *v)
{
    char why[160];
    uint64_t bytes;
    if (cmb_parse_size_strict(v, "B", &bytes, why, sizeof why))
        snprintf(cfg.env_error, sizeof cfg.env_error, "CMB_THREAD_CACHE='%s' is not a size (e.g. 16MiB): %s", v, why);
    else
        cmb_pluggable_set_thread_cache(bytes);
}

/* --- CMB_PROFILE ------------------------------------------------------------- */

/* "; upstream ops: map 12 calls 1.5 ms, ...": each op the policy called
 * (the upstream's own work and its driver calls together). */
static void print_op_time(const cmb_upstream *up)
{
    uint64_t calls[CMB_OP_KINDS], ns[CMB_OP_KINDS];
    const char *sep = "; upstream ops:";
    cmb_upstream_op_time(up, calls, ns);
    for (int k = 0; k < CMB_OP_KINDS; k++) {
        if (!calls[k])
            continue;
        fprintf(stderr, "%s %s %" PRIu64 " calls %.3f ms", sep, cmb_op_names[k], calls[k], (double)ns[k] / 1e6);
        sep = ",";
    }
}

/* At exit: per device, the host time the policy's calls took, the device
 * sampling's, and of it the driver calls' its upstream made (vmm) and the
 * time in each upstream op. */
static void print_profile(void)
{
    for (int i = 0; i < CMB_PLUGGABLE_MAX_DEVICES; i++) {
        pl_device *d = &_cmb_pl_devices[i];
        if (!d->profile || !d->m)
            continue;
        pthread_mutex_lock(&d->lock);
        fprintf(stderr,
                "cumembench profile: device %d, %s: allocate %" PRIu64 " calls %.3f ms, free %" PRIu64
                " calls %.3f ms, device sampling after a growth %" PRIu64 " calls %.3f ms",
                i, d->spec, d->prof_alloc_n, (double)d->prof_alloc_ns / 1e6, d->prof_free_n,
                (double)d->prof_free_ns / 1e6, (uint64_t)atomic_load(&d->prof_sample_n),
                (double)atomic_load(&d->prof_sample_ns) / 1e6);
        if (d->up) {
            uint64_t calls[CMB_DT_KINDS], ns[CMB_DT_KINDS];
            cmb_upstream_driver_time(d->up, calls, ns);
            fprintf(stderr, "; in the driver:");
            for (int k = 0; k < CMB_DT_KINDS; k++)
                fprintf(stderr, " %s %" PRIu64 " calls %.3f ms%s", cmb_dt_names[k], calls[k], (double)ns[k] / 1e6,
                        k + 1 < CMB_DT_KINDS ? "," : "");
            print_op_time(d->up);
        }
        fprintf(stderr, "\n");
        pthread_mutex_unlock(&d->lock);
    }
}

/* The environment, once per process, before the first configure() or the
 * first allocation, whichever comes first. Its settings are defaults the
 * API calls override. */
static void read_environment(void)
{
    char err[PL_ERR_LEN];
    const char *v;
    pthread_mutex_lock(&_cmb_pl_global_lock);
    if ((v = getenv("CMB_TORCH_OOM")) && *v) {
        if (!strcmp(v, "raise"))
            cfg.torch_raises = 1;
        else if (strcmp(v, "null"))
            snprintf(cfg.env_error, sizeof cfg.env_error, "CMB_TORCH_OOM='%s': expected null or raise", v);
    }
    if ((v = getenv("CMB_CAPACITY")) && *v)
        read_capacity(v);
    if ((v = getenv("CMB_PROFILE")) && *v) {
        if (!strcmp(v, "1"))
            cfg.profile = 1;
        else if (strcmp(v, "0"))
            snprintf(cfg.env_error, sizeof cfg.env_error, "CMB_PROFILE='%s': expected 0 or 1", v);
        if (cfg.profile)
            atexit(print_profile);
    }
    if ((v = getenv("CMB_THREAD_CACHE")) && *v)
        read_thread_cache(v);
    if ((v = getenv("CMB_ALLOCATOR")) && *v) {
        cmb_alloc_spec *s;
        const cmb_allocator_methods *m;
        cmb_upstream_kind kind;
        if (parse_spec(v, &s, &m, &kind, err, sizeof err))
            set_config_error("CMB_ALLOCATOR: %s", err);
        else
            set_spec(s, m, kind);
    }
    pthread_mutex_unlock(&_cmb_pl_global_lock);
    if (!cfg.env_error[0] && (v = getenv("CMB_TRACE")) && *v && !_cmb_pl_trace_gen &&
        cmb_pluggable_trace_start(v)) {
        pthread_mutex_lock(&_cmb_pl_global_lock);
        snprintf(cfg.env_error, sizeof cfg.env_error, "CMB_TRACE: %s", cmb_pluggable_last_error());
        pthread_mutex_unlock(&_cmb_pl_global_lock);
    }
}

static void environment_once(void)
{
    pthread_once(&env_once, read_environment);
}

int cmb_pluggable_abi_version(void)
{
    return CMB_PLUGGABLE_ABI_VERSION;
}

size_t cmb_pluggable_memstats_size(void)
{
    return sizeof(cmb_pluggable_memstats);
}

int cmb_pluggable_configure(const char *spec)
{
    char err[PL_ERR_LEN];
    cmb_alloc_spec *s;
    const cmb_allocator_methods *m;
    cmb_upstream_kind kind;
    environment_once();
    if (cfg.env_error[0]) {
        _cmb_pl_error(0, "%s", cfg.env_error);
        return -1;
    }
    if (!spec || !*spec) {
        _cmb_pl_error(0, "no allocator spec given (e.g. bfc@cuda)");
        return -1;
    }
    if (parse_spec(spec, &s, &m, &kind, err, sizeof err)) {
        _cmb_pl_error(0, "%s", err);
        return -1;
    }
    pthread_mutex_lock(&_cmb_pl_global_lock);
    set_spec(s, m, kind);
    pthread_mutex_unlock(&_cmb_pl_global_lock);
    return 0;
}

int cmb_pluggable_set_capacity(uint64_t bytes)
{
    environment_once();
    if (bytes > CMB_SIZE_MAX_CAPACITY) {
        _cmb_pl_error(0, "set_capacity(%llu): at most " CMB_SIZE_MAX_CAPACITY_TEXT, (unsigned long long)bytes);
        return -1;
    }
    pthread_mutex_lock(&_cmb_pl_global_lock);
    cfg.capacity = bytes;
    pthread_mutex_unlock(&_cmb_pl_global_lock);
    return 0;
}

int cmb_pluggable_set_torch_oom(int raise)
{
    if (raise != 0 && raise != 1) {
        _cmb_pl_error(0, "cmb_pluggable_set_torch_oom: expected 0 (return NULL) or 1 (raise)");
        return -1;
    }
    environment_once();
    pthread_mutex_lock(&_cmb_pl_global_lock);
    cfg.torch_raises = raise;
    pthread_mutex_unlock(&_cmb_pl_global_lock);
    return 0;
}

const char *cmb_pluggable_spec(void)
{
    static _Thread_local char text[512];
    pthread_mutex_lock(&_cmb_pl_global_lock);
    snprintf(text, sizeof text, "%s", cfg.state == PL_READY && cfg.spec ? cfg.spec->text : "");
    pthread_mutex_unlock(&_cmb_pl_global_lock);
    return text;
}

int _cmb_pl_torch_raises(void)
{
    environment_once();
    return cfg.torch_raises;
}

/* --- per-device instances ---------------------------------------------------------------- */

pl_device *_cmb_pl_ready(int device)
{
    if (device < 0 || device >= CMB_PLUGGABLE_MAX_DEVICES)
        return NULL;
    pl_device *d = &_cmb_pl_devices[device];
    return atomic_load_explicit(&d->state, memory_order_acquire) == PL_READY ? d : NULL;
}

/* glibc's adaptive mutex spins a while before it sleeps: the calls it
 * guards are short, and a sleeping waiter costs a futex wake per handoff. */
static int init_lock(pthread_mutex_t *lock)
{
    pthread_mutexattr_t a;
    int rc = pthread_mutexattr_init(&a);
#ifdef PTHREAD_MUTEX_ADAPTIVE_NP
    if (!rc)
        pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP);
#endif
    if (!rc)
        rc = pthread_mutex_init(lock, &a);
    pthread_mutexattr_destroy(&a);
    return rc;
}

static void release_tables(pl_device *d)
{
    cmb_hashmap_free(&d->live);
    cmb_hashmap_free(&d->stream_ids);
    cmb_hashmap_free(&d->uses);
    cmb_hashmap_free(&d->pool_of);
    free(d->slots);
    free(d->free_slots);
    free(d->streams);
    d->slots = NULL;
    d->free_slots = NULL;
    d->streams = NULL;
}

static int init_tables(pl_device *d)
{
    if (cmb_hashmap_init(&d->live, 4096) || cmb_hashmap_init(&d->stream_ids, 16) ||
        cmb_hashmap_init(&d->uses, 16) || cmb_hashmap_init(&d->pool_of, 64))
        return -1;
    d->cap_streams = 16;
    d->streams = calloc(d->cap_streams, sizeof *d->streams);
    d->n_streams = 1; /* id 0: the legacy default stream, NULL */
    return d->streams ? 0 : -1;
}

/* The memory free when the policy is created: what the policies that size
 * themselves read (the e2e predictions replay on a device of that size). */
static void read_free_at_create(void *ctx, cmb_upstream *up)
{
    pl_device *d = ctx;
    size_t fb = 0, tb = 0;
    uint64_t cap;
    if (cmb_up_mem_info(up, &fb, &tb) != CMB_OK)
        return;
    d->total_unfractioned = (int64_t)tb;
    /* A memory fraction set before the first allocation caps the upstream
     * before the policy sizes itself from it. */
    if ((cap = _cmb_pl_fraction_cap(d->ordinal, tb)) != 0) {
        cmb_upstream_set_cap(up, cap);
        cmb_up_mem_info(up, &fb, &tb);
    }
    d->free_at_create = (int64_t)fb;
    d->total = (int64_t)tb;
}

const cmb_alloc_spec *_cmb_pl_spec(void)
{
    return cfg.spec;
}

/* Opens the upstream and creates the policy for device d through the
 * policy object (allocators/policy.h; global lock held, the device
 * current). 0, or -1 with a reason. */
static int create_policy(pl_device *d, char *err, size_t errlen)
{
    char why[400] = "";
    cmb_policy pol;
    cmb_policy_place place = {
        .upstream = cfg.kind,
        .device = d->ordinal,
        .sim = cfg.kind == CMB_UPSTREAM_SIM,
        .capacity = cfg.capacity,
        .upstream_opened = read_free_at_create,
        .ctx = d,
    };
    if (!(cfg.m->flags & CMB_ALLOC_USES_UPSTREAM) && d->real)
        _cmb_pl_mem_info(&d->free_at_create, &d->total);
    if (cmb_policy_open(cfg.spec, cfg.m, &place, &pol, why, sizeof why) != CMB_OK) {
        snprintf(err, errlen, "device %d: %s", d->ordinal, why);
        return -1;
    }
    d->up = pol.up;
    if (d->up && d->profile)
        cmb_upstream_time_ops(d->up, 1);
    d->policy = pol.state;
    d->m = cfg.m;
    return 0;
}

static int create_device(pl_device *d, int device, char *err, size_t errlen)
{
    int saved = -1;
    /* Everything after the state, which other threads may be reading (it
     * stays PL_NONE until the instance is complete). */
    memset((char *)d + offsetof(pl_device, lock), 0, sizeof *d - offsetof(pl_device, lock));
    d->ordinal = device;
    d->real = cfg.kind != CMB_UPSTREAM_SIM;
    d->capacity = cfg.capacity;
    d->profile = cfg.profile;
    snprintf(d->spec, sizeof d->spec, "%s", cfg.spec->text);
    if (init_lock(&d->lock) || init_tables(d)) {
        snprintf(err, errlen, "host out of memory");
        goto out_tables;
    }
    if (d->real && _cmb_pl_enter(device, &saved, err, errlen))
        goto out_tables;
    if (create_policy(d, err, errlen))
        goto out_leave;
    if (d->real)
        _cmb_pl_leave(saved);
    /* With one device visible the current device is always it: the guard's
     * cudaGetDevice, a third of the library's cost per pair, is skipped. */
    d->guard = d->real && _cmb_pl_device_count() != 1;
    if (_cmb_pl_trace_gen && _cmb_pl_trace_open(d, err, errlen))
        _cmb_pl_error(1, "%s (the program runs on, unrecorded)", err);
    return 0;
out_leave:
    if (d->real) {
        _cmb_pl_clear_error();
        _cmb_pl_leave(saved);
    }
out_tables:
    release_tables(d);
    return -1;
}

pl_device *_cmb_pl_get_device(int device)
{
    char err[PL_ERR_LEN];
    pl_device *d = _cmb_pl_ready(device);
    if (d)
        return d;
    if (device < 0 || device >= CMB_PLUGGABLE_MAX_DEVICES) {
        _cmb_pl_error(1, "device %d is out of range (0 to %d)", device, CMB_PLUGGABLE_MAX_DEVICES - 1);
        return NULL;
    }
    environment_once();
    d = &_cmb_pl_devices[device];
    pthread_mutex_lock(&_cmb_pl_global_lock);
    int state = atomic_load_explicit(&d->state, memory_order_relaxed);
    if (state == PL_NONE && cfg.env_error[0]) {
        _cmb_pl_error(!cfg.env_error_printed, "%s", cfg.env_error);
        cfg.env_error_printed = 1;
        pthread_mutex_unlock(&_cmb_pl_global_lock);
        return NULL;
    }
    if (state == PL_NONE) {
        if (cfg.state == PL_NONE)
            set_config_error("CMB_ALLOCATOR is not set and cmb_pluggable_configure() was not called "
                             "(e.g. CMB_ALLOCATOR=bfc@cuda)");
        if (cfg.state == PL_FAILED) {
            /* The configuration's reason is printed once, not per device. */
            _cmb_pl_error(!cfg.error_printed, "%s", cfg.error);
            cfg.error_printed = 1;
            pthread_mutex_unlock(&_cmb_pl_global_lock);
            return NULL;
        }
        if (create_device(d, device, err, sizeof err)) {
            _cmb_pl_error(1, "%s", err);
            state = PL_FAILED;
        } else {
            state = PL_READY;
        }
        atomic_store_explicit(&d->state, state, memory_order_release);
    } else if (state == PL_FAILED) {
        _cmb_pl_error(0, "device %d: the allocator could not be created (reported above)", device);
    }
    pthread_mutex_unlock(&_cmb_pl_global_lock);
    return state == PL_READY ? d : NULL;
}

/* --- live blocks and streams (device lock held) ------------------------------------------------- */

static int stream_id(pl_device *d, void *stream, uint32_t *id)
{
    uint64_t v;
    if (!stream) {
        d->null_stream_used = 1;
        *id = 0;
        return 0;
    }
    if (stream == d->last_stream) {
        *id = d->last_sid;
        return 0;
    }
    if (cmb_hashmap_get(&d->stream_ids, (uint64_t)(uintptr_t)stream, &v)) {
        *id = (uint32_t)v;
        goto out_remember;
    }
    if (d->n_streams == d->cap_streams) {
        void **grown = realloc(d->streams, 2 * d->cap_streams * sizeof *grown);
        if (!grown)
            return -1;
        d->streams = grown;
        d->cap_streams *= 2;
    }
    if (cmb_hashmap_put(&d->stream_ids, (uint64_t)(uintptr_t)stream, d->n_streams))
        return -1;
    d->streams[d->n_streams] = stream;
    *id = d->n_streams++;
out_remember:
    d->last_stream = stream;
    d->last_sid = *id;
    return 0;
}

static int slot_new(pl_device *d, uint32_t *slot)
{
    if (d->n_free_slots) {
        *slot = d->free_slots[--d->n_free_slots];
        return 0;
    }
    if (d->n_slots == d->cap_slots) {
        uint32_t cap = d->cap_slots ? 2 * d->cap_slots : 4096;
        pl_slot *s = realloc(d->slots, (size_t)cap * sizeof *s);
        if (!s)
            return -1;
        d->slots = s;
        uint32_t *f = realloc(d->free_slots, (size_t)cap * sizeof *f);
        if (!f)
            return -1;
        d->free_slots = f;
        d->cap_slots = cap;
    }
    *slot = d->n_slots++;
    return 0;
}

/* Enters a block in the table (the CuPy and generic paths, and every path
 * while a trace records). 0, or -1 on host out of memory. */
static int table_put(pl_device *d, void *p, size_t size, uint32_t sid, int traced)
{
    uint32_t slot;
    if (slot_new(d, &slot))
        return -1;
    if (cmb_hashmap_put(&d->live, (uint64_t)(uintptr_t)p, slot)) {
        d->free_slots[d->n_free_slots++] = slot;
        return -1;
    }
    d->slots[slot] = (pl_slot){.size = size, .stream_id = sid, .trace_gen = traced && d->trace ? d->trace_gen : 0};
    return 0;
}

/* --- allocation ---------------------------------------------------------------------------------- */

void _cmb_pl_report_oom(pl_device *d, size_t size, int status, const char *extra)
{
    char want[32], res[32], live[32], cap[32] = "?";
    cmb_alloc_stats ps = {0};
    cmb_status st = (cmb_status)status;
    const char *why = extra ? extra : d->m->last_error ? d->m->last_error(d->policy) : NULL;
    d->m->stats(d->policy, &ps);
    if (d->total)
        cmb_format_size((uint64_t)d->total, cap, sizeof cap);
    _cmb_pl_error(1, "%s on device %d: %s under %s (%s reserved, %s requested live, capacity %s)%s%s",
                  st == CMB_ERR_OOM ? "out of memory" : cmb_status_str(st), d->ordinal,
                  cmb_format_size(size, want, sizeof want), d->spec,
                  cmb_format_size((uint64_t)ps.reserved.current, res, sizeof res),
                  cmb_format_size((uint64_t)d->requested.current, live, sizeof live), cap, why ? ": " : "",
                  why ? why : "");
}

static void explain_oom(pl_device *d, size_t size, void *stream);

/* A pointer the policy must not have given: NULL, or a block still live
 * (a plug-in that breaks the contract). The program never sees it; the
 * policy keeps it, as a free of it would free the live block. Only blocks
 * in the table can be checked: PyTorch's own table refuses a duplicate. */
static int refuse_pointer(pl_device *d, const void *p, size_t size)
{
    uint64_t v;
    if (p && !(d->live.count && cmb_hashmap_get(&d->live, (uint64_t)(uintptr_t)p, &v)))
        return 0;
    d->ooms++;
    _cmb_pl_error(1, "device %d: %s returned %s for %zu B: refused (allocator contract broken)", d->ordinal,
                  d->spec, p ? "a block that is still live" : "NULL with success", size);
    return 1;
}

/* A request no GPU of this device's size could hold is out of memory
 * whatever the policy would answer (cudaMalloc of 16 TiB is an invalid
 * value to some drivers, and a policy may report it as a CUDA error). */
static int too_large(pl_device *d, size_t size)
{
    int64_t whole = d->total_unfractioned ? d->total_unfractioned : d->total;
    if (cmb_size_request_ok(size) && !(d->up && whole > 0 && size > (uint64_t)whole))
        return 0;
    d->ooms++;
    if (!cmb_size_request_ok(size))
        _cmb_pl_error(1, "out of memory on device %d: %zu B under %s: " CMB_SIZE_TOO_LARGE_REASON, d->ordinal,
                      size, d->spec);
    else
        _cmb_pl_report_oom(d, size, CMB_ERR_OOM, "larger than the whole device");
    return 1;
}

static cmb_status policy_allocate_timed(pl_device *d, size_t size, void *stream, void **p);

static cmb_status policy_allocate(pl_device *d, size_t size, void *stream, void **p)
{
    if (!d->profile)
        return policy_allocate_timed(d, size, stream, p);
    uint64_t t0 = cmb_now_ns();
    cmb_status st = policy_allocate_timed(d, size, stream, p);
    d->prof_alloc_n++;
    d->prof_alloc_ns += cmb_now_ns() - t0;
    return st;
}

static cmb_status policy_allocate_timed(pl_device *d, size_t size, void *stream, void **p)
{
    _cmb_pl_capture_check(d, 1); /* it may call its upstream: the caller relaxed the mode */
    cmb_status st = d->m->allocate(d->policy, size, (cmb_stream)stream, p);
    if (st != CMB_OK && d->tcaches && !atomic_load_explicit(&d->pools_active, memory_order_relaxed)) {
        /* The threads' cached blocks are the policy's free memory first. */
        _cmb_pl_tc_flush_locked(d);
        st = d->m->allocate(d->policy, size, (cmb_stream)stream, p);
    }
    if (st != CMB_OK && d->n_deferred) {
        /* As PyTorch's allocator synchronizes its pending events before it
         * gives up: blocks waiting on other streams' work may serve it. */
        _cmb_pl_collect_deferred(d, 1);
        st = d->m->allocate(d->policy, size, (cmb_stream)stream, p);
    }
    return st;
}

static void *alloc_locked(pl_device *d, size_t size, void *stream, int keep, int *grew)
{
    uint32_t sid = 0;
    void *p = NULL;
    int64_t held_before = d->up ? d->up->stats.held_current : 0;
    if (too_large(d, size))
        return NULL;
    if (d->n_deferred)
        _cmb_pl_collect_deferred(d, 0);
    if (stream_id(d, stream, &sid)) {
        d->ooms++;
        _cmb_pl_error(1, "device %d: host out of memory for the stream table", d->ordinal);
        return NULL;
    }
    cmb_status st = policy_allocate(d, size, stream, &p);
    if (st != CMB_OK) {
        d->ooms++;
        if (d->real)
            _cmb_pl_clear_error();
        _cmb_pl_report_oom(d, size, st, NULL);
        explain_oom(d, size, stream);
        return NULL;
    }
    if (refuse_pointer(d, p, size))
        return NULL;
    if ((keep || d->trace) && table_put(d, p, size, sid, 1)) {
        d->m->deallocate(d->policy, p, size, (cmb_stream)stream);
        d->ooms++;
        _cmb_pl_error(1, "device %d: host out of memory for the block table", d->ordinal);
        return NULL;
    }
    d->allocs++;
    cmb_stat_increase(&d->requested, (int64_t)size);
    cmb_stat_increase(&d->blocks, 1);
    *grew = _cmb_pl_after_alloc(d, held_before);
    if (d->trace)
        _cmb_pl_trace_alloc(d, p, size, sid);
    return p;
}

/* A private pool's allocation (a CUDA graph being captured, a MemPool
 * context): counted as any other, never traced (a replay has no pools). */
static void *pool_alloc_locked(pl_device *d, size_t size, void *stream, int keep, int *taken)
{
    void *p = NULL;
    if (too_large(d, size)) {
        *taken = 1;
        return NULL;
    }
    *taken = _cmb_pl_pool_alloc(d, size, stream, &p);
    if (!*taken)
        return NULL;
    if (!p) {
        d->ooms++;
        return NULL;
    }
    uint32_t sid;
    /* untraced (a replay has no pools), so its free is not recorded either */
    if (keep && (stream_id(d, stream, &sid) || table_put(d, p, size, sid, 0))) {
        _cmb_pl_pool_free(d, p, stream);
        d->ooms++;
        _cmb_pl_error(1, "device %d: host out of memory for the block table", d->ordinal);
        return NULL;
    }
    d->allocs++;
    cmb_stat_increase(&d->requested, (int64_t)size);
    cmb_stat_increase(&d->blocks, 1);
    return p;
}

void *_cmb_pl_malloc(size_t size, int device, void *stream, int keep)
{
    char err[PL_ERR_LEN];
    int saved = -1, grew = 0, taken = 0, mode = PL_NO_MODE;
    void *p = NULL;
    if (!size)
        return NULL; /* as PyTorch's and CuPy's own allocators answer 0 bytes */
    pl_device *d = _cmb_pl_get_device(device);
    if (!d)
        return NULL;
    if (!keep && atomic_load_explicit(&_cmb_pl_tc_limit, memory_order_relaxed) &&
        (p = _cmb_pl_tc_get(d, size, stream)))
        return p;
    if (d->guard && _cmb_pl_enter(device, &saved, err, sizeof err)) {
        _cmb_pl_error(1, "%s", err);
        return NULL;
    }
    pthread_mutex_lock(&d->lock);
    if (atomic_load_explicit(&d->pools_active, memory_order_relaxed)) {
        /* A capture may be underway (begin comes before cudaStreamBeginCapture):
         * the upstream's cudaMalloc must not end it. */
        mode = _cmb_pl_relax(d);
        p = pool_alloc_locked(d, size, stream, keep, &taken);
    }
    if (!taken)
        p = alloc_locked(d, size, stream, keep, &grew);
    pthread_mutex_unlock(&d->lock);
    if (grew) {
        uint64_t t0 = d->profile ? cmb_now_ns() : 0;
        _cmb_pl_sample_device(d); /* cudaMemGetInfo: microseconds, never under the lock */
        if (d->profile) {
            atomic_fetch_add(&d->prof_sample_n, 1);
            atomic_fetch_add(&d->prof_sample_ns, cmb_now_ns() - t0);
        }
    }
    _cmb_pl_unrelax(d, mode);
    if (d->real)
        _cmb_pl_leave(saved);
    return p;
}

static void bad_free(pl_device *d, const char *fmt, const void *ptr)
{
    d->bad_frees++;
    /* The first few are printed; a program that keeps doing it is counted. */
    if (d->bad_free_reports < 5) {
        d->bad_free_reports++;
        _cmb_pl_error(1, fmt, ptr, d->ordinal);
    } else {
        _cmb_pl_error(0, fmt, ptr, d->ordinal);
    }
}

int _cmb_pl_release_locked(pl_device *d, void *ptr, uint64_t size, void *stream)
{
    if (d->pool_of.count && _cmb_pl_pool_free(d, ptr, stream))
        return 0;
    uint64_t t0 = d->profile ? cmb_now_ns() : 0;
    cmb_status st = d->m->deallocate(d->policy, ptr, (size_t)size, (cmb_stream)stream);
    if (d->profile) {
        d->prof_free_n++;
        d->prof_free_ns += cmb_now_ns() - t0;
    }
    if (st != CMB_OK) {
        if (d->real)
            _cmb_pl_clear_error();
        bad_free(d, "the allocator refused the free of %p on device %d", ptr);
        return -1;
    }
    return 0;
}

/* Looks the block up when the caller cannot say its size and stream (or a
 * trace must know whether it saw the allocation). 1 found (and removed),
 * 0 not in the table. */
static int table_take(pl_device *d, void *ptr, pl_slot *out)
{
    uint64_t slot;
    if (!d->live.count || !cmb_hashmap_remove(&d->live, (uint64_t)(uintptr_t)ptr, &slot))
        return 0;
    *out = d->slots[slot];
    d->free_slots[d->n_free_slots++] = (uint32_t)slot;
    return 1;
}

static void free_locked(pl_device *d, void *ptr, size_t size, void *stream, int known)
{
    pl_slot s = {0};
    int in_table = table_take(d, ptr, &s);
    if (!in_table && !known) {
        bad_free(d, "free of %p on device %d, which this library did not allocate or already freed (ignored)",
                 ptr);
        return;
    }
    if (in_table) {
        if (size && size != s.size)
            _cmb_pl_error(0, "free of %p with size %zu, allocated with %llu (the allocation's size is used)",
                          ptr, size, (unsigned long long)s.size);
        /* A block goes back on the stream it was allocated on: PyTorch
         * passes that stream to free, CuPy passes none. */
        size = (size_t)s.size;
        stream = d->streams[s.stream_id];
        if (d->trace && s.trace_gen == d->trace_gen)
            _cmb_pl_trace_free(d, ptr, s.stream_id);
    }
    d->frees++;
    cmb_stat_decrease(&d->requested, (int64_t)size);
    cmb_stat_decrease(&d->blocks, 1);
    if ((d->uses.count || atomic_load_explicit(&d->pools_active, memory_order_relaxed)) &&
        _cmb_pl_defer_free(d, ptr, size, stream))
        return;
    if (_cmb_pl_release_locked(d, ptr, size, stream) && !in_table) {
        /* PyTorch's free of a pointer no one allocated here: not a free */
        d->frees--;
        cmb_stat_increase(&d->requested, (int64_t)size);
        cmb_stat_increase(&d->blocks, 1);
    }
}

void _cmb_pl_free(void *ptr, size_t size, int device, void *stream, int known)
{
    char err[PL_ERR_LEN];
    int saved = -1;
    if (!ptr)
        return;
    pl_device *d = _cmb_pl_ready(device);
    if (!d) {
        _cmb_pl_error(1, "free of %p on device %d, which has no allocator instance (ignored)", ptr, device);
        return;
    }
    if (known && size && atomic_load_explicit(&_cmb_pl_tc_limit, memory_order_relaxed) &&
        _cmb_pl_tc_put(d, ptr, size, stream))
        return;
    if (d->guard && _cmb_pl_enter(device, &saved, err, sizeof err)) {
        _cmb_pl_error(1, "%s", err);
        return;
    }
    pthread_mutex_lock(&d->lock);
    free_locked(d, ptr, size, stream, known && size);
    pthread_mutex_unlock(&d->lock);
    if (d->real)
        _cmb_pl_leave(saved);
}

void *cmb_pluggable_malloc(size_t size, int device, void *stream)
{
    return _cmb_pl_malloc(size, device, stream, 1);
}

void cmb_pluggable_free(void *ptr, size_t size, int device, void *stream)
{
    (void)stream;
    _cmb_pl_free(ptr, size, device, NULL, 0);
}

/* --- statistics and control ----------------------------------------------------------------------- */

int cmb_pluggable_stats(int device, cmb_pluggable_memstats *out)
{
    if (!out || out->struct_size != sizeof *out) {
        _cmb_pl_error(0, "cmb_pluggable_stats: struct_size must be %zu (ABI version %d)", sizeof *out,
                      CMB_PLUGGABLE_ABI_VERSION);
        return -1;
    }
    if (device < 0 || device >= CMB_PLUGGABLE_MAX_DEVICES) {
        _cmb_pl_error(0, "cmb_pluggable_stats: device %d is out of range", device);
        return -1;
    }
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
    out->device = device;
    pl_device *d = _cmb_pl_ready(device);
    if (!d)
        return 0;
    pthread_mutex_lock(&d->lock);
    _cmb_pl_fill_stats(d, out);
    pthread_mutex_unlock(&d->lock);
    return 0;
}

/* Runs fn on one device (lock held) or on every device with an instance. */
static int for_devices(int device, const char *what, void (*fn)(pl_device *))
{
    if (device < -1 || device >= CMB_PLUGGABLE_MAX_DEVICES) {
        _cmb_pl_error(0, "%s: device %d is out of range", what, device);
        return -1;
    }
    for (int i = device < 0 ? 0 : device; i < (device < 0 ? CMB_PLUGGABLE_MAX_DEVICES : device + 1); i++) {
        pl_device *d = _cmb_pl_ready(i);
        if (!d)
            continue;
        pthread_mutex_lock(&d->lock);
        fn(d);
        pthread_mutex_unlock(&d->lock);
    }
    return 0;
}

int cmb_pluggable_reset_peaks(int device)
{
    return for_devices(device, "cmb_pluggable_reset_peaks", _cmb_pl_reset_peaks_locked);
}

static void trim_locked(pl_device *d)
{
    char err[PL_ERR_LEN];
    int saved = -1;
    if (d->n_deferred)
        _cmb_pl_collect_deferred(d, 0);
    /* A trim frees memory (cudaFree synchronizes), and a policy's free may
     * touch events: neither while a graph captures. */
    if (atomic_load_explicit(&d->pools_active, memory_order_relaxed))
        return;
    if (!d->m->trim && !d->tcaches)
        return;
    if (d->real && _cmb_pl_enter(d->ordinal, &saved, err, sizeof err)) {
        _cmb_pl_error(1, "%s", err);
        return;
    }
    if (d->tcaches)
        _cmb_pl_tc_flush_locked(d); /* the threads' cached blocks first: the trim may then release them */
    cmb_status st = d->m->trim ? d->m->trim(d->policy) : CMB_OK;
    if (st != CMB_OK)
        _cmb_pl_error(1, "device %d: empty_cache: %s", d->ordinal, cmb_status_str(st));
    if (d->real)
        _cmb_pl_leave(saved);
}

int cmb_pluggable_empty_cache(int device)
{
    return for_devices(device, "cmb_pluggable_empty_cache", trim_locked);
}

/* At exit only the traces are written into place: instances stay, since
 * a host library's own destructors may still free blocks after ours. */
__attribute__((destructor)) static void at_exit(void)
{
    _cmb_pl_trace_finish_at_exit();
}

/* --- explaining an out-of-memory (CMB_EXPLAIN_OOM=1) --------------------------------------------- */

/* At the first failed allocation of a device, on stderr after the one-line
 * report: the policy's free bytes by the reason the request could not use
 * them (its free_account) and the largest live blocks. Later failures keep
 * the one line. docs/explain.md. */

static const char *const pl_reason_words[CMB_FREE_N_REASONS] = {
    [CMB_FREE_OTHER_POOL] = "in the other size pool (small vs large)",
    [CMB_FREE_OTHER_STREAM] = "cached for another stream",
    [CMB_FREE_EVENT_WAIT] = "waiting on events of streams that used it",
    [CMB_FREE_OVERSIZE] = "above max_split_size, not split for a smaller request",
    [CMB_FREE_NOT_CONTIGUOUS] = "mapped pages, but not next to each other",
    [CMB_FREE_TOO_SMALL] = "free blocks smaller than the request",
    [CMB_FREE_USABLE] = "free blocks that would serve it",
};

static int explain_wanted(void)
{
    const char *v = getenv("CMB_EXPLAIN_OOM");
    return v && *v && strcmp(v, "0") != 0;
}

static void explain_largest_live(pl_device *d)
{
    enum { TOP = 3 };
    uint64_t top[TOP] = {0};
    uint32_t top_stream[TOP] = {0};
    size_t it = 0;
    uint64_t key, slot;
    char sz[32];
    while (cmb_hashmap_next(&d->live, &it, &key, &slot)) {
        const pl_slot *s = &d->slots[slot];
        int j = TOP;
        while (j > 0 && top[j - 1] < s->size) {
            if (j < TOP) {
                top[j] = top[j - 1];
                top_stream[j] = top_stream[j - 1];
            }
            j--;
        }
        if (j < TOP) {
            top[j] = s->size;
            top_stream[j] = s->stream_id;
        }
    }
    for (int j = 0; j < TOP && top[j]; j++)
        fprintf(stderr, "cumembench pluggable:     %12s  live on stream %u\n", cmb_format_size(top[j], sz, sizeof sz),
                top_stream[j]);
}

static void explain_oom(pl_device *d, size_t size, void *stream)
{
    static _Atomic int explained[CMB_PLUGGABLE_MAX_DEVICES];
    cmb_free_account a;
    char sz[32], rounded[32], big[32];
    if (!explain_wanted() || d->ordinal < 0 || d->ordinal >= CMB_PLUGGABLE_MAX_DEVICES ||
        explained[d->ordinal]++)
        return;
    if (!d->m->free_account || d->m->free_account(d->policy, size, (cmb_stream)stream, &a) != CMB_OK) {
        fprintf(stderr, "cumembench pluggable: explain-oom: %s gives no account of its free memory\n", d->spec);
    } else {
        fprintf(stderr, "cumembench pluggable: explain-oom: %s (rounded to %s); largest free block %s; free by reason:\n",
                cmb_format_size(size, sz, sizeof sz), cmb_format_size(a.rounded, rounded, sizeof rounded),
                cmb_format_size(a.largest_free, big, sizeof big));
        for (int r = 0; r < CMB_FREE_N_REASONS; r++)
            if (a.bytes[r])
                fprintf(stderr, "cumembench pluggable:     %12s  %s\n", cmb_format_size(a.bytes[r], sz, sizeof sz),
                        pl_reason_words[r]);
    }
    fprintf(stderr, "cumembench pluggable:   the largest live blocks:\n");
    explain_largest_live(d);
}
