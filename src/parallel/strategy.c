/* The strategy interface's common part: joining the job, the job-wide helpers, building the
 * model part and its optimizer, and the optimizer step every strategy shares (micro-batches,
 * the strategy's reduction, the global norm, AdamW). What differs between strategies is in their
 * table (single.c, dp_strategy.c, zero.c, pp_strategy.c); whether a model fits a device before it
 * is built is in strategy_fit.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "parallel/strategy_internal.h"

#define BUCKET_DEFAULT ((size_t)25 << 20)

vkg_status vkg_strategy_create(const vkg_strategy_config *c, vkg_strategy **out)
{
    vkg_job_layout lay; /* checked before joining the job */
    VKG_TRY(vkg_job_layout_of(c->comm.world_size, c->comm.rank, c->pp, &lay));
    if (c->zero)
        VKG_TRY(vkg__zero_check(c, &lay));
    VKG_TRY(vkg__grad_dtype_check(c, &lay));
    vkg_strategy *s = calloc(1, sizeof *s);
    VKG_CHECK(s, VKG_ERR_NOMEM, "no memory for the parallel strategy");
    int pp = lay.pp;
    s->cfg = *c;
    s->cfg.rank_batch = NULL, s->cfg.pp_layers = NULL; /* not kept */
    vkg_status st =
        vkg_job_create(&c->comm, c->pp, c->batch, c->rank_batch, c->rank_batch_count, &s->job);
    if (st != VKG_OK) {
        free(s);
        return st;
    }
    s->vt = c->zero                     ? &vkg__strategy_zero
            : pp > 1                    ? &vkg__strategy_pp
            : vkg_job_world(s->job) > 1 ? &vkg__strategy_dp
                                        : &vkg__strategy_single;
    if (pp == 1 && vkg_job_world(s->job) > 1 && c->bucket_bytes >= 0)
        s->bucket_bytes = c->bucket_bytes ? (uint64_t)c->bucket_bytes : BUCKET_DEFAULT;
    if (pp > 1)
        st = vkg__pp_create(s, c);
    if (st != VKG_OK) {
        vkg_strategy_destroy(&s, NULL);
        return st;
    }
    *out = s;
    return VKG_OK;
}

void vkg_strategy_destroy(vkg_strategy **ps, const char *failure)
{
    vkg_strategy *s = ps ? *ps : NULL;
    if (!s)
        return;
    vkg_job_abort(s->job, failure); /* the peers learn at once */
    if (s->vt && s->vt->free_impl)
        s->vt->free_impl(s);
    vkg_buckets_destroy(&s->buckets);
    vkg_adamw_destroy(&s->opt);
    vkg_gpt2_destroy(&s->model); /* its split copies into grads_import */
    vkg_arena_destroy(&s->grads_import);
    if (s->grads)
        vkg_comm_buffer_free(vkg_job_comm(s->job), s->grads);
    if (s->grads16)
        vkg_comm_buffer_free(vkg_job_comm(s->job), s->grads16);
    free(s->inputs), free(s->targets);
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
    return s->buckets ? vkg_buckets_count(s->buckets) : 0;
}

uint64_t vkg_strategy_bucket_bytes(const vkg_strategy *s)
{
    return s->bucket_bytes;
}

const char *vkg_strategy_bucket_path(const vkg_strategy *s)
{
    return s->bucket_path;
}

uint64_t vkg_strategy_zero_copy_buckets(const vkg_strategy *s)
{
    return s->zero_copy_buckets;
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

vkg_status vkg_strategy_create_adamw(const vkg_adamw_config *cfg, vkg_gpt2 *m, vkg_adamw **out)
{
    const vkg_gpt2_layout *lo = vkg_gpt2_layout_of(m);
    vkg_adamw_segment segs[VKG_GPT2_NUM_PARAM_TENSORS];
    int n = 0;
    for (int i = 0; i < VKG_GPT2_NUM_PARAM_TENSORS; i++)
        if (lo->count[i])
            segs[n++] = (vkg_adamw_segment){.offset = lo->part_offset[i],
                                            .count = lo->count[i],
                                            .decays = vkg_gpt2_param_decays(i)};
    return vkg_adamw_create(vkg_gpt2_device(m), cfg, vkg_gpt2_params_tensor(m),
                            vkg_gpt2_grads_tensor(m), vkg_gpt2_param_count(m), segs, n, out);
}

void vkg_strategy_memory(const vkg_strategy *s, vkg_stage_memory *out)
{
    memset(out, 0, sizeof *out);
    if (!s->model)
        return;
    vkg_gpt2_opts o = *vkg_gpt2_opts_of(s->model);
    o.max_allocation = vkg_device_get_info(s->mc.dev)->max_allocation_bytes;
    if (vkg_gpt2_memory(&s->mc.cfg, &o, &out->model) != VKG_OK)
        vkg_error_clear();
    out->first = o.part.first, out->last = o.part.last, out->slots = o.slots;
    out->optimizer = s->opt ? vkg_adamw_device_bytes(s->opt) : 0;
    out->total = vkg_strategy_device_bytes(s);
    out->host = vkg_gpt2_host_bytes(s->model);
}

/* AdamW over the model's parameters [first, first + count): every tensor's part in that range. */
static vkg_status create_adamw_range(const vkg_adamw_config *cfg, vkg_gpt2 *m, size_t first,
                                     size_t count, vkg_adamw **out)
{
    const vkg_gpt2_layout *lo = vkg_gpt2_layout_of(m);
    vkg_adamw_segment segs[VKG_GPT2_NUM_PARAM_TENSORS];
    int n = 0;
    for (int i = 0; i < VKG_GPT2_NUM_PARAM_TENSORS; i++) {
        size_t a = lo->part_offset[i], b = a + lo->count[i];
        a = a > first ? a : first;
        b = b < first + count ? b : first + count;
        if (a < b)
            segs[n++] = (vkg_adamw_segment){
                .offset = a, .count = b - a, .decays = vkg_gpt2_param_decays(i)};
    }
    return vkg_adamw_create(vkg_gpt2_device(m), cfg, vkg_gpt2_params_tensor(m),
                            vkg_gpt2_grads_tensor(m), vkg_gpt2_param_count(m), segs, n, out);
}

vkg_status vkg__strategy_whole_build(vkg_strategy *s, vkg_gpt2_part part, int slots, size_t first,
                                     size_t count)
{
    const vkg_strategy_model *mc = &s->mc;
    vkg_gpt2_opts o = vkg_gpt2_opts_default();
    o.B = vkg_job_rank_batch(s->job), o.T = mc->T, o.accum_steps = mc->accum_steps;
    o.loss_scale = vkg_job_loss_scale(s->job);
    o.part = part;
    o.slots = slots;
    o.recompute = mc->recompute;
    o.precision = mc->precision;
    VKG_TRY(vkg_gpt2_create(mc->dev, &mc->cfg, &o, &s->model));
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

vkg_status vkg_strategy_build(vkg_strategy *s, const vkg_strategy_model *mc)
{
    VKG_CHECK(!s->model, VKG_ERR_STATE, "the strategy's model is built already");
    s->mc = *mc;
    if (s->vt->build)
        return s->vt->build(s);
    const vkg_device_info *info = vkg_device_get_info(mc->dev);
    vkg_plan_opts po = {.recompute = mc->recompute,
                        .precision = mc->precision,
                        .max_allocation = info->max_allocation_bytes};
    VKG_TRY(vkg_strategy_check_fit(&mc->cfg, vkg_job_rank_batch(s->job), mc->T, mc->accum_steps, 1,
                                   NULL, 0, &po, 0, info->device_local_bytes));
    return vkg__strategy_whole_build(s, vkg_gpt2_whole(&mc->cfg), 1, 0, 0);
}

void vkg_strategy_stage(const vkg_strategy *s, int *stage, int *first, int *last)
{
    const vkg_gpt2_part *p = s->model ? &vkg_gpt2_opts_of(s->model)->part : NULL;
    *stage = vkg_job_stage(s->job);
    *first = p ? p->first : 0;
    *last = p ? p->last : 0;
}

vkg_status vkg__strategy_share(vkg_strategy *s, float *params, float *m, float *v)
{
    size_t n = vkg_gpt2_num_params(&s->mc.cfg);
    VKG_TRY(vkg_job_broadcast(s->job, params, n * sizeof *params));
    if (m) {
        VKG_TRY(vkg_job_broadcast(s->job, m, n * sizeof *m));
        VKG_TRY(vkg_job_broadcast(s->job, v, n * sizeof *v));
    }
    return VKG_OK;
}

vkg_status vkg_strategy_load(vkg_strategy *s, float *params, float *m, float *v)
{
    VKG_CHECK(s->model, VKG_ERR_STATE, "vkg_strategy_build comes before vkg_strategy_load");
    VKG_TRY(s->vt->share(s, params, m, v));
    VKG_TRY(s->vt->setup(s));
    const vkg_gpt2_layout *lo = vkg_gpt2_layout_of(s->model);
    size_t n = lo->total;
    float *part = malloc(n * sizeof *part);
    VKG_CHECK(part, VKG_ERR_NOMEM, "no memory for %zu parameters", n);
    float *pm = m ? malloc(n * sizeof *pm) : NULL, *pv = m ? malloc(n * sizeof *pv) : NULL;
    vkg_status st = VKG_OK;
    VKG_CHECK_GOTO(st, !m || (pm && pv), VKG_ERR_NOMEM, done, "no memory for %zu moments", n);
    vkg_gpt2_part_extract(lo, params, part);
    VKG_TRY_GOTO(st, vkg_gpt2_set_params(s->model, part), done);
    if (m) { /* the moments this rank's optimizer holds (a shard of them under ZeRO-1) */
        size_t first, count;
        vkg_adamw_moment_range(s->opt, &first, &count);
        vkg_gpt2_part_extract(lo, m, pm);
        vkg_gpt2_part_extract(lo, v, pv);
        VKG_TRY_GOTO(st, vkg_adamw_set_moments(s->opt, pm + first, pv + first), done);
    }
done:
    free(part), free(pm), free(pv);
    return st;
}

size_t vkg_strategy_activation_bytes(const vkg_strategy *s)
{
    return s->model ? vkg_gpt2_activation_bytes(s->model) : 0;
}

int vkg_strategy_spans(const vkg_strategy *s, const vkg_span **spans)
{
    return s->vt->spans ? s->vt->spans(s, spans) : 0;
}

size_t vkg_strategy_device_bytes(const vkg_strategy *s)
{
    return (s->model ? vkg_gpt2_device_bytes(s->model) : 0) +
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
    return s->zero ? 1 : 0;
}

vkg_status vkg_strategy_step(vkg_strategy *s, vkg_data_t *data, const vkg_strategy_step_in *in,
                             vkg_strategy_step_out *out)
{
    VKG_CHECK(s->model, VKG_ERR_STATE, "no model (vkg_strategy_build)");
    if (s->vt->step)
        return s->vt->step(s, data, in, out);
    memset(out, 0, sizeof *out);
    int accum = s->mc.accum_steps;
    double loss = 0.0;
    VKG_TRY(vkg_gpt2_zero_grad(s->model));
    for (int a = 0; a < accum; a++) {
        float l;
        VKG_TRY(vkg_job_data_next(s->job, data, s->mc.T, s->inputs, s->targets));
        if (a == accum - 1) /* only the last one may talk */
            VKG_TRY(s->vt->last_micro(s, &l));
        else
            VKG_TRY(vkg_gpt2_forward_backward(s->model, s->inputs, s->targets, &l));
        loss += l;
    }
    loss /= accum;
    int stop = in->stop;
    VKG_TRY(s->vt->reduce(s, &loss, &stop, out));
    float sumsq = 0.0f;
    if (s->vt->norm)
        VKG_TRY(s->vt->norm(s, &sumsq, out));
    else
        VKG_TRY(vkg_adamw_grad_sumsq(s->opt, &sumsq));
    /* The loss and the sum of squares are the job's, the same on every rank: all skip alike. */
    out->skipped = !isfinite(loss) || !isfinite(sumsq);
    if (!out->skipped)
        VKG_TRY(vkg_adamw_update(s->opt, in->lr, in->t, in->grad_clip, sumsq));
    if (s->vt->finish && !out->skipped)
        VKG_TRY(s->vt->finish(s, out));
    out->loss = (float)loss;
    out->grad_norm = sqrtf(sumsq);
    out->stop = stop;
    return VKG_OK;
}

vkg_status vkg_strategy_eval(vkg_strategy *s, vkg_data_t *data, int n, float *loss)
{
    VKG_CHECK(s->model, VKG_ERR_STATE, "no model (vkg_strategy_build)");
    if (s->vt->eval)
        return s->vt->eval(s, data, n, loss);
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        float l;
        uint64_t nb = vkg_data_num_batches(data);
        VKG_TRY(vkg_job_data_read(s->job, data, nb ? (uint64_t)i % nb : 0, s->mc.T, s->inputs,
                                  s->targets));
        VKG_TRY(vkg_gpt2_forward(s->model, s->inputs, s->targets, &l));
        sum += l;
    }
    sum /= n;
    VKG_TRY(s->vt->mean(s, &sum));
    *loss = (float)sum;
    return VKG_OK;
}

vkg_status vkg_strategy_logits(vkg_strategy *s, const int32_t *inputs, int b, int t, float *row)
{
    VKG_CHECK(s->model, VKG_ERR_STATE, "no model (vkg_strategy_build)");
    if (s->vt->logits)
        return s->vt->logits(s, inputs, b, t, row);
    VKG_TRY(vkg_gpt2_forward(s->model, inputs, NULL, NULL));
    return vkg_gpt2_logits_row(s->model, b, t, row);
}

vkg_status vkg_strategy_gather(vkg_strategy *s, float *params, float *m, float *v)
{
    VKG_CHECK(s->model, VKG_ERR_STATE, "no model (vkg_strategy_build)");
    if (s->vt->gather)
        return s->vt->gather(s, params, m, v);
    const vkg_gpt2_layout *lo = vkg_gpt2_layout_of(s->model);
    size_t n = lo->total;
    float *buf = malloc(n * sizeof *buf), *bv = m ? malloc(n * sizeof *bv) : NULL;
    vkg_status st = VKG_OK;
    VKG_CHECK_GOTO(st, buf && (!m || bv), VKG_ERR_NOMEM, done, "no memory for %zu parameters", n);
    if (params) {
        VKG_TRY_GOTO(st, vkg_gpt2_get_params(s->model, buf), done);
        vkg_gpt2_part_insert(lo, buf, params);
    }
    if (m) {
        size_t first, count;
        vkg_adamw_moment_range(s->opt, &first, &count);
        VKG_TRY_GOTO(st, vkg_adamw_get_moments(s->opt, buf + first, bv + first), done);
        vkg_gpt2_part_insert(lo, buf, m);
        vkg_gpt2_part_insert(lo, bv, v);
    }
done:
    free(buf), free(bv);
    return st;
}
