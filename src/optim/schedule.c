/* Learning-rate schedules: warmup then cosine/linear/constant (see schedule.h). Pure functions;
 * nothing here keeps state or allocates. */
#include "optim/schedule.h"

#include <math.h>

#include "base/error.h"

static const double PI = 3.14159265358979323846;

vkg_schedule_config vkg_schedule_default(void)
{
    vkg_schedule_config c;
    c.kind = VKG_SCHEDULE_COSINE;
    c.lr = 3e-4f;
    c.lr_min_frac = 0.0f;
    c.warmup = 0;
    c.total_steps = 1000;
    return c;
}

vkg_status vkg_schedule_validate(const vkg_schedule_config *cfg)
{
    VKG_CHECK(cfg, VKG_ERR_INVALID_ARG, "schedule: NULL config");
    VKG_CHECK(cfg->kind >= 0 && cfg->kind < VKG_SCHEDULE_NUM_KINDS, VKG_ERR_INVALID_ARG,
              "schedule: unknown kind %d (valid: cosine, linear, constant)", (int)cfg->kind);
    VKG_CHECK(isfinite(cfg->lr) && cfg->lr >= 0.0f, VKG_ERR_INVALID_ARG,
              "schedule: lr must be finite and >= 0, got %g", (double)cfg->lr);
    VKG_CHECK(cfg->lr_min_frac >= 0.0f && cfg->lr_min_frac <= 1.0f, VKG_ERR_INVALID_ARG,
              "schedule: lr_min_frac must be in [0, 1], got %g", (double)cfg->lr_min_frac);
    VKG_CHECK(cfg->warmup >= 0, VKG_ERR_INVALID_ARG, "schedule: warmup must be >= 0, got %d",
              cfg->warmup);
    VKG_CHECK(cfg->total_steps >= 1, VKG_ERR_INVALID_ARG,
              "schedule: total_steps must be >= 1, got %d", cfg->total_steps);
    return VKG_OK;
}

float vkg_schedule_lr(const vkg_schedule_config *cfg, long long step)
{
    double lr = cfg->lr;
    long long s = step < 0 ? 0 : step;
    if (s < cfg->warmup)
        return (float)(lr * (double)(s + 1) / (double)cfg->warmup);
    if (cfg->kind == VKG_SCHEDULE_CONSTANT)
        return cfg->lr;
    long long span = (long long)cfg->total_steps - 1 - cfg->warmup;
    double d = span <= 0 ? 0.0 : (double)(s - cfg->warmup) / (double)span;
    if (d > 1.0 || s >= cfg->total_steps)
        d = 1.0;
    double floor_lr = lr * (double)cfg->lr_min_frac;
    double coeff = cfg->kind == VKG_SCHEDULE_COSINE ? 0.5 * (1.0 + cos(PI * d)) : 1.0 - d;
    return (float)(floor_lr + coeff * (lr - floor_lr));
}

const char *vkg_schedule_kind_name(vkg_schedule_kind kind)
{
    switch (kind) {
    case VKG_SCHEDULE_COSINE:
        return "cosine";
    case VKG_SCHEDULE_LINEAR:
        return "linear";
    case VKG_SCHEDULE_CONSTANT:
        return "constant";
    default:
        return "?";
    }
}

float vkg_lr_scale_factor(vkg_lr_scale rule, long long total_batch, long long base_batch)
{
    if (rule == VKG_LR_SCALE_NONE || base_batch <= 0)
        return 1.0f;
    double r = (double)total_batch / (double)base_batch;
    return (float)(rule == VKG_LR_SCALE_SQRT ? sqrt(r) : r);
}
