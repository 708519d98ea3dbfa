/* GPT-2 on a device: memory plan, parameter transfers and running the recorded command lists.
 * The recording itself (forward, backward, update) is in gpt2_record.c. */
#include "model/gpt2_internal.h"

#include <stdlib.h>
#include <string.h>

vkg_gpt2_opts vkg_gpt2_opts_default(void)
{
    vkg_gpt2_opts o = {.B = 4, .T = 64, .accum_steps = 1, .loss_scale = 1.0f, .slots = 1};
    return o;
}

/* Element counts of the activation tensors, in the order of the vkg_gpt2_acts fields. */
static void act_sizes(const vkg_gpt2_config *cfg, int B, int T, int nl, int head,
                      size_t s[VKG_GPT2_NUM_ACTS])
{
    size_t L = (size_t)nl, C = (size_t)cfg->channels, NH = (size_t)cfg->num_heads;
    size_t BT = (size_t)B * (size_t)T, Vp = head ? (size_t)cfg->padded_vocab_size : 0;
    size_t H = head ? 1 : 0;
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
    s[i++] = H * BT * C;                                 /* lnf */
    s[i++] = H * BT;                                     /* lnf_mean */
    s[i++] = H * BT;                                     /* lnf_rstd */
    s[i++] = BT * Vp; /* logits (dlogits in place after the loss) */
    s[i++] = H * BT;  /* losses */
}

/* Gradient activations: the same shapes as the forward activations they belong to. */
static void grad_act_sizes(const vkg_gpt2_config *cfg, int B, int T, int nl, int head,
                           size_t s[VKG_GPT2_NUM_GRAD_ACTS])
{
    size_t L = (size_t)nl, C = (size_t)cfg->channels, H = head ? 1 : 0;
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
    s[i++] = H * BT * C;     /* dlnf */
}

static size_t plan_bytes(const size_t *sizes, int n)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += ((sizes[i] ? sizes[i] : 1) * 4 + 255) / 256 * 256; /* as alloc_list */
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
    VKG_TRY(vkg_gpt2_part_validate(cfg, &o->part));
    VKG_CHECK(o->slots >= 1 && o->slots <= 64, VKG_ERR_INVALID_ARG,
              "activation slots must be in [1, 64], got %d", o->slots);
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

static vkg_status setup_boundaries(vkg_gpt2 *m);

/* The options with the whole model for an unset part, checked. */
static vkg_status resolve_opts(const vkg_gpt2_config *cfg, const vkg_gpt2_opts *opts,
                               vkg_gpt2_opts *o)
{
    *o = opts ? *opts : vkg_gpt2_opts_default();
    if (o->part.last == 0 && o->part.first == 0 && o->part.flags == 0)
        o->part = vkg_gpt2_whole(cfg);
    return check_opts(cfg, o);
}

/* Element counts of the shared scratch tensors and of one slot's tokens. */
static void scratch_sizes(const vkg_gpt2_config *cfg, const vkg_gpt2_opts *o, size_t scratch[3],
                          size_t tokens[2])
{
    size_t BT = (size_t)o->B * (size_t)o->T, C = (size_t)cfg->channels;
    scratch[0] = BT * 4 * C; /* mm_scratch */
    scratch[1] = (size_t)o->B * (size_t)cfg->num_heads * (size_t)o->T * (size_t)o->T; /* dpre */
    scratch[2] = BT * C;                                                              /* dtop */
    tokens[0] = tokens[1] = BT; /* inputs, targets */
}

vkg_status vkg_gpt2_memory(const vkg_gpt2_config *cfg, const vkg_gpt2_opts *opts,
                           vkg_gpt2_memory_plan *out)
{
    vkg_gpt2_opts o;
    VKG_TRY(resolve_opts(cfg, opts, &o));
    vkg_gpt2_layout lo;
    vkg_gpt2_part_layout(cfg, &o.part, &lo);
    int nl = o.part.last - o.part.first, head = !!(o.part.flags & VKG_GPT2_PART_HEAD);
    size_t asz[VKG_GPT2_NUM_ACTS], gsz[VKG_GPT2_NUM_GRAD_ACTS], scratch[3], tokens[2];
    act_sizes(cfg, o.B, o.T, nl, head, asz);
    grad_act_sizes(cfg, o.B, o.T, nl, head, gsz);
    scratch_sizes(cfg, &o, scratch, tokens);
    memset(out, 0, sizeof *out);
    out->params = out->grads = (lo.total * 4 + 255) / 256 * 256;
    out->slot = plan_bytes(asz, VKG_GPT2_NUM_ACTS) + plan_bytes(tokens, 2);
    out->activations = out->slot * (size_t)o.slots;
    out->shared = plan_bytes(gsz, VKG_GPT2_NUM_GRAD_ACTS) + plan_bytes(scratch, 3);
    out->total = out->params + out->grads + out->activations + out->shared;
    return VKG_OK;
}

vkg_status vkg_gpt2_create(vkg_device_t *dev, const vkg_gpt2_config *cfg, const vkg_gpt2_opts *opts,
                           vkg_gpt2 **out)
{
    vkg_gpt2_opts o;
    vkg_gpt2_memory_plan plan;
    VKG_TRY(resolve_opts(cfg, opts, &o));
    VKG_TRY(vkg_gpt2_memory(cfg, &o, &plan));
    vkg_status st = VKG_OK;
    vkg_gpt2 *m = calloc(1, sizeof *m);
    VKG_CHECK(m, VKG_ERR_NOMEM, "no memory for the model");
    m->dev = dev;
    m->cfg = *cfg;
    m->opts = o;
    m->nl = o.part.last - o.part.first;
    m->embed = !!(o.part.flags & VKG_GPT2_PART_EMBED);
    m->head = !!(o.part.flags & VKG_GPT2_PART_HEAD);
    vkg_gpt2_part_layout(cfg, &o.part, &m->layout);
    m->nparams = m->layout.total;
    m->slots = calloc((size_t)o.slots, sizeof *m->slots);
    VKG_CHECK_GOTO(st, m->slots, VKG_ERR_NOMEM, fail, "no memory for %d slots", o.slots);

    size_t asz[VKG_GPT2_NUM_ACTS], gsz[VKG_GPT2_NUM_GRAD_ACTS], scratch[3], tokens[2];
    act_sizes(cfg, o.B, o.T, m->nl, m->head, asz);
    grad_act_sizes(cfg, o.B, o.T, m->nl, m->head, gsz);
    scratch_sizes(cfg, &o, scratch, tokens);
    enum { NSCRATCH = 3 };
    m->slot_bytes = plan.slot;

    VKG_TRY_GOTO(st, vkg_arena_create(dev, plan.params, "params", &m->arena_params), fail);
    VKG_TRY_GOTO(st, vkg_arena_create(dev, plan.grads, "grads", &m->arena_grads), fail);
    VKG_TRY_GOTO(
        st, vkg_arena_create(dev, plan.activations + plan.shared, "activations", &m->arena_acts),
        fail);
    VKG_TRY_GOTO(st, vkg_arena_alloc(m->arena_params, m->nparams * 4, &m->params), fail);
    VKG_TRY_GOTO(st, vkg_arena_alloc(m->arena_grads, m->nparams * 4, &m->grads), fail);
    for (int i = 0; i < VKG_GPT2_NUM_PARAM_TENSORS; i++) {
        size_t off = m->layout.part_offset[i] * 4, b = m->layout.count[i] * 4;
        m->p[i] = vkg_tensor_view(m->params, off, b);
        m->g[i] = vkg_tensor_view(m->grads, off, b);
    }
    for (int s = 0; s < o.slots; s++) {
        vkg_tensor tok[2];
        VKG_TRY_GOTO(st, alloc_list(m->arena_acts, asz, VKG_GPT2_NUM_ACTS, m->slots[s].acts.t),
                     fail);
        VKG_TRY_GOTO(st, alloc_list(m->arena_acts, tokens, 2, tok), fail);
        m->slots[s].inputs = tok[0];
        m->slots[s].targets = tok[1];
    }
    VKG_TRY_GOTO(st, alloc_list(m->arena_acts, gsz, VKG_GPT2_NUM_GRAD_ACTS, m->gacts.t), fail);
    vkg_tensor sc[NSCRATCH];
    VKG_TRY_GOTO(st, alloc_list(m->arena_acts, scratch, NSCRATCH, sc), fail);
    m->mm_scratch = sc[0];
    m->dpre = sc[1];
    m->dtop = sc[2];
    m->gacts_start = m->gacts.t[0];
    m->gacts_count = 0;
    for (int i = 0; i < VKG_GPT2_NUM_GRAD_ACTS; i++)
        m->gacts_count = (m->gacts.t[i].offset + m->gacts.t[i].bytes - m->gacts_start.offset) / 4;
    m->gacts_start.bytes = m->gacts_count * 4;

    VKG_TRY_GOTO(st, setup_boundaries(m), fail);
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
    vkg__gpt2_split_free(m);
    for (int s = 0; m->slots && s < m->opts.slots; s++)
        for (int i = 0; i < VKG_GPT2_NUM_LISTS; i++)
            vkg_cmd_destroy(&m->slots[s].lists[i]);
    vkg_cmd_destroy(&m->zero);
    vkg_arena_destroy(&m->arena_bnd);
    free(m->bnd_host), free(m->bnd_copy);
    vkg_arena_destroy(&m->arena_acts);
    vkg_arena_destroy(&m->arena_grads);
    vkg_arena_destroy(&m->arena_params);
    free(m->slots);
    free(m);
    *pm = NULL;
}

const vkg_gpt2_config *vkg_gpt2_config_of(const vkg_gpt2 *m)
{
    return &m->cfg;
}

const vkg_gpt2_opts *vkg_gpt2_opts_of(const vkg_gpt2 *m)
{
    return &m->opts;
}

const vkg_gpt2_layout *vkg_gpt2_layout_of(const vkg_gpt2 *m)
{
    return &m->layout;
}

vkg_device_t *vkg_gpt2_device(const vkg_gpt2 *m)
{
    return m->dev;
}

size_t vkg_gpt2_param_count(const vkg_gpt2 *m)
{
    return m->nparams;
}

size_t vkg_gpt2_device_bytes(const vkg_gpt2 *m)
{
    return vkg_arena_size(m->arena_params) + vkg_arena_size(m->arena_grads) +
           vkg_arena_size(m->arena_acts);
}

size_t vkg_gpt2_activation_bytes(const vkg_gpt2 *m)
{
    return m->slot_bytes * (size_t)m->opts.slots;
}

vkg_tensor vkg_gpt2_params_tensor(const vkg_gpt2 *m)
{
    return m->params;
}

vkg_tensor vkg_gpt2_grads_tensor(const vkg_gpt2 *m)
{
    return m->grads;
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

vkg_status vkg_gpt2_zero_grad(vkg_gpt2 *m)
{
    return vkg_cmd_run(m->zero, 0);
}

static vkg_status check_slot(const vkg_gpt2 *m, int s)
{
    VKG_CHECK(s >= 0 && s < m->opts.slots, VKG_ERR_INVALID_ARG,
              "activation slot %d outside [0, %d)", s, m->opts.slots);
    return VKG_OK;
}

/* Check and upload a micro-batch into slot s; tokens outside [0, V) are refused with their
 * position. Inputs go to the first part only, targets to the last only. */
vkg_status vkg__gpt2_upload(vkg_gpt2 *m, int s, const int32_t *inputs, const int32_t *targets)
{
    VKG_TRY(check_slot(m, s));
    VKG_CHECK(!inputs || m->embed, VKG_ERR_INVALID_ARG,
              "tokens go to the first part (layers from 0); this part starts at layer %d",
              m->opts.part.first);
    VKG_CHECK(inputs || !m->embed, VKG_ERR_INVALID_ARG, "the first part needs input tokens");
    VKG_CHECK(!targets || m->head, VKG_ERR_INVALID_ARG,
              "targets go to the last part; this part ends at layer %d", m->opts.part.last);
    size_t BT = (size_t)m->opts.B * (size_t)m->opts.T;
    for (size_t i = 0; i < BT; i++) {
        VKG_CHECK(!inputs || (inputs[i] >= 0 && inputs[i] < m->cfg.vocab_size), VKG_ERR_INVALID_ARG,
                  "input token %d at position %zu is outside the vocabulary [0, %d)",
                  inputs ? inputs[i] : 0, i, m->cfg.vocab_size);
        VKG_CHECK(!targets || (targets[i] >= 0 && targets[i] < m->cfg.vocab_size),
                  VKG_ERR_INVALID_ARG, "target token %d at position %zu is outside [0, %d)",
                  targets ? targets[i] : 0, i, m->cfg.vocab_size);
    }
    m->slots[s].logits_valid = 0;
    if (inputs)
        VKG_TRY(vkg_tensor_write(m->dev, m->slots[s].inputs, 0, inputs, BT * 4));
    if (targets)
        VKG_TRY(vkg_tensor_write(m->dev, m->slots[s].targets, 0, targets, BT * 4));
    return VKG_OK;
}

vkg_status vkg__gpt2_mean_loss(vkg_gpt2 *m, int s, float *out)
{
    if (!out || !m->head)
        return VKG_OK;
    size_t BT = (size_t)m->opts.B * (size_t)m->opts.T;
    float *losses = malloc(BT * sizeof *losses);
    VKG_CHECK(losses, VKG_ERR_NOMEM, "no memory for %zu losses", BT);
    vkg_status st = vkg_tensor_read(m->dev, m->slots[s].acts.s.losses, 0, losses, BT * 4);
    double sum = 0.0;
    for (size_t i = 0; i < BT; i++)
        sum += losses[i];
    free(losses);
    *out = (float)(sum / (double)BT);
    return st;
}

static vkg_status run(vkg_gpt2 *m, int s, int list)
{
    return vkg_cmd_run(m->slots[s].lists[list], 0);
}

vkg_status vkg_gpt2_forward_backward(vkg_gpt2 *m, const int32_t *inputs, const int32_t *targets,
                                     float *loss)
{
    VKG_CHECK(m->embed && m->head, VKG_ERR_STATE,
              "forward_backward runs the whole model; a part runs forward_train and backward");
    VKG_CHECK(targets, VKG_ERR_INVALID_ARG, "forward_backward needs targets");
    VKG_TRY(vkg__gpt2_upload(m, 0, inputs, targets));
    VKG_TRY(run(m, 0, VKG_GPT2_LIST_FWDBWD));
    return vkg__gpt2_mean_loss(m, 0, loss);
}

vkg_status vkg_gpt2_forward(vkg_gpt2 *m, const int32_t *inputs, const int32_t *targets, float *loss)
{
    VKG_TRY(vkg__gpt2_upload(m, 0, inputs, targets));
    VKG_TRY(run(m, 0, targets ? VKG_GPT2_LIST_EVAL : VKG_GPT2_LIST_FWD));
    m->slots[0].logits_valid = m->head;
    return targets ? vkg__gpt2_mean_loss(m, 0, loss) : VKG_OK;
}

vkg_status vkg_gpt2_forward_train(vkg_gpt2 *m, int slot, const int32_t *inputs,
                                  const int32_t *targets, float *mean_loss)
{
    VKG_CHECK(targets || !m->head, VKG_ERR_INVALID_ARG, "the last part's forward needs targets");
    VKG_TRY(vkg__gpt2_upload(m, slot, inputs, targets));
    VKG_TRY(run(m, slot, VKG_GPT2_LIST_FWDT));
    return vkg__gpt2_mean_loss(m, slot, mean_loss);
}

vkg_status vkg_gpt2_backward(vkg_gpt2 *m, int slot)
{
    VKG_TRY(check_slot(m, slot));
    m->slots[slot].logits_valid = 0;
    return run(m, slot, VKG_GPT2_LIST_BWD);
}

vkg_status vkg_gpt2_logits_row(vkg_gpt2 *m, int b, int t, float *row)
{
    VKG_CHECK(m->slots[0].logits_valid, VKG_ERR_STATE,
              "logits are only readable after vkg_gpt2_forward (of the last part)");
    VKG_CHECK(b >= 0 && b < m->opts.B && t >= 0 && t < m->opts.T, VKG_ERR_INVALID_ARG,
              "logits row (%d, %d) outside the batch (%d, %d)", b, t, m->opts.B, m->opts.T);
    size_t Vp = (size_t)m->cfg.padded_vocab_size;
    size_t off = ((size_t)b * (size_t)m->opts.T + (size_t)t) * Vp * 4;
    return vkg_tensor_read(m->dev, m->slots[0].acts.s.logits, off, row, Vp * 4);
}

vkg_status vkg_gpt2_losses(vkg_gpt2 *m, float *losses)
{
    VKG_CHECK(m->head, VKG_ERR_STATE, "only the last part has losses");
    return vkg_tensor_read(m->dev, m->slots[0].acts.s.losses, 0, losses,
                           (size_t)m->opts.B * (size_t)m->opts.T * 4);
}

/* Index of boundary `which` of slot s in bnd_host / bnd_copy. */
static int bnd_index(const vkg_gpt2 *m, vkg_gpt2_boundary which, int s)
{
    int K = m->opts.slots;
    return which == VKG_GPT2_IN     ? s
           : which == VKG_GPT2_OUT  ? K + s
           : which == VKG_GPT2_DOUT ? 2 * K
                                    : 2 * K + 1;
}

vkg_status vkg__gpt2_boundary_tensor(const vkg_gpt2 *m, vkg_gpt2_boundary which, int s,
                                     vkg_tensor *out)
{
    VKG_CHECK(s >= 0 && s < m->opts.slots, VKG_ERR_INVALID_ARG,
              "activation slot %d outside [0, %d)", s, m->opts.slots);
    size_t btc = (size_t)m->opts.B * (size_t)m->opts.T * (size_t)m->cfg.channels;
    const vkg_gpt2_acts *a = &m->slots[s].acts;
    int first = which == VKG_GPT2_IN || which == VKG_GPT2_DIN;
    VKG_CHECK(first ? !m->embed : !m->head, VKG_ERR_INVALID_ARG,
              "the %s part has no %s boundary (its %s is its own)", first ? "first" : "last",
              first ? "input" : "output",
              first ? "input comes from the tokens" : "output is the loss");
    switch (which) {
    case VKG_GPT2_IN:
        *out = a->s.encoded;
        break;
    case VKG_GPT2_OUT:
        *out = vkg_tensor_view(a->s.residual3, (size_t)(m->nl - 1) * btc * 4, btc * 4);
        break;
    case VKG_GPT2_DOUT:
        *out = m->dtop;
        break;
    default:
        *out = m->gacts.s.dencoded;
        break;
    }
    return VKG_OK;
}

/* Boundary i of bnd_host: which, and its slot. */
static vkg_gpt2_boundary bnd_kind(const vkg_gpt2 *m, int i, int *s)
{
    int K = m->opts.slots;
    *s = i < K ? i : i < 2 * K ? i - K : 0;
    return i < K        ? VKG_GPT2_IN
           : i < 2 * K  ? VKG_GPT2_OUT
           : i == 2 * K ? VKG_GPT2_DOUT
                        : VKG_GPT2_DIN;
}

/* The host side of every boundary the part has (see gpt2_internal.h). */
static vkg_status setup_boundaries(vkg_gpt2 *m)
{
    int n = 2 * m->opts.slots + 2, count = 0;
    m->bnd_host = calloc((size_t)n, sizeof *m->bnd_host);
    m->bnd_copy = calloc((size_t)n, sizeof *m->bnd_copy);
    VKG_CHECK(m->bnd_host && m->bnd_copy, VKG_ERR_NOMEM, "no memory for the boundaries");
    size_t bytes = (size_t)m->opts.B * (size_t)m->opts.T * (size_t)m->cfg.channels * 4;
    char *map = vkg_arena_host_ptr(m->arena_acts);
    for (int i = 0; i < n; i++) {
        int s;
        vkg_gpt2_boundary which = bnd_kind(m, i, &s);
        int first = which == VKG_GPT2_IN || which == VKG_GPT2_DIN;
        count += first ? !m->embed : !m->head;
    }
    if (!map && count)
        VKG_TRY(vkg_arena_create_host(m->dev, (size_t)count * ((bytes + 255) / 256 * 256),
                                      "boundaries", &m->arena_bnd));
    for (int i = 0; i < n; i++) {
        int s;
        vkg_gpt2_boundary which = bnd_kind(m, i, &s);
        int first = which == VKG_GPT2_IN || which == VKG_GPT2_DIN;
        vkg_tensor t = {0};
        if (first ? m->embed : m->head)
            continue;
        VKG_TRY(vkg__gpt2_boundary_tensor(m, which, s, &t));
        if (map) {
            m->bnd_host[i] = (float *)(map + t.offset);
            continue;
        }
        VKG_TRY(vkg_arena_alloc(m->arena_bnd, bytes, &m->bnd_copy[i]));
        m->bnd_host[i] =
            (float *)((char *)vkg_arena_host_ptr(m->arena_bnd) + m->bnd_copy[i].offset);
    }
    return VKG_OK;
}

vkg_status vkg__gpt2_record_boundary(vkg_gpt2 *m, vkg_cmd *c, vkg_gpt2_boundary which, int s)
{
    int i = bnd_index(m, which, s);
    if (!m->arena_bnd || !m->bnd_host[i])
        return VKG_OK;
    vkg_tensor t = {0};
    VKG_TRY(vkg__gpt2_boundary_tensor(m, which, s, &t));
    int to_host = which == VKG_GPT2_OUT || which == VKG_GPT2_DIN;
    return to_host ? vkg_cmd_copy(c, m->bnd_copy[i], t, t.bytes)
                   : vkg_cmd_copy(c, t, m->bnd_copy[i], t.bytes);
}

vkg_status vkg_gpt2_boundary_read(vkg_gpt2 *m, vkg_gpt2_boundary which, int slot, float *dst)
{
    vkg_tensor t = {0};
    VKG_TRY(vkg__gpt2_boundary_tensor(m, which, slot, &t));
    memcpy(dst, m->bnd_host[bnd_index(m, which, slot)], t.bytes);
    return VKG_OK;
}

vkg_status vkg_gpt2_boundary_write(vkg_gpt2 *m, vkg_gpt2_boundary which, int slot, const float *src)
{
    vkg_tensor t = {0};
    VKG_TRY(vkg__gpt2_boundary_tensor(m, which, slot, &t));
    memcpy(m->bnd_host[bnd_index(m, which, slot)], src, t.bytes);
    return VKG_OK;
}

int vkg_gpt2_timings(vkg_gpt2 *m, const vkg_cmd_timing **timings)
{
    return vkg_cmd_timings(m->slots[0].lists[VKG_GPT2_LIST_FWDBWD], timings);
}
