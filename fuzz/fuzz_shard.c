/* Fuzz target: llm.c token shards (src/io/shard.c), read from memory. An accepted shard holds
 * exactly its header plus the declared tokens. */
#include "fuzz_util.h"
#include "io/io_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FILE *f = fuzz_stream(data, size);
    uint16_t *tokens = NULL;
    size_t ntok = 0;
    vkg_status st = vkg__shard_read_stream(f, "shard.bin", size, &tokens, &ntok);
    fclose(f);
    if (st != VKG_OK) {
        FUZZ_REQUIRE(tokens == NULL && vkg_error_message()[0] != '\0');
        return 0;
    }
    FUZZ_REQUIRE(size == VKG_FILE_HEADER_BYTES + 2 * ntok);
    for (size_t i = 0; i < ntok; i++) /* the tokens are the file's bytes, little-endian */
        FUZZ_REQUIRE(tokens[i] == (data[VKG_FILE_HEADER_BYTES + 2 * i] |
                                   data[VKG_FILE_HEADER_BYTES + 2 * i + 1] << 8));
    free(tokens);
    return 0;
}
