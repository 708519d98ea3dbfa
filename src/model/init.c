/* GPT-2 initialisation on the host (see vkgpt/model.h): the same draws, in the same order, for
 * every model of a configuration and seed. */
#include <math.h>
#include <string.h>

#include "base/rng.h"
#include "vkgpt/model.h"

void vkg_gpt2_init_params(const vkg_gpt2_config *cfg, float *params, uint64_t seed)
{
    size_t sizes[VKG_GPT2_NUM_PARAM_TENSORS];
    vkg_gpt2_param_sizes(cfg, sizes);
    vkg_rng r;
    vkg_rng_seed(&r, seed);
    float *p = params;
    for (int i = 0; i < VKG_GPT2_NUM_PARAM_TENSORS; i++) {
        int is_ln_weight = i == 2 || i == 8 || i == 14;
        int is_bias = i == 3 || i == 5 || i == 7 || i == 9 || i == 11 || i == 13 || i == 15;
        if (is_ln_weight || is_bias) {
            for (size_t j = 0; j < sizes[i]; j++)
                p[j] = is_ln_weight ? 1.0f : 0.0f;
        } else {
            float std = 0.02f;
            if (i == 6 || i == 12)
                std = 0.02f / sqrtf(2.0f * (float)cfg->num_layers);
            vkg_rng_fill_normal(&r, p, sizes[i], 0.0f, std);
        }
        if (i == 0) /* padded vocabulary rows */
            memset(p + (size_t)cfg->vocab_size * (size_t)cfg->channels, 0,
                   (size_t)(cfg->padded_vocab_size - cfg->vocab_size) * (size_t)cfg->channels * 4);
        p += sizes[i];
    }
}
