/* Fuzz target: encoder.json (src/base/json.c and the encoder loading of src/data/bpe.c), parsed
 * from memory beside the fixed vocab.bpe of fuzz/vocab_small. An accepted vocabulary must encode
 * and decode the input itself losslessly (every byte has a token, every id is in range). */
#include "fuzz_bpe.h"

static fuzz_file merges;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    merges = fuzz_read_source_file("fuzz/vocab_small/vocab.bpe");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *m = fuzz_copy(merges.data, merges.size);
    vkg__bpe *b = NULL;
    vkg_status st =
        vkg__bpe_parse("encoder.json", (const char *)data, size, "vocab.bpe", m, merges.size, &b);
    free(m);
    if (st != VKG_OK) {
        FUZZ_REQUIRE(b == NULL && vkg_error_message()[0] != '\0');
        return 0;
    }
    fuzz_bpe_roundtrip(b, (const char *)data, size);
    vkg__bpe_free(b);
    return 0;
}
