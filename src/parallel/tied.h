/* The tied token embedding, the one home of its two schemes.
 *
 * The model's table says which embedding is tied (vkg_param_table.tied) and the
 * layouts where it lies (vkg_model_layout.tied: at a part's start); a model without one has
 * nothing here to do.
 *
 * Under data parallelism with overlapped buckets: the tied embedding's gradient is the
 * classifier's part (finished first, in the first bucket) plus the encoder's rows of the
 * micro-batch's tokens, which the split recording leaves out so that its bucket can be reduced
 * early. Every rank sums its encoder-output gradient per distinct token, the ranks exchange these
 * rows, and every rank adds all of them in rank order, so that all ranks stay bitwise equal.
 *
 * Under pipelines (Megatron's scheme): the first stage holds the tied embedding for the encoder,
 * the last a copy for the classifier; after each stage's group sum the two copies' gradients are
 * summed over the job's tie group, so both copies get the same update, and the global norm counts
 * it once (on the first stage).
 * Not here: the buckets (buckets.c), the rest of the reduction (reducer.c, pp_strategy.c).
 */
#ifndef VKG_PARALLEL_TIED_H
#define VKG_PARALLEL_TIED_H

#include <stdint.h>

#include "model/model.h"
#include "optim/adamw.h"
#include "parallel/job.h"

/* After vkg_model_split_finish(m): add every rank's embedding-row gradients of its last
 * micro-batch (inputs: the rank's (rank batch, T) tokens) to the tied embedding's gradient emb
 * (its rows x cols floats, host: the reduced classifier gradient), rows in token order, ranks in
 * rank order. Every rank calls it. */
vkg_status vkg_tied_add_rows(vkg_job *job, vkg_model *m, const int32_t *inputs, float *emb);

/* Pipelines: the two copies' gradients (at the start of grads, the host copy of this stage's
 * gradient) summed over the job's tie group (nothing on the stages between, which have none), of
 * the copy's floats within [first, end) alone (ZeRO-1: this rank's shard, cut at the same places
 * on both stages, shards.h; 0 and SIZE_MAX: all of it). */
vkg_status vkg_tied_pipe_sum(vkg_job *job, vkg_model *m, float *grads, size_t first, size_t end);
/* Pipelines: on the last stage of several, the optimizer's norm leaves out the tied copy (counted
 * once, on stage 0). */
vkg_status vkg_tied_count_once(vkg_job *job, vkg_model *m, vkg_adamw *opt);

#endif
