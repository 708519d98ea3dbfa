/* A training step, written once for every strategy (DESIGN.md section 6): the layout's passes
 * (whole.c's micro-batches, or a pipeline stage's schedule in pp_strategy.c), each ending with
 * the gradient reducer's sum over the data-parallel group (the sync of every step, overlapped
 * with the last backward where it has buckets), then one tail:
 *   the norm by the sharding    the optimizer's sum of squares, or under ZeRO-1 the shards'
 *                               partial sums gathered over the group (shards.h); under a
 *                               pipeline summed over the replica's stages;
 *   the loss/stop exchange      {this rank's term of the token-weighted loss, its stop request}
 *                               summed over the job (DiLoCo adds its replica's sum of squares:
 *                               any replica's non-finite norm skips every rank's update alike);
 *   the update                  AdamW, skipped alike on every rank when the loss or the norm
 *                               (DiLoCo: any replica's) is not finite;
 *   the share by the sharding   ZeRO-1: each shard's new parameters to every member;
 *   the end-of-step sync        DiLoCo's outer rounds (diloco.c); nothing for every-step sync,
 *                               whose sum ran in the passes.
 * Not here: the passes, the reduction (reducer.c), the shards (shards.c), DiLoCo's rounds. */
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "os/clock.h"
#include "parallel/shards.h"
#include "parallel/whole.h"

void vkg__span(vkg_strategy *s, vkg_span_kind kind, int micro, double t0)
{
    if (s->nspans < s->span_cap)
        s->spans[s->nspans++] =
            (vkg_span){.kind = kind, .micro = micro, .t0 = t0, .t1 = vkg_os_now_ms()};
}

/* The update, the parameters' share under ZeRO-1, and the loss, norm and stop into out. */
static vkg_status tail(vkg_strategy *s, const vkg_strategy_step_in *in, double part,
                       vkg_strategy_step_out *out)
{
    float sumsq = 0.0f, scale = vkg__step_scale(in);
    double t0 = vkg_os_now_ms(), ms;
    vkg_group_t *pipe = vkg_job_pipe_group(s->job);
    if (s->shards) {
        VKG_TRY(vkg__shards_norm(s->shards, vkg_job_dp_group(s->job), s->opt, &sumsq, &ms));
        out->comm_ms += ms, out->exposed_comm_ms += ms;
    } else
        VKG_TRY(vkg_adamw_grad_sumsq(s->opt, &sumsq));
    if (pipe) /* the replica's norm: its stages' (the tied embedding counted once) */
        VKG_TRY(vkg_group_allreduce(pipe, &sumsq, 1, VKG_COMM_F32));
    if (s->diloco) /* the exchange pieces that ran beside the passes end first */
        VKG_TRY(vkg__diloco_join(s, out));
    float x[3] = {(float)part, in->stop ? 1.0f : 0.0f, sumsq};
    if (vkg_job_world(s->job) > 1) {
        double t1 = vkg_os_now_ms();
        VKG_TRY(vkg_job_allreduce_sum(s->job, x, s->diloco ? 3 : 2));
        if (s->diloco) { /* the replicas' only exchange of the step, all of it waited for */
            ms = vkg_os_now_ms() - t1;
            out->comm_ms += ms, out->exposed_comm_ms += ms;
        }
    }
    out->skipped = !isfinite(x[0]) || !isfinite(s->diloco ? x[2] : sumsq);
    if (!out->skipped)
        VKG_TRY(vkg_adamw_update(s->opt, in->lr, in->t, in->grad_clip, sumsq, scale));
    if (!out->skipped && s->shards) { /* through the reducer's host buffer, free until the next
                                         step; never overlapped: counted as exposed */
        const vkg_shards *z = s->shards;
        size_t first = z->bounds[z->me], count = z->bounds[z->me + 1] - first;
        float *host = vkg_grad_reducer_host(s->reducer);
        VKG_TRY(vkg_tensor_read(s->mc.dev, vkg_model_params_tensor(s->model), first * 4,
                                host + first, count * 4));
        double t1 = vkg_os_now_ms();
        VKG_TRY(vkg__shards_share(z, vkg_job_dp_group(s->job), host));
        ms = vkg_os_now_ms() - t1;
        out->comm_ms += ms, out->exposed_comm_ms += ms;
        VKG_TRY(vkg_model_set_params(s->model, host));
    }
    vkg__span(s, VKG_SPAN_OPTIMIZER, -1, t0);
    out->loss = x[0];
    out->grad_norm = sqrtf(sumsq) / scale; /* under DiLoCo the replica's own */
    out->stop = x[1] > 0.0f;
    return s->diloco ? vkg__diloco_end_step(s, in->t, out) : VKG_OK;
}

vkg_status vkg_strategy_step(vkg_strategy *s, vkg_data_t *data, const vkg_strategy_step_in *in,
                             vkg_strategy_step_out *out)
{
    VKG_CHECK(s->model, VKG_ERR_STATE, "no model (vkg_strategy_build)");
    float scale = vkg__step_scale(in); /* checked by vkg_model_set_grad_scale */
    /* the model's own: a model built again (a new --rank-batch split) starts at 1 */
    if (scale != vkg_model_grad_scale(s->model))
        VKG_TRY(vkg_model_set_grad_scale(s->model, scale));
    memset(out, 0, sizeof *out);
    s->nspans = 0;
    double part = 0.0;
    VKG_TRY(s->vt->passes ? s->vt->passes(s, data, in, &part, out)
                          : vkg__whole_passes(s, data, in, &part, out));
    VKG_TRY(tail(s, in, part, out));
    if (s->diloco)
        out->comm_bytes = out->outer_bytes + 3 * sizeof(float);
    else if (vkg_job_dp(s->job) > 1) /* the stage's (or whole model's) gradient, every step */
        out->comm_bytes = (uint64_t)vkg_model_param_count(s->model) *
                          (s->cfg.par.grad_dtype == VKG_COMM_BF16 ? 2u : 4u);
    return VKG_OK;
}
