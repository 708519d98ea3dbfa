/* The plan of a GPT-2 part before any device memory exists: its options defaulted and checked,
 * the element counts, names and element types of every tensor of the activation arena in the
 * order vkg_model_create allocates them, and vkg_model_memory's accounting of the bytes and
 * allocations the part needs. Allocating, binding the tensors to the model and recording are not
 * here (model.c, record.c). */
#include "model/model_internal.h"

#include <stdlib.h>
#include <string.h>

vkg_model_opts vkg_model_opts_default(void)
{
    vkg_model_opts o = {.B = 4, .T = 64, .accum_steps = 1, .loss_scale = 1.0f, .slots = 1};
    return o;
}

/* The widths a configuration's activations have besides C: the q/k/v product's output QKV, the
 * attention's output A (NH D), the MLP's first product FW (2F with SwiGLU) and its activation F;
 * and the rows of QK-norm's statistics. */
typedef struct widths {
    size_t C, QKV, A, FW, F, QKROWS;
    int ln, qk;
} widths;

static widths widths_of(const vkg_model_config *cfg)
{
    size_t NH = (size_t)cfg->num_heads, NKV = (size_t)vkg_model_kv_heads(cfg);
    size_t D = (size_t)vkg_model_head_dim(cfg), F = (size_t)vkg_model_mlp_hidden(cfg);
    widths w = {.C = (size_t)cfg->channels,
                .QKV = (NH + 2 * NKV) * D,
                .A = NH * D,
                .FW = (cfg->mlp == VKG_MLP_SWIGLU ? 2 : 1) * F,
                .F = F,
                .QKROWS = NH + NKV,
                .ln = cfg->norm == VKG_NORM_LAYER,
                .qk = cfg->qk_norm};
    return w;
}

/* Element counts of the activation tensors, in the order of the vkg_model_acts fields; those of
 * a layer (VKG_MODEL_ACT_LAYERED) for one layer. 0: none (a tensor whose name is optional() is
 * then not allocated; the others get one element). */
static void act_sizes(const vkg_model_config *cfg, int B, int T, int head, int recompute,
                      size_t s[VKG_MODEL_NUM_ACTS])
{
    widths w = widths_of(cfg);
    size_t C = w.C, NH = (size_t)cfg->num_heads, LN = w.ln ? 1 : 0, QK = w.qk ? 1 : 0;
    size_t BT = (size_t)B * (size_t)T, Vp = head ? (size_t)cfg->padded_vocab_size : 0;
    size_t H = head ? 1 : 0;
    size_t i = 0;
    s[i++] = BT * C;                                              /* encoded */
    s[i++] = BT * C;                                              /* ln1 */
    s[i++] = LN * BT;                                             /* ln1_mean */
    s[i++] = BT;                                                  /* ln1_rstd */
    s[i++] = BT * w.QKV;                                          /* qkv */
    s[i++] = BT * w.A;                                            /* atty */
    s[i++] = (size_t)B * NH * (size_t)T;                          /* lse (attention) */
    s[i++] = BT * C;                                              /* attproj */
    s[i++] = BT * C;                                              /* residual2 */
    s[i++] = BT * C;                                              /* ln2 */
    s[i++] = LN * BT;                                             /* ln2_mean */
    s[i++] = BT;                                                  /* ln2_rstd */
    s[i++] = BT * w.FW;                                           /* fch */
    s[i++] = recompute & VKG_MODEL_RECOMPUTE_GELU ? 0 : BT * w.F; /* fch_gelu */
    s[i++] = BT * C;                                              /* fcproj */
    s[i++] = BT * C;                                              /* residual3 */
    s[i++] = H * BT * C;                                          /* lnf */
    s[i++] = LN * H * BT;                                         /* lnf_mean */
    s[i++] = H * BT;                                              /* lnf_rstd */
    s[i++] = BT * Vp;            /* logits (dlogits in place after the loss) */
    s[i++] = H * BT;             /* losses */
    s[i++] = QK * BT * w.QKV;    /* qkvr */
    s[i++] = QK * BT * w.QKROWS; /* qk_rstd */
}

/* Gradient activations: one layer's (the shapes of the forward activations they belong to),
 * the residual stream's two buffers, dencoded and dlnf. */
static void grad_act_sizes(const vkg_model_config *cfg, int B, int T, int head,
                           size_t s[VKG_MODEL_NUM_GRAD_ACTS])
{
    widths w = widths_of(cfg);
    size_t C = w.C, H = head ? 1 : 0;
    size_t BT = (size_t)B * (size_t)T;
    size_t i = 0;
    s[i++] = BT * C;                      /* dencoded */
    s[i++] = BT * C;                      /* dln1 */
    s[i++] = BT * w.QKV;                  /* dqkv */
    s[i++] = BT * w.A;                    /* datty */
    s[i++] = BT * C;                      /* dattproj */
    s[i++] = BT * C;                      /* dresidual2 */
    s[i++] = BT * C;                      /* dln2 */
    s[i++] = BT * w.FW;                   /* dfch */
    s[i++] = BT * w.F;                    /* dfch_gelu */
    s[i++] = BT * C;                      /* dfcproj */
    s[i++] = BT * C;                      /* dstream0 */
    s[i++] = BT * C;                      /* dstream1 */
    s[i++] = H * BT * C;                  /* dlnf */
    s[i++] = (w.qk ? 1 : 0) * BT * w.QKV; /* dqkvr */
}

static vkg_status check_opts(const vkg_model_config *cfg, const vkg_model_opts *o)
{
    VKG_TRY(vkg_model_config_validate(cfg));
    VKG_TRY(vkg_model_part_validate(cfg, &o->part));
    VKG_CHECK(o->slots >= 1 && o->slots <= 64, VKG_ERR_INVALID_ARG,
              "activation slots must be in [1, 64], got %d", o->slots);
    VKG_CHECK(o->B > 0, VKG_ERR_INVALID_ARG, "batch size B must be > 0, got %d", o->B);
    VKG_CHECK(o->T > 0 && o->T <= cfg->max_seq_len, VKG_ERR_INVALID_ARG,
              "sequence length T must be in [1, %d] (the model's max_seq_len), got %d",
              cfg->max_seq_len, o->T);
    VKG_CHECK(o->accum_steps > 0, VKG_ERR_INVALID_ARG, "accumulation steps must be > 0, got %d",
              o->accum_steps);
    VKG_CHECK(o->recompute == VKG_MODEL_RECOMPUTE_NONE || o->recompute == VKG_MODEL_RECOMPUTE_GELU,
              VKG_ERR_INVALID_ARG, "recompute must be none (0) or gelu (1), got %d", o->recompute);
    VKG_CHECK(o->split_w == 0 || o->split_w == 1, VKG_ERR_INVALID_ARG,
              "split_w must be 0 or 1, got %d", o->split_w);
    VKG_CHECK(o->precision == VKG_PRECISION_FP32 || o->precision == VKG_PRECISION_BF16,
              VKG_ERR_INVALID_ARG, "precision must be fp32 (0) or bf16 (1), got %d", o->precision);
    /* bf16 tensors are packed two values to a word: every tensor and layer slice must start on a
     * word, which even channels give (every parameter count is a multiple of C). */
    VKG_CHECK(o->precision == VKG_PRECISION_FP32 || cfg->channels % 2 == 0, VKG_ERR_INVALID_ARG,
              "bf16 precision needs an even number of channels, got C = %d", cfg->channels);
    /* bf16 q/k/v rows (QK-norm keeps them fp32): whole words per head, and for the rotation's
     * bf16 kernel pairs of words */
    int D = vkg_model_head_dim(cfg), bf16_qkv = o->precision == VKG_PRECISION_BF16 && !cfg->qk_norm;
    VKG_CHECK(!bf16_qkv || D % (cfg->pos == VKG_POS_ROPE ? 4 : 2) == 0, VKG_ERR_INVALID_ARG,
              "bf16 precision needs a head dimension that is a multiple of %d%s, got %d",
              cfg->pos == VKG_POS_ROPE ? 4 : 2,
              cfg->pos == VKG_POS_ROPE ? " with rotary embeddings" : "", D);
    VKG_CHECK(o->precision == VKG_PRECISION_FP32 || vkg_model_mlp_hidden(cfg) % 2 == 0,
              VKG_ERR_INVALID_ARG, "bf16 precision needs an even MLP width, got %d",
              vkg_model_mlp_hidden(cfg));
    size_t BT = (size_t)o->B * (size_t)o->T;
    VKG_CHECK(BT <= 0x7FFFFFFFu, VKG_ERR_INVALID_ARG,
              "B*T = %zu tokens is too large for 32-bit shader indices", BT);
    return VKG_OK;
}

/* The options with the whole model for an unset part, checked. */
vkg_status vkg__model_resolve_opts(const vkg_model_config *cfg, const vkg_model_opts *opts,
                                   vkg_model_opts *o)
{
    *o = opts ? *opts : vkg_model_opts_default();
    if (o->part.last == 0 && o->part.first == 0 && o->part.flags == 0)
        o->part = vkg_model_whole(cfg);
    return check_opts(cfg, o);
}

enum { NSCRATCH = 6 };

/* Element counts of the shared scratch tensors and of one slot's tokens. */
static void scratch_sizes(const vkg_model_config *cfg, const vkg_model_opts *o,
                          size_t scratch[NSCRATCH], size_t tokens[2])
{
    widths w = widths_of(cfg);
    size_t BT = (size_t)o->B * (size_t)o->T, C = w.C, widest = C;
    const size_t other[4] = {w.QKV, w.A, w.FW, w.F}; /* GPT-2: 4 C */
    for (int i = 0; i < 4; i++)
        widest = other[i] > widest ? other[i] : widest;
    scratch[0] = BT * widest;                                            /* mm_scratch */
    scratch[1] = (size_t)o->B * (size_t)cfg->num_heads * (size_t)o->T;   /* delta (attention) */
    scratch[2] = BT * C;                                                 /* dtop */
    scratch[3] = o->recompute & VKG_MODEL_RECOMPUTE_GELU ? BT * w.F : 0; /* gelu */
    scratch[4] = 4; /* dscale: the loss scale (one float, 16 bytes) */
    scratch[5] = cfg->pos == VKG_POS_ROPE ? (size_t)vkg_model_head_dim(cfg) / 2 : 0; /* inv_freq */
    tokens[0] = tokens[1] = BT; /* inputs, targets */
}

static const char *const act_names[VKG_MODEL_NUM_ACTS] = {
    "encoded",   "ln1",      "ln1_mean", "ln1_rstd", "qkv",    "atty",     "lse",    "attproj",
    "residual2", "ln2",      "ln2_mean", "ln2_rstd", "fch",    "fch_gelu", "fcproj", "residual3",
    "lnf",       "lnf_mean", "lnf_rstd", "logits",   "losses", "qkvr",     "qk_rstd"};
static const char *const gact_names[VKG_MODEL_NUM_GRAD_ACTS] = {
    "dencoded", "dln1",      "dqkv",    "datty",    "dattproj", "dresidual2", "dln2",
    "dfch",     "dfch_gelu", "dfcproj", "dstream0", "dstream1", "dlnf",       "dqkvr"};
static const char *const kept_names[VKG_MODEL_NUM_KEPT] = {"kept_dfcproj", "kept_dfch",
                                                           "kept_dattproj", "kept_dqkv"};
static const char *const scratch_names[NSCRATCH] = {"mm_scratch", "delta",  "dtop",
                                                    "gelu",       "dscale", "inv_freq"};

/* The tensors only some families have: not allocated where their size is 0 (the others, GPT-2's,
 * take one element then, as they always have). */
static int optional(const char *name)
{
    return !strcmp(name, "qkvr") || !strcmp(name, "qk_rstd") || !strcmp(name, "dqkvr") ||
           !strcmp(name, "inv_freq");
}

/* Mixed precision (bf16): the activations stored as bf16, llm.c's way of halving them: the
 * residual stream (encoded, residual2, residual3, so also the boundary a pipeline part hands to
 * the next), the layernorm outputs, qkv, the attention output, the two projections' outputs, the
 * fc product and its GELU (the recomputed GELU buffer with them). Every kernel that writes one
 * rounds its fp32 result once; every kernel that reads one widens it and computes in fp32. What
 * stays fp32: the layernorm statistics, lse, the logits (dlogits in place) and every gradient. */
static int act_bf16(const vkg_model_config *cfg, const vkg_model_opts *o, const char *name)
{
    /* QK-norm's kernel is fp32: the q/k/v rows and the attention's output stay fp32 around it */
    if (cfg->qk_norm && (!strcmp(name, "qkv") || !strcmp(name, "atty")))
        return 0;
    static const char *const bf16_acts[] = {"encoded",   "ln1", "qkv", "atty",     "attproj",
                                            "residual2", "ln2", "fch", "fch_gelu", "fcproj",
                                            "residual3", "lnf", "gelu"};
    size_t n = sizeof bf16_acts / sizeof bf16_acts[0];
    for (size_t i = 0; o->precision == VKG_PRECISION_BF16 && i < n; i++)
        if (strcmp(name, bf16_acts[i]) == 0)
            return 1;
    return 0;
}

/* The activation arena's tensors in the order vkg_model_create allocates them: every slot's
 * activations (its own, then each layer's) and tokens, then the gradients of the activations and
 * scratch; their bytes, names, (types, may be NULL) element types and (places, may be NULL)
 * places. */
#define ACTS_PER_SLOT(nl, split_w)                                                                 \
    (VKG_MODEL_NUM_ACTS - 17 + 17 * (nl) + 2 + ((split_w) ? VKG_MODEL_NUM_KEPT * (nl) : 0))
int vkg__model_max_act_tensors(int nl, int slots, int split_w)
{
    return slots * ACTS_PER_SLOT(nl, split_w) + VKG_MODEL_NUM_GRAD_ACTS + NSCRATCH;
}

/* Append one tensor of `count` elements (optional ones of none are left out). */
static void put(int *n, size_t *bytes, const char **names, vkg__model_act_place *places,
                const char *name, size_t count, vkg__model_act_place at)
{
    if (!count && optional(name))
        return;
    names[*n] = name, bytes[*n] = (count ? count : 1) * 4;
    if (places)
        places[*n] = at;
    (*n)++;
}

int vkg__model_act_arena_tensors(const vkg_model_config *cfg, const vkg_model_opts *o,
                                 size_t *bytes, const char **names, vkg_dtype *types,
                                 vkg__model_act_place *places)
{
    int nl = o->part.last - o->part.first, head = !!(o->part.flags & VKG_MODEL_PART_HEAD), n = 0;
    size_t asz[VKG_MODEL_NUM_ACTS], gsz[VKG_MODEL_NUM_GRAD_ACTS], scratch[NSCRATCH], tokens[2];
    act_sizes(cfg, o->B, o->T, head, o->recompute, asz);
    grad_act_sizes(cfg, o->B, o->T, head, gsz);
    size_t kept[VKG_MODEL_NUM_KEPT] = {gsz[9], gsz[7], gsz[4], gsz[2]}; /* as kept_names */
    scratch_sizes(cfg, o, scratch, tokens);
    for (short s = 0; s < o->slots; s++) {
        for (short i = 0; i < VKG_MODEL_NUM_ACTS; i++)
            if (!VKG_MODEL_ACT_LAYERED(i))
                put(&n, bytes, names, places, act_names[i], asz[i],
                    (vkg__model_act_place){VKG__ACT_SLOT, s, 0, i});
        for (short l = 0; l < nl; l++)
            for (short i = 0; i < VKG_MODEL_NUM_ACTS; i++)
                if (VKG_MODEL_ACT_LAYERED(i))
                    put(&n, bytes, names, places, act_names[i], asz[i],
                        (vkg__model_act_place){VKG__ACT_LAYER, s, l, i});
        for (short i = 0; i < 2; i++)
            put(&n, bytes, names, places, i ? "targets" : "inputs", tokens[i],
                (vkg__model_act_place){VKG__ACT_TOKENS, s, 0, i});
        for (short l = 0; o->split_w && l < nl; l++) /* the kept output gradients (fp32) */
            for (short i = 0; i < VKG_MODEL_NUM_KEPT; i++)
                put(&n, bytes, names, places, kept_names[i], kept[i],
                    (vkg__model_act_place){VKG__ACT_KEPT, s, l, i});
    }
    for (short i = 0; i < VKG_MODEL_NUM_GRAD_ACTS; i++)
        put(&n, bytes, names, places, gact_names[i], gsz[i],
            (vkg__model_act_place){VKG__ACT_GRAD, -1, 0, i});
    for (short i = 0; i < NSCRATCH; i++)
        put(&n, bytes, names, places, scratch_names[i], scratch[i],
            (vkg__model_act_place){VKG__ACT_SCRATCH, -1, 0, i});
    for (int i = 0; i < n; i++) {
        int half = act_bf16(cfg, o, names[i]);
        bytes[i] = half ? (bytes[i] / 4 + 1) / 2 * 4 : bytes[i]; /* whole words */
        if (types)
            types[i] = half ? VKG_BF16 : VKG_F32;
    }
    return n;
}

static size_t sum_aligned(const size_t *bytes, int n)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += (bytes[i] + 255) / 256 * 256;
    return total;
}

vkg_status vkg_model_memory(const vkg_model_config *cfg, const vkg_model_opts *opts,
                            vkg_model_memory_plan *out)
{
    vkg_model_opts o;
    VKG_TRY(vkg__model_resolve_opts(cfg, opts, &o));
    vkg_model_layout lo;
    vkg_model_part_layout(cfg, &o.part, &lo);
    int cap = vkg__model_max_act_tensors(o.part.last - o.part.first, o.slots, o.split_w);
    size_t *bytes = malloc((size_t)cap * sizeof *bytes);
    const char **names = malloc((size_t)cap * sizeof *names);
    vkg__model_act_place *places = malloc((size_t)cap * sizeof *places);
    if (!bytes || !names || !places) {
        free(bytes), free(names), free(places);
        return VKG_FAIL(VKG_ERR_NOMEM, "no memory for the memory plan");
    }
    int n = vkg__model_act_arena_tensors(cfg, &o, bytes, names, NULL, places);
    int per_slot = 0; /* the slots' tensors come first, the same count for each */
    while (per_slot < n && places[per_slot].slot == 0)
        per_slot++;
    memset(out, 0, sizeof *out);
    out->params = out->grads = (lo.total * 4 + 255) / 256 * 256;
    size_t pbytes[2] = {lo.total * 4, o.precision == VKG_PRECISION_BF16 ? lo.total * 2 : 0};
    out->param_copy = (pbytes[1] + 255) / 256 * 256;
    out->slot = sum_aligned(bytes, per_slot);
    out->activations = out->slot * (size_t)o.slots;
    out->shared = sum_aligned(bytes + per_slot * o.slots, n - per_slot * o.slots);
    out->total = out->params + out->param_copy + out->grads + out->activations + out->shared;
    out->largest_tensor = lo.total * 4;
    out->largest_of = "params";
    for (int i = 0; i < n; i++)
        if (bytes[i] > out->largest_tensor)
            out->largest_tensor = bytes[i], out->largest_of = names[i];
    size_t param_bytes = lo.total * 4, a1 = 0, a2 = 0, a3 = 0;
    int b1 = 0, b2 = 0, b3 = 0;
    size_t limit = vkg_arena_cursor_start(0, o.max_allocation).max_block;
    vkg_status st = VKG_OK;
    if ((out->largest_tensor + 255) / 256 * 256 > limit)
        st = VKG_FAIL(VKG_ERR_NOMEM,
                      "tensor %s needs %zu bytes in one allocation, more than the device's "
                      "largest allocation (%zu bytes)",
                      out->largest_of, out->largest_tensor, limit);
    if (st == VKG_OK)
        st = vkg_arena_plan(pbytes, pbytes[1] ? 2 : 1, o.max_allocation, "params", &a1, &b1);
    if (st == VKG_OK)
        st = vkg_arena_plan(&param_bytes, 1, o.max_allocation, "grads", &a2, &b2);
    if (st == VKG_OK)
        st = vkg_arena_plan(bytes, n, o.max_allocation, "activations", &a3, &b3);
    free(bytes), free(names), free(places);
    out->allocated = a1 + a2 + a3;
    out->allocations = b1 + b2 + b3;
    return st;
}
