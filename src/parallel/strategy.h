/* Parallel strategies behind one interface (DESIGN.md section 6): how a job's ranks split the
 * work of training one model. The trainer calls only this: it sets a strategy up, hands it the
 * starting point, runs optimizer steps and evaluations through it, and gathers the whole model
 * and optimizer state from it for checkpoints; it knows nothing of how the work is split.
 *
 * What a strategy is made of (chosen from the parallel config at create; strategy_internal.h):
 *   the layout    the whole model on every rank (whole.c), or a pipeline stage's contiguous range
 *                 of layers, micro-batches flowing through the stages by GPipe, 1F1B or ZB-H1
 *                 (pp_strategy.c, pp_schedule.c); ranks = pp stages x dp data-parallel ranks;
 *   the reducer   the gradient summed over the data-parallel group by one group call, per
 *                 bucket overlapped with the last backward pass or after it, fp32 or bf16
 *                 (reducer.c, buckets.c, tied.c);
 *   the sharding  none, or ZeRO-1: AdamW's moments sharded over the data-parallel group, the
 *                 gradient reduce-scattered, the norm from the shards' partial sums, the
 *                 parameters allgathered; bitwise the unsharded run (shards.c, zero.c);
 *   the sync      every step (the reducer), or DiLoCo's rounds at the step's end: H inner steps
 *                 alone, then the pseudo-gradient exchanged and an outer Nesterov step, streamed
 *                 in fragments beside the next steps (diloco.c, outer.c);
 * and one step for all (step.c). Names for logs: single, dp, zero1, pp, diloco.
 * Every rank calls every function here in the same order (they may communicate).
 * Not here: data loading and files (src/data, src/io), schedules (src/optim), checkpoints and
 * logs (src/train). Nothing here prints.
 */
#ifndef VKG_PARALLEL_STRATEGY_H
#define VKG_PARALLEL_STRATEGY_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "optim/adamw.h"
#include "vkgpt/comm.h"
#include "vkgpt/data.h"
#include "vkgpt/parallel.h"
#include "vkgpt/timeline.h"

typedef struct vkg_strategy vkg_strategy;

typedef struct vkg_strategy_config {
    vkg_parallel_config par; /* the parallel options (vkgpt/parallel.h), pointers not kept */
    int batch;               /* micro-batch rows of every rank, unless par.rank_batch */
} vkg_strategy_config;

/* Join the job and pick the strategy. Errors: VKG_ERR_INVALID_ARG naming the flag (a bad batch
 * list, --zero with one data-parallel rank), and vkg_comm_create's. */
vkg_status vkg_strategy_create(const vkg_strategy_config *c, vkg_strategy **out);
/* Leave the job. With a failure (this rank gave up: why, not NULL) the peers are told first so
 * that they fail at once naming this rank and the reason. NULL-safe; nulls *ps. */
void vkg_strategy_destroy(vkg_strategy **ps, const char *failure);
const char *vkg_strategy_name(const vkg_strategy *s);

/* ---- the job ---- */
int vkg_strategy_rank(const vkg_strategy *s);
int vkg_strategy_world(const vkg_strategy *s);
/* The job's pipeline stages (1 without) and data-parallel ranks per stage (world / pp). */
void vkg_strategy_layout(const vkg_strategy *s, int *pp, int *dp);
/* This rank's micro-batch rows, the global micro-batch (rows of every rank that trains on
 * distinct data), and the comma list of rank batches for logs. */
int vkg_strategy_rank_batch(const vkg_strategy *s);
int vkg_strategy_global_batch(const vkg_strategy *s);
const char *vkg_strategy_batch_list(const vkg_strategy *s);
/* What the job's collectives run on (vkg_comm_path): "shm (2 ranks on this host)", "zmq tcp",
 * "single rank". */
const char *vkg_strategy_comm_path(const vkg_strategy *s);
/* A hash of every rank's micro-batch size, in rank order (for the agreement check). */
uint64_t vkg_strategy_batch_hash(const vkg_strategy *s);
/* Gradient buckets of the overlapped reduction (0 without: one rank, or no overlap). */
int vkg_strategy_bucket_count(const vkg_strategy *s);
/* Resolved gradient bucket bytes (0 when gradients are reduced after the backward pass). */
uint64_t vkg_strategy_bucket_bytes(const vkg_strategy *s);
/* How gradient buckets reach the collectives' buffer, for start-up lines ("" without buckets,
 * and before vkg_strategy_load): "zero-copy: ..." where the device copies every bucket straight
 * into it (VK_EXT_external_memory_host), else "copy: <why>" (the device's gradients read and
 * written by the host, a pack and an unpack per bucket). */
const char *vkg_strategy_bucket_path(const vkg_strategy *s);
/* How this rank exchanges gradients, for start-up lines: "" without a data-parallel group
 * (nothing is exchanged), else "fp32" or "bf16 (...)" with where it is rounded and summed. */
const char *vkg_strategy_grad_exchange(const vkg_strategy *s);
/* Buckets reduced so far on the zero-copy path (tests: it was really taken). */
uint64_t vkg_strategy_zero_copy_buckets(const vkg_strategy *s);
/* Set this rank's share of the data in a loader config (batch size, rank and world size). */
void vkg_strategy_data_config(const vkg_strategy *s, vkg_data_config *dc);
/* Broadcast bytes from rank 0 to every rank (nothing alone). */
vkg_status vkg_strategy_broadcast(vkg_strategy *s, void *buf, size_t bytes);
/* Every rank's count values against rank 0's: the first difference fails the call on every rank
 * with VKG_ERR_MISMATCH naming the rank, names[i] and both values. count <= 32. */
vkg_status vkg_strategy_check_match(vkg_strategy *s, const uint64_t *values,
                                    const char *const *names, int count);
/* Rank 0 did `what` for the job (status st, the thread's message when it failed): every rank
 * learns the outcome. Rank 0 gets st back; the others VKG_ERR_PEER "rank 0 failed: <what>: <its
 * message>" when st failed. */
vkg_status vkg_strategy_rank0_outcome(vkg_strategy *s, vkg_status st, const char *what);

/* ---- --rank-batch auto (a data-parallel group of whole models, no ZeRO) ---- */
/* Rank k's micro-batch rows (k < the data-parallel ranks). */
int vkg_strategy_batch_of(const vkg_strategy *s, int k);
/* Every rank's `bytes` of send, in rank order, into recv (world x bytes). */
vkg_status vkg_strategy_allgather(vkg_strategy *s, const void *send, size_t bytes, void *recv);
/* The largest micro-batch in [1, limit] whose memory plan fits this rank's device (the check of
 * vkg_strategy_build and vkg_strategy_check_fit: the device's memory, or its limit); 0: none. */
int vkg_strategy_fit_batch(const vkg_strategy *s, int limit);
/* Every rank at once: the job's new split (dp sizes summing to the global micro-batch). The
 * model and optimizer are rebuilt for the new micro-batch and handed the parameters and moments
 * they held (gathered, then rank 0's loaded as vkg_strategy_load does), so the next steps are
 * bitwise those of a checkpoint resumed with that split; the data loader is untouched (balanced
 * jobs read whole global micro-batches). Errors: VKG_ERR_STATE (not balanced, not built),
 * vkg_job_set_batches' and vkg_strategy_build's (the fit check). After a failure of the
 * rebuild the strategy has no model: only vkg_strategy_destroy. */
vkg_status vkg_strategy_rebatch(vkg_strategy *s, const int *batches);

/* ---- the model ---- */
typedef struct vkg_strategy_model {
    vkg_device_t *dev;      /* must outlive the strategy's model */
    vkg_model_config cfg;   /* the whole model */
    int T;                  /* sequence length */
    int accum_steps;        /* micro-batches per optimizer step */
    int recompute;          /* VKG_MODEL_RECOMPUTE_* */
    int precision;          /* VKG_PRECISION_* */
    vkg_adamw_config adamw; /* the optimizer */
} vkg_strategy_model;

/* Create this rank's share of the model and optimizer (no communication: ranks may still
 * disagree; check with vkg_strategy_check_match before loading). */
vkg_status vkg_strategy_build(vkg_strategy *s, const vkg_strategy_model *mc);
/* Load the starting point: params (the whole model, table order) and, when resuming, AdamW's
 * moments m and v (else NULL on every rank), all rank 0's: other ranks' buffers (of the whole
 * model's size) are overwritten with rank 0's. */
vkg_status vkg_strategy_load(vkg_strategy *s, float *params, float *m, float *v);
/* An AdamW optimizer over every tensor of the model part m (weight decay on its 2-D weights), as
 * the strategies use (also for benchmarks of one device). */
vkg_status vkg_strategy_create_adamw(const vkg_adamw_config *cfg, vkg_model *m, vkg_adamw **out);
/* What one rank of a pipeline stage (or of a strategy without a pipeline: S = 1) needs on its
 * device: its layers, activation slots, the model part's plan and AdamW's. */
typedef struct vkg_stage_memory {
    int first, last, slots;
    vkg_model_memory_plan model;
    size_t optimizer, total; /* total: model.allocated + optimizer */
    size_t host;     /* host-visible copies, and DiLoCo's outer state (vkg_strategy_memory only) */
    int allocations; /* device allocations (the model's and AdamW's) */
} vkg_stage_memory;

/* How a plan is made: the recomputation, the precision and the largest allocation (0: no
 * limit). */
typedef struct vkg_plan_opts {
    int recompute;
    int precision;
    uint64_t max_allocation;
} vkg_plan_opts;

/* The memory of each of S stages (stages[S]) for a model of cfg trained with micro-batches of B
 * x T and M micro-batches per step under schedule kind, split by pp_layers (NULL: the automatic
 * split), without a device. Errors: the split's and vkg_model_memory's. */
vkg_status vkg_strategy_plan(const vkg_model_config *cfg, int B, int T, int M, int S,
                             const int *pp_layers, int kind, const vkg_plan_opts *po,
                             vkg_stage_memory *stages);
/* Whether stage `stage` of that plan fits a device with `has` bytes (0: unknown) and a largest
 * allocation of po->max_allocation: VKG_OK, or VKG_ERR_NOMEM naming the stage, the pool or
 * tensor at fault, the bytes needed and available, and the largest micro-batch (--batch) that
 * fits (or that none does). */
vkg_status vkg_strategy_check_fit(const vkg_model_config *cfg, int B, int T, int M, int S,
                                  const int *pp_layers, int kind, const vkg_plan_opts *po,
                                  int stage, uint64_t has);
/* The largest B in [1, B_max] whose plan fits stage `stage` (0: none). */
int vkg_strategy_largest_batch(const vkg_model_config *cfg, int B_max, int T, int M, int S,
                               const int *pp_layers, int kind, const vkg_plan_opts *po, int stage,
                               uint64_t has);
/* This rank's memory as built (its model part's plan under the device's limit, AdamW's bytes,
 * host-visible copies). */
void vkg_strategy_memory(const vkg_strategy *s, vkg_stage_memory *out);

/* Pipeline: this rank's stage and its layers [first, last) (0, 0, L without a pipeline, once
 * built). */
void vkg_strategy_stage(const vkg_strategy *s, int *stage, int *first, int *last);
/* The last step's timeline of this rank (pipelines; 0 spans for the others). */
int vkg_strategy_spans(const vkg_strategy *s, const vkg_span **spans);
/* Device memory of this rank's activation slots. */
size_t vkg_strategy_activation_bytes(const vkg_strategy *s);
/* Device bytes this rank holds for the model and optimizer. */
size_t vkg_strategy_device_bytes(const vkg_strategy *s);
/* Device bytes of this rank's AdamW (moments and the norm's scratch), and the parameters its
 * moments cover, [*first, *first + *count) of its model part (a shard under ZeRO-1). */
size_t vkg_strategy_optimizer_bytes(const vkg_strategy *s);
void vkg_strategy_moment_range(const vkg_strategy *s, size_t *first, size_t *count);

/* ---- ZeRO-1 ----
 * The shards: rank r owns the parameters [first, first + count) of the whole model (llm.c's flat
 * order), a run of whole partial sums of the gradient norm as the device adds them (so that the
 * shards' partial sums, gathered, add up exactly as one device's do), the runs as even as those
 * partial sums allow: partials [P r / N, P (r + 1) / N). */
typedef struct vkg_zero_shard {
    size_t first, count;           /* parameters */
    size_t part_first, part_count; /* partial sums of the norm */
    size_t optimizer;              /* device bytes of the rank's AdamW */
} vkg_zero_shard;

/* The shards of ranks 0..N-1 (shards[N]) for a model of cfg, cut at the gradient norm's partial
 * sums (the same on every device), without a device: what vkg_strategy_build allocates under
 * ZeRO-1.
 * Errors: VKG_ERR_INVALID_ARG naming --zero when the norm has fewer partial sums than ranks. */
vkg_status vkg_strategy_zero_plan(const vkg_model_config *cfg, int N, vkg_zero_shard *shards);
/* 1 under ZeRO-1, else 0. */
int vkg_strategy_zero(const vkg_strategy *s);
/* A hash of the shard layout (0 without ZeRO): every rank must have the same (same devices'
 * norm partition). */
uint64_t vkg_strategy_zero_hash(const vkg_strategy *s);

typedef struct vkg_strategy_step_in {
    float lr;        /* learning rate of this step */
    uint32_t t;      /* AdamW step, 1-based */
    float grad_clip; /* clip the global gradient norm to this (<= 0: never) */
    int stop;        /* this rank was asked to stop after this step */
    /* The loss scale of this step (0 or 1: none): d(loss) is multiplied by it, so every gradient
     * carries it, and the update divides it out (clipping and grad_norm see the unscaled norm).
     * The trainer's dynamic loss scaling sets it; the same on every rank. */
    float loss_scale;
} vkg_strategy_step_in;

typedef struct vkg_strategy_step_out {
    float loss;                      /* the step's mean loss over every token of the job */
    float grad_norm;                 /* global gradient norm before clipping */
    int stop;                        /* some rank was asked to stop */
    int skipped;                     /* 1: the loss or the norm was not finite: not applied */
    double comm_ms, exposed_comm_ms; /* gradient communication, and the part not overlapped */
    /* DiLoCo: 1 when an outer step ended this step, the bytes of this rank's pseudo-gradient in
     * its exchange (vkg_outer_payload_bytes) and the exchange's and update's milliseconds. */
    int outer;
    /* DiLoCo: 1 when a round ended without its outer step: a step of the round was skipped, or
     * the exchanged sums were not finite; the global parameters stayed as they were and every
     * replica took them. */
    int outer_skipped;
    uint64_t outer_bytes;
    double outer_ms;
    /* The payload this rank handed the step's collectives: its gradient's elements x their bytes
     * (sync step: every step; a pipeline stage's part), or the pseudo-gradient pieces exchanged
     * in this step (outer_bytes) and the 12 bytes of DiLoCo's loss, stop and norm; 0 alone. The
     * algorithms' factor (a ring sends 2 (N - 1) / N of it) is not counted. */
    uint64_t comm_bytes;
} vkg_strategy_step_out;

/* One optimizer step: accum_steps micro-batches from data, their gradients reduced as the
 * strategy needs, clipped by the global norm and applied by AdamW. When the job's loss or global
 * gradient norm is not finite, every rank skips the update alike (out->skipped): parameters and
 * moments stay bitwise as they were. */
vkg_status vkg_strategy_step(vkg_strategy *s, vkg_data_t *data, const vkg_strategy_step_in *in,
                             vkg_strategy_step_out *out);
/* The mean loss over the first n global micro-batches of data (a token-weighted mean over the
 * job). */
vkg_status vkg_strategy_eval(vkg_strategy *s, vkg_data_t *data, int n, float *loss);
/* Forward of one micro-batch of inputs (rank batch x T tokens; no targets) and the logits
 * (padded vocabulary floats) at row b, position t: for sampling (each rank samples alone). */
vkg_status vkg_strategy_logits(vkg_strategy *s, const int32_t *inputs, int b, int t, float *row);
/* The whole model's parameters and AdamW moments (table order; m, v may be NULL) on rank 0, and
 * on every other rank that holds the whole model (single, dp; under ZeRO-1 the parameters only:
 * the moments, gathered from every shard, reach rank 0 alone); elsewhere the buffers are left
 * alone. */
vkg_status vkg_strategy_gather(vkg_strategy *s, float *params, float *m, float *v);

/* ---- DiLoCo ----
 * The state a checkpoint needs beyond rank 0's parameters and moments to resume bitwise on the
 * same number of replicas N: the global parameters g (n floats), the outer momentum (n), then for
 * each replica q = 1 .. N-1 its parameters, AdamW m and v (n each): n (2 + 3 (N - 1)) floats, 0
 * for every other strategy. */
size_t vkg_strategy_outer_state_count(const vkg_strategy *s);
/* That state after optimizer step `step` on rank 0 (buf: count floats; ignored elsewhere); every
 * rank calls it. */
vkg_status vkg_strategy_outer_state_gather(vkg_strategy *s, uint64_t step, float *buf);
/* Resume from it (buf: rank 0's, count floats; ignored elsewhere) after optimizer step `step`,
 * after vkg_strategy_load with rank 0's parameters and moments: every rank takes g and the
 * momentum, and each replica q >= 1 its own parameters and moments (and, streaming, every
 * replica its exchanges in flight). Every rank calls it. VKG_ERR_STATE for other strategies. */
vkg_status vkg_strategy_outer_state_load(vkg_strategy *s, uint64_t step, const float *buf);
/* Streaming DiLoCo's fragment p of F over a model of cfg: the (first, count) pairs of the whole
 * parameter vector (table order) it holds, in order, into ranges (NULL: only counted) and their
 * number into *nranges (at most n ceil(L / F) for a table of n tensors): walking the parameter
 * table, the layers l with l % F == p of every stacked tensor, the rows [p R / F, (p + 1) R / F)
 * of every other matrix of R rows (GPT-2: wte and wpe), and every other vector with the first
 * layer's fragment (embeddings) or the last layer's (head: GPT-2's lnfw and lnfb). Errors:
 * VKG_ERR_INVALID_ARG naming --fragments outside 1 .. L. */
vkg_status vkg_diloco_fragment_ranges(const vkg_model_config *cfg, int F, int p, size_t *ranges,
                                      int *nranges);
/* DiLoCo's settings for start-up lines ("" for other strategies): "H inner steps, outer lr ...". */
const char *vkg_strategy_outer_describe(const vkg_strategy *s);

#endif
