/* Gradient buckets: the forward-backward step recorded as one command list per bucket, so that a
 * data-parallel trainer can reduce a bucket's gradients while the device computes the rest of the
 * backward pass. Every list is submitted at once and signals the device's timeline semaphore when
 * it completes; waiting for bucket k waits for its list's value only.
 *
 * The host reads and writes a finished bucket without a transfer of its own (which would queue
 * behind the rest of the backward pass): on unified memory through the gradient arena's mapping;
 * on other devices each bucket's list ends by copying its ranges into a host-visible copy of the
 * gradients, and vkg_gpt2_bucket_commit copies the reduced ranges back in one submission.
 * Not here: the reduction itself (src/parallel), the per-step lists (gpt2_record.c). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt2_internal.h"

#define MAX_RANGES_PER_UNIT 12

struct vkg_gpt2_buckets {
    int n;               /* buckets (= command lists) */
    vkg_cmd **lists;     /* (n) */
    int *first_range;    /* (n + 1) index into ranges */
    size_t (*ranges)[2]; /* (offset, count) in floats */
    uint64_t *values;    /* (n) timeline values of the last submission */
    int *unit_bucket;    /* (L + 3) bucket that closes after this unit, or -1 */
    vkg_arena *host;     /* devices without unified memory: the gradients' host copy */
    vkg_tensor host_all; /* (nparams) in host */
    vkg_cmd *upload;     /* devices without unified memory: host copy -> gradients */
    float *host_grads;   /* (nparams) where the host reads and writes finished buckets */
    int recording;       /* the list being recorded */
};

static size_t tensor_offset(const vkg_gpt2 *m, int i)
{
    size_t off = 0;
    for (int j = 0; j < i; j++)
        off += m->param_sizes[j];
    return off;
}

/* The float ranges of unit u (0: wte, 1: final layernorm, 2..L+1: layer L+1-u, L+2: wpe). */
static int unit_ranges(const vkg_gpt2 *m, int u, size_t out[MAX_RANGES_PER_UNIT][2])
{
    int L = m->cfg.num_layers, n = 0;
    if (u == 0 || u == L + 2) {
        int a = u == 0 ? WTE : WPE;
        out[n][0] = tensor_offset(m, a), out[n++][1] = m->param_sizes[a];
        return n;
    }
    if (u == 1) {
        out[n][0] = tensor_offset(m, LNFW), out[n++][1] = m->param_sizes[LNFW];
        out[n][0] = tensor_offset(m, LNFB), out[n++][1] = m->param_sizes[LNFB];
        return n;
    }
    int l = L + 1 - u;
    for (int i = LN1W; i <= FCPROJB; i++) {
        size_t per = m->param_sizes[i] / (size_t)L;
        out[n][0] = tensor_offset(m, i) + (size_t)l * per, out[n++][1] = per;
    }
    return n;
}

void vkg__gpt2_buckets_free(vkg_gpt2 *m)
{
    struct vkg_gpt2_buckets *b = m->buckets;
    if (!b)
        return;
    for (int i = 0; b->lists && i < b->n; i++)
        vkg_cmd_destroy(&b->lists[i]);
    vkg_cmd_destroy(&b->upload);
    free(b->lists), free(b->first_range), free(b->ranges), free(b->values), free(b->unit_bucket);
    vkg_arena_destroy(&b->host);
    free(b);
    m->buckets = NULL;
}

/* Copy bucket k's ranges between the gradients and their host copy (to_host: at the end of its
 * list; otherwise into the upload list). No-op on unified memory. */
static vkg_status record_copies(vkg_gpt2 *m, vkg_cmd *c, int k, int to_host)
{
    struct vkg_gpt2_buckets *b = m->buckets;
    if (!b->host)
        return VKG_OK;
    vkg_cmd_group_begin(c); /* disjoint ranges */
    vkg_status st = VKG_OK;
    for (int i = b->first_range[k]; st == VKG_OK && i < b->first_range[k + 1]; i++) {
        size_t off = b->ranges[i][0] * sizeof(float), bytes = b->ranges[i][1] * sizeof(float);
        vkg_tensor dev = vkg_tensor_view(m->grads, off, bytes);
        vkg_tensor host = vkg_tensor_view(b->host_all, off, bytes);
        st = to_host ? vkg_cmd_copy(c, host, dev, bytes) : vkg_cmd_copy(c, dev, host, bytes);
    }
    vkg_cmd_group_end(c);
    return st;
}

/* Recorder hook: after the unit that closes a bucket, end its list and begin the next. */
static vkg_status cut(void *ctx, vkg_cmd **pc, int unit)
{
    vkg_gpt2 *m = ctx;
    struct vkg_gpt2_buckets *b = m->buckets;
    int k = b->unit_bucket[unit];
    if (k < 0 || k == b->n - 1)
        return VKG_OK;
    VKG_TRY(record_copies(m, *pc, k, 1));
    VKG_TRY(vkg_cmd_end(*pc));
    b->recording = k + 1;
    *pc = b->lists[k + 1];
    return vkg_cmd_begin(*pc);
}

/* Where the host reads and writes finished buckets; on devices without unified memory also the
 * host copy and the list that copies it back. */
static vkg_status setup_host_side(vkg_gpt2 *m)
{
    struct vkg_gpt2_buckets *b = m->buckets;
    size_t bytes = m->nparams * sizeof(float);
    void *map = vkg_arena_host_ptr(m->arena_grads);
    if (map) {
        b->host_grads = (float *)((char *)map + m->grads.offset);
        return VKG_OK;
    }
    VKG_TRY(vkg_arena_create_host(m->dev, bytes, "gradient host copy", &b->host));
    VKG_TRY(vkg_arena_alloc(b->host, bytes, &b->host_all));
    b->host_grads = (float *)((char *)vkg_arena_host_ptr(b->host) + b->host_all.offset);
    VKG_TRY(vkg_cmd_create(m->dev, &b->upload));
    VKG_TRY(vkg_cmd_begin(b->upload));
    for (int k = 0; k < b->n; k++)
        VKG_TRY(record_copies(m, b->upload, k, 0));
    return vkg_cmd_end(b->upload);
}

vkg_status vkg_gpt2_set_buckets(vkg_gpt2 *m, size_t bucket_bytes)
{
    vkg__gpt2_buckets_free(m);
    int L = m->cfg.num_layers, units = L + 3;
    struct vkg_gpt2_buckets *b = calloc(1, sizeof *b);
    VKG_CHECK(b, VKG_ERR_NOMEM, "no memory for gradient buckets");
    m->buckets = b;
    b->unit_bucket = malloc((size_t)units * sizeof *b->unit_bucket);
    b->first_range = malloc((size_t)(units + 1) * sizeof *b->first_range);
    b->ranges = malloc((size_t)units * MAX_RANGES_PER_UNIT * sizeof *b->ranges);
    b->values = calloc((size_t)units, sizeof *b->values);
    b->lists = calloc((size_t)units, sizeof *b->lists);
    vkg_status st = VKG_OK;
    VKG_CHECK_GOTO(st, b->unit_bucket && b->first_range && b->ranges && b->values && b->lists,
                   VKG_ERR_NOMEM, fail, "no memory for gradient buckets");
    /* Units in completion order, closed into a bucket once it holds bucket_bytes. */
    int nr = 0;
    size_t bytes = 0;
    b->first_range[0] = 0;
    for (int u = 0; u < units; u++) {
        size_t r[MAX_RANGES_PER_UNIT][2];
        int n = unit_ranges(m, u, r);
        for (int i = 0; i < n; i++) {
            b->ranges[nr][0] = r[i][0], b->ranges[nr++][1] = r[i][1];
            bytes += r[i][1] * sizeof(float);
        }
        b->unit_bucket[u] = -1;
        if (bytes >= bucket_bytes || u == units - 1) {
            b->unit_bucket[u] = b->n;
            b->first_range[++b->n] = nr;
            bytes = 0;
        }
    }
    VKG_TRY_GOTO(st, setup_host_side(m), fail);
    for (int k = 0; k < b->n; k++)
        VKG_TRY_GOTO(st, vkg_cmd_create(m->dev, &b->lists[k]), fail);
    vkg_cmd *c = b->lists[0];
    b->recording = 0;
    VKG_TRY_GOTO(st, vkg_cmd_begin(c), fail);
    VKG_TRY_GOTO(st, vkg__gpt2_record_fwdbwd_cut(m, &c, cut, m), fail);
    VKG_CHECK_GOTO(st, b->recording == b->n - 1, VKG_ERR_STATE, fail,
                   "bucketed backward recorded %d of %d lists", b->recording + 1, b->n);
    VKG_TRY_GOTO(st, record_copies(m, c, b->n - 1, 1), fail);
    VKG_TRY_GOTO(st, vkg_cmd_end(c), fail);
    return VKG_OK;
fail:
    vkg__gpt2_buckets_free(m);
    return st;
}

int vkg_gpt2_bucket_count(const vkg_gpt2 *m)
{
    return m->buckets ? m->buckets->n : 0;
}

int vkg_gpt2_bucket_ranges(const vkg_gpt2 *m, int k, const size_t (**ranges)[2])
{
    const struct vkg_gpt2_buckets *b = m->buckets;
    assert(b && k >= 0 && k < b->n);
    *ranges = (const size_t(*)[2])b->ranges + b->first_range[k];
    return b->first_range[k + 1] - b->first_range[k];
}

vkg_status vkg_gpt2_forward_backward_submit(vkg_gpt2 *m, const int32_t *inputs,
                                            const int32_t *targets)
{
    struct vkg_gpt2_buckets *b = m->buckets;
    VKG_CHECK(b, VKG_ERR_STATE, "no gradient buckets (vkg_gpt2_set_buckets)");
    VKG_CHECK(targets, VKG_ERR_INVALID_ARG, "forward_backward needs targets");
    VKG_TRY(vkg__gpt2_upload(m, inputs, targets));
    for (int k = 0; k < b->n; k++)
        VKG_TRY(vkg_cmd_submit(b->lists[k], &b->values[k]));
    return VKG_OK;
}

vkg_status vkg_gpt2_bucket_wait(vkg_gpt2 *m, int k)
{
    struct vkg_gpt2_buckets *b = m->buckets;
    VKG_CHECK(b && k >= 0 && k < b->n, VKG_ERR_INVALID_ARG, "no gradient bucket %d", k);
    return vkg_cmd_wait(b->lists[k], b->values[k], 0);
}

vkg_status vkg_gpt2_bucket_idle_wait(vkg_gpt2 *m)
{
    struct vkg_gpt2_buckets *b = m->buckets;
    VKG_CHECK(b, VKG_ERR_STATE, "no gradient buckets (vkg_gpt2_set_buckets)");
    return vkg__device_wait(m->dev, b->values[b->n - 1], 600ull * 1000000000ull);
}

vkg_status vkg_gpt2_bucket_finish(vkg_gpt2 *m, float *mean_loss)
{
    VKG_TRY(vkg_gpt2_bucket_wait(m, m->buckets ? m->buckets->n - 1 : 0));
    return vkg__gpt2_mean_loss(m, mean_loss);
}

/* Bucket k's ranges, packed in order, from or into the host side of the gradients. */
static void pack(vkg_gpt2 *m, int k, float *packed, int out)
{
    const struct vkg_gpt2_buckets *b = m->buckets;
    size_t at = 0;
    for (int i = b->first_range[k]; i < b->first_range[k + 1]; i++) {
        float *g = b->host_grads + b->ranges[i][0];
        size_t n = b->ranges[i][1];
        if (out)
            memcpy(packed + at, g, n * sizeof *g);
        else
            memcpy(g, packed + at, n * sizeof *g);
        at += n;
    }
}

size_t vkg_gpt2_bucket_floats(const vkg_gpt2 *m, int k)
{
    const struct vkg_gpt2_buckets *b = m->buckets;
    assert(b && k >= 0 && k < b->n);
    size_t n = 0;
    for (int i = b->first_range[k]; i < b->first_range[k + 1]; i++)
        n += b->ranges[i][1];
    return n;
}

vkg_status vkg_gpt2_bucket_read(vkg_gpt2 *m, int k, float *dst)
{
    VKG_CHECK(m->buckets && k >= 0 && k < m->buckets->n, VKG_ERR_INVALID_ARG,
              "no gradient bucket %d", k);
    pack(m, k, dst, 1);
    return VKG_OK;
}

vkg_status vkg_gpt2_bucket_write(vkg_gpt2 *m, int k, const float *src)
{
    VKG_CHECK(m->buckets && k >= 0 && k < m->buckets->n, VKG_ERR_INVALID_ARG,
              "no gradient bucket %d", k);
    pack(m, k, (float *)src, 0);
    return VKG_OK;
}

vkg_status vkg_gpt2_bucket_commit(vkg_gpt2 *m)
{
    VKG_CHECK(m->buckets, VKG_ERR_STATE, "no gradient buckets (vkg_gpt2_set_buckets)");
    return m->buckets->upload ? vkg_cmd_run(m->buckets->upload, 0) : VKG_OK;
}

vkg_status vkg_gpt2_encoded_grad_read(vkg_gpt2 *m, float *dst)
{
    size_t n = (size_t)m->opts.B * (size_t)m->opts.T * (size_t)m->cfg.channels;
    return vkg_tensor_read(m->dev, m->gacts.s.dencoded, 0, dst, n * sizeof *dst);
}
