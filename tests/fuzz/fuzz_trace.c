/* fuzz_trace.c - libFuzzer target over the trace reader (traces/trace_reader.c).
 *
 * Built twice: FUZZ_FORMAT_RMM=0 puts the suite's header line in front of
 * the input (when the input does not start with it), =1 puts RMM's CSV
 * header, so each target explores one parser. The input is read through a
 * memfd, as a file would be. Oracle beyond "no crash, no sanitizer report":
 * every event is well-formed (sizes in [1, 2^48], slots dense and live
 * exactly between their alloc and free, a free's size that of its alloc),
 * the counts agree with the events, and an error names FILE:LINE. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "traces/trace.h"

#ifndef FUZZ_FORMAT_RMM
#define FUZZ_FORMAT_RMM 0
#endif

#if FUZZ_FORMAT_RMM
static const char HEADER[] = "Thread,Time,Action,Pointer,Size,Stream\n";
#else
static const char HEADER[] = "# cumembench-trace 1\n";
#endif

#define MAX_SLOTS (1u << 16)

static int memfd = -1;
static char path[64];

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_trace: invariant broken: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint64_t live_size[MAX_SLOTS];
    static uint8_t live[MAX_SLOTS];
    if (memfd < 0) {
        memfd = memfd_create("fuzz_trace", 0);
        snprintf(path, sizeof path, "/proc/self/fd/%d", memfd);
    }
    if (ftruncate(memfd, 0))
        return 0;
    size_t hl = sizeof HEADER - 1;
    if (size < hl || memcmp(data, HEADER, hl))
        if (pwrite(memfd, HEADER, hl, 0) != (ssize_t)hl)
            return 0;
    off_t at = lseek(memfd, 0, SEEK_END);
    if (pwrite(memfd, data, size, at) != (ssize_t)size)
        return 0;

    cmb_trace_reader r;
    cmb_trace_event ev;
    char err[640] = "";
    if (cmb_trace_open(&r, path, err, sizeof err)) {
        check(strncmp(err, path, strlen(path)) == 0, "open error names the file");
        return 0;
    }
    memset(live, 0, sizeof live);
    uint64_t allocs = 0, frees = 0, syncs = 0;
    int rc;
    while ((rc = cmb_trace_next(&r, &ev, err, sizeof err)) == 1) {
        if (ev.op == CMB_TRACE_ALLOC) {
            allocs++;
            check(ev.size >= 1 && ev.size <= CMB_TRACE_MAX_SIZE, "alloc size in [1, 2^48]");
            check(ev.slot < r.n_slots, "alloc slot below n_slots");
            if (ev.slot < MAX_SLOTS) {
                check(!live[ev.slot], "alloc into a free slot");
                live[ev.slot] = 1;
                live_size[ev.slot] = ev.size;
            }
        } else if (ev.op == CMB_TRACE_FREE) {
            frees++;
            check(ev.slot < r.n_slots, "free slot below n_slots");
            if (ev.slot < MAX_SLOTS) {
                check(live[ev.slot], "free of a live slot");
                check(live_size[ev.slot] == ev.size, "free size equals its alloc size");
                live[ev.slot] = 0;
            }
        } else {
            check(ev.op == CMB_TRACE_SYNC, "known op");
            syncs++;
        }
    }
    check(rc == 0 || rc == -1, "next returns 1, 0 or -1");
    if (rc < 0)
        check(strncmp(err, path, strlen(path)) == 0 && err[strlen(path)] == ':', "error is FILE:LINE: reason");
    else
        check(r.counts.allocs == allocs && r.counts.frees == frees && r.counts.syncs == syncs,
              "counts agree with the events");
    cmb_trace_close(&r);
    return 0;
}
