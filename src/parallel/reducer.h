/* The gradient reducer (DESIGN.md section 6): everything about summing a rank's gradient over
 * its data-parallel group, chosen once at creation: the job's whole group for whole-model ranks,
 * or a pipeline stage's group (then the tied embedding's two copies are summed over the tie group
 * after it, tied.h); per bucket overlapped with the last micro-batch's backward pass (buckets.c,
 * tied.c) or in one reduction after it; the buckets copied by the device straight into the
 * collectives' buffer where it imports host memory (zero-copy) or packed by the host (copy path);
 * an allreduce, or a reduce-scatter over shards (ZeRO-1) that leaves only this rank's shard summed;
 * fp32 or bf16 (grad_bf16.h).
 *
 * The buckets' way to the collectives. The packed buckets live in one buffer from the
 * communicator (vkg_comm_buffer_alloc: this rank's part of the shared-memory segment when the
 * collectives run there, so that the peers read it in place). Zero-copy path: where the device
 * imports host memory (VK_EXT_external_memory_host) that buffer is imported, every bucket's
 * command list ends by copying its ranges straight to its packed place there, and the reduced
 * buckets are copied back by the device (vkg_buckets_create with a packed tensor). Copy path
 * (no extension, a failed import, or force_copy_path): the host packs each bucket from its view
 * of the gradients into the buffer and unpacks it after the reduction (vkg_buckets_read/_write).
 * Both paths reduce the same bits in the same order.
 *
 * bf16 exchange. A second collectives' buffer holds the gradient in bf16 at the same element
 * offsets; each reduction rounds its floats of the fp32 buffer into it, allreduces them as
 * VKG_COMM_BF16 (the transport sums in fp32 and rounds once) and widens the sum back, on the copy
 * path and the zero-copy path alike, so both paths still train bitwise alike. Sharded, every
 * element is rounded, reduce-scattered in bf16 and only this rank's shard widened back.
 *
 * One door into the collectives: every reduction, of a bucket or of the whole gradient, is one
 * call on the reducer's data-parallel group (transport's vkg_group_t): vkg_group_allreduce, or
 * vkg_group_reduce_scatter over the shards, in the exchange's dtype. Whole models reduce over the
 * job's world group (the communicator's own collectives), a pipeline stage over its stage's
 * group (a ring over its members in fp32; in bf16 each chunk summed in fp32 in rank order by its
 * owner and rounded once), in one reduction after the backward pass or per bucket while the
 * device runs the stage's last backward (a split of that slot's backward,
 * vkg_grad_reducer_last_backward), the tied embedding's sum over the tie group after its bucket.
 * With 2 replicas a stage's buckets' sums are bitwise the whole gradient's (a ring of two adds the
 * same two numbers); with more, bf16's rank-order sum still is, fp32's ring is not (its chunks fall
 * elsewhere in a bucket than in the whole).
 *
 * Not here: the loss, the norm and the update (strategy.c, zero.c); the schedule (pp_strategy.c).
 * Nothing here prints.
 */
#ifndef VKG_PARALLEL_REDUCER_H
#define VKG_PARALLEL_REDUCER_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "parallel/job.h"

typedef struct vkg_grad_reducer vkg_grad_reducer;

typedef struct vkg_grad_reducer_config {
    uint64_t bucket_bytes; /* buckets overlapped with the backward pass; 0: one reduction */
    vkg_comm_dtype dtype;  /* VKG_COMM_F32 or VKG_COMM_BF16 */
    int force_copy_path;   /* 1: the copy path even where zero-copy works */
    const size_t *shards;  /* (group size + 1) parameter bounds of every member's shard: a
                              reduce-scatter (ZeRO-1); NULL: an allreduce */
    int pipeline;          /* 1: a pipeline stage's gradient, over group then the tie group */
    vkg_group_t *group;    /* pipeline: the stage's data-parallel group (NULL when dp is 1) */
    int backward_slot;     /* pipeline with buckets: the slot of the stage's last backward */
} vkg_grad_reducer_config;

/* A reducer of model m's gradient over job's data-parallel group (the whole job), or with
 * c->pipeline over the stage's c->group and the tie group, as c says (c->shards copied). m, job
 * and c->group must outlive it; m must be destroyed before it (its split copies into the
 * reducer's imported buffer). Without a data-parallel group (a stage alone in its group) nothing
 * is summed over one and no buckets are made. Errors: VKG_ERR_NOMEM, VKG_ERR_INVALID_ARG for
 * shards without a group, and the communicator's buffer's and vkg_buckets_create's. */
vkg_status vkg_grad_reducer_create(vkg_job *job, vkg_model *m, const vkg_grad_reducer_config *c,
                                   vkg_grad_reducer **out);
/* NULL-safe; nulls *pr. */
void vkg_grad_reducer_destroy(vkg_grad_reducer **pr);

/* The last micro-batch of a step (inputs, targets: (rank batch, T)): forward and backward, with
 * the buckets reduced while the device runs the rest of the backward pass (nothing else without
 * buckets). */
vkg_status vkg_grad_reducer_last_micro(vkg_grad_reducer *r, const int32_t *inputs,
                                       const int32_t *targets, float *loss);
/* A pipeline stage's last backward (of cfg.backward_slot, whose DOUT is written) with the buckets
 * reduced while the device runs the rest of it; done(ctx) runs once the device has finished it
 * (DIN is readable), before the last bucket's reduction, and its error ends the call. */
vkg_status vkg_grad_reducer_last_backward(vkg_grad_reducer *r, vkg_status (*done)(void *ctx),
                                          void *ctx);
/* After every micro-batch: the gradient summed over the group (the whole of it after the
 * backward pass, without buckets); the step's gradient communication and the part of it not
 * overlapped, in ms. */
vkg_status vkg_grad_reducer_reduce(vkg_grad_reducer *r, double *comm_ms, double *exposed_ms);

/* Buckets (0 without), how they reach the collectives' buffer ("" without; see
 * vkg_strategy_bucket_path), and how many were reduced on the zero-copy path so far. */
int vkg_grad_reducer_bucket_count(const vkg_grad_reducer *r);
const char *vkg_grad_reducer_bucket_path(const vkg_grad_reducer *r);
uint64_t vkg_grad_reducer_zero_copy_buckets(const vkg_grad_reducer *r);
/* The collectives' fp32 buffer (the whole gradient's floats, host), free between steps. */
float *vkg_grad_reducer_host(vkg_grad_reducer *r);
/* How a reducer of c exchanges gradients, for start-up lines: "fp32" or "bf16 (...)". */
const char *vkg_grad_reducer_describe(const vkg_grad_reducer_config *c);

#endif
