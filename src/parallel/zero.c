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
 * The global norm: the shards are cut at the norm's partial sums and the norm is added from every
 * shard's as one device adds it (shards.h), so the norm, and so the clipping, is dp's bit for bit.
 *
 * Not here: the passes (whole.c), the reduction (reducer.c), the shards (shards.c), the
 * collectives (transport/), the
 * optimizer's sharded norm (src/optim/adamw.c), checkpoints (the trainer writes the whole model and
 * moments that vkg_strategy_gather brings to rank 0). Nothing here prints.
 */
#include <stdlib.h>
#include <string.h>

#include "os/clock.h"
#include "base/error.h"
#include "parallel/shards.h"
#include "parallel/whole.h"

/* Point-to-point tag of a shard's moments on their way to rank 0: | 0 for m, | 1 for v. */
#define TAG_MOMENTS 0x50000000u

struct vkg_zero {
    vkg_shards z;
    uint64_t hash;
};

vkg_status vkg__zero_check(const vkg_strategy_config *c, const vkg_job_layout *lay)
{
    int pp = lay->pp, ranks = lay->dp;
    VKG_CHECK(c->par.zero == 1, VKG_ERR_INVALID_ARG,
              "--zero %d: only ZeRO stage 1 (AdamW's moments sharded) is implemented; give "
              "--zero 1 or 0",
              c->par.zero);
    VKG_CHECK(ranks >= 2, VKG_ERR_INVALID_ARG,
              "--zero 1 needs 2 or more data-parallel ranks%s, got %d: with one rank there is "
              "nothing to shard the optimizer over (--world-size, or vkgpt launch -n N)",
              pp > 1 ? " per pipeline stage (ranks / --pp)" : "", ranks);
    return VKG_OK;
}

vkg_status vkg_strategy_zero_plan(const vkg_model_config *cfg, int N, vkg_zero_shard *shards)
{
    size_t n = vkg_model_num_params(cfg);
    VKG_CHECK(N >= 1, VKG_ERR_INVALID_ARG, "--zero 1: %d ranks", N);
    size_t *b = malloc(2 * ((size_t)N + 1) * sizeof *b), *pb = b + N + 1;
    VKG_CHECK(b, VKG_ERR_NOMEM, "no memory for %d shards", N);
    vkg_status st = vkg__shards_cut(n, 0, N, NULL, 0, b, pb);
    for (int r = 0; r < N && st == VKG_OK; r++) {
        vkg_zero_shard *sh = &shards[r];
        sh->first = b[r], sh->count = b[r + 1] - b[r];
        sh->part_first = pb[r], sh->part_count = pb[r + 1] - pb[r];
        sh->optimizer = vkg_adamw_memory_of(sh->count, pb[N]);
    }
    free(b);
    return st;
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
    int N = vkg_job_dp(s->job), r = vkg_job_replica(s->job);
    VKG_TRY(vkg__shards_init(&z->z, vkg_model_num_params(&s->mc.cfg), 0, N, r, NULL, 0));
    z->hash = 0xcbf29ce484222325ull; /* FNV-1a over the bounds */
    for (int q = 0; q <= N; q++)
        z->hash = (z->hash ^ (uint64_t)z->z.bounds[q]) * 0x100000001b3ull;
    size_t first = z->z.bounds[r], count = z->z.bounds[r + 1] - first;
    VKG_TRY(vkg__whole_build_part(s, vkg_model_whole(&s->mc.cfg), 1, 0, first, count));
    s->rc.shards = z->z.bounds; /* the reducer (vkg_strategy_load) reduce-scatters over them */
    s->shards = &z->z;          /* the step's tail: the norm from them, then the share */
    return vkg__shards_shard_norm(&z->z, s->opt);
}

/* The parameters from this rank's whole model; the moments, when rank 0 asks for them, from
 * every shard to rank 0. */
static vkg_status gather(vkg_strategy *s, float *params, float *m, float *v)
{
    struct vkg_zero *z = s->impl;
    if (params)
        VKG_TRY(vkg_model_get_params(s->model, params));
    int r = z->z.me;
    int32_t want = r == 0 && m && v;
    VKG_TRY(vkg_job_broadcast(s->job, &want, sizeof want));
    if (!want)
        return VKG_OK;
    vkg_comm_t *comm = vkg_job_comm(s->job);
    const size_t *b = z->z.bounds;
    if (r == 0) {
        VKG_TRY(vkg_adamw_get_moments(s->opt, m + b[0], v + b[0]));
        for (int q = 1; q < z->z.N; q++) {
            VKG_TRY(vkg_comm_recv(comm, q, TAG_MOMENTS, m + b[q], (b[q + 1] - b[q]) * 4));
            VKG_TRY(vkg_comm_recv(comm, q, TAG_MOMENTS | 1u, v + b[q], (b[q + 1] - b[q]) * 4));
        }
        return VKG_OK;
    }
    size_t count = b[r + 1] - b[r];
    float *bm = malloc(count * sizeof *bm), *bv = malloc(count * sizeof *bv);
    vkg_status st = VKG_OK;
    VKG_CHECK_GOTO(st, bm && bv, VKG_ERR_NOMEM, done, "no memory for %zu moments", count);
    VKG_TRY_GOTO(st, vkg_adamw_get_moments(s->opt, bm, bv), done);
    VKG_TRY_GOTO(st, vkg_comm_send(comm, 0, TAG_MOMENTS, bm, count * 4), done);
    VKG_TRY_GOTO(st, vkg_comm_send(comm, 0, TAG_MOMENTS | 1u, bv, count * 4), done);
done:
    free(bm), free(bv);
    return st;
}

static void free_impl(vkg_strategy *s)
{
    struct vkg_zero *z = s->impl;
    if (!z)
        return;
    vkg__shards_free(&z->z);
    free(z);
    s->shards = NULL;
    s->impl = NULL;
}

const vkg_strategy_vt vkg__strategy_zero = {
    .name = "zero1",
    .build = build,
    .gather = gather,
    .free_impl = free_impl,
};
