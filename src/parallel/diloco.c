/* DiLoCo (--sync diloco; DESIGN.md section 6, "Slow links"): data parallelism whose replicas
 * synchronise every H optimizer steps instead of every step.
 *
 * Each rank holds the whole model and its own AdamW, and trains on its slice of every global
 * micro-batch as dp does, but nothing sums its gradients: its gradient is the mean over its own
 * tokens (the model's loss scale is 1, not its token share) and its inner AdamW step is its own,
 * clipped by its own norm. Only the loss (token-weighted over the group, for the log), the stop
 * request and whether any rank's loss or norm was not finite (then every rank skips the update
 * alike) are summed each step: three floats. After every optimizer step t with t % H == 0 the
 * outer step (outer.h) runs over the group: the pseudo-gradient exchanged in fp32, bf16 or int8,
 * the Nesterov update of the global parameters, and every replica set to them. The round's
 * position is the step count itself, so a run resumed at any step continues the round it was in.
 *
 * Checkpoints: rank 0's model and moments go to model.bin and state.bin as for dp; the rest of
 * the state (the global parameters, the outer momentum, and each other replica's parameters and
 * moments, which differ from rank 0's inside a round) is vkg_strategy_outer_state, written
 * beside them (outer.bin), so a run resumes bitwise on the same number of replicas.
 *
 * Not done: pipelines (refused by name), ZeRO (refused), streaming fragments that overlap the
 * exchange with the next inner steps. Not here: the exchange and the update (outer.c), the passes
 * (whole.c). Nothing here prints.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "os/clock.h"
#include "parallel/outer.h"
#include "parallel/whole.h"

/* Point-to-point tags of a replica's state on its way to or from rank 0: | 0, 1, 2 for the
 * parameters, m and v. */
#define TAG_OUTER_STATE 0x51000000u

typedef struct vkg_diloco {
    vkg_outer *outer;
    float *host; /* (n) the replica's parameters on the host */
    float *hm, *hv;
    size_t n;
} vkg_diloco;

vkg_status vkg__diloco_check(const vkg_strategy_config *c, const vkg_job_layout *lay)
{
    VKG_CHECK(c->sync == VKG_SYNC_STEP || c->sync == VKG_SYNC_DILOCO, VKG_ERR_INVALID_ARG,
              "--sync: %d is neither step nor diloco", c->sync);
    if (c->sync == VKG_SYNC_STEP)
        return VKG_OK;
    VKG_CHECK(c->inner_steps >= 1, VKG_ERR_INVALID_ARG,
              "--inner-steps must be >= 1 with --sync diloco (the inner steps per outer step), "
              "got %d",
              c->inner_steps);
    VKG_CHECK(lay->pp == 1, VKG_ERR_INVALID_ARG,
              "--sync diloco does not combine with --pp %d: the outer step of pipeline stages is "
              "not implemented (drop --pp)",
              lay->pp);
    VKG_CHECK(!c->zero, VKG_ERR_INVALID_ARG,
              "--sync diloco does not combine with --zero 1: each replica keeps its own AdamW "
              "moments, which ZeRO would shard over the replicas (drop --zero)");
    VKG_CHECK(c->grad_dtype == VKG_COMM_F32, VKG_ERR_INVALID_ARG,
              "--grad-dtype has no effect with --sync diloco: no gradients are exchanged (the "
              "pseudo-gradient's dtype is --outer-dtype)");
    VKG_CHECK(lay->dp >= 2, VKG_ERR_INVALID_ARG,
              "--sync diloco needs 2 or more data-parallel ranks, got %d: one replica has nothing "
              "to average with (--world-size, or vkgpt launch -n N)",
              lay->dp);
    vkg_outer *o = NULL; /* the outer flags, checked before the job is joined */
    VKG_TRY(
        vkg_outer_create(0, c->outer_lr, c->outer_momentum, (vkg_outer_dtype)c->outer_dtype, &o));
    vkg_outer_destroy(&o);
    return VKG_OK;
}

static vkg_status build(vkg_strategy *s)
{
    vkg_diloco *d = calloc(1, sizeof *d);
    VKG_CHECK(d, VKG_ERR_NOMEM, "no memory for DiLoCo's state");
    s->impl = d;
    VKG_TRY(vkg__whole_build(s));
    d->n = vkg_gpt2_num_params(&s->mc.cfg);
    d->host = malloc(d->n * sizeof *d->host);
    VKG_CHECK(d->host, VKG_ERR_NOMEM, "no memory for %zu parameters", d->n);
    return vkg_outer_create(d->n, s->cfg.outer_lr, s->cfg.outer_momentum,
                            (vkg_outer_dtype)s->cfg.outer_dtype, &d->outer);
}

vkg_status vkg__diloco_start(vkg_strategy *s, const float *params)
{
    vkg_diloco *d = s->impl;
    memcpy(vkg_outer_global(d->outer), params, d->n * sizeof *params);
    memset(vkg_outer_momentum(d->outer), 0, d->n * sizeof(float));
    return VKG_OK;
}

/* The outer step: this replica's parameters to the host, the exchange and update, the global
 * parameters back to the device. Never overlapped: counted as exposed. */
static vkg_status outer_step(vkg_strategy *s, vkg_strategy_step_out *out)
{
    vkg_diloco *d = s->impl;
    VKG_TRY(vkg_gpt2_get_params(s->model, d->host));
    double t0 = vkg_os_now_ms();
    VKG_TRY(vkg_outer_step(d->outer, vkg_job_comm(s->job), d->host, &out->outer_bytes));
    double ms = vkg_os_now_ms() - t0;
    out->comm_ms += ms, out->exposed_comm_ms += ms;
    out->outer = 1;
    out->outer_ms = ms;
    return vkg_gpt2_set_params(s->model, d->host);
}

static vkg_status step(vkg_strategy *s, vkg_data_t *data, const vkg_strategy_step_in *in,
                       vkg_strategy_step_out *out)
{
    double loss;
    int stop;
    float sumsq = 0.0f;
    VKG_TRY(vkg__whole_accumulate(s, data, in, &loss, &stop, out)); /* no reducer: alone */
    VKG_TRY(vkg_adamw_grad_sumsq(s->opt, &sumsq));
    /* The group's token-weighted loss, any rank's stop, and any rank's non-finite norm. */
    float x[3] = {(float)(loss * (double)vkg_job_loss_scale(s->job)), stop ? 1.0f : 0.0f, sumsq};
    double t0 = vkg_os_now_ms();
    VKG_TRY(vkg_job_allreduce_sum(s->job, x, 3));
    double ms = vkg_os_now_ms() - t0;
    out->comm_ms += ms, out->exposed_comm_ms += ms;
    VKG_TRY(vkg__whole_apply(s, in, x[0], isfinite(x[2]) ? sumsq : x[2], x[1] > 0.0f, out));
    out->grad_norm = sqrtf(sumsq); /* this replica's own */
    if (in->t % (uint32_t)s->cfg.inner_steps == 0)
        VKG_TRY(outer_step(s, out));
    return VKG_OK;
}

size_t vkg__diloco_host_bytes(const vkg_strategy *s)
{
    const vkg_diloco *d = s->vt == &vkg__strategy_diloco ? s->impl : NULL;
    if (!d)
        return 0;
    vkg_outer_dtype dt = (vkg_outer_dtype)s->cfg.outer_dtype;
    size_t N = (size_t)vkg_job_dp(s->job);
    size_t gathered = dt == VKG_OUTER_F32 ? 0 : N * (size_t)vkg_outer_payload_bytes(d->n, dt);
    return 3 * d->n * sizeof(float) + gathered; /* g, momentum, the replica's parameters */
}

size_t vkg__diloco_state_count(const vkg_strategy *s)
{
    const vkg_diloco *d = s->vt == &vkg__strategy_diloco ? s->impl : NULL;
    return d ? d->n * (2 + 3 * (size_t)(vkg_job_dp(s->job) - 1)) : 0;
}

/* Room for one replica's moments on the host. */
static vkg_status need_moments(vkg_diloco *d)
{
    if (!d->hm)
        d->hm = malloc(d->n * sizeof *d->hm);
    if (!d->hv)
        d->hv = malloc(d->n * sizeof *d->hv);
    VKG_CHECK(d->hm && d->hv, VKG_ERR_NOMEM, "no memory for %zu moments", d->n);
    return VKG_OK;
}

vkg_status vkg__diloco_state_gather(vkg_strategy *s, float *buf)
{
    vkg_diloco *d = s->impl;
    vkg_comm_t *comm = vkg_job_comm(s->job);
    int r = vkg_job_replica(s->job), N = vkg_job_dp(s->job);
    size_t n = d->n;
    VKG_TRY(need_moments(d));
    if (r != 0) {
        VKG_TRY(vkg_gpt2_get_params(s->model, d->host));
        VKG_TRY(vkg_adamw_get_moments(s->opt, d->hm, d->hv));
        VKG_TRY(vkg_comm_send(comm, 0, TAG_OUTER_STATE, d->host, n * 4));
        VKG_TRY(vkg_comm_send(comm, 0, TAG_OUTER_STATE | 1u, d->hm, n * 4));
        return vkg_comm_send(comm, 0, TAG_OUTER_STATE | 2u, d->hv, n * 4);
    }
    memcpy(buf, vkg_outer_global(d->outer), n * sizeof *buf);
    memcpy(buf + n, vkg_outer_momentum(d->outer), n * sizeof *buf);
    for (int q = 1; q < N; q++) {
        float *at = buf + n * (2 + 3 * (size_t)(q - 1));
        VKG_TRY(vkg_comm_recv(comm, q, TAG_OUTER_STATE, at, n * 4));
        VKG_TRY(vkg_comm_recv(comm, q, TAG_OUTER_STATE | 1u, at + n, n * 4));
        VKG_TRY(vkg_comm_recv(comm, q, TAG_OUTER_STATE | 2u, at + 2 * n, n * 4));
    }
    return VKG_OK;
}

vkg_status vkg__diloco_state_load(vkg_strategy *s, const float *buf)
{
    vkg_diloco *d = s->impl;
    vkg_comm_t *comm = vkg_job_comm(s->job);
    int r = vkg_job_replica(s->job), N = vkg_job_dp(s->job);
    size_t n = d->n;
    float *g = vkg_outer_global(d->outer), *m = vkg_outer_momentum(d->outer);
    if (r == 0) {
        memcpy(g, buf, n * sizeof *g);
        memcpy(m, buf + n, n * sizeof *m);
    }
    VKG_TRY(vkg_job_broadcast(s->job, g, n * sizeof *g));
    VKG_TRY(vkg_job_broadcast(s->job, m, n * sizeof *m));
    if (r == 0) {
        for (int q = 1; q < N; q++) {
            const float *at = buf + n * (2 + 3 * (size_t)(q - 1));
            VKG_TRY(vkg_comm_send(comm, q, TAG_OUTER_STATE, at, n * 4));
            VKG_TRY(vkg_comm_send(comm, q, TAG_OUTER_STATE | 1u, at + n, n * 4));
            VKG_TRY(vkg_comm_send(comm, q, TAG_OUTER_STATE | 2u, at + 2 * n, n * 4));
        }
        return VKG_OK;
    }
    VKG_TRY(need_moments(d));
    VKG_TRY(vkg_comm_recv(comm, 0, TAG_OUTER_STATE, d->host, n * 4));
    VKG_TRY(vkg_comm_recv(comm, 0, TAG_OUTER_STATE | 1u, d->hm, n * 4));
    VKG_TRY(vkg_comm_recv(comm, 0, TAG_OUTER_STATE | 2u, d->hv, n * 4));
    VKG_TRY(vkg_gpt2_set_params(s->model, d->host));
    return vkg_adamw_set_moments(s->opt, d->hm, d->hv);
}

static void free_impl(vkg_strategy *s)
{
    vkg_diloco *d = s->impl;
    if (!d)
        return;
    vkg_outer_destroy(&d->outer);
    free(d->host), free(d->hm), free(d->hv);
    free(d);
    s->impl = NULL;
}

const vkg_strategy_vt vkg__strategy_diloco = {
    .name = "diloco",
    .build = build,
    .step = step,
    .free_impl = free_impl,
};
