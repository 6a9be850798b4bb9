/* trace_reader.c - the suite's trace format and RMM's CSV log, streamed,
 * with a precise error for every malformed line. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/cmb_units.h"
#include "trace.h"

#define MAX_LINE 4096

static const char SUITE_HEADER[] = "# cumembench-trace 1";
static const char RMM_HEADER[] = "Thread,Time,Action,Pointer,Size,Stream";

/* --- errors and lines ------------------------------------------------------------- */

static int fail(cmb_trace_reader *r, char *err, size_t errlen, const char *fmt, ...)
{
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(err, errlen, "%s:%llu: %s", r->path, (unsigned long long)r->line, msg);
    return -1;
}

/* Reads the next line without its newline; 1, 0 at end, -1 on error. It
 * never holds more than MAX_LINE bytes: a longer line is refused at its
 * 4097th byte, not read whole first (a 1 GiB line took a gigabyte). */
static int read_line(cmb_trace_reader *r, char *err, size_t errlen)
{
    if (!r->buf && !(r->buf = malloc(MAX_LINE + 1)))
        return fail(r, err, errlen, "host out of memory");
    r->cap = MAX_LINE + 1;
    size_t n = 0;
    int ch = 0;
    while (n < MAX_LINE && (ch = getc_unlocked(r->f)) != EOF) {
        r->buf[n++] = (char)ch;
        if (ch == '\n')
            break;
    }
    if (n == 0)
        return ferror(r->f) ? fail(r, err, errlen, "read error: %s", strerror(errno)) : 0;
    r->line++;
    r->counts.lines++;
    r->buf[n] = '\0';
    if (memchr(r->buf, '\0', n))
        return fail(r, err, errlen, "binary data (a NUL byte) in a text trace");
    if (r->buf[n - 1] != '\n' && n == MAX_LINE && (ch = getc_unlocked(r->f)) != EOF)
        return fail(r, err, errlen, "line longer than %d bytes", MAX_LINE);
    if (ferror(r->f))
        return fail(r, err, errlen, "read error: %s", strerror(errno));
    if (r->buf[n - 1] != '\n')
        return fail(r, err, errlen, "truncated: the last line has no newline");
    r->buf[--n] = '\0';
    if (n && r->buf[n - 1] == '\r')
        r->buf[--n] = '\0';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)r->buf[i];
        if (c < 0x20 && c != '\t')
            return fail(r, err, errlen, "binary data (control byte 0x%02x)", c);
    }
    return 1;
}

/* --- slots ---------------------------------------------------------------------------- */

static int grow_slots(cmb_trace_reader *r)
{
    uint32_t cap = r->cap_slots ? r->cap_slots * 2 : 1024;
    uint64_t *sizes = realloc(r->slot_size, (size_t)cap * sizeof *sizes);
    if (!sizes)
        return -1;
    r->slot_size = sizes;
    uint32_t *stack = realloc(r->free_slots, (size_t)cap * sizeof *stack);
    if (!stack)
        return -1;
    r->free_slots = stack;
    r->cap_slots = cap;
    return 0;
}

/* Binds `key` (an id or pointer) to a new slot; -1 on host OOM, -2 when
 * the key is already live, -3 for 2^64-1, the one key the table cannot hold. */
static int bind_slot(cmb_trace_reader *r, uint64_t key, uint64_t size, uint32_t *slot)
{
    if (key == UINT64_MAX)
        return -3; /* the table's key is key + 1, and 0 is no key */
    if (cmb_hashmap_get(&r->key_to_slot, key + 1, NULL))
        return -2;
    if (r->n_free_slots) {
        *slot = r->free_slots[--r->n_free_slots];
    } else {
        if (r->n_slots == r->cap_slots && grow_slots(r))
            return -1;
        *slot = r->n_slots++;
    }
    if (cmb_hashmap_put(&r->key_to_slot, key + 1, (uint64_t)*slot + 1))
        return -1;
    r->slot_size[*slot] = size;
    uint64_t live = r->key_to_slot.count;
    if (live > r->counts.max_live_slots)
        r->counts.max_live_slots = live;
    return 0;
}

/* Releases the slot of `key`; 0, or -2 when the key is not live. */
static int release_slot(cmb_trace_reader *r, uint64_t key, uint32_t *slot, uint64_t *size)
{
    uint64_t v;
    if (!cmb_hashmap_remove(&r->key_to_slot, key + 1, &v))
        return -2;
    *slot = (uint32_t)(v - 1);
    *size = r->slot_size[*slot];
    r->free_slots[r->n_free_slots++] = *slot;
    return 0;
}

/* What a file that cannot be a trace is ("a character device"), or NULL
 * for a regular file or a pipe (a trace may be piped in). */
static const char *special_kind(int fd)
{
    struct stat st;
    if (fstat(fd, &st))
        return NULL; /* the first read says what is wrong */
    if (S_ISDIR(st.st_mode))
        return "a directory";
    if (S_ISCHR(st.st_mode))
        return "a character device";
    if (S_ISBLK(st.st_mode))
        return "a block device";
    if (S_ISSOCK(st.st_mode))
        return "a socket";
    return NULL;
}

/* --- open / close --------------------------------------------------------------------------- */

int cmb_trace_open(cmb_trace_reader *r, const char *path, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    snprintf(r->path, sizeof r->path, "%s", path);
    r->last_t = -1;
    r->rmm_t0 = -1;
    r->f = fopen(path, "r");
    if (!r->f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    const char *kind = special_kind(fileno(r->f));
    if (kind) { /* /dev/zero reads forever; a directory fails at its first read */
        snprintf(err, errlen, "%s: %s, not a trace file", path, kind);
        goto out_close;
    }
    if (cmb_hashmap_init(&r->key_to_slot, 1024) || grow_slots(r)) {
        snprintf(err, errlen, "%s: host out of memory", path);
        goto out_close;
    }
    int rc = read_line(r, err, errlen);
    if (rc == 0) {
        snprintf(err, errlen, "%s: empty file, not a trace", path);
        goto out_close;
    }
    if (rc < 0)
        goto out_close;
    if (!strcmp(r->buf, SUITE_HEADER)) {
        r->format = CMB_TRACE_SUITE;
    } else if (!strcmp(r->buf, RMM_HEADER)) {
        r->format = CMB_TRACE_RMM_CSV;
    } else {
        fail(r, err, errlen, "not a trace: expected '%s' or an RMM log header '%s'", SUITE_HEADER, RMM_HEADER);
        goto out_close;
    }
    return 0;

out_close:
    cmb_trace_close(r);
    return -1;
}

void cmb_trace_close(cmb_trace_reader *r)
{
    if (r->f)
        fclose(r->f);
    r->f = NULL;
    free(r->buf);
    free(r->slot_size);
    free(r->free_slots);
    if (r->key_to_slot.keys)
        cmb_hashmap_free(&r->key_to_slot);
    r->buf = NULL;
    r->slot_size = NULL;
    r->free_slots = NULL;
}

/* --- the suite's format ------------------------------------------------------------------------ */

static int split_ws(char *s, char **f, int max)
{
    int n = 0;
    while (*s) {
        while (*s == ' ' || *s == '\t')
            s++;
        if (!*s)
            break;
        if (n == max)
            return max + 1;
        f[n++] = s;
        while (*s && *s != ' ' && *s != '\t')
            s++;
        if (*s)
            *s++ = '\0';
    }
    return n;
}

static int parse_time(cmb_trace_reader *r, const char *s, int64_t *t, char *err, size_t errlen)
{
    int64_t v;
    if (!strcmp(s, "-")) {
        *t = -1;
        return 0;
    }
    if (cmb_parse_i64(s, &v) || v < 0)
        return fail(r, err, errlen, "bad time '%s' (nanoseconds, or -)", s);
    if (r->last_t >= 0 && v < r->last_t)
        return fail(r, err, errlen, "time goes backwards (%lld after %lld)", (long long)v, (long long)r->last_t);
    r->last_t = v;
    *t = v;
    return 0;
}

static int parse_stream(cmb_trace_reader *r, const char *s, int64_t *stream, char *err, size_t errlen)
{
    if (cmb_parse_i64(s, stream) || *stream < -1)
        return fail(r, err, errlen, "bad stream '%s'", s);
    return 0;
}

static int suite_event(cmb_trace_reader *r, char **f, cmb_trace_event *ev, char *err, size_t errlen)
{
    uint64_t id, size;
    int rc;
    if (strlen(f[0]) != 1 || !strchr("afs", f[0][0]))
        return fail(r, err, errlen, "unknown event '%s' (expected a, f or s)", f[0]);
    if (parse_stream(r, f[3], &ev->stream, err, errlen) || parse_time(r, f[4], &ev->t_ns, err, errlen))
        return -1;
    switch (f[0][0]) {
    case 'a':
        if (cmb_parse_u64(f[1], &id))
            return fail(r, err, errlen, "bad block id '%s'", f[1]);
        if (cmb_parse_u64(f[2], &size) || size == 0 || size > CMB_TRACE_MAX_SIZE)
            return fail(r, err, errlen, "bad size '%s' (1 to 2^48 bytes)", f[2]);
        rc = bind_slot(r, id, size, &ev->slot);
        if (rc == -2)
            return fail(r, err, errlen, "allocation of block %llu, which is still live", (unsigned long long)id);
        if (rc == -3)
            return fail(r, err, errlen, "block id %llu is out of range (at most 2^64-2)", (unsigned long long)id);
        if (rc)
            return fail(r, err, errlen, "host out of memory");
        ev->op = CMB_TRACE_ALLOC;
        ev->size = size;
        r->counts.allocs++;
        return 1;
    case 'f':
        if (cmb_parse_u64(f[1], &id))
            return fail(r, err, errlen, "bad block id '%s'", f[1]);
        if (strcmp(f[2], "-"))
            return fail(r, err, errlen, "a free has no size field (expected -)");
        if (release_slot(r, id, &ev->slot, &ev->size))
            return fail(r, err, errlen, "free of block %llu, which is not live (never allocated or already freed)",
                        (unsigned long long)id);
        ev->op = CMB_TRACE_FREE;
        r->counts.frees++;
        return 1;
    default:
        if (strcmp(f[1], "-") || strcmp(f[2], "-"))
            return fail(r, err, errlen, "a sync has no id or size (expected - -)");
        ev->op = CMB_TRACE_SYNC;
        r->counts.syncs++;
        return 1;
    }
}

static int next_suite(cmb_trace_reader *r, cmb_trace_event *ev, char *err, size_t errlen)
{
    for (;;) {
        int rc = read_line(r, err, errlen);
        if (rc <= 0)
            return rc;
        char *p = r->buf;
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p || *p == '#')
            continue;
        char *f[6];
        int n = split_ws(p, f, 5);
        if (n != 5)
            return fail(r, err, errlen, "expected 5 fields 'op id size stream t_ns', found %d", n > 5 ? 6 : n);
        return suite_event(r, f, ev, err, errlen);
    }
}

/* --- RMM's logging_resource_adaptor CSV --------------------------------------------------------------- */

/* "HH:MM:SS.ffffff" -> nanoseconds since midnight */
static int parse_clock(const char *s, int64_t *ns)
{
    int h, m, sec, len = 0;
    if (sscanf(s, "%2d:%2d:%2d%n", &h, &m, &sec, &len) != 3 || len != 8 || h > 23 || m > 59 || sec > 60)
        return -1;
    int64_t frac = 0, scale = 1000000000;
    const char *p = s + 8;
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p))
            return -1;
        while (isdigit((unsigned char)*p)) {
            if (scale > 1) {
                scale /= 10;
                frac += (*p - '0') * scale;
            }
            p++;
        }
    }
    if (*p)
        return -1;
    *ns = ((int64_t)h * 3600 + m * 60 + sec) * 1000000000ll + frac;
    return 0;
}

static int parse_hex(const char *s, uint64_t *v)
{
    if (strncmp(s, "0x", 2) && strncmp(s, "0X", 2))
        return -1;
    if (!s[2])
        return -1;
    for (const char *p = s + 2; *p; p++)
        if (!isxdigit((unsigned char)*p))
            return -1;
    errno = 0;
    *v = strtoull(s, NULL, 16);
    return errno ? -1 : 0;
}

static int split_csv(char *s, char **f, int max)
{
    int n = 0;
    f[n++] = s;
    for (; *s; s++) {
        if (*s == ',') {
            if (n == max)
                return max + 1;
            *s = '\0';
            f[n++] = s + 1;
        }
    }
    return n;
}

static int rmm_time(cmb_trace_reader *r, const char *s, int64_t *t, char *err, size_t errlen)
{
    int64_t ns;
    if (parse_clock(s, &ns))
        return fail(r, err, errlen, "bad time '%s' (expected HH:MM:SS.ffffff)", s);
    if (r->rmm_t0 < 0)
        r->rmm_t0 = r->rmm_prev = ns;
    if (ns + r->rmm_day < r->rmm_prev - 3600ll * 1000000000ll)
        r->rmm_day += 86400ll * 1000000000ll; /* the log ran past midnight */
    ns += r->rmm_day;
    r->rmm_prev = ns;
    /* Threads log concurrently: keep times non-decreasing for the replay. */
    *t = ns - r->rmm_t0;
    if (*t < r->last_t)
        *t = r->last_t;
    r->last_t = *t;
    return 0;
}

static int rmm_event(cmb_trace_reader *r, char **f, cmb_trace_event *ev, char *err, size_t errlen)
{
    uint64_t thread, ptr, size, stream;
    if (cmb_parse_u64(f[0], &thread))
        return fail(r, err, errlen, "bad thread id '%s'", f[0]);
    if (rmm_time(r, f[1], &ev->t_ns, err, errlen))
        return -1;
    if (parse_hex(f[3], &ptr))
        return fail(r, err, errlen, "bad pointer '%s' (expected hex such as 0x7f00)", f[3]);
    if (cmb_parse_u64(f[4], &size) || size > CMB_TRACE_MAX_SIZE)
        return fail(r, err, errlen, "bad size '%s'", f[4]);
    if (parse_hex(f[5], &stream))
        return fail(r, err, errlen, "bad stream '%s' (expected hex such as 0x0)", f[5]);
    ev->stream = (int64_t)(stream & INT64_MAX);
    if (!strcmp(f[2], "allocate failure")) {
        r->counts.skipped_failures++;
        return 0;
    }
    if (!strcmp(f[2], "allocate")) {
        if (size == 0)
            return fail(r, err, errlen, "allocation of 0 bytes");
        int rc = bind_slot(r, ptr, size, &ev->slot);
        if (rc == -2)
            return fail(r, err, errlen, "pointer %s allocated again while still live", f[3]);
        if (rc == -3)
            return fail(r, err, errlen, "pointer %s is out of range", f[3]);
        if (rc)
            return fail(r, err, errlen, "host out of memory");
        ev->op = CMB_TRACE_ALLOC;
        ev->size = size;
        r->counts.allocs++;
        return 1;
    }
    if (!strcmp(f[2], "free")) {
        if (release_slot(r, ptr, &ev->slot, &ev->size)) {
            r->counts.unknown_frees++; /* allocated before the log began */
            return 0;
        }
        ev->op = CMB_TRACE_FREE;
        r->counts.frees++;
        return 1;
    }
    return fail(r, err, errlen, "unknown action '%s' (expected allocate, free or allocate failure)", f[2]);
}

static int next_rmm(cmb_trace_reader *r, cmb_trace_event *ev, char *err, size_t errlen)
{
    for (;;) {
        int rc = read_line(r, err, errlen);
        if (rc <= 0)
            return rc;
        if (!r->buf[0])
            continue;
        char *f[7];
        int n = split_csv(r->buf, f, 6);
        if (n != 6)
            return fail(r, err, errlen, "expected 6 comma-separated fields, found %d", n > 6 ? 7 : n);
        rc = rmm_event(r, f, ev, err, errlen);
        if (rc != 0)
            return rc;
    }
}

int cmb_trace_next(cmb_trace_reader *r, cmb_trace_event *ev, char *err, size_t errlen)
{
    memset(ev, 0, sizeof *ev);
    int rc = r->format == CMB_TRACE_SUITE ? next_suite(r, ev, err, errlen) : next_rmm(r, ev, err, errlen);
    if (rc == 1)
        r->counts.events++;
    return rc;
}
