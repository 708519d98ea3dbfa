/* Internal to the trainer (trainer.c, inputs.c, agree.c, generate.c). */
#ifndef VKG_TRAINER_INTERNAL_H
#define VKG_TRAINER_INTERNAL_H

#include "optim/schedule.h"
#include "parallel/strategy.h"
#include "train/checkpoint.h"
#include "train/metrics.h"
#include "train/sampler.h"
#include "train/trace.h"
#include "vkgpt/data.h"
#include "vkgpt/tokenizer.h"
#include "vkgpt/train.h"

struct vkg_trainer {
    vkg_train_config cfg;
    vkg_device_t *dev;
    vkg_strategy *par; /* how the job's ranks split the work (src/parallel) */
    vkg_model_config mcfg;
    int B, T, accum_steps; /* this rank's micro-batch and micro-batches per step */
    vkg_tokenizer_t *tok;  /* may be NULL (no samples) */
    vkg_data_t *train, *val;
    vkg_metrics_t *metrics;
    vkg_schedule_config sched;
    vkg_train_hparams hp;
    vkg_rng rng;    /* sampling */
    long long step; /* optimizer steps completed */
    long long start_step;
    uint64_t tokens;
    long long skipped, skipped_run; /* steps not applied: in all, and in a row up to now */
    long long outer_reset;          /* DiLoCo: the last step whose round ended without its outer
                                     * step (the replicas took the global parameters); 0: none */
    /* Dynamic loss scaling (cfg.loss_scale > 0): the scale of the next step, and the steps in a
     * row since the last overflow (or growth). */
    float scale;
    long long scale_good;
    int resumed;
    char resume_skipped[2048]; /* newer checkpoints --resume passed over, and why ("" none) */
    char coopmat[400];         /* bf16: cooperative matrices on or off, and why ("" fp32) */
    char ckpt_dir[1024];
    char *run_config;             /* cfg.run_config copied, or NULL; written as run.json once */
    struct vkg_os_lockfile *lock; /* ckpt_dir's lock (rank 0), NULL when none */
    vkg_trace *trace;             /* --trace: this rank's timeline, or NULL */
    struct {                      /* --rank-batch auto (rebalance.c) */
        int on;                   /* auto with 2 or more data-parallel ranks */
        double row_delay_ms;      /* VKG_TEST_ROW_DELAY_MS: this rank's test-only delay per row */
        int cap;                  /* the largest micro-batch this rank's memory plan fits */
        int calib, window, seen;  /* calibration steps, this window's steps, steps seen in it */
        long long next;           /* the step after which the split is chosen again */
        double busy_ms;           /* this window's busy time (counted steps minus waiting) */
        long long rows;           /* rows trained in the counted steps */
    } bal;
    int failed;          /* a call failed: the peers are told on destroy */
    char fail_msg[1024]; /* the first failure's message, which they are told */
};

/* The trainer's inputs (inputs.c). open_tokenizer: the one cfg names (gpt2, byte or a file); for
 * shards the tokenizer.bin beside them, or none (t->tok stays NULL); for text the byte one.
 * load_model: t->mcfg and the parameters (*params, malloc'ed; ck holds the rest of a resumed
 * checkpoint), new, from
 * --init or resumed; the rules are at its definition. open_data: the training and validation
 * loaders cfg names, split among the ranks by the strategy. */
vkg_status vkg__train_open_tokenizer(vkg_trainer_t *t);
vkg_status vkg__train_load_model(vkg_trainer_t *t, float **params, vkg_checkpoint *ck);
vkg_status vkg__train_open_data(vkg_trainer_t *t);
/* A new model from the flags (layers, heads, channels, context, vocabulary from --vocab or the
 * tokenizer) initialised from the seed: t->mcfg and *params (malloc'ed). VKG_ERR_INVALID_ARG when
 * no vocabulary size is known or the shape is invalid. */
vkg_status vkg__train_new_model(vkg_trainer_t *t, float **params);

/* What the ranks of a job must share and agree on before training (agree.c): rank 0's model
 * config and resume state go to every rank (which then hold an empty ck with m/v allocated when
 * resuming; when rank 0 found nothing to resume, the others make their new model then); every
 * rank's model, data and flags must match rank 0's; a resumed data position is carried over to
 * another world size when the total batch holds. No-ops with one rank. */
vkg_status vkg__train_share_start(vkg_trainer_t *t, float **params, vkg_checkpoint *ck);
vkg_status vkg__train_agree(vkg_trainer_t *t, const vkg_checkpoint *ck);
vkg_status vkg__train_resume_data(vkg_trainer_t *t, const vkg_checkpoint_state *s);

/* --rank-batch auto (rebalance.c). setup: after the starting point is loaded (t->step set),
 * reads the test-only delay and this rank's memory cap; errors name --rebalance-every and
 * VKG_TEST_ROW_DELAY_MS. delay: the test-only sleep before a step. step: after every step
 * (ms: its time, waited_ms: the part spent waiting for the other ranks), fills info's split
 * fields and, when due, chooses the split again on every rank (vkg_strategy_rebatch). */
vkg_status vkg__train_balance_setup(vkg_trainer_t *t);
void vkg__train_balance_delay(const vkg_trainer_t *t);
vkg_status vkg__train_balance_step(vkg_trainer_t *t, double ms, double waited_ms,
                                   vkg_step_info *info);

/* Generation through the strategy's (B, T) forward pass: the prompt's tokens then len sampled
 * ones, or fewer when *stop (may be NULL) is set before a token: the text so far. */
vkg_status vkg__generate(vkg_strategy *par, const vkg_model_config *cfg, int B, int T,
                         const vkg_tokenizer_t *tok, const char *prompt, int len, float temperature,
                         int top_k, vkg_rng *rng, const volatile sig_atomic_t *stop, char **text);

#endif
