/* reading tokenizer.json, split in two files: hftok.c (the model, added tokens, the config, the
 * entry points) and hftok_pipeline.c (normalizers, pre-tokenizers with their PCRE2 patterns,
 * the post-processor, the decoder and the decode table). Internal to src/data. */
#ifndef VKG_DATA_HFTOK_READ_H
#define VKG_DATA_HFTOK_READ_H

#include "data/hftok.h"
#include "data/jsontree.h"

#define VKG_HF_SPM "\xe2\x96\x81" /* U+2581, SentencePiece's space */

typedef struct vkg__hf_reader {
    vkg__hftok *h;
    vkg__jt t;
    const char *name; /* tokenizer.json's path, for messages */
} vkg__hf_reader;

/* Decoder kinds, folded into what each token decodes to. */
enum { VKG_HF_DEC_RAW, VKG_HF_DEC_BYTELEVEL, VKG_HF_DEC_SPACE };

/* The node's "type" string, or "" when it has none. */
const char *vkg__hf_type_of(const vkg__hf_reader *r, long node);

/* Node i as an id: a whole number in [0, 2^24), else -1 (never a float-to-integer overflow). */
long vkg__hf_id_of(const vkg__jt *t, long i);

/* obj's boolean member key, or dflt when it is absent or not a boolean. */
int vkg__hf_flag(const vkg__hf_reader *r, long obj, const char *key, int dflt);

/* obj's string member key into *s (*len bytes); VKG_ERR_FORMAT naming where.key otherwise. */
vkg_status vkg__hf_need_str(const vkg__hf_reader *r, long obj, const char *key, const char *where,
                            const char **s, size_t *len);

/* A NUL-terminated malloc'ed copy of n bytes of s. */
vkg_status vkg__hf_dup(const char *s, size_t n, char **out);

/* The "normalizer", "pre_tokenizer", "post_processor" and "decoder" nodes into r->h (node -1
 * or null: none); depth 0 at the top (a Sequence nests one level). The decoder's kind
 * (VKG_HF_DEC_*) and whether it has ByteFallback go to *kind and *fallback. Errors: what is
 * not supported, VKG_ERR_UNSUPPORTED naming it; malformed, VKG_ERR_FORMAT. */
vkg_status vkg__hf_read_normalizer(vkg__hf_reader *r, long node, int depth);
vkg_status vkg__hf_read_pretok(vkg__hf_reader *r, long node);
vkg_status vkg__hf_read_post(vkg__hf_reader *r, long node, int depth);
vkg_status vkg__hf_read_decoder(vkg__hf_reader *r, long node, int depth, int *kind, int *fallback);

/* Free what the pipeline readers put in h (normalizer strings, compiled patterns). */
void vkg__hf_free_pipeline(vkg__hftok *h);

/* h's decode table for V ids (model spellings and added tokens), rendered by the decoder. */
vkg_status vkg__hf_decode_table(vkg__hftok *h, int V, int kind, int fallback);

#endif
