/* Rendering untrusted bytes (from files, peers, a model's samples) for error messages and for
 * text shown on a terminal, so that nothing a file or a model holds can reach a terminal as a
 * control sequence. Knows nothing about messages, files or terminals itself. */
#ifndef VKG_BASE_ESCAPE_H
#define VKG_BASE_ESCAPE_H

#include <stddef.h>

/* Write n bytes to dst (cap bytes, cap >= 1) as a NUL-terminated printable rendering: printable
 * ASCII (0x20..0x7e) as is except the backslash, written "\\", and every other byte (controls,
 * DEL, NUL, bytes >= 0x80) as "\xNN" (lowercase hex). When the rendering does not fit, it stops
 * before a whole byte and ends with "..." (when cap >= 4). Reads exactly n bytes; returns dst, so
 * a call can be an argument of a format. */
const char *vkg__escape(char *dst, size_t cap, const void *bytes, size_t n);

/* Write n bytes of text to dst (room for 4 n + 1 bytes) for a terminal, NUL-terminated, and
 * return its length: newline, tab, printable ASCII and well-formed UTF-8 characters other than
 * the C1 controls (U+0080..U+009F) as they are; every other byte (C0 controls such as ESC, CR
 * and BEL, DEL, C1 controls, bytes of malformed, overlong or surrogate UTF-8) as "\xNN"
 * (lowercase hex). A backslash stays as it is: the rendering is for reading, not for parsing. */
size_t vkg__escape_text(char *dst, const void *bytes, size_t n);

#endif
