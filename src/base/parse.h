/* Whole numbers as users write them in flags and environment variables. */
#ifndef VKG_BASE_PARSE_H
#define VKG_BASE_PARSE_H

#include <stdint.h>

/* "123", "+4", "-5", "64K", "32M", "2G" (binary suffixes, either case): the sign in *neg and the
 * magnitude in *mag; 0 when s is not exactly such a number or the magnitude overflows 64 bits. */
int vkg_parse_whole(const char *s, int *neg, uint64_t *mag);

#endif
