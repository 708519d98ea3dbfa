/* Hugging Face `tokenizers` files (tokenizer.json, with tokenizer_config.json beside it when
 * there is one): the BPE model with a byte-level or SentencePiece-style pipeline, read by
 * hftok.c and applied by hfenc.c exactly as `tokenizers` applies it. Internal to src/data; the
 * public face is vkg_tokenizer_load (vkgpt/tokenizer.h). */
#ifndef VKG_DATA_HFTOK_H
#define VKG_DATA_HFTOK_H

#include <stddef.h>
#include <stdint.h>

#include "data/bpetab.h"
#include "vkgpt/data.h"
#include "vkgpt/io.h"
#include "vkgpt/tokenizer.h"

#define VKG_HF_MAX_STEPS 8

/* The parts of a tokenizer that hftok.c fills and hfenc.c applies. */
typedef enum vkg__hf_step_kind {
    VKG_HF_SPLIT,     /* Split(Regex|String) with behavior Isolated or Removed */
    VKG_HF_BYTELEVEL, /* ByteLevel: optional prefix space, GPT-2's pattern when use_regex */
    VKG_HF_METASPACE, /* Metaspace: spaces to the replacement, prepend, optional split */
} vkg__hf_step_kind;

typedef struct vkg__hf_step {
    vkg__hf_step_kind kind;
    void *re;         /* pcre2_code_8 (JIT-compiled when possible); NULL: no regex */
    int removed;      /* Split: matches are dropped (behavior Removed) instead of kept */
    int prefix_space; /* ByteLevel add_prefix_space */
    int prepend;      /* Metaspace: 0 never, 1 first, 2 always */
    int split;        /* Metaspace split (on the replacement, merged with the next piece) */
    char repl[8];     /* Metaspace replacement (UTF-8) */
} vkg__hf_step;

typedef enum vkg__hf_norm_kind { VKG_HF_NFC, VKG_HF_PREPEND, VKG_HF_REPLACE } vkg__hf_norm_kind;

typedef struct vkg__hf_norm {
    vkg__hf_norm_kind kind;
    char *a, *b; /* Prepend: a; Replace: a -> b (plain strings) */
    size_t alen, blen;
} vkg__hf_norm;

typedef struct vkg__hf_added {
    int32_t id;
    char *content;
    size_t len;
    int lstrip, rstrip, normalized;
} vkg__hf_added;

typedef struct vkg__hftok {
    vkg_tokfile vocab;  /* decode table: id -> decoded bytes; eot */
    char *mstr;         /* the model's spelling of each token, back to back */
    size_t *moff;       /* (V+1) offsets into mstr; added-only ids are empty */
    vkg__strtab by_str; /* ids keyed by model spelling */
    vkg__mergetab merges;
    vkg__hf_norm norm[VKG_HF_MAX_STEPS];
    int nnorm;
    vkg__hf_step step[VKG_HF_MAX_STEPS];
    int nstep;
    int byte_level; /* text is mapped through GPT-2's byte -> code point table */
    uint32_t byte_cp[256];
    int byte_fallback, fuse_unk, ignore_merges;
    int32_t unk;           /* -1: none */
    int32_t byte_tok[256]; /* <0xNN> tokens for byte_fallback; -1 when missing */
    vkg__hf_added *added;
    int nadded;
    int32_t prefix[4], suffix[4]; /* the post-processor's single-sequence template */
    int nprefix, nsuffix;
    int bos, strip_start;
    char *chat_template;
} vkg__hftok;

/* Read a tokenizer: path is a folder holding tokenizer.json (and maybe tokenizer_config.json)
 * or a tokenizer.json file itself. Anything it does not apply exactly (another model type,
 * normalizer, pre-tokenizer, decoder, post-processor, a BPE option) is VKG_ERR_UNSUPPORTED
 * naming it and the file; a malformed file is VKG_ERR_FORMAT naming the file and field. The
 * caller owns *out (vkg__hftok_free). */
vkg_status vkg__hftok_load(const char *path, vkg__hftok **out);

/* vkg__hftok_load on the files' contents in memory: json (n bytes of tokenizer.json, labelled
 * name) and cfg (ncfg bytes of tokenizer_config.json labelled cfg_name; NULL when absent). */
vkg_status vkg__hftok_parse(const char *name, const char *json, size_t n, const char *cfg_name,
                            const char *cfg, size_t ncfg, vkg__hftok **out);

void vkg__hftok_free(vkg__hftok *h);

/* The decode table: each token's bytes as the decoder renders them alone (eot: the eos token,
 * or -1). Lives as long as h. */
const vkg_tokfile *vkg__hftok_vocab(const vkg__hftok *h);

/* The begin-of-sequence id the post-processor inserts, or -1. */
int vkg__hftok_bos(const vkg__hftok *h);

/* Bytes the decoder strips from the start of a decoded text (SentencePiece's leading space):
 * 1 when the decoder has Strip(" ", 1, 0) or a Metaspace with a prepend scheme, else 0. */
int vkg__hftok_strip_start(const vkg__hftok *h);

/* tokenizer_config.json's chat_template, or NULL when there is none. Lives as long as h. */
const char *vkg__hftok_chat_template(const vkg__hftok *h);

/* Encode n bytes of text as `tokenizers`' encode(text, add_special_tokens=True) does, appending
 * the ids to *out. cancel (may be NULL) is asked about every VKG_ENCODE_CANCEL_BYTES bytes. */
vkg_status vkg__hftok_encode(const vkg__hftok *h, const char *text, size_t n,
                             const vkg_cancel *cancel, vkg_tokens *out);

#endif
