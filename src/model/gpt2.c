/* GPT-2 on a device: memory plan, parameter transfers and running the recorded command lists.
 * The recording itself (forward, backward, update) is in gpt2_record.c. */
#include "model/gpt2_internal.h"

#include <stdlib.h>
#include <string.h>

vkg_gpt2_opts vkg_gpt2_opts_default(void)
{
    vkg_gpt2_opts o = {.B = 4,
                       .T = 64,
                       .accum_steps = 1,
                       .loss_scale = 1.0f,
                       .beta1 = 0.9f,
                       .beta2 = 0.95f,
                       .eps = 1e-8f,
                       .weight_decay = 0.0f};
    return o;
}

/* Element counts of the activation tensors, in the order of the vkg_gpt2_acts fields. */
static void act_sizes(const vkg_gpt2_config *cfg, int B, int T, size_t s[VKG_GPT2_NUM_ACTS])
{
    size_t L = (size_t)cfg->num_layers, C = (size_t)cfg->channels, NH = (size_t)cfg->num_heads;
    size_t BT = (size_t)B * (size_t)T, Vp = (size_t)cfg->padded_vocab_size;
    size_t i = 0;
    s[i++] = BT * C;                                     /* encoded */
    s[i++] = L * BT * C;                                 /* ln1 */
    s[i++] = L * BT;                                     /* ln1_mean */
    s[i++] = L * BT;                                     /* ln1_rstd */
    s[i++] = L * BT * 3 * C;                             /* qkv */
    s[i++] = L * BT * C;                                 /* atty */
    s[i++] = L * (size_t)B * NH * (size_t)T * (size_t)T; /* att */
    s[i++] = L * BT * C;                                 /* attproj */
    s[i++] = L * BT * C;                                 /* residual2 */
    s[i++] = L * BT * C;                                 /* ln2 */
    s[i++] = L * BT;                                     /* ln2_mean */
    s[i++] = L * BT;                                     /* ln2_rstd */
    s[i++] = L * BT * 4 * C;                             /* fch */
    s[i++] = L * BT * 4 * C;                             /* fch_gelu */
    s[i++] = L * BT * C;                                 /* fcproj */
    s[i++] = L * BT * C;                                 /* residual3 */
    s[i++] = BT * C;                                     /* lnf */
    s[i++] = BT;                                         /* lnf_mean */
    s[i++] = BT;                                         /* lnf_rstd */
    s[i++] = BT * Vp; /* logits (dlogits in place after the loss) */
    s[i++] = BT;      /* losses */
}

/* Gradient activations: the same shapes as the forward activations they belong to. */
static void grad_act_sizes(const vkg_gpt2_config *cfg, int B, int T,
                           size_t s[VKG_GPT2_NUM_GRAD_ACTS])
{
    size_t L = (size_t)cfg->num_layers, C = (size_t)cfg->channels;
    size_t BT = (size_t)B * (size_t)T;
    size_t i = 0;
    s[i++] = BT * C;         /* dencoded */
    s[i++] = L * BT * C;     /* dln1 */
    s[i++] = L * BT * 3 * C; /* dqkv */
    s[i++] = L * BT * C;     /* datty */
    s[i++] = L * BT * C;     /* dattproj */
    s[i++] = L * BT * C;     /* dresidual2 */
    s[i++] = L * BT * C;     /* dln2 */
    s[i++] = L * BT * 4 * C; /* dfch */
    s[i++] = L * BT * 4 * C; /* dfch_gelu */
    s[i++] = L * BT * C;     /* dfcproj */
    s[i++] = L * BT * C;     /* dresidual3 */
    s[i++] = BT * C;         /* dlnf */
}

static size_t plan_bytes(const size_t *sizes, int n)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += (sizes[i] * 4 + 255) / 256 * 256;
    return total;
}

static vkg_status alloc_list(vkg_arena *a, const size_t *sizes, int n, vkg_tensor *out)
{
    for (int i = 0; i < n; i++)
        VKG_TRY(vkg_arena_alloc(a, (sizes[i] ? sizes[i] : 1) * 4, &out[i]));
    return VKG_OK;
}

static vkg_status check_opts(const vkg_gpt2_config *cfg, const vkg_gpt2_opts *o)
{
    VKG_TRY(vkg_gpt2_config_validate(cfg));
    VKG_CHECK(o->B > 0, VKG_ERR_INVALID_ARG, "batch size B must be > 0, got %d", o->B);
    VKG_CHECK(o->T > 0 && o->T <= cfg->max_seq_len, VKG_ERR_INVALID_ARG,
              "sequence length T must be in [1, %d] (the model's max_seq_len), got %d",
              cfg->max_seq_len, o->T);
    VKG_CHECK(o->accum_steps > 0, VKG_ERR_INVALID_ARG, "accumulation steps must be > 0, got %d",
              o->accum_steps);
    size_t BT = (size_t)o->B * (size_t)o->T;
    VKG_CHECK(BT * (size_t)cfg->padded_vocab_size <= 0xFFFFFFFFu &&
                  BT * 4 * (size_t)cfg->channels * (size_t)cfg->num_layers <= 0xFFFFFFFFu,
              VKG_ERR_INVALID_ARG, "B*T = %zu is too large for 32-bit shader indices", BT);
    return VKG_OK;
}

vkg_status vkg_gpt2_create(vkg_device_t *dev, const vkg_gpt2_config *cfg, const vkg_gpt2_opts *opts,
                           vkg_gpt2 **out)
{
    vkg_gpt2_opts o = opts ? *opts : vkg_gpt2_opts_default();
    VKG_TRY(check_opts(cfg, &o));
    vkg_status st = VKG_OK;
    vkg_gpt2 *m = calloc(1, sizeof *m);
    VKG_CHECK(m, VKG_ERR_NOMEM, "no memory for the model");
    m->dev = dev;
    m->cfg = *cfg;
    m->opts = o;
    m->nparams = vkg_gpt2_num_params(cfg);
    vkg_gpt2_param_sizes(cfg, m->param_sizes);

    size_t BT = (size_t)o.B * (size_t)o.T, C = (size_t)cfg->channels;
    size_t asz[VKG_GPT2_NUM_ACTS], gsz[VKG_GPT2_NUM_GRAD_ACTS];
    act_sizes(cfg, o.B, o.T, asz);
    grad_act_sizes(cfg, o.B, o.T, gsz);
    size_t dpre = (size_t)o.B * (size_t)cfg->num_heads * (size_t)o.T * (size_t)o.T;
    size_t nsumsq = vkg_op_sumsq_scratch_elems(dev, &m->nparams, 1);
    size_t scratch[] = {BT * 4 * C,      dpre, nsumsq, 4 /* sumsq result */, 4 /* step params */,
                        BT /* inputs */, BT /* targets */};
    enum { NSCRATCH = sizeof scratch / sizeof scratch[0] };
    size_t pbytes = (m->nparams * 4 + 255) / 256 * 256;

    VKG_TRY_GOTO(st, vkg_arena_create(dev, pbytes, "params", &m->arena_params), fail);
    VKG_TRY_GOTO(st, vkg_arena_create(dev, pbytes, "grads", &m->arena_grads), fail);
    VKG_TRY_GOTO(st, vkg_arena_create(dev, 2 * pbytes, "adamw", &m->arena_adam), fail);
    VKG_TRY_GOTO(st,
                 vkg_arena_create(dev,
                                  plan_bytes(asz, VKG_GPT2_NUM_ACTS) +
                                      plan_bytes(gsz, VKG_GPT2_NUM_GRAD_ACTS) +
                                      plan_bytes(scratch, NSCRATCH),
                                  "activations", &m->arena_acts),
                 fail);
    VKG_TRY_GOTO(st, vkg_arena_alloc(m->arena_params, m->nparams * 4, &m->params), fail);
    VKG_TRY_GOTO(st, vkg_arena_alloc(m->arena_grads, m->nparams * 4, &m->grads), fail);
    VKG_TRY_GOTO(st, vkg_arena_alloc(m->arena_adam, m->nparams * 4, &m->mom1), fail);
    VKG_TRY_GOTO(st, vkg_arena_alloc(m->arena_adam, m->nparams * 4, &m->mom2), fail);
    size_t off = 0;
    for (int i = 0; i < VKG_GPT2_NUM_PARAM_TENSORS; i++) {
        size_t b = m->param_sizes[i] * 4;
        m->p[i] = vkg_tensor_view(m->params, off, b);
        m->g[i] = vkg_tensor_view(m->grads, off, b);
        m->m1[i] = vkg_tensor_view(m->mom1, off, b);
        m->m2[i] = vkg_tensor_view(m->mom2, off, b);
        off += b;
    }
    VKG_TRY_GOTO(st, alloc_list(m->arena_acts, asz, VKG_GPT2_NUM_ACTS, m->acts.t), fail);
    VKG_TRY_GOTO(st, alloc_list(m->arena_acts, gsz, VKG_GPT2_NUM_GRAD_ACTS, m->gacts.t), fail);
    vkg_tensor sc[NSCRATCH];
    VKG_TRY_GOTO(st, alloc_list(m->arena_acts, scratch, NSCRATCH, sc), fail);
    m->mm_scratch = sc[0];
    m->dpre = sc[1];
    m->sumsq_scratch = sc[2];
    m->sumsq = sc[3];
    m->step = sc[4];
    m->inputs = sc[5];
    m->targets = sc[6];
    m->gacts_start = m->gacts.t[0];
    m->gacts_count = 0;
    for (int i = 0; i < VKG_GPT2_NUM_GRAD_ACTS; i++)
        m->gacts_count = (m->gacts.t[i].offset + m->gacts.t[i].bytes - m->gacts_start.offset) / 4;
    m->gacts_start.bytes = m->gacts_count * 4;

    VKG_TRY_GOTO(st, vkg__gpt2_record(m), fail);
    *out = m;
    return VKG_OK;
fail:
    vkg_gpt2_destroy(&m);
    return st;
}

void vkg_gpt2_destroy(vkg_gpt2 **pm)
{
    vkg_gpt2 *m = pm ? *pm : NULL;
    if (!m)
        return;
    vkg__gpt2_buckets_free(m);
    for (int i = 0; i < VKG_GPT2_NUM_LISTS; i++)
        vkg_cmd_destroy(&m->lists[i]);
    vkg_arena_destroy(&m->arena_acts);
    vkg_arena_destroy(&m->arena_adam);
    vkg_arena_destroy(&m->arena_grads);
    vkg_arena_destroy(&m->arena_params);
    free(m);
    *pm = NULL;
}

const vkg_gpt2_config *vkg_gpt2_config_of(const vkg_gpt2 *m)
{
    return &m->cfg;
}

size_t vkg_gpt2_param_count(const vkg_gpt2 *m)
{
    return m->nparams;
}

size_t vkg_gpt2_device_bytes(const vkg_gpt2 *m)
{
    return vkg_arena_size(m->arena_params) + vkg_arena_size(m->arena_grads) +
           vkg_arena_size(m->arena_adam) + vkg_arena_size(m->arena_acts);
}

vkg_status vkg_gpt2_set_params(vkg_gpt2 *m, const float *params)
{
    return vkg_tensor_write(m->dev, m->params, 0, params, m->nparams * 4);
}

vkg_status vkg_gpt2_get_params(vkg_gpt2 *m, float *params)
{
    return vkg_tensor_read(m->dev, m->params, 0, params, m->nparams * 4);
}

vkg_status vkg_gpt2_get_grads(vkg_gpt2 *m, float *grads)
{
    return vkg_tensor_read(m->dev, m->grads, 0, grads, m->nparams * 4);
}

vkg_status vkg_gpt2_set_grads(vkg_gpt2 *m, const float *grads)
{
    return vkg_tensor_write(m->dev, m->grads, 0, grads, m->nparams * 4);
}

vkg_status vkg_gpt2_get_moments(vkg_gpt2 *m, float *mom1, float *mom2)
{
    VKG_TRY(vkg_tensor_read(m->dev, m->mom1, 0, mom1, m->nparams * 4));
    return vkg_tensor_read(m->dev, m->mom2, 0, mom2, m->nparams * 4);
}

vkg_status vkg_gpt2_set_moments(vkg_gpt2 *m, const float *mom1, const float *mom2)
{
    VKG_TRY(vkg_tensor_write(m->dev, m->mom1, 0, mom1, m->nparams * 4));
    return vkg_tensor_write(m->dev, m->mom2, 0, mom2, m->nparams * 4);
}

vkg_status vkg_gpt2_zero_grad(vkg_gpt2 *m)
{
    return vkg_cmd_run(m->lists[VKG_GPT2_LIST_ZERO], 0);
}

/* Check and upload a micro-batch; tokens outside [0, V) are refused with their position. */
static vkg_status upload_batch(vkg_gpt2 *m, const int32_t *inputs, const int32_t *targets)
{
    size_t BT = (size_t)m->opts.B * (size_t)m->opts.T;
    for (size_t i = 0; i < BT; i++) {
        VKG_CHECK(inputs[i] >= 0 && inputs[i] < m->cfg.vocab_size, VKG_ERR_INVALID_ARG,
                  "input token %d at position %zu is outside the vocabulary [0, %d)", inputs[i], i,
                  m->cfg.vocab_size);
        VKG_CHECK(!targets || (targets[i] >= 0 && targets[i] < m->cfg.vocab_size),
                  VKG_ERR_INVALID_ARG, "target token %d at position %zu is outside [0, %d)",
                  targets ? targets[i] : 0, i, m->cfg.vocab_size);
    }
    VKG_TRY(vkg_tensor_write(m->dev, m->inputs, 0, inputs, BT * 4));
    if (targets)
        VKG_TRY(vkg_tensor_write(m->dev, m->targets, 0, targets, BT * 4));
    return VKG_OK;
}

static vkg_status mean_loss(vkg_gpt2 *m, float *out)
{
    if (!out)
        return VKG_OK;
    size_t BT = (size_t)m->opts.B * (size_t)m->opts.T;
    float *losses = malloc(BT * sizeof *losses);
    VKG_CHECK(losses, VKG_ERR_NOMEM, "no memory for %zu losses", BT);
    vkg_status st = vkg_tensor_read(m->dev, m->acts.s.losses, 0, losses, BT * 4);
    double sum = 0.0;
    for (size_t i = 0; i < BT; i++)
        sum += losses[i];
    free(losses);
    *out = (float)(sum / (double)BT);
    return st;
}

vkg_status vkg_gpt2_forward_backward(vkg_gpt2 *m, const int32_t *inputs, const int32_t *targets,
                                     float *loss)
{
    VKG_CHECK(targets, VKG_ERR_INVALID_ARG, "forward_backward needs targets");
    VKG_TRY(upload_batch(m, inputs, targets));
    VKG_TRY(vkg_cmd_run(m->lists[VKG_GPT2_LIST_FWDBWD], 0));
    m->logits_valid = 0;
    return mean_loss(m, loss);
}

vkg_status vkg_gpt2_forward(vkg_gpt2 *m, const int32_t *inputs, const int32_t *targets, float *loss)
{
    VKG_TRY(upload_batch(m, inputs, targets));
    if (targets) {
        VKG_TRY(vkg_cmd_run(m->lists[VKG_GPT2_LIST_EVAL], 0));
        m->logits_valid = 1;
        return mean_loss(m, loss);
    }
    VKG_TRY(vkg_cmd_run(m->lists[VKG_GPT2_LIST_FWD], 0));
    m->logits_valid = 1;
    return VKG_OK;
}

vkg_status vkg_gpt2_logits_row(vkg_gpt2 *m, int b, int t, float *row)
{
    VKG_CHECK(m->logits_valid, VKG_ERR_STATE, "logits are only readable after vkg_gpt2_forward");
    VKG_CHECK(b >= 0 && b < m->opts.B && t >= 0 && t < m->opts.T, VKG_ERR_INVALID_ARG,
              "logits row (%d, %d) outside the batch (%d, %d)", b, t, m->opts.B, m->opts.T);
    size_t Vp = (size_t)m->cfg.padded_vocab_size;
    size_t off = ((size_t)b * (size_t)m->opts.T + (size_t)t) * Vp * 4;
    return vkg_tensor_read(m->dev, m->acts.s.logits, off, row, Vp * 4);
}

vkg_status vkg_gpt2_losses(vkg_gpt2 *m, float *losses)
{
    return vkg_tensor_read(m->dev, m->acts.s.losses, 0, losses,
                           (size_t)m->opts.B * (size_t)m->opts.T * 4);
}

vkg_status vkg_gpt2_update(vkg_gpt2 *m, float lr, uint32_t t, float grad_clip, float *grad_norm)
{
    VKG_CHECK(t >= 1, VKG_ERR_INVALID_ARG, "AdamW step must be >= 1, got %u", t);
    vkg_step_params sp = {.lr = lr, .t = t, .grad_clip = grad_clip, .reserved = 0.0f};
    VKG_TRY(vkg_tensor_write(m->dev, m->step, 0, &sp, sizeof sp));
    VKG_TRY(vkg_cmd_run(m->lists[VKG_GPT2_LIST_UPDATE], 0));
    if (grad_norm) {
        float sumsq;
        VKG_TRY(vkg_tensor_read(m->dev, m->sumsq, 0, &sumsq, sizeof sumsq));
        *grad_norm = sqrtf(sumsq);
    }
    return VKG_OK;
}

int vkg_gpt2_timings(vkg_gpt2 *m, vkg_gpt2_list which, const vkg_cmd_timing **timings)
{
    return vkg_cmd_timings(
        m->lists[which == VKG_GPT2_UPDATE ? VKG_GPT2_LIST_UPDATE : VKG_GPT2_LIST_FWDBWD], timings);
}

vkg_status vkg__gpt2_upload(vkg_gpt2 *m, const int32_t *inputs, const int32_t *targets)
{
    m->logits_valid = 0;
    return upload_batch(m, inputs, targets);
}

vkg_status vkg__gpt2_mean_loss(vkg_gpt2 *m, float *out)
{
    return mean_loss(m, out);
}
