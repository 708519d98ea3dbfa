/* The strategy interface's common part: joining the job and choosing the strategy's table, the
 * job-wide helpers, loading the starting point (and creating the gradient reducer of a
 * data-parallel group of whole models), and dispatching each call to the table's hook or to the
 * whole-model default (whole.c). What differs between strategies is in their tables (zero.c,
 * pp_strategy.c); whether a model fits a device before it is built is in plan.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "parallel/grad_bf16.h"
#include "parallel/outer.h"
#include "parallel/whole.h"

#define BUCKET_DEFAULT ((size_t)25 << 20)

/* Whether grad_dtype is fp32, or bf16 with 2 or more data-parallel ranks. */
static vkg_status grad_dtype_check(const vkg_strategy_config *c, const vkg_job_layout *lay)
{
    VKG_CHECK(vkg_grad_dtype_name(c->par.grad_dtype), VKG_ERR_INVALID_ARG,
              "--grad-dtype: dtype %d is neither fp32 nor bf16", (int)c->par.grad_dtype);
    VKG_CHECK(c->par.grad_dtype == VKG_COMM_F32 || lay->dp >= 2, VKG_ERR_INVALID_ARG,
              "--grad-dtype bf16 needs 2 or more data-parallel ranks, got %d%s: a lone rank "
              "exchanges no gradients (drop the flag, or add ranks)",
              lay->dp, lay->pp > 1 ? " (ranks / --pp)" : "");
    return VKG_OK;
}

vkg_status vkg_strategy_create(const vkg_strategy_config *c, vkg_strategy **out)
{
    vkg_job_layout lay; /* checked before joining the job */
    VKG_TRY(vkg_job_layout_of(c->par.comm.world_size, c->par.comm.rank, c->par.pp, &lay));
    if (c->par.zero)
        VKG_TRY(vkg__zero_check(c, &lay));
    VKG_TRY(grad_dtype_check(c, &lay));
    VKG_CHECK(!c->par.rank_batch_auto ||
                  (lay.pp == 1 && !c->par.zero && !c->par.rank_batch && c->par.sync == 0),
              VKG_ERR_INVALID_ARG,
              "--rank-batch auto is not supported with %s yet: give a fixed --rank-batch list",
              lay.pp > 1    ? "--pp (pipeline stages)"
              : c->par.zero ? "--zero 1"
              : c->par.sync ? "--sync diloco (each replica steps alone)"
                            : "a --rank-batch list");
    VKG_TRY(vkg__diloco_check(c, &lay));
    vkg_strategy *s = calloc(1, sizeof *s);
    VKG_CHECK(s, VKG_ERR_NOMEM, "no memory for the parallel strategy");
    int pp = lay.pp;
    s->cfg = *c;
    s->cfg.par.rank_batch = NULL, s->cfg.par.pp_layers = NULL; /* not kept (pp_layers: copied) */
    s->cfg.par.pp_layers_count = c->par.pp_layers ? c->par.pp_layers_count : 0;
    vkg_status st = vkg_job_create(&c->par.comm, c->par.pp, c->batch, c->par.rank_batch,
                                   c->par.rank_batch_count, &s->job);
    if (st != VKG_OK) {
        free(s);
        return st;
    }
    if (c->par.rank_batch_auto)
        vkg_job_balance_on(s->job);
    int diloco = c->par.sync == VKG_SYNC_DILOCO;
    s->vt = pp > 1        ? &vkg__strategy_pp /* with --zero: each stage's moments sharded */
            : c->par.zero ? &vkg__strategy_zero
            : diloco      ? &vkg__strategy_diloco
            : lay.dp > 1  ? &vkg__strategy_dp
                          : &vkg__strategy_single;
    /* a data-parallel group of whole models whose gradients are summed (not DiLoCo's replicas) */
    s->reduces = pp == 1 && lay.dp > 1 && !diloco;
    s->own_grads = diloco;
    if (diloco)
        vkg__diloco_describe(c, s->describe, sizeof s->describe);
    /* Buckets overlapped with the (last) backward: whole models, and pipeline stages of 2 or more
     * replicas under 1F1B or GPipe (under ZB-H1 the weight passes end the step: one reduction) */
    int overlap =
        s->reduces || (pp > 1 && lay.dp > 1 && !diloco && c->par.pp_schedule != VKG_PP_ZBH1);
    if (overlap && c->par.bucket_bytes >= 0)
        s->rc.bucket_bytes = c->par.bucket_bytes ? (uint64_t)c->par.bucket_bytes : BUCKET_DEFAULT;
    s->rc.dtype = c->par.grad_dtype;
    s->rc.force_copy_path = c->par.force_copy_path;
    s->rc.pipeline = pp > 1; /* created over the stage's group by the pipeline's build */
    if (pp > 1)
        st = vkg__pp_create(s, c);
    if (st != VKG_OK) {
        vkg_strategy_destroy(&s, NULL);
        return st;
    }
    *out = s;
    return VKG_OK;
}

/* The model, optimizer, reducer and batch buffers, as destroy releases them. */
static void release_model(vkg_strategy *s)
{
    vkg_adamw_destroy(&s->opt);
    vkg_model_destroy(&s->model); /* its split copies into the reducer's imported buffer */
    vkg_grad_reducer_destroy(&s->reducer);
    free(s->inputs), free(s->targets);
    s->inputs = s->targets = NULL;
}

void vkg_strategy_destroy(vkg_strategy **ps, const char *failure)
{
    vkg_strategy *s = ps ? *ps : NULL;
    if (!s)
        return;
    vkg_job_abort(s->job, failure); /* the peers learn at once (after a background exchange) */
    if (s->vt && s->vt->free_impl)
        s->vt->free_impl(s);
    vkg__diloco_free(s);
    release_model(s);
    vkg_job_destroy(&s->job, NULL);
    free(s);
    *ps = NULL;
}

const char *vkg_strategy_name(const vkg_strategy *s)
{
    return s->vt->name;
}

int vkg_strategy_rank(const vkg_strategy *s)
{
    return vkg_job_rank(s->job);
}

int vkg_strategy_world(const vkg_strategy *s)
{
    return vkg_job_world(s->job);
}

void vkg_strategy_layout(const vkg_strategy *s, int *pp, int *dp)
{
    *pp = vkg_job_pp(s->job);
    *dp = vkg_job_dp(s->job);
}

int vkg_strategy_rank_batch(const vkg_strategy *s)
{
    return vkg_job_rank_batch(s->job);
}

int vkg_strategy_global_batch(const vkg_strategy *s)
{
    return vkg_job_global_batch(s->job);
}

const char *vkg_strategy_batch_list(const vkg_strategy *s)
{
    return vkg_job_batch_list(s->job);
}

const char *vkg_strategy_comm_path(const vkg_strategy *s)
{
    vkg_comm_t *c = vkg_job_comm(s->job);
    return c ? vkg_comm_path(c) : "single rank";
}

uint64_t vkg_strategy_batch_hash(const vkg_strategy *s)
{
    return vkg_job_batch_hash(s->job);
}

int vkg_strategy_bucket_count(const vkg_strategy *s)
{
    return s->reducer ? vkg_grad_reducer_bucket_count(s->reducer) : 0;
}

uint64_t vkg_strategy_bucket_bytes(const vkg_strategy *s)
{
    return s->rc.bucket_bytes;
}

const char *vkg_strategy_bucket_path(const vkg_strategy *s)
{
    return s->reducer ? vkg_grad_reducer_bucket_path(s->reducer) : "";
}

uint64_t vkg_strategy_zero_copy_buckets(const vkg_strategy *s)
{
    return s->reducer ? vkg_grad_reducer_zero_copy_buckets(s->reducer) : 0;
}

const char *vkg_strategy_grad_exchange(const vkg_strategy *s)
{
    if (vkg_job_dp(s->job) < 2 || s->own_grads)
        return "";
    return vkg_grad_reducer_describe(&s->rc);
}

void vkg_strategy_data_config(const vkg_strategy *s, vkg_data_config *dc)
{
    vkg_job_data_config(s->job, dc);
}

vkg_status vkg_strategy_broadcast(vkg_strategy *s, void *buf, size_t bytes)
{
    return vkg_job_broadcast(s->job, buf, bytes);
}

vkg_status vkg_strategy_check_match(vkg_strategy *s, const uint64_t *values,
                                    const char *const *names, int count)
{
    vkg_job_fingerprint fp;
    VKG_CHECK(count > 0 && count <= (int)(sizeof fp.v / sizeof fp.v[0]), VKG_ERR_INVALID_ARG,
              "fingerprint of %d fields", count);
    memset(&fp, 0, sizeof fp);
    memcpy(fp.v, values, (size_t)count * sizeof *values);
    return vkg_job_check_match(s->job, &fp, names, count);
}

vkg_status vkg_strategy_rank0_outcome(vkg_strategy *s, vkg_status st, const char *what)
{
    if (vkg_job_world(s->job) == 1)
        return st;
    struct {
        int32_t status;
        char msg[1020];
    } o;
    memset(&o, 0, sizeof o);
    int rank = vkg_job_rank(s->job);
    if (rank == 0 && st != VKG_OK) {
        o.status = (int32_t)st;
        snprintf(o.msg, sizeof o.msg, "%s", vkg_error_message());
    }
    vkg_status bst = vkg_job_broadcast(s->job, &o, sizeof o);
    if (rank == 0) {
        if (st != VKG_OK) /* the failure is what matters; destroy tells the others if need be */
            vkg__error_restore(o.msg);
        return st != VKG_OK ? st : bst;
    }
    VKG_TRY(bst);
    o.msg[sizeof o.msg - 1] = '\0';
    VKG_CHECK(o.status == VKG_OK, VKG_ERR_PEER, "rank 0 failed: %s: %s", what, o.msg);
    return VKG_OK;
}

void vkg_strategy_memory(const vkg_strategy *s, vkg_stage_memory *out)
{
    memset(out, 0, sizeof *out);
    if (!s->model)
        return;
    vkg_model_opts o = *vkg_model_opts_of(s->model);
    o.max_allocation = vkg_device_get_info(s->mc.dev)->max_allocation_bytes;
    if (vkg_model_memory(&s->mc.cfg, &o, &out->model) != VKG_OK)
        vkg_error_clear();
    out->first = o.part.first, out->last = o.part.last, out->slots = o.slots;
    out->optimizer = s->opt ? vkg_adamw_device_bytes(s->opt) : 0;
    out->total = vkg_strategy_device_bytes(s);
    out->host = vkg_model_host_bytes(s->model) + vkg__diloco_host_bytes(s);
}

vkg_status vkg_strategy_build(vkg_strategy *s, const vkg_strategy_model *mc)
{
    VKG_CHECK(!s->model, VKG_ERR_STATE, "the strategy's model is built already");
    s->mc = *mc;
    VKG_TRY(s->vt->build ? s->vt->build(s) : vkg__whole_build(s));
    /* the end-of-step sync: DiLoCo's rounds over this rank's part (whole model or stage) */
    return s->cfg.par.sync == VKG_SYNC_DILOCO ? vkg__diloco_build(s) : VKG_OK;
}

void vkg_strategy_stage(const vkg_strategy *s, int *stage, int *first, int *last)
{
    const vkg_model_part *p = s->model ? &vkg_model_opts_of(s->model)->part : NULL;
    *stage = vkg_job_stage(s->job);
    *first = p ? p->first : 0;
    *last = p ? p->last : 0;
}

vkg_status vkg_strategy_load(vkg_strategy *s, float *params, float *m, float *v)
{
    VKG_CHECK(s->model, VKG_ERR_STATE, "vkg_strategy_build comes before vkg_strategy_load");
    VKG_TRY(vkg__whole_share(s, params, m, v));
    if (s->reduces && !s->reducer)
        VKG_TRY(vkg_grad_reducer_create(s->job, s->model, &s->rc, &s->reducer));
    const vkg_model_layout *lo = vkg_model_layout_of(s->model);
    size_t n = lo->total;
    float *part = malloc(n * sizeof *part);
    VKG_CHECK(part, VKG_ERR_NOMEM, "no memory for %zu parameters", n);
    float *pm = m ? malloc(n * sizeof *pm) : NULL, *pv = m ? malloc(n * sizeof *pv) : NULL;
    vkg_status st = VKG_OK;
    VKG_CHECK_GOTO(st, !m || (pm && pv), VKG_ERR_NOMEM, done, "no memory for %zu moments", n);
    vkg_model_part_extract(lo, params, part);
    VKG_TRY_GOTO(st, vkg_model_set_params(s->model, part), done);
    if (s->diloco)
        VKG_TRY_GOTO(st, vkg__diloco_start(s, part), done);
    if (m) { /* the moments this rank's optimizer holds (a shard of them under ZeRO-1) */
        size_t first, count;
        vkg_adamw_moment_range(s->opt, &first, &count);
        vkg_model_part_extract(lo, m, pm);
        vkg_model_part_extract(lo, v, pv);
        VKG_TRY_GOTO(st, vkg_adamw_set_moments(s->opt, pm + first, pv + first), done);
    }
done:
    free(part), free(pm), free(pv);
    return st;
}

int vkg_strategy_batch_of(const vkg_strategy *s, int k)
{
    return vkg_job_batch_of(s->job, k);
}

vkg_status vkg_strategy_allgather(vkg_strategy *s, const void *send, size_t bytes, void *recv)
{
    return vkg_job_allgather(s->job, send, bytes, recv);
}

int vkg_strategy_fit_batch(const vkg_strategy *s, int limit)
{
    const vkg_device_info *info = vkg_device_get_info(s->mc.dev);
    vkg_plan_opts po = {.recompute = s->mc.recompute,
                        .precision = s->mc.precision,
                        .max_allocation = info->max_allocation_bytes};
    return vkg_strategy_largest_batch(&s->mc.cfg, limit, s->mc.T, s->mc.accum_steps, 1, NULL, 0,
                                      &po, 0, info->device_local_bytes);
}

vkg_status vkg_strategy_rebatch(vkg_strategy *s, const int *batches)
{
    VKG_CHECK(s->model && vkg_job_balanced(s->job) && !s->vt->build && !s->vt->free_impl,
              VKG_ERR_STATE, "--rank-batch auto: the strategy (%s) cannot change its split",
              s->vt->name);
    size_t n = vkg_model_num_params(&s->mc.cfg);
    float *p = malloc(n * sizeof *p), *m = malloc(n * sizeof *m), *v = malloc(n * sizeof *v);
    vkg_status st = VKG_OK;
    VKG_CHECK_GOTO(st, p && m && v, VKG_ERR_NOMEM, done,
                   "no memory for the %zu parameters and moments a new split carries over", n);
    VKG_TRY_GOTO(st, vkg_strategy_gather(s, p, m, v), done);
    VKG_TRY_GOTO(st, vkg_job_set_batches(s->job, batches), done);
    release_model(s);
    VKG_TRY_GOTO(st, vkg__whole_build(s), done);
    VKG_TRY_GOTO(st, vkg_strategy_load(s, p, m, v), done);
done:
    free(p), free(m), free(v);
    return st;
}

size_t vkg_strategy_activation_bytes(const vkg_strategy *s)
{
    return s->model ? vkg_model_activation_bytes(s->model) : 0;
}

int vkg_strategy_spans(const vkg_strategy *s, const vkg_span **spans)
{
    *spans = s->spans;
    return s->nspans;
}

size_t vkg_strategy_device_bytes(const vkg_strategy *s)
{
    return (s->model ? vkg_model_device_bytes(s->model) : 0) +
           (s->opt ? vkg_adamw_device_bytes(s->opt) : 0);
}

size_t vkg_strategy_optimizer_bytes(const vkg_strategy *s)
{
    return s->opt ? vkg_adamw_device_bytes(s->opt) : 0;
}

void vkg_strategy_moment_range(const vkg_strategy *s, size_t *first, size_t *count)
{
    *first = *count = 0;
    if (s->opt)
        vkg_adamw_moment_range(s->opt, first, count);
}

int vkg_strategy_zero(const vkg_strategy *s)
{
    return s->vt == &vkg__strategy_zero || vkg__pp_zero_hash(s) != 0;
}

uint64_t vkg_strategy_zero_hash(const vkg_strategy *s)
{
    return s->vt == &vkg__strategy_zero ? vkg__zero_hash(s) : vkg__pp_zero_hash(s);
}

vkg_status vkg_strategy_eval(vkg_strategy *s, vkg_data_t *data, int n, float *loss)
{
    VKG_CHECK(s->model, VKG_ERR_STATE, "no model (vkg_strategy_build)");
    return s->vt->eval ? s->vt->eval(s, data, n, loss) : vkg__whole_eval(s, data, n, loss);
}

vkg_status vkg_strategy_logits(vkg_strategy *s, const int32_t *inputs, int b, int t, float *row)
{
    VKG_CHECK(s->model, VKG_ERR_STATE, "no model (vkg_strategy_build)");
    return s->vt->logits ? s->vt->logits(s, inputs, b, t, row)
                         : vkg__whole_logits(s, inputs, b, t, row);
}

vkg_status vkg_strategy_gather(vkg_strategy *s, float *params, float *m, float *v)
{
    VKG_CHECK(s->model, VKG_ERR_STATE, "no model (vkg_strategy_build)");
    return s->vt->gather ? s->vt->gather(s, params, m, v) : vkg__whole_gather(s, params, m, v);
}

size_t vkg_strategy_outer_state_count(const vkg_strategy *s)
{
    return vkg__diloco_state_count(s);
}

vkg_status vkg_strategy_outer_state_gather(vkg_strategy *s, uint64_t step, float *buf)
{
    VKG_CHECK(s->diloco, VKG_ERR_STATE, "no outer state: the strategy is %s, not a built diloco",
              s->vt->name);
    return vkg__diloco_state_gather(s, buf, (uint32_t)step);
}

vkg_status vkg_strategy_outer_state_load(vkg_strategy *s, uint64_t step, const float *buf)
{
    VKG_CHECK(s->diloco, VKG_ERR_STATE, "no outer state: the strategy is %s, not a built diloco",
              s->vt->name);
    return vkg__diloco_state_load(s, buf, (uint32_t)step);
}

const char *vkg_strategy_outer_describe(const vkg_strategy *s)
{
    return s->describe;
}

/* One device, and a data-parallel group of whole models: every call the whole-model default. */
const vkg_strategy_vt vkg__strategy_single = {.name = "single"};
const vkg_strategy_vt vkg__strategy_dp = {.name = "dp"};
