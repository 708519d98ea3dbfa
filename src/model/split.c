/* Split recordings: the training forward-backward recorded as several command lists, cut where
 * gradient units complete, so that a caller (src/parallel's gradient buckets) can reduce the
 * gradients of finished units while the device computes the rest of the backward pass. Every list
 * is submitted at once and signals the device's timeline semaphore when it completes; waiting for
 * list k waits for its value only.
 *
 * The host reads and writes finished units without a transfer of its own (which would queue
 * behind the rest of the backward pass): on unified memory through the gradient arena's mapping;
 * on other devices each list ends by copying its units' ranges into a host-visible copy of the
 * gradients, and vkg_model_split_commit copies every unit back in one submission. A caller that
 * packs the gradients itself (vkg_model_pack) has each list copy its ranges straight into its
 * packed places of a buffer the host reads in place, and commit copies them back, on any device.
 * Not here: which units make a bucket, and reductions (src/parallel). */
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"

struct vkg_model_split {
    int n;               /* command lists */
    vkg_cmd **lists;     /* (n) */
    int *last;           /* (n) the last unit of each list */
    uint64_t *values;    /* (n) timeline values of the last submission */
    vkg_arena *host;     /* devices without unified memory: the gradients' host copy */
    vkg_tensor host_dst; /* where lists copy their units: host's (nparams), or a pack's buffer */
    size_t (*copies)[3]; /* (grad offset, host_dst offset, count) in floats; NULL: no copies */
    int *first_copy;     /* (n + 1) list k's copies: [first_copy[k], first_copy[k + 1]) */
    vkg_cmd *upload;     /* host_dst -> gradients, every list's copies (with copies) */
    float *host_grads;   /* (nparams) the host's view of finished units (NULL with a pack) */
    int recording;       /* the list being recorded */
    int slot;            /* backward only (vkg_model_split_backward): its slot; -1 otherwise */
};

int vkg_model_unit_count(const vkg_model *m)
{
    return (m->head ? 2 : 0) + m->nl + vkg__model_embed_unit(m);
}

int vkg__model_embed_unit(const vkg_model *m)
{
    int cls = m->ix[vkg__model_classifier(m)];
    for (int i = 0; m->embed && i < m->table.n; i++)
        if (m->table.t[i].place == VKG_PARAM_EMBED && m->layout.count[i] && !(m->head && i == cls))
            return 1;
    return 0; /* no first part, or a whole model whose only embedding is the tied classifier */
}

int vkg_model_unit_ranges(const vkg_model *m, int u, size_t out[VKG_MODEL_MAX_UNIT_RANGES][2])
{
    const vkg_model_layout *lo = &m->layout;
    const vkg_param_table *t = &m->table;
    int cls = m->ix[vkg__model_classifier(m)], n = 0;
    if (m->head && u == 0) { /* the classifier (the tied embedding's classifier part) */
        out[n][0] = lo->part_offset[cls], out[n++][1] = lo->count[cls];
        return n;
    }
    int l = m->nl - 1 - (u - (m->head ? 2 : 0));
    for (int i = 0; i < t->n; i++) {
        vkg_param_place place = t->t[i].place;
        if (!lo->count[i] || (m->head && i == cls))
            continue;
        if (m->head && u == 1 && place == VKG_PARAM_HEAD) { /* the final norm */
            out[n][0] = lo->part_offset[i], out[n++][1] = lo->count[i];
        } else if (l < 0 && place == VKG_PARAM_EMBED) { /* the embeddings the head does not read */
            out[n][0] = lo->part_offset[i], out[n++][1] = lo->count[i];
        } else if (l >= 0 && !(m->head && u == 1) && place == VKG_PARAM_LAYER) {
            size_t per = lo->count[i] / (size_t)m->nl;
            out[n][0] = lo->part_offset[i] + (size_t)l * per, out[n++][1] = per;
        }
    }
    return n;
}

size_t vkg__model_split_host_bytes(const vkg_model *m)
{
    return m->split && m->split->host ? vkg_arena_size(m->split->host) : 0;
}

void vkg__model_split_free(vkg_model *m)
{
    struct vkg_model_split *b = m->split;
    if (!b)
        return;
    for (int i = 0; b->lists && i < b->n; i++)
        vkg_cmd_destroy(&b->lists[i]);
    vkg_cmd_destroy(&b->upload);
    free(b->lists), free(b->last), free(b->values), free(b->copies), free(b->first_copy);
    vkg_arena_destroy(&b->host);
    free(b);
    m->split = NULL;
}

/* Record list k's copies between the gradients and host_dst (to_host: at the end of its list;
 * otherwise into the upload list). No-op without copies (unified memory, no pack). */
static vkg_status record_copies(vkg_model *m, vkg_cmd *c, int k, int to_host)
{
    struct vkg_model_split *b = m->split;
    if (!b->copies)
        return VKG_OK;
    vkg_cmd_group_begin(c); /* disjoint ranges */
    vkg_status st = VKG_OK;
    for (int i = b->first_copy[k]; st == VKG_OK && i < b->first_copy[k + 1]; i++) {
        size_t bytes = b->copies[i][2] * sizeof(float);
        vkg_tensor dev = vkg_tensor_view(m->grads, b->copies[i][0] * sizeof(float), bytes);
        vkg_tensor host = vkg_tensor_view(b->host_dst, b->copies[i][1] * sizeof(float), bytes);
        st = to_host ? vkg_cmd_copy(c, host, dev, bytes) : vkg_cmd_copy(c, dev, host, bytes);
    }
    vkg_cmd_group_end(c);
    return st;
}

/* Recorder hook: after the unit that ends a list, end it and begin the next. */
static vkg_status cut(void *ctx, vkg_cmd **pc, int unit)
{
    vkg_model *m = ctx;
    struct vkg_model_split *b = m->split;
    int k = b->recording;
    if (k == b->n - 1 || unit != b->last[k])
        return VKG_OK;
    VKG_TRY(record_copies(m, *pc, k, 1));
    VKG_TRY(vkg_cmd_end(*pc));
    b->recording = k + 1;
    *pc = b->lists[k + 1];
    return vkg_cmd_begin(*pc);
}

/* The copies of a split without a pack on a device without unified memory: each list's units,
 * each range to the same offset of the host copy. */
static vkg_status unit_copies(vkg_model *m)
{
    struct vkg_model_split *b = m->split;
    int units = vkg_model_unit_count(m), nc = 0;
    b->copies = malloc((size_t)units * VKG_MODEL_MAX_UNIT_RANGES * sizeof *b->copies);
    VKG_CHECK(b->copies, VKG_ERR_NOMEM, "no memory for a split recording");
    for (int k = 0; k < b->n; k++) {
        b->first_copy[k] = nc;
        for (int u = k ? b->last[k - 1] + 1 : 0; u <= b->last[k]; u++) {
            size_t r[VKG_MODEL_MAX_UNIT_RANGES][2];
            int nr = vkg_model_unit_ranges(m, u, r);
            for (int i = 0; i < nr; i++, nc++)
                b->copies[nc][0] = b->copies[nc][1] = r[i][0], b->copies[nc][2] = r[i][1];
        }
    }
    b->first_copy[b->n] = nc;
    return VKG_OK;
}

/* The copies of a pack: list k's ranges, each to the next place of the packed buffer. */
static vkg_status pack_copies(vkg_model *m, const vkg_model_pack *p)
{
    struct vkg_model_split *b = m->split;
    int nc = p->first[b->n];
    VKG_CHECK(p->first[0] == 0 && nc >= 0, VKG_ERR_INVALID_ARG,
              "a gradient pack's ranges must start at 0 and end at >= 0, got %d and %d",
              p->first[0], nc);
    b->copies = malloc((size_t)(nc ? nc : 1) * sizeof *b->copies);
    VKG_CHECK(b->copies, VKG_ERR_NOMEM, "no memory for a split recording");
    size_t at = 0;
    for (int k = 0; k <= b->n; k++) {
        VKG_CHECK(k == 0 || p->first[k] >= p->first[k - 1], VKG_ERR_INVALID_ARG,
                  "gradient pack list %d starts at range %d, before list %d's %d", k, p->first[k],
                  k - 1, p->first[k - 1]);
        b->first_copy[k] = p->first[k];
    }
    for (int i = 0; i < nc; i++) {
        size_t off = p->ranges[i][0], count = p->ranges[i][1];
        VKG_CHECK(off <= m->nparams && count <= m->nparams - off, VKG_ERR_INVALID_ARG,
                  "gradient pack range %d (%zu floats at %zu) exceeds the %zu gradients", i, count,
                  off, m->nparams);
        b->copies[i][0] = off, b->copies[i][1] = at, b->copies[i][2] = count;
        at += count;
    }
    VKG_CHECK(at * sizeof(float) <= p->dst.bytes, VKG_ERR_INVALID_ARG,
              "a gradient pack of %zu floats does not fit its buffer of %zu bytes", at,
              p->dst.bytes);
    b->host_dst = p->dst;
    return VKG_OK;
}

/* Where lists leave finished units for the host: a pack's buffer, the gradient arena's mapping,
 * or a host copy; with copies, also the list that copies them back. */
static vkg_status setup_host_side(vkg_model *m, const vkg_model_pack *pack)
{
    struct vkg_model_split *b = m->split;
    size_t bytes = m->nparams * sizeof(float);
    void *map = vkg_tensor_host_ptr(m->grads);
    b->first_copy = malloc((size_t)(b->n + 1) * sizeof *b->first_copy);
    VKG_CHECK(b->first_copy, VKG_ERR_NOMEM, "no memory for a split recording");
    if (pack) {
        VKG_TRY(pack_copies(m, pack));
    } else if (map) {
        b->host_grads = map;
        return VKG_OK;
    } else {
        VKG_TRY(vkg_arena_create_host(m->dev, bytes, "gradient host copy", &b->host));
        VKG_TRY(vkg_arena_alloc(b->host, bytes, &b->host_dst));
        b->host_grads = vkg_tensor_host_ptr(b->host_dst);
        VKG_TRY(unit_copies(m));
    }
    VKG_TRY(vkg_cmd_create(m->dev, &b->upload));
    VKG_TRY(vkg_cmd_begin(b->upload));
    for (int k = 0; k < b->n; k++)
        VKG_TRY(record_copies(m, b->upload, k, 0));
    return vkg_cmd_end(b->upload);
}

static vkg_status check_cuts(const vkg_model *m, const int *last, int n)
{
    int units = vkg_model_unit_count(m);
    VKG_CHECK(n >= 1 && n <= units, VKG_ERR_INVALID_ARG, "a split needs 1 to %d lists, got %d",
              units, n);
    for (int k = 0; k < n; k++)
        VKG_CHECK(last[k] >= 0 && last[k] < units && (k == 0 || last[k] > last[k - 1]),
                  VKG_ERR_INVALID_ARG,
                  "split list %d ends at unit %d: units must increase in [0, %d)", k, last[k],
                  units);
    VKG_CHECK(last[n - 1] == units - 1, VKG_ERR_INVALID_ARG,
              "the last split list must end with the last unit (%d), not %d", units - 1,
              last[n - 1]);
    return VKG_OK;
}

/* The split of slot `slot`'s backward (slot >= 0: DOUT copied in at the start, DIN out at the
 * end, as the slot's BWD list does) or of slot 0's forward-backward (slot < 0). */
static vkg_status split_record(vkg_model *m, int slot, const int *last, int n,
                               const vkg_model_pack *pack)
{
    VKG_TRY(check_cuts(m, last, n));
    VKG_CHECK(slot < m->opts.slots, VKG_ERR_INVALID_ARG, "activation slot %d outside [0, %d)", slot,
              m->opts.slots);
    vkg__model_split_free(m);
    struct vkg_model_split *b = calloc(1, sizeof *b);
    VKG_CHECK(b, VKG_ERR_NOMEM, "no memory for a split recording");
    m->split = b;
    b->n = n;
    b->slot = slot;
    b->last = malloc((size_t)n * sizeof *b->last);
    b->values = calloc((size_t)n, sizeof *b->values);
    b->lists = calloc((size_t)n, sizeof *b->lists);
    vkg_status st = VKG_OK;
    VKG_CHECK_GOTO(st, b->last && b->values && b->lists, VKG_ERR_NOMEM, fail,
                   "no memory for a split recording");
    memcpy(b->last, last, (size_t)n * sizeof *last);
    VKG_TRY_GOTO(st, setup_host_side(m, pack), fail);
    for (int k = 0; k < n; k++)
        VKG_TRY_GOTO(st, vkg_cmd_create(m->dev, &b->lists[k]), fail);
    vkg_cmd *c = b->lists[0];
    b->recording = 0;
    VKG_TRY_GOTO(st, vkg_cmd_begin(c), fail);
    if (slot < 0) {
        VKG_TRY_GOTO(st, vkg__model_record_fwdbwd_cut(m, 0, &c, cut, m), fail);
    } else {
        if (!m->head)
            VKG_TRY_GOTO(st, vkg__model_record_boundary(m, c, VKG_MODEL_DOUT, slot), fail);
        VKG_TRY_GOTO(st, vkg__model_record_backward_cut(m, slot, &c, cut, m), fail);
    }
    VKG_CHECK_GOTO(st, b->recording == n - 1, VKG_ERR_STATE, fail,
                   "split backward recorded %d of %d lists", b->recording + 1, n);
    VKG_TRY_GOTO(st, record_copies(m, c, n - 1, 1), fail);
    if (slot >= 0 && !m->embed)
        VKG_TRY_GOTO(st, vkg__model_record_boundary(m, c, VKG_MODEL_DIN, slot), fail);
    VKG_TRY_GOTO(st, vkg_cmd_end(c), fail);
    return VKG_OK;
fail:
    vkg__model_split_free(m);
    return st;
}

vkg_status vkg_model_split(vkg_model *m, const int *last, int n, const vkg_model_pack *pack)
{
    VKG_CHECK(m->embed && m->head, VKG_ERR_STATE,
              "vkg_model_split records the whole model's forward-backward; a part's backward is "
              "vkg_model_split_backward's");
    return split_record(m, -1, last, n, pack);
}

vkg_status vkg_model_split_backward(vkg_model *m, int slot, const int *last, int n,
                                    const vkg_model_pack *pack)
{
    VKG_CHECK(slot >= 0, VKG_ERR_INVALID_ARG, "activation slot %d outside [0, %d)", slot,
              m->opts.slots);
    return split_record(m, slot, last, n, pack);
}

int vkg_model_split_count(const vkg_model *m)
{
    return m->split ? m->split->n : 0;
}

vkg_status vkg_model_split_submit(vkg_model *m, const int32_t *inputs, const int32_t *targets)
{
    struct vkg_model_split *b = m->split;
    VKG_CHECK(b, VKG_ERR_STATE, "no split recording (vkg_model_split)");
    if (b->slot >= 0) { /* a backward: the slot's forward ran before */
        m->slots[b->slot].logits_valid = 0;
    } else {
        VKG_CHECK(targets || !m->head, VKG_ERR_INVALID_ARG,
                  "the last part's forward needs targets");
        VKG_TRY(vkg__model_upload(m, 0, inputs, targets));
    }
    for (int k = 0; k < b->n; k++)
        VKG_TRY(vkg_cmd_submit(b->lists[k], &b->values[k]));
    return VKG_OK;
}

vkg_status vkg_model_split_wait(vkg_model *m, int k)
{
    struct vkg_model_split *b = m->split;
    VKG_CHECK(b && k >= 0 && k < b->n, VKG_ERR_INVALID_ARG, "no split list %d", k);
    return vkg_cmd_wait(b->lists[k], b->values[k], 0);
}

vkg_status vkg_model_split_idle_wait(vkg_model *m)
{
    struct vkg_model_split *b = m->split;
    VKG_CHECK(b, VKG_ERR_STATE, "no split recording (vkg_model_split)");
    return vkg__device_wait(m->dev, b->values[b->n - 1], 600ull * 1000000000ull);
}

vkg_status vkg_model_split_finish(vkg_model *m, float *mean_loss)
{
    VKG_TRY(vkg_model_split_wait(m, m->split ? m->split->n - 1 : 0));
    if (m->split->slot >= 0) /* a backward alone computes no loss */
        return VKG_OK;
    return vkg__model_mean_loss(m, 0, mean_loss);
}

float *vkg_model_grads_host(vkg_model *m)
{
    return m->split ? m->split->host_grads : NULL;
}

vkg_status vkg_model_split_commit(vkg_model *m)
{
    VKG_CHECK(m->split, VKG_ERR_STATE, "no split recording (vkg_model_split)");
    return m->split->upload ? vkg_cmd_run(m->split->upload, 0) : VKG_OK;
}

vkg_status vkg_model_encoded_grad_read(vkg_model *m, float *dst)
{
    size_t n = (size_t)m->opts.B * (size_t)m->opts.T * (size_t)m->cfg.channels;
    return vkg_tensor_read(m->dev, m->gacts.s.dencoded, 0, dst, n * sizeof *dst);
}
