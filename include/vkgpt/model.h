/* GPT-2 model configuration and the parameter table, in llm.c's layout.
 *
 * One table drives parameter allocation, checkpoint I/O and gradients: 16 tensors, in this order,
 * each stored row-major with weights as (out, in):
 *   0 wte (Vp,C)  1 wpe (maxT,C)  2 ln1w (L,C)  3 ln1b (L,C)  4 qkvw (L,3C,C)  5 qkvb (L,3C)
 *   6 attprojw (L,C,C)  7 attprojb (L,C)  8 ln2w (L,C)  9 ln2b (L,C)  10 fcw (L,4C,C)
 *   11 fcb (L,4C)  12 fcprojw (L,C,4C)  13 fcprojb (L,C)  14 lnfw (C)  15 lnfb (C)
 * This header has no Vulkan types; it allocates nothing.
 */
#ifndef VKGPT_MODEL_H
#define VKGPT_MODEL_H

#include <stddef.h>

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

#ifdef __cplusplus
}
#endif
#endif
