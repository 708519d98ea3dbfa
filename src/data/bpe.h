/* GPT-2 byte-pair encoding: loads OpenAI's encoder.json and vocab.bpe and encodes text exactly as
 * OpenAI's encoder does. Internal to src/data; the public face is vkgpt/tokenizer.h. */
#ifndef VKG_DATA_BPE_H
#define VKG_DATA_BPE_H

#include <stddef.h>

#include "vkgpt/data.h"
#include "vkgpt/io.h"
#include "vkgpt/tokenizer.h"

typedef struct vkg__bpe vkg__bpe;

/* Load vocab_dir/encoder.json and vocab_dir/vocab.bpe. Errors: VKG_ERR_IO (unreadable file),
 * VKG_ERR_FORMAT naming the file and the line or byte offset. On success the caller owns *out
 * (free with vkg__bpe_free). */
vkg_status vkg__bpe_load(const char *vocab_dir, vkg__bpe **out);

/* vkg__bpe_load's parser on the two files' contents in memory: enc (nenc bytes of encoder.json)
 * and merges (nmerges bytes of vocab.bpe, which must be followed by one writable byte: lines are
 * cut in place). enc_name and merges_name label messages. Errors and ownership as vkg__bpe_load. */
vkg_status vkg__bpe_parse(const char *enc_name, const char *enc, size_t nenc,
                          const char *merges_name, char *merges, size_t nmerges, vkg__bpe **out);

/* Free b (NULL-safe). */
void vkg__bpe_free(vkg__bpe *b);

/* The decode table: every token's raw bytes by id, and the end-of-text id. Lives as long as b. */
const vkg_tokfile *vkg__bpe_vocab(const vkg__bpe *b);

/* Pre-tokenize and BPE-encode n bytes of text, appending ids to *out. cancel (may be NULL) is
 * asked every VKG_ENCODE_CANCEL_BYTES bytes (between pre-tokens): VKG_ERR_ABORTED when it says
 * stop. */
vkg_status vkg__bpe_encode(const vkg__bpe *b, const char *text, size_t n, const vkg_cancel *cancel,
                           vkg_tokens *out);

#endif
