/* Encoding that can be cancelled, for the loader's long tokenizations. Internal to src/data; the
 * public face is vkg_tokenizer_encode (vkgpt/tokenizer.h). */
#ifndef VKG_DATA_TOKENIZER_INTERNAL_H
#define VKG_DATA_TOKENIZER_INTERNAL_H

#include "vkgpt/data.h"
#include "vkgpt/tokenizer.h"

/* Every this many bytes of text, encoding asks its vkg_cancel whether to stop. */
#define VKG_ENCODE_CANCEL_BYTES ((size_t)1 << 20)

/* vkg_tokenizer_encode that asks cancel (may be NULL) every VKG_ENCODE_CANCEL_BYTES bytes of
 * text, and stops with VKG_ERR_ABORTED ("interrupted") when it says so; *out then holds a prefix
 * of the encoding. */
vkg_status vkg__tokenizer_encode(const vkg_tokenizer_t *t, const char *text, size_t len,
                                 const vkg_cancel *cancel, vkg_tokens *out);

#endif
