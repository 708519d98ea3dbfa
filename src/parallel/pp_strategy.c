/* The pipeline strategy (DESIGN.md section 6), composed with data parallelism: the job's ranks
 * are S stages of dp ranks each, stage by stage (rank = stage x dp + replica), so that a stage's
 * data-parallel group sits on neighbouring ranks. Each rank holds one model part (its stage's
 * layers; stage 0 the embeddings, the last stage the head and a copy of the tied embedding) and
 * runs the step's micro-batches by its schedule (pp_schedule.c): activations go to the next stage
 * and their gradients back by tagged point-to-point messages. The strategy's gradient reducer
 * (reducer.h, created over the stage's data-parallel group) sums the stage's gradients over that
 * group, per bucket while the device runs the stage's last backward (1F1B and GPipe with 2 or more
 * replicas; the input's gradient leaves for the previous stage as soon as the device has it) or
 * after it, then the tied embedding's two copies' gradients over the first and last stage
 * (Megatron's scheme: both copies get the same update), the squared norm over the stages (the tied
 * embedding counted once), then AdamW. The loss is the last stage's, shared with every rank. With
 * --zero 1 the stage's parameters are cut into dp shards at its norm's partial sums (shards.h; on
 * the last stage the tied copy at the first stage's cuts, so that both stages' rank r hold the same
 * piece of it): the reducer reduce-scatters the gradient over the stage's group (each rank's shard
 * summed, bitwise what the allreduce gives there), the tied piece is summed over the tie group,
 * each rank adds its shard's partial sums of the norm and the group gathers them (the stage's norm,
 * bitwise the unsharded one), each rank's AdamW holds and updates its shard alone, and the
 * parameters (and, for checkpoints, the moments) are allgathered over the group. The moments'
 * memory is divided by dp; the gradient's bytes are a reduce-scatter's. With bf16 exchange
 * (grad_dtype) the reducer's group sum is the group's bf16 allreduce (each chunk sent to its owner,
 * summed in fp32 in group order, rounded once, gathered back): half the bytes of the fp32 ring; the
 * tied embedding's sum over the first and last stage stays fp32. Under --sync diloco each replica's
 * pipeline trains alone: nothing is summed over the stage's group (the tied embedding's two copies
 * still are over the tie group), the norm is the replica's, and after the update the stage's outer
 * rounds run over the stage's group (diloco.c). Not here: the schedules (pp_schedule.c), the
 * reduction (reducer.c), groups (transport/). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os/clock.h"
#include "base/error.h"
#include "parallel/pp_schedule.h"
#include "parallel/shards.h"
#include "parallel/tied.h"
#include "parallel/whole.h"

#define TAG_ACT 0x10000000u  /* | micro-batch: an activation to the next stage */
#define TAG_GRAD 0x20000000u /* | micro-batch: its gradient to the previous stage */
#define TAG_EVAL 0x30000000u /* | batch: evaluation and sampling activations */
#define TAG_PART 0x40000000u /* | what: checkpoint gathering */

struct vkg_pp {
    int S, stage, replica, kind; /* the job's layout's */
    int zero;                    /* --zero 1: the moments sharded over the stage's group */
    vkg_shards z;                /* with zero: the shards of the stage's parameters */
    uint64_t hash;               /* with zero: of the layout (FNV-1a; vkg_strategy_zero_hash) */
    const int *req;              /* --pp-layers (S counts: s->pp_layers) or NULL */
    int first, last;             /* this stage's layers */
    vkg_group_t *dpg;            /* the job's groups: this stage's data-parallel group (dp > 1), */
    vkg_group_t *pipe;           /* this replica's stages, in order, */
    vkg_group_t *tie;            /* {first stage, last stage} of this replica's pipeline */
    const vkg_job_layout *lay;
    int prev, next;    /* communicator ranks of the neighbouring stages, -1 at the ends */
    float *bnd;        /* (B*T*C) a boundary on its way (bf16 activations use half) */
    int32_t *in, *tgt; /* (M, B*T) the step's tokens */
    float *grads;      /* (param count) host copy for checkpoint gathering */
    vkg_pp_action *plan;
    unsigned eval_seq; /* evaluation and sampling forwards so far (their tags) */
};

static int rank_of(const struct vkg_pp *p, int stage)
{
    return vkg_job_rank_of(p->lay, stage, p->replica);
}

vkg_status vkg__pp_create(vkg_strategy *s, const vkg_strategy_config *c)
{
    struct vkg_pp *p = calloc(1, sizeof *p);
    VKG_CHECK(p, VKG_ERR_NOMEM, "no memory for the pipeline");
    s->impl = p;
    p->lay = vkg_job_layout_get(s->job);
    p->S = p->lay->pp;
    VKG_CHECK(p->S <= 64, VKG_ERR_INVALID_ARG, "--pp %d: at most 64 pipeline stages", p->S);
    p->stage = p->lay->stage;
    p->replica = p->lay->replica;
    p->kind = c->par.pp_schedule;
    p->zero = c->par.zero;
    VKG_CHECK(p->kind == VKG_PP_1F1B || p->kind == VKG_PP_GPIPE || p->kind == VKG_PP_ZBH1,
              VKG_ERR_INVALID_ARG, "pipeline schedule %d is not 1f1b, gpipe or zb-h1", p->kind);
    if (c->par.pp_layers) {
        VKG_CHECK(c->par.pp_layers_count == p->S, VKG_ERR_INVALID_ARG,
                  "--pp-layers lists %d stages for --pp %d: give one layer count per stage",
                  c->par.pp_layers_count, p->S);
        memcpy(s->pp_layers, c->par.pp_layers, (size_t)p->S * sizeof *s->pp_layers);
        p->req = s->pp_layers;
    }
    p->dpg = vkg_job_dp_group(s->job);
    p->pipe = vkg_job_pipe_group(s->job);
    p->tie = vkg_job_tie_group(s->job);
    p->prev = p->stage > 0 ? rank_of(p, p->stage - 1) : -1;
    p->next = p->stage < p->S - 1 ? rank_of(p, p->stage + 1) : -1;
    return VKG_OK;
}

static void free_impl(vkg_strategy *s)
{
    struct vkg_pp *p = s->impl;
    if (!p)
        return;
    free(p->bnd), free(p->in), free(p->tgt), free(p->grads), free(p->plan);
    vkg__shards_free(&p->z);
    free(s->spans);
    s->spans = NULL, s->span_cap = s->nspans = 0;
    free(p);
    s->impl = NULL;
}

/* --zero 1: the stage's parameters cut into the data-parallel group's dp shards at its norm's
 * partial sums (the last stage's norm starts past its tied copy, which takes the first stage's
 * cuts: shards.h); this rank's. */
static vkg_status shard(vkg_strategy *s, const vkg_model_part *part, size_t *first, size_t *count)
{
    struct vkg_pp *p = s->impl;
    vkg_model_layout lo, lo0;
    vkg_model_part_layout(&s->mc.cfg, part, &lo);
    int dp = vkg_job_dp(s->job), nlead = 0;
    size_t from = 0, lead[64 + 1], pb[64 + 1];
    VKG_CHECK(dp <= 64, VKG_ERR_INVALID_ARG, "--zero 1: at most 64 data-parallel ranks a stage");
    if (p->stage == p->S - 1) { /* the tied copy: cut where the first stage cuts it */
        from = lo.tied;
        VKG_TRY(vkg__stage_layout(s, 0, &lo0));
        VKG_TRY(vkg__shards_cut(lo0.total, 0, dp, NULL, 0, lead, pb));
        while (nlead < dp - 1 && lead[nlead + 1] < from)
            nlead++;
        memmove(lead, lead + 1, (size_t)nlead * sizeof *lead);
    }
    VKG_TRY(vkg__shards_init(&p->z, lo.total, from, dp, p->replica, lead, nlead));
    /* the same on every rank of the job (stages hold different parameter counts): the shards
     * follow from the split and dp, which the job agrees on */
    p->hash = 0xcbf29ce484222325ull;
    uint64_t key[3] = {1, (uint64_t)p->S, (uint64_t)dp};
    for (int i = 0; i < 3; i++)
        p->hash = (p->hash ^ key[i]) * 0x100000001b3ull;
    *first = p->z.bounds[p->replica];
    *count = p->z.bounds[p->replica + 1] - *first;
    return VKG_OK;
}

uint64_t vkg__pp_zero_hash(const vkg_strategy *s)
{
    const struct vkg_pp *p = s->vt == &vkg__strategy_pp ? s->impl : NULL;
    return p && p->zero ? p->hash : 0;
}

static vkg_status build(vkg_strategy *s)
{
    struct vkg_pp *p = s->impl;
    const vkg_model_config *cfg = &s->mc.cfg;
    int layers[64], M = s->mc.accum_steps;
    VKG_TRY(vkg_pp_split(cfg, s->mc.T, p->S, p->req, layers));
    VKG_CHECK(p->kind == VKG_PP_GPIPE || M >= p->S, VKG_ERR_INVALID_ARG,
              "%s needs at least as many micro-batches as stages: the step has %d "
              "(--total-batch / (data-parallel ranks x batch x seq)) for --pp %d; raise "
              "--total-batch or use --pp-schedule gpipe",
              p->kind == VKG_PP_ZBH1 ? "ZB-H1" : "1F1B", M, p->S);
    vkg_model_part part = vkg_pp_part(layers, p->S, p->stage);
    p->first = part.first, p->last = part.last;
    int slots = vkg_pp_slots(p->kind, p->S, p->stage, M);
    const vkg_device_info *info = vkg_device_get_info(s->mc.dev);
    vkg_plan_opts po = {.recompute = s->mc.recompute,
                        .precision = s->mc.precision,
                        .max_allocation = info->max_allocation_bytes};
    VKG_TRY(vkg_strategy_check_fit(cfg, vkg_job_rank_batch(s->job), s->mc.T, M, p->S, p->req,
                                   p->kind, &po, p->stage, info->device_local_bytes));
    size_t first = 0, count = 0;
    if (p->zero)
        VKG_TRY(shard(s, &part, &first, &count));
    vkg_status st = vkg__whole_build_part(s, part, slots, p->kind == VKG_PP_ZBH1, first, count);
    if (st != VKG_OK) /* name the stage whose share does not fit */
        return vkg__error_wrap(st,
                               "pipeline stage %d of %d (layers [%d, %d), %d activation "
                               "slots)",
                               p->stage, p->S, p->first, p->last, slots);
    VKG_TRY(vkg_tied_count_once(s->job, s->model, s->opt));
    if (p->zero) { /* the norm by the shards, the gradient reduce-scattered over them */
        VKG_TRY(vkg__shards_shard_norm(&p->z, s->opt));
        s->rc.shards = p->z.bounds;
        s->shards = &p->z;
    }
    size_t bt = (size_t)vkg_job_rank_batch(s->job) * (size_t)s->mc.T;
    p->bnd = malloc(bt * (size_t)cfg->channels * sizeof *p->bnd);
    p->in = malloc((size_t)M * bt * sizeof *p->in);
    p->tgt = malloc((size_t)M * bt * sizeof *p->tgt);
    p->grads = malloc(vkg_model_param_count(s->model) * sizeof *p->grads);
    p->plan = malloc((size_t)vkg_pp_actions(p->kind, M) * sizeof *p->plan);
    s->span_cap = 3 * vkg_pp_actions(p->kind, M) + 8; /* recv, compute, send per action; tail */
    s->spans = malloc((size_t)s->span_cap * sizeof *s->spans);
    VKG_CHECK(p->bnd && p->in && p->tgt && p->grads && p->plan && s->spans, VKG_ERR_NOMEM,
              "no memory for the pipeline's buffers");
    vkg_pp_schedule(p->kind, p->S, p->stage, M, p->plan);
    /* the stage's data-parallel group, then the tie group; DiLoCo's replicas sum nothing over
     * the group (only the tied embedding's two copies over the tie group) */
    s->rc.group = s->own_grads ? NULL : p->dpg;
    for (int i = 0; i < vkg_pp_actions(p->kind, M); i++) /* the last backward's slot */
        if (p->plan[i].op == VKG_PP_OP_B && p->plan[i].micro == M - 1)
            s->rc.backward_slot = p->plan[i].slot;
    return vkg_grad_reducer_create(s->job, s->model, &s->rc, &s->reducer);
}

/* Boundary `out` of slot to communicator rank peer, or from peer into boundary `in`. */
static vkg_status send_bnd(vkg_strategy *s, vkg_model_boundary out, int slot, int peer,
                           uint32_t tag)
{
    struct vkg_pp *p = s->impl;
    VKG_TRY(vkg_model_boundary_read(s->model, out, slot, p->bnd));
    return vkg_comm_send(vkg_job_comm(s->job), peer, tag, p->bnd,
                         vkg_model_boundary_bytes(s->model, out));
}

static vkg_status recv_bnd(vkg_strategy *s, vkg_model_boundary in, int slot, int peer, uint32_t tag)
{
    struct vkg_pp *p = s->impl;
    VKG_TRY(vkg_comm_recv(vkg_job_comm(s->job), peer, tag, p->bnd,
                          vkg_model_boundary_bytes(s->model, in)));
    return vkg_model_boundary_write(s->model, in, slot, p->bnd);
}

/* The end of an overlapped last backward (vkg_grad_reducer_last_backward's callback): its span,
 * then the input's gradient to the previous stage. */
typedef struct last_backward {
    vkg_strategy *s;
    const vkg_pp_action *a;
    double t0, sent; /* the backward's start; when DIN had left */
} last_backward;

static vkg_status last_backward_done(void *ctx)
{
    last_backward *lb = ctx;
    struct vkg_pp *p = lb->s->impl;
    vkg__span(lb->s, VKG_SPAN_BACKWARD, lb->a->micro, lb->t0);
    lb->sent = vkg_os_now_ms();
    if (p->prev < 0)
        return VKG_OK;
    VKG_TRY(
        send_bnd(lb->s, VKG_MODEL_DIN, lb->a->slot, p->prev, TAG_GRAD | (uint32_t)lb->a->micro));
    vkg__span(lb->s, VKG_SPAN_SEND, lb->a->micro, lb->sent);
    lb->sent = vkg_os_now_ms();
    return VKG_OK;
}

/* One action of the schedule (its spans recorded); *loss accumulates the last stage's
 * micro-batch losses. */
static vkg_status run_action(vkg_strategy *s, const vkg_pp_action *a, double *loss)
{
    struct vkg_pp *p = s->impl;
    size_t bt = (size_t)vkg_job_rank_batch(s->job) * (size_t)s->mc.T;
    double t0 = vkg_os_now_ms();
    if (a->op == VKG_PP_OP_W) { /* ZB-H1's weight pass: no communication */
        VKG_TRY(vkg_model_backward_weight(s->model, a->slot));
        vkg__span(s, VKG_SPAN_WEIGHT, a->micro, t0);
        return VKG_OK;
    }
    if (a->op == VKG_PP_OP_F) {
        if (p->prev >= 0) {
            VKG_TRY(recv_bnd(s, VKG_MODEL_IN, a->slot, p->prev, TAG_ACT | (uint32_t)a->micro));
            vkg__span(s, VKG_SPAN_RECV, a->micro, t0);
            t0 = vkg_os_now_ms();
        }
        float l = 0.0f;
        VKG_TRY(vkg_model_forward_train(s->model, a->slot,
                                        p->prev < 0 ? p->in + (size_t)a->micro * bt : NULL,
                                        p->next < 0 ? p->tgt + (size_t)a->micro * bt : NULL, &l));
        vkg__span(s, VKG_SPAN_FORWARD, a->micro, t0);
        *loss += l;
        if (p->next >= 0) {
            t0 = vkg_os_now_ms();
            VKG_TRY(send_bnd(s, VKG_MODEL_OUT, a->slot, p->next, TAG_ACT | (uint32_t)a->micro));
            vkg__span(s, VKG_SPAN_SEND, a->micro, t0);
        }
        return VKG_OK;
    }
    if (p->next >= 0) {
        VKG_TRY(recv_bnd(s, VKG_MODEL_DOUT, a->slot, p->next, TAG_GRAD | (uint32_t)a->micro));
        vkg__span(s, VKG_SPAN_RECV, a->micro, t0);
        t0 = vkg_os_now_ms();
    }
    if (a->micro == s->mc.accum_steps - 1 && vkg_grad_reducer_bucket_count(s->reducer) > 0) {
        /* the step's last backward: its buckets reduced while the device runs the rest */
        last_backward lb = {.s = s, .a = a, .t0 = t0};
        VKG_TRY(vkg_grad_reducer_last_backward(s->reducer, last_backward_done, &lb));
        vkg__span(s, VKG_SPAN_ALLREDUCE, -1,
                  lb.sent); /* the reduction left after the device's end */
        return VKG_OK;
    }
    if (p->kind == VKG_PP_ZBH1)
        VKG_TRY(vkg_model_backward_input(s->model, a->slot));
    else
        VKG_TRY(vkg_model_backward(s->model, a->slot));
    vkg__span(s, VKG_SPAN_BACKWARD, a->micro, t0);
    if (p->prev >= 0) {
        t0 = vkg_os_now_ms();
        VKG_TRY(send_bnd(s, VKG_MODEL_DIN, a->slot, p->prev, TAG_GRAD | (uint32_t)a->micro));
        vkg__span(s, VKG_SPAN_SEND, a->micro, t0);
    }
    return VKG_OK;
}

/* The step's micro-batches by the schedule, then the stage's gradient summed over its group
 * (and the tied embedding's two copies over the tie group); *part: the last stage's token-weighted
 * loss, 0 on the others. */
static vkg_status passes(vkg_strategy *s, vkg_data_t *data, const vkg_strategy_step_in *in,
                         double *part, vkg_strategy_step_out *out)
{
    (void)in;
    struct vkg_pp *p = s->impl;
    int M = s->mc.accum_steps;
    size_t bt = (size_t)vkg_job_rank_batch(s->job) * (size_t)s->mc.T;
    for (int i = 0; i < M; i++) /* every stage reads its replica's micro-batches */
        VKG_TRY(vkg_job_data_next(s->job, data, s->mc.T, p->in + (size_t)i * bt,
                                  p->tgt + (size_t)i * bt));
    VKG_TRY(vkg_model_zero_grad(s->model));
    double loss = 0.0;
    for (int i = 0; i < vkg_pp_actions(p->kind, M); i++)
        VKG_TRY(run_action(s, &p->plan[i], &loss));
    loss /= M;
    double t0 = vkg_os_now_ms();
    VKG_TRY(vkg_grad_reducer_reduce(s->reducer, &out->comm_ms, &out->exposed_comm_ms));
    vkg__span(s, VKG_SPAN_ALLREDUCE, -1, t0);
    *part = p->next < 0 ? loss * (double)vkg_job_loss_scale(s->job) : 0.0;
    return VKG_OK;
}

/* A forward of slot 0 through the pipeline: the first stage's tokens, the last stage's targets
 * (NULL: logits only); *loss gets the last stage's mean loss. */
static vkg_status forward(vkg_strategy *s, const int32_t *inputs, const int32_t *targets,
                          float *loss)
{
    struct vkg_pp *p = s->impl;
    uint32_t tag = TAG_EVAL | (p->eval_seq++ & 0xFFFFFFu);
    if (p->prev >= 0)
        VKG_TRY(recv_bnd(s, VKG_MODEL_IN, 0, p->prev, tag));
    VKG_TRY(vkg_model_forward(s->model, p->prev < 0 ? inputs : NULL, p->next < 0 ? targets : NULL,
                              loss));
    if (p->next >= 0)
        VKG_TRY(send_bnd(s, VKG_MODEL_OUT, 0, p->next, tag));
    return VKG_OK;
}

static vkg_status eval(vkg_strategy *s, vkg_data_t *data, int n, float *loss)
{
    struct vkg_pp *p = s->impl;
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        float l = 0.0f;
        uint64_t nb = vkg_data_num_batches(data);
        VKG_TRY(vkg_job_data_read(s->job, data, nb ? (uint64_t)i % nb : 0, s->mc.T, p->in, p->tgt));
        VKG_TRY(forward(s, p->in, p->tgt, &l));
        sum += l;
    }
    sum /= n;
    float x = p->next < 0 ? (float)(sum * (double)vkg_job_loss_scale(s->job)) : 0.0f;
    VKG_TRY(vkg_job_allreduce_sum(s->job, &x, 1));
    *loss = x;
    return VKG_OK;
}

static vkg_status logits(vkg_strategy *s, const int32_t *inputs, int b, int t, float *row)
{
    struct vkg_pp *p = s->impl;
    VKG_TRY(forward(s, inputs, NULL, NULL));
    if (p->next < 0)
        VKG_TRY(vkg_model_logits_row(s->model, b, t, row));
    return vkg_group_broadcast(p->pipe, row, (size_t)s->mc.cfg.padded_vocab_size * sizeof *row,
                               p->S - 1);
}

/* Rank 0 collects every stage's part (replica 0's) into the whole model's arrays. */
static vkg_status gather(vkg_strategy *s, float *params, float *m, float *v)
{
    struct vkg_pp *p = s->impl;
    vkg_comm_t *comm = vkg_job_comm(s->job);
    const vkg_model_layout *lo = vkg_model_layout_of(s->model);
    int rank = vkg_job_rank(s->job);
    if (p->replica != 0 && !p->zero)
        return VKG_OK;
    size_t n = lo->total, first = p->zero ? p->z.bounds[p->replica] : 0;
    float *bufs[3] = {p->grads, malloc(n * sizeof(float)), malloc(n * sizeof(float))};
    vkg_status st = VKG_OK;
    VKG_CHECK_GOTO(st, bufs[1] && bufs[2], VKG_ERR_NOMEM, done, "no memory for %zu moments", n);
    VKG_TRY_GOTO(st, vkg_model_get_params(s->model, bufs[0]), done);
    VKG_TRY_GOTO(st, vkg_adamw_get_moments(s->opt, bufs[1] + first, bufs[2] + first), done);
    if (p->zero) { /* the stage's moments from their shards' owners; then replica 0 goes on */
        VKG_TRY_GOTO(st, vkg__shards_share(&p->z, p->dpg, bufs[1]), done);
        VKG_TRY_GOTO(st, vkg__shards_share(&p->z, p->dpg, bufs[2]), done);
        if (p->replica != 0)
            goto done;
    }
    if (rank != 0) { /* stage leaders send params, m, v to rank 0 */
        for (int k = 0; st == VKG_OK && k < 3; k++)
            st = vkg_comm_send(comm, 0, TAG_PART | (uint32_t)k, bufs[k], n * sizeof(float));
        goto done;
    }
    float *whole[3] = {params, m, v};
    for (int stage = p->S - 1; st == VKG_OK && stage >= 0; stage--) {
        vkg_model_layout sl;
        VKG_TRY_GOTO(st, vkg__stage_layout(s, stage, &sl), done);
        float *tmp = stage ? malloc(sl.total * sizeof *tmp) : NULL;
        VKG_CHECK_GOTO(st, !stage || tmp, VKG_ERR_NOMEM, done, "no memory for stage %d", stage);
        for (int k = 0; st == VKG_OK && k < 3; k++) {
            if (stage)
                st = vkg_comm_recv(comm, rank_of(p, stage), TAG_PART | (uint32_t)k, tmp,
                                   sl.total * sizeof *tmp);
            if (st == VKG_OK && whole[k])
                vkg_model_part_insert(&sl, stage ? tmp : bufs[k], whole[k]);
        }
        free(tmp);
    }
done:
    free(bufs[1]), free(bufs[2]);
    return st;
}

const vkg_strategy_vt vkg__strategy_pp = {
    .name = "pp",
    .build = build,
    .passes = passes,
    .eval = eval,
    .logits = logits,
    .gather = gather,
    .free_impl = free_impl,
};
