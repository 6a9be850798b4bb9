/* timeline_segments.c - the segments a policy holds at moments of the
 * memory timeline (timeline.h): what a click on the report's timeline
 * shows (plots/cmb_report/timeline_view.py). The upstream's accounting
 * layer knows every range it gave out (cmb_upstream_segments) and the
 * meters every live block (their live table): a moment places the blocks
 * in the ranges. */
#include "timeline.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../allocators/upstream.h"

typedef struct cmb_live_block {
    uint64_t addr, size;
    uint32_t seg; /* UINT32_MAX: in no segment */
} cmb_live_block;

/* --- setup ---------------------------------------------------------------------------------- */

void cmb_timeline_moments_init(cmb_timeline_moments *mo, size_t max_points)
{
    memset(mo, 0, sizeof *mo);
    mo->max = max_points < CMB_TIMELINE_MOMENTS ? max_points : CMB_TIMELINE_MOMENTS;
    mo->max &= ~(size_t)1; /* halving keeps the step exact */
    mo->file_max = CMB_TIMELINE_SEGMENTS_FILE_MAX;
    if (max_points / 512 > 1)
        mo->file_max = max_points / 512 >= CMB_TIMELINE_SEGMENTS_FILE_CAP / CMB_TIMELINE_SEGMENTS_FILE_MAX
                           ? CMB_TIMELINE_SEGMENTS_FILE_CAP
                           : CMB_TIMELINE_SEGMENTS_FILE_MAX * (max_points / 512);
    mo->every = 1;
}

static void moment_free(cmb_timeline_moment *m)
{
    free(m->seg);
    free(m->kept);
    m->seg = NULL;
    m->kept = NULL;
}

void cmb_timeline_moments_free(cmb_timeline_moments *mo)
{
    for (size_t i = 0; i < mo->n; i++)
        moment_free(&mo->at[i]);
    free(mo->at);
    moment_free(&mo->peak);
    moment_free(&mo->end);
    free(mo->segs);
    free(mo->live);
    free(mo->sizes);
    memset(mo, 0, sizeof *mo);
}

/* --- one moment: the walk --------------------------------------------------------------------- */

static int grow(void **buf, size_t *cap, size_t want, size_t elem)
{
    if (want <= *cap)
        return 0;
    size_t cap2 = want + want / 2 + 16;
    void *p = realloc(*buf, cap2 * elem);
    if (!p)
        return -1;
    *buf = p;
    *cap = cap2;
    return 0;
}

/* The held ranges into mo->segs; their count, or -1 out of host memory. */
static long walk_segments(cmb_timeline_moments *mo, const cmb_upstream *up)
{
    size_t n = cmb_upstream_segments(up, mo->segs, mo->segs_cap);
    if (n > mo->segs_cap) {
        if (grow((void **)&mo->segs, &mo->segs_cap, n, sizeof *mo->segs))
            return -1;
        n = cmb_upstream_segments(up, mo->segs, mo->segs_cap);
    }
    return (long)n;
}

static int by_addr(const void *a, const void *b)
{
    uint64_t x = ((const cmb_live_block *)a)->addr, y = ((const cmb_live_block *)b)->addr;
    return (x > y) - (x < y);
}

/* The live blocks into mo->live, by address; their count, or -1. */
static long walk_blocks(cmb_timeline_moments *mo, const cmb_metered *mt)
{
    uint64_t key, val;
    size_t n = 0;
    if (grow((void **)&mo->live, &mo->live_cap, mt->live.count, sizeof *mo->live))
        return -1;
    for (size_t it = 0; n < mo->live_cap && cmb_hashmap_next(&mt->live, &it, &key, &val);)
        mo->live[n++] = (cmb_live_block){key, val, UINT32_MAX};
    if (n > 1)
        qsort(mo->live, n, sizeof *mo->live, by_addr);
    return (long)n;
}

/* Each block into the segment holding it (both by address): the
 * segment's count, bytes, and the largest gap no block covers. */
static void place(cmb_timeline_moment *m, cmb_live_block *b, size_t nb)
{
    size_t i = 0;
    for (size_t s = 0; s < m->n_seg; s++) {
        cmb_timeline_segment *g = &m->seg[s];
        uint64_t end = g->start + g->size, cursor = g->start;
        for (; i < nb && b[i].addr < end; i++) {
            if (b[i].addr < g->start) {
                m->outside++;
                continue;
            }
            b[i].seg = (uint32_t)s;
            g->blocks++;
            g->covered += b[i].size;
            if (b[i].addr > cursor && b[i].addr - cursor > g->largest_free)
                g->largest_free = b[i].addr - cursor;
            if (b[i].addr + b[i].size > cursor)
                cursor = b[i].addr + b[i].size < end ? b[i].addr + b[i].size : end;
        }
        if (end - cursor > g->largest_free)
            g->largest_free = end - cursor;
    }
    m->outside += nb - i;
}

/* The k-th largest of v[0..n) (counting from 0; k < n), found in place
 * (Hoare's selection). */
static uint64_t kth_largest(uint64_t *v, size_t n, size_t k)
{
    ptrdiff_t lo = 0, hi = (ptrdiff_t)n - 1, want = (ptrdiff_t)k;
    while (lo < hi) {
        uint64_t pivot = v[lo + (hi - lo) / 2], t;
        ptrdiff_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] > pivot)
                i++;
            while (v[j] < pivot)
                j--;
            if (i <= j) {
                t = v[i], v[i] = v[j], v[j] = t;
                i++, j--;
            }
        }
        if (want <= j)
            hi = j;
        else if (want >= i)
            lo = i;
        else
            return v[want];
    }
    return v[want];
}

/* The largest CMB_TIMELINE_MOMENT_BLOCKS blocks in segments kept, in
 * address order (so by segment and offset); of equal sizes at the cut, the
 * lowest addresses. Without a sort: the blocks are in address order. */
static int keep_largest(cmb_timeline_moments *mo, cmb_timeline_moment *m, const cmb_live_block *b, size_t nb)
{
    size_t in = 0, want = CMB_TIMELINE_MOMENT_BLOCKS, above = 0, ties;
    uint64_t cut = 0; /* every block in a segment is kept while there are few */
    m->kept = malloc(want * sizeof *m->kept);
    if (!m->kept || grow((void **)&mo->sizes, &mo->sizes_cap, nb, sizeof *mo->sizes))
        return -1;
    for (size_t i = 0; i < nb; i++)
        if (b[i].seg != UINT32_MAX)
            mo->sizes[in++] = b[i].size;
    if (in > want) {
        cut = kth_largest(mo->sizes, in, want - 1);
        for (size_t i = 0; i < nb; i++)
            above += b[i].seg != UINT32_MAX && b[i].size > cut;
    }
    ties = want - above; /* the places left for blocks of the cut's size */
    for (size_t i = 0; i < nb && m->n_kept < want; i++) {
        if (b[i].seg == UINT32_MAX || b[i].size < cut)
            continue;
        if (in > want && b[i].size == cut) {
            if (!ties)
                continue;
            ties--;
        }
        m->kept[m->n_kept++] = (cmb_timeline_block){b[i].addr - m->seg[b[i].seg].start, b[i].size, b[i].seg};
    }
    return 0;
}

/* 0, or -1 out of host memory (m then holds nothing). */
static int take_moment(cmb_timeline_moments *mo, uint64_t op, const cmb_metered *mt, cmb_timeline_moment *m)
{
    memset(m, 0, sizeof *m);
    m->op = op;
    m->requested = mt->requested.current;
    m->reserved = mt->up->stats.held_current;
    long ns = walk_segments(mo, mt->up), nb = ns < 0 ? -1 : walk_blocks(mo, mt);
    if (nb < 0 || !(m->seg = calloc((size_t)ns + 1, sizeof *m->seg)))
        goto out_fail;
    m->n_seg = (size_t)ns;
    for (size_t i = 0; i < m->n_seg; i++)
        m->seg[i] = (cmb_timeline_segment){mo->segs[i].start, mo->segs[i].size, mo->segs[i].reserved_at, 0, 0, 0};
    m->blocks = (uint64_t)nb;
    place(m, mo->live, (size_t)nb);
    if (keep_largest(mo, m, mo->live, (size_t)nb))
        goto out_fail;
    return 0;

out_fail:
    moment_free(m);
    mo->failed = 1;
    return -1;
}

/* --- when moments are taken ------------------------------------------------------------------ */

/* Drops the moments off the doubled step, as thin_out does the samples. */
static void thin_moments(cmb_timeline_moments *mo)
{
    uint64_t step = mo->every * 2;
    size_t kept = 0;
    for (size_t i = 0; i < mo->n; i++) {
        if (mo->at[i].op % step == 0)
            mo->at[kept++] = mo->at[i];
        else
            moment_free(&mo->at[i]);
    }
    mo->n = kept;
    mo->every = step;
}

static void add_moment(cmb_timeline_moments *mo, uint64_t op, const cmb_metered *mt)
{
    if (!mo->at && !(mo->at = calloc(mo->max, sizeof *mo->at))) {
        mo->failed = 1;
        return;
    }
    if (mo->n == mo->max)
        thin_moments(mo);
    if (op % mo->every == 0 && take_moment(mo, op, mt, &mo->at[mo->n]) == 0)
        mo->n++;
}

void cmb_timeline_moments_observe(cmb_timeline_moments *mo, uint64_t op, int new_reserved_peak,
                                  const cmb_metered *mt)
{
    if (!mt->up || mo->failed || !mo->max)
        return;
    if (new_reserved_peak && (!mo->have_peak || op - mo->peak.op >= mo->peak_cost)) {
        cmb_timeline_moment m;
        if (take_moment(mo, op, mt, &m) == 0) {
            moment_free(&mo->peak);
            mo->peak = m;
            mo->have_peak = 1;
            mo->peak_cost = m.n_seg + m.blocks;
        }
    }
    if (op % mo->every == 0)
        add_moment(mo, op, mt);
}

void cmb_timeline_moments_finish(cmb_timeline_moments *mo, uint64_t op, const cmb_metered *mt)
{
    if (!mt->up || mo->failed || !mo->max || mo->have_end)
        return;
    if (take_moment(mo, op, mt, &mo->end) == 0)
        mo->have_end = 1;
}

/* --- the file --------------------------------------------------------------------------------- */

static int by_moment_op(const void *a, const void *b)
{
    uint64_t x = (*(const cmb_timeline_moment *const *)a)->op, y = (*(const cmb_timeline_moment *const *)b)->op;
    return (x > y) - (x < y);
}

/* fprintf to f, or with f NULL only the count of bytes it would write. */
static size_t emit(FILE *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = f ? vfprintf(f, fmt, ap) : vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    return n > 0 ? (size_t)n : 0;
}

/* Writes moment m to f (NULL: writes nothing); the bytes, so the file's
 * bound is known before anything is written. */
static size_t write_moment(FILE *f, const cmb_timeline_moment *m, const char *kind)
{
    size_t n = emit(f, "m %llu %s %lld %lld %llu %llu %zu %zu\n", (unsigned long long)m->op, kind,
                    (long long)m->requested, (long long)m->reserved, (unsigned long long)m->blocks,
                    (unsigned long long)m->outside, m->n_seg, m->n_kept);
    for (size_t i = 0; i < m->n_seg; i++) {
        const cmb_timeline_segment *g = &m->seg[i];
        n += emit(f, "s %llu %llu %llu %llu %llu %llu\n", (unsigned long long)g->start, (unsigned long long)g->size,
                  (unsigned long long)g->reserved_at, (unsigned long long)g->blocks, (unsigned long long)g->covered,
                  (unsigned long long)g->largest_free);
    }
    for (size_t i = 0; i < m->n_kept; i++)
        n += emit(f, "b %u %llu %llu\n", m->kept[i].seg, (unsigned long long)m->kept[i].offset,
                  (unsigned long long)m->kept[i].size);
    return n;
}

/* --- which moments are written ---------------------------------------------------------------- */

typedef struct written_moment {
    const cmb_timeline_moment *m;
    const char *kind;
    size_t bytes;
    int sample; /* 1: a sampled moment alone (may be left out); 0: the peak or the end */
} written_moment;

/* all[0..n) by operation into w: one entry per operation (the peak or the
 * end at a sampled moment is that moment); their count. The moments at
 * the peak and the end are always written. */
static size_t one_per_op(const cmb_timeline_moments *mo, const cmb_timeline_moment **all, size_t n,
                         uint64_t peak_op, written_moment *w)
{
    size_t nw = 0;
    for (size_t i = 0, j; i < n; i = j) {
        int end = 0, peak_moment = 0; /* the peak's moment may lie before the peak (see timeline.h) */
        for (j = i; j < n && all[j]->op == all[i]->op; j++) {
            end |= all[j] == &mo->end;
            peak_moment |= all[j] == &mo->peak;
        }
        int peak = all[i]->op == peak_op;
        w[nw].m = all[i];
        w[nw].kind = peak ? "peak_reserved" : end ? "end" : "sample";
        w[nw].sample = !peak && !end && !peak_moment;
        w[nw].bytes = write_moment(NULL, all[i], w[nw].kind);
        nw++;
    }
    return nw;
}

/* Whether w is written at step k (0: the peak and the end alone): a sample
 * at a multiple of k steps, as thin_moments keeps them. */
static int written_at(const cmb_timeline_moments *mo, const written_moment *w, uint64_t k)
{
    return !w->sample || (k && w->m->op % (mo->every * k) == 0);
}

/* The smallest power of two k such that the samples at every k-th step,
 * with the peak and the end, fit mo->file_max; 0 when
 * the peak and the end alone do not (then they are written alone). */
static uint64_t sample_stride(const cmb_timeline_moments *mo, const written_moment *w, size_t nw)
{
    uint64_t last = nw ? w[nw - 1].m->op : 0;
    for (uint64_t k = 1; mo->every * k <= 2 * last + 1; k *= 2) {
        size_t bytes = 0;
        for (size_t i = 0; i < nw; i++)
            if (written_at(mo, &w[i], k))
                bytes += w[i].bytes;
        if (bytes <= mo->file_max)
            return k;
    }
    return 0;
}

static void write_all(FILE *f, const cmb_timeline_moments *mo, const written_moment *w, size_t nw)
{
    uint64_t k = sample_stride(mo, w, nw);
    size_t samples = 0, written = 0;
    for (size_t i = 0; i < nw; i++) {
        samples += w[i].sample;
        written += w[i].sample && written_at(mo, &w[i], k);
    }
    fprintf(f, "# moments: %zu, every %llu ops (at most %zu), plus the reserved peak and the end; the largest %d "
               "live blocks of each placed\n", written, (unsigned long long)(mo->every * (k ? k : 1)), mo->max,
            CMB_TIMELINE_MOMENT_BLOCKS);
    if (written < samples)
        fprintf(f, "# %zu of %zu moments taken written: the file of a case stays under %zu KiB\n", written, samples,
                mo->file_max >> 10);
    fputs("# m op kind requested_bytes reserved_bytes blocks blocks_outside segments blocks_kept\n"
          "# s start size reservation blocks covered_bytes largest_free_bytes\n"
          "# b segment offset size\n", f);
    for (size_t i = 0; i < nw; i++)
        if (written_at(mo, &w[i], k))
            write_moment(f, w[i].m, w[i].kind);
}

int cmb_timeline_moments_write(const cmb_timeline_moments *mo, const char *path, const char *case_name,
                               uint64_t peak_op, char *err, size_t errlen)
{
    char tmp[1040];
    size_t n = 0;
    const cmb_timeline_moment **all = malloc((mo->n + 2) * sizeof *all);
    written_moment *w = malloc((mo->n + 2) * sizeof *w);
    if (!all || !w) {
        snprintf(err, errlen, "host out of memory");
        free(all);
        free(w);
        return -1;
    }
    if (mo->have_peak)
        all[n++] = &mo->peak;
    for (size_t i = 0; i < mo->n; i++)
        all[n++] = &mo->at[i];
    if (mo->have_end)
        all[n++] = &mo->end;
    if (n > 1)
        qsort(all, n, sizeof *all, by_moment_op); /* equal ops: the same state, written once */
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        free(all);
        free(w);
        return -1;
    }
    fprintf(f, "# cumembench segments\n# case: %s\n%s", case_name,
            mo->failed ? "# moments stopped early: host out of memory\n" : "");
    write_all(f, mo, w, one_per_op(mo, all, n, peak_op, w));
    free(all);
    free(w);
    if (ferror(f) | fclose(f)) {
        snprintf(err, errlen, "cannot write %s", tmp);
        unlink(tmp);
        return -1;
    }
    if (rename(tmp, path)) {
        snprintf(err, errlen, "cannot rename %s: %s", tmp, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}
