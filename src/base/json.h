/* A minimal pull-style JSON reader: enough for OpenAI's encoder.json (one object of string keys
 * and integer values) and test case files (arrays of objects with strings and integer arrays).
 * It does not build a tree (numbers come as integers or doubles) and does not allocate except
 * for the caller's string buffer. Internal to vkgpt (tests use it too); in src/base, below every
 * layer that reads JSON (tokenizers, run.json, safetensors headers, model configs). */
#ifndef VKG_BASE_JSON_H
#define VKG_BASE_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "vkgpt/status.h"

typedef struct vkg__json {
    const char *start; /* the whole document */
    const char *p;     /* current position */
    const char *end;
    const char *name; /* file name for messages */
} vkg__json;

/* Start reading n bytes of text. name (kept, not copied) labels error messages. */
void vkg__json_init(vkg__json *j, const char *text, size_t n, const char *name);

/* Skip whitespace and return the next byte without consuming it, or -1 at the end. */
int vkg__json_peek(vkg__json *j);

/* Skip whitespace and consume the byte c; VKG_ERR_FORMAT naming the file and offset otherwise. */
vkg_status vkg__json_expect(vkg__json *j, char c);

/* After an element of an array or object closed by `close`: consume ',' (sets *more = 1) or
 * `close` (sets *more = 0). VKG_ERR_FORMAT otherwise. */
vkg_status vkg__json_next(vkg__json *j, char close, int *more);

/* Open an array or object (`open` is '[' or '{'): consumes it and sets *more = 0 when it is
 * immediately closed (consuming the close too), 1 when an element follows. */
vkg_status vkg__json_open(vkg__json *j, char open, int *more);

/* Read a string value, decoding escapes (\uXXXX with surrogate pairs) to UTF-8, into *buf
 * (realloc'ed as needed; *cap its capacity, the caller frees it). Sets *len; the result is also
 * NUL-terminated. VKG_ERR_FORMAT on malformed strings, VKG_ERR_NOMEM. */
vkg_status vkg__json_string(vkg__json *j, char **buf, size_t *len, size_t *cap);

/* Read an integer value (optional '-', digits, no fraction or exponent) into *v. */
vkg_status vkg__json_int(vkg__json *j, long long *v);

/* Skip one value of any type (string, number with fraction or exponent, true, false, null, array,
 * object), checking its syntax. Arrays and objects nest at most 64 deep (VKG_ERR_FORMAT beyond,
 * so a hostile file cannot exhaust the stack). Allocates nothing. */
vkg_status vkg__json_skip(vkg__json *j);

/* Read a number (JSON's grammar: sign, integer part, fraction, exponent; at most 63
 * characters) into *v; VKG_ERR_FORMAT for anything else or a value out of double's range. */
vkg_status vkg__json_number(vkg__json *j, double *v);

/* Skip whitespace and require that the document ends here. */
vkg_status vkg__json_end(vkg__json *j);

/* Encode cp (< 0x110000) as UTF-8 into out; returns the length (1..4). */
size_t vkg__utf8_encode(uint32_t cp, char out[4]);

#endif
