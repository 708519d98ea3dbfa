/* GPT-2 (or a part of it: a range of layers, vkgpt/model.h) on a Vulkan device: parameters,
 * gradients and activations in arenas, and every pass recorded once into command lists that are
 * replayed.
 *
 * Memory plan: the part's parameters and gradients are each one contiguous tensor in the part's
 * table order (vkg_model_part_layout; the whole model's is llm.c's); activations are per-layer
 * arrays as in llm.c, one set per activation slot (micro-batches in flight); the gradients of the
 * activations are one layer's worth shared by the layers and the slots (the backward pass visits
 * one layer at a time) plus two buffers for the gradient of the residual stream, used in turn.
 * Each arena is split into allocations no larger than the device allows (vkg_arena_place).
 * A part that is not the first takes its input activation (B, T, C) from a boundary the caller
 * writes; one that is not the last leaves its output there for the caller to read, and takes the
 * gradient of its output from a boundary the caller writes, leaving the gradient of its input in
 * another. Tokens go to the first part, targets to the last.
 * Not here: optimizers (src/optim), ranks and reductions (src/parallel), data, schedules and
 * checkpoints (src/train).
 */
#ifndef VKG_MODEL_MODEL_H
#define VKG_MODEL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "vk/vk.h"
#include "vkgpt/device.h"
#include "vkgpt/model.h"

typedef struct vkg_model vkg_model;

typedef struct vkg_model_opts {
    int B, T;            /* micro-batch shape; T <= max_seq_len */
    int accum_steps;     /* micro-batches per optimizer step (each loss scaled by 1/accum_steps) */
    float loss_scale;    /* extra factor on d(loss) (data-parallel token weighting); 1 normally */
    vkg_model_part part; /* layers and flags; last == 0: the whole model */
    int slots;           /* activation slots (micro-batches in flight), >= 1 */
    int recompute;       /* VKG_MODEL_RECOMPUTE_*: activations recomputed in the backward pass */
    int precision;       /* VKG_PRECISION_*: bf16 needs an even number of channels */
    /* The backward pass also as two passes (vkg_model_backward_input, vkg_model_backward_weight):
     * each slot keeps its layers' product output gradients (9 B*T*C floats a layer) between them.
     */
    int split_w;
    /* vkg_model_memory only: the largest allocation to plan for (0: no limit). vkg_model_create
     * uses its device's (vkg_device_info.max_allocation_bytes). */
    uint64_t max_allocation;
} vkg_model_opts;

enum {
    VKG_MODEL_RECOMPUTE_NONE = 0,
    VKG_MODEL_RECOMPUTE_GELU = 1 /* GELU outputs: one layer's, recomputed from fch (llm.c -r 1) */
};

/* B 4, T 64, one micro-batch per step, loss scale 1, the whole model, one slot. */
vkg_model_opts vkg_model_opts_default(void);

/* Device bytes a model part needs, by role (each 256-byte aligned, as the arenas are made). */
typedef struct vkg_model_memory_plan {
    size_t params, grads;
    size_t param_copy;        /* the bf16 copy of the weights (bf16 precision; else 0) */
    size_t slot, activations; /* one activation slot; all of them */
    size_t shared;            /* gradients of the activations and scratch (one set) */
    size_t total;             /* params + param_copy + grads + activations + shared */
    /* With the allocation limit: the bytes each arena allocates (blocks may end unused where a
     * tensor did not fit), their allocations, and the largest single tensor. */
    size_t allocated;       /* all arenas; >= total */
    int allocations;        /* all arenas */
    size_t largest_tensor;  /* bytes */
    const char *largest_of; /* its name */
} vkg_model_memory_plan;

/* The memory plan of (cfg, opts) without a device (what vkg_model_create allocates under the
 * limit opts->max_allocation). Errors as vkg_model_create's checks; VKG_ERR_NOMEM naming the
 * arena and the tensor's bytes when a tensor is larger than the limit. */
vkg_status vkg_model_memory(const vkg_model_config *cfg, const vkg_model_opts *opts,
                            vkg_model_memory_plan *out);

/* Allocate everything for (cfg, opts) on dev and record the command lists. Errors: invalid
 * config, part or shape (VKG_ERR_INVALID_ARG naming the field), VKG_ERR_NOMEM naming the arena.
 * dev must outlive the model. Parameters start as zeros: load them with vkg_model_set_params. */
vkg_status vkg_model_create(vkg_device_t *dev, const vkg_model_config *cfg,
                            const vkg_model_opts *opts, vkg_model **out);
void vkg_model_destroy(vkg_model **pm);

const vkg_model_config *vkg_model_config_of(const vkg_model *m);
const vkg_model_opts *vkg_model_opts_of(const vkg_model *m);
const vkg_model_layout *vkg_model_layout_of(const vkg_model *m);
/* The whole model's parameter table (names, shapes, decay: vkgpt/model.h). */
const vkg_param_table *vkg_model_table_of(const vkg_model *m);
vkg_device_t *vkg_model_device(const vkg_model *m);
/* Floats in the part's parameters (for the whole model: vkg_model_num_params). */
size_t vkg_model_param_count(const vkg_model *m);
/* Bytes of device memory held by the model (all arenas). */
size_t vkg_model_device_bytes(const vkg_model *m);
/* Bytes of the activation slots (forward activations and tokens of every slot; the gradients of
 * the activations and scratch are shared and not counted). */
size_t vkg_model_activation_bytes(const vkg_model *m);
/* Bytes of host-visible memory the model holds: the boundaries' and the gradients' host copies
 * (devices without unified memory). */
size_t vkg_model_host_bytes(const vkg_model *m);
/* The parameter and gradient tensors (param_count floats each), for an optimizer. */
vkg_tensor vkg_model_params_tensor(const vkg_model *m);
vkg_tensor vkg_model_grads_tensor(const vkg_model *m);

/* Copy the part's parameters (param_count floats, the part's layout) to or from the device. */
vkg_status vkg_model_set_params(vkg_model *m, const float *params);
vkg_status vkg_model_get_params(vkg_model *m, float *params);
/* Gradients (same layout). */
vkg_status vkg_model_get_grads(vkg_model *m, float *grads);
vkg_status vkg_model_set_grads(vkg_model *m, const float *grads);

/* Set every gradient to zero (start of an optimizer step). */
vkg_status vkg_model_zero_grad(vkg_model *m);
/* Dynamic loss scaling: from the next forward_backward on, d(loss) is also multiplied by s (read
 * on the device: nothing is re-recorded), so every gradient carries s; 1 at creation. The
 * evaluation's losses are not scaled. VKG_ERR_INVALID_ARG unless s is positive and finite. */
vkg_status vkg_model_set_grad_scale(vkg_model *m, float s);
/* The loss scale set (1 at creation). */
float vkg_model_grad_scale(const vkg_model *m);
/* Whole model: forward, loss and backward on one micro-batch (slot 0): inputs and targets (B,T)
 * int32 in [0, V). ACCUMULATES parameter gradients of loss_scale / accum_steps x the mean loss.
 * *mean_loss (may be NULL) receives this micro-batch's mean loss (unscaled). */
vkg_status vkg_model_forward_backward(vkg_model *m, const int32_t *inputs, const int32_t *targets,
                                      float *mean_loss);
/* Forward only (slot 0). With targets (last part): *mean_loss gets the mean loss (evaluation).
 * Without (NULL): the logits stay readable with vkg_model_logits_row (sampling). inputs: the
 * first part's tokens; NULL for other parts (their input boundary holds the input). */
vkg_status vkg_model_forward(vkg_model *m, const int32_t *inputs, const int32_t *targets,
                             float *mean_loss);
/* Logits (Vp floats) at batch row b, position t after vkg_model_forward without targets. */
vkg_status vkg_model_logits_row(vkg_model *m, int b, int t, float *row);
/* Per-position losses (B*T floats) of the last forward with targets (slot 0). */
vkg_status vkg_model_losses(vkg_model *m, float *losses);

/* ---- parts: one micro-batch per slot ----
 * Training forward of slot s: inputs (first part; NULL otherwise) and targets (last part; NULL
 * otherwise). The last part computes the loss (*mean_loss, may be NULL) and the gradient of its
 * logits; the others leave their output in the OUT boundary of slot s. */
vkg_status vkg_model_forward_train(vkg_model *m, int slot, const int32_t *inputs,
                                   const int32_t *targets, float *mean_loss);
/* Backward of slot s (after its training forward): ACCUMULATES parameter gradients. A part that
 * is not the last reads the gradient of its output from the DOUT boundary (written by the caller
 * since); one that is not the first leaves the gradient of its input in DIN. */
vkg_status vkg_model_backward(vkg_model *m, int slot);
/* The same backward as two passes (parts created with opts.split_w), for schedules that run the
 * weight gradients later (ZB-H1): the input pass computes every gradient but the matrix
 * products' weight and bias gradients (the layernorms' and the encoder's included) and leaves DIN
 * as vkg_model_backward does, keeping the products' output gradients in the slot; the weight pass
 * adds the products' weight and bias gradients from what the input pass kept and the slot's
 * activations. Both ACCUMULATE. Input then weight adds, tensor by tensor, what vkg_model_backward
 * adds, bit for bit. The slot's activations stay in use until its weight pass has run.
 * Errors: VKG_ERR_STATE without split_w. */
vkg_status vkg_model_backward_input(vkg_model *m, int slot);
vkg_status vkg_model_backward_weight(vkg_model *m, int slot);

typedef enum vkg_model_boundary {
    VKG_MODEL_IN,   /* input activation (B,T,C) of slot s: parts without EMBED; written */
    VKG_MODEL_OUT,  /* output activation (B,T,C) of slot s: parts without HEAD; read */
    VKG_MODEL_DOUT, /* gradient of the output (B,T,C): parts without HEAD; written */
    VKG_MODEL_DIN   /* gradient of the input (B,T,C): parts without EMBED; read */
} vkg_model_boundary;
/* Bytes of a boundary tensor: B*T*C values, fp32 (4 bytes) for the gradients DOUT and DIN and
 * for the activations IN and OUT in fp32 precision, bf16 (2 bytes, as the model stores them)
 * for IN and OUT in bf16 precision. The same on every part of one model. */
size_t vkg_model_boundary_bytes(const vkg_model *m, vkg_model_boundary which);
/* Copy a boundary tensor (vkg_model_boundary_bytes) from or to the host (slot: for IN and OUT),
 * with no device work: on unified memory through the arena's mapping; elsewhere through a
 * host-visible copy that the slot's lists fill (OUT, DIN: at their end) or read (IN, DOUT: at
 * their start). The bytes are the tensor's as stored: a bf16 boundary goes as bf16, unchanged.
 * Errors: VKG_ERR_INVALID_ARG when the part has no such boundary or the slot is out of range. */
vkg_status vkg_model_boundary_read(vkg_model *m, vkg_model_boundary which, int slot, void *dst);
vkg_status vkg_model_boundary_write(vkg_model *m, vkg_model_boundary which, int slot,
                                    const void *src);

/* ---- gradient units and split recordings (for reductions overlapped with the backward) ----
 * The gradients are completed in units, in this order: (last part) the classifier (the tied
 * embedding's classifier part, or the untied head), then the final norm; the layers from last to
 * first; (first part) the embeddings the head does not read (wpe; wte where untied or held by a
 * first part alone), where there are any. */
#define VKG_MODEL_MAX_UNIT_RANGES 16
int vkg_model_unit_count(const vkg_model *m);
/* Unit u's gradients as float ranges (offset, count) of the gradient tensor. Returns n. */
int vkg_model_unit_ranges(const vkg_model *m, int u, size_t ranges[VKG_MODEL_MAX_UNIT_RANGES][2]);
/* Where the lists of a split leave their gradients for a caller that packs them itself: list k
 * ends by copying ranges [first[k], first[k + 1]) ((offset, count) in floats of the gradient
 * tensor) into dst, each range after the one before from list 0's first on, and split_commit
 * copies every range back. dst is host memory the caller reads and writes in place between
 * split_wait(k) and split_commit (vkg_arena_import_host); it must outlive the split. The ranges
 * of list k must be gradients its units complete; they are not kept past vkg_model_split. */
typedef struct vkg_model_pack {
    vkg_tensor dst;
    const int *first;          /* (n + 1), first[0] = 0 */
    const size_t (*ranges)[2]; /* (first[n]) */
} vkg_model_pack;
/* Record the training forward-backward of slot 0 a second time, cut into n command lists: list k
 * ends once units (last[k-1], last[k]] are complete (last strictly increasing, last[n-1] the
 * final unit). In this recording the encoder's contribution to wte (rows of the micro-batch's
 * tokens only) is left out, so that wte can be finished early: the caller adds it, summing the
 * rows of vkg_model_encoded_grad_read per token in position order. pack: NULL for the host's
 * view (vkg_model_grads_host), else where each list copies its ranges. Replaces an earlier split.
 * Errors: VKG_ERR_INVALID_ARG (bad cuts, a pack's ranges outside the gradients or past dst),
 * VKG_ERR_NOMEM, and recording errors. */
vkg_status vkg_model_split(vkg_model *m, const int *last, int n, const vkg_model_pack *pack);
/* The same for the backward of slot `slot` alone, on any part (a pipeline stage's last
 * micro-batch): list 0 begins by reading DOUT and the last list ends by leaving DIN, as
 * vkg_model_backward's list does; the encoder's wte rows are recorded where the part has no head.
 * split_submit then uploads nothing (inputs and targets NULL) and split_finish reads no loss. */
vkg_status vkg_model_split_backward(vkg_model *m, int slot, const int *last, int n,
                                    const vkg_model_pack *pack);
int vkg_model_split_count(const vkg_model *m);
/* Upload a micro-batch and submit every list of the split without waiting; split_wait(k) returns
 * once list k has completed (its units' gradients are final and readable through
 * vkg_model_grads_host, or its ranges in the pack's buffer), while the device goes on; split_finish
 * waits for all and reads the mean loss (may be NULL). */
vkg_status vkg_model_split_submit(vkg_model *m, const int32_t *inputs, const int32_t *targets);
vkg_status vkg_model_split_wait(vkg_model *m, int k);
vkg_status vkg_model_split_finish(vkg_model *m, float *mean_loss);
/* Wait for the whole submitted split without touching anything else of m: safe from another
 * thread while the submitting thread works through the lists. */
vkg_status vkg_model_split_idle_wait(vkg_model *m);
/* The host's view of the gradients (param_count floats) for the units of completed split lists:
 * the gradient arena's mapping on unified memory, else a host copy each list fills with its
 * units; NULL for a split with a pack. After split_finish, writes to it (or to the pack's
 * buffer) become the device's gradients with split_commit (one copy of every unit or range on
 * devices without unified memory and with a pack, nothing otherwise). */
float *vkg_model_grads_host(vkg_model *m);
vkg_status vkg_model_split_commit(vkg_model *m);
/* After split_finish: the gradient of the loss with respect to the encoder's output, (B, T, C)
 * floats: wte's embedding-row gradient of token x is the sum of the rows at the positions
 * holding x. */
vkg_status vkg_model_encoded_grad_read(vkg_model *m, float *dst);

/* Per-dispatch GPU times of the last run of the forward-backward list (devices opened with
 * profiling). */
int vkg_model_timings(vkg_model *m, const vkg_cmd_timing **timings);
/* Dispatches and pipeline barriers of one training forward-backward list (slot 0). */
void vkg_model_list_counts(const vkg_model *m, int *dispatches, int *barriers);
/* Dispatches of kernel k in that list (tests: which kernels a step runs). */
int vkg_model_list_kernel_count(const vkg_model *m, vkg_kernel_id k);

#endif
