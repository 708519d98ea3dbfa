/* Internal to the trainer (trainer.c, generate.c). */
#ifndef VKG_TRAINER_INTERNAL_H
#define VKG_TRAINER_INTERNAL_H

#include "model/gpt2.h"
#include "train/checkpoint.h"
#include "train/metrics.h"
#include "train/sampler.h"
#include "train/schedule.h"
#include "vkgpt/data.h"
#include "vkgpt/tokenizer.h"
#include "vkgpt/train.h"

struct vkg_trainer {
    vkg_train_config cfg;
    vkg_device_t *dev;
    vkg_gpt2 *model;
    vkg_gpt2_config mcfg;
    vkg_gpt2_opts mopts;
    vkg_tokenizer_t *tok; /* may be NULL (no samples) */
    vkg_data_t *train, *val;
    vkg_metrics_t *metrics;
    vkg_schedule_config sched;
    vkg_train_hparams hp;
    vkg_rng rng; /* sampling */
    long long step;      /* optimizer steps completed */
    long long start_step;
    uint64_t tokens;
    int resumed;
    int32_t *inputs, *targets; /* (B, T) */
    char ckpt_dir[1024];
};

/* Generation with the model's (B, T) buffers: the prompt's tokens then len sampled ones. */
vkg_status vkg__generate(vkg_gpt2 *m, int B, int T, const vkg_tokenizer_t *tok,
                         const char *prompt, int len, float temperature, int top_k, vkg_rng *rng,
                         char **text);

#endif
