/* The model inside a checkpoint directory, of either kind (rules in checkpoint.h): GPT-2's as
 * llm.c's model.bin, every other family's as Hugging Face's config.json + model.safetensors
 * (fp32). Writing removes a leftover of the other kind; reading finds the kind, checks it against
 * the one state.bin's configuration says, compares the configurations field by field, and checks
 * the parameters against the CRC-32 state.bin records for them. Not here: state.bin itself
 * (statefile.c), DONE, listing, pruning (checkpoint.c). Nothing here prints. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "train/checkpoint_internal.h"
#include "vkgpt/io.h"

int vkg__checkpoint_model_kind(const vkg_model_config *cfg)
{
    return vkg_model_is_gpt2(cfg) ? VKG_CKPT_MODEL_BIN : VKG_CKPT_MODEL_HF;
}

/* ---- writing -------------------------------------------------------------------------------- */

vkg_status vkg__checkpoint_check_storable(const char *sd, const vkg_model_config *cfg,
                                          const float *params)
{
    if (vkg__checkpoint_model_kind(cfg) == VKG_CKPT_MODEL_BIN)
        return VKG_OK;
    VKG_CHECK(cfg->padded_vocab_size == vkg_model_pad_vocab(cfg->vocab_size), VKG_ERR_INVALID_ARG,
              "%s: not written: this model is stored as config.json + model.safetensors, whose "
              "vocabulary is padded to a multiple of 128 (Vp %d for V %d), not Vp %d",
              sd, vkg_model_pad_vocab(cfg->vocab_size), cfg->vocab_size, cfg->padded_vocab_size);
    vkg_param_table t;
    vkg_model_params(cfg, &t);
    for (int i = 0; i < t.n; i++) { /* the padding rows are not in the file: they must be +0 */
        const vkg_param_info *x = &t.t[i];
        size_t from = (size_t)x->used_rows * (size_t)x->cols, to = x->count;
        for (size_t k = from; x->place != VKG_PARAM_LAYER && k < to; k++) {
            uint32_t bits;
            memcpy(&bits, params + x->offset + k, 4);
            VKG_CHECK(bits == 0, VKG_ERR_INVALID_ARG,
                      "%s: not written: parameter %s, row %zu (a padding row past the vocabulary "
                      "of %d), is %g, not 0: config.json + model.safetensors cannot hold it",
                      sd, x->name, k / (size_t)x->cols, cfg->vocab_size,
                      (double)params[x->offset + k]);
        }
    }
    return VKG_OK;
}

/* Remove sd/name when it is there (a leftover of an interrupted write of another model). */
static vkg_status remove_stale(const char *sd, const char *name)
{
    char path[VKG_CHECKPOINT_PATH_CAP];
    VKG_TRY(vkg__checkpoint_join(path, sd, name));
    VKG_CHECK(remove(path) == 0 || errno == ENOENT, VKG_ERR_IO, "%s: cannot remove: %s", path,
              strerror(errno));
    return VKG_OK;
}

vkg_status vkg__checkpoint_write_model(const char *sd, const vkg_model_config *cfg,
                                       const float *params)
{
    char path[VKG_CHECKPOINT_PATH_CAP];
    if (vkg__checkpoint_model_kind(cfg) == VKG_CKPT_MODEL_BIN) {
        VKG_TRY(remove_stale(sd, "config.json"));
        VKG_TRY(remove_stale(sd, "model.safetensors"));
        VKG_TRY(vkg__checkpoint_join(path, sd, "model.bin"));
        return vkg_modelfile_write(path, cfg, params);
    }
    VKG_TRY(remove_stale(sd, "model.bin"));
    return vkg_hf_model_write(sd, cfg, params, 0); /* each file crash-safely, in place */
}

/* ---- the configurations compared ------------------------------------------------------------ */

/* A field of the configuration with its default resolved, so that 0 and the value it stands for
 * compare equal (config.json spells out every default). */
typedef struct cfg_field {
    const char *name;
    double s, m; /* the state's, the model's */
} cfg_field;

static double theta(const vkg_model_config *c)
{
    return c->rope_theta > 0.0f ? c->rope_theta : 10000.0;
}

/* Llama 3's scaling fields mean nothing without its factor. */
static double scaling(const vkg_model_config *c, double x)
{
    return c->rope_factor > 0.0f ? x : 0.0;
}

vkg_status vkg__checkpoint_same_config(const char *state_path, const vkg_model_config *s,
                                       const char *model_path, const vkg_model_config *m)
{
    const cfg_field f[] = {
        {"max_seq_len", s->max_seq_len, m->max_seq_len},
        {"vocab_size", s->vocab_size, m->vocab_size},
        {"padded_vocab_size", s->padded_vocab_size, m->padded_vocab_size},
        {"num_layers", s->num_layers, m->num_layers},
        {"num_heads", s->num_heads, m->num_heads},
        {"channels", s->channels, m->channels},
        {"num_kv_heads", vkg_model_kv_heads(s), vkg_model_kv_heads(m)},
        {"head_dim", vkg_model_head_dim(s), vkg_model_head_dim(m)},
        {"mlp_hidden", vkg_model_mlp_hidden(s), vkg_model_mlp_hidden(m)},
        {"mlp", s->mlp, m->mlp},
        {"norm", s->norm, m->norm},
        {"norm_eps", vkg_model_norm_eps(s), vkg_model_norm_eps(m)},
        {"pos", s->pos, m->pos},
        {"rope_theta", theta(s), theta(m)},
        {"rope_factor", s->rope_factor, m->rope_factor},
        {"rope_low_freq_factor", scaling(s, s->rope_low_freq_factor),
         scaling(m, m->rope_low_freq_factor)},
        {"rope_high_freq_factor", scaling(s, s->rope_high_freq_factor),
         scaling(m, m->rope_high_freq_factor)},
        {"rope_original_max", scaling(s, s->rope_original_max), scaling(m, m->rope_original_max)},
        {"qk_norm", s->qk_norm, m->qk_norm},
        {"bias", s->bias, m->bias},
        {"untied", s->untied, m->untied},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        VKG_CHECK(f[i].s == f[i].m, VKG_ERR_FORMAT,
                  "%s: model configuration does not match %s: %s is %.9g in the state file, "
                  "%.9g in the model (state maxT=%d V=%d Vp=%d L=%d NH=%d C=%d; model maxT=%d "
                  "V=%d Vp=%d L=%d NH=%d C=%d)",
                  state_path, model_path, f[i].name, f[i].s, f[i].m, s->max_seq_len, s->vocab_size,
                  s->padded_vocab_size, s->num_layers, s->num_heads, s->channels, m->max_seq_len,
                  m->vocab_size, m->padded_vocab_size, m->num_layers, m->num_heads, m->channels);
    return VKG_OK;
}

/* ---- reading -------------------------------------------------------------------------------- */

/* Which kind sd holds; with want (state_path's configuration) it must be want's. */
static vkg_status find_kind(const char *sd, const char *state_path, const vkg_model_config *want,
                            int *kind)
{
    char bin[VKG_CHECKPOINT_PATH_CAP], js[VKG_CHECKPOINT_PATH_CAP], st[VKG_CHECKPOINT_PATH_CAP];
    VKG_TRY(vkg__checkpoint_join(bin, sd, "model.bin"));
    VKG_TRY(vkg__checkpoint_join(js, sd, "config.json"));
    VKG_TRY(vkg__checkpoint_join(st, sd, "model.safetensors"));
    int has_bin = vkg__checkpoint_is_file(bin);
    int has_hf = vkg__checkpoint_is_file(js) || vkg__checkpoint_is_file(st);
    const char *hf_file = vkg__checkpoint_is_file(js) ? js : st;
    VKG_CHECK(!has_bin || !has_hf, VKG_ERR_FORMAT,
              "%s: holds both %s and %s: a checkpoint holds its model one way (model.bin for "
              "GPT-2, config.json + model.safetensors for the other families)",
              sd, bin, hf_file);
    if (!want) {
        VKG_CHECK(has_bin || has_hf, VKG_ERR_NOT_FOUND,
                  "%s: no model: neither model.bin nor config.json + model.safetensors", sd);
        *kind = has_bin ? VKG_CKPT_MODEL_BIN : VKG_CKPT_MODEL_HF;
        return VKG_OK;
    }
    *kind = vkg__checkpoint_model_kind(want);
    if (*kind == VKG_CKPT_MODEL_BIN)
        VKG_CHECK(!has_hf, VKG_ERR_FORMAT,
                  "%s describes a GPT-2 model, stored as model.bin, but the checkpoint holds %s "
                  "instead (another family's files)",
                  state_path, hf_file);
    else
        VKG_CHECK(!has_bin, VKG_ERR_FORMAT,
                  "%s describes a model of another family than GPT-2, stored as config.json + "
                  "model.safetensors, but the checkpoint holds %s instead (GPT-2's llm.c file)",
                  state_path, bin);
    return VKG_OK;
}

/* A checkpoint's model.safetensors: fp32 tensors whose bytes are exactly those of cfg's
 * parameters less the vocabulary's padding rows (the shapes are checked when it is read). */
static vkg_status check_safetensors(const char *path, const vkg_model_config *cfg)
{
    vkg_safetensors *s = NULL;
    VKG_TRY(vkg_safetensors_open(path, &s));
    vkg_param_table t;
    vkg_model_params(cfg, &t);
    uint64_t want = 0, have = 0;
    for (int i = 0; i < t.n; i++)
        want += (uint64_t)t.t[i].count / (uint64_t)t.t[i].rows * (uint64_t)t.t[i].used_rows * 4u;
    vkg_status st = VKG_OK;
    for (int i = 0; i < vkg_safetensors_count(s) && st == VKG_OK; i++) {
        const vkg_st_info *x = vkg_safetensors_info(s, i);
        if (x->dtype != VKG_ST_F32)
            st = VKG_FAIL(VKG_ERR_FORMAT,
                          "%s: tensor %s is %s: a checkpoint's model is stored in F32 (the "
                          "checksum state.bin records is of fp32 values)",
                          path, x->name, vkg_st_dtype_name(x->dtype));
        have += x->nbytes;
    }
    if (st == VKG_OK && have != want)
        st = VKG_FAIL(VKG_ERR_FORMAT,
                      "%s: holds %llu bytes of tensors, the configuration's parameters are %llu "
                      "(fp32, without the vocabulary's padding rows)",
                      path, (unsigned long long)have, (unsigned long long)want);
    vkg_safetensors_close(&s);
    return st;
}

vkg_status vkg__checkpoint_read_model(const char *sd, const char *state_path,
                                      const vkg_model_config *want, const vkg_checkpoint_state *st,
                                      vkg_model_config *cfg, float **params)
{
    char model[VKG_CHECKPOINT_PATH_CAP], data[VKG_CHECKPOINT_PATH_CAP];
    vkg_model_config mc;
    int kind = 0;
    float *p = NULL;
    vkg_status s = VKG_OK;
    if (params)
        *params = NULL;
    VKG_TRY(find_kind(sd, state_path, want, &kind));
    VKG_TRY(
        vkg__checkpoint_join(model, sd, kind == VKG_CKPT_MODEL_BIN ? "model.bin" : "config.json"));
    VKG_TRY(vkg__checkpoint_join(data, sd,
                                 kind == VKG_CKPT_MODEL_BIN ? "model.bin" : "model.safetensors"));
    if (kind == VKG_CKPT_MODEL_BIN)
        VKG_TRY(vkg_modelfile_read_header(model, &mc, NULL));
    else
        VKG_TRY(vkg_hf_config_read(model, &mc));
    if (want) { /* before anything counts the model file's configuration */
        VKG_TRY(vkg__checkpoint_same_config(state_path, want, model, &mc));
        if (kind == VKG_CKPT_MODEL_HF)
            VKG_TRY(check_safetensors(data, want));
    }
    if (!params) {
        *cfg = want ? *want : mc;
        return VKG_OK;
    }
    if (kind == VKG_CKPT_MODEL_BIN)
        VKG_TRY(vkg_modelfile_read(model, &mc, &p));
    else
        VKG_TRY(vkg_hf_model_read(sd, &mc, &p));
    if (want) /* read again: the file may have changed since its header was checked */
        VKG_TRY_GOTO(s, vkg__checkpoint_same_config(state_path, want, model, &mc), fail);
    const vkg_model_config *c = want ? want : &mc;
    if (st && st->params_crc_set) {
        uint32_t crc = vkg_statefile_crc32_floats(p, vkg_model_num_params(c));
        VKG_CHECK_GOTO(s, crc == st->params_crc, VKG_ERR_FORMAT, fail,
                       "%s: its parameters do not match the checksum %s records for them "
                       "(CRC-32 %08lx, recorded %08lx): the model file is corrupted or from "
                       "another checkpoint",
                       data, state_path, (unsigned long)crc, (unsigned long)st->params_crc);
    }
    VKG_TRY_GOTO(s,
                 vkg_statefile_check_values(VKG_ERR_FORMAT, data, "parameter", c, p, 0,
                                            "the model holds a value that is not finite"),
                 fail);
    *cfg = *c;
    *params = p;
    return VKG_OK;
fail:
    free(p);
    return s;
}

vkg_status vkg_checkpoint_read_model(const char *sd, vkg_model_config *cfg, float **params)
{
    char state[VKG_CHECKPOINT_PATH_CAP];
    vkg_model_config sc;
    vkg_checkpoint_state st;
    size_t n;
    VKG_CHECK(sd && cfg, VKG_ERR_INVALID_ARG, "checkpoint: NULL argument");
    VKG_TRY(vkg__checkpoint_join(state, sd, "state.bin"));
    if (!vkg__checkpoint_is_file(state)) /* a model saved alone */
        return vkg__checkpoint_read_model(sd, NULL, NULL, NULL, cfg, params);
    VKG_TRY(vkg_statefile_read(state, &sc, &st, &n, NULL, NULL));
    return vkg__checkpoint_read_model(sd, state, &sc, &st, cfg, params);
}
