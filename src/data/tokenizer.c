/* The public tokenizer (vkgpt/tokenizer.h): byte-level, GPT-2 BPE (src/data/bpe.c), Hugging
 * Face tokenizer.json (src/data/hftok.c, hfenc.c) and decode-only tokenizers from llm.c files.
 * Every kind keeps its decode table as a vkg_tokfile, so saving is the same for all. */
#include "vkgpt/tokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "data/bpe.h"
#include "data/hftok.h"
#include "data/tokenizer_internal.h"
#include "os/file.h"
#include "vkgpt/io.h"

#define BYTE_VOCAB 257
#define BYTE_EOT 256
#define EOT_TEXT "<|endoftext|>"

struct vkg_tokenizer {
    vkg_tokenizer_kind kind;
    vkg_tokfile table; /* decode table (unused for GPT-2, whose table lives in bpe) */
    vkg__bpe *bpe;     /* GPT-2 only */
    vkg__hftok *hf;    /* Hugging Face only */
};

vkg_status vkg_tokens_push(vkg_tokens *t, int32_t id)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 256;
        int32_t *ids = realloc(t->ids, cap * sizeof *ids);
        VKG_CHECK(ids, VKG_ERR_NOMEM, "out of memory growing a token array to %zu ids", cap);
        t->ids = ids;
        t->cap = cap;
    }
    t->ids[t->n++] = id;
    return VKG_OK;
}

void vkg_tokens_deinit(vkg_tokens *t)
{
    if (!t)
        return;
    free(t->ids);
    memset(t, 0, sizeof *t);
}

static const vkg_tokfile *table_of(const vkg_tokenizer_t *t)
{
    return t->bpe ? vkg__bpe_vocab(t->bpe) : t->hf ? vkg__hftok_vocab(t->hf) : &t->table;
}

/* Fill tf with the byte-level table. */
static vkg_status byte_table(vkg_tokfile *tf)
{
    size_t eot_len = strlen(EOT_TEXT);
    tf->vocab_size = BYTE_VOCAB;
    tf->eot_token = BYTE_EOT;
    tf->offsets = malloc((BYTE_VOCAB + 1) * sizeof *tf->offsets);
    tf->bytes = malloc(256 + eot_len);
    VKG_CHECK(tf->offsets && tf->bytes, VKG_ERR_NOMEM, "out of memory");
    for (int i = 0; i < 256; i++) {
        tf->bytes[i] = (char)i;
        tf->offsets[i] = (size_t)i;
    }
    memcpy(tf->bytes + 256, EOT_TEXT, eot_len);
    tf->offsets[256] = 256;
    tf->offsets[257] = 256 + eot_len;
    return VKG_OK;
}

vkg_status vkg_tokenizer_create_byte(vkg_tokenizer_t **out)
{
    *out = NULL;
    vkg_tokenizer_t *t = calloc(1, sizeof *t);
    VKG_CHECK(t, VKG_ERR_NOMEM, "out of memory");
    t->kind = VKG_TOKENIZER_BYTE;
    vkg_status st = byte_table(&t->table);
    if (st < 0) {
        vkg_tokenizer_destroy(&t);
        return st;
    }
    *out = t;
    return VKG_OK;
}

vkg_status vkg_tokenizer_create_gpt2(const char *vocab_dir, vkg_tokenizer_t **out)
{
    *out = NULL;
    vkg_tokenizer_t *t = calloc(1, sizeof *t);
    VKG_CHECK(t, VKG_ERR_NOMEM, "out of memory");
    t->kind = VKG_TOKENIZER_GPT2;
    vkg_status st = vkg__bpe_load(vocab_dir, &t->bpe);
    if (st < 0) {
        vkg_tokenizer_destroy(&t);
        return st;
    }
    *out = t;
    return VKG_OK;
}

/* 1 when tf is exactly the byte-level table. */
static int is_byte_table(const vkg_tokfile *tf)
{
    if (tf->vocab_size != BYTE_VOCAB || tf->eot_token != BYTE_EOT)
        return 0;
    for (int i = 0; i < 256; i++)
        if (tf->offsets[i + 1] - tf->offsets[i] != 1 ||
            (unsigned char)tf->bytes[tf->offsets[i]] != i)
            return 0;
    return 1;
}

/* 1 when path names a Hugging Face tokenizer: a folder, or a file whose name ends in .json. */
static int is_hf_path(const char *path)
{
    size_t n = strlen(path);
    return vkg_os_is_dir(path) == 1 || (n >= 5 && !strcmp(path + n - 5, ".json"));
}

vkg_status vkg_tokenizer_load(const char *path, vkg_tokenizer_t **out)
{
    *out = NULL;
    vkg_tokenizer_t *t = calloc(1, sizeof *t);
    VKG_CHECK(t, VKG_ERR_NOMEM, "out of memory");
    if (is_hf_path(path)) {
        t->kind = VKG_TOKENIZER_HF;
        vkg_status st = vkg__hftok_load(path, &t->hf);
        if (st == VKG_OK && vkg__hftok_vocab(t->hf)->eot_token < 0)
            st = VKG_FAIL(VKG_ERR_FORMAT,
                          "%s: no end-of-text token (no eos_token in tokenizer_config.json and no "
                          "<|endoftext|>, <|end_of_text|> or </s> among the added tokens)",
                          path);
        if (st < 0) {
            vkg_tokenizer_destroy(&t);
            return st;
        }
        *out = t;
        return VKG_OK;
    }
    vkg_status st = vkg_tokfile_read(path, &t->table);
    if (st < 0) {
        vkg_tokenizer_destroy(&t);
        return st;
    }
    t->kind = is_byte_table(&t->table) ? VKG_TOKENIZER_BYTE : VKG_TOKENIZER_DECODE_ONLY;
    *out = t;
    return VKG_OK;
}

void vkg_tokenizer_destroy(vkg_tokenizer_t **pt)
{
    if (!pt || !*pt)
        return;
    vkg_tokfile_deinit(&(*pt)->table);
    vkg__bpe_free((*pt)->bpe);
    vkg__hftok_free((*pt)->hf);
    free(*pt);
    *pt = NULL;
}

vkg_tokenizer_kind vkg_tokenizer_kind_of(const vkg_tokenizer_t *t)
{
    return t->kind;
}

int vkg_tokenizer_vocab_size(const vkg_tokenizer_t *t)
{
    return table_of(t)->vocab_size;
}

int vkg_tokenizer_eot(const vkg_tokenizer_t *t)
{
    return table_of(t)->eot_token;
}

int vkg_tokenizer_bos(const vkg_tokenizer_t *t)
{
    return t->hf ? vkg__hftok_bos(t->hf) : -1;
}

const char *vkg_tokenizer_chat_template(const vkg_tokenizer_t *t)
{
    return t->hf ? vkg__hftok_chat_template(t->hf) : NULL;
}

const char *vkg_tokenizer_kind_name(vkg_tokenizer_kind kind)
{
    switch (kind) {
    case VKG_TOKENIZER_BYTE:
        return "byte";
    case VKG_TOKENIZER_GPT2:
        return "gpt2";
    case VKG_TOKENIZER_HF:
        return "hf";
    case VKG_TOKENIZER_DECODE_ONLY:
        return "decode-only";
    }
    return "?";
}

vkg_status vkg_tokenizer_encode(const vkg_tokenizer_t *t, const char *text, size_t len,
                                vkg_tokens *out)
{
    return vkg__tokenizer_encode(t, text, len, NULL, out);
}

vkg_status vkg__tokenizer_encode(const vkg_tokenizer_t *t, const char *text, size_t len,
                                 const vkg_cancel *cancel, vkg_tokens *out)
{
    switch (t->kind) {
    case VKG_TOKENIZER_GPT2:
        return vkg__bpe_encode(t->bpe, text, len, cancel, out);
    case VKG_TOKENIZER_HF:
        return vkg__hftok_encode(t->hf, text, len, cancel, out);
    case VKG_TOKENIZER_BYTE:
        for (size_t i = 0; i < len; i++) {
            VKG_CHECK(i % VKG_ENCODE_CANCEL_BYTES || !cancel || !cancel->fn ||
                          !cancel->fn(cancel->ctx),
                      VKG_ERR_ABORTED, "interrupted");
            VKG_TRY(vkg_tokens_push(out, (unsigned char)text[i]));
        }
        return VKG_OK;
    case VKG_TOKENIZER_DECODE_ONLY:
        break;
    }
    return VKG_FAIL(VKG_ERR_UNSUPPORTED,
                    "this tokenizer was loaded from a decode-only file and cannot encode text "
                    "(use the GPT-2 vocabulary files to encode)");
}

const char *vkg_tokenizer_token(const vkg_tokenizer_t *t, int32_t id, size_t *len)
{
    const vkg_tokfile *tf = table_of(t);
    if (id < 0 || id >= tf->vocab_size)
        return NULL;
    *len = tf->offsets[id + 1] - tf->offsets[id];
    return tf->bytes + tf->offsets[id];
}

vkg_status vkg_tokenizer_decode(const vkg_tokenizer_t *t, const int32_t *ids, size_t n, char **text,
                                size_t *len)
{
    const vkg_tokfile *tf = table_of(t);
    size_t total = 0, tl;
    *text = NULL;
    for (size_t i = 0; i < n; i++) {
        VKG_CHECK(vkg_tokenizer_token(t, ids[i], &tl), VKG_ERR_INVALID_ARG,
                  "token %ld at position %zu is outside the vocabulary [0, %d)", (long)ids[i], i,
                  tf->vocab_size);
        total += tl;
    }
    char *s = malloc(total + 1);
    VKG_CHECK(s, VKG_ERR_NOMEM, "out of memory decoding %zu tokens", n);
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        const char *tok = vkg_tokenizer_token(t, ids[i], &tl);
        memcpy(s + pos, tok, tl);
        pos += tl;
    }
    s[pos] = '\0';
    if (t->hf && vkg__hftok_strip_start(t->hf) && pos > 0 && s[0] == ' ') {
        memmove(s, s + 1, pos); /* the decoder's Strip of the prepended space */
        pos--;
    }
    *text = s;
    *len = pos;
    return VKG_OK;
}

vkg_status vkg_tokenizer_save(const vkg_tokenizer_t *t, const char *path)
{
    return vkg_tokfile_write(path, table_of(t));
}
