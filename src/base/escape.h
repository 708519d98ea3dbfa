/* Rendering untrusted bytes (from files, peers) for error messages, so that nothing a file holds
 * can reach a terminal as a control sequence. Knows nothing about messages or files itself. */
#ifndef VKG_BASE_ESCAPE_H
#define VKG_BASE_ESCAPE_H

#include <stddef.h>

/* Write n bytes to dst (cap bytes, cap >= 1) as a NUL-terminated printable rendering: printable
 * ASCII (0x20..0x7e) as is except the backslash, written "\\", and every other byte (controls,
 * DEL, NUL, bytes >= 0x80) as "\xNN" (lowercase hex). When the rendering does not fit, it stops
 * before a whole byte and ends with "..." (when cap >= 4). Reads exactly n bytes; returns dst, so
 * a call can be an argument of a format. */
const char *vkg__escape(char *dst, size_t cap, const void *bytes, size_t n);

#endif
