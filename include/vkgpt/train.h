/* Training GPT-2 with vkgpt: the trainer behind `vkgpt train` and `vkgpt sample`, usable from C.
 *
 * A trainer owns a device, a model (new, from an llm.c model file, or resumed from a checkpoint),
 * the data loaders, the JSON log and the checkpoints. Each vkg_trainer_step runs one optimizer
 * step over total_batch tokens (gradient accumulation over micro-batches of batch x seq tokens).
 * The library never prints: progress comes back in vkg_step_info for the caller to show.
 */
#ifndef VKGPT_TRAIN_H
#define VKGPT_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include <signal.h>

#include "vkgpt/comm.h"
#include "vkgpt/device.h"
#include "vkgpt/optim.h"
#include "vkgpt/parallel.h"
#include "vkgpt/timeline.h"
#include "vkgpt/tuning.h"
#include "vkgpt/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vkg_train_config {
    const char *device;      /* index or name substring; NULL: the first suitable device */
    int validation;          /* Khronos validation layer on (slow; for debugging) */
    int profile;             /* timestamp queries on (per-op times in vkg_trainer_op_times) */
    int force_staging;       /* treat a unified-memory device as a discrete one (tests) */
    uint64_t memory_limit;   /* > 0: act as if the device had at most this much memory (bytes) */
    uint64_t max_allocation; /* > 0: act as if no allocation could be larger (bytes; tests) */
    vkg_matmul_tiling tiles; /* bm > 0: the tiled matmul with these tiles for every product */
    int coopmat;   /* vkg_coopmat_mode (vkgpt/device.h): cooperative matrices, auto by default */
    int recompute; /* 1: recompute the GELU outputs in the backward pass (llm.c -r 1) */
    int precision; /* VKG_PRECISION_* (vkgpt/model.h); checkpoints stay fp32 */
    /* Model: resumed from ckpt_dir (resume), else loaded from init_path (an llm.c model file,
     * fp32 version 3 or bf16 version 5, or a Hugging Face directory: config.json and
     * model.safetensors), else new with the init of its parameter table from seed: the
     * configuration `model` names (a preset, vkg_model_preset, or a config.json's path) or, when
     * it is NULL, GPT-2 of these fields. */
    const char *init_path;
    const char *model;
    int layers, heads, channels, max_seq_len;
    int vocab_size; /* 0: the tokenizer's */
    uint64_t seed;
    /* Data: llm.c token shards or text files (a path or a glob). val_data may be NULL. */
    const char *data, *val_data;
    /* Tokenizer: "byte", "gpt2" (with vocab_dir: vocab.bpe + encoder.json) or the path of an
     * llm.c tokenizer file; NULL: byte-level for text, DIR/tokenizer.bin next to shards if any. */
    const char *tokenizer, *vocab_dir;
    int shuffle; /* 1: seeded batch order per epoch */
    /* Batch: micro-batch B x T; total_batch tokens per optimizer step (0: B*T). */
    int batch, seq;
    long long total_batch;
    /* Optimizer and schedule. */
    int steps;
    float lr, lr_min_frac;
    int warmup;
    vkg_schedule_kind schedule;
    float weight_decay, beta1, beta2, eps, grad_clip; /* grad_clip 0: off */
    /* A step whose loss or global gradient norm is not finite is skipped: parameters and AdamW
     * moments stay as they were (the step still counts, its data is consumed). max_skipped
     * consecutive skipped steps (>= 1) stop the run: vkg_trainer_step fails. */
    int max_skipped;
    /* Dynamic loss scaling, as PyTorch's GradScaler: loss_scale 0 (default) off; otherwise the
     * scale of the first step, a power of two in [1, 2^127]. Each step multiplies d(loss) by the
     * scale, so every gradient carries it, and the update divides it out (bitwise the unscaled
     * update while the gradients stay in fp32's normal range). A step whose loss is finite but
     * whose gradient is not (an overflow) is skipped and the scale halved; it does not count
     * toward max_skipped while the scale is above 1. After loss_scale_window applied steps in a
     * row (0: 2000) the scale doubles (at most 2^127). The scale and its count are in
     * checkpoints. With bf16 and cooperative matrices on, the gradient products (dinp, dweight)
     * also run on them: their f16 operands are what the scale keeps from underflowing. */
    float loss_scale;
    int loss_scale_window;
    /* Evaluation every eval_every steps (0: never) over eval_batches validation batches. */
    int eval_every, eval_batches;
    /* Checkpoints and log. ckpt_dir NULL: no checkpoints. log_path NULL: ckpt_dir/log.jsonl
     * (or no log without ckpt_dir). Rank 0 locks ckpt_dir for the trainer's life (a second
     * trainer on it is refused, naming the holder). Without resume, a ckpt_dir that holds a
     * checkpoint marked complete is refused: a new run never writes over another's. resume:
     * continue from the newest checkpoint marked complete; when it does not load, creation fails
     * naming the file, unless resume_fallback: then the newest one that loads is used and the
     * damaged newer ones are renamed step_<n>.damaged, untouched (vkg_trainer_info says which).
     * No checkpoint marked complete is ever written over. */
    const char *ckpt_dir;
    /* Each checkpoint also as a Hugging Face directory, step_<n>/hf (config.json and
     * model.safetensors, VKG_SAVE_HF_FP32 or _BF16; 0: not), which transformers loads and
     * --init starts from. */
    int save_hf;
    /* The caller's checkpoint period in steps (0: at the end only): it calls vkg_trainer_save
     * then. Saving is collective, so the ranks of a job agree on it (and on ckpt_dir being
     * given) before the first step. */
    int ckpt_every;
    int keep_checkpoints;
    int resume;
    int resume_fallback;
    const char *log_path;
    /* The run's settings (the CLI's flags as JSON), written by rank 0 as ckpt_dir/run.json,
     * atomically and before the first checkpoint this trainer marks complete, so that every
     * complete checkpoint has the settings that produced it beside it. NULL: none written.
     * Copied by vkg_trainer_create. */
    const char *run_config;
    /* How the job's ranks share the training (vkgpt/parallel.h), held once. comm_from_env: take
     * par.comm from launcher variables instead (vkg_comm_config_from_env: torchrun, Slurm, Open
     * MPI; par.comm.ctx is kept). With par.rank_batch_auto the split is measured again every
     * rebalance_every steps (> 0) after a calibration of the first min(3, rebalance_every)
     * steps, each rank within its memory plan; a new split carries the parameters, AdamW's
     * moments and the data position over in memory, exactly as a checkpoint resumed with that
     * split would. lr_scale scales lr by total_batch / base_batch (base_batch > 0). */
    vkg_parallel_config par;
    int comm_from_env;
    int rebalance_every;
    vkg_lr_scale lr_scale;
    long long base_batch;
    /* Optional: write every step's timeline of this rank (pipelines) to this file as Chrome
     * trace-event JSON (Perfetto, chrome://tracing); with several ranks each writes
     * FILE.rank<N>. */
    const char *trace_path;
    /* Optional: a flag (set by a signal handler) checked at the end of each step; with several
     * ranks it is combined over all of them, so every rank stops after the same step. Also
     * checked while vkg_trainer_create loads data: it then fails with VKG_ERR_ABORTED
     * ("interrupted while loading FILE"), before writing any checkpoint, log or tokenizer. */
    const volatile sig_atomic_t *stop;
} vkg_train_config;

/* Defaults: L=4, NH=4, C=128, maxT=64, B=8, T=64, 1000 steps, lr 6e-4 cosine to 0.1 with
 * 10% warmup... (see the definition); every pointer NULL. */
enum { VKG_SAVE_HF_NONE = 0, VKG_SAVE_HF_FP32 = 1, VKG_SAVE_HF_BF16 = 2 };

vkg_train_config vkg_train_config_default(void);

typedef struct vkg_trainer vkg_trainer_t;

typedef struct vkg_trainer_info {
    char device[256];
    char coopmat[400]; /* bf16: whether products run on cooperative matrices, and why ("" fp32) */
    int layers, heads, channels, max_seq_len, vocab_size, padded_vocab_size;
    char family[256]; /* the model family's choices in words (vkg_model_describe) */
    size_t num_params;
    size_t device_bytes; /* device memory held by the model */
    int batch, seq, accum_steps;
    long long total_batch;
    long long start_step, steps; /* resumed runs start past 0 */
    int resumed;
    char resume_skipped[2048]; /* newer checkpoints resume passed over, why, where they went */
    int has_tokenizer;         /* 0: no tokenizer (token shards alone), vkg_trainer_sample fails */
    int validation_messages;   /* warnings/errors the validation layer reported (validation on) */
    char validation_first[512];
    char log_path[1024], svg_path[1024];
    int rank, world_size;        /* data parallelism; 0 of 1 alone */
    int global_batch;            /* rows of a global micro-batch (sum over ranks) */
    char rank_batches[256];      /* "4,2,2" */
    int rebalance_every;         /* --rank-batch auto: its --rebalance-every (0: a fixed split) */
    char comm_path[96];          /* what the collectives run on: "shm (2 ranks on this host)" */
    char bucket_path[256];       /* how gradient buckets reach the collectives ("" without):
                                    "zero-copy: ..." or "copy: <why>" */
    int pp, stage;               /* pipeline stages (1 without) and this rank's */
    int dp;                      /* data-parallel ranks of a stage (world_size / pp) */
    int first_layer, last_layer; /* this rank's layers [first, last) */
    size_t activation_bytes;     /* device memory of this rank's activation slots */
    /* This rank's memory plan (what it allocated): parameters, gradients, AdamW (moments and
     * norm scratch), the shared gradients of the activations and scratch, host-visible copies
     * (with DiLoCo's outer state on the host: 12 bytes per parameter, plus every rank's payload
     * for bf16 and int8); allocations made and the largest one allowed. */
    size_t param_bytes, grad_bytes, optimizer_bytes, shared_bytes, host_bytes;
    size_t param_copy_bytes; /* the bf16 copy of the weights (bf16 precision; else 0) */
    int allocations;
    uint64_t max_allocation;
    float lr;                /* peak lr after --lr-scale */
    int zero;                /* 1: ZeRO-1, the moments sharded over the ranks */
    char grad_exchange[256]; /* how gradients are exchanged: "" alone, "fp32", "bf16 (...)" */
    size_t moment_first, moment_count; /* the parameters whose moments this rank holds */
    char sync[320];                    /* DiLoCo's settings ("" for step-wise synchronisation) */
} vkg_trainer_info;

typedef struct vkg_step_info {
    long long step; /* 1-based number of the step just taken */
    float loss, lr, grad_norm;
    double ms, tokens_per_s;
    uint64_t tokens; /* trained on so far */
    int has_eval;
    float eval_loss;
    int stop; /* cfg.stop was set on some rank: stop after this step (every rank) */
    /* 1: this step's loss or gradient norm was not finite and it was not applied; the steps
     * skipped so far in this process, and how many in a row end with this one. */
    int skipped;
    long long skipped_total, skipped_run;
    /* Dynamic loss scaling: the scale this step ran with (0: off), and 1 when its gradient
     * overflowed (skipped: the next step runs with half the scale). */
    float loss_scale;
    int overflow;
    /* Data parallelism: milliseconds spent in gradient allreduces (ZeRO-1: reduce-scatters, the
     * norm's partial sums and the parameters' allgather), and the part of them not hidden behind
     * the backward pass (after the device had finished it). */
    double comm_ms, exposed_comm_ms;
    /* The rows of each data-parallel rank in this step ("4,2,2"). --rank-batch auto: 1 when the
     * split was chosen again after this step, the one the next step runs (rebalanced: it
     * changed) and the rows per second each rank was measured at (rank order; "" when the split
     * was not chosen after this step). */
    char rank_batches[256];
    int rebalanced;
    char next_rank_batches[256];
    char rank_speeds[256];
    /* DiLoCo: 1 when this step ended with an outer step; the bytes of this rank's
     * pseudo-gradient in its exchange (fp32 4, bf16 2, int8 1 per parameter plus 4 per 256; bf16
     * and int8 are allgathered: each rank receives world - 1 times that), and its milliseconds
     * (exchange and update; part of comm_ms). */
    int outer;
    /* DiLoCo: 1 when a round ended here without its outer step, because a step of the round was
     * skipped (or the exchanged sums were not finite): the global parameters and the outer
     * momentum stay as they were and every replica restarts from those parameters. */
    int outer_skipped;
    uint64_t outer_bytes;
    double outer_ms;
    /* The payload this rank handed the step's collectives (0 alone): with --sync step its
     * gradient (parameters x 4 bytes, x 2 with bf16); with DiLoCo the pseudo-gradient bytes
     * exchanged in this step (streaming: the pieces that ran beside it) and 12 bytes of loss,
     * stop and norm. A ring sends 2 (N - 1) / N of an allreduce's payload; an allgather
     * receives N - 1 times it. */
    uint64_t comm_bytes;
} vkg_step_info;

/* The data-parallel ranks of a stage in the job cfg describes (cfg->comm.world_size over
 * cfg->pp stages), as the trainer will lay the job out; 0 when --pp does not divide the ranks
 * (vkg_trainer_create then names it). */
int vkg_train_dp_ranks(const vkg_train_config *cfg);
/* Set everything up: errors name the flag, file or device at fault (bad sizes, a total batch
 * that does not divide, corrupt files, tokens outside the vocabulary, ...). */
vkg_status vkg_trainer_create(const vkg_train_config *cfg, vkg_trainer_t **out);
/* Release everything (NULL-safe; *pt becomes NULL). With several ranks, when a call on this
 * trainer failed, the other ranks are told first, with that call's error message, so that they
 * fail at once naming this rank and why. */
void vkg_trainer_destroy(vkg_trainer_t **pt);
/* vkg_trainer_destroy that returns the validation layer's messages over the trainer's whole life
 * (cfg->validation on), those reported while its device is destroyed included, and copies the
 * first to first (cap bytes, may be NULL/0). */
int vkg_trainer_destroy_report(vkg_trainer_t **pt, char *first, size_t cap);
void vkg_trainer_get_info(const vkg_trainer_t *t, vkg_trainer_info *info);
/* 1 when every configured step has run. */
int vkg_trainer_done(const vkg_trainer_t *t);
/* One optimizer step (and the evaluation when one is due); appends it to the log. */
vkg_status vkg_trainer_step(vkg_trainer_t *t, vkg_step_info *info);
/* Mean loss over eval_batches validation batches (from the first, each time). */
vkg_status vkg_trainer_eval(vkg_trainer_t *t, float *loss);
/* Generate len tokens after prompt (empty: start from end-of-text) and return the text
 * (prompt included, malloc'd, caller frees). temperature 0: greedy; top_k 0: all tokens.
 * Without a pipeline, cfg.stop set during it ends it early with the text so far. */
vkg_status vkg_trainer_sample(vkg_trainer_t *t, const char *prompt, int len, float temperature,
                              int top_k, uint64_t seed, char **text);
/* Write a checkpoint of the current step (and the SVG loss curve); path_out may be NULL. With
 * several ranks every rank calls it: rank 0 writes, and the others fail too (VKG_ERR_PEER naming
 * rank 0 and its error) when that failed; path_out is "" on them. A step whose checkpoint is
 * already on disk (marked complete) is refused with VKG_ERR_STATE: nothing is written over it. */
vkg_status vkg_trainer_checkpoint(vkg_trainer_t *t, char *path_out, size_t cap);
/* Write the SVG loss curve now. */
vkg_status vkg_trainer_write_plot(vkg_trainer_t *t);
/* Copy the parameters (num_params floats, llm.c order) to params. */
vkg_status vkg_trainer_get_params(vkg_trainer_t *t, float *params);
/* The last step's timeline of this rank (pipelines; 0 spans otherwise): *spans points into t,
 * valid until the next step. Returns the count. */
int vkg_trainer_spans(const vkg_trainer_t *t, const vkg_span **spans);

#ifdef __cplusplus
}
#endif
#endif
