/* devcheck.h - is the device clean between cases? (GPU mode)
 *
 * Every case runs in its own process, and a process's device memory is
 * returned when it exits - unless something outlives it: a helper it
 * forked, a stuck driver teardown, another program. The parent therefore
 * reads the device's used memory (never through a CUDA context of its own,
 * which would take memory from every case): through NVML, loaded with
 * dlopen, or where NVML is missing through `cumembench --probe-mem`, a
 * short-lived child that calls cudaMemGetInfo.
 *
 *   baseline            used bytes before the first case (lowered whenever
 *                       a lower level is seen);
 *   device_dirty_bytes  on a case: used bytes above the baseline when it
 *                       started (0: it ran on a clean device);
 *   device_unreturned_bytes
 *                       on a case: used bytes above its starting level
 *                       after its process ended, once the level had
 *                       CMB_DEVCHECK_SETTLE_S to come back (0: returned).
 * Differences up to CMB_DEVCHECK_SLACK are noise (driver bookkeeping,
 * other programs' small contexts) and count as 0.
 */
#ifndef CMB_DEVCHECK_H
#define CMB_DEVCHECK_H

#include <stddef.h>
#include <stdint.h>

#include "cmb_bench.h"
#include "env.h"

#define CMB_DEVCHECK_SLACK (32ull << 20)
#define CMB_DEVCHECK_SETTLE_S 3.0

/* Reads the device's used bytes; 0, or -1 when it cannot. */
typedef int (*cmb_devcheck_read_fn)(void *ctx, uint64_t *used);

typedef struct cmb_devcheck {
    int active;
    char method[160];       /* "nvml", "cudaMemGetInfo in a probe process", or why it is off */
    cmb_devcheck_read_fn read;
    void *ctx;
    uint64_t baseline;
    uint64_t before;        /* the current case's starting level */
    uint64_t dirty;         /* the current case: see above */
    uint64_t unreturned;
    size_t n_dirty;         /* cases of the run that started dirty */
    size_t n_unreturned;    /* cases of the run that did not return memory */
    double settle_s;
    /* the readers' state */
    void *nvml_lib;
    void *nvml_dev;
    int (*nvml_mem)(void *dev, void *out);
    int (*nvml_shutdown)(void);
    char self[4096];
    char device[16];
} cmb_devcheck;

/* GPU mode: picks a reader for the device the env probe found (by UUID),
 * measures the baseline and records the method in env ("device_check").
 * In sim mode, or without a reader, the check is off and the calls below
 * do nothing. */
void cmb_devcheck_start(cmb_devcheck *d, int gpu_mode, cmb_env *env, const char *self, int device);
/* Starts with a given reader (tests). */
void cmb_devcheck_start_with(cmb_devcheck *d, cmb_devcheck_read_fn read, void *ctx, double settle_s);
void cmb_devcheck_stop(cmb_devcheck *d);

/* Around each case's process. */
void cmb_devcheck_before(cmb_devcheck *d);
void cmb_devcheck_after(cmb_devcheck *d);

/* Adds device_dirty_bytes and device_unreturned_bytes to each repetition. */
void cmb_devcheck_annotate(const cmb_devcheck *d, cmb_bench_run *runs, size_t n);
/* A note for the progress line and a failed case's reason ("ran on a dirty
 * device: 1.0GiB above the run's starting level"); 0 when there is none. */
int cmb_devcheck_note(const cmb_devcheck *d, char *out, size_t len);

/* The --probe-mem child: prints used, free and total bytes of `device`. */
int cmb_devcheck_probe_main(int device);

#endif /* CMB_DEVCHECK_H */
