/* The element types of safetensors files (names and sizes), IEEE half <-> fp32 conversion and
 * the UTF-8 check that the safetensors reader, writer and index reader share. No file I/O. */
#include <string.h>

#include "io/io_internal.h"

/* ---- element types and conversions ---------------------------------------------------------- */

static const struct {
    const char *name;
    size_t size;
} dtypes[VKG_ST_DTYPE_COUNT] = {
    [VKG_ST_F32] = {"F32", 4},
    [VKG_ST_BF16] = {"BF16", 2},
    [VKG_ST_F16] = {"F16", 2},
    [VKG_ST_F64] = {"F64", 8},
    [VKG_ST_I64] = {"I64", 8},
    [VKG_ST_I32] = {"I32", 4},
    [VKG_ST_I16] = {"I16", 2},
    [VKG_ST_I8] = {"I8", 1},
    [VKG_ST_U64] = {"U64", 8},
    [VKG_ST_U32] = {"U32", 4},
    [VKG_ST_U16] = {"U16", 2},
    [VKG_ST_U8] = {"U8", 1},
    [VKG_ST_BOOL] = {"BOOL", 1},
    [VKG_ST_F8_E4M3] = {"F8_E4M3", 1},
    [VKG_ST_F8_E5M2] = {"F8_E5M2", 1},
    [VKG_ST_F8_E4M3FNUZ] = {"F8_E4M3FNUZ", 1},
    [VKG_ST_F8_E5M2FNUZ] = {"F8_E5M2FNUZ", 1},
    [VKG_ST_F8_E8M0] = {"F8_E8M0", 1},
    [VKG_ST_C64] = {"C64", 8},
};

const char *vkg_st_dtype_name(vkg_st_dtype dtype)
{
    return (unsigned)dtype < VKG_ST_DTYPE_COUNT ? dtypes[dtype].name : "?";
}

size_t vkg_st_dtype_size(vkg_st_dtype dtype)
{
    return (unsigned)dtype < VKG_ST_DTYPE_COUNT ? dtypes[dtype].size : 0;
}

float vkg_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
    if (e == 0x1f)
        u = sign | 0x7f800000u | (m << 13);
    else if (e)
        u = sign | ((e + 112) << 23) | (m << 13);
    else if (!m)
        u = sign;
    else { /* subnormal: m * 2^-24, normalised */
        e = 113;
        while (!(m & 0x400u)) {
            m <<= 1;
            e--;
        }
        u = sign | (e << 23) | ((m & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t vkg_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN: quiet, keeping the top of the payload */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) /* 65520 and up (infinity too) round to infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) { /* normal in f16: rebias the exponent, round the 13 dropped bits */
        ax += 0xc8000fffu + ((ax >> 13) & 1u);
        return (uint16_t)(sign | (ax >> 13));
    }
    int e = (int)(ax >> 23); /* subnormal or zero in f16: units of 2^-24 */
    if (e < 102)             /* below 2^-25: rounds to zero */
        return sign;
    uint32_t m = (ax & 0x7fffffu) | 0x800000u, shift = (uint32_t)(126 - e);
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    q += rem > half || (rem == half && (q & 1u));
    return (uint16_t)(sign | q);
}

int vkg__utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    while (p < end) {
        unsigned c = *p++;
        if (c < 0x80)
            continue;
        int more = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : 1;
        uint32_t cp = c & (0x3fu >> more);
        if (c < 0xc2 || c > 0xf4 || end - p < more)
            return 0;
        for (int i = 0; i < more; i++) {
            if ((p[i] & 0xc0u) != 0x80)
                return 0;
            cp = cp << 6 | (p[i] & 0x3fu);
        }
        p += more;
        if ((more == 2 && cp < 0x800) || (more == 3 && cp < 0x10000) || cp > 0x10ffff ||
            (cp >= 0xd800 && cp < 0xe000))
            return 0;
    }
    return 1;
}
