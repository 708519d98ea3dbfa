/* Hugging Face's config.json for the families vkgpt describes (see vkgpt/io.h): GPT-2 ("gpt2")
 * and the Llama family ("llama", "mistral", "qwen2", "qwen3"), read into a vkg_model_config and
 * written from one. The fields and their defaults are those of transformers' configuration
 * classes (GPT2Config, LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config); anything a model
 * type asks for that vkgpt does not compute (another activation, sliding-window attention, a
 * rope scaling other than Llama 3's, an output-projection or MLP bias) is refused by name,
 * never silently dropped. Fields no computation depends on (token ids, dropout, dtype) are
 * skipped. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/escape.h"
#include "base/json.h"
#include "io/io_internal.h"
#include "vkgpt/io.h"

#define HF_CONFIG_MAX_BYTES (1u << 20)

/* The fields read, each with whether it was there (1), null (2) or absent (0). */
typedef struct hf_fields {
    char model_type[32], act[32];
    long long i[16];
    int has_i[16];
    double f[8];
    int has_f[8];
    int b[4], has_b[4];
    /* rope_scaling: present (1), null (2) */
    int rope_scaling;
    char rope_type[32];
} hf_fields;

enum {
    I_HIDDEN,
    I_INTER,
    I_LAYERS,
    I_HEADS,
    I_KV,
    I_HEAD_DIM,
    I_MAXPOS,
    I_VOCAB,
    I_SLIDING,
    I_ORIG_MAX,
    NI
};
enum { F_RMS_EPS, F_LN_EPS, F_THETA, F_FACTOR, F_LOW, F_HIGH, NF };
enum { B_TIE, B_ATT_BIAS, B_MLP_BIAS, B_USE_SLIDING, NB };

/* A config.json key and the slot of hf_fields it fills. */
typedef struct key_slot {
    const char *key;
    int slot;
} key_slot;

static const key_slot int_keys[] = {
    {"hidden_size", I_HIDDEN},
    {"n_embd", I_HIDDEN},
    {"intermediate_size", I_INTER},
    {"n_inner", I_INTER},
    {"num_hidden_layers", I_LAYERS},
    {"n_layer", I_LAYERS},
    {"num_attention_heads", I_HEADS},
    {"n_head", I_HEADS},
    {"num_key_value_heads", I_KV},
    {"head_dim", I_HEAD_DIM},
    {"max_position_embeddings", I_MAXPOS},
    {"n_positions", I_MAXPOS},
    {"vocab_size", I_VOCAB},
    {"sliding_window", I_SLIDING},
};
static const key_slot float_keys[] = {
    {"rms_norm_eps", F_RMS_EPS},
    {"layer_norm_epsilon", F_LN_EPS},
    {"rope_theta", F_THETA},
};
static const key_slot bool_keys[] = {
    {"tie_word_embeddings", B_TIE},
    {"attention_bias", B_ATT_BIAS},
    {"mlp_bias", B_MLP_BIAS},
    {"use_sliding_window", B_USE_SLIDING},
};

#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* A JSON literal or number: *is_null set for null; a number into *v (true/false: 1/0 with
 * *is_bool). */
static vkg_status read_scalar(vkg__json *j, const char *path, const char *key, double *v,
                              int *is_null, int *is_bool)
{
    *is_null = 0, *is_bool = 0;
    int c = vkg__json_peek(j);
    if (c == 'n' || c == 't' || c == 'f') {
        *is_null = c == 'n', *is_bool = c != 'n', *v = c == 't';
        return vkg__json_skip(j);
    }
    VKG_CHECK(c == '-' || (c >= '0' && c <= '9'), VKG_ERR_FORMAT,
              "%s: field \"%s\": expected a number, true, false or null", path, key);
    return vkg__json_number(j, v);
}

/* A string value of at most cap - 1 bytes into out. */
static vkg_status read_string(vkg__json *j, const char *path, const char *key, char *out,
                              size_t cap)
{
    char *buf = NULL;
    size_t len = 0, bcap = 0;
    VKG_CHECK(vkg__json_peek(j) == '"', VKG_ERR_FORMAT, "%s: field \"%s\": expected a string", path,
              key);
    vkg_status st = vkg__json_string(j, &buf, &len, &bcap);
    if (st == VKG_OK && (len >= cap || strlen(buf) != len)) {
        char shown[64];
        st = VKG_FAIL(VKG_ERR_FORMAT, "%s: field \"%s\": \"%s\" is not a value vkgpt knows", path,
                      key, vkg__escape(shown, sizeof shown, buf, len));
    }
    if (st == VKG_OK)
        memcpy(out, buf, len + 1);
    free(buf);
    return st;
}

static vkg_status read_rope_scaling(vkg__json *j, const char *path, hf_fields *h)
{
    if (vkg__json_peek(j) == 'n') {
        h->rope_scaling = 2;
        return vkg__json_skip(j);
    }
    int more = 0;
    char *key = NULL;
    size_t klen = 0, kcap = 0;
    vkg_status st = vkg__json_open(j, '{', &more);
    h->rope_scaling = 1;
    while (st == VKG_OK && more) {
        st = vkg__json_string(j, &key, &klen, &kcap);
        if (st == VKG_OK)
            st = vkg__json_expect(j, ':');
        if (st != VKG_OK)
            break;
        double v = 0.0;
        int is_null = 0, is_bool = 0;
        if (!strcmp(key, "rope_type") || !strcmp(key, "type")) {
            st = read_string(j, path, "rope_scaling.rope_type", h->rope_type, sizeof h->rope_type);
        } else if (!strcmp(key, "factor") || !strcmp(key, "low_freq_factor") ||
                   !strcmp(key, "high_freq_factor")) {
            st = read_scalar(j, path, key, &v, &is_null, &is_bool);
            int slot = key[0] == 'f' ? F_FACTOR : key[0] == 'l' ? F_LOW : F_HIGH;
            if (st == VKG_OK && !is_null && !is_bool && fabs(v) > 1e30)
                st = VKG_FAIL(VKG_ERR_FORMAT, "%s: field \"rope_scaling.%s\": %g is out of range",
                              path, key, v);
            if (st == VKG_OK && !is_null && !is_bool)
                h->f[slot] = v, h->has_f[slot] = 1;
        } else if (!strcmp(key, "original_max_position_embeddings")) {
            st = read_scalar(j, path, key, &v, &is_null, &is_bool);
            /* a whole number in range, or marked unusable (3) without converting it */
            int whole =
                st == VKG_OK && !is_null && !is_bool && v == floor(v) && v >= 1.0 && v < 16777216.0;
            if (st == VKG_OK && !is_null && !is_bool)
                h->i[I_ORIG_MAX] = whole ? (long long)v : 0, h->has_i[I_ORIG_MAX] = whole ? 1 : 3;
        } else {
            st = vkg__json_skip(j);
        }
        if (st == VKG_OK)
            st = vkg__json_next(j, '}', &more);
    }
    free(key);
    return st;
}

static vkg_status read_fields(vkg__json *j, const char *path, hf_fields *h)
{
    int more = 0;
    char *key = NULL;
    size_t klen = 0, kcap = 0;
    vkg_status st = vkg__json_open(j, '{', &more);
    VKG_CHECK(st == VKG_OK, st, "%s: not a JSON object", path);
    while (st == VKG_OK && more) {
        st = vkg__json_string(j, &key, &klen, &kcap);
        if (st == VKG_OK)
            st = vkg__json_expect(j, ':');
        if (st != VKG_OK)
            break;
        int done = 0;
        if (!strcmp(key, "model_type")) {
            st = read_string(j, path, key, h->model_type, sizeof h->model_type), done = 1;
        } else if (!strcmp(key, "hidden_act") || !strcmp(key, "activation_function")) {
            st = read_string(j, path, key, h->act, sizeof h->act), done = 1;
        } else if (!strcmp(key, "rope_scaling")) {
            st = read_rope_scaling(j, path, h), done = 1;
        }
        for (size_t k = 0; !done && k < NELEMS(int_keys); k++)
            if (!strcmp(key, int_keys[k].key)) {
                double v = 0.0;
                int is_null, is_bool;
                st = read_scalar(j, path, key, &v, &is_null, &is_bool), done = 1;
                int s = int_keys[k].slot;
                VKG_CHECK_GOTO(
                    st,
                    st != VKG_OK || is_null || (!is_bool && v == floor(v) && v >= -1e9 && v <= 1e9),
                    VKG_ERR_FORMAT, out, "%s: field \"%s\": expected a whole number", path, key);
                if (st == VKG_OK)
                    h->i[s] = (long long)v, h->has_i[s] = is_null ? 2 : 1;
            }
        for (size_t k = 0; !done && k < NELEMS(float_keys); k++)
            if (!strcmp(key, float_keys[k].key)) {
                double v = 0.0;
                int is_null, is_bool;
                st = read_scalar(j, path, key, &v, &is_null, &is_bool), done = 1;
                VKG_CHECK_GOTO(st, st != VKG_OK || (!is_null && !is_bool), VKG_ERR_FORMAT, out,
                               "%s: field \"%s\": expected a number", path, key);
                VKG_CHECK_GOTO(st, st != VKG_OK || fabs(v) <= 1e30, VKG_ERR_FORMAT, out,
                               "%s: field \"%s\": %g is out of range", path, key, v);
                if (st == VKG_OK)
                    h->f[float_keys[k].slot] = v, h->has_f[float_keys[k].slot] = 1;
            }
        for (size_t k = 0; !done && k < NELEMS(bool_keys); k++)
            if (!strcmp(key, bool_keys[k].key)) {
                double v = 0.0;
                int is_null, is_bool;
                st = read_scalar(j, path, key, &v, &is_null, &is_bool), done = 1;
                VKG_CHECK_GOTO(st, st != VKG_OK || is_bool || is_null, VKG_ERR_FORMAT, out,
                               "%s: field \"%s\": expected true or false", path, key);
                if (st == VKG_OK && is_bool)
                    h->b[bool_keys[k].slot] = v != 0.0, h->has_b[bool_keys[k].slot] = 1;
            }
        if (!done && st == VKG_OK)
            st = vkg__json_skip(j);
        if (st == VKG_OK)
            st = vkg__json_next(j, '}', &more);
    }
    if (st == VKG_OK)
        st = vkg__json_end(j);
out:
    free(key);
    return st;
}

/* Field slot as an int in [lo, hi], required unless it has a default (dflt >= 0 and absent). */
static vkg_status take(const hf_fields *h, int slot, const char *name, long long lo, long long hi,
                       long long dflt, int *out, const char *path)
{
    if (h->has_i[slot] != 1) {
        VKG_CHECK(dflt >= 0, VKG_ERR_FORMAT, "%s: field \"%s\" is missing (or null)", path, name);
        *out = (int)dflt;
        return VKG_OK;
    }
    VKG_CHECK(h->i[slot] >= lo && h->i[slot] <= hi, VKG_ERR_FORMAT,
              "%s: field \"%s\" is %lld, outside [%lld, %lld]", path, name, h->i[slot], lo, hi);
    *out = (int)h->i[slot];
    return VKG_OK;
}

vkg_status vkg_hf_config_parse(const char *text, size_t n, const char *path, vkg_model_config *cfg)
{
    hf_fields h;
    memset(&h, 0, sizeof h);
    vkg__json j;
    vkg__json_init(&j, text, n, path);
    VKG_TRY(read_fields(&j, path, &h));
    vkg_model_config c;
    memset(&c, 0, sizeof c);
    const char *mt = h.model_type;
    int gpt2 = !strcmp(mt, "gpt2");
    int llama = !strcmp(mt, "llama"), mistral = !strcmp(mt, "mistral");
    int qwen2 = !strcmp(mt, "qwen2"), qwen3 = !strcmp(mt, "qwen3");
    VKG_CHECK(mt[0], VKG_ERR_FORMAT, "%s: no \"model_type\"", path);
    VKG_CHECK(gpt2 || llama || mistral || qwen2 || qwen3, VKG_ERR_FORMAT,
              "%s: model_type \"%s\" is none of the families vkgpt trains (gpt2, llama, mistral, "
              "qwen2, qwen3)",
              path, mt);
    VKG_TRY(take(&h, I_HIDDEN, gpt2 ? "n_embd" : "hidden_size", 1, 1 << 20, -1, &c.channels, path));
    VKG_TRY(take(&h, I_LAYERS, gpt2 ? "n_layer" : "num_hidden_layers", 1, 1 << 16, -1,
                 &c.num_layers, path));
    VKG_TRY(take(&h, I_HEADS, gpt2 ? "n_head" : "num_attention_heads", 1, 1 << 16, -1, &c.num_heads,
                 path));
    VKG_TRY(take(&h, I_VOCAB, "vocab_size", 1, 1 << 24, -1, &c.vocab_size, path));
    VKG_TRY(take(&h, I_MAXPOS, gpt2 ? "n_positions" : "max_position_embeddings", 1, 1 << 24, -1,
                 &c.max_seq_len, path));
    c.padded_vocab_size = vkg_model_pad_vocab(c.vocab_size);
    if (gpt2) {
        int inner = 0;
        VKG_TRY(take(&h, I_INTER, "n_inner", 1, 1 << 24, 0, &inner, path));
        c.mlp_hidden = inner == 4 * c.channels ? 0 : inner;
        VKG_CHECK(!h.act[0] || !strcmp(h.act, "gelu_new"), VKG_ERR_FORMAT,
                  "%s: activation_function \"%s\": GPT-2's MLP is gelu_new (the tanh form) in "
                  "vkgpt",
                  path, h.act);
        double eps = h.has_f[F_LN_EPS] ? h.f[F_LN_EPS] : 1e-5;
        c.norm_eps = (float)eps == 1e-5f ? 0.0f : (float)eps;
        c.untied = h.has_b[B_TIE] && !h.b[B_TIE];
    } else {
        VKG_TRY(take(&h, I_INTER, "intermediate_size", 1, 1 << 24, -1, &c.mlp_hidden, path));
        VKG_TRY(
            take(&h, I_KV, "num_key_value_heads", 1, 1 << 16, c.num_heads, &c.num_kv_heads, path));
        int hd = 0;
        VKG_TRY(take(&h, I_HEAD_DIM, "head_dim", 1, 1 << 16, 0, &hd, path));
        /* the canonical form: a value equal to its default is 0 (so equal models compare
         * equal whichever way their file spells them) */
        c.head_dim = hd * c.num_heads == c.channels ? 0 : hd;
        c.num_kv_heads = c.num_kv_heads == c.num_heads ? 0 : c.num_kv_heads;
        VKG_CHECK(!h.act[0] || !strcmp(h.act, "silu"), VKG_ERR_FORMAT,
                  "%s: hidden_act \"%s\": the Llama family's MLP is SwiGLU (silu) in vkgpt", path,
                  h.act);
        c.mlp = VKG_MLP_SWIGLU, c.norm = VKG_NORM_RMS, c.pos = VKG_POS_ROPE;
        c.norm_eps = h.has_f[F_RMS_EPS] ? (float)h.f[F_RMS_EPS] : 1e-6f;
        c.rope_theta = h.has_f[F_THETA] ? (float)h.f[F_THETA] : 10000.0f;
        c.untied = !(h.has_b[B_TIE] && h.b[B_TIE]); /* these classes default to untied */
        c.bias = qwen2 ? VKG_BIAS_QKV : VKG_BIAS_NONE;
        c.qk_norm = qwen3;
        VKG_CHECK(!(h.has_b[B_ATT_BIAS] && h.b[B_ATT_BIAS]), VKG_ERR_FORMAT,
                  "%s: attention_bias true (biases on q, k, v and the output projection) is not "
                  "a layout vkgpt computes",
                  path);
        VKG_CHECK(!(h.has_b[B_MLP_BIAS] && h.b[B_MLP_BIAS]), VKG_ERR_FORMAT,
                  "%s: mlp_bias true is not a layout vkgpt computes", path);
        int sliding = (mistral && h.has_i[I_SLIDING] == 1 && h.i[I_SLIDING] < c.max_seq_len) ||
                      (h.has_b[B_USE_SLIDING] && h.b[B_USE_SLIDING]);
        VKG_CHECK(!sliding, VKG_ERR_FORMAT,
                  "%s: sliding-window attention (sliding_window, use_sliding_window) is not "
                  "computed by vkgpt: every position attends to all before it",
                  path);
        if (h.rope_scaling == 1) {
            VKG_CHECK(!strcmp(h.rope_type, "llama3"), VKG_ERR_FORMAT,
                      "%s: rope_scaling of type \"%s\": vkgpt computes Llama 3's (\"llama3\") "
                      "only",
                      path, h.rope_type);
            VKG_CHECK(h.has_f[F_FACTOR] && h.has_f[F_LOW] && h.has_f[F_HIGH] &&
                          h.has_i[I_ORIG_MAX] == 1,
                      VKG_ERR_FORMAT,
                      "%s: rope_scaling \"llama3\" needs factor, low_freq_factor, "
                      "high_freq_factor and original_max_position_embeddings (a whole number "
                      "from 1 to 2^24)",
                      path);
            c.rope_factor = (float)h.f[F_FACTOR];
            c.rope_low_freq_factor = (float)h.f[F_LOW];
            c.rope_high_freq_factor = (float)h.f[F_HIGH];
            VKG_CHECK(h.i[I_ORIG_MAX] > 0 && h.i[I_ORIG_MAX] < (1 << 24), VKG_ERR_FORMAT,
                      "%s: rope_scaling.original_max_position_embeddings is %lld", path,
                      h.i[I_ORIG_MAX]);
            c.rope_original_max = (int)h.i[I_ORIG_MAX];
        }
    }
    if (vkg_model_config_validate(&c) < 0)
        return vkg__error_wrap(VKG_ERR_FORMAT, "%s: the configuration is not a valid model", path);
    *cfg = c;
    return VKG_OK;
}

vkg_status vkg_hf_config_read(const char *path, vkg_model_config *cfg)
{
    FILE *f = NULL;
    uint64_t size = 0;
    VKG_TRY(vkg__io_open(path, &f, &size));
    vkg_status st = VKG_OK;
    char *text = NULL;
    if (size > HF_CONFIG_MAX_BYTES)
        st = VKG_FAIL(VKG_ERR_FORMAT, "%s: %llu bytes, more than a config.json's %u", path,
                      (unsigned long long)size, HF_CONFIG_MAX_BYTES);
    else if (!(text = malloc((size_t)size + 1)))
        st =
            VKG_FAIL(VKG_ERR_NOMEM, "%s: no memory for %llu bytes", path, (unsigned long long)size);
    else if (size && fread(text, 1, (size_t)size, f) != (size_t)size)
        st = VKG_FAIL(VKG_ERR_IO, "%s: reading failed", path);
    fclose(f);
    if (st == VKG_OK)
        st = vkg_hf_config_parse(text, (size_t)size, path, cfg);
    free(text);
    return st;
}

/* ---- writing ---- */

/* 1: GPT-2's layout (config.json "gpt2"); 2: the Llama family's ("llama", "qwen2", "qwen3"); 0:
 * neither. */
static int family_of(const vkg_model_config *c)
{
    if (!c->num_kv_heads && !c->head_dim && c->mlp == VKG_MLP_GELU && c->norm == VKG_NORM_LAYER &&
        c->pos == VKG_POS_LEARNED && c->bias == VKG_BIAS_ALL && !c->qk_norm &&
        c->rope_theta == 0.0f && c->rope_factor == 0.0f)
        return 1;
    if (c->mlp == VKG_MLP_SWIGLU && c->norm == VKG_NORM_RMS && c->pos == VKG_POS_ROPE &&
        (c->bias == VKG_BIAS_NONE || (c->bias == VKG_BIAS_QKV && !c->qk_norm)))
        return 2;
    return 0;
}

typedef struct write_ctx {
    const vkg_model_config *cfg;
} write_ctx;

static vkg_status write_config(FILE *f, void *arg)
{
    const vkg_model_config *c = ((const write_ctx *)arg)->cfg;
    int ok = 1;
    if (family_of(c) == 1) {
        ok &=
            fprintf(f,
                    "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n"
                    "  \"vocab_size\": %d,\n  \"n_positions\": %d,\n  \"n_ctx\": %d,\n"
                    "  \"n_embd\": %d,\n  \"n_layer\": %d,\n  \"n_head\": %d,\n"
                    "  \"n_inner\": %d,\n  \"activation_function\": \"gelu_new\",\n"
                    "  \"layer_norm_epsilon\": %.9g,\n  \"tie_word_embeddings\": %s,\n"
                    "  \"torch_dtype\": \"float32\"\n}\n",
                    c->vocab_size, c->max_seq_len, c->max_seq_len, c->channels, c->num_layers,
                    c->num_heads, vkg_model_mlp_hidden(c), (double)vkg_model_norm_eps(c),
                    c->untied ? "false" : "true") > 0;
    } else {
        const char *type = c->qk_norm ? "qwen3" : c->bias == VKG_BIAS_QKV ? "qwen2" : "llama";
        const char *arch = c->qk_norm                ? "Qwen3ForCausalLM"
                           : c->bias == VKG_BIAS_QKV ? "Qwen2ForCausalLM"
                                                     : "LlamaForCausalLM";
        ok &= fprintf(f,
                      "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\",\n"
                      "  \"vocab_size\": %d,\n  \"max_position_embeddings\": %d,\n"
                      "  \"hidden_size\": %d,\n  \"intermediate_size\": %d,\n"
                      "  \"num_hidden_layers\": %d,\n  \"num_attention_heads\": %d,\n"
                      "  \"num_key_value_heads\": %d,\n  \"head_dim\": %d,\n"
                      "  \"hidden_act\": \"silu\",\n  \"rms_norm_eps\": %.9g,\n"
                      "  \"rope_theta\": %.9g,\n",
                      arch, type, c->vocab_size, c->max_seq_len, c->channels,
                      vkg_model_mlp_hidden(c), c->num_layers, c->num_heads, vkg_model_kv_heads(c),
                      vkg_model_head_dim(c), (double)vkg_model_norm_eps(c),
                      (double)(c->rope_theta > 0.0f ? c->rope_theta : 10000.0f)) > 0;
        if (c->rope_factor > 0.0f)
            ok &= fprintf(f,
                          "  \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": %.9g, "
                          "\"low_freq_factor\": %.9g, \"high_freq_factor\": %.9g, "
                          "\"original_max_position_embeddings\": %d},\n",
                          (double)c->rope_factor, (double)c->rope_low_freq_factor,
                          (double)c->rope_high_freq_factor, c->rope_original_max) > 0;
        else
            ok &= fputs("  \"rope_scaling\": null,\n", f) >= 0;
        if (!c->qk_norm && c->bias != VKG_BIAS_QKV)
            ok &= fputs("  \"attention_bias\": false,\n  \"mlp_bias\": false,\n", f) >= 0;
        ok &= fprintf(f, "  \"tie_word_embeddings\": %s,\n  \"torch_dtype\": \"float32\"\n}\n",
                      c->untied ? "false" : "true") > 0;
    }
    return ok ? VKG_OK : VKG_FAIL(VKG_ERR_IO, "writing config.json failed");
}

vkg_status vkg_hf_config_write(const char *path, const vkg_model_config *cfg)
{
    if (vkg_model_config_validate(cfg) < 0)
        return vkg__error_wrap(VKG_ERR_INVALID_ARG, "%s: not writing an invalid model", path);
    VKG_CHECK(family_of(cfg), VKG_ERR_INVALID_ARG,
              "%s: this configuration (MLP kind %d, norm %d, positions %d, bias %d) is none of "
              "the families config.json describes (gpt2, llama, qwen2, qwen3)",
              path, cfg->mlp, cfg->norm, cfg->pos, cfg->bias);
    write_ctx ctx = {cfg};
    return vkg_io_write_atomic(path, write_config, &ctx);
}

vkg_status vkg_model_config_named(const char *name, vkg_model_config *cfg)
{
    VKG_CHECK(name && cfg, VKG_ERR_INVALID_ARG, "model: NULL argument");
    if (vkg_model_preset(name, cfg) == VKG_OK)
        return VKG_OK;
    char known[400];
    snprintf(known, sizeof known, "%s", vkg_error_message());
    vkg_status st = vkg_hf_config_read(name, cfg);
    if (st == VKG_OK)
        return VKG_OK;
    char why[600];
    snprintf(why, sizeof why, "%s", vkg_error_message());
    return VKG_FAIL(VKG_ERR_NOT_FOUND,
                    "model %s: neither a preset (%s) nor a config.json that reads (%s)", name,
                    known, why);
}
