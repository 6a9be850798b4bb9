/* timeline.c - bounded-rate sampling of memory over time (timeline.h). */
#include "timeline.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/cmb_clock.h"

/* --- setup ------------------------------------------------------------------------ */

int cmb_timeline_init(cmb_timeline *tl, size_t max_points)
{
    memset(tl, 0, sizeof *tl);
    if (max_points < CMB_TIMELINE_MIN_POINTS)
        max_points = CMB_TIMELINE_MIN_POINTS;
    if (max_points > CMB_TIMELINE_MAX_POINTS)
        max_points = CMB_TIMELINE_MAX_POINTS;
    max_points &= ~(size_t)1; /* halving keeps the step exact */
    tl->samples = malloc(max_points * sizeof *tl->samples);
    if (!tl->samples)
        return -1;
    tl->max_points = max_points;
    tl->every = 1;
    tl->t0_ns = cmb_now_ns();
    cmb_timeline_moments_init(&tl->mo, max_points);
    return 0;
}

void cmb_timeline_free(cmb_timeline *tl)
{
    free(tl->samples);
    tl->samples = NULL;
    cmb_timeline_moments_free(&tl->mo);
    tl->n = 0;
}

const char *cmb_timeline_kind_name(cmb_timeline_kind kind)
{
    switch (kind) {
    case CMB_TL_PEAK_REQUESTED:
        return "peak_requested";
    case CMB_TL_PEAK_RESERVED:
        return "peak_reserved";
    case CMB_TL_END:
        return "end";
    default:
        return "sample";
    }
}

/* --- taking points ------------------------------------------------------------------ */

/* Reserved bytes without calling stats(): the upstream's count, or -1. */
static int64_t cheap_reserved(const cmb_metered *mt)
{
    return mt->up ? mt->up->stats.held_current : -1;
}

static void take_point(const cmb_timeline *tl, const cmb_metered *mt, cmb_timeline_kind kind,
                       cmb_timeline_point *p)
{
    cmb_alloc_stats st;
    memset(p, 0, sizeof *p);
    p->op = tl->ops;
    p->t_ns = cmb_now_ns() - tl->t0_ns;
    p->kind = kind;
    p->requested = mt->requested.current;
    p->allocated = p->reserved = p->largest_free = p->device_used = -1;
    if (mt->m->stats && mt->m->stats(mt->state, &st) == CMB_OK) {
        if (st.valid & CMB_STAT_ALLOCATED)
            p->allocated = st.allocated.current;
        if (st.valid & CMB_STAT_RESERVED)
            p->reserved = st.reserved.current;
        if (st.valid & CMB_STAT_LARGEST_FREE)
            p->largest_free = (int64_t)st.largest_free;
    }
    if (p->reserved < 0)
        p->reserved = cheap_reserved(mt);
    /* a device reading (cudaMemGetInfo) costs microseconds: samples and the
     * end only, not the peaks, which can come at every allocation */
    if (mt->sample_device && (kind == CMB_TL_SAMPLE || kind == CMB_TL_END))
        p->device_used = (int64_t)mt->sample_device(mt->sample_ctx);
}

/* Drops every other sample (those off the doubled step) and doubles it. */
static void thin_out(cmb_timeline *tl)
{
    uint64_t step = tl->every * 2;
    size_t kept = 0;
    for (size_t i = 0; i < tl->n; i++)
        if (tl->samples[i].op % step == 0)
            tl->samples[kept++] = tl->samples[i];
    tl->n = kept;
    tl->every = step;
}

static void add_sample(cmb_timeline *tl, const cmb_metered *mt)
{
    if (tl->n == tl->max_points)
        thin_out(tl);
    if (tl->ops % tl->every)
        return; /* the step just doubled and this op is off it */
    cmb_timeline_point *p = &tl->samples[tl->n++];
    take_point(tl, mt, CMB_TL_SAMPLE, p);
    /* without an upstream to follow, samples are where the reserved peak is seen */
    if (p->reserved >= 0 && (!tl->have_peak_reserved || p->reserved > tl->peak_reserved.reserved)) {
        tl->peak_reserved = *p;
        tl->peak_reserved.kind = CMB_TL_PEAK_RESERVED;
        tl->have_peak_reserved = 1;
    }
}

void cmb_timeline_observe(void *ctx, cmb_op_kind kind, void *ptr, size_t size, cmb_stream s,
                          const cmb_metered *mt)
{
    cmb_timeline *tl = ctx;
    tl->ops++;
    if (kind == CMB_OP_ALLOC && (!tl->have_peak_requested || mt->requested.current > tl->peak_requested.requested)) {
        take_point(tl, mt, CMB_TL_PEAK_REQUESTED, &tl->peak_requested);
        tl->have_peak_requested = 1;
    }
    int64_t reserved = cheap_reserved(mt);
    int new_peak = reserved >= 0 && (!tl->have_peak_reserved || reserved > tl->peak_reserved.reserved);
    if (new_peak) {
        take_point(tl, mt, CMB_TL_PEAK_RESERVED, &tl->peak_reserved);
        tl->have_peak_reserved = 1;
    }
    if (tl->ops % tl->every == 0)
        add_sample(tl, mt);
    cmb_timeline_moments_observe(&tl->mo, tl->ops, new_peak, mt);
}

void cmb_timeline_finish(cmb_timeline *tl, const cmb_metered *mt)
{
    take_point(tl, mt, CMB_TL_END, &tl->end);
    tl->have_end = 1;
    cmb_timeline_moments_finish(&tl->mo, tl->ops, mt);
}

/* --- reading them back ----------------------------------------------------------------- */

static int by_op(const void *a, const void *b)
{
    const cmb_timeline_point *x = a, *y = b;
    if (x->op != y->op)
        return x->op < y->op ? -1 : 1;
    return (int)x->kind - (int)y->kind;
}

size_t cmb_timeline_points(const cmb_timeline *tl, cmb_timeline_point *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < tl->n && n < cap; i++)
        out[n++] = tl->samples[i];
    if (tl->have_peak_requested && n < cap)
        out[n++] = tl->peak_requested;
    if (tl->have_peak_reserved && n < cap)
        out[n++] = tl->peak_reserved;
    if (tl->have_end && n < cap)
        out[n++] = tl->end;
    qsort(out, n, sizeof *out, by_op);
    return n;
}

/* --- the file ------------------------------------------------------------------------------ */

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

static int keep_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
           ch == '-' || ch == '_';
}

void cmb_timeline_file_name(const char *case_name, char *out, size_t len)
{
    /* 200 + ".csv" + ".tmp" stays under NAME_MAX (255) */
    size_t limit = len - 1 < 200 ? len - 1 : 200;
    size_t n = strlen(case_name), o = 0;
    int replaced = 0;
    for (size_t i = 0; i < n; i++) /* "a/b" and "a_b" must not meet in one file */
        replaced |= !keep_char(case_name[i]);
    int hashed = replaced || n > limit;
    if (hashed)
        limit -= 17; /* '-' and 16 hex digits */
    for (size_t i = 0; i < n && o < limit; i++)
        out[o++] = keep_char(case_name[i]) ? case_name[i] : '_';
    out[o] = '\0';
    if (hashed)
        snprintf(out + o, len - o, "-%016llx", (unsigned long long)fnv1a(case_name));
}

static void put_value(FILE *f, int64_t v, int last)
{
    if (v >= 0)
        fprintf(f, "%lld", (long long)v);
    fputc(last ? '\n' : ',', f);
}

static void write_points(FILE *f, const cmb_timeline_point *pts, size_t n)
{
    fputs("op,time_s,kind,requested_bytes,allocated_bytes,reserved_bytes,largest_free_bytes,device_used_bytes\n", f);
    for (size_t i = 0; i < n; i++) {
        const cmb_timeline_point *p = &pts[i];
        fprintf(f, "%llu,%.9f,%s,", (unsigned long long)p->op, (double)p->t_ns * 1e-9, cmb_timeline_kind_name(p->kind));
        put_value(f, p->requested, 0);
        put_value(f, p->allocated, 0);
        put_value(f, p->reserved, 0);
        put_value(f, p->largest_free, 0);
        put_value(f, p->device_used, 1);
    }
}

int cmb_timeline_write(const cmb_timeline *tl, const char *dir, const char *case_name, int repetition,
                       char *err, size_t errlen)
{
    char name[256], path[1024], tmp[1040];
    size_t cap = tl->n + 3, n;
    cmb_timeline_point *pts = malloc(cap * sizeof *pts);
    int rc = -1;
    if (!pts) {
        snprintf(err, errlen, "host out of memory");
        return -1;
    }
    n = cmb_timeline_points(tl, pts, cap);
    if (mkdir(dir, 0777) && errno != EEXIST) {
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        goto out_free;
    }
    cmb_timeline_file_name(case_name, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s.csv", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        goto out_free;
    }
    fprintf(f, "# cumembench memory timeline\n# case: %s\n# repetition: %d\n", case_name, repetition);
    fprintf(f, "# ops: %llu; sampled every %llu ops (at most %zu samples), plus the peaks and the end\n",
            (unsigned long long)tl->ops, (unsigned long long)tl->every, tl->max_points);
    write_points(f, pts, n);
    if (ferror(f) | fclose(f)) {
        snprintf(err, errlen, "cannot write %s", tmp);
        unlink(tmp);
        goto out_free;
    }
    if (rename(tmp, path)) {
        snprintf(err, errlen, "cannot rename %s: %s", tmp, strerror(errno));
        unlink(tmp);
        goto out_free;
    }
    rc = 0;
    if (tl->mo.n || tl->mo.have_end) { /* the segments beside it, over an upstream */
        snprintf(path, sizeof path, "%s/%s.segments", dir, name);
        uint64_t peak_op = tl->have_peak_reserved ? tl->peak_reserved.op : UINT64_MAX;
        rc = cmb_timeline_moments_write(&tl->mo, path, case_name, peak_op, err, errlen);
    }
out_free:
    free(pts);
    return rc;
}
