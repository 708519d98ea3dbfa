/* A transformer's configuration and its parameter table.
 *
 * The table (vkg_model_params) lists the model's parameter tensors, in the order they are stored:
 * each tensor's name, shape, place (the embeddings, one slice per layer, or the head), weight
 * decay and initialisation, and which tensor, if any, is the embedding the head also reads as its
 * classifier (tied). Everything that walks the parameters (the memory plan, the optimizer's
 * segments, pipeline stages, ZeRO-1's shards, gradient buckets, checkpoints, DiLoCo's fragments)
 * walks this table and knows no tensor by name or index.
 *
 * GPT-2 (llm.c's layout): 16 tensors, each stored row-major with weights as (out, in):
 *   0 wte (Vp,C)  1 wpe (maxT,C)  2 ln1w (L,C)  3 ln1b (L,C)  4 qkvw (L,3C,C)  5 qkvb (L,3C)
 *   6 attprojw (L,C,C)  7 attprojb (L,C)  8 ln2w (L,C)  9 ln2b (L,C)  10 fcw (L,4C,C)
 *   11 fcb (L,4C)  12 fcprojw (L,C,4C)  13 fcprojb (L,C)  14 lnfw (C)  15 lnfb (C)
 * wte is tied: the last part's classifier.
 * This header has no Vulkan types; it allocates nothing. Model parts (a range of layers) are
 * described at the end.
 */
#ifndef VKGPT_MODEL_H
#define VKGPT_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "vkgpt/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most parameter tensors a model's table holds. */
#define VKG_MAX_PARAM_TENSORS 24

/* The family's choices (vkg_model_config): each 0 is GPT-2's. */
enum { VKG_MLP_GELU = 0, VKG_MLP_SWIGLU = 1, VKG_MLP_RELU2 = 2 };
enum { VKG_NORM_LAYER = 0, VKG_NORM_RMS = 1 };
enum { VKG_POS_LEARNED = 0, VKG_POS_ROPE = 1 };
enum {
    VKG_BIAS_ALL = 0,  /* every product and norm has a bias (GPT-2) */
    VKG_BIAS_NONE = 1, /* none (Llama, Mistral, Qwen 3) */
    VKG_BIAS_QKV = 2   /* the q, k and v products only (Qwen 2) */
};

/* A decoder-only transformer: GPT-2 (every field past channels 0) or the Llama family. */
typedef struct vkg_model_config {
    int max_seq_len;       /* maxT */
    int vocab_size;        /* V */
    int padded_vocab_size; /* Vp: V rounded up to a multiple of 128; rows >= V are zero */
    int num_layers;        /* L */
    int num_heads;         /* NH: query heads */
    int channels;          /* C: the hidden size, divisible by NH when head_dim is 0 */
    int num_kv_heads;      /* key/value heads (grouped-query attention), dividing NH; 0: NH */
    int head_dim;          /* D; 0: C / NH */
    int mlp_hidden;        /* F: the MLP's inner width; 0: 4 C */
    int mlp;               /* VKG_MLP_*: GELU (tanh form), SwiGLU (gate and up products), ReLU^2 */
    int norm;              /* VKG_NORM_*: LayerNorm with weight and bias, RMSNorm (weight) */
    float norm_eps;        /* 0: 1e-5 */
    int pos;               /* VKG_POS_*: learned positions (wpe), rotary embeddings */
    float rope_theta;      /* rotary: the frequencies' base; 0: 10000 */
    /* Llama 3's frequency scaling (rope_type "llama3"): factor 0 is none */
    float rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_original_max; /* its original_max_position_embeddings */
    int qk_norm;           /* 1: RMSNorm over each q and k head before the rotation (Qwen 3) */
    int bias;              /* VKG_BIAS_* */
    int untied;            /* 1: the classifier is a tensor of its own; 0: the token embedding */
} vkg_model_config;

/* The configuration's values with its zeros read as the defaults above. */
int vkg_model_kv_heads(const vkg_model_config *cfg);
int vkg_model_head_dim(const vkg_model_config *cfg);
int vkg_model_mlp_hidden(const vkg_model_config *cfg);
float vkg_model_norm_eps(const vkg_model_config *cfg);
/* 1 when every field past channels is 0: GPT-2, the family the device model records today. */
int vkg_model_is_gpt2(const vkg_model_config *cfg);
/* Rotary embeddings: the D / 2 inverse frequencies theta^(-2i/D), with Llama 3's scaling when
 * rope_factor is set, as Hugging Face computes them (in double, rounded once). */
void vkg_model_rope_inv_freq(const vkg_model_config *cfg, float *inv_freq);

/* Precision of training (vkg_train_config.precision, the model's options): fp32 throughout, or
 * bf16 mixed precision as llm.c trains: fp32 master weights, AdamW moments and weight gradients,
 * a bf16 copy of the weights read by the matrix products, fp32 accumulation everywhere. */
enum { VKG_PRECISION_FP32 = 0, VKG_PRECISION_BF16 = 1 };

/* Round a vocabulary size up to the padded size vkgpt uses (a multiple of 128). */
int vkg_model_pad_vocab(int vocab_size);

/* Check that every size is positive, Vp >= V, NH divides C (without head_dim), NKV divides NH,
 * D is even for rotary embeddings, the kinds are known and the rest in range. On failure records
 * a message naming the field and returns VKG_ERR_INVALID_ARG. */
vkg_status vkg_model_config_validate(const vkg_model_config *cfg);

/* Where a parameter tensor lives in a model cut into parts (pipeline stages). */
typedef enum vkg_param_place {
    VKG_PARAM_EMBED = 0, /* the first part's: embeddings */
    VKG_PARAM_LAYER = 1, /* one slice per layer, stacked: (L, rows, cols) */
    VKG_PARAM_HEAD = 2   /* the last part's: final norm, classifier */
} vkg_param_place;

/* How a tensor starts (vkg_model_init_params). */
typedef enum vkg_param_init {
    VKG_INIT_NORMAL = 0,   /* normal(0, 0.02) */
    VKG_INIT_RESIDUAL = 1, /* normal(0, 0.02 / sqrt(2 L)): projections into the residual stream */
    VKG_INIT_ZEROS = 2,
    VKG_INIT_ONES = 3
} vkg_param_init;

typedef struct vkg_param_info {
    const char *name; /* short name: "wte", "qkvw", ... */
    vkg_param_place place;
    int rows, cols; /* one slice (a layer's, for LAYER): row-major; a vector has 1 row */
    int used_rows;  /* rows that hold values (the rest, a padded vocabulary's, stay 0) */
    size_t count;   /* floats in the whole model: rows x cols, times L for LAYER */
    size_t offset;  /* floats before it in the whole model */
    int decays;     /* AdamW's weight decay applies (matrices) */
    vkg_param_init init;
} vkg_param_info;

typedef struct vkg_param_table {
    int n;        /* tensors, <= VKG_MAX_PARAM_TENSORS */
    int tied;     /* the embedding the head also reads as its classifier (then the table's first
                   * tensor, so that a part holding it holds it first), -1: none */
    size_t total; /* floats: the sum of the counts */
    vkg_param_info t[VKG_MAX_PARAM_TENSORS];
} vkg_param_table;

/* The parameter table of a valid configuration (vkg_model_config_validate). */
void vkg_model_params(const vkg_model_config *cfg, vkg_param_table *table);

/* Total number of parameters (the table's total). */
size_t vkg_model_num_params(const vkg_model_config *cfg);

/* Initialisation into params (num_params floats, table order), each tensor as its table row says
 * (GPT-2's: normal(0, 0.02) weights, residual projections scaled by 1/sqrt(2L), biases 0, norm
 * weights 1), rows past used_rows 0; the normal draws in table order from the seeded generator. */
void vkg_model_init_params(const vkg_model_config *cfg, float *params, uint64_t seed);

/* Named configurations: GPT-2's sizes (gpt2-124m, gpt2-350m) and the Llama family's (llama-125m,
 * a quick-run shape; smollm2-135m, qwen2.5-0.5b, qwen3-0.6b and tinyllama-1.1b as their
 * published config.json files give them). The name's config into *cfg; VKG_ERR_NOT_FOUND
 * naming the known ones otherwise. */
vkg_status vkg_model_preset(const char *name, vkg_model_config *cfg);
/* The preset names, NULL-terminated. */
const char *const *vkg_model_preset_names(void);

/* The family's choices in words, into buf (cap bytes, NUL-terminated): "GPT-2 (LayerNorm, learned
 * positions, GELU, biases, tied)" or e.g. "RMSNorm (eps 1e-05), rotary (theta 10000), GQA 12/4
 * heads of 64, SwiGLU 2048, no biases, tied". */
void vkg_model_describe(const vkg_model_config *cfg, char *buf, size_t cap);

/* Forward FLOPs per token of one layer (its products and attention over T positions) and of the
 * head (the classifier), for cutting the layers into pipeline stages of equal work. */
void vkg_model_token_flops(const vkg_model_config *cfg, int T, double *layer, double *head);

/* ---- model parts ----------------------------------------------------------------------------
 * A part owns the layers [first, last) of a model; the first part (flag EMBED) also owns the
 * table's EMBED tensors (and the encoder), the last (flag HEAD) its HEAD tensors (final norm,
 * classifier) and the loss; a head part without EMBED also holds a copy of the tied embedding,
 * when the model has one. The whole model is the part [0, L) with both flags. A part's tensors
 * are stored contiguously in the table order restricted to the part (its layers' slices of each
 * stacked tensor), so the whole model's layout is the table's and a part is a gather of slices
 * of it. */

#define VKG_MODEL_PART_EMBED 1 /* owns the embeddings and the encoder */
#define VKG_MODEL_PART_HEAD 2  /* owns the final norm, the classifier and the loss */

typedef struct vkg_model_part {
    int first, last; /* layers [first, last) */
    int flags;       /* VKG_MODEL_PART_* */
} vkg_model_part;

/* The part [0, L) with both flags. */
vkg_model_part vkg_model_whole(const vkg_model_config *cfg);

/* Check 0 <= first < last <= L, EMBED only with first = 0 and HEAD only with last = L (and
 * neither flag missing where it must be set: a part from 0 has EMBED, one to L has HEAD).
 * VKG_ERR_INVALID_ARG naming the field otherwise. */
vkg_status vkg_model_part_validate(const vkg_model_config *cfg, const vkg_model_part *part);

/* Where each of the table's n tensors lies: count[i] floats (0 when the part lacks tensor i), at
 * part_offset[i] in the part's block and at whole_offset[i] in the whole model's. */
typedef struct vkg_model_layout {
    int n; /* the table's tensors */
    size_t count[VKG_MAX_PARAM_TENSORS];
    size_t part_offset[VKG_MAX_PARAM_TENSORS];
    size_t whole_offset[VKG_MAX_PARAM_TENSORS];
    size_t total; /* floats in the part */
    size_t tied;  /* floats of the tied embedding the part holds, at its start; 0: none */
} vkg_model_layout;

void vkg_model_part_layout(const vkg_model_config *cfg, const vkg_model_part *part,
                           vkg_model_layout *layout);
/* Copy the part's tensors out of a whole model's array (table order) into its block, or back. */
void vkg_model_part_extract(const vkg_model_layout *layout, const float *whole, float *part);
void vkg_model_part_insert(const vkg_model_layout *layout, const float *part, float *whole);

#ifdef __cplusplus
}
#endif
#endif
