/* vkg__escape (escape.h): untrusted bytes as printable ASCII. No state, no allocation. */
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
