/* GPT-2 on a Vulkan device: parameters, gradients, AdamW moments and activations in arenas, and
 * the whole step recorded once into command lists that are replayed every step.
 *
 * Memory plan (llm.c's layout): params, grads, m and v are each one contiguous tensor of
 * num_params floats in the 16-tensor table order of vkgpt/model.h; activations and their
 * gradients are per-layer arrays as in llm.c. Values that change per step (learning rate, Adam
 * step) live in a small device buffer, so nothing is re-recorded.
 * Not here: data loading, schedules, checkpoints (src/train), host-side initialisation.
 */
#ifndef VKG_MODEL_GPT2_H
#define VKG_MODEL_GPT2_H

#include <stddef.h>
#include <stdint.h>

#include "vk/vk.h"
#include "vkgpt/device.h"
#include "vkgpt/model.h"

typedef struct vkg_gpt2 vkg_gpt2;

typedef struct vkg_gpt2_opts {
    int B, T;         /* micro-batch shape; T <= max_seq_len */
    int accum_steps;  /* micro-batches per optimizer step (each loss scaled by 1/accum_steps) */
    float loss_scale; /* extra factor on d(loss) (data-parallel token weighting); 1 normally */
    float beta1, beta2, eps, weight_decay;
} vkg_gpt2_opts;

vkg_gpt2_opts vkg_gpt2_opts_default(void);

/* Allocate everything for (cfg, opts) on dev and record the command lists. Errors: invalid
 * config or shape (VKG_ERR_INVALID_ARG naming the field), VKG_ERR_NOMEM naming the arena.
 * dev must outlive the model. Parameters start as zeros: load them with vkg_gpt2_set_params. */
vkg_status vkg_gpt2_create(vkg_device_t *dev, const vkg_gpt2_config *cfg, const vkg_gpt2_opts *opts,
                           vkg_gpt2 **out);
void vkg_gpt2_destroy(vkg_gpt2 **pm);

const vkg_gpt2_config *vkg_gpt2_config_of(const vkg_gpt2 *m);
size_t vkg_gpt2_param_count(const vkg_gpt2 *m);
/* Bytes of device memory held by the model (all arenas). */
size_t vkg_gpt2_device_bytes(const vkg_gpt2 *m);

/* Copy all parameters (num_params floats, table order) to or from the device. */
vkg_status vkg_gpt2_set_params(vkg_gpt2 *m, const float *params);
vkg_status vkg_gpt2_get_params(vkg_gpt2 *m, float *params);
/* Gradients (same layout), and AdamW's first and second moments. */
vkg_status vkg_gpt2_get_grads(vkg_gpt2 *m, float *grads);
vkg_status vkg_gpt2_set_grads(vkg_gpt2 *m, const float *grads);
vkg_status vkg_gpt2_get_moments(vkg_gpt2 *m, float *mom1, float *mom2);
vkg_status vkg_gpt2_set_moments(vkg_gpt2 *m, const float *mom1, const float *mom2);

/* Set every gradient to zero (start of an optimizer step). */
vkg_status vkg_gpt2_zero_grad(vkg_gpt2 *m);
/* Forward, loss and backward on one micro-batch: inputs and targets (B,T) int32 in [0, V).
 * ACCUMULATES parameter gradients of loss_scale / accum_steps x the mean loss. *mean_loss (may
 * be NULL) receives this micro-batch's mean loss (unscaled). */
vkg_status vkg_gpt2_forward_backward(vkg_gpt2 *m, const int32_t *inputs, const int32_t *targets,
                                     float *mean_loss);
/* Forward only. With targets: *mean_loss gets the mean loss (evaluation). Without (NULL): the
 * logits stay readable with vkg_gpt2_logits_row (sampling). */
vkg_status vkg_gpt2_forward(vkg_gpt2 *m, const int32_t *inputs, const int32_t *targets,
                            float *mean_loss);
/* Logits (Vp floats) at batch row b, position t after vkg_gpt2_forward without targets. */
vkg_status vkg_gpt2_logits_row(vkg_gpt2 *m, int b, int t, float *row);
/* Per-position losses (B*T floats) of the last forward with targets. */
vkg_status vkg_gpt2_losses(vkg_gpt2 *m, float *losses);
/* One AdamW step with learning rate lr and 1-based step t over the accumulated gradients,
 * clipped to global norm grad_clip when > 0. *grad_norm (may be NULL) receives the global
 * gradient norm before clipping. */
vkg_status vkg_gpt2_update(vkg_gpt2 *m, float lr, uint32_t t, float grad_clip, float *grad_norm);
/* Gradient buckets for data parallelism (gpt2_buckets.c). The parameter gradients are grouped,
 * in the order the backward pass completes them (wte's classifier part, final layernorm, layers
 * L-1..0, wpe), into buckets of at least bucket_bytes (the last may be smaller), and the
 * forward-backward step is recorded a second time as one command list per bucket, each ending
 * once its bucket's gradients are final. In that recording the encoder's contribution to wte
 * (rows of the micro-batch's tokens only) is left out, so that wte can be reduced first: the
 * caller adds it, summing the rows of vkg_gpt2_encoded_grad_read per token in position order.
 * Replaces earlier buckets. */
vkg_status vkg_gpt2_set_buckets(vkg_gpt2 *m, size_t bucket_bytes);
int vkg_gpt2_bucket_count(const vkg_gpt2 *m);
/* Bucket k's gradients as float ranges of the gradient tensor: *ranges points at n pairs
 * (offset, count) owned by m. Returns n. */
int vkg_gpt2_bucket_ranges(const vkg_gpt2 *m, int k, const size_t (**ranges)[2]);
/* Floats in bucket k (the sum of its ranges' counts). */
size_t vkg_gpt2_bucket_floats(const vkg_gpt2 *m, int k);
/* Upload a micro-batch and submit the bucketed forward-backward without waiting (same effect as
 * vkg_gpt2_forward_backward, but for wte's embedding rows); then vkg_gpt2_bucket_wait(k) returns
 * once bucket k's gradients are final, while the device goes on with later buckets, and
 * vkg_gpt2_bucket_finish waits for all and reads the micro-batch's mean loss. */
vkg_status vkg_gpt2_forward_backward_submit(vkg_gpt2 *m, const int32_t *inputs,
                                            const int32_t *targets);
vkg_status vkg_gpt2_bucket_wait(vkg_gpt2 *m, int k);
vkg_status vkg_gpt2_bucket_finish(vkg_gpt2 *m, float *mean_loss);
/* After bucket_wait(k): bucket k's gradients, its ranges packed in order (bucket_floats(k)
 * floats), read without any device work (the device is still running later buckets). write
 * replaces them; vkg_gpt2_bucket_commit, after finish, makes every written bucket the device's
 * gradients (one copy on devices without unified memory, nothing otherwise). */
vkg_status vkg_gpt2_bucket_read(vkg_gpt2 *m, int k, float *dst);
vkg_status vkg_gpt2_bucket_write(vkg_gpt2 *m, int k, const float *src);
vkg_status vkg_gpt2_bucket_commit(vkg_gpt2 *m);
/* Wait for the whole submitted step without touching anything else of m: safe from another
 * thread while the submitting thread works through the buckets. */
vkg_status vkg_gpt2_bucket_idle_wait(vkg_gpt2 *m);
/* After bucket_finish: the gradient of the loss with respect to the encoder's output,
 * (B, T, C) floats: wte's embedding-row gradient of token x is the sum of the rows at the
 * positions holding x. */
vkg_status vkg_gpt2_encoded_grad_read(vkg_gpt2 *m, float *dst);
/* Per-dispatch GPU times of the last run of a command list (devices opened with profiling). */
typedef enum vkg_gpt2_list { VKG_GPT2_FWDBWD, VKG_GPT2_UPDATE } vkg_gpt2_list;
int vkg_gpt2_timings(vkg_gpt2 *m, vkg_gpt2_list which, const vkg_cmd_timing **timings);

#endif
