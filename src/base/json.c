/* The minimal pull-style JSON reader described in json.h. Strictness over leniency: anything it
 * does not understand is a VKG_ERR_FORMAT naming the file and the byte offset. */
#include "base/json.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/escape.h"

void vkg__json_init(vkg__json *j, const char *text, size_t n, const char *name)
{
    j->start = text;
    j->p = text;
    j->end = text + n;
    j->name = name;
}

size_t vkg__utf8_encode(uint32_t cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static long offset(const vkg__json *j)
{
    return (long)(j->p - j->start);
}

int vkg__json_peek(vkg__json *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
    return j->p < j->end ? (unsigned char)*j->p : -1;
}

vkg_status vkg__json_expect(vkg__json *j, char c)
{
    int got = vkg__json_peek(j);
    VKG_CHECK(got >= 0, VKG_ERR_FORMAT, "%s: expected '%c' but the file ends (truncated?)", j->name,
              c);
    char shown[8], byte = (char)got;
    VKG_CHECK(got == (unsigned char)c, VKG_ERR_FORMAT, "%s: byte %ld: expected '%c', found '%s'",
              j->name, offset(j), c, vkg__escape(shown, sizeof shown, &byte, 1));
    j->p++;
    return VKG_OK;
}

vkg_status vkg__json_next(vkg__json *j, char close, int *more)
{
    int got = vkg__json_peek(j);
    VKG_CHECK(got >= 0, VKG_ERR_FORMAT, "%s: file ends where ',' or '%c' was expected (truncated?)",
              j->name, close);
    if (got == ',' || got == (unsigned char)close) {
        j->p++;
        *more = got == ',';
        return VKG_OK;
    }
    return VKG_FAIL(VKG_ERR_FORMAT, "%s: byte %ld: expected ',' or '%c'", j->name, offset(j),
                    close);
}

vkg_status vkg__json_open(vkg__json *j, char open, int *more)
{
    VKG_TRY(vkg__json_expect(j, open));
    char close = open == '[' ? ']' : '}';
    *more = 1;
    if (vkg__json_peek(j) == (unsigned char)close) {
        j->p++;
        *more = 0;
    }
    return VKG_OK;
}

static vkg_status put_bytes(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        while (nc < *len + n + 1)
            nc *= 2;
        char *nb = realloc(*buf, nc);
        VKG_CHECK(nb, VKG_ERR_NOMEM, "out of memory reading JSON");
        *buf = nb;
        *cap = nc;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = '\0';
    return VKG_OK;
}

static int hex4(const char *p, const char *end, uint32_t *v)
{
    *v = 0;
    if (end - p < 4)
        return 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return 0;
        *v = *v * 16 + (uint32_t)d;
    }
    return 1;
}

/* Decode the escape at j->p (just after the backslash) and append it. */
static vkg_status escape(vkg__json *j, char **buf, size_t *len, size_t *cap)
{
    VKG_CHECK(j->p < j->end, VKG_ERR_FORMAT, "%s: file ends inside a string (truncated?)", j->name);
    char c = *j->p++;
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *k = c ? strchr(from, c) : NULL;
    if (k)
        return put_bytes(buf, len, cap, &to[k - from], 1);
    uint32_t cp, lo;
    VKG_CHECK(c == 'u' && hex4(j->p, j->end, &cp), VKG_ERR_FORMAT,
              "%s: byte %ld: bad escape sequence in string", j->name, offset(j) - 2);
    j->p += 4;
    if (cp >= 0xD800 && cp < 0xDC00) { /* high surrogate: a low one must follow */
        VKG_CHECK(j->end - j->p >= 6 && j->p[0] == '\\' && j->p[1] == 'u' &&
                      hex4(j->p + 2, j->end, &lo) && lo >= 0xDC00 && lo < 0xE000,
                  VKG_ERR_FORMAT, "%s: byte %ld: unpaired UTF-16 surrogate", j->name, offset(j));
        j->p += 6;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    } else {
        VKG_CHECK(cp < 0xDC00 || cp >= 0xE000, VKG_ERR_FORMAT,
                  "%s: byte %ld: unpaired UTF-16 surrogate", j->name, offset(j));
    }
    char out[4];
    return put_bytes(buf, len, cap, out, vkg__utf8_encode(cp, out));
}

vkg_status vkg__json_string(vkg__json *j, char **buf, size_t *len, size_t *cap)
{
    VKG_TRY(vkg__json_expect(j, '"'));
    *len = 0;
    VKG_TRY(put_bytes(buf, len, cap, "", 0));
    for (;;) {
        const char *run = j->p;
        while (j->p < j->end && *j->p != '"' && *j->p != '\\' && (unsigned char)*j->p >= 0x20)
            j->p++;
        VKG_TRY(put_bytes(buf, len, cap, run, (size_t)(j->p - run)));
        VKG_CHECK(j->p < j->end, VKG_ERR_FORMAT, "%s: file ends inside a string (truncated?)",
                  j->name);
        char c = *j->p++;
        if (c == '"')
            return VKG_OK;
        VKG_CHECK(c == '\\', VKG_ERR_FORMAT, "%s: byte %ld: raw control character in string",
                  j->name, offset(j) - 1);
        VKG_TRY(escape(j, buf, len, cap));
    }
}

vkg_status vkg__json_int(vkg__json *j, long long *v)
{
    VKG_CHECK(vkg__json_peek(j) >= 0, VKG_ERR_FORMAT,
              "%s: file ends where an integer was expected (truncated?)", j->name);
    const char *p = j->p;
    int neg = p < j->end && *p == '-';
    p += neg;
    VKG_CHECK(p < j->end && *p >= '0' && *p <= '9', VKG_ERR_FORMAT,
              "%s: byte %ld: expected an integer", j->name, offset(j));
    long long x = 0;
    for (; p < j->end && *p >= '0' && *p <= '9'; p++) {
        VKG_CHECK(x <= (INT64_MAX - 9) / 10, VKG_ERR_FORMAT, "%s: byte %ld: integer too large",
                  j->name, offset(j));
        x = x * 10 + (*p - '0');
    }
    VKG_CHECK(p >= j->end || (*p != '.' && *p != 'e' && *p != 'E'), VKG_ERR_FORMAT,
              "%s: byte %ld: expected an integer, found a fraction or exponent", j->name,
              offset(j));
    j->p = p;
    *v = neg ? -x : x;
    return VKG_OK;
}

#define SKIP_MAX_DEPTH 64

/* Skip a number: '-'? digits ('.' digits)? ([eE] [+-]? digits)?, as JSON spells it. */
static vkg_status skip_number(vkg__json *j)
{
    const char *p = j->p;
    long at = offset(j);
    p += p < j->end && *p == '-';
    const char *digits = p;
    while (p < j->end && *p >= '0' && *p <= '9')
        p++;
    VKG_CHECK(p > digits, VKG_ERR_FORMAT, "%s: byte %ld: expected a value", j->name, at);
    if (p < j->end && *p == '.') {
        digits = ++p;
        while (p < j->end && *p >= '0' && *p <= '9')
            p++;
        VKG_CHECK(p > digits, VKG_ERR_FORMAT, "%s: byte %ld: bad number", j->name, at);
    }
    if (p < j->end && (*p == 'e' || *p == 'E')) {
        p++;
        p += p < j->end && (*p == '+' || *p == '-');
        digits = p;
        while (p < j->end && *p >= '0' && *p <= '9')
            p++;
        VKG_CHECK(p > digits, VKG_ERR_FORMAT, "%s: byte %ld: bad number", j->name, at);
    }
    j->p = p;
    return VKG_OK;
}

static vkg_status skip_value(vkg__json *j, int depth)
{
    int c = vkg__json_peek(j);
    VKG_CHECK(c >= 0, VKG_ERR_FORMAT, "%s: file ends where a value was expected (truncated?)",
              j->name);
    if (c == '"') { /* a string: walked without decoding; escapes checked */
        j->p++;
        while (j->p < j->end && *j->p != '"') {
            VKG_CHECK((unsigned char)*j->p >= 0x20, VKG_ERR_FORMAT,
                      "%s: byte %ld: raw control character in string", j->name, offset(j));
            if (*j->p++ != '\\')
                continue;
            uint32_t cp;
            VKG_CHECK(
                j->p < j->end && *j->p &&
                    (strchr("\"\\/bfnrt", *j->p) || (*j->p == 'u' && hex4(j->p + 1, j->end, &cp))),
                VKG_ERR_FORMAT, "%s: byte %ld: bad escape sequence in string", j->name,
                offset(j) - 1);
            j->p += *j->p == 'u' ? 5 : 1;
        }
        VKG_CHECK(j->p < j->end, VKG_ERR_FORMAT, "%s: file ends inside a string (truncated?)",
                  j->name);
        j->p++;
        return VKG_OK;
    }
    if (c == '[' || c == '{') {
        VKG_CHECK(depth < SKIP_MAX_DEPTH, VKG_ERR_FORMAT,
                  "%s: byte %ld: arrays and objects nested more than %d deep", j->name, offset(j),
                  SKIP_MAX_DEPTH);
        char close = c == '[' ? ']' : '}';
        int more = 0;
        VKG_TRY(vkg__json_open(j, (char)c, &more));
        while (more) {
            if (c == '{') {
                VKG_CHECK(vkg__json_peek(j) == '"', VKG_ERR_FORMAT,
                          "%s: byte %ld: expected a string key", j->name, offset(j));
                VKG_TRY(skip_value(j, depth + 1));
                VKG_TRY(vkg__json_expect(j, ':'));
            }
            VKG_TRY(skip_value(j, depth + 1));
            VKG_TRY(vkg__json_next(j, close, &more));
        }
        return VKG_OK;
    }
    static const char *const words[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(words[i]);
        if ((size_t)(j->end - j->p) >= n && memcmp(j->p, words[i], n) == 0) {
            j->p += n;
            return VKG_OK;
        }
    }
    return skip_number(j);
}

vkg_status vkg__json_skip(vkg__json *j)
{
    return skip_value(j, 0);
}

vkg_status vkg__json_end(vkg__json *j)
{
    VKG_CHECK(vkg__json_peek(j) < 0, VKG_ERR_FORMAT, "%s: byte %ld: unexpected data after the end",
              j->name, offset(j));
    return VKG_OK;
}

vkg_status vkg__json_number(vkg__json *j, double *v)
{
    VKG_CHECK(vkg__json_peek(j) >= 0, VKG_ERR_FORMAT,
              "%s: file ends where a number was expected (truncated?)", j->name);
    /* JSON's grammar: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)? */
    const char *p = j->p, *e = j->end;
    char buf[64];
    size_t n = 0;
    int ok = 1;
#define TAKE() (n < sizeof buf - 1 ? (void)(buf[n++] = *p++) : (void)(ok = 0, p++))
#define DIGIT() (p < e && *p >= '0' && *p <= '9')
    if (p < e && *p == '-')
        TAKE();
    if (p < e && *p == '0')
        TAKE();
    else if (DIGIT())
        while (DIGIT())
            TAKE();
    else
        ok = 0;
    if (ok && p < e && *p == '.') {
        TAKE();
        ok = DIGIT();
        while (DIGIT())
            TAKE();
    }
    if (ok && p < e && (*p == 'e' || *p == 'E')) {
        TAKE();
        if (p < e && (*p == '+' || *p == '-'))
            TAKE();
        ok = ok && DIGIT();
        while (DIGIT())
            TAKE();
    }
#undef TAKE
#undef DIGIT
    VKG_CHECK(ok, VKG_ERR_FORMAT, "%s: byte %ld: expected a number (at most 63 characters)",
              j->name, offset(j));
    buf[n] = '\0';
    char *end = NULL;
    double x = strtod(buf, &end); /* the C locale's: the decimal point is '.' */
    VKG_CHECK(end == buf + n && isfinite(x), VKG_ERR_FORMAT,
              "%s: byte %ld: the number %s is out of range", j->name, offset(j), buf);
    j->p = p;
    *v = x;
    return VKG_OK;
}
