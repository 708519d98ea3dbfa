/* Data parallelism for the trainer (DESIGN.md section 6): one vkg_dp per rank wraps the rank's
 * communicator and everything the trainer needs to train exactly like one device on the union of
 * the ranks' data.
 *
 * Token weighting. Rank k trains on micro-batches of b_k rows of T tokens; a global micro-batch
 * has G = sum b_k rows. Rank k's d(loss) is scaled by b_k / G (vkg_gpt2_opts.loss_scale), so a
 * plain SUM allreduce of the ranks' gradients is the gradient of the mean loss over all G*T
 * tokens, and the logged loss is the same token-weighted mean. Ranks with equal micro-batches
 * read their slices with the data loader's rank/world split; unequal ones read the whole global
 * micro-batch (G rows) and keep their own rows [off_k, off_k + b_k), so the union is the same.
 *
 * Not here: the data-parallel strategy that uses it (dp_strategy.c: the start broadcast and the
 * allreduce of the last micro-step, whole or per bucket overlapped with the backward pass, with
 * buckets.c and tied_wte.c), pipeline parallelism. Nothing here prints.
 */
#ifndef VKG_PARALLEL_DP_H
#define VKG_PARALLEL_DP_H

#include <stddef.h>
#include <stdint.h>

#include "vkgpt/comm.h"
#include "vkgpt/data.h"
#include "vkgpt/model.h"
#include "vkgpt/status.h"

#define VKG_DP_MAX_RANKS 1024

typedef struct vkg_dp vkg_dp;

/* What every rank must agree on; compared field by field against rank 0's. */
typedef struct vkg_dp_fingerprint {
    uint64_t v[32];
} vkg_dp_fingerprint;

/* Join the job described by comm (vkg_comm_create; world_size 1 makes a communicator-less
 * vkg_dp). pp: pipeline stages (1 without a pipeline); the job's ranks are then pp data-parallel
 * groups, stage by stage (rank = stage x group size + place in the group), and everything about
 * batches below is per group. rank_batch: group-size micro-batch sizes (rows), or NULL for
 * `batch` on every rank.
 * Errors: VKG_ERR_INVALID_ARG naming the flag (a bad list, sizes <= 0), and vkg_comm_create's. */
vkg_status vkg_dp_create(const vkg_comm_config *comm, int pp, int batch, const int *rank_batch,
                         int rank_batch_count, vkg_dp **out);
/* This rank gives up (why: what failed, not NULL): the peers are told (vkg_comm_abort) so that
 * they fail at once, naming this rank and the reason; afterwards only vkg_dp_destroy. Nothing
 * alone or with why NULL. */
void vkg_dp_abort(vkg_dp *d, const char *why);
/* Leave the job. With a failure (this rank gave up: why, not NULL) the peers are told first
 * (vkg_comm_abort with that text) so they fail at once, naming this rank and the reason, instead
 * of waiting for the deadline or meeting this rank's final barrier in another collective. */
void vkg_dp_destroy(vkg_dp **pd, const char *failure);

int vkg_dp_rank(const vkg_dp *d);
int vkg_dp_world(const vkg_dp *d);
/* This rank's place in its data-parallel group, the group's size, the pipeline stages, and the
 * job's communicator (NULL alone). */
int vkg_dp_group_rank(const vkg_dp *d);
int vkg_dp_group_size(const vkg_dp *d);
int vkg_dp_pp(const vkg_dp *d);
vkg_comm_t *vkg_dp_comm(vkg_dp *d);
/* This rank's micro-batch rows, the global micro-batch rows G, and this rank's b_k / G. */
int vkg_dp_rank_batch(const vkg_dp *d);
int vkg_dp_global_batch(const vkg_dp *d);
float vkg_dp_loss_scale(const vkg_dp *d);
/* The largest micro-batch of any rank (rows). */
int vkg_dp_max_rank_batch(const vkg_dp *d);
/* The comma list of rank batches ("4,2,2") for logs (shortened beyond about 40 ranks). */
const char *vkg_dp_batch_list(const vkg_dp *d);
/* A hash of every rank's micro-batch size, in rank order (for the agreement check). */
uint64_t vkg_dp_batch_hash(const vkg_dp *d);

/* Configure a data loader config for this rank: equal batches use rank/world slices, unequal
 * ones the whole global micro-batch (see the file comment). */
void vkg_dp_data_config(const vkg_dp *d, vkg_data_config *dc);
/* This rank's rows of the next (or the g-th) global micro-batch: (b_k, T) each. */
vkg_status vkg_dp_data_next(vkg_dp *d, vkg_data_t *data, int T, int32_t *inputs, int32_t *targets);
vkg_status vkg_dp_data_read(vkg_dp *d, vkg_data_t *data, uint64_t g, int T, int32_t *inputs,
                            int32_t *targets);

/* Every rank gathers every fingerprint; the first rank whose fingerprint differs from rank 0's
 * fails the call on every rank with VKG_ERR_MISMATCH naming that rank, the field (names[i]) and
 * both values. */
vkg_status vkg_dp_check_match(vkg_dp *d, const vkg_dp_fingerprint *fp, const char *const *names,
                              int count);

/* Broadcast bytes from rank 0 (no-op alone). */
vkg_status vkg_dp_broadcast(vkg_dp *d, void *buf, size_t bytes);
/* Every rank's `bytes` of send, in rank order, into recv (world x bytes). */
vkg_status vkg_dp_allgather(vkg_dp *d, const void *send, size_t bytes, void *recv);
/* In-place SUM allreduce of n floats (no-op alone). */
vkg_status vkg_dp_allreduce_sum(vkg_dp *d, float *buf, size_t n);
/* The gradient: x (n floats, host) summed over ranks in place. */
vkg_status vkg_dp_allreduce_grads(vkg_dp *d, float *grads, size_t n);

#endif
