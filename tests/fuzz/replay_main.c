/* replay_main.c - runs a fuzz target's entry point over every file of its
 * committed corpus, without libFuzzer: the corpus (seeds and the inputs
 * fuzzing found, crashes included once fixed) becomes a regression test of
 * the normal build, and of the sanitizer build in .ci/run.
 *
 *   replay_<target> DIR...   exit 0 when every input passes */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t cap = 1 << 16, n = 0, r;
    uint8_t *buf = malloc(cap);
    while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            uint8_t *grown = realloc(buf, cap *= 2);
            if (!grown) {
                free(buf);
                buf = NULL;
            }
            buf = grown;
        }
    }
    fclose(f);
    if (!buf)
        return -1;
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    size_t inputs = 0;
    for (int i = 1; i < argc; i++) {
        DIR *d = opendir(argv[i]);
        struct dirent *e;
        if (!d) {
            fprintf(stderr, "replay: cannot open %s\n", argv[i]);
            return 2;
        }
        while ((e = readdir(d))) {
            char path[4096];
            if (e->d_name[0] == '.')
                continue;
            snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
            if (replay_file(path)) {
                fprintf(stderr, "replay: cannot read %s\n", path);
                closedir(d);
                return 2;
            }
            inputs++;
        }
        closedir(d);
    }
    printf("replay: %zu inputs passed\n", inputs);
    return inputs ? 0 : 2;
}
