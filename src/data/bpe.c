/* GPT-2 BPE (see bpe.h). Tokens are kept as raw bytes (encoder.json's keys are mapped back
 * through GPT-2's byte <-> unicode table), so encoding works on bytes and ids: each pre-token
 * starts as one token per byte and is merged by rank (bpetab.h's loop, which the Hugging Face
 * tokenizer shares). No caching, no global state. */
#include "data/bpe.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/escape.h"
#include "base/json.h"
#include "data/bpetab.h"
#include "data/tokenizer_internal.h"
#include "data/unicode.h"

#define EOT_TEXT "<|endoftext|>"
#define MAX_TOKEN_BYTES 255

struct vkg__bpe {
    vkg_tokfile vocab;    /* id -> bytes, eot */
    vkg__strtab by_bytes; /* ids keyed by their bytes */
    vkg__mergetab merges;
    int32_t byte_id[256]; /* the token of each single byte */
};

/* Id of the token with exactly these bytes, or -1. */
static int32_t lookup_bytes(const vkg__bpe *b, const char *s, size_t n)
{
    return vkg__strtab_find(&b->by_bytes, b->vocab.bytes, b->vocab.offsets, s, n);
}

/* ---- loading -------------------------------------------------------------------------------- */

/* Map GPT-2's unicode spelling of a token back to its raw bytes, in place (bytes never outgrow
 * their UTF-8 spelling). Every character is checked before the first is rewritten, so an error
 * quotes the token as the file spells it (escaped: it is untrusted). */
static vkg_status unmap_token(const int16_t *cp_to_byte, const char *file, char *s, size_t *n)
{
    int32_t cp;
    for (size_t i = 0; i < *n;) {
        i += vkg__utf8_decode((const unsigned char *)s + i, *n - i, &cp);
        if (cp < 0 || cp >= 512 || cp_to_byte[cp] < 0) {
            char shown[128];
            return VKG_FAIL(VKG_ERR_FORMAT,
                            "%s: token \"%s\" has a character (U+%04X) outside GPT-2's byte "
                            "alphabet",
                            file, vkg__escape(shown, sizeof shown, s, *n), (unsigned)cp);
        }
    }
    size_t out = 0;
    for (size_t i = 0; i < *n;) {
        i += vkg__utf8_decode((const unsigned char *)s + i, *n - i, &cp);
        s[out++] = (char)cp_to_byte[cp];
    }
    *n = out;
    return VKG_OK;
}

typedef struct vocab_entry {
    size_t off, len;
    long long id;
} vocab_entry;

static int by_id(const void *a, const void *b)
{
    long long x = ((const vocab_entry *)a)->id, y = ((const vocab_entry *)b)->id;
    return (x > y) - (x < y);
}

/* Parse encoder.json into b->vocab and the bytes -> id table. */
static vkg_status load_encoder(vkg__bpe *b, const char *path, const char *text, size_t n,
                               const int16_t *cp_to_byte)
{
    vkg__json j;
    vkg_status st = VKG_OK;
    char *key = NULL, *blob = NULL;
    size_t klen = 0, kcap = 0, count = 0, ecap = 0, blen = 0;
    vocab_entry *ents = NULL;
    int more;
    vkg__json_init(&j, text, n, path);
    blob = malloc(n + 1); /* raw token bytes never exceed the file's size */
    VKG_CHECK_GOTO(st, blob, VKG_ERR_NOMEM, done, "%s: out of memory", path);
    VKG_TRY_GOTO(st, vkg__json_open(&j, '{', &more), done);
    while (more) {
        long long id;
        VKG_TRY_GOTO(st, vkg__json_string(&j, &key, &klen, &kcap), done);
        VKG_TRY_GOTO(st, vkg__json_expect(&j, ':'), done);
        VKG_TRY_GOTO(st, vkg__json_int(&j, &id), done);
        VKG_TRY_GOTO(st, unmap_token(cp_to_byte, path, key, &klen), done);
        VKG_CHECK_GOTO(st, klen >= 1 && klen <= MAX_TOKEN_BYTES, VKG_ERR_FORMAT, done,
                       "%s: token %lld has %zu bytes (allowed 1 to %d)", path, id, klen,
                       MAX_TOKEN_BYTES);
        if (count == ecap) {
            ecap = ecap ? 2 * ecap : 1024;
            vocab_entry *ne = realloc(ents, ecap * sizeof *ents);
            VKG_CHECK_GOTO(st, ne, VKG_ERR_NOMEM, done, "%s: out of memory", path);
            ents = ne;
        }
        ents[count++] = (vocab_entry){blen, klen, id};
        memcpy(blob + blen, key, klen);
        blen += klen;
        VKG_TRY_GOTO(st, vkg__json_next(&j, '}', &more), done);
    }
    VKG_TRY_GOTO(st, vkg__json_end(&j), done);
    VKG_CHECK_GOTO(st, count > 256 && count < (1u << 24), VKG_ERR_FORMAT, done,
                   "%s: %zu tokens is not a GPT-2-style vocabulary", path, count);
    qsort(ents, count, sizeof *ents, by_id);
    b->vocab.vocab_size = (int)count;
    b->vocab.eot_token = -1;
    b->vocab.offsets = malloc((count + 1) * sizeof *b->vocab.offsets);
    b->vocab.bytes = malloc(blen);
    VKG_CHECK_GOTO(st, b->vocab.offsets && b->vocab.bytes, VKG_ERR_NOMEM, done, "%s: out of memory",
                   path);
    VKG_TRY_GOTO(st, vkg__strtab_init(&b->by_bytes, count, path), done);
    size_t pos = 0;
    for (size_t i = 0; i < count; i++) {
        VKG_CHECK_GOTO(st, ents[i].id == (long long)i, VKG_ERR_FORMAT, done,
                       "%s: token ids are not 0..%zu without gaps or repeats (id %lld where %zu "
                       "was expected)",
                       path, count - 1, ents[i].id, i);
        const char *s = blob + ents[i].off;
        size_t len = ents[i].len;
        VKG_CHECK_GOTO(st, lookup_bytes(b, s, len) < 0, VKG_ERR_FORMAT, done,
                       "%s: tokens %d and %zu have the same bytes", path, lookup_bytes(b, s, len),
                       i);
        b->vocab.offsets[i] = pos;
        memcpy(b->vocab.bytes + pos, s, len);
        pos += len;
        b->vocab.offsets[i + 1] = pos;
        vkg__strtab_put(&b->by_bytes, s, len, (int32_t)i);
    }
    b->vocab.eot_token = lookup_bytes(b, EOT_TEXT, strlen(EOT_TEXT));
    VKG_CHECK_GOTO(st, b->vocab.eot_token >= 0, VKG_ERR_FORMAT, done,
                   "%s: no %s token in the vocabulary", path, EOT_TEXT);
    for (int c = 0; c < 256; c++) {
        char ch = (char)c;
        b->byte_id[c] = lookup_bytes(b, &ch, 1);
        VKG_CHECK_GOTO(st, b->byte_id[c] >= 0, VKG_ERR_FORMAT, done,
                       "%s: byte 0x%02x has no token of its own", path, c);
    }
done:
    free(key);
    free(blob);
    free(ents);
    return st;
}

/* Parse vocab.bpe ("#version" line, then "left right" per line, rank = line order). */
static vkg_status load_merges(vkg__bpe *b, const char *path, char *text, size_t n,
                              const int16_t *cp_to_byte)
{
    size_t lines = 1;
    for (size_t i = 0; i < n; i++)
        lines += text[i] == '\n';
    VKG_TRY(vkg__mergetab_init(&b->merges, lines, path));
    int32_t rank = 0;
    char *line = text, *end = text + n;
    for (size_t lineno = 1; line < end; lineno++) {
        char *nl = memchr(line, '\n', (size_t)(end - line));
        char *stop = nl ? nl : end;
        if (stop > line && stop[-1] == '\r')
            stop--;
        *stop = '\0';
        char *next_line = nl ? nl + 1 : end;
        if (stop == line || (lineno == 1 && !strncmp(line, "#version", 8))) {
            line = next_line;
            continue;
        }
        char *sp = strchr(line, ' '), shown[128];
        VKG_CHECK(sp && sp > line && sp[1] && !strchr(sp + 1, ' '), VKG_ERR_FORMAT,
                  "%s: line %zu: expected two tokens separated by one space, got \"%s\"", path,
                  lineno, vkg__escape(shown, sizeof shown, line, (size_t)(stop - line)));
        *sp = '\0';
        size_t llen = (size_t)(sp - line), rlen = (size_t)(stop - sp - 1);
        char *right = sp + 1;
        VKG_TRY(unmap_token(cp_to_byte, path, line, &llen));
        VKG_TRY(unmap_token(cp_to_byte, path, right, &rlen));
        int32_t l = lookup_bytes(b, line, llen), r = lookup_bytes(b, right, rlen);
        char both[2 * MAX_TOKEN_BYTES];
        int32_t m = -1;
        if (l >= 0 && r >= 0 && llen + rlen <= sizeof both) {
            memcpy(both, line, llen);
            memcpy(both + llen, right, rlen);
            m = lookup_bytes(b, both, llen + rlen);
        }
        VKG_CHECK(l >= 0 && r >= 0 && m >= 0, VKG_ERR_FORMAT,
                  "%s: line %zu: merge %s that is not in encoder.json", path, lineno,
                  l < 0 || r < 0 ? "has a part" : "makes a token");
        /* a repeated pair keeps its last rank, as a Python dict built from the list would */
        vkg__mergetab_put(&b->merges, l, r, rank++, m, 1);
        line = next_line;
    }
    return VKG_OK;
}

vkg_status vkg__bpe_parse(const char *enc_name, const char *enc, size_t nenc,
                          const char *merges_name, char *merges, size_t nmerges, vkg__bpe **out)
{
    int16_t cp_to_byte[512];
    uint32_t byte_to_cp[256];
    vkg_status st;
    *out = NULL;
    vkg__bpe *b = calloc(1, sizeof *b);
    VKG_CHECK(b, VKG_ERR_NOMEM, "out of memory");
    memset(cp_to_byte, 0xff, sizeof cp_to_byte);
    vkg__gpt2_byte_to_cp(byte_to_cp);
    for (int i = 0; i < 256; i++)
        cp_to_byte[byte_to_cp[i]] = (int16_t)i;
    VKG_TRY_GOTO(st, load_encoder(b, enc_name, enc, nenc, cp_to_byte), fail);
    VKG_TRY_GOTO(st, load_merges(b, merges_name, merges, nmerges, cp_to_byte), fail);
    *out = b;
    return VKG_OK;
fail:
    vkg__bpe_free(b);
    return st;
}

vkg_status vkg__bpe_load(const char *vocab_dir, vkg__bpe **out)
{
    char path[4096], path2[4096];
    char *enc = NULL, *merges = NULL;
    size_t nenc = 0, nmerges = 0;
    vkg_status st;
    *out = NULL;
    snprintf(path, sizeof path, "%s/encoder.json", vocab_dir);
    snprintf(path2, sizeof path2, "%s/vocab.bpe", vocab_dir);
    VKG_TRY_GOTO(st, vkg_text_read(path, NULL, &enc, &nenc), done);
    VKG_TRY_GOTO(st, vkg_text_read(path2, NULL, &merges, &nmerges), done);
    st = vkg__bpe_parse(path, enc, nenc, path2, merges, nmerges, out);
done:
    free(enc);
    free(merges);
    return st;
}

void vkg__bpe_free(vkg__bpe *b)
{
    if (!b)
        return;
    vkg_tokfile_deinit(&b->vocab);
    vkg__strtab_free(&b->by_bytes);
    vkg__mergetab_free(&b->merges);
    free(b);
}

const vkg_tokfile *vkg__bpe_vocab(const vkg__bpe *b)
{
    return &b->vocab;
}

/* ---- encoding ------------------------------------------------------------------------------- */

typedef struct encoder {
    const vkg__bpe *b;
    vkg_tokens *out;
    const vkg_cancel *cancel;
    size_t since_check; /* bytes encoded since cancel was last asked */
    vkg__merger merger;
} encoder;

/* BPE one pre-token and append its ids. */
static vkg_status encode_piece(const char *piece, size_t len, void *ctx)
{
    encoder *e = ctx;
    const unsigned char *s = (const unsigned char *)piece;
    e->since_check += len;
    if (e->since_check >= VKG_ENCODE_CANCEL_BYTES) {
        e->since_check = 0;
        VKG_CHECK(!e->cancel || !e->cancel->fn || !e->cancel->fn(e->cancel->ctx), VKG_ERR_ABORTED,
                  "interrupted");
    }
    VKG_TRY(vkg__merger_reserve(&e->merger, len));
    for (size_t i = 0; i < len; i++)
        e->merger.id[i] = e->b->byte_id[s[i]];
    return vkg__merger_run(&e->merger, (int32_t)len, &e->b->merges, e->out);
}

vkg_status vkg__bpe_encode(const vkg__bpe *b, const char *text, size_t n, const vkg_cancel *cancel,
                           vkg_tokens *out)
{
    encoder e = {.b = b, .out = out, .cancel = cancel};
    vkg_status st = vkg__gpt2_pretokenize(text, n, encode_piece, &e);
    vkg__merger_free(&e.merger);
    return st;
}
