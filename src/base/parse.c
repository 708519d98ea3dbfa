/* Whole numbers with an optional K, M or G suffix (base/parse.h). */
#include "base/parse.h"

int vkg_parse_whole(const char *s, int *neg, uint64_t *mag)
{
    const char *p = s;
    uint64_t v = 0;
    *neg = *p == '-';
    if (*p == '-' || *p == '+')
        p++;
    if (*p < '0' || *p > '9')
        return 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return 0;
        v = v * 10 + d;
    }
    unsigned shift = 0;
    if (*p == 'K' || *p == 'k')
        shift = 10, p++;
    else if (*p == 'M' || *p == 'm')
        shift = 20, p++;
    else if (*p == 'G' || *p == 'g')
        shift = 30, p++;
    if (*p || (shift && v > (UINT64_MAX >> shift)))
        return 0;
    *mag = v << shift;
    return 1;
}
