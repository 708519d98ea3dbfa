/* AdamW on a device over one model part's parameters (DESIGN.md section 4): the two moments in an
 * arena of their own, the gradient norm and the update, each recorded once and replayed.
 *
 * The step is split in two so that the norm can be reduced before the update: grad_sumsq runs
 * the sum of squares of the gradients and returns it to the host, where a strategy may add the
 * other stages' (or shards') sums; update takes the global sum of squares back, clips by the
 * global norm and applies AdamW (llm.c's formula, decoupled weight decay on the segments that
 * decay). Not here: which tensors a model has (the caller's segments), learning-rate schedules
 * (schedule.h), reductions across ranks (src/parallel).
 *
 * Sharding (ZeRO-1): an optimizer whose segments cover a slice of the parameters holds moments
 * for that slice only, and its norm may be sharded along the partial sums the sum of squares is
 * made of (vkg_adamw_norm_partition): each shard computes its own partials, the caller gathers
 * every shard's and adds them with vkg_adamw_sum_partials, bit for bit the unsharded sum.
 */
#ifndef VKG_OPTIM_ADAMW_H
#define VKG_OPTIM_ADAMW_H

#include <stddef.h>
#include <stdint.h>

#include "vk/vk.h"

typedef struct vkg_adamw vkg_adamw;

typedef struct vkg_adamw_config {
    float beta1, beta2, eps; /* beta1, beta2 in [0, 1), eps > 0 */
    float weight_decay;      /* >= 0, applied to segments with decays set */
} vkg_adamw_config;

/* beta1 0.9, beta2 0.95, eps 1e-8, weight decay 0. */
vkg_adamw_config vkg_adamw_config_default(void);

/* A range of the parameters (and the same range of the gradients), in floats, updated as one
 * dispatch group member with its own weight-decay flag. */
typedef struct vkg_adamw_segment {
    size_t offset, count;
    int decays;
} vkg_adamw_segment;

/* An optimizer for params and grads (n floats each, same layout), cut into nsegs segments that
 * must lie inside them (in any order; they need not cover everything). Moments cover the span
 * from the lowest segment to the end of the highest (vkg_adamw_moment_range) and start at zero.
 * The tensors must outlive the optimizer. Errors: VKG_ERR_INVALID_ARG naming the bad field or
 * segment, VKG_ERR_NOMEM naming the moment arena. */
vkg_status vkg_adamw_create(vkg_device_t *dev, const vkg_adamw_config *cfg, vkg_tensor params,
                            vkg_tensor grads, size_t n, const vkg_adamw_segment *segs, int nsegs,
                            vkg_adamw **out);
void vkg_adamw_destroy(vkg_adamw **po);

/* Count only gradients [from, n) in the norm (a copy of a tensor another optimizer also holds,
 * such as a pipeline's second wte, must be counted once in the global norm). Default 0. Before
 * any vkg_adamw_norm_shard (VKG_ERR_STATE after). */
vkg_status vkg_adamw_norm_from(vkg_adamw *o, size_t from);
/* The partial sums of the norm of n gradients (vkg_op_sumsq's): their number P, and their
 * gradient ranges in bounds (P + 1 entries, relative to the norm's start) when not NULL. The same
 * on every device and tuning, so ranks on different devices shard a norm alike. */
size_t vkg_adamw_norm_partition(size_t n, size_t *bounds);
/* Shard the norm: this optimizer computes only partial sums [first, first + count) of its norm's
 * partition (VKG_ERR_INVALID_ARG outside it; count may be 0: then it computes none). grad_sumsq is
 * then replaced by grad_partials (this shard's count partials, computed on the device from the
 * gradients) and, once the caller has gathered every shard's in order, sum_partials (all
 * vkg_adamw_norm_parts of them, added on the device exactly as the unsharded norm adds them: the
 * same sum of squares, bitwise). */
vkg_status vkg_adamw_norm_shard(vkg_adamw *o, size_t first, size_t count);
size_t vkg_adamw_norm_parts(const vkg_adamw *o);
vkg_status vkg_adamw_grad_partials(vkg_adamw *o, float *partials);
vkg_status vkg_adamw_sum_partials(vkg_adamw *o, const float *partials, float *sumsq);
/* The sum of squares of the n gradients (from vkg_adamw_norm_from on), deterministic: same
 * gradients, same bits. */
vkg_status vkg_adamw_grad_sumsq(vkg_adamw *o, float *sumsq);
/* One AdamW step with learning rate lr and 1-based step t, on gradients that carry a loss scale
 * grad_scale (positive; 1: none): they are divided by it, then scaled by grad_clip / their norm
 * when grad_clip > 0 and that norm exceeds it. sumsq is the global sum of squares of the scaled
 * gradients (this optimizer's own from grad_sumsq, or one summed over ranks or stages). With a
 * power-of-two grad_scale the update is bitwise that of the unscaled gradients (while neither
 * leaves fp32's normal range). A sumsq that is not finite (NaN or infinite) skips the step on the
 * device: parameters and moments stay bitwise as they were (callers that know it may also not
 * call this at all). */
vkg_status vkg_adamw_update(vkg_adamw *o, float lr, uint32_t t, float grad_clip, float sumsq,
                            float grad_scale);

/* The parameters the moments cover: [*first, *first + *count). */
void vkg_adamw_moment_range(const vkg_adamw *o, size_t *first, size_t *count);
/* AdamW's first and second moments (count floats each for the range above, the parameters'
 * layout). */
vkg_status vkg_adamw_get_moments(vkg_adamw *o, float *m, float *v);
vkg_status vkg_adamw_set_moments(vkg_adamw *o, const float *m, const float *v);

/* Device bytes an optimizer of n parameters needs (its moments and its norm's scratch), without
 * a device. */
size_t vkg_adamw_memory(size_t n);
/* Device bytes an optimizer holding `moments` floats of each moment, whose norm has `partials`
 * partial sums, allocates: exactly vkg_adamw_device_bytes. */
size_t vkg_adamw_memory_of(size_t moments, size_t partials);
/* Bytes of device memory the optimizer holds. */
size_t vkg_adamw_device_bytes(const vkg_adamw *o);
/* Per-dispatch GPU times of the last norm and update (devices opened with profiling): the norm's
 * dispatches (which == 0) or the update's (which == 1). */
int vkg_adamw_timings(vkg_adamw *o, int which, const vkg_cmd_timing **timings);
/* Dispatches and pipeline barriers of the norm and update lists together. */
void vkg_adamw_list_counts(const vkg_adamw *o, int *dispatches, int *barriers);

#endif
