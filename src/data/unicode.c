/* UTF-8 coding, GPT-2's byte map and its pre-tokenization scanner (see unicode.h). The scanner
 * reproduces the regex's leftmost-alternative semantics by trying the alternatives in the
 * pattern's order at each position; the only backtracking case, \s+(?!\S), is resolved by
 * giving the last space of a run to the following word. */
#include "data/unicode.h"

#include <utf8proc.h>

enum cls { CLS_SPACE, CLS_LETTER, CLS_NUMBER, CLS_OTHER };

size_t vkg__utf8_decode(const unsigned char *s, size_t n, int32_t *cp)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if ((c & 0xE0) == 0xC0) {
        len = 2, v = c & 0x1Fu, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        len = 3, v = c & 0x0Fu, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        len = 4, v = c & 0x07u, min = 0x10000;
    } else {
        *cp = -1;
        return 1;
    }
    if (len > n) {
        *cp = -1;
        return 1;
    }
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            *cp = -1;
            return 1;
        }
        v = (v << 6) | (s[i] & 0x3Fu);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v < 0xE000)) {
        *cp = -1;
        return 1;
    }
    *cp = (int32_t)v;
    return len;
}

void vkg__gpt2_byte_to_cp(uint32_t map[256])
{
    uint32_t extra = 0;
    for (uint32_t b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        map[b] = printable ? b : 256 + extra++;
    }
}

/* Unicode White_Space (what \s matches in the regex module GPT-2 used). */
static int is_space(int32_t cp)
{
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}

static enum cls classify(int32_t cp)
{
    if (cp < 0)
        return CLS_OTHER;
    if (cp < 0x80) { /* ASCII fast path, same answers as the tables */
        if (is_space(cp))
            return CLS_SPACE;
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z')
            return CLS_LETTER;
        return cp >= '0' && cp <= '9' ? CLS_NUMBER : CLS_OTHER;
    }
    if (is_space(cp))
        return CLS_SPACE;
    switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
        return CLS_LETTER;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
        return CLS_NUMBER;
    default:
        return CLS_OTHER;
    }
}

/* A cursor over the text that decodes one code point at a time. */
typedef struct scan {
    const unsigned char *s;
    size_t n;
} scan;

/* Class and byte length of the code point at byte offset i (i < n). */
static enum cls cls_at(const scan *sc, size_t i, size_t *len)
{
    int32_t cp;
    *len = vkg__utf8_decode(sc->s + i, sc->n - i, &cp);
    return classify(cp);
}

/* Byte offset after the run of class c that starts at i. */
static size_t run_end(const scan *sc, size_t i, enum cls c)
{
    size_t len;
    while (i < sc->n && cls_at(sc, i, &len) == c)
        i += len;
    return i;
}

/* Length of a contraction ('s 't 're 've 'm 'll 'd) at i, or 0. */
static size_t contraction(const scan *sc, size_t i)
{
    static const char *const suffixes[] = {"s", "t", "re", "ve", "m", "ll", "d"};
    if (sc->s[i] != '\'')
        return 0;
    for (size_t k = 0; k < sizeof suffixes / sizeof suffixes[0]; k++) {
        size_t m = 0;
        while (suffixes[k][m] && i + 1 + m < sc->n &&
               sc->s[i + 1 + m] == (unsigned char)suffixes[k][m])
            m++;
        if (!suffixes[k][m])
            return 1 + m;
    }
    return 0;
}

/* Byte length of the pre-token starting at i. */
static size_t piece_len(const scan *sc, size_t i)
{
    size_t len, len2;
    size_t c = contraction(sc, i);
    if (c)
        return c;
    enum cls k = cls_at(sc, i, &len);
    if (sc->s[i] == ' ' && i + 1 < sc->n) { /* " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+" */
        enum cls next = cls_at(sc, i + 1, &len2);
        if (next != CLS_SPACE)
            return run_end(sc, i + 1, next) - i;
    }
    if (k != CLS_SPACE)
        return run_end(sc, i, k) - i;
    /* "\s+(?!\S)" takes the run minus its last code point when a non-space follows (that code
     * point then starts the next piece); "\s+" takes a lone space before a non-space. */
    size_t last = i, j = i;
    while (j < sc->n && cls_at(sc, j, &len) == CLS_SPACE) {
        last = j;
        j += len;
    }
    if (j == sc->n || last == i)
        return j - i;
    return last - i;
}

vkg_status vkg__gpt2_pretokenize(const char *text, size_t n, vkg__piece_fn fn, void *ctx)
{
    scan sc = {(const unsigned char *)text, n};
    for (size_t i = 0; i < n;) {
        size_t len = piece_len(&sc, i);
        vkg_status st = fn(text + i, len, ctx);
        if (st < 0)
            return st;
        i += len;
    }
    return VKG_OK;
}
