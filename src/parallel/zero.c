/* ZeRO-1 (DESIGN.md section 6): data parallelism with AdamW's moments sharded over the ranks.
 *
 * Every rank holds the whole model and runs the whole-model step's passes (whole.c: the last
 * micro-batch's gradient buckets are summed while the device computes the rest of the backward
 * pass, or the whole gradient after it), but its gradient reducer (reducer.c) is created over the
 * shards: each sum is a reduce-scatter that leaves only this rank's shard summed, bitwise what
 * dp's allreduce gives there (vkg_comm_reduce_scatter keeps the allreduce's order of additions).
 * With bf16 gradients (grad_bf16.h) the gradient is rounded to bf16 and reduce-scattered in bf16
 * (vkg_comm_reduce_scatter_dtype: summed in fp32, rounded once, the bits of dp's bf16
 * allreduce), half the bytes of the fp32 reduce-scatter, and the shard is widened back. Each rank's
 * AdamW holds the moments of its shard alone and updates only its shard; the parameters are then
 * allgathered, so every rank again holds the whole model.
 *
 * The global norm. One device adds the gradient's squares in partial sums over fixed chunks of
 * the flat gradient, then adds the partial sums in a fixed order (src/ops/norm.c). The shards are
 * cut at chunk boundaries (vkg_strategy_zero_plan), so each partial sum lies in one shard and is
 * computed by its owner from the same bits dp's rank would have; the ranks gather all partial
 * sums and each adds them as one device does: the norm, and so the clipping, is dp's bit for bit.
 *
 * Not here: the passes (whole.c), the reduction (reducer.c), the collectives (transport/), the
 * optimizer's sharded norm (src/optim/adamw.c), checkpoints (the trainer writes the whole model and
 * moments that vkg_strategy_gather brings to rank 0). Nothing here prints.
 */
#include <stdlib.h>
#include <string.h>

#include "os/clock.h"
#include "base/error.h"
#include "parallel/whole.h"

/* Point-to-point tag of a shard's moments on their way to rank 0: | 0 for m, | 1 for v. */
#define TAG_MOMENTS 0x50000000u

struct vkg_zero {
    int N, r;
    vkg_zero_shard *sh;      /* (N) */
    size_t *bounds;          /* (N + 1) the shards' parameter bounds */
    size_t nparts, most;     /* partial sums of the norm; the most of one shard */
    float *parts, *gathered; /* (most) this shard's, (N x most) every shard's */
    float *all;              /* (nparts) in order */
    uint64_t hash;
};

vkg_status vkg__zero_check(const vkg_strategy_config *c, const vkg_job_layout *lay)
{
    int pp = lay->pp, ranks = lay->dp;
    VKG_CHECK(c->zero == 1, VKG_ERR_INVALID_ARG,
              "--zero %d: only ZeRO stage 1 (AdamW's moments sharded) is implemented; give "
              "--zero 1 or 0",
              c->zero);
    VKG_CHECK(ranks >= 2, VKG_ERR_INVALID_ARG,
              "--zero 1 needs 2 or more data-parallel ranks%s, got %d: with one rank there is "
              "nothing to shard the optimizer over (--world-size, or vkgpt launch -n N)",
              pp > 1 ? " per pipeline stage (ranks / --pp)" : "", ranks);
    return VKG_OK;
}

vkg_status vkg_strategy_zero_plan(const vkg_gpt2_config *cfg, int N, vkg_zero_shard *shards)
{
    size_t n = vkg_gpt2_num_params(cfg);
    size_t P = vkg_adamw_norm_partition(n, NULL);
    VKG_CHECK(N >= 1 && P >= (size_t)N, VKG_ERR_INVALID_ARG,
              "--zero 1: the gradient norm of this model's %zu parameters is added in %zu partial "
              "sums, fewer than the %d ranks to shard it over; use fewer ranks "
              "or a larger model",
              n, P, N);
    size_t *b = malloc((P + 1) * sizeof *b);
    VKG_CHECK(b, VKG_ERR_NOMEM, "no memory for %zu partial sums", P);
    vkg_adamw_norm_partition(n, b);
    for (int r = 0; r < N; r++) {
        size_t p0 = P * (size_t)r / (size_t)N, p1 = P * (size_t)(r + 1) / (size_t)N;
        vkg_zero_shard *sh = &shards[r];
        sh->first = b[p0], sh->count = b[p1] - b[p0];
        sh->part_first = p0, sh->part_count = p1 - p0;
        sh->optimizer = vkg_adamw_memory_of(sh->count, P);
    }
    free(b);
    return VKG_OK;
}

uint64_t vkg__zero_hash(const vkg_strategy *s)
{
    const struct vkg_zero *z = s->vt == &vkg__strategy_zero ? s->impl : NULL;
    return z ? z->hash : 0;
}

static vkg_status build(vkg_strategy *s)
{
    struct vkg_zero *z = calloc(1, sizeof *z);
    VKG_CHECK(z, VKG_ERR_NOMEM, "no memory for ZeRO-1's shards");
    s->impl = z;
    z->N = vkg_job_dp(s->job), z->r = vkg_job_replica(s->job);
    z->sh = calloc((size_t)z->N, sizeof *z->sh);
    z->bounds = malloc((size_t)(z->N + 1) * sizeof *z->bounds);
    VKG_CHECK(z->sh && z->bounds, VKG_ERR_NOMEM, "no memory for %d shards", z->N);
    VKG_TRY(vkg_strategy_zero_plan(&s->mc.cfg, z->N, z->sh));
    size_t n = vkg_gpt2_num_params(&s->mc.cfg);
    z->hash = 0xcbf29ce484222325ull; /* FNV-1a over the bounds */
    for (int q = 0; q <= z->N; q++) {
        z->bounds[q] = q < z->N ? z->sh[q].first : n;
        z->hash = (z->hash ^ (uint64_t)z->bounds[q]) * 0x100000001b3ull;
    }
    for (int q = 0; q < z->N; q++) {
        z->nparts += z->sh[q].part_count;
        z->most = z->sh[q].part_count > z->most ? z->sh[q].part_count : z->most;
    }
    const vkg_zero_shard *me = &z->sh[z->r];
    VKG_TRY(vkg__whole_build_part(s, vkg_gpt2_whole(&s->mc.cfg), 1, 0, me->first, me->count));
    s->rc.shards = z->bounds; /* the reducer (vkg_strategy_load) reduce-scatters over them */
    VKG_TRY(vkg_adamw_norm_shard(s->opt, me->part_first, me->part_count));
    VKG_CHECK(vkg_adamw_norm_parts(s->opt) == z->nparts, VKG_ERR_STATE,
              "ZeRO-1: the optimizer's norm has %zu partial sums, the shards %zu",
              vkg_adamw_norm_parts(s->opt), z->nparts);
    z->parts = calloc(z->most, sizeof *z->parts);
    z->gathered = malloc((size_t)z->N * z->most * sizeof *z->gathered);
    z->all = malloc(z->nparts * sizeof *z->all);
    VKG_CHECK(z->parts && z->gathered && z->all, VKG_ERR_NOMEM, "no memory for %zu partial sums",
              z->nparts);
    return VKG_OK;
}

/* This shard's partial sums of the norm, every shard's gathered in order, added as one device
 * adds them. */
static vkg_status norm(vkg_strategy *s, float *sumsq, vkg_strategy_step_out *out)
{
    struct vkg_zero *z = s->impl;
    VKG_TRY(vkg_adamw_grad_partials(s->opt, z->parts));
    double t0 = vkg_os_now_ms();
    VKG_TRY(vkg_job_allgather(s->job, z->parts, z->most * sizeof *z->parts, z->gathered));
    double ms = vkg_os_now_ms() - t0;
    out->comm_ms += ms, out->exposed_comm_ms += ms;
    for (int q = 0; q < z->N; q++)
        memcpy(z->all + z->sh[q].part_first, z->gathered + (size_t)q * z->most,
               z->sh[q].part_count * sizeof *z->all);
    return vkg_adamw_sum_partials(s->opt, z->all, sumsq);
}

/* After the update: every shard's new parameters to every rank (through the host buffer of the
 * gradients, free until the next step). Never overlapped: counted as exposed. */
static vkg_status finish(vkg_strategy *s, vkg_strategy_step_out *out)
{
    struct vkg_zero *z = s->impl;
    const vkg_zero_shard *me = &z->sh[z->r];
    size_t n = vkg_gpt2_param_count(s->model);
    float *host = vkg_grad_reducer_host(s->reducer);
    VKG_TRY(vkg_tensor_read(s->mc.dev, vkg_gpt2_params_tensor(s->model), me->first * 4,
                            host + me->first, me->count * 4));
    double t0 = vkg_os_now_ms();
    VKG_TRY(vkg_comm_allgatherv(vkg_job_comm(s->job), host, n, z->bounds));
    double ms = vkg_os_now_ms() - t0;
    out->comm_ms += ms, out->exposed_comm_ms += ms;
    return vkg_gpt2_set_params(s->model, host);
}

/* The whole-model step with the sharded norm in place of the optimizer's, and the parameters'
 * allgather after an update. */
static vkg_status step(vkg_strategy *s, vkg_data_t *data, const vkg_strategy_step_in *in,
                       vkg_strategy_step_out *out)
{
    double loss;
    int stop;
    float sumsq = 0.0f;
    VKG_TRY(vkg__whole_accumulate(s, data, in, &loss, &stop, out));
    VKG_TRY(norm(s, &sumsq, out));
    VKG_TRY(vkg__whole_apply(s, in, loss, sumsq, stop, out));
    return out->skipped ? VKG_OK : finish(s, out);
}

/* The parameters from this rank's whole model; the moments, when rank 0 asks for them, from
 * every shard to rank 0. */
static vkg_status gather(vkg_strategy *s, float *params, float *m, float *v)
{
    struct vkg_zero *z = s->impl;
    if (params)
        VKG_TRY(vkg_gpt2_get_params(s->model, params));
    int32_t want = z->r == 0 && m && v;
    VKG_TRY(vkg_job_broadcast(s->job, &want, sizeof want));
    if (!want)
        return VKG_OK;
    vkg_comm_t *comm = vkg_job_comm(s->job);
    const vkg_zero_shard *me = &z->sh[z->r];
    if (z->r == 0) {
        VKG_TRY(vkg_adamw_get_moments(s->opt, m + me->first, v + me->first));
        for (int q = 1; q < z->N; q++) {
            const vkg_zero_shard *sh = &z->sh[q];
            VKG_TRY(vkg_comm_recv(comm, q, TAG_MOMENTS, m + sh->first, sh->count * 4));
            VKG_TRY(vkg_comm_recv(comm, q, TAG_MOMENTS | 1u, v + sh->first, sh->count * 4));
        }
        return VKG_OK;
    }
    float *bm = malloc(me->count * sizeof *bm), *bv = malloc(me->count * sizeof *bv);
    vkg_status st = VKG_OK;
    VKG_CHECK_GOTO(st, bm && bv, VKG_ERR_NOMEM, done, "no memory for %zu moments", me->count);
    VKG_TRY_GOTO(st, vkg_adamw_get_moments(s->opt, bm, bv), done);
    VKG_TRY_GOTO(st, vkg_comm_send(comm, 0, TAG_MOMENTS, bm, me->count * 4), done);
    VKG_TRY_GOTO(st, vkg_comm_send(comm, 0, TAG_MOMENTS | 1u, bv, me->count * 4), done);
done:
    free(bm), free(bv);
    return st;
}

static void free_impl(vkg_strategy *s)
{
    struct vkg_zero *z = s->impl;
    if (!z)
        return;
    free(z->sh), free(z->bounds);
    free(z->parts), free(z->gathered), free(z->all);
    free(z);
    s->impl = NULL;
}

const vkg_strategy_vt vkg__strategy_zero = {
    .name = "zero1",
    .build = build,
    .step = step,
    .gather = gather,
    .free_impl = free_impl,
};
