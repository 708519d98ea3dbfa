/* Fuzz target: vocab.bpe (the merge loading of src/data/bpe.c), parsed from memory beside the
 * fixed encoder.json of fuzz/vocab_small. Accepted merges must encode and decode the input itself
 * losslessly, whatever their order (the encoder's heap must never merge a stale pair). */
#include "fuzz_bpe.h"

static fuzz_file encoder;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    encoder = fuzz_read_source_file("fuzz/vocab_small/encoder.json");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *m = fuzz_copy(data, size);
    vkg__bpe *b = NULL;
    vkg_status st =
        vkg__bpe_parse("encoder.json", encoder.data, encoder.size, "vocab.bpe", m, size, &b);
    free(m);
    if (st != VKG_OK) {
        FUZZ_REQUIRE(b == NULL && vkg_error_message()[0] != '\0');
        return 0;
    }
    fuzz_bpe_roundtrip(b, (const char *)data, size);
    vkg__bpe_free(b);
    return 0;
}
