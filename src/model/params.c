/* The parameter table (see vkgpt/model.h): names, shapes, places, weight decay and
 * initialisation of a configuration's tensors, and the layout of a model part.
 * No allocation, no Vulkan. */
#include "vkgpt/model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"

int vkg_model_pad_vocab(int vocab_size)
{
    return (vocab_size + 127) / 128 * 128;
}

int vkg_model_kv_heads(const vkg_model_config *cfg)
{
    return cfg->num_kv_heads ? cfg->num_kv_heads : cfg->num_heads;
}

int vkg_model_head_dim(const vkg_model_config *cfg)
{
    return cfg->head_dim ? cfg->head_dim : cfg->num_heads ? cfg->channels / cfg->num_heads : 0;
}

int vkg_model_mlp_hidden(const vkg_model_config *cfg)
{
    if (cfg->mlp_hidden)
        return cfg->mlp_hidden;
    return cfg->channels > 0x7FFFFFFF / 4 ? 0x7FFFFFFF : 4 * cfg->channels; /* refused: validate */
}

float vkg_model_norm_eps(const vkg_model_config *cfg)
{
    return cfg->norm_eps > 0.0f ? cfg->norm_eps : 1e-5f;
}

int vkg_model_is_gpt2(const vkg_model_config *cfg)
{
    return !cfg->num_kv_heads && !cfg->head_dim && !cfg->mlp_hidden && !cfg->mlp && !cfg->norm &&
           cfg->norm_eps == 0.0f && !cfg->pos && cfg->rope_theta == 0.0f &&
           cfg->rope_factor == 0.0f && cfg->rope_low_freq_factor == 0.0f &&
           cfg->rope_high_freq_factor == 0.0f && !cfg->rope_original_max && !cfg->qk_norm &&
           !cfg->bias && !cfg->untied;
}

void vkg_model_rope_inv_freq(const vkg_model_config *cfg, float *inv_freq)
{
    int D = vkg_model_head_dim(cfg);
    double base = cfg->rope_theta > 0.0f ? cfg->rope_theta : 10000.0;
    const double pi = 3.14159265358979323846;
    for (int i = 0; i < D / 2; i++) {
        double f = 1.0 / pow(base, (double)(2 * i) / (double)D);
        if (cfg->rope_factor > 0.0f) { /* Llama 3: long wavelengths slowed by factor, smoothly */
            double k = cfg->rope_factor, lo = cfg->rope_low_freq_factor;
            double hi = cfg->rope_high_freq_factor, old = cfg->rope_original_max;
            double wavelen = 2.0 * pi / f;
            if (wavelen > old / lo) {
                f /= k;
            } else if (wavelen >= old / hi) {
                double smooth = (old / wavelen - lo) / (hi - lo);
                f = (1.0 - smooth) * f / k + smooth * f;
            }
        }
        inv_freq[i] = (float)f;
    }
}

vkg_status vkg_model_config_validate(const vkg_model_config *cfg)
{
    VKG_CHECK(cfg->max_seq_len > 0, VKG_ERR_INVALID_ARG, "max_seq_len must be > 0, got %d",
              cfg->max_seq_len);
    VKG_CHECK(cfg->vocab_size > 0, VKG_ERR_INVALID_ARG, "vocab_size must be > 0, got %d",
              cfg->vocab_size);
    VKG_CHECK(cfg->padded_vocab_size >= cfg->vocab_size, VKG_ERR_INVALID_ARG,
              "padded_vocab_size (%d) must be >= vocab_size (%d)", cfg->padded_vocab_size,
              cfg->vocab_size);
    VKG_CHECK(cfg->num_layers > 0, VKG_ERR_INVALID_ARG, "num_layers must be > 0, got %d",
              cfg->num_layers);
    VKG_CHECK(cfg->num_heads > 0, VKG_ERR_INVALID_ARG, "num_heads must be > 0, got %d",
              cfg->num_heads);
    VKG_CHECK(cfg->channels > 0 && (cfg->head_dim > 0 || cfg->channels % cfg->num_heads == 0),
              VKG_ERR_INVALID_ARG,
              "channels (%d) must be > 0 and divisible by num_heads (%d) when head_dim is not "
              "given",
              cfg->channels, cfg->num_heads);
    VKG_CHECK(cfg->head_dim >= 0 && cfg->mlp_hidden >= 0 && cfg->num_kv_heads >= 0,
              VKG_ERR_INVALID_ARG,
              "head_dim (%d), mlp_hidden (%d) and num_kv_heads (%d) must "
              "be >= 0 (0: the default)",
              cfg->head_dim, cfg->mlp_hidden, cfg->num_kv_heads);
    int nkv = vkg_model_kv_heads(cfg), D = vkg_model_head_dim(cfg);
    /* the table's rows are ints: the widest ones (q/k/v's, SwiGLU's gate and up) must fit */
    double qkv_rows = ((double)cfg->num_heads + 2.0 * nkv) * D; /* exact below 2^53 */
    double mlp_rows = (cfg->mlp == VKG_MLP_SWIGLU ? 2.0 : 1.0) *
                      (cfg->mlp_hidden ? (double)cfg->mlp_hidden : 4.0 * cfg->channels);
    VKG_CHECK(qkv_rows <= 2147483647.0 && mlp_rows <= 2147483647.0, VKG_ERR_INVALID_ARG,
              "the q/k/v product's %.0f rows or the MLP's %.0f are more than 2^31 - 1", qkv_rows,
              mlp_rows);
    VKG_CHECK(cfg->num_heads % nkv == 0, VKG_ERR_INVALID_ARG,
              "num_kv_heads (%d) must divide num_heads (%d)", nkv, cfg->num_heads);
    VKG_CHECK(cfg->mlp >= VKG_MLP_GELU && cfg->mlp <= VKG_MLP_RELU2, VKG_ERR_INVALID_ARG,
              "mlp kind %d is none of gelu, swiglu, relu2", cfg->mlp);
    VKG_CHECK(cfg->norm == VKG_NORM_LAYER || cfg->norm == VKG_NORM_RMS, VKG_ERR_INVALID_ARG,
              "norm kind %d is none of layernorm, rmsnorm", cfg->norm);
    VKG_CHECK(cfg->pos == VKG_POS_LEARNED || cfg->pos == VKG_POS_ROPE, VKG_ERR_INVALID_ARG,
              "position kind %d is none of learned, rope", cfg->pos);
    VKG_CHECK(cfg->bias >= VKG_BIAS_ALL && cfg->bias <= VKG_BIAS_QKV, VKG_ERR_INVALID_ARG,
              "bias kind %d is none of all, none, qkv", cfg->bias);
    VKG_CHECK(cfg->pos != VKG_POS_ROPE || D % 2 == 0, VKG_ERR_INVALID_ARG,
              "rotary embeddings need an even head_dim, got %d", D);
    VKG_CHECK(cfg->norm_eps >= 0.0f && cfg->norm_eps < 1.0f, VKG_ERR_INVALID_ARG,
              "norm_eps must be in [0, 1), got %g", (double)cfg->norm_eps);
    VKG_CHECK(cfg->rope_theta >= 0.0f && cfg->rope_factor >= 0.0f, VKG_ERR_INVALID_ARG,
              "rope_theta (%g) and rope_factor (%g) must be >= 0", (double)cfg->rope_theta,
              (double)cfg->rope_factor);
    VKG_CHECK(cfg->rope_factor == 0.0f || (cfg->rope_low_freq_factor > 0.0f &&
                                           cfg->rope_high_freq_factor > cfg->rope_low_freq_factor &&
                                           cfg->rope_original_max > 0),
              VKG_ERR_INVALID_ARG,
              "Llama 3 rope scaling needs 0 < low_freq_factor (%g) < high_freq_factor (%g) and "
              "original_max_position_embeddings > 0 (%d)",
              (double)cfg->rope_low_freq_factor, (double)cfg->rope_high_freq_factor,
              cfg->rope_original_max);
    VKG_CHECK(cfg->qk_norm == 0 || cfg->qk_norm == 1, VKG_ERR_INVALID_ARG,
              "qk_norm must be 0 or 1, got %d", cfg->qk_norm);
    VKG_CHECK(cfg->untied == 0 || cfg->untied == 1, VKG_ERR_INVALID_ARG,
              "untied must be 0 or 1, got %d", cfg->untied);
    return VKG_OK;
}

static void add(vkg_param_table *t, const char *name, vkg_param_place place, int rows, int cols,
                int decays, vkg_param_init init, int L)
{
    vkg_param_info *p = &t->t[t->n++];
    *p = (vkg_param_info){.name = name,
                          .place = place,
                          .rows = rows,
                          .cols = cols,
                          .used_rows = rows,
                          .count = (size_t)rows * (size_t)cols * (place == VKG_PARAM_LAYER ? L : 1),
                          .offset = t->total,
                          .decays = decays,
                          .init = init};
    t->total += p->count;
}

void vkg_model_params(const vkg_model_config *cfg, vkg_param_table *t)
{
    int C = cfg->channels, L = cfg->num_layers, NH = cfg->num_heads;
    int NKV = vkg_model_kv_heads(cfg), D = vkg_model_head_dim(cfg), F = vkg_model_mlp_hidden(cfg);
    int ln = cfg->norm == VKG_NORM_LAYER, all = cfg->bias == VKG_BIAS_ALL;
    int qkvb = all || cfg->bias == VKG_BIAS_QKV, gated = cfg->mlp == VKG_MLP_SWIGLU;
    const vkg_param_place E = VKG_PARAM_EMBED, Y = VKG_PARAM_LAYER, H = VKG_PARAM_HEAD;
    const vkg_param_init N = VKG_INIT_NORMAL, R = VKG_INIT_RESIDUAL, Z = VKG_INIT_ZEROS,
                         O = VKG_INIT_ONES;
    memset(t, 0, sizeof *t);
    /* llm.c's order for GPT-2; the other families' tensors where theirs stand */
    add(t, "wte", E, cfg->padded_vocab_size, C, 1, N, L);
    t->t[0].used_rows = cfg->vocab_size;
    t->tied = cfg->untied ? -1 : 0;
    if (cfg->pos == VKG_POS_LEARNED)
        add(t, "wpe", E, cfg->max_seq_len, C, 1, N, L);
    add(t, "ln1w", Y, 1, C, 0, O, L);
    if (ln)
        add(t, "ln1b", Y, 1, C, 0, Z, L);
    add(t, "qkvw", Y, (NH + 2 * NKV) * D, C, 1, N, L); /* q's rows, then k's, then v's */
    if (qkvb)
        add(t, "qkvb", Y, 1, (NH + 2 * NKV) * D, 0, Z, L);
    if (cfg->qk_norm) {
        add(t, "qnormw", Y, 1, D, 0, O, L);
        add(t, "knormw", Y, 1, D, 0, O, L);
    }
    add(t, "attprojw", Y, C, NH * D, 1, R, L);
    if (all)
        add(t, "attprojb", Y, 1, C, 0, Z, L);
    add(t, "ln2w", Y, 1, C, 0, O, L);
    if (ln)
        add(t, "ln2b", Y, 1, C, 0, Z, L);
    add(t, "fcw", Y, (gated ? 2 : 1) * F, C, 1, N, L); /* SwiGLU: the gate's rows, then up's */
    if (all)
        add(t, "fcb", Y, 1, (gated ? 2 : 1) * F, 0, Z, L);
    add(t, "fcprojw", Y, C, F, 1, R, L);
    if (all)
        add(t, "fcprojb", Y, 1, C, 0, Z, L);
    add(t, "lnfw", H, 1, C, 0, O, L);
    if (ln)
        add(t, "lnfb", H, 1, C, 0, Z, L);
    if (cfg->untied) {
        add(t, "lm_head", H, cfg->padded_vocab_size, C, 1, N, L);
        t->t[t->n - 1].used_rows = cfg->vocab_size;
    }
}

size_t vkg_model_num_params(const vkg_model_config *cfg)
{
    vkg_param_table t;
    vkg_model_params(cfg, &t);
    return t.total;
}

void vkg_model_describe(const vkg_model_config *cfg, char *buf, size_t cap)
{
    static const char *const mlps[] = {"GELU", "SwiGLU", "ReLU^2"};
    static const char *const biases[] = {"biases", "no biases", "q/k/v biases"};
    if (!cap)
        return;
    if (vkg_model_is_gpt2(cfg)) {
        snprintf(buf, cap, "GPT-2 (LayerNorm, learned positions, GELU, biases, tied)");
        return;
    }
    int nkv = vkg_model_kv_heads(cfg);
    char rope[96] = "learned positions";
    if (cfg->pos == VKG_POS_ROPE)
        snprintf(rope, sizeof rope, "rotary (theta %g%s)",
                 (double)(cfg->rope_theta > 0.0f ? cfg->rope_theta : 10000.0f),
                 cfg->rope_factor > 0.0f ? ", Llama 3 scaling" : "");
    snprintf(buf, cap, "%s (eps %g), %s, %s %d/%d heads of %d%s, %s %d, %s, %s",
             cfg->norm == VKG_NORM_RMS ? "RMSNorm" : "LayerNorm", (double)vkg_model_norm_eps(cfg),
             rope, nkv < cfg->num_heads ? "GQA" : "MHA", cfg->num_heads, nkv,
             vkg_model_head_dim(cfg), cfg->qk_norm ? " with QK-norm" : "", mlps[cfg->mlp],
             vkg_model_mlp_hidden(cfg), biases[cfg->bias], cfg->untied ? "untied head" : "tied");
}

void vkg_model_token_flops(const vkg_model_config *cfg, int T, double *layer, double *head)
{
    double C = cfg->channels, NH = cfg->num_heads, NKV = vkg_model_kv_heads(cfg);
    double D = vkg_model_head_dim(cfg), F = vkg_model_mlp_hidden(cfg);
    double mlp = cfg->mlp == VKG_MLP_SWIGLU ? 3.0 : 2.0; /* products of C x F */
    /* GPT-2 (NH D = C, NKV = NH, F = 4 C): 24 C^2 + 4 T C, each term an exact integer */
    *layer = 2.0 * (C * (NH + 2.0 * NKV) * D + NH * D * C + mlp * C * F) + 4.0 * (double)T * NH * D;
    *head = 2.0 * C * (double)cfg->padded_vocab_size;
}

vkg_model_part vkg_model_whole(const vkg_model_config *cfg)
{
    return (vkg_model_part){
        .first = 0, .last = cfg->num_layers, .flags = VKG_MODEL_PART_EMBED | VKG_MODEL_PART_HEAD};
}

vkg_status vkg_model_part_validate(const vkg_model_config *cfg, const vkg_model_part *p)
{
    int L = cfg->num_layers;
    VKG_CHECK(p->first >= 0 && p->first < p->last && p->last <= L, VKG_ERR_INVALID_ARG,
              "model part: layers [%d, %d) must be a non-empty range inside [0, %d)", p->first,
              p->last, L);
    VKG_CHECK(!(p->flags & ~(VKG_MODEL_PART_EMBED | VKG_MODEL_PART_HEAD)), VKG_ERR_INVALID_ARG,
              "model part: unknown flags 0x%x", (unsigned)p->flags);
    VKG_CHECK(!!(p->flags & VKG_MODEL_PART_EMBED) == (p->first == 0), VKG_ERR_INVALID_ARG,
              "model part: the embeddings belong to the part that starts at layer 0 (this one "
              "starts at %d)",
              p->first);
    VKG_CHECK(!!(p->flags & VKG_MODEL_PART_HEAD) == (p->last == L), VKG_ERR_INVALID_ARG,
              "model part: the head belongs to the part that ends at layer %d (this one ends at "
              "%d)",
              L, p->last);
    return VKG_OK;
}

void vkg_model_part_layout(const vkg_model_config *cfg, const vkg_model_part *part,
                           vkg_model_layout *lo)
{
    vkg_param_table t;
    vkg_model_params(cfg, &t);
    size_t at = 0, nl = (size_t)(part->last - part->first);
    int embed = part->flags & VKG_MODEL_PART_EMBED, head = part->flags & VKG_MODEL_PART_HEAD;
    memset(lo, 0, sizeof *lo);
    lo->n = t.n;
    for (int i = 0; i < t.n; i++) {
        const vkg_param_info *p = &t.t[i];
        size_t count = 0, skip = 0;
        if (p->place == VKG_PARAM_LAYER) {
            size_t per = p->count / (size_t)cfg->num_layers;
            count = per * nl, skip = per * (size_t)part->first;
        } else if (p->place == VKG_PARAM_EMBED) {
            count = embed || (head && i == t.tied) ? p->count : 0;
        } else {
            count = head ? p->count : 0;
        }
        lo->count[i] = count;
        lo->part_offset[i] = at;
        lo->whole_offset[i] = p->offset + skip;
        at += count;
    }
    lo->total = at;
    lo->tied = t.tied >= 0 ? lo->count[t.tied] : 0;
}

void vkg_model_part_extract(const vkg_model_layout *lo, const float *whole, float *part)
{
    for (int i = 0; i < lo->n; i++)
        if (lo->count[i])
            memcpy(part + lo->part_offset[i], whole + lo->whole_offset[i], lo->count[i] * 4);
}

void vkg_model_part_insert(const vkg_model_layout *lo, const float *part, float *whole)
{
    for (int i = 0; i < lo->n; i++)
        if (lo->count[i])
            memcpy(whole + lo->whole_offset[i], part + lo->part_offset[i], lo->count[i] * 4);
}

/* ---- presets: each family's config.json, as published ---- */

static const struct {
    const char *name;
    vkg_model_config cfg;
} presets[] = {
    {"gpt2-124m",
     {.max_seq_len = 1024,
      .vocab_size = 50257,
      .num_layers = 12,
      .num_heads = 12,
      .channels = 768}},
    {"gpt2-350m",
     {.max_seq_len = 1024,
      .vocab_size = 50257,
      .num_layers = 24,
      .num_heads = 16,
      .channels = 1024}},
    /* a GPT-2-124M-sized Llama for quick runs: GPT-2's vocabulary, GQA 12/4, SwiGLU of 2048 */
    {"llama-125m",
     {.max_seq_len = 1024,
      .vocab_size = 50257,
      .num_layers = 12,
      .num_heads = 12,
      .channels = 768,
      .num_kv_heads = 4,
      .mlp_hidden = 2048,
      .mlp = VKG_MLP_SWIGLU,
      .norm = VKG_NORM_RMS,
      .norm_eps = 1e-5f,
      .pos = VKG_POS_ROPE,
      .rope_theta = 10000.0f,
      .bias = VKG_BIAS_NONE}},
    /* HuggingFaceTB/SmolLM2-135M */
    {"smollm2-135m",
     {.max_seq_len = 8192,
      .vocab_size = 49152,
      .num_layers = 30,
      .num_heads = 9,
      .channels = 576,
      .num_kv_heads = 3,
      .mlp_hidden = 1536,
      .mlp = VKG_MLP_SWIGLU,
      .norm = VKG_NORM_RMS,
      .norm_eps = 1e-5f,
      .pos = VKG_POS_ROPE,
      .rope_theta = 100000.0f,
      .bias = VKG_BIAS_NONE}},
    /* Qwen/Qwen2.5-0.5B: q, k and v biases */
    {"qwen2.5-0.5b",
     {.max_seq_len = 32768,
      .vocab_size = 151936,
      .num_layers = 24,
      .num_heads = 14,
      .channels = 896,
      .num_kv_heads = 2,
      .mlp_hidden = 4864,
      .mlp = VKG_MLP_SWIGLU,
      .norm = VKG_NORM_RMS,
      .norm_eps = 1e-6f,
      .pos = VKG_POS_ROPE,
      .rope_theta = 1000000.0f,
      .bias = VKG_BIAS_QKV}},
    /* Qwen/Qwen3-0.6B: head_dim 128 (NH D = 2048 > C), QK-norm */
    {"qwen3-0.6b",
     {.max_seq_len = 40960,
      .vocab_size = 151936,
      .num_layers = 28,
      .num_heads = 16,
      .channels = 1024,
      .num_kv_heads = 8,
      .head_dim = 128,
      .mlp_hidden = 3072,
      .mlp = VKG_MLP_SWIGLU,
      .norm = VKG_NORM_RMS,
      .norm_eps = 1e-6f,
      .pos = VKG_POS_ROPE,
      .rope_theta = 1000000.0f,
      .qk_norm = 1,
      .bias = VKG_BIAS_NONE}},
    /* TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T: untied head */
    {"tinyllama-1.1b",
     {.max_seq_len = 2048,
      .vocab_size = 32000,
      .num_layers = 22,
      .num_heads = 32,
      .channels = 2048,
      .num_kv_heads = 4,
      .mlp_hidden = 5632,
      .mlp = VKG_MLP_SWIGLU,
      .norm = VKG_NORM_RMS,
      .norm_eps = 1e-5f,
      .pos = VKG_POS_ROPE,
      .rope_theta = 10000.0f,
      .bias = VKG_BIAS_NONE,
      .untied = 1}},
};
enum { NPRESETS = (int)(sizeof presets / sizeof presets[0]) };

const char *const *vkg_model_preset_names(void)
{
    static const char *names[NPRESETS + 1];
    for (int i = 0; i < NPRESETS; i++)
        names[i] = presets[i].name;
    names[NPRESETS] = NULL;
    return names;
}

vkg_status vkg_model_preset(const char *name, vkg_model_config *cfg)
{
    for (int i = 0; i < NPRESETS; i++)
        if (name && !strcmp(name, presets[i].name)) {
            *cfg = presets[i].cfg;
            cfg->padded_vocab_size = vkg_model_pad_vocab(cfg->vocab_size);
            return VKG_OK;
        }
    return VKG_FAIL(VKG_ERR_NOT_FOUND,
                    "no model preset named \"%s\": gpt2-124m, gpt2-350m, llama-125m, "
                    "smollm2-135m, qwen2.5-0.5b, qwen3-0.6b, tinyllama-1.1b",
                    name ? name : "(null)");
}
