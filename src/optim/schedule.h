/* Learning-rate schedules: linear warmup, then cosine, linear or constant decay to
 * a floor. A pure function of the step and a plain config struct; no state, no allocation, no I/O.
 * Parsing schedule names from strings is the CLI's job (vkg_schedule_kind_name gives the names).
 */
#ifndef VKG_OPTIM_SCHEDULE_H
#define VKG_OPTIM_SCHEDULE_H

#include "vkgpt/optim.h"
#include "vkgpt/status.h"

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

/* The factor lr_scale applies to the learning rate tuned for base_batch tokens when a step
 * holds total_batch tokens: total_batch / base_batch (linear), its square root (sqrt), or 1
 * (none, or base_batch <= 0). */
float vkg_lr_scale_factor(vkg_lr_scale rule, long long total_batch, long long base_batch);

#endif
