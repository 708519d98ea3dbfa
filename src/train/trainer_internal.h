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
    vkg_rng rng;    /* sampling */
    long long step; /* optimizer steps completed */
    long long start_step;
    uint64_t tokens;
    int resumed;
    char resume_skipped[2048]; /* newer checkpoints --resume passed over, and why ("" none) */
    int32_t *inputs, *targets; /* (B, T) */
    char ckpt_dir[1024];
    int lock_fd;                      /* ckpt_dir's lock (rank 0), -1 when none */
    struct vkg_dp *dp;                /* data parallelism (src/parallel); world size 1 alone */
    float *dp_grads;                  /* (num_params) host copy for the allreduce; NULL alone */
    int failed;                       /* a call failed: the peers are told on destroy */
    char fail_msg[1024];              /* the first failure's message, which they are told */
    int dp_overlap;                   /* gradient buckets reduced during the last backward pass */
    double dp_comm_ms, dp_exposed_ms; /* of the last step */
};

/* Data-parallel hooks (src/parallel/dp_trainer.c), in the order setup calls them: join the job;
 * give every rank rank 0's model config and resume state (others then hold an empty ck with m/v
 * allocated); check agreement and broadcast parameters (and moments); resume the data position
 * (other world sizes allowed when the total batch holds). Per step: sum the gradients and the
 * token-weighted loss over ranks and combine the stop flags; evaluation: a token-weighted mean.
 * The lr factor of --lr-scale. All are no-ops with one rank. */
vkg_status vkg__dp_join(vkg_trainer_t *t);
vkg_status vkg__dp_share_start(vkg_trainer_t *t, float **params, vkg_checkpoint *ck);
vkg_status vkg__dp_agree(vkg_trainer_t *t, float *params, vkg_checkpoint *ck);
vkg_status vkg__dp_resume(vkg_trainer_t *t, const vkg_checkpoint_state *s);
/* The last micro-step with the bucketed, overlapped gradient allreduce (dp_overlap). */
vkg_status vkg__dp_backward_overlapped(vkg_trainer_t *t, float *loss);
vkg_status vkg__dp_reduce(vkg_trainer_t *t, double *loss, int *stop);
vkg_status vkg__dp_mean(vkg_trainer_t *t, double *value);
float vkg__dp_lr_factor(const vkg_train_config *c, long long total_batch);
/* Rank 0 did `what` for the job (status st, the thread's message when it failed): every rank
 * learns the outcome. Rank 0 gets st back; the others VKG_ERR_PEER "rank 0 failed: <what>: <its
 * message>" when st failed. Every rank must call it. Returns st alone. */
vkg_status vkg__dp_rank0_outcome(vkg_trainer_t *t, vkg_status st, const char *what);

/* Generation with the model's (B, T) buffers: the prompt's tokens then len sampled ones. */
vkg_status vkg__generate(vkg_gpt2 *m, int B, int T, const vkg_tokenizer_t *tok, const char *prompt,
                         int len, float temperature, int top_k, vkg_rng *rng, char **text);

#endif
