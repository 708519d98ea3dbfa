/* GPT-2 model configuration and the parameter table, in llm.c's layout.
 *
 * One table drives parameter allocation, checkpoint I/O and gradients: 16 tensors, in this order,
 * each stored row-major with weights as (out, in):
 *   0 wte (Vp,C)  1 wpe (maxT,C)  2 ln1w (L,C)  3 ln1b (L,C)  4 qkvw (L,3C,C)  5 qkvb (L,3C)
 *   6 attprojw (L,C,C)  7 attprojb (L,C)  8 ln2w (L,C)  9 ln2b (L,C)  10 fcw (L,4C,C)
 *   11 fcb (L,4C)  12 fcprojw (L,C,4C)  13 fcprojb (L,C)  14 lnfw (C)  15 lnfb (C)
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

#define VKG_GPT2_NUM_PARAM_TENSORS 16

typedef struct vkg_gpt2_config {
    int max_seq_len;       /* maxT */
    int vocab_size;        /* V */
    int padded_vocab_size; /* Vp: V rounded up to a multiple of 128; rows >= V are zero */
    int num_layers;        /* L */
    int num_heads;         /* NH */
    int channels;          /* C, divisible by NH */
} vkg_gpt2_config;

/* Precision of training (vkg_train_config.precision, the model's options): fp32 throughout, or
 * bf16 mixed precision as llm.c trains: fp32 master weights, AdamW moments and weight gradients,
 * a bf16 copy of the weights read by the matrix products, fp32 accumulation everywhere. */
enum { VKG_PRECISION_FP32 = 0, VKG_PRECISION_BF16 = 1 };

/* Round a vocabulary size up to the padded size vkgpt uses (a multiple of 128). */
int vkg_gpt2_pad_vocab(int vocab_size);

/* Check that every field is positive, Vp >= V, C % NH == 0. On failure records a message naming
 * the field and returns VKG_ERR_INVALID_ARG. */
vkg_status vkg_gpt2_config_validate(const vkg_gpt2_config *cfg);

/* Element counts of the 16 parameter tensors, in table order. */
void vkg_gpt2_param_sizes(const vkg_gpt2_config *cfg, size_t sizes[VKG_GPT2_NUM_PARAM_TENSORS]);

/* Total number of parameters (sum of the 16 sizes). */
size_t vkg_gpt2_num_params(const vkg_gpt2_config *cfg);

/* Short name of tensor i ("wte", "qkvw", ...); "?" when out of range. */
const char *vkg_gpt2_param_name(int i);

/* 1 when AdamW's weight decay applies to tensor i (2-D weight matrices: wte, wpe, qkvw, attprojw,
 * fcw, fcprojw), 0 otherwise. */
int vkg_gpt2_param_decays(int i);

/* GPT-2 initialisation into params (num_params floats, table order): normal(0, 0.02) weights,
 * residual projections (attprojw, fcprojw) scaled by 1/sqrt(2L), biases 0, layernorm weights 1,
 * wte's padding rows 0; draws in table order from the seeded generator. */
void vkg_gpt2_init_params(const vkg_gpt2_config *cfg, float *params, uint64_t seed);

/* ---- model parts ----------------------------------------------------------------------------
 * A part owns the layers [first, last) of a model; the first part (flag EMBED) also owns the
 * embeddings wte and wpe, the last (flag HEAD) the final layernorm and the classifier, whose
 * weight is wte (a head part without EMBED holds a copy of wte). The whole model is the part
 * [0, L) with both flags. A part's tensors are stored contiguously in the table order restricted
 * to the part (its layers' slices of each stacked tensor), so the whole model's layout is
 * exactly llm.c's and a part is a gather of slices of it. */

#define VKG_GPT2_PART_EMBED 1 /* owns wte, wpe and the encoder */
#define VKG_GPT2_PART_HEAD 2  /* owns lnfw, lnfb, the classifier (wte) and the loss */

typedef struct vkg_gpt2_part {
    int first, last; /* layers [first, last) */
    int flags;       /* VKG_GPT2_PART_* */
} vkg_gpt2_part;

/* The part [0, L) with both flags. */
vkg_gpt2_part vkg_gpt2_whole(const vkg_gpt2_config *cfg);

/* Check 0 <= first < last <= L, EMBED only with first = 0 and HEAD only with last = L (and
 * neither flag missing where it must be set: a part from 0 has EMBED, one to L has HEAD).
 * VKG_ERR_INVALID_ARG naming the field otherwise. */
vkg_status vkg_gpt2_part_validate(const vkg_gpt2_config *cfg, const vkg_gpt2_part *part);

/* Where each of the 16 tensors lies: count[i] floats (0 when the part lacks tensor i), at
 * part_offset[i] in the part's block and at whole_offset[i] in the whole model's. */
typedef struct vkg_gpt2_layout {
    size_t count[VKG_GPT2_NUM_PARAM_TENSORS];
    size_t part_offset[VKG_GPT2_NUM_PARAM_TENSORS];
    size_t whole_offset[VKG_GPT2_NUM_PARAM_TENSORS];
    size_t total; /* floats in the part */
} vkg_gpt2_layout;

void vkg_gpt2_part_layout(const vkg_gpt2_config *cfg, const vkg_gpt2_part *part,
                          vkg_gpt2_layout *layout);
/* Copy the part's tensors out of a whole model's array (table order) into its block, or back. */
void vkg_gpt2_part_extract(const vkg_gpt2_layout *layout, const float *whole, float *part);
void vkg_gpt2_part_insert(const vkg_gpt2_layout *layout, const float *part, float *whole);

#ifdef __cplusplus
}
#endif
#endif
