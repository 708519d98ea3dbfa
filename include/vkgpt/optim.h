/* The optimizer's public vocabulary: learning-rate schedules and the rules that scale the
 * learning rate with the batch. Plain enums, no Vulkan; the schedule itself is computed in
 * src/optim (schedule.h), the names are parsed by the CLI.
 */
#ifndef VKGPT_OPTIM_H
#define VKGPT_OPTIM_H

#ifdef __cplusplus
extern "C" {
#endif

/* Learning-rate schedules: linear warmup, then a decay to lr * lr_min_frac. */
typedef enum vkg_schedule_kind {
    VKG_SCHEDULE_COSINE = 0,   /* half cosine from lr down to lr * lr_min_frac */
    VKG_SCHEDULE_LINEAR = 1,   /* straight line from lr down to lr * lr_min_frac */
    VKG_SCHEDULE_CONSTANT = 2, /* lr after warmup, lr_min_frac ignored */
    VKG_SCHEDULE_NUM_KINDS
} vkg_schedule_kind;

/* Learning-rate scaling with the total batch: lr x (total_batch / base_batch), its square root,
 * or nothing. */
typedef enum vkg_lr_scale {
    VKG_LR_SCALE_NONE = 0,
    VKG_LR_SCALE_LINEAR = 1,
    VKG_LR_SCALE_SQRT = 2,
} vkg_lr_scale;

#ifdef __cplusplus
}
#endif
#endif
