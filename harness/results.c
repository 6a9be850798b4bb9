/* results.c - the results store (see results.h). */
#define _GNU_SOURCE
#include "results.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/cmb_io.h"

#define LOCK_FILE "run.lock"
#define CSV_FILE "results.csv"
#define JSON_FILE "results.json"
#define JSON_FLAGS (JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17))

static const char JSON_CLOSING[] = "\n  ]\n}\n";
#define CLOSING_LEN (sizeof JSON_CLOSING - 1)

/* --- files ------------------------------------------------------------------------------------ */

static void path_of(char *out, size_t len, const char *dir, const char *file)
{
    snprintf(out, len, "%s/%s", dir, file);
}

static char *read_whole(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    char *buf = NULL;
    if (fd < 0 || fstat(fd, &st) || !(buf = malloc((size_t)st.st_size + 1)))
        goto out_fail;
    size_t n = 0;
    while (n < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + n, (size_t)st.st_size - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    *len = n;
    return buf;

out_fail:
    if (fd >= 0)
        close(fd);
    free(buf);
    return NULL;
}

static int pwrite_all(int fd, const char *p, size_t left, off_t at)
{
    while (left) {
        ssize_t w = pwrite(fd, p, left, at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = ENOSPC;
            return -1;
        }
        p += w;
        left -= (size_t)w;
        at += w;
    }
    return 0;
}

/* A rename is durable once its directory is synced. */
static void sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* Replaces dir/file with text: a temporary, fsync, rename. The old file
 * stays whole until the rename, whatever fails. */
static int replace_file(const char *dir, const char *file, const char *text, size_t len, char *err, size_t errlen)
{
    char path[PATH_MAX], tmp[PATH_MAX];
    path_of(path, sizeof path, dir, file);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        return -1;
    }
    int bad = cmb_write_all(fd, text, len) || fsync(fd);
    int saved = errno;
    bad |= close(fd) != 0;
    if (bad || rename(tmp, path)) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(bad ? saved : errno));
        unlink(tmp);
        return -1;
    }
    sync_dir(dir);
    return 0;
}

static int exists(const char *dir, const char *file)
{
    char path[PATH_MAX];
    struct stat st;
    path_of(path, sizeof path, dir, file);
    return stat(path, &st) == 0;
}

static int mkdir_p(const char *path)
{
    char tmp[CMB_RESULTS_DIR_MAX + 1];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0777) && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(tmp, 0777) && errno != EEXIST ? -1 : 0;
}

/* --- the directory and its lock ------------------------------------------------------------------- */

int cmb_results_check_dir(const char *dir, char *err, size_t errlen)
{
    size_t n = strlen(dir);
    if (n == 0 || n > CMB_RESULTS_DIR_MAX) {
        snprintf(err, errlen, "the output directory's path is %zu characters long; it must have 1 to %d", n,
                 CMB_RESULTS_DIR_MAX);
        return -1;
    }
    return 0;
}

static void store_init(cmb_results *s, const char *dir)
{
    memset(s, 0, sizeof *s);
    s->lock_fd = s->csv_fd = s->json_fd = -1;
    snprintf(s->dir, sizeof s->dir, "%s", dir);
}

static int same_file(int fd, const char *path)
{
    struct stat a, b;
    return !fstat(fd, &a) && !stat(path, &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* The lock is held for the life of the store and run.lock removed while
 * it is held; a lock taken on a file another writer has just removed is
 * not the directory's: taken again on the file now there. */
int cmb_results_lock(cmb_results *s, const char *dir, char *err, size_t errlen)
{
    char path[PATH_MAX], pid[32] = "";
    if (cmb_results_check_dir(dir, err, errlen))
        return -1;
    store_init(s, dir);
    path_of(path, sizeof path, dir, LOCK_FILE);
    for (int tries = 0; tries < 100; tries++) {
        s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (s->lock_fd < 0) {
            snprintf(err, errlen, "output directory %s is not writable: %s", dir, strerror(errno));
            return -1;
        }
        if (flock(s->lock_fd, LOCK_EX | LOCK_NB))
            break;
        if (same_file(s->lock_fd, path)) {
            int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
            if (ftruncate(s->lock_fd, 0) == 0)
                (void)!pwrite(s->lock_fd, pid, (size_t)n, 0);
            return 0;
        }
        close(s->lock_fd);
        s->lock_fd = -1;
    }
    ssize_t n = pread(s->lock_fd, pid, sizeof pid - 1, 0);
    pid[n > 0 ? strcspn(pid, "\n") : 0] = '\0';
    snprintf(err, errlen, "%s is being written by another cumembench (pid %s): two writers would mix their "
                          "results; wait for it to end, or give another --out", dir, pid[0] ? pid : "unknown");
    close(s->lock_fd);
    s->lock_fd = -1;
    return -1;
}

/* Removes run.lock while it is still held, then gives the lock back. */
static void unlock(cmb_results *s)
{
    char path[PATH_MAX];
    if (s->lock_fd < 0)
        return;
    path_of(path, sizeof path, s->dir, LOCK_FILE);
    if (same_file(s->lock_fd, path))
        unlink(path);
    close(s->lock_fd);
    s->lock_fd = -1;
}

/* --- CSV ---------------------------------------------------------------------------------------- */

static int grow(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t ncap = *cap ? *cap : 4096;
    while (ncap < need)
        ncap *= 2;
    char *grown = realloc(*buf, ncap);
    if (!grown)
        return -1;
    *buf = grown;
    *cap = ncap;
    return 0;
}

/* Quotes a field holding , or " (doubling the "); a newline becomes a
 * space, so every row is one line. */
static int csv_field(char **buf, size_t *len, size_t *cap, const char *text, int last)
{
    if (grow(buf, cap, *len + 2 * strlen(text) + 4))
        return -1;
    int quote = strpbrk(text, ",\"\n\r") != NULL;
    char *o = *buf + *len;
    if (quote)
        *o++ = '"';
    for (const char *p = text; *p; p++) {
        if (*p == '"')
            *o++ = '"';
        *o++ = (*p == '\n' || *p == '\r') ? ' ' : *p;
    }
    if (quote)
        *o++ = '"';
    *o++ = last ? '\n' : ',';
    *len = (size_t)(o - *buf);
    return 0;
}

int cmb_results_csv_row(char **buf, size_t *len, size_t *cap, const char *const fields[CMB_N_COLS])
{
    for (size_t i = 0; i < CMB_N_COLS; i++)
        if (csv_field(buf, len, cap, fields[i] ? fields[i] : "", i + 1 == CMB_N_COLS))
            return -1;
    return 0;
}

/* Splits one line (as csv_field writes them) in place: the number of
 * fields, or -1 when it does not parse (a quote left open, text after a
 * closing quote, more than `max` fields). */
static int split_line(char *p, char **f, int max)
{
    for (int n = 0; n < max;) {
        char *o = p;
        f[n++] = p;
        if (*p == '"') {
            for (p++;; p++) {
                if (*p == '\0')
                    return -1;
                if (*p == '"' && p[1] != '"')
                    break;
                *o++ = *p;
                p += *p == '"';
            }
            p++;
            if (*p != ',' && *p != '\0')
                return -1;
        } else {
            while (*p && *p != ',' && *p != '"')
                *o++ = *p++;
            if (*p == '"')
                return -1;
        }
        int more = *p == ',';
        *o = '\0';
        if (!more)
            return n;
        p++;
    }
    return -1;
}

/* The header: a prefix of schema.def's columns, at least the first
 * thirteen (columns are only appended). The number of columns, or -1. */
static int read_header(char *line, unsigned flags)
{
    char *f[CMB_N_COLS + 1];
    int n = split_line(line, f, CMB_N_COLS + 1);
    if (n < CMB_FIRST_COLS || n > CMB_N_COLS)
        return -1; /* more columns than this version knows: another version's file */
    for (int i = 0; i < n; i++) {
        const char *name = cmb_col_name(i);
        if (!name || strcmp(f[i], name))
            return -1;
    }
    return (flags & CMB_RESULTS_THIS_VERSION) && n != CMB_N_COLS ? -1 : n;
}

typedef struct csv_walk {
    const char *path;
    char *text;
    size_t len, end;
    int ncols;
} csv_walk;

static int walk_rows(csv_walk *w, size_t at, cmb_results_row_fn fn, void *ctx, char *err, size_t errlen)
{
    const char *row[CMB_N_COLS];
    char *f[CMB_N_COLS + 1];
    for (int line = 2; at < w->end; line++) {
        char *nl = memchr(w->text + at, '\n', w->end - at);
        *nl = '\0';
        int n = split_line(w->text + at, f, CMB_N_COLS + 1);
        if (n != w->ncols) {
            snprintf(err, errlen, "%s:%d: the row does not parse into the header's %d fields: %.80s", w->path,
                     line, w->ncols, w->text + at);
            return -1;
        }
        for (int i = 0; i < CMB_N_COLS; i++)
            row[i] = i < n ? f[i] : "";
        int rc = fn(row, at, ctx);
        if (rc)
            return rc;
        at = (size_t)(nl - w->text) + 1;
    }
    return 0;
}

static int check_csv_text(csv_walk *w, unsigned flags, size_t *header_end, char *err, size_t errlen)
{
    const char *nul = memchr(w->text, '\0', w->len);
    char *nl = memchr(w->text, '\n', w->len);
    if (nul) {
        snprintf(err, errlen, "%s holds a NUL byte at offset %zu: it is not a file this suite wrote", w->path,
                 (size_t)(nul - w->text));
        return -1;
    }
    if (nl)
        *nl = '\0';
    if (!nl || (w->ncols = read_header(w->text, flags)) < 0) {
        snprintf(err, errlen, "%s does not start with %s CSV header of harness/schema.def%s", w->path,
                 flags & CMB_RESULTS_THIS_VERSION ? "this version's" : "a",
                 flags & CMB_RESULTS_THIS_VERSION ? ": a run of another version of the suite cannot be resumed" : "");
        return -1;
    }
    *header_end = (size_t)(nl - w->text) + 1;
    w->end = w->len;
    while (w->end > *header_end && w->text[w->end - 1] != '\n')
        w->end--;
    if (w->end != w->len && !(flags & CMB_RESULTS_TORN_OK)) {
        snprintf(err, errlen, "%s ends in the middle of a row (an interrupted run: --resume repairs it)", w->path);
        return -1;
    }
    return 0;
}

int cmb_results_read_csv(const char *dir, unsigned flags, cmb_results_row_fn fn, void *ctx, size_t *torn,
                         char *err, size_t errlen)
{
    char path[PATH_MAX];
    size_t header_end;
    path_of(path, sizeof path, dir, CSV_FILE);
    csv_walk w = {.path = path};
    if (!(w.text = read_whole(path, &w.len))) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    int rc = check_csv_text(&w, flags, &header_end, err, errlen);
    if (!rc)
        rc = walk_rows(&w, header_end, fn, ctx, err, errlen);
    if (torn)
        *torn = w.end;
    free(w.text);
    return rc;
}

/* --- JSON ------------------------------------------------------------------------------------- */

json_t *cmb_results_number(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* The value's text, every line after the first indented by `by` spaces. */
static char *dump_indented(const json_t *v, int by, size_t *len)
{
    char *raw = json_dumps(v, JSON_FLAGS);
    size_t lines = 1, n = raw ? strlen(raw) : 0;
    for (size_t i = 0; i < n; i++)
        lines += raw[i] == '\n';
    char *out = raw ? malloc(n + lines * (size_t)by + 1) : NULL;
    char *o = out;
    for (size_t i = 0; out && i < n; i++) {
        *o++ = raw[i];
        if (raw[i] == '\n')
            for (int k = 0; k < by; k++)
                *o++ = ' ';
    }
    if (out) {
        *o = '\0';
        *len = (size_t)(o - out);
    }
    free(raw);
    return out;
}

/* The entries as they follow the list's '[' (n_before entries already
 * there): "\n    {...}" for the first, ",\n    {...}" after it. */
static int entries_text(json_t *entries, size_t n_before, char **buf, size_t *len, size_t *cap)
{
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e) {
        size_t n;
        char *text = dump_indented(e, 4, &n);
        if (!text || grow(buf, cap, *len + n + 8)) {
            free(text);
            return -1;
        }
        *len += (size_t)sprintf(*buf + *len, "%s    ", n_before + i ? ",\n" : "\n");
        memcpy(*buf + *len, text, n);
        *len += n;
        free(text);
    }
    return 0;
}

/* The whole document, as the library's reporter lays it out; *head: the
 * bytes before the closing. */
static char *document_text(json_t *context, json_t *entries, size_t *len, size_t *head)
{
    size_t n, cap = 0;
    char *ctx = dump_indented(context, 2, &n), *buf = NULL;
    *len = 0;
    if (!ctx || grow(&buf, &cap, n + 64))
        goto out_fail;
    *len = (size_t)sprintf(buf, "{\n  \"context\": %s,\n  \"benchmarks\": [", ctx);
    if (entries_text(entries, 0, &buf, len, &cap) || grow(&buf, &cap, *len + CLOSING_LEN + 1))
        goto out_fail;
    *head = *len;
    memcpy(buf + *len, JSON_CLOSING, CLOSING_LEN + 1);
    *len += CLOSING_LEN;
    free(ctx);
    return buf;

out_fail:
    free(ctx);
    free(buf);
    return NULL;
}

static int write_document(const char *dir, json_t *context, json_t *entries, size_t *head, char *err,
                          size_t errlen)
{
    size_t len;
    char *text = document_text(context, entries, &len, head);
    if (!text) {
        snprintf(err, errlen, "host out of memory");
        return -1;
    }
    int rc = replace_file(dir, JSON_FILE, text, len, err, errlen);
    free(text);
    return rc;
}

/* --- create / reopen / append / close ------------------------------------------------------------- */

/* 1 when the list holds an entry: the last byte before the closing that
 * is not a space is not its '['. */
static size_t list_has_entries(const cmb_results *s)
{
    char tail[64];
    off_t from = s->json_len > (off_t)sizeof tail ? s->json_len - (off_t)sizeof tail : 0;
    ssize_t n = pread(s->json_fd, tail, (size_t)(s->json_len - from), from);
    while (n > 0 && strchr(" \n\t\r", tail[n - 1]))
        n--;
    return n > 0 && tail[n - 1] != '[';
}

static int open_for_append(cmb_results *s, char *err, size_t errlen)
{
    char path[PATH_MAX];
    struct stat st;
    path_of(path, sizeof path, s->dir, JSON_FILE);
    if ((s->json_fd = open(path, O_RDWR | O_CLOEXEC)) < 0 || fstat(s->json_fd, &st) ||
        st.st_size < (off_t)CLOSING_LEN) {
        snprintf(err, errlen, "cannot append to %s: %s", path, strerror(errno ? errno : EINVAL));
        return -1;
    }
    s->json_len = st.st_size - (off_t)CLOSING_LEN;
    s->n_entries = list_has_entries(s);
    path_of(path, sizeof path, s->dir, CSV_FILE);
    if ((s->csv_fd = open(path, O_WRONLY | O_CLOEXEC)) < 0 || fstat(s->csv_fd, &st)) {
        snprintf(err, errlen, "cannot append to %s: %s", path, strerror(errno));
        return -1;
    }
    s->csv_len = st.st_size;
    return 0;
}

static void remove_new_files(const char *dir)
{
    char path[PATH_MAX];
    path_of(path, sizeof path, dir, JSON_FILE);
    unlink(path);
    path_of(path, sizeof path, dir, CSV_FILE);
    unlink(path);
}

int cmb_results_create(cmb_results *s, const char *dir, json_t *context, char *err, size_t errlen)
{
    size_t head;
    json_t *none = json_array();
    if (cmb_results_check_dir(dir, err, errlen))
        goto out_none;
    if (mkdir_p(dir)) {
        snprintf(err, errlen, "cannot create output directory %s: %s", dir, strerror(errno));
        goto out_none;
    }
    if (cmb_results_lock(s, dir, err, errlen))
        goto out_none;
    if (exists(dir, JSON_FILE) || exists(dir, CSV_FILE)) {
        snprintf(err, errlen, "%s already holds results; give another --out, or continue it with --resume %s", dir,
                 dir);
        goto out_unlock;
    }
    if (!none || write_document(dir, context, none, &head, err, errlen) ||
        replace_file(dir, CSV_FILE, cmb_csv_header, cmb_csv_header_len, err, errlen) ||
        open_for_append(s, err, errlen))
        goto out_remove;
    json_decref(none);
    return 0;

out_remove:
    remove_new_files(dir);
out_unlock:
    cmb_results_close(s, NULL, 0);
out_none:
    json_decref(none);
    return -1;
}

int cmb_results_reopen(cmb_results *s, char *err, size_t errlen)
{
    if (open_for_append(s, err, errlen)) {
        if (s->json_fd >= 0)
            close(s->json_fd);
        s->json_fd = -1;
        return -1;
    }
    return 0;
}

/* Puts results.json back as it was before an append that failed. */
static int undo_json(cmb_results *s)
{
    return ftruncate(s->json_fd, s->json_len) || pwrite_all(s->json_fd, JSON_CLOSING, CLOSING_LEN, s->json_len) ||
                   fsync(s->json_fd)
               ? -1
               : 0;
}

static int fail_append(cmb_results *s, const char *file, int undo_csv, char *err, size_t errlen)
{
    int saved = errno;
    int bad = undo_csv && (ftruncate(s->csv_fd, s->csv_len) || fsync(s->csv_fd));
    bad |= undo_json(s);
    snprintf(err, errlen, "cannot append to %s/%s: %s%s", s->dir, file, strerror(saved),
             bad ? " (the files could not be put back: --resume repairs them)"
                 : " (the files hold every case before this one)");
    return -1;
}

int cmb_results_append(cmb_results *s, json_t *entries, const char *csv, size_t csv_len, char *err,
                       size_t errlen)
{
    size_t len = 0, cap = 0;
    char *body = NULL;
    if (entries_text(entries, s->n_entries, &body, &len, &cap) ||
        grow(&body, &cap, len + CLOSING_LEN + 1)) {
        free(body);
        snprintf(err, errlen, "host out of memory");
        return -1;
    }
    memcpy(body + len, JSON_CLOSING, CLOSING_LEN);
    int rc = 0;
    if (len && (pwrite_all(s->json_fd, body, len + CLOSING_LEN, s->json_len) || fsync(s->json_fd)))
        rc = fail_append(s, JSON_FILE, 0, err, errlen);
    else if (csv_len && (pwrite_all(s->csv_fd, csv, csv_len, s->csv_len) || fsync(s->csv_fd)))
        rc = fail_append(s, CSV_FILE, 1, err, errlen);
    if (!rc) {
        s->json_len += (off_t)len;
        s->n_entries += json_array_size(entries);
        s->csv_len += (off_t)csv_len;
    }
    free(body);
    return rc;
}

int cmb_results_close(cmb_results *s, char *err, size_t errlen)
{
    int rc = 0;
    if (s->json_fd >= 0 && close(s->json_fd))
        rc = -1;
    if (s->csv_fd >= 0 && close(s->csv_fd))
        rc = -1;
    if (rc && err && errlen)
        snprintf(err, errlen, "cannot close the result files in %s: %s", s->dir, strerror(errno));
    unlock(s);
    s->json_fd = s->csv_fd = -1;
    return rc;
}

/* --- reading results.json ------------------------------------------------------------------------- */

/* strlen(word) when s[0, n) starts with it, else 0 (s need not end in NUL). */
static size_t starts(const char *s, size_t n, const char *word)
{
    size_t w = strlen(word);
    return n >= w && !memcmp(s, word, w) ? w : 0;
}

/* Runs written before this store hold NaN, Infinity and -Infinity (the
 * library's reporter wrote them; JSON lacks them): they read as null.
 * *changed: 1 when there was one. */
static char *strict_copy(const char *s, size_t len, size_t *out_len, int *changed)
{
    char *out = malloc(2 * len + 1), *w = out;
    int in_string = 0;
    for (size_t i = 0; out && i < len;) {
        char ch = s[i++];
        size_t k = 0;
        if (in_string) {
            *w++ = ch;
            if (ch == '\\' && i < len)
                *w++ = s[i++];
            else
                in_string = ch != '"';
            continue;
        }
        in_string = ch == '"';
        const char *at = s + i - 1;
        size_t left = len - i + 1;
        k = starts(at, left, "-Infinity");
        k = k ? k : starts(at, left, "Infinity");
        k = k ? k : starts(at, left, "NaN");
        if (!k) {
            *w++ = ch;
            continue;
        }
        memcpy(w, "null", 4);
        w += 4;
        i += k - 1;
        *changed = 1;
    }
    if (out)
        *out_len = (size_t)(w - out);
    return out;
}

/* A tail torn by an interrupted append: the document up to its last whole
 * entry ("\n    }" ends one) or up to the list's '[', closed again. */
static json_t *load_torn(const char *t, size_t len)
{
    static const char entry_end[] = "\n    }", list[] = "\"benchmarks\": [";
    const char *open = memmem(t, len, list, sizeof list - 1);
    size_t min = open ? (size_t)(open - t) + sizeof list - 1 : len;
    char *buf = malloc(len + CLOSING_LEN + 1);
    json_t *doc = NULL;
    json_error_t e;
    for (size_t cut = len, tries = 0; buf && !doc && cut >= min && tries < 64;) {
        while (cut > min && memcmp(t + cut - (sizeof entry_end - 1), entry_end, sizeof entry_end - 1))
            cut--;
        memcpy(buf, t, cut);
        memcpy(buf + cut, JSON_CLOSING, CLOSING_LEN);
        doc = json_loadb(buf, cut + CLOSING_LEN, 0, &e);
        tries++;
        if (cut-- == min)
            break;
    }
    free(buf);
    return doc;
}

static int check_doc(json_t *doc, char *err, size_t errlen)
{
    json_t *list = json_object_get(doc, "benchmarks"), *e;
    size_t i;
    if (!json_is_object(doc) || !json_is_object(json_object_get(doc, "context")) || !json_is_array(list)) {
        snprintf(err, errlen, "no \"context\" object and \"benchmarks\" list");
        return -1;
    }
    json_array_foreach(list, i, e) {
        if (!json_is_string(json_object_get(e, "run_name"))) {
            snprintf(err, errlen, "entry %zu has no run_name", i);
            return -1;
        }
    }
    return 0;
}

json_t *cmb_results_parse_json(const char *text, size_t len, int *how, char *err, size_t errlen)
{
    const char *nul = memchr(text, '\0', len);
    size_t n;
    json_error_t e;
    *how = 0;
    if (nul) {
        snprintf(err, errlen, "a NUL byte at offset %zu", (size_t)(nul - text));
        return NULL;
    }
    char *t = strict_copy(text, len, &n, how);
    if (!t) {
        snprintf(err, errlen, "host out of memory");
        return NULL;
    }
    if (*how)
        *how = CMB_RESULTS_NON_NUMBERS;
    json_t *doc = json_loadb(t, n, 0, &e);
    if (!doc && (doc = load_torn(t, n)))
        *how |= CMB_RESULTS_TORN;
    free(t);
    if (!doc)
        snprintf(err, errlen, "%s (line %d)", e.text, e.line);
    else if (check_doc(doc, err, errlen))
        json_decref(doc), doc = NULL;
    return doc;
}

/* --- recovery: the finished cases ---------------------------------------------------------------- */

typedef struct name_list {
    char **v;
    size_t n, cap;
} name_list;

static int push_name(name_list *l, const char *name)
{
    if (l->n && !strcmp(l->v[l->n - 1], name))
        return 0; /* a case's rows follow each other */
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        char **grown = realloc(l->v, cap * sizeof *grown);
        if (!grown)
            return -1;
        l->v = grown;
        l->cap = cap;
    }
    if (!(l->v[l->n] = strdup(name)))
        return -1;
    l->n++;
    return 0;
}

/* Back to the first n names (what the list held before a case began). */
static void cut_names(name_list *l, size_t n)
{
    while (l->n > n)
        free(l->v[--l->n]);
}

static void free_names(name_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorts; a name twice (a case in two stretches) is returned, else NULL. */
static const char *sort_names(name_list *l)
{
    if (l->n)
        qsort(l->v, l->n, sizeof *l->v, cmp_str);
    for (size_t i = 1; i < l->n; i++)
        if (!strcmp(l->v[i - 1], l->v[i]))
            return l->v[i];
    return NULL;
}

static int has_name(const name_list *l, const char *name)
{
    return l->n && bsearch(&name, l->v, l->n, sizeof *l->v, cmp_str) != NULL;
}

typedef struct recovery {
    cmb_results_cases *c;
    const char *dir;
    name_list done, failed, needs_json; /* needs_json: cases with a row that is not "skipped" */
    size_t *rows, rows_cap;             /* rows of each case of `done`, in file order */
    size_t last_at, csv_end, csv_len;
    size_t last_failed, last_needs_json; /* the lists' lengths before the last case's first row */
    json_t *doc;
    int json_how;
} recovery;

static int on_row(const char *const *f, size_t at, void *ctx)
{
    recovery *r = ctx;
    const char *name = f[CMB_COL_CASE], *status = f[CMB_COL_STATUS];
    if (!r->c->run_id[0]) {
        snprintf(r->c->run_id, sizeof r->c->run_id, "%s", f[CMB_COL_RUN_ID]);
        snprintf(r->c->gpu, sizeof r->c->gpu, "%s", f[CMB_COL_GPU]);
        snprintf(r->c->mode, sizeof r->c->mode, "%s", f[CMB_COL_MODE]);
    }
    if (!r->done.n || strcmp(r->done.v[r->done.n - 1], name)) {
        if (r->done.n == r->rows_cap) {
            size_t cap = r->rows_cap ? 2 * r->rows_cap : 256;
            size_t *grown = realloc(r->rows, cap * sizeof *grown);
            if (!grown)
                return -2;
            r->rows = grown;
            r->rows_cap = cap;
        }
        r->rows[r->done.n] = 0;
        r->last_at = at;
        /* the same case in an earlier stretch is not pushed again, so
         * dropping the last case cuts back to these, never pops a name */
        r->last_failed = r->failed.n;
        r->last_needs_json = r->needs_json.n;
    }
    r->rows[r->done.n - (r->done.n && !strcmp(r->done.v[r->done.n - 1], name))]++;
    if (push_name(&r->done, name) || (strcmp(status, CMB_STATUS_SKIPPED) && push_name(&r->needs_json, name)) ||
        (!strcmp(status, CMB_STATUS_FAILED) && push_name(&r->failed, name)))
        return -2;
    return 0;
}

/* The names of the entries' keys that are not counters (the library's
 * reporter writes the same). */
static int is_counter(const char *key)
{
    static const char *const fixed[] = {
        "name",          "family_index",   "per_family_instance_index", "run_name",   "run_type",
        "repetitions",   "repetition_index", "threads",               "aggregate_name", "aggregate_unit",
        "error_occurred", "error_message", "skipped",                 "skip_message", "iterations",
        "real_time",     "cpu_time",       "time_unit",               "label",        NULL};
    for (size_t i = 0; fixed[i]; i++)
        if (!strcmp(key, fixed[i]))
            return 0;
    return 1;
}

/* The rows an entry makes in the CSV (harness/output.c): a repetition its
 * time, cpu time and counters, a failure one, an aggregate none. */
static size_t rows_of_entry(json_t *e)
{
    const char *key;
    json_t *v;
    size_t rows = 2;
    if (json_is_true(json_object_get(e, "error_occurred")))
        return 1;
    const char *type = json_string_value(json_object_get(e, "run_type"));
    if (type && !strcmp(type, "aggregate"))
        return 0;
    json_object_foreach(e, key, v) rows += is_counter(key);
    return rows;
}

/* Every case's rows against what its JSON entries make: only the last
 * case can be short (a crash cut its one write at a line boundary): it is
 * dropped (*drop_last); any other difference is damage, refused. */
static int check_rows(recovery *r, int *drop_last, char *err, size_t errlen)
{
    json_t *expect = json_object(), *e;
    size_t i;
    int rc = 0;
    json_array_foreach(json_object_get(r->doc, "benchmarks"), i, e) {
        const char *name = json_string_value(json_object_get(e, "run_name"));
        json_int_t had = json_integer_value(json_object_get(expect, name));
        json_object_set_new(expect, name, json_integer(had + (json_int_t)rows_of_entry(e)));
    }
    for (i = 0; i < r->done.n && !rc; i++) {
        json_t *want = json_object_get(expect, r->done.v[i]);
        if (!want || (size_t)json_integer_value(want) == r->rows[i])
            continue;
        if (i + 1 == r->done.n) {
            *drop_last = 1;
            break;
        }
        snprintf(err, errlen, "%s/results.csv holds %zu rows of case %.200s, its results.json entries make %lld: "
                              "the files were damaged",
                 r->dir, r->rows[i], r->done.v[i], (long long)json_integer_value(want));
        rc = -1;
    }
    json_decref(expect);
    return rc;
}

/* Drops the CSV's last case: a torn tail ends the file (that case's one
 * write was cut short), or its rows are fewer than its JSON entries make. */
static int cut_last_case(recovery *r, char *err, size_t errlen)
{
    char path[PATH_MAX];
    size_t len;
    int drop = r->csv_end != r->csv_len;
    const char *last = r->done.n ? r->done.v[r->done.n - 1] : NULL;
    if (check_rows(r, &drop, err, errlen))
        return -1;
    if (!drop)
        return 0;
    size_t keep = last ? r->last_at : r->csv_end;
    path_of(path, sizeof path, r->dir, CSV_FILE);
    char *text = read_whole(path, &len);
    int rc = text && keep <= len ? replace_file(r->dir, CSV_FILE, text, keep, err, errlen) : -1;
    if (!text || keep > len)
        snprintf(err, errlen, "cannot read %s again: %s", path, strerror(errno));
    free(text);
    if (last) {
        cut_names(&r->failed, r->last_failed);
        cut_names(&r->needs_json, r->last_needs_json);
        cut_names(&r->done, r->done.n - 1);
    }
    r->c->csv_repaired = 1;
    return rc;
}

/* Keeps the entries of finished cases: they come first (JSON is written
 * before CSV); an unfinished case's entries end the list. */
static json_t *keep_finished(recovery *r, char *err, size_t errlen)
{
    json_t *list = json_object_get(r->doc, "benchmarks"), *kept = json_array(), *e;
    size_t i, n_seen = 0;
    char *seen = calloc(r->needs_json.n + 1, 1);
    json_array_foreach(list, i, e) {
        const char *name = json_string_value(json_object_get(e, "run_name"));
        if (!has_name(&r->done, name)) {
            r->c->json_dropped++;
            continue;
        }
        if (r->c->json_dropped) {
            snprintf(err, errlen, "results.json and results.csv disagree: case %.200s follows a case the CSV does "
                                  "not hold", name);
            goto out_fail;
        }
        char **at = r->needs_json.n ? bsearch(&name, r->needs_json.v, r->needs_json.n, sizeof(char *), cmp_str) : NULL;
        if (at && seen && !seen[at - r->needs_json.v]++)
            n_seen++;
        json_array_append(kept, e);
    }
    for (i = 0; seen && n_seen < r->needs_json.n && i < r->needs_json.n; i++)
        if (!seen[i]) {
            snprintf(err, errlen, "results.csv holds case %.200s, which results.json lacks: the files were "
                                  "damaged", r->needs_json.v[i]);
            goto out_fail;
        }
    free(seen);
    return kept;

out_fail:
    free(seen);
    json_decref(kept);
    return NULL;
}

static int read_json(recovery *r, char *err, size_t errlen)
{
    char path[PATH_MAX], why[256];
    size_t len;
    path_of(path, sizeof path, r->dir, JSON_FILE);
    char *text = read_whole(path, &len);
    if (!text) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    r->doc = cmb_results_parse_json(text, len, &r->json_how, why, sizeof why);
    free(text);
    if (!r->doc) {
        snprintf(err, errlen, "%s is not a results file of this suite, or was damaged: %s", path, why);
        return -1;
    }
    return 0;
}

static int finish_json(recovery *r, char *err, size_t errlen)
{
    size_t head;
    const char *twice = sort_names(&r->done);
    if (twice) {
        snprintf(err, errlen, "%s/results.csv holds case %.200s twice: two runs wrote the directory", r->dir,
                 twice);
        return -1;
    }
    sort_names(&r->needs_json);
    sort_names(&r->failed);
    json_t *kept = keep_finished(r, err, errlen);
    if (!kept)
        return -1;
    r->c->json_repaired = r->json_how;
    r->c->context = json_incref(json_object_get(r->doc, "context"));
    int rc = 0;
    if (r->c->json_dropped || r->json_how)
        rc = write_document(r->dir, json_object_get(r->doc, "context"), kept, &head, err, errlen);
    json_decref(kept);
    return rc;
}

int cmb_results_recover(const char *dir, cmb_results_cases *c, char *err, size_t errlen)
{
    recovery r = {.c = c, .dir = dir};
    char path[PATH_MAX];
    struct stat st;
    memset(c, 0, sizeof *c);
    path_of(path, sizeof path, dir, CSV_FILE);
    int rc = stat(path, &st) ? -1 : 0;
    if (rc)
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
    r.csv_len = (size_t)st.st_size;
    if (!rc)
        rc = cmb_results_read_csv(dir, CMB_RESULTS_THIS_VERSION | CMB_RESULTS_TORN_OK, on_row, &r, &r.csv_end, err,
                                  errlen);
    if (rc == -2)
        snprintf(err, errlen, "host out of memory");
    if (!rc)
        rc = read_json(&r, err, errlen) || cut_last_case(&r, err, errlen) || finish_json(&r, err, errlen) ? -1 : 0;
    json_decref(r.doc);
    free(r.rows);
    free_names(&r.needs_json);
    c->n_failed = r.failed.n;
    free_names(&r.failed);
    c->done = r.done.v;
    c->n_done = r.done.n;
    if (rc)
        cmb_results_cases_free(c);
    return rc ? -1 : 0;
}

int cmb_results_is_done(const cmb_results_cases *c, const char *name)
{
    return c->n_done && bsearch(&name, c->done, c->n_done, sizeof *c->done, cmp_str) != NULL;
}

void cmb_results_cases_free(cmb_results_cases *c)
{
    for (size_t i = 0; i < c->n_done; i++)
        free(c->done[i]);
    free(c->done);
    json_decref(c->context);
    c->done = NULL;
    c->context = NULL;
    c->n_done = 0;
}
