/* llm.c debug state files (what train_gpt2.py writes for test_gpt2.c): inputs, targets, logits
 * with V columns, the loss and all parameter gradients with Vp rows for wte. The header holds
 * only B and T, so readers need the model configuration. Does not compare anything. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "io/io_internal.h"

#define DEBUG_STATE_VERSION 2

void vkg_debugstate_deinit(vkg_debug_state *st)
{
    if (!st)
        return;
    free(st->x);
    free(st->y);
    free(st->logits);
    free(st->grads);
    memset(st, 0, sizeof *st);
}

static vkg_status read_body(FILE *f, const char *path, vkg_debug_state *st)
{
    size_t bt = (size_t)st->batch_size * (size_t)st->seq_len;
    size_t nlogits = bt * (size_t)st->vocab_size;
    st->x = malloc(bt * sizeof *st->x);
    st->y = malloc(bt * sizeof *st->y);
    st->logits = malloc(nlogits * sizeof *st->logits);
    st->grads = malloc(st->num_params * sizeof *st->grads);
    VKG_CHECK(st->x && st->y && st->logits && st->grads, VKG_ERR_NOMEM,
              "%s: out of memory for a debug state of B=%d T=%d", path, st->batch_size,
              st->seq_len);
    VKG_TRY(vkg_io_read_i32(f, path, st->x, bt));
    VKG_TRY(vkg_io_read_i32(f, path, st->y, bt));
    VKG_TRY(vkg_io_read_f32(f, path, st->logits, nlogits));
    VKG_TRY(vkg_io_read_f32(f, path, &st->loss, 1));
    return vkg_io_read_f32(f, path, st->grads, st->num_params);
}

vkg_status vkg_debugstate_read(const char *path, const vkg_model_config *cfg, vkg_debug_state *st)
{
    FILE *f = NULL;
    uint64_t size = 0;
    int32_t hdr[VKG_FILE_HEADER_INTS];
    vkg_status s;
    memset(st, 0, sizeof *st);
    if (vkg_model_config_validate(cfg) < 0)
        return vkg__error_wrap(VKG_ERR_INVALID_ARG, "%s: reading with an invalid model config",
                               path);
    VKG_TRY(vkg__io_open(path, &f, &size));
    VKG_TRY_GOTO(s, vkg__io_read_header(f, path, size, VKG_DEBUG_STATE_MAGIC, "debug state", hdr),
                 fail);
    VKG_CHECK_GOTO(s, hdr[1] == DEBUG_STATE_VERSION, VKG_ERR_FORMAT, fail,
                   "%s: unsupported debug state version %ld (expected %d)", path, (long)hdr[1],
                   DEBUG_STATE_VERSION);
    VKG_CHECK_GOTO(s, hdr[2] > 0 && hdr[3] > 0, VKG_ERR_FORMAT, fail,
                   "%s: header has B=%ld T=%ld; both must be positive", path, (long)hdr[2],
                   (long)hdr[3]);
    st->batch_size = hdr[2];
    st->seq_len = hdr[3];
    st->vocab_size = cfg->vocab_size;
    st->num_params = vkg_model_num_params(cfg);
    uint64_t bt = (uint64_t)hdr[2] * (uint64_t)hdr[3];
    uint64_t expected =
        VKG_FILE_HEADER_BYTES + 4 * (2 * bt + bt * (uint64_t)cfg->vocab_size + 1 + st->num_params);
    char what[160];
    snprintf(what, sizeof what, "B=%d T=%d (with V=%d and %zu parameters)", st->batch_size,
             st->seq_len, cfg->vocab_size, st->num_params);
    VKG_TRY_GOTO(s, vkg__io_check_size(path, size, expected, what), fail);
    VKG_TRY_GOTO(s, read_body(f, path, st), fail);
    fclose(f);
    return VKG_OK;
fail:
    fclose(f);
    vkg_debugstate_deinit(st);
    return s;
}

static vkg_status write_state(FILE *f, void *ctx)
{
    const vkg_debug_state *st = ctx;
    size_t bt = (size_t)st->batch_size * (size_t)st->seq_len;
    int32_t hdr[VKG_FILE_HEADER_INTS] = {0};
    hdr[0] = VKG_DEBUG_STATE_MAGIC;
    hdr[1] = DEBUG_STATE_VERSION;
    hdr[2] = st->batch_size;
    hdr[3] = st->seq_len;
    VKG_TRY(vkg_io_write_i32(f, hdr, VKG_FILE_HEADER_INTS));
    VKG_TRY(vkg_io_write_i32(f, st->x, bt));
    VKG_TRY(vkg_io_write_i32(f, st->y, bt));
    VKG_TRY(vkg_io_write_f32(f, st->logits, bt * (size_t)st->vocab_size));
    VKG_TRY(vkg_io_write_f32(f, &st->loss, 1));
    return vkg_io_write_f32(f, st->grads, st->num_params);
}

vkg_status vkg_debugstate_write(const char *path, const vkg_model_config *cfg,
                                const vkg_debug_state *st)
{
    if (vkg_model_config_validate(cfg) < 0)
        return vkg__error_wrap(VKG_ERR_INVALID_ARG, "%s: writing with an invalid model config",
                               path);
    VKG_CHECK(st->batch_size > 0 && st->seq_len > 0, VKG_ERR_INVALID_ARG,
              "%s: B=%d T=%d must be positive", path, st->batch_size, st->seq_len);
    VKG_CHECK(st->vocab_size == cfg->vocab_size, VKG_ERR_INVALID_ARG,
              "%s: state has V=%d but the model has V=%d", path, st->vocab_size, cfg->vocab_size);
    VKG_CHECK(st->num_params == vkg_model_num_params(cfg), VKG_ERR_INVALID_ARG,
              "%s: state has %zu gradients but the model has %zu parameters", path, st->num_params,
              vkg_model_num_params(cfg));
    return vkg_io_write_atomic(path, write_state, (void *)st);
}
