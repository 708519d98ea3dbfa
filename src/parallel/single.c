/* The single-device strategy: one rank holds the whole model; nothing is communicated. */
#include "parallel/strategy_internal.h"

static vkg_status setup(vkg_strategy *s)
{
    (void)s;
    return VKG_OK;
}

static vkg_status share(vkg_strategy *s, float *params, float *m, float *v)
{
    (void)s, (void)params, (void)m, (void)v;
    return VKG_OK;
}

static vkg_status last_micro(vkg_strategy *s, float *loss)
{
    return vkg_gpt2_forward_backward(s->model, s->inputs, s->targets, loss);
}

static vkg_status reduce(vkg_strategy *s, double *loss, int *stop, vkg_strategy_step_out *out)
{
    (void)s, (void)loss, (void)stop, (void)out;
    return VKG_OK;
}

static vkg_status mean(vkg_strategy *s, double *value)
{
    (void)s, (void)value;
    return VKG_OK;
}

const vkg_strategy_vt vkg__strategy_single = {
    .name = "single",
    .setup = setup,
    .share = share,
    .last_micro = last_micro,
    .reduce = reduce,
    .mean = mean,
};
