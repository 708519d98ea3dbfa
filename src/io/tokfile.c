/* llm.c tokenizer (decode) files: the byte string of every token id, plus the end-of-text id.
 * Reading checks every length against the file; writing is crash-safe. Encoding text is not this
 * file's business (see src/data/tokenizer.c). */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "io/io_internal.h"

#define TOKFILE_VERSION 2
#define GPT2_VOCAB 50257

void vkg_tokfile_deinit(vkg_tokfile *tf)
{
    if (!tf)
        return;
    free(tf->offsets);
    free(tf->bytes);
    memset(tf, 0, sizeof *tf);
}

/* Split the body (length-prefixed tokens) into tf's arrays. */
static vkg_status parse_body(const char *path, const unsigned char *body, size_t n, vkg_tokfile *tf)
{
    size_t V = (size_t)tf->vocab_size, pos = 0, out = 0;
    tf->offsets = malloc((V + 1) * sizeof *tf->offsets);
    tf->bytes = malloc(n ? n : 1);
    VKG_CHECK(tf->offsets && tf->bytes, VKG_ERR_NOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < V; i++) {
        VKG_CHECK(pos < n, VKG_ERR_FORMAT,
                  "%s: file ends after %zu of the %zu tokens the header declares (truncated?)",
                  path, i, V);
        size_t len = body[pos++];
        VKG_CHECK(len > 0, VKG_ERR_FORMAT, "%s: token %zu has length 0 (every token needs a byte)",
                  path, i);
        VKG_CHECK(len <= n - pos, VKG_ERR_FORMAT,
                  "%s: token %zu declares %zu bytes but only %zu remain (truncated?)", path, i, len,
                  n - pos);
        tf->offsets[i] = out;
        memcpy(tf->bytes + out, body + pos, len);
        out += len;
        pos += len;
    }
    tf->offsets[V] = out;
    VKG_CHECK(pos == n, VKG_ERR_FORMAT, "%s: %zu unexpected bytes after the last of %zu tokens",
              path, n - pos, V);
    return VKG_OK;
}

vkg_status vkg__tokfile_read_stream(FILE *f, const char *path, uint64_t size, vkg_tokfile *tf)
{
    int32_t hdr[VKG_FILE_HEADER_INTS];
    unsigned char *body = NULL;
    vkg_status st;
    memset(tf, 0, sizeof *tf);
    VKG_TRY(vkg__io_read_header(f, path, size, VKG_TOKENIZER_MAGIC, "tokenizer", hdr));
    long version = hdr[1], V = hdr[2], eot = hdr[3];
    VKG_CHECK(version == 1 || version == TOKFILE_VERSION, VKG_ERR_FORMAT,
              "%s: unsupported tokenizer file version %ld (expected %d)", path, version,
              TOKFILE_VERSION);
    VKG_CHECK(V > 0 && V <= (1L << 24), VKG_ERR_FORMAT,
              "%s: header declares an implausible vocabulary size %ld", path, V);
    if (version == 1) { /* llm.c's first format had no eot field and was GPT-2 only */
        VKG_CHECK(V == GPT2_VOCAB, VKG_ERR_FORMAT,
                  "%s: version 1 tokenizer files must have V=%d, got %ld", path, GPT2_VOCAB, V);
        eot = GPT2_VOCAB - 1;
    }
    VKG_CHECK(eot >= 0 && eot < V, VKG_ERR_FORMAT,
              "%s: end-of-text token %ld is outside the vocabulary [0, %ld)", path, eot, V);
    size_t n = (size_t)(size - VKG_FILE_HEADER_BYTES);
    VKG_CHECK((uint64_t)V * 2 <= n, VKG_ERR_FORMAT,
              "%s: header declares %ld tokens but only %zu bytes follow it (each token takes at "
              "least 2: truncated?)",
              path, V, n);
    tf->vocab_size = (int)V;
    tf->eot_token = (int)eot;
    body = malloc(n ? n : 1);
    VKG_CHECK_GOTO(st, body, VKG_ERR_NOMEM, fail, "%s: out of memory", path);
    VKG_TRY_GOTO(st, vkg_io_read_bytes(f, path, body, n), fail);
    VKG_TRY_GOTO(st, parse_body(path, body, n, tf), fail);
    free(body);
    return VKG_OK;
fail:
    free(body);
    vkg_tokfile_deinit(tf);
    return st;
}

vkg_status vkg_tokfile_read(const char *path, vkg_tokfile *tf)
{
    FILE *f = NULL;
    uint64_t size = 0;
    memset(tf, 0, sizeof *tf);
    VKG_TRY(vkg__io_open(path, &f, &size));
    vkg_status st = vkg__tokfile_read_stream(f, path, size, tf);
    fclose(f);
    return st;
}

static vkg_status write_tokfile(FILE *f, void *ctx)
{
    const vkg_tokfile *tf = ctx;
    int32_t hdr[VKG_FILE_HEADER_INTS] = {0};
    hdr[0] = VKG_TOKENIZER_MAGIC;
    hdr[1] = TOKFILE_VERSION;
    hdr[2] = tf->vocab_size;
    hdr[3] = tf->eot_token;
    VKG_TRY(vkg_io_write_i32(f, hdr, VKG_FILE_HEADER_INTS));
    for (int i = 0; i < tf->vocab_size; i++) {
        unsigned char len = (unsigned char)(tf->offsets[i + 1] - tf->offsets[i]);
        VKG_TRY(vkg_io_write_bytes(f, &len, 1));
        VKG_TRY(vkg_io_write_bytes(f, tf->bytes + tf->offsets[i], len));
    }
    return VKG_OK;
}

vkg_status vkg_tokfile_write(const char *path, const vkg_tokfile *tf)
{
    VKG_CHECK(tf->vocab_size > 0 && tf->offsets && tf->bytes, VKG_ERR_INVALID_ARG,
              "%s: empty tokenizer (V=%d)", path, tf->vocab_size);
    VKG_CHECK(tf->eot_token >= 0 && tf->eot_token < tf->vocab_size, VKG_ERR_INVALID_ARG,
              "%s: end-of-text token %d outside [0, %d)", path, tf->eot_token, tf->vocab_size);
    for (int i = 0; i < tf->vocab_size; i++) {
        size_t len = tf->offsets[i + 1] - tf->offsets[i];
        VKG_CHECK(tf->offsets[i + 1] >= tf->offsets[i] && len >= 1 && len <= 255,
                  VKG_ERR_INVALID_ARG, "%s: token %d has %zu bytes; the format allows 1 to 255",
                  path, i, len);
    }
    return vkg_io_write_atomic(path, write_tokfile, (void *)tf);
}
