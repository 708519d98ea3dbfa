/* Fuzz target: text input (src/data/unicode.c and tokenizer.c: UTF-8 decoding, GPT-2's
 * pre-tokenization, BPE with the vocabulary shipped in data/gpt2, and the byte-level tokenizer),
 * which the data loader and `vkgpt prepare` apply to any file that is not a token shard. Any bytes
 * are valid text: the pieces must tile the input, and both tokenizers must decode back to it. */
#include <string.h>

#include "data/unicode.h"
#include "fuzz_util.h"
#include "vkgpt/tokenizer.h"

static vkg_tokenizer_t *gpt2, *bytes;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (vkg_tokenizer_create_gpt2(VKG_SOURCE_DIR "/data/gpt2", &gpt2) != VKG_OK ||
        vkg_tokenizer_create_byte(&bytes) != VKG_OK) {
        fprintf(stderr, "fuzz_text: %s\n", vkg_error_message());
        abort();
    }
    return 0;
}

typedef struct tiling {
    const char *next; /* where the next piece must start */
} tiling;

static vkg_status on_piece(const char *piece, size_t len, void *ctx)
{
    tiling *t = ctx;
    FUZZ_REQUIRE(piece == t->next && len > 0);
    t->next = piece + len;
    return VKG_OK;
}

static void roundtrip(const vkg_tokenizer_t *tok, const char *text, size_t n)
{
    vkg_tokens ids = {0};
    char *back = NULL;
    size_t len = 0;
    FUZZ_REQUIRE(vkg_tokenizer_encode(tok, text, n, &ids) == VKG_OK);
    FUZZ_REQUIRE(ids.n <= n);
    FUZZ_REQUIRE(vkg_tokenizer_decode(tok, ids.ids, ids.n, &back, &len) == VKG_OK);
    FUZZ_REQUIRE(len == n && !memcmp(back, text, n));
    free(back);
    vkg_tokens_deinit(&ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    for (size_t i = 0; i < size;) { /* UTF-8: a valid sequence re-encodes to its own bytes */
        int32_t cp;
        size_t len = vkg__utf8_decode(data + i, size - i, &cp);
        FUZZ_REQUIRE(len >= 1 && len <= 4 && len <= size - i);
        if (cp >= 0) {
            char out[4];
            FUZZ_REQUIRE(vkg__utf8_encode((uint32_t)cp, out) == len && !memcmp(out, data + i, len));
        }
        i += len;
    }
    tiling t = {text};
    FUZZ_REQUIRE(vkg__gpt2_pretokenize(text, size, on_piece, &t) == VKG_OK);
    FUZZ_REQUIRE(t.next == text + size);
    roundtrip(gpt2, text, size);
    roundtrip(bytes, text, size);
    return 0;
}
