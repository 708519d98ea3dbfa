/* Fuzz target: llm.c tokenizer files (src/io/tokfile.c), read from memory. An accepted file gives
 * every token 1 to 255 bytes, offsets that tile the body, and an end-of-text id in range. */
#include "fuzz_util.h"
#include "io/io_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FILE *f = fuzz_stream(data, size);
    vkg_tokfile tf;
    vkg_status st = vkg__tokfile_read_stream(f, "tokenizer.bin", size, &tf);
    fclose(f);
    if (st != VKG_OK) {
        FUZZ_REQUIRE(tf.offsets == NULL && tf.bytes == NULL && vkg_error_message()[0] != '\0');
        return 0;
    }
    FUZZ_REQUIRE(tf.vocab_size > 0 && tf.eot_token >= 0 && tf.eot_token < tf.vocab_size);
    FUZZ_REQUIRE(tf.offsets[0] == 0);
    for (int i = 0; i < tf.vocab_size; i++) {
        size_t len = tf.offsets[i + 1] - tf.offsets[i];
        FUZZ_REQUIRE(tf.offsets[i + 1] > tf.offsets[i] && len <= 255);
        volatile char last = tf.bytes[tf.offsets[i + 1] - 1]; /* inside the allocation */
        (void)last;
    }
    /* the body is one length byte per token plus the token bytes, nothing else */
    FUZZ_REQUIRE(size == VKG_FILE_HEADER_BYTES + (size_t)tf.vocab_size + tf.offsets[tf.vocab_size]);
    vkg_tokfile_deinit(&tf);
    return 0;
}
