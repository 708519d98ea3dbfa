/* GPT-2 on a device: creating and destroying a part, parameter transfers, the boundaries between
 * parts and running the recorded command lists. The options' checks and the memory plan are in
 * memory.c; the recording itself (forward, backward, update) is in record.c. */
#include "model/model_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static vkg_status setup_boundaries(vkg_model *m);

/* The tensor an activation arena entry is bound to. */
static vkg_tensor *act_place(vkg_model *m, vkg__model_act_place at)
{
    vkg_model_slot *sl = at.slot >= 0 ? &m->slots[at.slot] : NULL;
    vkg_tensor *scratch[] = {&m->mm_scratch, &m->delta,  &m->dtop,
                             &m->gelu,       &m->dscale, &m->inv_freq};
    switch (at.kind) {
    case VKG__ACT_SLOT:
        return &sl->acts.t[at.index];
    case VKG__ACT_LAYER:
        return &sl->layers[at.layer].t[at.index];
    case VKG__ACT_TOKENS:
        return at.index ? &sl->targets : &sl->inputs;
    case VKG__ACT_KEPT:
        return &sl->kept[at.layer * VKG_MODEL_NUM_KEPT + at.index];
    case VKG__ACT_GRAD:
        return &m->gacts.t[at.index];
    default:
        return scratch[at.index];
    }
}

static const char *const role_names[VKG_MODEL_NUM_ROLES] = {
    "wte", "wpe", "ln1w",    "ln1b",    "qkvw", "qkvb", "attprojw", "attprojb", "ln2w",   "ln2b",
    "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb", "qnormw",   "knormw",   "lm_head"};

void vkg__model_roles(const vkg_param_table *t, int ix[VKG_MODEL_NUM_ROLES])
{
    for (int r = 0; r < VKG_MODEL_NUM_ROLES; r++) {
        ix[r] = -1;
        for (int i = 0; i < t->n; i++)
            if (!strcmp(t->t[i].name, role_names[r]))
                ix[r] = i;
    }
}

int vkg__model_classifier(const vkg_model *m)
{
    return m->table.tied >= 0 ? WTE : LMHEAD;
}

vkg_status vkg_model_create(vkg_device_t *dev, const vkg_model_config *cfg,
                            const vkg_model_opts *opts, vkg_model **out)
{
    vkg_model_opts o;
    vkg_model_memory_plan plan;
    VKG_TRY(vkg__model_resolve_opts(cfg, opts, &o));
    o.max_allocation = dev->info.max_allocation_bytes;
    VKG_TRY(vkg_model_memory(cfg, &o, &plan));
    vkg_status st = VKG_OK;
    size_t *bytes = NULL;
    const char **names = NULL;
    vkg__model_act_place *places = NULL;
    vkg_dtype *types = NULL;
    vkg_model *m = calloc(1, sizeof *m);
    VKG_CHECK(m, VKG_ERR_NOMEM, "no memory for the model");
    m->dev = dev;
    m->cfg = *cfg;
    m->opts = o;
    m->grad_scale = 1.0f;
    m->nl = o.part.last - o.part.first;
    m->embed = !!(o.part.flags & VKG_MODEL_PART_EMBED);
    m->head = !!(o.part.flags & VKG_MODEL_PART_HEAD);
    vkg_model_part_layout(cfg, &o.part, &m->layout);
    vkg_model_params(cfg, &m->table);
    vkg__model_roles(&m->table, m->ix);
    m->nparams = m->layout.total;
    m->slots = calloc((size_t)o.slots, sizeof *m->slots);
    VKG_CHECK_GOTO(st, m->slots, VKG_ERR_NOMEM, fail, "no memory for %d slots", o.slots);

    m->slot_bytes = plan.slot;

    int bf16 = o.precision == VKG_PRECISION_BF16;
    size_t pbytes[2] = {m->nparams * 4, m->nparams * 2};
    VKG_TRY_GOTO(st, vkg_arena_create_list(dev, pbytes, bf16 ? 2 : 1, "params", &m->arena_params),
                 fail);
    VKG_TRY_GOTO(st, vkg_arena_create_list(dev, pbytes, 1, "grads", &m->arena_grads), fail);
    VKG_TRY_GOTO(st, vkg_arena_alloc(m->arena_params, pbytes[0], &m->params), fail);
    VKG_TRY_GOTO(st, vkg_arena_alloc(m->arena_grads, pbytes[0], &m->grads), fail);
    if (bf16) {
        VKG_TRY_GOTO(st, vkg_arena_alloc(m->arena_params, pbytes[1], &m->params16), fail);
        m->params16.dtype = VKG_BF16;
    }
    for (int i = 0; i < m->layout.n; i++) {
        size_t off = m->layout.part_offset[i] * 4, b = m->layout.count[i] * 4;
        m->p[i] = vkg_tensor_view(m->params, off, b);
        m->g[i] = vkg_tensor_view(m->grads, off, b);
        m->w[i] = bf16 ? vkg_tensor_view(m->params16, off / 2, b / 2) : m->p[i];
    }
    int cap = vkg__model_max_act_tensors(m->nl, o.slots, o.split_w);
    bytes = malloc((size_t)cap * sizeof *bytes);
    names = malloc((size_t)cap * sizeof *names);
    places = malloc((size_t)cap * sizeof *places);
    types = malloc((size_t)cap * sizeof *types);
    VKG_CHECK_GOTO(st, bytes && names && places && types, VKG_ERR_NOMEM, fail,
                   "no memory for the plan");
    for (int s = 0; s < o.slots; s++) {
        vkg_model_slot *sl = &m->slots[s];
        sl->layers = calloc((size_t)m->nl, sizeof *sl->layers);
        VKG_CHECK_GOTO(st, sl->layers, VKG_ERR_NOMEM, fail, "no memory for the layers");
        if (!o.split_w)
            continue;
        sl->kept = calloc((size_t)m->nl * VKG_MODEL_NUM_KEPT, sizeof *sl->kept);
        VKG_CHECK_GOTO(st, sl->kept, VKG_ERR_NOMEM, fail, "no memory for the layers");
    }
    int n = vkg__model_act_arena_tensors(cfg, &o, bytes, names, types, places);
    VKG_TRY_GOTO(st, vkg_arena_create_list(dev, bytes, n, "activations", &m->arena_acts), fail);
    for (int i = 0; i < n; i++) {
        vkg_tensor t;
        st = vkg_arena_alloc(m->arena_acts, bytes[i], &t);
        if (st != VKG_OK) {
            vkg__error_wrap(st, "activation tensor %s", names[i]);
            goto fail;
        }
        t.dtype = types[i];
        *act_place(m, places[i]) = t;
    }
    free(bytes), free(names), free(places), free(types);
    bytes = NULL, names = NULL, places = NULL, types = NULL;
    if (m->inv_freq.bytes) { /* the rotary embeddings' frequencies, fixed */
        int D = vkg_model_head_dim(cfg);
        float *f = malloc((size_t)D / 2 * sizeof *f);
        VKG_CHECK_GOTO(st, f, VKG_ERR_NOMEM, fail, "no memory for the rotary frequencies");
        vkg_model_rope_inv_freq(cfg, f);
        st = vkg_tensor_write(dev, m->inv_freq, 0, f, (size_t)D / 2 * sizeof *f);
        free(f);
        VKG_TRY_GOTO(st, st, fail);
    }

    VKG_TRY_GOTO(st, setup_boundaries(m), fail);
    VKG_TRY_GOTO(st, vkg__model_record(m), fail);
    *out = m;
    return VKG_OK;
fail:
    free(bytes), free(names), free(places), free(types);
    vkg_model_destroy(&m);
    return st;
}

void vkg_model_destroy(vkg_model **pm)
{
    vkg_model *m = pm ? *pm : NULL;
    if (!m)
        return;
    vkg__model_split_free(m);
    for (int s = 0; m->slots && s < m->opts.slots; s++)
        for (int i = 0; i < VKG_MODEL_NUM_LISTS; i++)
            vkg_cmd_destroy(&m->slots[s].lists[i]);
    vkg_cmd_destroy(&m->zero);
    vkg_arena_destroy(&m->arena_bnd);
    free(m->bnd_host), free(m->bnd_copy);
    vkg_arena_destroy(&m->arena_acts);
    vkg_arena_destroy(&m->arena_grads);
    vkg_arena_destroy(&m->arena_params);
    for (int s = 0; m->slots && s < m->opts.slots; s++)
        free(m->slots[s].layers), free(m->slots[s].kept);
    free(m->slots);
    free(m);
    *pm = NULL;
}

const vkg_model_config *vkg_model_config_of(const vkg_model *m)
{
    return &m->cfg;
}

const vkg_model_opts *vkg_model_opts_of(const vkg_model *m)
{
    return &m->opts;
}

const vkg_model_layout *vkg_model_layout_of(const vkg_model *m)
{
    return &m->layout;
}

const vkg_param_table *vkg_model_table_of(const vkg_model *m)
{
    return &m->table;
}

vkg_device_t *vkg_model_device(const vkg_model *m)
{
    return m->dev;
}

size_t vkg_model_param_count(const vkg_model *m)
{
    return m->nparams;
}

size_t vkg_model_host_bytes(const vkg_model *m)
{
    return (m->arena_bnd ? vkg_arena_size(m->arena_bnd) : 0) + vkg__model_split_host_bytes(m);
}

size_t vkg_model_device_bytes(const vkg_model *m)
{
    return vkg_arena_size(m->arena_params) + vkg_arena_size(m->arena_grads) +
           vkg_arena_size(m->arena_acts);
}

size_t vkg_model_activation_bytes(const vkg_model *m)
{
    return m->slot_bytes * (size_t)m->opts.slots;
}

vkg_tensor vkg_model_params_tensor(const vkg_model *m)
{
    return m->params;
}

vkg_tensor vkg_model_grads_tensor(const vkg_model *m)
{
    return m->grads;
}

vkg_status vkg_model_set_params(vkg_model *m, const float *params)
{
    return vkg_tensor_write(m->dev, m->params, 0, params, m->nparams * 4);
}

vkg_status vkg_model_get_params(vkg_model *m, float *params)
{
    return vkg_tensor_read(m->dev, m->params, 0, params, m->nparams * 4);
}

vkg_status vkg_model_get_grads(vkg_model *m, float *grads)
{
    return vkg_tensor_read(m->dev, m->grads, 0, grads, m->nparams * 4);
}

vkg_status vkg_model_set_grads(vkg_model *m, const float *grads)
{
    return vkg_tensor_write(m->dev, m->grads, 0, grads, m->nparams * 4);
}

vkg_status vkg_model_zero_grad(vkg_model *m)
{
    return vkg_cmd_run(m->zero, 0);
}

vkg_status vkg_model_set_grad_scale(vkg_model *m, float s)
{
    VKG_CHECK(s > 0.0f && isfinite(s), VKG_ERR_INVALID_ARG,
              "the loss scale must be positive and finite, got %g", (double)s);
    VKG_TRY(vkg_tensor_write(m->dev, m->dscale, 0, &s, sizeof s));
    m->grad_scale = s;
    return VKG_OK;
}

float vkg_model_grad_scale(const vkg_model *m)
{
    return m->grad_scale;
}

static vkg_status check_slot(const vkg_model *m, int s)
{
    VKG_CHECK(s >= 0 && s < m->opts.slots, VKG_ERR_INVALID_ARG,
              "activation slot %d outside [0, %d)", s, m->opts.slots);
    return VKG_OK;
}

/* Check and upload a micro-batch into slot s; tokens outside [0, V) are refused with their
 * position. Inputs go to the first part only, targets to the last only. */
vkg_status vkg__model_upload(vkg_model *m, int s, const int32_t *inputs, const int32_t *targets)
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

vkg_status vkg__model_mean_loss(vkg_model *m, int s, float *out)
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

static vkg_status run(vkg_model *m, int s, int list)
{
    return vkg_cmd_run(m->slots[s].lists[list], 0);
}

vkg_status vkg_model_forward_backward(vkg_model *m, const int32_t *inputs, const int32_t *targets,
                                      float *loss)
{
    VKG_CHECK(m->embed && m->head, VKG_ERR_STATE,
              "forward_backward runs the whole model; a part runs forward_train and backward");
    VKG_CHECK(targets, VKG_ERR_INVALID_ARG, "forward_backward needs targets");
    VKG_TRY(vkg__model_upload(m, 0, inputs, targets));
    VKG_TRY(run(m, 0, VKG_MODEL_LIST_FWDBWD));
    return vkg__model_mean_loss(m, 0, loss);
}

vkg_status vkg_model_forward(vkg_model *m, const int32_t *inputs, const int32_t *targets,
                             float *loss)
{
    VKG_TRY(vkg__model_upload(m, 0, inputs, targets));
    VKG_TRY(run(m, 0, targets ? VKG_MODEL_LIST_EVAL : VKG_MODEL_LIST_FWD));
    m->slots[0].logits_valid = m->head;
    return targets ? vkg__model_mean_loss(m, 0, loss) : VKG_OK;
}

vkg_status vkg_model_forward_train(vkg_model *m, int slot, const int32_t *inputs,
                                   const int32_t *targets, float *mean_loss)
{
    VKG_CHECK(targets || !m->head, VKG_ERR_INVALID_ARG, "the last part's forward needs targets");
    VKG_TRY(vkg__model_upload(m, slot, inputs, targets));
    VKG_TRY(run(m, slot, VKG_MODEL_LIST_FWDT));
    return vkg__model_mean_loss(m, slot, mean_loss);
}

vkg_status vkg_model_backward(vkg_model *m, int slot)
{
    VKG_TRY(check_slot(m, slot));
    m->slots[slot].logits_valid = 0;
    return run(m, slot, VKG_MODEL_LIST_BWD);
}

static vkg_status backward_pass(vkg_model *m, int slot, int list)
{
    VKG_TRY(check_slot(m, slot));
    VKG_CHECK(m->opts.split_w, VKG_ERR_STATE,
              "the backward's input and weight passes need a part created with split_w");
    m->slots[slot].logits_valid = 0;
    return run(m, slot, list);
}

vkg_status vkg_model_backward_input(vkg_model *m, int slot)
{
    return backward_pass(m, slot, VKG_MODEL_LIST_BWD_IN);
}

vkg_status vkg_model_backward_weight(vkg_model *m, int slot)
{
    return backward_pass(m, slot, VKG_MODEL_LIST_BWD_W);
}

vkg_status vkg_model_logits_row(vkg_model *m, int b, int t, float *row)
{
    VKG_CHECK(m->slots[0].logits_valid, VKG_ERR_STATE,
              "logits are only readable after vkg_model_forward (of the last part)");
    VKG_CHECK(b >= 0 && b < m->opts.B && t >= 0 && t < m->opts.T, VKG_ERR_INVALID_ARG,
              "logits row (%d, %d) outside the batch (%d, %d)", b, t, m->opts.B, m->opts.T);
    size_t Vp = (size_t)m->cfg.padded_vocab_size;
    size_t off = ((size_t)b * (size_t)m->opts.T + (size_t)t) * Vp * 4;
    return vkg_tensor_read(m->dev, m->slots[0].acts.s.logits, off, row, Vp * 4);
}

vkg_status vkg_model_losses(vkg_model *m, float *losses)
{
    VKG_CHECK(m->head, VKG_ERR_STATE, "only the last part has losses");
    return vkg_tensor_read(m->dev, m->slots[0].acts.s.losses, 0, losses,
                           (size_t)m->opts.B * (size_t)m->opts.T * 4);
}

/* Index of boundary `which` of slot s in bnd_host / bnd_copy. */
static int bnd_index(const vkg_model *m, vkg_model_boundary which, int s)
{
    int K = m->opts.slots;
    return which == VKG_MODEL_IN     ? s
           : which == VKG_MODEL_OUT  ? K + s
           : which == VKG_MODEL_DOUT ? 2 * K
                                     : 2 * K + 1;
}

vkg_status vkg__model_boundary_tensor(const vkg_model *m, vkg_model_boundary which, int s,
                                      vkg_tensor *out)
{
    VKG_CHECK(s >= 0 && s < m->opts.slots, VKG_ERR_INVALID_ARG,
              "activation slot %d outside [0, %d)", s, m->opts.slots);
    const vkg_model_acts *a = &m->slots[s].acts;
    int first = which == VKG_MODEL_IN || which == VKG_MODEL_DIN;
    VKG_CHECK(first ? !m->embed : !m->head, VKG_ERR_INVALID_ARG,
              "the %s part has no %s boundary (its %s is its own)", first ? "first" : "last",
              first ? "input" : "output",
              first ? "input comes from the tokens" : "output is the loss");
    switch (which) {
    case VKG_MODEL_IN:
        *out = a->s.encoded;
        break;
    case VKG_MODEL_OUT:
        *out = m->slots[s].layers[m->nl - 1].s.residual3;
        break;
    case VKG_MODEL_DOUT:
        *out = m->dtop;
        break;
    default:
        *out = m->gacts.s.dencoded;
        break;
    }
    return VKG_OK;
}

/* Boundary i of bnd_host: which, and its slot. */
static vkg_model_boundary bnd_kind(const vkg_model *m, int i, int *s)
{
    int K = m->opts.slots;
    *s = i < K ? i : i < 2 * K ? i - K : 0;
    return i < K        ? VKG_MODEL_IN
           : i < 2 * K  ? VKG_MODEL_OUT
           : i == 2 * K ? VKG_MODEL_DOUT
                        : VKG_MODEL_DIN;
}

/* The host side of every boundary the part has (see model_internal.h). */
static vkg_status setup_boundaries(vkg_model *m)
{
    int n = 2 * m->opts.slots + 2, count = 0;
    m->bnd_host = calloc((size_t)n, sizeof *m->bnd_host);
    m->bnd_copy = calloc((size_t)n, sizeof *m->bnd_copy);
    VKG_CHECK(m->bnd_host && m->bnd_copy, VKG_ERR_NOMEM, "no memory for the boundaries");
    size_t bytes = 0; /* of the host copies */
    int map = m->dev->info.unified_memory;
    for (int i = 0; i < n; i++) {
        int s;
        vkg_model_boundary which = bnd_kind(m, i, &s);
        int first = which == VKG_MODEL_IN || which == VKG_MODEL_DIN,
            has = first ? !m->embed : !m->head;
        count += has;
        bytes += has ? (vkg_model_boundary_bytes(m, which) + 255) / 256 * 256 : 0;
    }
    if (!map && count)
        VKG_TRY(vkg_arena_create_host(m->dev, bytes, "boundaries", &m->arena_bnd));
    for (int i = 0; i < n; i++) {
        int s;
        vkg_model_boundary which = bnd_kind(m, i, &s);
        int first = which == VKG_MODEL_IN || which == VKG_MODEL_DIN;
        vkg_tensor t = {0};
        if (first ? m->embed : m->head)
            continue;
        VKG_TRY(vkg__model_boundary_tensor(m, which, s, &t));
        if (map) {
            m->bnd_host[i] = vkg_tensor_host_ptr(t);
            continue;
        }
        VKG_TRY(vkg_arena_alloc(m->arena_bnd, vkg_model_boundary_bytes(m, which), &m->bnd_copy[i]));
        m->bnd_host[i] = vkg_tensor_host_ptr(m->bnd_copy[i]);
    }
    return VKG_OK;
}

vkg_status vkg__model_record_boundary(vkg_model *m, vkg_cmd *c, vkg_model_boundary which, int s)
{
    int i = bnd_index(m, which, s);
    if (!m->arena_bnd || !m->bnd_host[i])
        return VKG_OK;
    vkg_tensor t = {0};
    VKG_TRY(vkg__model_boundary_tensor(m, which, s, &t));
    int to_host = which == VKG_MODEL_OUT || which == VKG_MODEL_DIN;
    return to_host ? vkg_cmd_copy(c, m->bnd_copy[i], t, t.bytes)
                   : vkg_cmd_copy(c, t, m->bnd_copy[i], t.bytes);
}

size_t vkg_model_boundary_bytes(const vkg_model *m, vkg_model_boundary which)
{
    int act = which == VKG_MODEL_IN || which == VKG_MODEL_OUT;
    size_t elem = act && m->opts.precision == VKG_PRECISION_BF16 ? 2 : 4;
    return (size_t)m->opts.B * (size_t)m->opts.T * (size_t)m->cfg.channels * elem;
}

vkg_status vkg_model_boundary_read(vkg_model *m, vkg_model_boundary which, int slot, void *dst)
{
    vkg_tensor t = {0};
    VKG_TRY(vkg__model_boundary_tensor(m, which, slot, &t));
    memcpy(dst, m->bnd_host[bnd_index(m, which, slot)], vkg_model_boundary_bytes(m, which));
    return VKG_OK;
}

vkg_status vkg_model_boundary_write(vkg_model *m, vkg_model_boundary which, int slot,
                                    const void *src)
{
    vkg_tensor t = {0};
    VKG_TRY(vkg__model_boundary_tensor(m, which, slot, &t));
    memcpy(m->bnd_host[bnd_index(m, which, slot)], src, vkg_model_boundary_bytes(m, which));
    return VKG_OK;
}

void vkg_model_list_counts(const vkg_model *m, int *dispatches, int *barriers)
{
    const vkg_cmd *c = m->slots[0].lists[VKG_MODEL_LIST_FWDBWD];
    *dispatches = vkg_cmd_dispatch_count(c);
    *barriers = vkg_cmd_barrier_count(c);
}

int vkg_model_list_kernel_count(const vkg_model *m, vkg_kernel_id k)
{
    return vkg_cmd_kernel_count(m->slots[0].lists[VKG_MODEL_LIST_FWDBWD], k);
}

int vkg_model_timings(vkg_model *m, const vkg_cmd_timing **timings)
{
    return vkg_cmd_timings(m->slots[0].lists[VKG_MODEL_LIST_FWDBWD], timings);
}
