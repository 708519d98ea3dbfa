/* Unicode pieces of the GPT-2 tokenizer: UTF-8 decoding, GPT-2's byte <-> code point mapping,
 * and GPT-2's pre-tokenization pattern
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * implemented as a hand-written scanner over code points (letters and numbers from utf8proc's
 * general categories, \s as Unicode White_Space). No regex engine, no allocation per piece.
 * Internal to vkgpt. */
#ifndef VKG_DATA_UNICODE_H
#define VKG_DATA_UNICODE_H

#include <stddef.h>
#include <stdint.h>

#include "base/json.h" /* vkg__utf8_encode */
#include "vkgpt/status.h"

/* Decode the UTF-8 sequence at s (n > 0 bytes available). Returns its length in bytes (1..4) and
 * sets *cp; an invalid or truncated sequence counts as one byte with *cp = -1. */
size_t vkg__utf8_decode(const unsigned char *s, size_t n, int32_t *cp);

/* GPT-2's reversible byte -> code point map (printable Latin-1 bytes map to themselves, the rest
 * to 256 + n). */
void vkg__gpt2_byte_to_cp(uint32_t map[256]);

/* Called for each pre-token, in order; the pieces tile the text exactly. */
typedef vkg_status (*vkg__piece_fn)(const char *piece, size_t len, void *ctx);

/* Split text (n bytes of UTF-8; invalid bytes are treated as punctuation) into GPT-2 pre-tokens
 * and call fn on each. Returns the first error fn returns, else VKG_OK. */
vkg_status vkg__gpt2_pretokenize(const char *text, size_t n, vkg__piece_fn fn, void *ctx);

#endif
