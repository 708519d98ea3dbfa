/* Internal to src/parallel: the whole-model calls of the strategy interface, the defaults a
 * strategy's table falls back to (NULL entries), and the pieces of them that strategies which
 * replace a call compose their own from (zero.c's and pp_strategy.c's build). */
#ifndef VKG_PARALLEL_WHOLE_H
#define VKG_PARALLEL_WHOLE_H

#include "parallel/strategy_internal.h"

/* Create this rank's model part (part, with slots activation slots and, with split_w, the
 * backward's two passes), its AdamW (over the part's parameters [first, first + count) only when
 * count > 0: a ZeRO-1 shard) and the token buffers. */
vkg_status vkg__whole_build_part(vkg_strategy *s, vkg_model_part part, int slots, int split_w,
                                 size_t first, size_t count);
/* The whole model, checked to fit the device first. */
vkg_status vkg__whole_build(vkg_strategy *s);
/* The whole model's starting point (and moments, when m is not NULL) from rank 0 to every rank
 * of the job (nothing alone). */
vkg_status vkg__whole_share(vkg_strategy *s, float *params, float *m, float *v);
/* A step's micro-batches on the whole model: gradients accumulated and, with a reducer, summed
 * over the data-parallel group (overlapped with the last backward pass where it has buckets);
 * *part the step's mean loss times this rank's token share (the strategy's passes, step.c). */
vkg_status vkg__whole_passes(vkg_strategy *s, vkg_data_t *data, const vkg_strategy_step_in *in,
                             double *part, vkg_strategy_step_out *out);
vkg_status vkg__whole_eval(vkg_strategy *s, vkg_data_t *data, int n, float *loss);
vkg_status vkg__whole_logits(vkg_strategy *s, const int32_t *inputs, int b, int t, float *row);
vkg_status vkg__whole_gather(vkg_strategy *s, float *params, float *m, float *v);

#endif
