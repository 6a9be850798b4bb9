/* pl_trace.c - recording a program's allocation traffic as a suite trace.
 *
 * One file per device in the suite's format (traces/FORMAT.md), written by
 * the suite's own writer (traces/trace_writer.c) under the device's lock,
 * so events of one device are in the order its policy saw them and their
 * times never go backwards. A trace is the device's traffic after the
 * start: blocks allocated before it are left out with their frees, so the
 * file always replays. Streams are the device's stream ids (0 the legacy
 * default stream, then in order of first use), which the replay maps in
 * order of first use again. The files appear under their names at stop (or
 * at exit), never half-written.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/cmb_clock.h"
#include "pl_internal.h"

uint32_t _cmb_pl_trace_gen;
static uint32_t generations;
static char base_path[480];
static uint64_t t0_ns;
static pid_t owner; /* the process that started the recording */

/* "{device}" in the path is replaced by the ordinal; without it device 0
 * records to the path itself and device N to PATH.devN. */
static void path_for(int device, char *out, size_t outlen)
{
    const char *mark = strstr(base_path, "{device}");
    if (mark)
        snprintf(out, outlen, "%.*s%d%s", (int)(mark - base_path), base_path, device, mark + 8);
    else if (device == 0)
        snprintf(out, outlen, "%s", base_path);
    else
        snprintf(out, outlen, "%s.dev%d", base_path, device);
}

int _cmb_pl_trace_open(pl_device *d, char *err, size_t errlen)
{
    char path[512], comment[800], name[256] = "sim";
    cmb_trace_writer *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(err, errlen, "host out of memory");
        return -1;
    }
    path_for(d->ordinal, path, sizeof path);
    if (d->real)
        _cmb_pl_device_name(d->ordinal, name, sizeof name);
    snprintf(comment, sizeof comment,
             "libcmb_pluggable: %s on device %d (%s); streams by first use, 0 = the legacy default stream",
             d->spec, d->ordinal, name);
    if (cmb_trace_writer_open(w, path, comment, err, errlen)) {
        free(w);
        return -1;
    }
    d->trace = w;
    d->trace_gen = _cmb_pl_trace_gen;
    atomic_store_explicit(&d->tracing, 1, memory_order_release);
    return 0;
}

static int64_t since_start(void)
{
    return (int64_t)(cmb_now_ns() - t0_ns);
}

void _cmb_pl_trace_alloc(pl_device *d, const void *ptr, uint64_t size, uint32_t stream_id)
{
    cmb_trace_write_alloc(d->trace, ptr, size, stream_id, since_start());
}

void _cmb_pl_trace_free(pl_device *d, const void *ptr, uint32_t stream_id)
{
    cmb_trace_write_free(d->trace, ptr, stream_id, since_start());
}

int _cmb_pl_trace_close(pl_device *d, char *err, size_t errlen)
{
    int rc = cmb_trace_writer_close(d->trace, err, errlen);
    free(d->trace);
    d->trace = NULL;
    atomic_store_explicit(&d->tracing, 0, memory_order_release);
    return rc;
}

/* Drops a writer without putting its file in place. */
static void discard(pl_device *d)
{
    if (d->trace->f)
        fclose(d->trace->f);
    remove(d->trace->tmp);
    cmb_hashmap_free(&d->trace->ptr_to_id);
    free(d->trace);
    d->trace = NULL;
    atomic_store_explicit(&d->tracing, 0, memory_order_release);
}

/* --- fork ------------------------------------------------------------------------ */

/* A fork copies the writers' unflushed buffers, and the child's exit()
 * flushes every stdio stream: the parent's events would be written twice.
 * So the writers are flushed, with every lock held, just before a fork
 * (as malloc implementations hold their arenas), and the child never
 * closes them (see _cmb_pl_trace_finish_at_exit). */
static void before_fork(void)
{
    pthread_mutex_lock(&_cmb_pl_global_lock);
    for (int i = 0; i < CMB_PLUGGABLE_MAX_DEVICES; i++) {
        pl_device *d = _cmb_pl_ready(i);
        if (!d)
            continue;
        pthread_mutex_lock(&d->lock);
        if (d->trace && d->trace->f)
            fflush(d->trace->f);
    }
}

static void after_fork(void)
{
    for (int i = CMB_PLUGGABLE_MAX_DEVICES - 1; i >= 0; i--) {
        pl_device *d = _cmb_pl_ready(i);
        if (d)
            pthread_mutex_unlock(&d->lock);
    }
    pthread_mutex_unlock(&_cmb_pl_global_lock);
}

static void register_fork_handlers(void)
{
    pthread_atfork(before_fork, after_fork, after_fork);
}

/* --- start and stop ------------------------------------------------------------- */

static int check_writable(char *err, size_t errlen)
{
    char path[512], tmp[520];
    path_for(0, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        return -1;
    }
    fclose(f);
    remove(tmp);
    return 0;
}

int cmb_pluggable_trace_start(const char *path)
{
    char err[PL_ERR_LEN];
    int rc = -1;
    if (!path || !*path || strlen(path) >= sizeof base_path) {
        _cmb_pl_error(0, "trace: empty or too long path");
        return -1;
    }
    static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
    pthread_once(&fork_once, register_fork_handlers);
    pthread_mutex_lock(&_cmb_pl_global_lock);
    if (_cmb_pl_trace_gen) {
        _cmb_pl_error(0, "trace: already recording to %s", base_path);
        goto out_unlock;
    }
    snprintf(base_path, sizeof base_path, "%s", path);
    if (check_writable(err, sizeof err)) {
        _cmb_pl_error(0, "trace: %s", err);
        goto out_unlock;
    }
    _cmb_pl_trace_gen = ++generations;
    t0_ns = cmb_now_ns();
    owner = getpid();
    rc = 0;
    for (int i = 0; i < CMB_PLUGGABLE_MAX_DEVICES && rc == 0; i++) {
        pl_device *d = _cmb_pl_ready(i);
        if (!d)
            continue;
        pthread_mutex_lock(&d->lock);
        if (_cmb_pl_trace_open(d, err, sizeof err)) {
            _cmb_pl_error(0, "trace: %s", err);
            rc = -1;
        }
        pthread_mutex_unlock(&d->lock);
    }
    if (rc) {
        for (int i = 0; i < CMB_PLUGGABLE_MAX_DEVICES; i++) {
            pl_device *d = _cmb_pl_ready(i);
            if (!d)
                continue;
            pthread_mutex_lock(&d->lock);
            if (d->trace)
                discard(d);
            pthread_mutex_unlock(&d->lock);
        }
        _cmb_pl_trace_gen = 0;
    }
out_unlock:
    pthread_mutex_unlock(&_cmb_pl_global_lock);
    return rc;
}

int cmb_pluggable_trace_stop(void)
{
    char err[PL_ERR_LEN];
    int rc = 0;
    pthread_mutex_lock(&_cmb_pl_global_lock);
    if (!_cmb_pl_trace_gen) {
        _cmb_pl_error(0, "trace: not recording");
        pthread_mutex_unlock(&_cmb_pl_global_lock);
        return -1;
    }
    for (int i = 0; i < CMB_PLUGGABLE_MAX_DEVICES; i++) {
        pl_device *d = _cmb_pl_ready(i);
        if (!d)
            continue;
        pthread_mutex_lock(&d->lock);
        if (d->trace && _cmb_pl_trace_close(d, err, sizeof err)) {
            _cmb_pl_error(0, "trace: %s", err);
            rc = -1;
        }
        pthread_mutex_unlock(&d->lock);
    }
    _cmb_pl_trace_gen = 0;
    pthread_mutex_unlock(&_cmb_pl_global_lock);
    return rc;
}

void _cmb_pl_trace_finish_at_exit(void)
{
    char err[PL_ERR_LEN];
    /* Never wait at exit: a thread stopped inside the library may hold a
     * lock forever; its device's trace then stays a .tmp file. */
    if (pthread_mutex_trylock(&_cmb_pl_global_lock))
        return;
    /* A forked child that exits through its destructors (not os._exit, as
     * Python's multiprocessing workers do) must not put the parent's
     * half-written files in place. */
    if (getpid() != owner) {
        pthread_mutex_unlock(&_cmb_pl_global_lock);
        return;
    }
    if (_cmb_pl_trace_gen) {
        for (int i = 0; i < CMB_PLUGGABLE_MAX_DEVICES; i++) {
            pl_device *d = _cmb_pl_ready(i);
            if (!d || pthread_mutex_trylock(&d->lock))
                continue;
            if (d->trace && _cmb_pl_trace_close(d, err, sizeof err))
                _cmb_pl_error(1, "trace at exit: %s", err);
            pthread_mutex_unlock(&d->lock);
        }
        _cmb_pl_trace_gen = 0;
    }
    pthread_mutex_unlock(&_cmb_pl_global_lock);
}
