/* The whole-model calls of the strategy interface (see whole.h): one device, or a data-parallel
 * group of whole models whose gradients the strategy's reducer sums (reducer.h). The loss and the
 * evaluation loss are token-weighted means over the group, the stop flag the OR of its ranks'
 * requests. Not here: joining the job and dispatching to a strategy's table (strategy.c), split
 * models (pp_strategy.c), sharded optimizers (zero.c). Nothing here prints. */
#include "parallel/whole.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "parallel/pp_schedule.h"

vkg_status vkg_strategy_create_adamw(const vkg_adamw_config *cfg, vkg_model *m, vkg_adamw **out)
{
    const vkg_model_layout *lo = vkg_model_layout_of(m);
    const vkg_param_table *t = vkg_model_table_of(m);
    vkg_adamw_segment segs[VKG_MAX_PARAM_TENSORS];
    int n = 0;
    for (int i = 0; i < lo->n; i++)
        if (lo->count[i])
            segs[n++] = (vkg_adamw_segment){
                .offset = lo->part_offset[i], .count = lo->count[i], .decays = t->t[i].decays};
    return vkg_adamw_create(vkg_model_device(m), cfg, vkg_model_params_tensor(m),
                            vkg_model_grads_tensor(m), vkg_model_param_count(m), segs, n, out);
}

/* AdamW over the model's parameters [first, first + count): every tensor's part in that range. */
static vkg_status create_adamw_range(const vkg_adamw_config *cfg, vkg_model *m, size_t first,
                                     size_t count, vkg_adamw **out)
{
    const vkg_model_layout *lo = vkg_model_layout_of(m);
    const vkg_param_table *t = vkg_model_table_of(m);
    vkg_adamw_segment segs[VKG_MAX_PARAM_TENSORS];
    int n = 0;
    for (int i = 0; i < lo->n; i++) {
        size_t a = lo->part_offset[i], b = a + lo->count[i];
        a = a > first ? a : first;
        b = b < first + count ? b : first + count;
        if (a < b)
            segs[n++] = (vkg_adamw_segment){.offset = a, .count = b - a, .decays = t->t[i].decays};
    }
    return vkg_adamw_create(vkg_model_device(m), cfg, vkg_model_params_tensor(m),
                            vkg_model_grads_tensor(m), vkg_model_param_count(m), segs, n, out);
}

vkg_status vkg__whole_build_part(vkg_strategy *s, vkg_model_part part, int slots, int split_w,
                                 size_t first, size_t count)
{
    const vkg_strategy_model *mc = &s->mc;
    vkg_model_opts o = vkg_model_opts_default();
    o.B = vkg_job_rank_batch(s->job), o.T = mc->T, o.accum_steps = mc->accum_steps;
    o.loss_scale = s->own_grads ? 1.0f : vkg_job_loss_scale(s->job);
    o.part = part;
    o.slots = slots;
    o.split_w = split_w;
    o.recompute = mc->recompute;
    o.precision = mc->precision;
    VKG_TRY(vkg_model_create(mc->dev, &mc->cfg, &o, &s->model));
    if (count)
        VKG_TRY(create_adamw_range(&mc->adamw, s->model, first, count, &s->opt));
    else
        VKG_TRY(vkg_strategy_create_adamw(&mc->adamw, s->model, &s->opt));
    size_t bt = (size_t)o.B * (size_t)o.T;
    s->inputs = malloc(bt * sizeof *s->inputs);
    s->targets = malloc(bt * sizeof *s->targets);
    VKG_CHECK(s->inputs && s->targets, VKG_ERR_NOMEM, "no memory for batches");
    return VKG_OK;
}

vkg_status vkg__whole_build(vkg_strategy *s)
{
    const vkg_strategy_model *mc = &s->mc;
    const vkg_device_info *info = vkg_device_get_info(mc->dev);
    vkg_plan_opts po = {.recompute = mc->recompute,
                        .precision = mc->precision,
                        .max_allocation = info->max_allocation_bytes};
    VKG_TRY(vkg_strategy_check_fit(&mc->cfg, vkg_job_rank_batch(s->job), mc->T, mc->accum_steps, 1,
                                   NULL, 0, &po, 0, info->device_local_bytes));
    return vkg__whole_build_part(s, vkg_model_whole(&mc->cfg), 1, 0, 0, 0);
}

vkg_status vkg__whole_share(vkg_strategy *s, float *params, float *m, float *v)
{
    size_t n = vkg_model_num_params(&s->mc.cfg);
    VKG_TRY(vkg_job_broadcast(s->job, params, n * sizeof *params));
    if (m) {
        VKG_TRY(vkg_job_broadcast(s->job, m, n * sizeof *m));
        VKG_TRY(vkg_job_broadcast(s->job, v, n * sizeof *v));
    }
    return VKG_OK;
}

vkg_status vkg__whole_passes(vkg_strategy *s, vkg_data_t *data, const vkg_strategy_step_in *in,
                             double *part, vkg_strategy_step_out *out)
{
    (void)in;
    int accum = s->mc.accum_steps;
    double sum = 0.0;
    VKG_TRY(vkg_model_zero_grad(s->model));
    for (int a = 0; a < accum; a++) {
        float l;
        VKG_TRY(vkg_job_data_next(s->job, data, s->mc.T, s->inputs, s->targets));
        if (a == accum - 1 && s->reducer) /* only the last one may talk */
            VKG_TRY(vkg_grad_reducer_last_micro(s->reducer, s->inputs, s->targets, &l));
        else
            VKG_TRY(vkg_model_forward_backward(s->model, s->inputs, s->targets, &l));
        sum += l;
    }
    *part = sum / accum * (double)vkg_job_loss_scale(s->job);
    if (s->reducer)
        VKG_TRY(vkg_grad_reducer_reduce(s->reducer, &out->comm_ms, &out->exposed_comm_ms));
    return VKG_OK;
}

vkg_status vkg__whole_eval(vkg_strategy *s, vkg_data_t *data, int n, float *loss)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        float l;
        uint64_t nb = vkg_data_num_batches(data);
        VKG_TRY(vkg_job_data_read(s->job, data, nb ? (uint64_t)i % nb : 0, s->mc.T, s->inputs,
                                  s->targets));
        VKG_TRY(vkg_model_forward(s->model, s->inputs, s->targets, &l));
        sum += l;
    }
    sum /= n;
    if (vkg_job_dp(s->job) > 1) { /* the group's token-weighted mean */
        float x = (float)(sum * (double)vkg_job_loss_scale(s->job));
        VKG_TRY(vkg_job_allreduce_sum(s->job, &x, 1));
        sum = x;
    }
    *loss = (float)sum;
    return VKG_OK;
}

vkg_status vkg__whole_logits(vkg_strategy *s, const int32_t *inputs, int b, int t, float *row)
{
    VKG_TRY(vkg_model_forward(s->model, inputs, NULL, NULL));
    return vkg_model_logits_row(s->model, b, t, row);
}

vkg_status vkg__whole_gather(vkg_strategy *s, float *params, float *m, float *v)
{
    const vkg_model_layout *lo = vkg_model_layout_of(s->model);
    size_t n = lo->total;
    float *buf = malloc(n * sizeof *buf), *bv = m ? malloc(n * sizeof *bv) : NULL;
    vkg_status st = VKG_OK;
    VKG_CHECK_GOTO(st, buf && (!m || bv), VKG_ERR_NOMEM, done, "no memory for %zu parameters", n);
    if (params) {
        VKG_TRY_GOTO(st, vkg_model_get_params(s->model, buf), done);
        vkg_model_part_insert(lo, buf, params);
    }
    if (m) {
        size_t first, count;
        vkg_adamw_moment_range(s->opt, &first, &count);
        VKG_TRY_GOTO(st, vkg_adamw_get_moments(s->opt, buf + first, bv + first), done);
        vkg_model_part_insert(lo, buf, m);
        vkg_model_part_insert(lo, bv, v);
    }
done:
    free(buf), free(bv);
    return st;
}

vkg_status vkg__stage_layout(const vkg_strategy *s, int stage, vkg_model_layout *lo)
{
    int S = vkg_job_pp(s->job), layers[64];
    vkg_model_part part = vkg_model_whole(&s->mc.cfg);
    if (S > 1) {
        VKG_TRY(vkg_pp_split(&s->mc.cfg, s->mc.T, S,
                             s->cfg.par.pp_layers_count ? s->pp_layers : NULL, layers));
        part = vkg_pp_part(layers, S, stage);
    }
    vkg_model_part_layout(&s->mc.cfg, &part, lo);
    return VKG_OK;
}
