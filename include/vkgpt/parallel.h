/* How a job's ranks share the training of one model (DESIGN.md section 6): the parallel options,
 * held once. vkg_train_config embeds them (its `par`), and the trainer hands them whole to the
 * parallel strategy. The axes compose: a pipeline of pp stages, each stage's data-parallel group
 * of world / pp ranks (rank = stage x dp + replica), ZeRO-1 sharding over that group, and how
 * the group synchronises (every step, or DiLoCo's rounds).
 */
#ifndef VKGPT_PARALLEL_H
#define VKGPT_PARALLEL_H

#include "vkgpt/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { VKG_PP_1F1B = 0, VKG_PP_GPIPE = 1, VKG_PP_ZBH1 = 2 };
enum { VKG_SYNC_STEP = 0, VKG_SYNC_DILOCO = 1 };

typedef struct vkg_parallel_config {
    /* The job (vkgpt/comm.h): world_size 1 (the default) trains alone. Rank 0's starting
     * parameters are broadcast; every rank must have the same model, data and flags, reads its
     * own slice of every global micro-batch, and only rank 0 logs and writes checkpoints. */
    vkg_comm_config comm;
    /* Micro-batch rows per data-parallel rank: rank_batch_count sizes (NULL: the trainer's batch
     * on every rank); the gradient and the loss are token-weighted means over the ranks.
     * rank_batch_auto (rank_batch NULL; no pipeline, no ZeRO, no DiLoCo): every rank starts with
     * the trainer's batch and the split follows the ranks' measured speeds (vkgpt/train.h:
     * rebalance_every), the global micro-batch staying the same. */
    const int *rank_batch;
    int rank_batch_count;
    int rank_batch_auto;
    /* Gradient buckets: about bucket_bytes each (0: 25 MiB), in reverse layer order, each summed
     * over the data-parallel group as soon as the last micro-batch's backward pass has written it
     * while the device computes the rest (whole models, and pipeline stages under 1F1B and
     * GPipe); negative: one reduction of the whole gradient after the backward pass.
     * force_copy_path 1: the buckets take the copy path (the host packs and unpacks them) even
     * where the device could copy them straight into the collectives' buffer
     * (VK_EXT_external_memory_host); both train bitwise alike. */
    long long bucket_bytes;
    int force_copy_path;
    /* Pipeline: pp stages (0 or 1: none) of contiguous layers; pp_layers: pp_layers_count layer
     * counts (NULL: balanced by estimated compute); pp_schedule VKG_PP_1F1B, VKG_PP_GPIPE or
     * VKG_PP_ZBH1 (the backward's weight passes deferred into 1F1B's bubbles). The accumulation
     * steps are the pipeline's micro-batches. */
    int pp;
    const int *pp_layers;
    int pp_layers_count;
    int pp_schedule;
    /* ZeRO-1 (zero 1; 2 or more data-parallel ranks, with or without a pipeline): AdamW's moments
     * sharded over the data-parallel group at the gradient norm's partial sums; the gradient is
     * reduce-scattered, each rank updates its shard, the parameters are allgathered. Bit for bit
     * the unsharded training; checkpoints hold the whole model and moments. */
    int zero;
    /* What the data-parallel ranks exchange their gradients in: VKG_COMM_F32 (the default) or
     * VKG_COMM_BF16 (each rank's gradient rounded to bf16, summed in fp32, rounded once, widened
     * back before the norm, clipping and AdamW; half the bytes). Every path takes it (one
     * reduction or buckets, ZeRO-1's reduce-scatter, a pipeline stage's group); losses, norms,
     * the tied wte's embedding rows and its sum over a pipeline's first and last stage stay fp32.
     * Needs 2 or more data-parallel ranks. */
    vkg_comm_dtype grad_dtype;
    /* How the data-parallel group synchronises: VKG_SYNC_STEP (gradients summed every step) or
     * VKG_SYNC_DILOCO (Douillard et al. 2023): each replica (a whole model, or under a pipeline
     * its stages) takes inner_steps (H >= 1) AdamW steps alone, its gradient the mean over its
     * own tokens; after every step t with t % H == 0 the pseudo-gradients are exchanged in
     * outer_dtype (vkg_outer_dtype: fp32, bf16, int8 or int4 with a scale per 256 elements) and
     * an outer SGD step with Nesterov momentum (outer_lr > 0, outer_momentum in [0, 1)) updates
     * the global parameters, which every replica takes. Streaming (Douillard et al. 2025): the
     * parameters in `fragments` fragments (1: the whole model) whose rounds end at staggered
     * steps; each exchange runs beside the next outer_delay steps (-1: 1 with 2 or more
     * fragments and no pipeline, else 0: blocking; pipelines take 0 only) and its outer step
     * lands as outer_mix x the replica's own + (1 - outer_mix) x the global parameters (outer_mix
     * in [0, 1)). Needs 2 or more data-parallel ranks, fp32 grad_dtype and no ZeRO; checkpoints
     * add the outer state (outer.bin), resumed only on the same number of replicas. */
    int sync;
    int inner_steps;
    float outer_lr, outer_momentum;
    int outer_dtype;
    int fragments, outer_delay;
    float outer_mix;
} vkg_parallel_config;

#ifdef __cplusplus
}
#endif
#endif
