/* Fuzz target: llm.c model files (src/io/modelfile.c), read from memory. An accepted file must
 * have a valid configuration, be exactly 1024 bytes plus its parameters at the version's precision,
 * and fill every parameter (ASan and the sum catch reads past the input or the array). */
#include "fuzz_util.h"
#include "io/io_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FILE *f = fuzz_stream(data, size);
    vkg_model_config cfg;
    float *params = NULL;
    vkg_status st = vkg__modelfile_read_stream(f, "model.bin", size, &cfg, &params);
    fclose(f);
    if (st != VKG_OK) {
        FUZZ_REQUIRE(params == NULL && vkg_error_message()[0] != '\0');
        return 0;
    }
    uint32_t version = data[4] | data[5] << 8 | (uint32_t)data[6] << 16 | (uint32_t)data[7] << 24;
    size_t n = vkg_model_num_params(&cfg), elem = version == 3 ? 4 : 2;
    FUZZ_REQUIRE(vkg_model_config_validate(&cfg) == VKG_OK);
    FUZZ_REQUIRE(version == 3 || version == 5);
    FUZZ_REQUIRE(size == VKG_FILE_HEADER_BYTES + n * elem);
    volatile float sum = 0.0f; /* touch every parameter: all must have been read */
    for (size_t i = 0; i < n; i++)
        sum += params[i];
    (void)sum;
    free(params);
    return 0;
}
