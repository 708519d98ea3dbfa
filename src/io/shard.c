/* llm.c token shards: a header with the token count, then that many uint16 tokens, nothing else.
 * Reading checks the exact size; writing is crash-safe. Token values are not checked here (the
 * data loader knows the vocabulary and does that). */
#include <stdlib.h>

#include "base/error.h"
#include "io/io_internal.h"

#define SHARD_VERSION 1

/* Validate an open shard's header; sets *ntok. */
static vkg_status check_header(FILE *f, const char *path, uint64_t size, size_t *ntok)
{
    int32_t hdr[VKG_FILE_HEADER_INTS];
    VKG_TRY(vkg__io_read_header(f, path, size, VKG_SHARD_MAGIC, "token shard", hdr));
    VKG_CHECK(hdr[1] == SHARD_VERSION, VKG_ERR_FORMAT,
              "%s: unsupported token shard version %ld (expected %d)", path, (long)hdr[1],
              SHARD_VERSION);
    VKG_CHECK(hdr[2] >= 0, VKG_ERR_FORMAT, "%s: header declares a negative token count %ld", path,
              (long)hdr[2]);
    char what[64];
    snprintf(what, sizeof what, "ntok=%ld", (long)hdr[2]);
    VKG_TRY(vkg__io_check_size(path, size, VKG_FILE_HEADER_BYTES + 2 * (uint64_t)hdr[2], what));
    *ntok = (size_t)hdr[2];
    return VKG_OK;
}

vkg_status vkg_shard_read_header(const char *path, size_t *ntok)
{
    FILE *f = NULL;
    uint64_t size = 0;
    VKG_TRY(vkg__io_open(path, &f, &size));
    vkg_status st = check_header(f, path, size, ntok);
    fclose(f);
    return st;
}

vkg_status vkg__shard_read_stream(FILE *f, const char *path, uint64_t size, uint16_t **tokens,
                                  size_t *ntok)
{
    *tokens = NULL;
    VKG_TRY(check_header(f, path, size, ntok));
    uint16_t *t = malloc((*ntok ? *ntok : 1) * sizeof *t);
    VKG_CHECK(t, VKG_ERR_NOMEM, "%s: cannot allocate %zu tokens", path, *ntok);
    vkg_status st = vkg_io_read_u16(f, path, t, *ntok);
    if (st < 0) {
        free(t);
        return st;
    }
    *tokens = t;
    return VKG_OK;
}

vkg_status vkg_shard_read(const char *path, uint16_t **tokens, size_t *ntok)
{
    FILE *f = NULL;
    uint64_t size = 0;
    *tokens = NULL;
    VKG_TRY(vkg__io_open(path, &f, &size));
    vkg_status st = vkg__shard_read_stream(f, path, size, tokens, ntok);
    fclose(f);
    return st;
}

typedef struct shard_ctx {
    const uint16_t *tokens;
    size_t ntok;
} shard_ctx;

static vkg_status write_shard(FILE *f, void *ctx)
{
    const shard_ctx *c = ctx;
    int32_t hdr[VKG_FILE_HEADER_INTS] = {0};
    hdr[0] = VKG_SHARD_MAGIC;
    hdr[1] = SHARD_VERSION;
    hdr[2] = (int32_t)c->ntok;
    VKG_TRY(vkg_io_write_i32(f, hdr, VKG_FILE_HEADER_INTS));
    return vkg_io_write_u16(f, c->tokens, c->ntok);
}

vkg_status vkg_shard_write(const char *path, const uint16_t *tokens, size_t ntok)
{
    VKG_CHECK(ntok <= INT32_MAX, VKG_ERR_INVALID_ARG,
              "%s: %zu tokens do not fit one shard (at most %d)", path, ntok, INT32_MAX);
    shard_ctx ctx = {tokens, ntok};
    return vkg_io_write_atomic(path, write_shard, &ctx);
}
