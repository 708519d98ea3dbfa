/* Shared by the GPT-2 vocabulary targets: the small vocabulary in fuzz/vocab_small (256 byte
 * tokens, the products of GPT-2's first 100 merges, end-of-text), and the round-trip check of an
 * accepted vocabulary. */
#ifndef VKG_FUZZ_BPE_H
#define VKG_FUZZ_BPE_H

#include <string.h>

#include "data/bpe.h"
#include "fuzz_util.h"

typedef struct fuzz_file {
    char *data;
    size_t size;
} fuzz_file;

/* Read VKG_SOURCE_DIR/rel whole, with one spare byte; aborts when it cannot (a broken setup). */
static inline fuzz_file fuzz_read_source_file(const char *rel)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", VKG_SOURCE_DIR, rel);
    FILE *f = fopen(path, "rb");
    if (!f || fseek(f, 0, SEEK_END) != 0) {
        perror(path);
        abort();
    }
    fuzz_file ff = {NULL, (size_t)ftell(f)};
    rewind(f);
    ff.data = malloc(ff.size + 1);
    if (!ff.data || fread(ff.data, 1, ff.size, f) != ff.size) {
        perror(path);
        abort();
    }
    ff.data[ff.size] = '\0';
    fclose(f);
    return ff;
}

/* A copy of n bytes with one spare byte after them (vkg__bpe_parse cuts vocab.bpe's lines in
 * place and may write there). */
static inline char *fuzz_copy(const void *src, size_t n)
{
    char *p = malloc(n + 1);
    if (!p)
        abort();
    memcpy(p, src, n);
    p[n] = '\0';
    return p;
}

/* Encode text with b and require that the ids are in range and decode back to the text. */
static inline void fuzz_bpe_roundtrip(const vkg__bpe *b, const char *text, size_t n)
{
    const vkg_tokfile *tf = vkg__bpe_vocab(b);
    FUZZ_REQUIRE(tf->eot_token >= 0 && tf->eot_token < tf->vocab_size);
    vkg_tokens ids = {0};
    FUZZ_REQUIRE(vkg__bpe_encode(b, text, n, NULL, &ids) == VKG_OK);
    size_t pos = 0;
    for (size_t i = 0; i < ids.n; i++) {
        int32_t id = ids.ids[i];
        FUZZ_REQUIRE(id >= 0 && id < tf->vocab_size);
        size_t len = tf->offsets[id + 1] - tf->offsets[id];
        FUZZ_REQUIRE(pos + len <= n && !memcmp(text + pos, tf->bytes + tf->offsets[id], len));
        pos += len;
    }
    FUZZ_REQUIRE(pos == n);
    vkg_tokens_deinit(&ids);
}

#endif
