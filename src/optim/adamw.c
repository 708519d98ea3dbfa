/* AdamW on a device: moments, the norm list (sum of squares of the gradients) and the update list
 * (one AdamW dispatch per segment, as one group), recorded once at creation. Values that change
 * every step (learning rate, step count, clip threshold) and the global sum of squares are
 * written into a small device buffer before each update. The moments cover the segments' span
 * only (a shard of the parameters holds the moments of that shard); a sharded norm records its
 * own partial sums in one list and the sum of all of them in another. */
#include "optim/adamw.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

struct vkg_adamw {
    vkg_device_t *dev;
    vkg_adamw_config cfg;
    size_t n;
    vkg_tensor params, grads;
    vkg_adamw_segment *segs;
    int nsegs;
    size_t mfirst, mcount; /* the moments: parameters [mfirst, mfirst + mcount) */
    size_t from;           /* the norm counts gradients [from, n) */
    size_t nparts;         /* the partial sums of that norm (vkg_adamw_norm_partition) */
    int sharded;           /* the norm list computes partials [pfirst, pfirst + pcount) only */
    size_t pfirst, pcount;
    vkg_arena *moments, *scratch;
    vkg_tensor m, v;
    vkg_tensor sumsq_scratch, sumsq, step; /* step: one vkg_step_params */
    vkg_cmd *norm, *update, *final;        /* final: a sharded norm's sum of all partials */
};

vkg_adamw_config vkg_adamw_config_default(void)
{
    return (vkg_adamw_config){.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.0f};
}

static vkg_status check(const vkg_adamw_config *c, size_t n, const vkg_adamw_segment *segs,
                        int nsegs)
{
    VKG_CHECK(c->beta1 >= 0.0f && c->beta1 < 1.0f && c->beta2 >= 0.0f && c->beta2 < 1.0f,
              VKG_ERR_INVALID_ARG, "AdamW: beta1=%g and beta2=%g must lie in [0, 1)",
              (double)c->beta1, (double)c->beta2);
    VKG_CHECK(c->eps > 0.0f && isfinite(c->eps), VKG_ERR_INVALID_ARG,
              "AdamW: eps=%g must be positive and finite", (double)c->eps);
    VKG_CHECK(c->weight_decay >= 0.0f && isfinite(c->weight_decay), VKG_ERR_INVALID_ARG,
              "AdamW: weight decay %g must be non-negative and finite", (double)c->weight_decay);
    VKG_CHECK(n > 0 && nsegs > 0, VKG_ERR_INVALID_ARG, "AdamW: nothing to optimize");
    for (int i = 0; i < nsegs; i++)
        VKG_CHECK(segs[i].offset <= n && segs[i].count <= n - segs[i].offset, VKG_ERR_INVALID_ARG,
                  "AdamW: segment %d [%zu, +%zu) lies outside the %zu parameters", i,
                  segs[i].offset, segs[i].count, n);
    return VKG_OK;
}

/* The norm list: the sum of squares of gradients [from, n); sharded: this optimizer's partial
 * sums of it, into their places in the scratch, and the final list adding all of them. */
static vkg_status record_norm(vkg_adamw *o)
{
    size_t count = o->n - o->from;
    vkg_tensor g = vkg_tensor_view(o->grads, o->from * 4, count * 4);
    VKG_TRY(vkg_cmd_begin(o->norm));
    if (o->sharded && o->pcount)
        VKG_TRY(vkg_op_sumsq_partials(
            o->norm, vkg_tensor_view(o->sumsq_scratch, o->pfirst * 4, o->pcount * 4), g, count,
            o->pfirst, o->pcount));
    else if (o->sharded) /* a shard of no partial sums (a tied copy outside the norm) */
        VKG_TRY(vkg_op_fill(o->norm, o->sumsq, 1, 0.0f));
    else if (count)
        VKG_TRY(vkg_op_sumsq(o->norm, o->sumsq, &g, &count, 1, o->sumsq_scratch, 0));
    else
        VKG_TRY(vkg_op_fill(o->norm, o->sumsq, 1, 0.0f));
    VKG_TRY(vkg_cmd_end(o->norm));
    if (!o->sharded)
        return VKG_OK;
    if (!o->final)
        VKG_TRY(vkg_cmd_create(o->dev, &o->final));
    VKG_TRY(vkg_cmd_begin(o->final));
    if (o->nparts)
        VKG_TRY(vkg_op_sumsq_final(o->final, o->sumsq, o->sumsq_scratch, o->nparts, 0));
    else
        VKG_TRY(vkg_op_fill(o->final, o->sumsq, 1, 0.0f));
    return vkg_cmd_end(o->final);
}

vkg_status vkg_adamw_norm_from(vkg_adamw *o, size_t from)
{
    VKG_CHECK(from <= o->n, VKG_ERR_INVALID_ARG, "AdamW: the norm cannot start at %zu of %zu", from,
              o->n);
    VKG_CHECK(!o->sharded, VKG_ERR_STATE, "AdamW: set the norm's start before sharding it");
    o->from = from;
    size_t count = o->n - from;
    o->nparts = vkg_adamw_norm_partition(count, NULL);
    return record_norm(o);
}

size_t vkg_adamw_norm_partition(size_t n, size_t *bounds)
{
    return vkg_op_sumsq_partition(n, bounds);
}

vkg_status vkg_adamw_norm_shard(vkg_adamw *o, size_t first, size_t count)
{
    VKG_CHECK(first <= o->nparts && count <= o->nparts - first, VKG_ERR_INVALID_ARG,
              "AdamW: partial sums [%zu, %zu) of a norm made of %zu", first, first + count,
              o->nparts);
    o->sharded = 1, o->pfirst = first, o->pcount = count;
    return record_norm(o);
}

size_t vkg_adamw_norm_parts(const vkg_adamw *o)
{
    return o->nparts;
}

vkg_status vkg_adamw_grad_partials(vkg_adamw *o, float *partials)
{
    VKG_CHECK(o->sharded, VKG_ERR_STATE, "AdamW: the norm is not sharded (vkg_adamw_norm_shard)");
    if (!o->pcount)
        return VKG_OK;
    VKG_TRY(vkg_cmd_run(o->norm, 0));
    return vkg_tensor_read(o->dev, o->sumsq_scratch, o->pfirst * 4, partials, o->pcount * 4);
}

vkg_status vkg_adamw_sum_partials(vkg_adamw *o, const float *partials, float *sumsq)
{
    VKG_CHECK(o->sharded, VKG_ERR_STATE, "AdamW: the norm is not sharded (vkg_adamw_norm_shard)");
    if (o->nparts)
        VKG_TRY(vkg_tensor_write(o->dev, o->sumsq_scratch, 0, partials, o->nparts * 4));
    VKG_TRY(vkg_cmd_run(o->final, 0));
    return vkg_tensor_read(o->dev, o->sumsq, 0, sumsq, sizeof *sumsq);
}

static vkg_status record(vkg_adamw *o)
{
    VKG_TRY(vkg_cmd_create(o->dev, &o->norm));
    VKG_TRY(record_norm(o));
    VKG_TRY(vkg_cmd_create(o->dev, &o->update));
    vkg_cmd *c = o->update;
    VKG_TRY(vkg_cmd_begin(c));
    vkg_cmd_group_begin(c); /* disjoint segments */
    for (int i = 0; i < o->nsegs; i++) {
        size_t off = o->segs[i].offset * 4, bytes = o->segs[i].count * 4;
        size_t moff = off - o->mfirst * 4;
        float wd = o->segs[i].decays ? o->cfg.weight_decay : 0.0f;
        VKG_TRY(vkg_op_adamw(
            c, vkg_tensor_view(o->params, off, bytes), vkg_tensor_view(o->grads, off, bytes),
            vkg_tensor_view(o->m, moff, bytes), vkg_tensor_view(o->v, moff, bytes),
            o->segs[i].count, o->cfg.beta1, o->cfg.beta2, o->cfg.eps, wd, o->step, &o->sumsq));
    }
    vkg_cmd_group_end(c);
    VKG_TRY(vkg_cmd_end(c));
    /* Moments start at zero: a fresh optimizer. */
    vkg_cmd *z = NULL;
    VKG_TRY(vkg_cmd_create(o->dev, &z));
    vkg_status st = vkg_cmd_begin(z);
    if (st == VKG_OK)
        st = vkg_op_fill(z, o->m, o->mcount, 0.0f);
    if (st == VKG_OK)
        st = vkg_op_fill(z, o->v, o->mcount, 0.0f);
    if (st == VKG_OK)
        st = vkg_cmd_end(z);
    if (st == VKG_OK)
        st = vkg_cmd_run(z, 0);
    vkg_cmd_destroy(&z);
    return st;
}

vkg_status vkg_adamw_create(vkg_device_t *dev, const vkg_adamw_config *cfg, vkg_tensor params,
                            vkg_tensor grads, size_t n, const vkg_adamw_segment *segs, int nsegs,
                            vkg_adamw **out)
{
    VKG_TRY(check(cfg, n, segs, nsegs));
    vkg_adamw *o = calloc(1, sizeof *o);
    VKG_CHECK(o, VKG_ERR_NOMEM, "no memory for the optimizer");
    vkg_status st = VKG_OK;
    o->dev = dev, o->cfg = *cfg, o->n = n, o->params = params, o->grads = grads;
    o->nsegs = nsegs;
    o->segs = malloc((size_t)nsegs * sizeof *o->segs);
    VKG_CHECK_GOTO(st, o->segs, VKG_ERR_NOMEM, fail, "no memory for %d segments", nsegs);
    memcpy(o->segs, segs, (size_t)nsegs * sizeof *segs);
    size_t end = 0;
    o->mfirst = n;
    for (int i = 0; i < nsegs; i++) {
        o->mfirst = segs[i].offset < o->mfirst ? segs[i].offset : o->mfirst;
        end = segs[i].offset + segs[i].count > end ? segs[i].offset + segs[i].count : end;
    }
    o->mfirst = o->mfirst < end ? o->mfirst : end;
    o->mcount = end - o->mfirst;
    o->nparts = vkg_adamw_norm_partition(n, NULL);
    size_t moments[2] = {o->mcount * 4, o->mcount * 4}; /* one allocation each if need be */
    size_t nscratch = vkg_op_sumsq_scratch_elems(&n, 1);
    VKG_TRY_GOTO(st, vkg_arena_create_list(dev, moments, 2, "adamw", &o->moments), fail);
    VKG_TRY_GOTO(st, vkg_arena_alloc(o->moments, o->mcount * 4, &o->m), fail);
    VKG_TRY_GOTO(st, vkg_arena_alloc(o->moments, o->mcount * 4, &o->v), fail);
    VKG_TRY_GOTO(
        st, vkg_arena_create(dev, (nscratch * 4 + 255) / 256 * 256 + 512, "optimizer", &o->scratch),
        fail);
    VKG_TRY_GOTO(st, vkg_arena_alloc(o->scratch, nscratch * 4, &o->sumsq_scratch), fail);
    VKG_TRY_GOTO(st, vkg_arena_alloc(o->scratch, 4, &o->sumsq), fail);
    VKG_TRY_GOTO(st, vkg_arena_alloc(o->scratch, sizeof(vkg_step_params), &o->step), fail);
    VKG_TRY_GOTO(st, record(o), fail);
    *out = o;
    return VKG_OK;
fail:
    vkg_adamw_destroy(&o);
    return st;
}

void vkg_adamw_destroy(vkg_adamw **po)
{
    vkg_adamw *o = po ? *po : NULL;
    if (!o)
        return;
    vkg_cmd_destroy(&o->final);
    vkg_cmd_destroy(&o->update);
    vkg_cmd_destroy(&o->norm);
    vkg_arena_destroy(&o->scratch);
    vkg_arena_destroy(&o->moments);
    free(o->segs);
    free(o);
    *po = NULL;
}

vkg_status vkg_adamw_grad_sumsq(vkg_adamw *o, float *sumsq)
{
    VKG_TRY(vkg_cmd_run(o->norm, 0));
    return vkg_tensor_read(o->dev, o->sumsq, 0, sumsq, sizeof *sumsq);
}

vkg_status vkg_adamw_update(vkg_adamw *o, float lr, uint32_t t, float grad_clip, float sumsq,
                            float grad_scale)
{
    VKG_CHECK(t >= 1, VKG_ERR_INVALID_ARG, "AdamW step must be >= 1, got %u", t);
    VKG_CHECK(grad_scale > 0.0f && isfinite(grad_scale), VKG_ERR_INVALID_ARG,
              "AdamW: the gradients' loss scale must be positive and finite, got %g",
              (double)grad_scale);
    /* the unscaled gradients' sum of squares: exact for a power-of-two scale */
    float unscale = 1.0f / grad_scale;
    sumsq = sumsq * unscale * unscale;
    vkg_step_params sp = {.lr = lr, .t = t, .grad_clip = grad_clip, .unscale = unscale};
    VKG_TRY(vkg_tensor_write(o->dev, o->step, 0, &sp, sizeof sp));
    VKG_TRY(vkg_tensor_write(o->dev, o->sumsq, 0, &sumsq, sizeof sumsq));
    return vkg_cmd_run(o->update, 0);
}

void vkg_adamw_moment_range(const vkg_adamw *o, size_t *first, size_t *count)
{
    *first = o->mfirst, *count = o->mcount;
}

vkg_status vkg_adamw_get_moments(vkg_adamw *o, float *m, float *v)
{
    VKG_TRY(vkg_tensor_read(o->dev, o->m, 0, m, o->mcount * 4));
    return vkg_tensor_read(o->dev, o->v, 0, v, o->mcount * 4);
}

vkg_status vkg_adamw_set_moments(vkg_adamw *o, const float *m, const float *v)
{
    VKG_TRY(vkg_tensor_write(o->dev, o->m, 0, m, o->mcount * 4));
    return vkg_tensor_write(o->dev, o->v, 0, v, o->mcount * 4);
}

size_t vkg_adamw_memory(size_t n)
{
    return vkg_adamw_memory_of(n, vkg_adamw_norm_partition(n, NULL));
}

size_t vkg_adamw_memory_of(size_t moments, size_t partials)
{
    partials = partials ? partials : 1;
    return 2 * ((moments * 4 + 255) / 256 * 256) + (partials * 4 + 255) / 256 * 256 + 512;
}

size_t vkg_adamw_device_bytes(const vkg_adamw *o)
{
    return vkg_arena_size(o->moments) + vkg_arena_size(o->scratch);
}

void vkg_adamw_list_counts(const vkg_adamw *o, int *dispatches, int *barriers)
{
    *dispatches = vkg_cmd_dispatch_count(o->norm) + vkg_cmd_dispatch_count(o->update);
    *barriers = vkg_cmd_barrier_count(o->norm) + vkg_cmd_barrier_count(o->update);
}

int vkg_adamw_timings(vkg_adamw *o, int which, const vkg_cmd_timing **timings)
{
    return vkg_cmd_timings(which ? o->update : o->norm, timings);
}
