/* A main for the fuzz targets without libFuzzer: runs LLVMFuzzerTestOneInput once on every file
 * named on the command line (a directory: on every file in it), so the seed corpora, and with them
 * the input of every fixed finding, are replayed by ctest in the normal build (with any compiler).
 * A broken promise aborts, which fails the test. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_util.h"

/* Weak: only some targets define it. */
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

static long replayed;

static void run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(1);
    }
    size_t cap = 4096, n = 0, got;
    unsigned char *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0)
        if ((n += got) == cap)
            buf = realloc(buf, cap *= 2);
    fclose(f);
    if (!buf) {
        fprintf(stderr, "%s: out of memory\n", path);
        exit(1);
    }
    /* an exact-size copy, so ASan sees a read past the input's end */
    unsigned char *exact = malloc(n ? n : 1);
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    replayed++;
}

static void run_path(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        perror(path);
        exit(1);
    }
    if (!S_ISDIR(sb.st_mode)) {
        run_file(path);
        return;
    }
    struct dirent **names = NULL;
    int n = scandir(path, &names, NULL, alphasort);
    if (n < 0) {
        perror(path);
        exit(1);
    }
    for (int i = 0; i < n; i++) {
        if (names[i]->d_name[0] != '.') {
            char sub[4096];
            snprintf(sub, sizeof sub, "%s/%s", path, names[i]->d_name);
            run_path(sub);
        }
        free(names[i]);
    }
    free(names);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++)
        run_path(argv[i]);
    printf("%ld inputs replayed, no finding\n", replayed);
    return replayed > 0 ? 0 : 1;
}
