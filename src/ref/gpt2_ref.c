/* The precision-independent part of the reference GPT-2: config check and llm.c's parameter
 * table (sizes, offsets, weight-decay flags). The model itself is in gpt2_ref_impl.h. */
#include "ref/gpt2_ref.h"

int vkg_ref_gpt2_config_ok(const vkg_ref_gpt2_config_t *cfg)
{
    return cfg && cfg->maxT > 0 && cfg->V > 0 && cfg->Vp >= cfg->V && cfg->L > 0 && cfg->NH > 0 &&
           cfg->C > 0 && cfg->C % cfg->NH == 0;
}

void vkg_ref_gpt2_param_sizes(const vkg_ref_gpt2_config_t *cfg,
                              size_t sizes[VKG_REF_GPT2_NUM_TENSORS])
{
    size_t Vp = (size_t)cfg->Vp, C = (size_t)cfg->C, maxT = (size_t)cfg->maxT;
    size_t L = (size_t)cfg->L;
    sizes[0] = Vp * C;         /* wte (Vp,C) */
    sizes[1] = maxT * C;       /* wpe (maxT,C) */
    sizes[2] = L * C;          /* ln1w (L,C) */
    sizes[3] = L * C;          /* ln1b (L,C) */
    sizes[4] = L * 3 * C * C;  /* qkvw (L,3C,C) */
    sizes[5] = L * 3 * C;      /* qkvb (L,3C) */
    sizes[6] = L * C * C;      /* attprojw (L,C,C) */
    sizes[7] = L * C;          /* attprojb (L,C) */
    sizes[8] = L * C;          /* ln2w (L,C) */
    sizes[9] = L * C;          /* ln2b (L,C) */
    sizes[10] = L * 4 * C * C; /* fcw (L,4C,C) */
    sizes[11] = L * 4 * C;     /* fcb (L,4C) */
    sizes[12] = L * C * 4 * C; /* fcprojw (L,C,4C) */
    sizes[13] = L * C;         /* fcprojb (L,C) */
    sizes[14] = C;             /* lnfw (C) */
    sizes[15] = C;             /* lnfb (C) */
}

void vkg_ref_gpt2_param_offsets(const vkg_ref_gpt2_config_t *cfg,
                                size_t offsets[VKG_REF_GPT2_NUM_TENSORS])
{
    size_t sizes[VKG_REF_GPT2_NUM_TENSORS], off = 0;
    vkg_ref_gpt2_param_sizes(cfg, sizes);
    for (int i = 0; i < VKG_REF_GPT2_NUM_TENSORS; i++) {
        offsets[i] = off;
        off += sizes[i];
    }
}

size_t vkg_ref_gpt2_num_params(const vkg_ref_gpt2_config_t *cfg)
{
    size_t sizes[VKG_REF_GPT2_NUM_TENSORS], total = 0;
    vkg_ref_gpt2_param_sizes(cfg, sizes);
    for (int i = 0; i < VKG_REF_GPT2_NUM_TENSORS; i++)
        total += sizes[i];
    return total;
}

int vkg_ref_gpt2_param_decays(int i)
{
    return i == 0 || i == 1 || i == 4 || i == 6 || i == 10 || i == 12;
}
