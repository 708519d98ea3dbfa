/* Learning-rate schedules for the trainer: linear warmup, then cosine, linear or constant decay to
 * a floor. A pure function of the step and a plain config struct; no state, no allocation, no I/O.
 * Parsing schedule names from strings is the CLI's job (vkg_schedule_kind_name gives the names).
 * Internal to vkgpt until the trainer's public API exists.
 */
#ifndef VKG_TRAIN_SCHEDULE_H
#define VKG_TRAIN_SCHEDULE_H

#include "vkgpt/status.h"

typedef enum vkg_schedule_kind {
    VKG_SCHEDULE_COSINE = 0,   /* half cosine from lr down to lr * lr_min_frac */
    VKG_SCHEDULE_LINEAR = 1,   /* straight line from lr down to lr * lr_min_frac */
    VKG_SCHEDULE_CONSTANT = 2, /* lr after warmup, lr_min_frac ignored */
    VKG_SCHEDULE_NUM_KINDS
} vkg_schedule_kind;

typedef struct vkg_schedule_config {
    vkg_schedule_kind kind;
    float lr;          /* peak learning rate, reached at the last warmup step */
    float lr_min_frac; /* floor = lr * lr_min_frac, reached at the last step (0..1) */
    int warmup;        /* warmup steps (0 = none) */
    int total_steps;   /* N: steps 0 .. N-1 */
} vkg_schedule_config;

/* Defaults: cosine, lr 3e-4, lr_min_frac 0, warmup 0, total_steps 1000. */
vkg_schedule_config vkg_schedule_default(void);

/* Check a config: kind in range, lr finite and >= 0, lr_min_frac in [0, 1], warmup >= 0,
 * total_steps >= 1. VKG_ERR_INVALID_ARG naming the field otherwise. */
vkg_status vkg_schedule_validate(const vkg_schedule_config *cfg);

/* The learning rate for step s (0-based) of a valid config.
 * Warmup (s < warmup): lr * (s + 1) / warmup, as llm.c.
 * After it, with d = (s - warmup) / (total_steps - 1 - warmup) clamped to [0, 1] (so the first
 * step after warmup is at d = 0 and the last step, total_steps - 1, at d = 1):
 *   cosine:   floor + (lr - floor) * 0.5 * (1 + cos(pi * d))
 *   linear:   floor + (lr - floor) * (1 - d)
 *   constant: lr
 * where floor = lr * lr_min_frac. When no step remains after warmup but the last one
 * (total_steps - 1 <= warmup), that step gets d = 0 (the peak), so a 1-step run trains at lr.
 * Steps past the end get the floor; negative steps are treated as step 0. Computed in double,
 * returned as float; the same inputs always give the same bits. */
float vkg_schedule_lr(const vkg_schedule_config *cfg, long long step);

/* The name of a kind ("cosine", "linear", "constant"), or "?" out of range. */
const char *vkg_schedule_kind_name(vkg_schedule_kind kind);

#endif
