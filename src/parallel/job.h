/* The job (DESIGN.md section 6): one vkg_job per rank wraps the rank's communicator, the rank
 * layout and everything the strategies need to train exactly like one device on the union of the
 * ranks' data.
 *
 * Rank layout. A job of `world` ranks with `pp` pipeline stages is pp data-parallel groups of
 * dp = world / pp ranks each, stage by stage: rank = stage x dp + replica, so that a stage's
 * data-parallel group sits on neighbouring ranks. vkg_job_layout is the one place that computes
 * it; everything else asks the job (or the layout) for stage, replica, dp and the rank of a
 * (stage, replica) pair. Without a pipeline (pp = 1) the job is one data-parallel group.
 *
 * Token weighting. Rank k of a data-parallel group trains on micro-batches of b_k rows of T
 * tokens; a global micro-batch has G = sum b_k rows. Rank k's d(loss) is scaled by b_k / G
 * (vkg_model_opts.loss_scale), so a plain SUM allreduce of the group's gradients is the gradient
 * of the mean loss over all G*T tokens, and the logged loss is the same token-weighted mean.
 * Ranks with equal micro-batches read their slices with the data loader's rank/world split;
 * unequal ones read the whole global micro-batch (G rows) and keep their own rows
 * [off_k, off_k + b_k), so the union is the same.
 *
 * Groups. Every collective of the strategies runs on a group (transport's vkg_group_t). The job
 * creates, over its communicator: the whole job (its world, whose collectives are the
 * communicator's own), which is also the data-parallel group without a pipeline; and with a
 * pipeline, for this rank: its stage's data-parallel group (dp > 1), its replica's pipeline (the
 * S stages in order) and the tie {first stage, last stage} of that pipeline (first and last
 * stage only).
 *
 * Not here: what is summed and how (the strategies: strategy.c, whole.c, reducer.c, zero.c,
 * pp_strategy.c), the model. Nothing here prints.
 */
#ifndef VKG_PARALLEL_JOB_H
#define VKG_PARALLEL_JOB_H

#include <stddef.h>
#include <stdint.h>

#include "vkgpt/comm.h"
#include "vkgpt/data.h"
#include "vkgpt/model.h"
#include "vkgpt/status.h"

#define VKG_JOB_MAX_RANKS 1024

/* Where a rank sits in a job: stage and replica (its place in the stage's data-parallel group)
 * of pp stages of dp ranks. */
typedef struct vkg_job_layout {
    int world, rank; /* the job */
    int pp, dp;      /* pipeline stages, data-parallel ranks per stage (world = pp x dp) */
    int stage, replica;
} vkg_job_layout;

/* The layout of rank `rank` in a job of `world` ranks with pp stages (pp <= 1: none), without
 * joining it. Errors: VKG_ERR_INVALID_ARG naming --pp when it does not divide the ranks, or the
 * rank out of range. */
vkg_status vkg_job_layout_of(int world, int rank, int pp, vkg_job_layout *out);
/* The job rank of (stage, replica) in layout l: stage x dp + replica. */
int vkg_job_rank_of(const vkg_job_layout *l, int stage, int replica);

typedef struct vkg_job vkg_job;

/* What every rank must agree on; compared field by field against rank 0's. */
typedef struct vkg_job_fingerprint {
    uint64_t v[48];
} vkg_job_fingerprint;

/* Join the job described by comm (vkg_comm_create; world_size 1 makes a communicator-less
 * vkg_job). pp: pipeline stages (<= 1: none); the job's ranks are then pp data-parallel groups
 * laid out as vkg_job_layout_of says, everything about batches below is per group, and the
 * pipeline's groups are created (see the file comment). rank_batch: dp micro-batch sizes (rows),
 * or NULL for `batch` on every rank.
 * Errors: VKG_ERR_INVALID_ARG naming the flag (--pp not dividing the ranks, a bad list, sizes
 * <= 0), and vkg_comm_create's and vkg_group_create's. */
vkg_status vkg_job_create(const vkg_comm_config *comm, int pp, int batch, const int *rank_batch,
                          int rank_batch_count, vkg_job **out);
/* This rank gives up (why: what failed, not NULL): the peers are told (vkg_comm_abort) so that
 * they fail at once, naming this rank and the reason; afterwards only vkg_job_destroy. Nothing
 * alone or with why NULL. */
void vkg_job_abort(vkg_job *d, const char *why);
/* Leave the job. With a failure (this rank gave up: why, not NULL) the peers are told first
 * (vkg_comm_abort with that text) so they fail at once, naming this rank and the reason, instead
 * of waiting for the deadline or meeting this rank's final barrier in another collective. */
void vkg_job_destroy(vkg_job **pd, const char *failure);

/* This rank's layout (stage, replica, pp, dp: see vkg_job_layout). */
const vkg_job_layout *vkg_job_layout_get(const vkg_job *d);
int vkg_job_rank(const vkg_job *d);
int vkg_job_world(const vkg_job *d);
/* This rank's place in its data-parallel group, the group's size, the pipeline stages, this
 * rank's stage, and the job's communicator (NULL alone). */
int vkg_job_replica(const vkg_job *d);
int vkg_job_dp(const vkg_job *d);
int vkg_job_pp(const vkg_job *d);
int vkg_job_stage(const vkg_job *d);
vkg_comm_t *vkg_job_comm(vkg_job *d);
/* The job's groups, owned by it (NULL alone, and where this rank has none): this rank's
 * data-parallel group (dp > 1: the stage's under a pipeline, the whole job without one), the
 * whole job (vkg_group_world: the communicator's own collectives), and under a pipeline the
 * replica's pipeline of pp stages and the tie of its first and last stage (those two only). */
vkg_group_t *vkg_job_dp_group(vkg_job *d);
vkg_group_t *vkg_job_world_group(vkg_job *d);
vkg_group_t *vkg_job_pipe_group(vkg_job *d);
vkg_group_t *vkg_job_tie_group(vkg_job *d);
/* This rank's micro-batch rows, the global micro-batch rows G, and this rank's b_k / G. */
int vkg_job_rank_batch(const vkg_job *d);
int vkg_job_global_batch(const vkg_job *d);
float vkg_job_loss_scale(const vkg_job *d);
/* Rank k's micro-batch rows (k in [0, dp)). */
int vkg_job_batch_of(const vkg_job *d, int k);
/* The largest micro-batch of any rank (rows). */
int vkg_job_max_rank_batch(const vkg_job *d);
/* The comma list of rank batches ("4,2,2") for logs (shortened beyond about 40 ranks). */
const char *vkg_job_batch_list(const vkg_job *d);
/* A hash of every rank's micro-batch size, in rank order (for the agreement check). */
uint64_t vkg_job_batch_hash(const vkg_job *d);

/* Re-balancing (--rank-batch auto). vkg_job_balance_on, once, before the data loader is
 * configured: every rank then reads whole global micro-batches and keeps its rows (as unequal
 * batches do), so a later split reads the same rows from the same loader. vkg_job_set_batches:
 * the new split, dp sizes in rank order, each > 0, their sum the global micro-batch (which never
 * changes); VKG_ERR_INVALID_ARG / VKG_ERR_STATE otherwise (or when not balanced). */
void vkg_job_balance_on(vkg_job *d);
int vkg_job_balanced(const vkg_job *d);
vkg_status vkg_job_set_batches(vkg_job *d, const int *batches);
/* The split of G rows over n ranks that finishes soonest when rank k handles speed[k] rows per
 * unit of time: out[k] >= 1, out[k] <= cap[k] (the largest micro-batch its memory plan fits),
 * sum G. Each row past the first of every rank goes, one at a time, to the rank that would then
 * finish soonest, ties to the lower rank: a pure function of its arguments, so every rank that
 * computes it from the same gathered figures gets the same split. Errors: VKG_ERR_INVALID_ARG
 * (G < n, a speed not positive), VKG_ERR_NOMEM naming the rank or the rows when the caps cannot
 * hold G. */
vkg_status vkg_job_balance(int G, int n, const double *speed, const int *cap, int *out);

/* Configure a data loader config for this rank: equal batches use rank/world slices, unequal
 * ones the whole global micro-batch (see the file comment). */
void vkg_job_data_config(const vkg_job *d, vkg_data_config *dc);
/* This rank's rows of the next (or the g-th) global micro-batch: (b_k, T) each. */
vkg_status vkg_job_data_next(vkg_job *d, vkg_data_t *data, int T, int32_t *inputs,
                             int32_t *targets);
vkg_status vkg_job_data_read(vkg_job *d, vkg_data_t *data, uint64_t g, int T, int32_t *inputs,
                             int32_t *targets);

/* Every rank gathers every fingerprint; the first rank whose fingerprint differs from rank 0's
 * fails the call on every rank with VKG_ERR_MISMATCH naming that rank, the field (names[i]) and
 * both values. */
vkg_status vkg_job_check_match(vkg_job *d, const vkg_job_fingerprint *fp, const char *const *names,
                               int count);

/* Broadcast bytes from rank 0 (no-op alone). */
vkg_status vkg_job_broadcast(vkg_job *d, void *buf, size_t bytes);
/* Every rank's `bytes` of send, in rank order, into recv (world x bytes). */
vkg_status vkg_job_allgather(vkg_job *d, const void *send, size_t bytes, void *recv);
/* In-place SUM allreduce of n floats over the whole job (no-op alone). */
vkg_status vkg_job_allreduce_sum(vkg_job *d, float *buf, size_t n);

/* A background exchange: fn(arg) runs on a thread of its own beside this rank's work (DiLoCo's
 * streamed pieces), using the job's groups' collectives. The communicator serves one thread at a
 * time, so every later call of the job's that communicates (the collectives above,
 * vkg_job_check_match, vkg_job_abort, vkg_job_destroy, the next vkg_job_background) first waits
 * for it, and its failure, with its message, is that call's. *ran: 1 when no thread could start
 * and fn ran within this call (its status is then this call's), else 0. */
vkg_status vkg_job_background(vkg_job *d, vkg_status (*fn)(void *arg), void *arg, int *ran);
/* Wait for the background exchange (VKG_OK without one); *waited_ms (may be NULL): how long. */
vkg_status vkg_job_settle(vkg_job *d, double *waited_ms);

#endif
