/* Initialisation on the host (see vkgpt/model.h): the same draws, in the same order, for every
 * model of a configuration and seed. */
#include <math.h>
#include <string.h>

#include "base/rng.h"
#include "vkgpt/model.h"

void vkg_model_init_params(const vkg_model_config *cfg, float *params, uint64_t seed)
{
    vkg_param_table t;
    vkg_model_params(cfg, &t);
    vkg_rng r;
    vkg_rng_seed(&r, seed);
    for (int i = 0; i < t.n; i++) {
        const vkg_param_info *p = &t.t[i];
        float *x = params + p->offset;
        if (p->init == VKG_INIT_ZEROS || p->init == VKG_INIT_ONES) {
            float v = p->init == VKG_INIT_ONES ? 1.0f : 0.0f;
            for (size_t j = 0; j < p->count; j++)
                x[j] = v;
            continue;
        }
        float std = 0.02f;
        if (p->init == VKG_INIT_RESIDUAL)
            std = 0.02f / sqrtf(2.0f * (float)cfg->num_layers);
        vkg_rng_fill_normal(&r, x, p->count, 0.0f, std);
        if (p->used_rows < p->rows) /* a padded vocabulary's rows (not stacked: one slice) */
            memset(x + (size_t)p->used_rows * (size_t)p->cols, 0,
                   (size_t)(p->rows - p->used_rows) * (size_t)p->cols * sizeof *x);
    }
}
