/* vkg__escape and vkg__escape_text (escape.h): untrusted bytes as printable ASCII, or as text
 * without control codes. No state, no allocation. */
#include "base/escape.h"

#include <string.h>

const char *vkg__escape(char *dst, size_t cap, const void *bytes, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = bytes;
    size_t o = 0;
    if (cap == 0)
        return dst;
    for (size_t i = 0; i < n; i++) {
        char one[4];
        size_t k = 0;
        unsigned c = s[i];
        if (c == '\\') {
            one[k++] = '\\', one[k++] = '\\';
        } else if (c >= 0x20 && c < 0x7f) {
            one[k++] = (char)c;
        } else {
            one[k++] = '\\', one[k++] = 'x', one[k++] = hex[c >> 4], one[k++] = hex[c & 15];
        }
        /* Keep room for the NUL, and for "..." while more bytes follow. */
        size_t reserve = i + 1 < n ? 3 : 0;
        if (o + k + reserve + 1 > cap) {
            for (int d = 0; d < 3 && o + 1 < cap; d++)
                dst[o++] = '.';
            break;
        }
        memcpy(dst + o, one, k);
        o += k;
    }
    dst[o] = '\0';
    return dst;
}

/* The length of the well-formed UTF-8 sequence of 2 to 4 bytes at s (n bytes left) that encodes
 * a character other than a C1 control, or 0. */
static size_t utf8_char(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len = c >= 0xc2 && c <= 0xdf   ? 2
                 : c >= 0xe0 && c <= 0xef ? 3
                 : c >= 0xf0 && c <= 0xf4 ? 4
                                          : 0;
    if (len == 0 || len > n)
        return 0;
    /* The second byte's range rules out overlong forms, surrogates and code points > U+10FFFF. */
    unsigned lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
    unsigned hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    if (c == 0xc2 && s[1] <= 0x9f) /* U+0080..U+009F: C1 controls (0x9b is CSI) */
        return 0;
    return len;
}

size_t vkg__escape_text(char *dst, const void *bytes, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = bytes;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k =
            c >= 0x80 ? utf8_char(s + i, n - i) : (c >= 0x20 && c < 0x7f) || c == '\n' || c == '\t';
        if (k) {
            memcpy(dst + o, s + i, k);
            o += k, i += k;
            continue;
        }
        dst[o++] = '\\', dst[o++] = 'x', dst[o++] = hex[c >> 4], dst[o++] = hex[c & 15];
        i++;
    }
    dst[o] = '\0';
    return o;
}
