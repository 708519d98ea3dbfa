/* DiLoCo's outer state file, outer.bin in a checkpoint directory (layout in checkpoint.h): the
 * global parameters, the outer momentum and the other replicas' parameters and moments, as
 * vkg_strategy_outer_state lays them out. Written through vkg_io_write_atomic; reads refuse short,
 * oversized, foreign, wrong-version and corrupted files by name. Nothing here prints. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "io/io_internal.h"
#include "train/checkpoint.h"
#include "vkgpt/io.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#error "outer.bin is written as the host's float bytes: little-endian hosts only"
#endif

typedef struct outer_ctx {
    const float *x;
    size_t n, count;
} outer_ctx;

static void put32(unsigned char *h, int slot, uint32_t v)
{
    for (int b = 0; b < 4; b++)
        h[4 * slot + b] = (unsigned char)(v >> (8 * b));
}

static uint32_t get32(const unsigned char *h, int slot)
{
    const unsigned char *p = h + 4 * slot;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static vkg_status write_outer(FILE *f, void *ctx)
{
    const outer_ctx *c = ctx;
    unsigned char h[VKG_FILE_HEADER_BYTES];
    memset(h, 0, sizeof h);
    put32(h, 0, VKG_OUTER_MAGIC);
    put32(h, 1, VKG_OUTER_VERSION);
    put32(h, 2, (uint32_t)c->n), put32(h, 3, (uint32_t)((uint64_t)c->n >> 32));
    put32(h, 4, (uint32_t)c->count), put32(h, 5, (uint32_t)((uint64_t)c->count >> 32));
    put32(h, 6, vkg_statefile_crc32_floats(c->x, c->count));
    VKG_TRY(vkg_io_write_bytes(f, h, sizeof h));
    return vkg_io_write_bytes(f, c->x, c->count * sizeof *c->x);
}

/* Whether count floats of n parameters are laid out without (delayed 0: each other replica's
 * parameters, m and v) or with exchanges in flight (delayed 1: its parameters, m, v, exchange). */
static int fits(size_t n, size_t count, int delayed)
{
    size_t own = delayed ? 3 : 2, each = delayed ? 4 : 3, per = count / n;
    return count % n == 0 && per >= own && (per - own) % each == 0;
}

/* Whether count floats are the outer state of n parameters: n (2 + 3k) or, streaming with a
 * delay, n (3 + 4k), k >= 0. */
static int valid_count(size_t n, size_t count)
{
    return n > 0 && (fits(n, count, 0) || fits(n, count, 1));
}

/* The index of the first negative second moment v (replica q >= 1's, n each) in that layout, or
 * count when none. */
static size_t first_negative_v(const float *x, size_t n, size_t count, int delayed)
{
    size_t own = delayed ? 3 : 2, each = delayed ? 4 : 3, per = count / n;
    for (size_t at = own + 2; at < per; at += each)
        for (size_t i = at * n; i < (at + 1) * n; i++)
            if (x[i] < 0.0f)
                return i;
    return count;
}

/* VKG_ERR_FORMAT naming path and the element unless some layout count fits has every other
 * replica's AdamW second moment >= 0 (as state.bin's v): the count alone does not always tell a
 * delayed exchange's layout, n (3 + 4k), from a blocking one's, n (2 + 3k). */
static vkg_status check_moments(const char *path, const float *x, size_t n, size_t count)
{
    int plain = fits(n, count, 0), delayed = fits(n, count, 1);
    size_t at[2] = {plain ? first_negative_v(x, n, count, 0) : count,
                    delayed ? first_negative_v(x, n, count, 1) : count};
    if ((plain && at[0] == count) || (delayed && at[1] == count))
        return VKG_OK;
    size_t i = plain ? at[0] : at[1], own = plain ? 2 : 3, each = plain ? 3 : 4;
    return VKG_FAIL(VKG_ERR_FORMAT,
                    "%s: element %zu (replica %zu's AdamW second moment v, parameter %zu) is %g: "
                    "AdamW's moments must be finite and v >= 0 (a diverged run or a damaged file)",
                    path, i, (i / n - own) / each + 1, i % n, (double)x[i]);
}

vkg_status vkg_outerfile_write(const char *path, size_t n, const float *x, size_t count)
{
    VKG_CHECK(path && x && valid_count(n, count), VKG_ERR_INVALID_ARG,
              "%s: %zu floats are not an outer state of %zu parameters", path ? path : "outer.bin",
              count, n);
    for (size_t i = 0; i < count; i++)
        VKG_CHECK(isfinite(x[i]), VKG_ERR_INVALID_ARG,
                  "%s: not written: element %zu of DiLoCo's outer state is %g (a checkpoint is "
                  "never marked complete holding a value that is not finite)",
                  path, i, (double)x[i]);
    outer_ctx c = {.x = x, .n = n, .count = count};
    return vkg_io_write_atomic(path, write_outer, &c);
}

vkg_status vkg_outerfile_read(const char *path, size_t n, float **x, size_t *count)
{
    FILE *f = NULL;
    uint64_t size = 0;
    *x = NULL, *count = 0;
    VKG_TRY(vkg__io_open(path, &f, &size));
    vkg_status st = vkg__outerfile_read_stream(f, path, size, n, x, count);
    fclose(f);
    return st;
}

vkg_status vkg__outerfile_read_stream(FILE *f, const char *path, uint64_t size, size_t n, float **x,
                                      size_t *count)
{
    unsigned char h[VKG_FILE_HEADER_BYTES];
    float *buf = NULL;
    vkg_status st;
    *x = NULL, *count = 0;
    VKG_CHECK_GOTO(st, size >= sizeof h, VKG_ERR_FORMAT, done,
                   "%s: %llu bytes, too short for the header of an outer state file", path,
                   (unsigned long long)size);
    VKG_TRY_GOTO(st, vkg_io_read_bytes(f, path, h, sizeof h), done);
    VKG_CHECK_GOTO(st, get32(h, 0) == VKG_OUTER_MAGIC, VKG_ERR_FORMAT, done,
                   "%s: bad magic %lu, expected %d (not DiLoCo's outer state)", path,
                   (unsigned long)get32(h, 0), VKG_OUTER_MAGIC);
    VKG_CHECK_GOTO(st, get32(h, 1) == VKG_OUTER_VERSION, VKG_ERR_FORMAT, done,
                   "%s: unsupported version %lu (expected %d)", path, (unsigned long)get32(h, 1),
                   VKG_OUTER_VERSION);
    uint64_t hn = get32(h, 2) | (uint64_t)get32(h, 3) << 32;
    uint64_t hc = get32(h, 4) | (uint64_t)get32(h, 5) << 32;
    VKG_CHECK_GOTO(st, hn == n && hc < ((uint64_t)1 << 40) && valid_count(n, (size_t)hc),
                   VKG_ERR_FORMAT, done,
                   "%s: holds %llu floats for %llu parameters; the model has %zu parameters", path,
                   (unsigned long long)hc, (unsigned long long)hn, n);
    VKG_TRY_GOTO(st, vkg__io_check_size(path, size, sizeof h + 4 * hc, "DiLoCo's outer state"),
                 done);
    buf = malloc((size_t)hc * sizeof *buf);
    VKG_CHECK_GOTO(st, buf, VKG_ERR_NOMEM, done, "%s: no memory for %llu floats", path,
                   (unsigned long long)hc);
    VKG_TRY_GOTO(st, vkg_io_read_bytes(f, path, buf, (size_t)hc * sizeof *buf), done);
    uint32_t crc = vkg_statefile_crc32_floats(buf, (size_t)hc);
    VKG_CHECK_GOTO(st, crc == get32(h, 6), VKG_ERR_FORMAT, done,
                   "%s: checksum mismatch (stored CRC-32 %08lx, computed %08lx): the file is "
                   "corrupted",
                   path, (unsigned long)get32(h, 6), (unsigned long)crc);
    for (size_t i = 0; i < (size_t)hc; i++)
        VKG_CHECK_GOTO(st, isfinite(buf[i]), VKG_ERR_FORMAT, done,
                       "%s: element %zu is %g: the outer state must be finite", path, i,
                       (double)buf[i]);
    VKG_TRY_GOTO(st, check_moments(path, buf, n, (size_t)hc), done);
    *x = buf, *count = (size_t)hc;
    buf = NULL;
done:
    free(buf);
    return st;
}
