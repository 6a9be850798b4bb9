/* fuzz_results.c - libFuzzer target over the results store's readers
 * (harness/results.c): what --resume reads and repairs.
 *
 * The input is a run directory in one file: results.csv, then
 * "\n--json--\n", then results.json (a CSV that ends in a newline is
 * followed by an empty line). The target writes the two files into a
 * directory of its own and recovers it as --resume does. Oracles: when
 * recovery keeps the directory, results.json is strict JSON ending in its
 * closing, results.csv reads whole as this version's (no torn line, no NUL),
 * every finished case is found, and a second recovery is a no-op (nothing
 * left to repair, the same cases); a document cmb_results_parse_json
 * accepts reads back equal from jansson's own dump. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/results.h"

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_results: invariant broken: %s\n", what);
        abort();
    }
}

static char work_dir[64];

/* The directory's files (flat: the inputs and what the checks wrote), then itself. */
static void remove_dir(void)
{
    DIR *d = opendir(work_dir);
    struct dirent *e;
    char path[384];
    while (d && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(path, sizeof path, "%s/%s", work_dir, e->d_name);
            unlink(path);
        }
    }
    if (d)
        closedir(d);
    rmdir(work_dir);
}

static const char *dir(void)
{
    if (!work_dir[0]) {
        snprintf(work_dir, sizeof work_dir, "/tmp/fuzz-results-XXXXXX");
        check(mkdtemp(work_dir) != NULL, "a directory to work in");
        atexit(remove_dir);
    }
    return work_dir;
}

static void put(const char *file, const uint8_t *data, size_t len)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir(), file);
    FILE *f = fopen(path, "wb");
    check(f && fwrite(data, 1, len, f) == len && fclose(f) == 0, "writing the input");
}

static int count_row(const char *const *f, size_t at, void *ctx)
{
    (void)at;
    check(cmb_results_is_done(ctx, f[CMB_COL_CASE]), "every case of the kept CSV is a finished case");
    return 0;
}

static void check_kept(const cmb_results_cases *c)
{
    char path[128], err[512];
    json_error_t e;
    cmb_results_cases again;
    snprintf(path, sizeof path, "%s/results.json", dir());
    json_t *doc = json_load_file(path, 0, &e);
    check(doc != NULL, "a kept results.json is strict JSON");
    json_decref(doc);
    check(cmb_results_read_csv(dir(), CMB_RESULTS_THIS_VERSION, count_row, (void *)c, NULL, err, sizeof err) == 0,
          "a kept results.csv reads whole");
    check(cmb_results_recover(dir(), &again, err, sizeof err) == 0, "a kept directory recovers again");
    check(!again.csv_repaired && !again.json_dropped && !again.json_repaired, "a second recovery repairs nothing");
    check(again.n_done == c->n_done, "a second recovery keeps the same cases");
    cmb_results_cases_free(&again);
}

static void check_parse(const char *text, size_t len)
{
    char err[256];
    int how;
    json_t *doc = cmb_results_parse_json(text, len, &how, err, sizeof err);
    if (!doc)
        return;
    char *dumped = json_dumps(doc, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_error_t e;
    json_t *back = dumped ? json_loads(dumped, 0, &e) : NULL;
    check(back && json_equal(doc, back), "an accepted document reads back equal");
    json_decref(back);
    free(dumped);
    json_decref(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char sep[] = "\n--json--\n";
    char err[512];
    cmb_results_cases c;
    const uint8_t *at = memmem(data, size, sep, sizeof sep - 1);
    if (!at)
        return 0;
    size_t csv_len = (size_t)(at - data), json_at = csv_len + sizeof sep - 1;
    put("results.csv", data, csv_len);
    put("results.json", data + json_at, size - json_at);
    check_parse((const char *)data + json_at, size - json_at);
    if (cmb_results_recover(dir(), &c, err, sizeof err) == 0) {
        check_kept(&c);
        cmb_results_cases_free(&c);
    } else {
        check(err[0] != '\0', "a refusal says why");
    }
    return 0;
}
