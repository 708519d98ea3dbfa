/* llm.c model files: read fp32 (version 3) and bf16 (version 5, converted to fp32 on load), write
 * fp32 version 3 crash-safely. Validates the header and the exact file size before reading any
 * parameter. Does not interpret parameter values (no check that padded rows are zero). */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "io/io_internal.h"

#define MAX_PARAMS 4.0e12 /* anything larger is a corrupt header, not a model */
#define BF16_CHUNK 16384

float vkg_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t vkg_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it a (quiet) NaN */
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

/* Parse and check the header fields; sets *cfg, *version and the parameter count. */
static vkg_status parse_header(const char *path, uint64_t size, const int32_t *hdr,
                               vkg_model_config *cfg, int *version, size_t *nparams)
{
    int v = hdr[1];
    VKG_CHECK(v == 3 || v == 5, VKG_ERR_FORMAT,
              "%s: unsupported model file version %d (expected 3 = fp32 or 5 = bf16%s)", path, v,
              v < 3 && v > 0 ? "; older llm.c files must be re-exported" : "");
    memset(cfg, 0, sizeof *cfg); /* GPT-2: every field past channels 0 */
    cfg->max_seq_len = hdr[2];
    cfg->vocab_size = hdr[3];
    cfg->num_layers = hdr[4];
    cfg->num_heads = hdr[5];
    cfg->channels = hdr[6];
    cfg->padded_vocab_size = hdr[7];
    if (vkg_model_config_validate(cfg) < 0)
        return vkg__error_wrap(VKG_ERR_FORMAT, "%s: bad model header", path);
    double approx = (double)cfg->padded_vocab_size * cfg->channels +
                    (double)cfg->max_seq_len * cfg->channels +
                    12.0 * cfg->num_layers * (double)cfg->channels * cfg->channels;
    VKG_CHECK(approx < MAX_PARAMS, VKG_ERR_FORMAT,
              "%s: header describes an implausible model (about %.3g parameters)", path, approx);
    size_t n = vkg_model_num_params(cfg);
    size_t elem = v == 3 ? 4 : 2;
    char what[200];
    snprintf(what, sizeof what, "maxT=%d V=%d L=%d NH=%d C=%d Vp=%d (%zu parameters as %s)",
             cfg->max_seq_len, cfg->vocab_size, cfg->num_layers, cfg->num_heads, cfg->channels,
             cfg->padded_vocab_size, n, v == 3 ? "fp32" : "bf16");
    VKG_TRY(vkg__io_check_size(path, size, VKG_FILE_HEADER_BYTES + (uint64_t)n * elem, what));
    *version = v;
    *nparams = n;
    return VKG_OK;
}

vkg_status vkg_modelfile_read_header(const char *path, vkg_model_config *cfg, int *version)
{
    FILE *f = NULL;
    uint64_t size = 0;
    int32_t hdr[VKG_FILE_HEADER_INTS];
    int v = 0;
    size_t n = 0;
    vkg_status st;
    VKG_TRY(vkg__io_open(path, &f, &size));
    st = vkg__io_read_header(f, path, size, VKG_MODEL_MAGIC, "model", hdr);
    if (st == VKG_OK)
        st = parse_header(path, size, hdr, cfg, &v, &n);
    fclose(f);
    if (st == VKG_OK && version)
        *version = v;
    return st;
}

/* Read n bf16 values and widen them into params. */
static vkg_status read_bf16(FILE *f, const char *path, float *params, size_t n)
{
    uint16_t *buf = malloc(BF16_CHUNK * sizeof *buf);
    VKG_CHECK(buf, VKG_ERR_NOMEM, "%s: out of memory", path);
    vkg_status st = VKG_OK;
    for (size_t done = 0; done < n && st == VKG_OK;) {
        size_t m = n - done < BF16_CHUNK ? n - done : BF16_CHUNK;
        st = vkg_io_read_u16(f, path, buf, m);
        for (size_t i = 0; st == VKG_OK && i < m; i++)
            params[done + i] = vkg_bf16_to_f32(buf[i]);
        done += m;
    }
    free(buf);
    return st;
}

/* Read the n parameters that follow the header, as fp32 (version 3) or bf16 (version 5). */
static vkg_status read_params(FILE *f, const char *path, int version, float *params, size_t n)
{
    return version == 3 ? vkg_io_read_f32(f, path, params, n) : read_bf16(f, path, params, n);
}

vkg_status vkg_modelfile_read_into(const char *path, vkg_model_config *cfg, float *params,
                                   size_t capacity)
{
    FILE *f = NULL;
    uint64_t size = 0;
    int32_t hdr[VKG_FILE_HEADER_INTS];
    int version = 0;
    size_t n = 0;
    vkg_status st;
    VKG_TRY(vkg__io_open(path, &f, &size));
    VKG_TRY_GOTO(st, vkg__io_read_header(f, path, size, VKG_MODEL_MAGIC, "model", hdr), done);
    VKG_TRY_GOTO(st, parse_header(path, size, hdr, cfg, &version, &n), done);
    VKG_CHECK_GOTO(st, capacity >= n, VKG_ERR_INVALID_ARG, done,
                   "%s: holds %zu parameters but the buffer has room for %zu", path, n, capacity);
    st = read_params(f, path, version, params, n);
done:
    fclose(f);
    return st;
}

vkg_status vkg__modelfile_read_stream(FILE *f, const char *path, uint64_t size,
                                      vkg_model_config *cfg, float **params)
{
    int32_t hdr[VKG_FILE_HEADER_INTS];
    int version = 0;
    size_t n = 0;
    *params = NULL;
    VKG_TRY(vkg__io_read_header(f, path, size, VKG_MODEL_MAGIC, "model", hdr));
    VKG_TRY(parse_header(path, size, hdr, cfg, &version, &n));
    float *p = malloc((n ? n : 1) * sizeof *p);
    VKG_CHECK(p, VKG_ERR_NOMEM, "%s: cannot allocate %zu parameters", path, n);
    vkg_status st = read_params(f, path, version, p, n);
    if (st < 0) {
        free(p);
        return st;
    }
    *params = p;
    return VKG_OK;
}

vkg_status vkg_modelfile_read(const char *path, vkg_model_config *cfg, float **params)
{
    FILE *f = NULL;
    uint64_t size = 0;
    *params = NULL;
    VKG_TRY(vkg__io_open(path, &f, &size));
    vkg_status st = vkg__modelfile_read_stream(f, path, size, cfg, params);
    fclose(f);
    return st;
}

typedef struct model_write_ctx {
    const vkg_model_config *cfg;
    const float *params;
} model_write_ctx;

static vkg_status write_model(FILE *f, void *ctx)
{
    const model_write_ctx *c = ctx;
    int32_t hdr[VKG_FILE_HEADER_INTS] = {0};
    hdr[0] = VKG_MODEL_MAGIC;
    hdr[1] = 3;
    hdr[2] = c->cfg->max_seq_len;
    hdr[3] = c->cfg->vocab_size;
    hdr[4] = c->cfg->num_layers;
    hdr[5] = c->cfg->num_heads;
    hdr[6] = c->cfg->channels;
    hdr[7] = c->cfg->padded_vocab_size;
    VKG_TRY(vkg_io_write_i32(f, hdr, VKG_FILE_HEADER_INTS));
    return vkg_io_write_f32(f, c->params, vkg_model_num_params(c->cfg));
}

vkg_status vkg_modelfile_write(const char *path, const vkg_model_config *cfg, const float *params)
{
    if (vkg_model_config_validate(cfg) < 0)
        return vkg__error_wrap(VKG_ERR_INVALID_ARG, "%s: not writing an invalid model", path);
    VKG_CHECK(vkg_model_is_gpt2(cfg), VKG_ERR_INVALID_ARG,
              "%s: llm.c's model file holds GPT-2 only, not this configuration", path);
    model_write_ctx ctx = {cfg, params};
    return vkg_io_write_atomic(path, write_model, &ctx);
}
