/* Helpers shared by the fuzz targets: the libFuzzer entry points' prototypes, an in-memory stream
 * over the input for the parsers that read a FILE, and a check that aborts (a finding for
 * libFuzzer) when a parser accepted an input but broke one of its own promises. */
#ifndef VKG_FUZZ_UTIL_H
#define VKG_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A read-only stream over the input (glibc's fmemopen reads and never writes the buffer). */
static inline FILE *fuzz_stream(const uint8_t *data, size_t size)
{
    static char empty[1];
    FILE *f = fmemopen(size ? (void *)(uintptr_t)data : empty, size, "rb");
    if (!f) {
        perror("fmemopen");
        abort();
    }
    return f;
}

#define FUZZ_REQUIRE(cond)                                                                         \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: the parser accepted an input that breaks: %s\n", __FILE__,     \
                    __LINE__, #cond);                                                              \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
