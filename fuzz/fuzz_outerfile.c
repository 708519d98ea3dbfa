/* Fuzz target: DiLoCo's outer state file (src/train/outerfile.c), read from memory for the
 * parameter count its header names (when small, so that inputs reach the body; else 1). An
 * accepted file holds n (2 + 3k) or n (3 + 4k) floats, exactly the size 1024 + 4 count, every
 * one finite. */
#include <math.h>

#include "fuzz_util.h"
#include "io/io_internal.h"
#include "train/checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n = 1;
    if (size >= 16 && !data[11] && !data[12] && !data[13] && !data[14] && !data[15])
        n = (size_t)data[8] | (size_t)data[9] << 8 | (size_t)data[10] << 16;
    if (n == 0)
        n = 1;
    FILE *f = fuzz_stream(data, size);
    float *x = NULL;
    size_t count = 0;
    vkg_status s = vkg__outerfile_read_stream(f, "outer.bin", size, n, &x, &count);
    fclose(f);
    if (s != VKG_OK) {
        FUZZ_REQUIRE(x == NULL && count == 0 && vkg_error_message()[0] != '\0');
        return 0;
    }
    size_t per = count / n;
    FUZZ_REQUIRE(count % n == 0 &&
                 ((per >= 2 && (per - 2) % 3 == 0) || (per >= 3 && (per - 3) % 4 == 0)));
    FUZZ_REQUIRE(size == VKG_FILE_HEADER_BYTES + 4 * (uint64_t)count);
    for (size_t i = 0; i < count; i++)
        FUZZ_REQUIRE(isfinite(x[i]));
    free(x);
    return 0;
}
