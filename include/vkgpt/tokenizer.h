/* Tokenizers: byte-level (256 byte tokens + end-of-text 256, V = 257), GPT-2 BPE from
 * OpenAI's vocab.bpe + encoder.json (V = 50257, end-of-text 50256), Hugging Face `tokenizers`
 * files (tokenizer.json with its BPE model, byte-level as GPT-2, Llama 3 and Qwen 2 have it or
 * SentencePiece-style as Llama 2 and Mistral), plus decode-only tokenizers loaded from llm.c
 * tokenizer files.
 *
 * Encoding GPT-2 reproduces OpenAI's encoder exactly: its pre-tokenization pattern with Unicode
 * letter/number classes, the byte-to-unicode mapping and BPE merges by rank. Special tokens are
 * never produced from text ("<|endoftext|>" in text is encoded as ordinary characters); callers
 * insert vkg_tokenizer_eot() themselves (as document separators). A Hugging Face tokenizer
 * encodes as `tokenizers`' encode(text, add_special_tokens=True) does: its added tokens are
 * found in the text and its post-processor's tokens (a begin-of-sequence) are inserted. A tokenizer
 * is immutable after creation, so several threads may encode with one. No global state; no
 * printing.
 */
#ifndef VKGPT_TOKENIZER_H
#define VKGPT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "vkgpt/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum vkg_tokenizer_kind {
    VKG_TOKENIZER_BYTE,        /* byte-level, encodes and decodes */
    VKG_TOKENIZER_GPT2,        /* GPT-2 BPE, encodes and decodes */
    VKG_TOKENIZER_DECODE_ONLY, /* from an llm.c tokenizer file that is not byte-level */
    VKG_TOKENIZER_HF,          /* Hugging Face tokenizer.json, encodes and decodes */
} vkg_tokenizer_kind;

typedef struct vkg_tokenizer vkg_tokenizer_t;

/* A growable array of token ids that encoders append to. Zero-initialise it; release it with
 * vkg_tokens_deinit. */
typedef struct vkg_tokens {
    int32_t *ids;
    size_t n;
    size_t cap;
} vkg_tokens;

/* Append one id. VKG_ERR_NOMEM when growing fails (the array is then unchanged). */
vkg_status vkg_tokens_push(vkg_tokens *t, int32_t id);

/* Free the array and zero the struct. NULL-safe. */
void vkg_tokens_deinit(vkg_tokens *t);

/* Create the byte-level tokenizer: token b < 256 is the byte b, token 256 is end-of-text (its
 * decoded text is "<|endoftext|>"). */
vkg_status vkg_tokenizer_create_byte(vkg_tokenizer_t **out);

/* Create the GPT-2 tokenizer from vocab_dir/encoder.json and vocab_dir/vocab.bpe. Errors:
 * VKG_ERR_IO when a file cannot be read, VKG_ERR_FORMAT naming the file and line or byte offset
 * when it is malformed or the two files disagree (a merge whose parts or result are not in the
 * vocabulary, ids with gaps or duplicates). */
vkg_status vkg_tokenizer_create_gpt2(const char *vocab_dir, vkg_tokenizer_t **out);

/* Load a tokenizer from path. A folder (holding tokenizer.json and, when there is one,
 * tokenizer_config.json) or a file named *.json is a Hugging Face tokenizer: VKG_TOKENIZER_HF;
 * a model type, normalizer, pre-tokenizer, decoder or option vkgpt does not apply exactly is
 * VKG_ERR_UNSUPPORTED naming it and the file, a malformed file VKG_ERR_FORMAT naming the file and
 * field; its end-of-text is tokenizer_config.json's eos_token (else an added <|endoftext|>,
 * <|end_of_text|> or </s>, else VKG_ERR_FORMAT). Anything else is an llm.c tokenizer file (see
 * vkgpt/io.h). A file with the byte-level layout (V = 257,
 * token b the single byte b, eot 256) becomes a VKG_TOKENIZER_BYTE tokenizer that can encode;
 * anything else is VKG_TOKENIZER_DECODE_ONLY. Errors as vkg_tokfile_read. */
vkg_status vkg_tokenizer_load(const char *path, vkg_tokenizer_t **out);

/* Destroy *t (NULL-safe) and set *t = NULL. */
void vkg_tokenizer_destroy(vkg_tokenizer_t **t);

vkg_tokenizer_kind vkg_tokenizer_kind_of(const vkg_tokenizer_t *t);
int vkg_tokenizer_vocab_size(const vkg_tokenizer_t *t);
int vkg_tokenizer_eot(const vkg_tokenizer_t *t);

/* The begin-of-sequence id that encoding inserts first (a Hugging Face post-processor's), or -1
 * when encoding inserts none. */
int vkg_tokenizer_bos(const vkg_tokenizer_t *t);

/* tokenizer_config.json's chat_template (NULL when there is none or t is not a Hugging Face
 * tokenizer). Lives as long as t. */
const char *vkg_tokenizer_chat_template(const vkg_tokenizer_t *t);

/* "byte", "gpt2", "hf" or "decode-only". */
const char *vkg_tokenizer_kind_name(vkg_tokenizer_kind kind);

/* Encode len bytes of text (UTF-8; invalid bytes are kept as byte tokens) and append the ids to
 * *out. VKG_ERR_UNSUPPORTED for a decode-only tokenizer, VKG_ERR_NOMEM. On error *out may hold a
 * prefix of the encoding. */
vkg_status vkg_tokenizer_encode(const vkg_tokenizer_t *t, const char *text, size_t len,
                                vkg_tokens *out);

/* The bytes of token id (not NUL-terminated) and their count in *len; NULL when id is out of
 * range. The pointer lives as long as t. */
const char *vkg_tokenizer_token(const vkg_tokenizer_t *t, int32_t id, size_t *len);

/* Decode n ids into a newly malloc'ed, NUL-terminated string (*text, *len bytes without the NUL;
 * free with free()). The bytes are concatenated as they are: a multi-byte character split across
 * tokens is only valid once all its tokens are decoded. VKG_ERR_INVALID_ARG naming the position
 * of an id outside [0, V). */
vkg_status vkg_tokenizer_decode(const vkg_tokenizer_t *t, const int32_t *ids, size_t n, char **text,
                                size_t *len);

/* Write t as an llm.c tokenizer file (version 2), crash-safely. */
vkg_status vkg_tokenizer_save(const vkg_tokenizer_t *t, const char *path);

#ifdef __cplusplus
}
#endif
#endif
