/* Fuzz target: Hugging Face's tokenizer.json (src/data/jsontree.c, hftok.c, hfenc.c), parsed from
 * memory without a tokenizer_config.json. A refusal leaves no tokenizer and says why. An accepted
 * tokenizer must encode a fixed text of several scripts and the input itself (ids in [0, V), the
 * PCRE2 patterns it compiled run on any bytes) and decode its ids. The seeds in
 * fuzz/corpus/tokenizer_json are small tokenizers `tokenizers` wrote in the families' layouts
 * (GPT-2, Llama 3, Qwen 2, Llama 2, Metaspace) and the refusals of tests/test_hftok.c. */
#include <stdlib.h>
#include <string.h>

#include "data/hftok.h"
#include "fuzz_util.h"

static const char TEXT[] =
    "Hello, World! 123456 don't\t\n\n  \xc3\xa9t\xc3\xa9 \xe6\x97\xa5\xe6\x9c"
    "\xac <s> </s> <|endoftext|> \xf0\x9f\x98\x80 \xe2\x96\x81x \xff\xfe";

static void encode_decode(const vkg__hftok *h, const char *text, size_t n)
{
    const vkg_tokfile *tf = vkg__hftok_vocab(h);
    vkg_tokens ids = {0};
    vkg_status st = vkg__hftok_encode(h, text, n, NULL, &ids);
    if (st != VKG_OK) { /* a pattern may hit PCRE2's limits: a message, no crash */
        FUZZ_REQUIRE(vkg_error_message()[0] != '\0');
        vkg_tokens_deinit(&ids);
        return;
    }
    size_t bytes = 0;
    for (size_t i = 0; i < ids.n; i++) {
        FUZZ_REQUIRE(ids.ids[i] >= 0 && ids.ids[i] < tf->vocab_size);
        bytes += tf->offsets[ids.ids[i] + 1] - tf->offsets[ids.ids[i]];
    }
    FUZZ_REQUIRE(tf->offsets[tf->vocab_size] >= tf->offsets[0] && bytes < ((size_t)1 << 40));
    vkg_tokens_deinit(&ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vkg__hftok *h = (vkg__hftok *)1;
    if (size > (1u << 16))
        return 0;
    vkg_status st = vkg__hftok_parse("tokenizer.json", (const char *)data, size, NULL, NULL, 0, &h);
    if (st != VKG_OK) {
        FUZZ_REQUIRE(h == NULL && vkg_error_message()[0] != '\0');
        return 0;
    }
    FUZZ_REQUIRE(vkg__hftok_vocab(h)->vocab_size >= 0);
    encode_decode(h, TEXT, sizeof TEXT - 1);
    encode_decode(h, (const char *)data, size);
    vkg__hftok_free(h);
    return 0;
}
