/* Gradient buckets: the forward-backward step recorded as one command list per bucket, so that a
 * data-parallel trainer can reduce a bucket's gradients while the device computes the rest of the
 * backward pass. Every list is submitted at once and signals the device's timeline semaphore when
 * it completes; waiting for bucket k waits for its list's value only.
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
    vkg_arena *arena;    /* enc_dwte */
    int recording;       /* the list being recorded */
};

enum {
    WTE,
    WPE,
    LN1W,
    LN1B,
    QKVW,
    QKVB,
    ATTPROJW,
    ATTPROJB,
    LN2W,
    LN2B,
    FCW,
    FCB,
    FCPROJW,
    FCPROJB,
    LNFW,
    LNFB
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
    free(b->lists), free(b->first_range), free(b->ranges), free(b->values), free(b->unit_bucket);
    vkg_arena_destroy(&b->arena);
    free(b);
    m->buckets = NULL;
}

/* Recorder hook: after the unit that closes a bucket, end its list and begin the next. */
static vkg_status cut(void *ctx, vkg_cmd **pc, int unit)
{
    vkg_gpt2 *m = ctx;
    struct vkg_gpt2_buckets *b = m->buckets;
    int k = b->unit_bucket[unit];
    if (k < 0 || k == b->n - 1)
        return VKG_OK;
    VKG_TRY(vkg_cmd_end(*pc));
    b->recording = k + 1;
    *pc = b->lists[k + 1];
    return vkg_cmd_begin(*pc);
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
    size_t enc = (size_t)m->cfg.padded_vocab_size * (size_t)m->cfg.channels * sizeof(float);
    VKG_TRY_GOTO(st, vkg_arena_create(m->dev, enc + 4096, "wte embedding-row gradients", &b->arena),
                 fail);
    VKG_TRY_GOTO(st, vkg_arena_alloc(b->arena, enc, &m->enc_dwte), fail);
    for (int k = 0; k < b->n; k++)
        VKG_TRY_GOTO(st, vkg_cmd_create(m->dev, &b->lists[k]), fail);
    vkg_cmd *c = b->lists[0];
    b->recording = 0;
    VKG_TRY_GOTO(st, vkg_cmd_begin(c), fail);
    VKG_TRY_GOTO(st, vkg__gpt2_record_fwdbwd_cut(m, &c, cut, m), fail);
    VKG_CHECK_GOTO(st, b->recording == b->n - 1, VKG_ERR_STATE, fail,
                   "bucketed backward recorded %d of %d lists", b->recording + 1, b->n);
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

vkg_status vkg_gpt2_grads_read(vkg_gpt2 *m, size_t offset, size_t count, float *dst)
{
    VKG_CHECK(offset + count <= m->nparams, VKG_ERR_INVALID_ARG, "gradient range out of bounds");
    return vkg_tensor_read(m->dev, m->grads, offset * 4, dst, count * 4);
}

vkg_status vkg_gpt2_grads_write(vkg_gpt2 *m, size_t offset, size_t count, const float *src)
{
    VKG_CHECK(offset + count <= m->nparams, VKG_ERR_INVALID_ARG, "gradient range out of bounds");
    return vkg_tensor_write(m->dev, m->grads, offset * 4, src, count * 4);
}

vkg_status vkg_gpt2_embedding_row_read(vkg_gpt2 *m, int token, float *row)
{
    size_t C = (size_t)m->cfg.channels;
    VKG_CHECK(m->buckets && token >= 0 && token < m->cfg.vocab_size, VKG_ERR_INVALID_ARG,
              "no embedding-row gradient for token %d", token);
    return vkg_tensor_read(m->dev, m->enc_dwte, (size_t)token * C * 4, row, C * 4);
}
