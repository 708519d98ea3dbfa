/* The gradient reducer (see reducer.h): buffers, buckets, the zero-copy import, the overlapped
 * last micro-batch and the allreduce or reduce-scatter in fp32 or bf16. */
#include "parallel/reducer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os/clock.h"
#include "os/thread.h"
#include "base/error.h"
#include "parallel/buckets.h"
#include "parallel/grad_bf16.h"
#include "parallel/tied_wte.h"

struct vkg_grad_reducer {
    vkg_job *job;
    vkg_gpt2 *model;
    vkg_grad_reducer_config cfg;
    float *grads;               /* (param count) the collectives' buffer (vkg_comm_buffer_alloc) */
    size_t grads_bytes;         /* its size: whole units of the device's import alignment */
    vkg_arena *grads_import;    /* grads as a device buffer: zero-copy buckets (NULL: copy path) */
    uint64_t zero_copy_buckets; /* buckets reduced with neither a pack nor an unpack on the host */
    char bucket_path[256];      /* how buckets reach grads, and why ("" without buckets) */
    uint16_t *grads16;          /* (param count) bf16 exchange buffer (NULL unless bf16) */
    uint16_t *group16;          /* pipeline bf16: (param count) this rank's, (dp, ...) all */
    vkg_buckets *buckets;       /* NULL without overlap */
    int N, me;                  /* sharded: the shards and this rank's */
    size_t *bounds;             /* sharded: (N + 1) the shards' parameter bounds */
    size_t *bucket_bounds;      /* sharded: (buckets, N + 1) the shards in each bucket */
    double comm_ms, exposed_ms; /* gradient communication of the last step */
};

const char *vkg_grad_reducer_describe(const vkg_grad_reducer_config *c)
{
    if (c->dtype != VKG_COMM_BF16)
        return "fp32";
    if (c->pipeline)
        return "bf16 (rounded to nearest even, gathered over the stage's data-parallel group and "
               "summed in fp32 in rank order, rounded once; widened to fp32 for clipping and "
               "AdamW; the first and last stages' wte sum stays fp32)";
    if (c->shards)
        return "bf16 (rounded to nearest even, reduce-scattered in bf16, summed in fp32 and "
               "rounded once; this rank's shard widened to fp32 for clipping and AdamW)";
    return "bf16 (rounded to nearest even, allreduced in bf16, summed in fp32 and rounded once; "
           "widened to fp32 for clipping and AdamW; the tied wte's embedding rows stay fp32)";
}

/* Sharded: buf (n floats at its place in r->grads, bucket k or, k < 0, the whole gradient)
 * reduce-scattered so that this rank's shard of it is summed, bitwise what the allreduce gives
 * there; in bf16 every element rounded (the peers' chunks leave from here) and only this rank's
 * chunk widened back: the rest of buf stays unreduced, as the fp32 reduce-scatter leaves it. */
static vkg_status reduce_scatter(vkg_grad_reducer *r, int k, float *buf, size_t n)
{
    const size_t *b = k < 0 ? r->bounds : r->bucket_bounds + (size_t)k * (size_t)(r->N + 1);
    if (!r->grads16)
        return vkg_comm_reduce_scatter(vkg_job_comm(r->job), buf, n, b);
    uint16_t *half = r->grads16 + (buf - r->grads);
    vkg_grad_bf16_narrow(buf, half, n);
    VKG_TRY(vkg_comm_reduce_scatter_dtype(vkg_job_comm(r->job), half, n, b, VKG_COMM_BF16));
    vkg_grad_bf16_widen(half + b[r->me], buf + b[r->me], b[r->me + 1] - b[r->me]);
    return VKG_OK;
}

/* Sum gradients over the group: buf (n floats at its place in r->grads) is gradient bucket k
 * packed (k < 0: the whole gradient); in bf16 rounded through r->grads16 at the same offset. */
static vkg_status reduce_grads(vkg_grad_reducer *r, int k, float *buf, size_t n)
{
    if (r->cfg.pipeline && !r->cfg.group)
        return VKG_OK;
    if (r->cfg.pipeline && r->group16)
        return vkg_grad_bf16_group_sum(r->cfg.group, buf, n, r->group16, r->group16 + n);
    if (r->cfg.pipeline)
        return vkg_group_allreduce_sum(r->cfg.group, buf, n);
    if (r->bounds)
        return reduce_scatter(r, k, buf, n);
    if (!r->grads16)
        return vkg_job_allreduce_sum(r->job, buf, n);
    uint16_t *half = r->grads16 + (buf - r->grads);
    vkg_grad_bf16_narrow(buf, half, n);
    VKG_TRY(vkg_comm_allreduce(vkg_job_comm(r->job), half, half, n, VKG_COMM_BF16, VKG_COMM_SUM));
    vkg_grad_bf16_widen(half, buf, n);
    return VKG_OK;
}

/* Import the collectives' buffer for the zero-copy path into *packed; 0 (and why, in
 * r->bucket_path) when the copy path must be taken. */
static int import_grads(vkg_grad_reducer *r, vkg_tensor *packed)
{
    vkg_device_t *dev = vkg_gpt2_device(r->model);
    const vkg_device_info *info = vkg_device_get_info(dev);
    const vkg_comm_t *comm = vkg_job_comm(r->job);
    const char *where = vkg_comm_buffer_in_segment(comm, r->grads, r->grads_bytes)
                            ? "this rank's part of the shared-memory segment"
                        : vkg_comm_uses_shm(comm)
                            ? "host memory of the collectives (the segment's pool is too small: "
                              "VKG_COMM_SHM_POOL)"
                            : "host memory of the collectives";
    size_t cap = sizeof r->bucket_path;
    if (r->cfg.force_copy_path) {
        snprintf(r->bucket_path, cap, "copy: zero-copy turned off (--zero-copy 0)");
        return 0;
    }
    if (!info->external_memory_host) {
        snprintf(r->bucket_path, cap,
                 "copy: %.160s does not import host memory (VK_EXT_external_memory_host)",
                 info->name);
        return 0;
    }
    vkg_status st =
        vkg_arena_import_host(dev, r->grads, r->grads_bytes, "gradient buckets", &r->grads_import);
    if (st == VKG_OK)
        st = vkg_arena_alloc(r->grads_import, r->grads_bytes, packed);
    if (st != VKG_OK) {
        snprintf(r->bucket_path, cap, "copy: the import failed: %.200s", vkg_error_message());
        vkg_arena_destroy(&r->grads_import);
        return 0;
    }
    snprintf(r->bucket_path, cap,
             "zero-copy: the device copies each bucket into %s (VK_EXT_external_memory_host)",
             where);
    return 1;
}

/* Sharded with buckets: where the shards fall in each bucket. The ranges of a bucket are packed
 * in ascending order, so shard q's part of it is one run of the packed buffer. */
static vkg_status shard_buckets(vkg_grad_reducer *r)
{
    int nb = vkg_buckets_count(r->buckets), N = r->N;
    r->bucket_bounds = malloc((size_t)nb * (size_t)(N + 1) * sizeof *r->bucket_bounds);
    VKG_CHECK(r->bucket_bounds, VKG_ERR_NOMEM, "no memory for %d buckets' shards", nb);
    for (int k = 0; k < nb; k++) {
        const size_t(*rg)[2];
        int nr = vkg_buckets_ranges(r->buckets, k, &rg);
        size_t *bb = r->bucket_bounds + (size_t)k * (size_t)(N + 1);
        for (int q = 0; q <= N; q++) {
            bb[q] = 0; /* the bucket's floats before the shard's first parameter */
            for (int i = 0; i < nr; i++)
                bb[q] += r->bounds[q] <= rg[i][0]              ? 0
                         : r->bounds[q] >= rg[i][0] + rg[i][1] ? rg[i][1]
                                                               : r->bounds[q] - rg[i][0];
        }
    }
    return VKG_OK;
}

/* The buffers, the shards and the buckets (see vkg_grad_reducer_create). */
static vkg_status setup(vkg_grad_reducer *r)
{
    vkg_comm_t *comm = vkg_job_comm(r->job);
    size_t n = vkg_gpt2_param_count(r->model);
    size_t align = (size_t)vkg_device_get_info(vkg_gpt2_device(r->model))->host_import_alignment;
    align = align ? align : 1;
    r->grads_bytes = (n * sizeof *r->grads + align - 1) / align * align;
    VKG_TRY(vkg_comm_buffer_alloc(comm, r->grads_bytes, (void **)&r->grads));
    if (r->cfg.pipeline) {
        VKG_CHECK(!r->cfg.shards, VKG_ERR_INVALID_ARG,
                  "a pipeline stage's gradient reducer takes no shards");
        if (r->cfg.group && r->cfg.dtype == VKG_COMM_BF16) {
            size_t dp = (size_t)vkg_group_size(r->cfg.group);
            r->group16 = malloc(n * (dp + 1) * sizeof *r->group16);
            VKG_CHECK(r->group16, VKG_ERR_NOMEM, "no memory for %zu bf16 gradients", dp + 1);
        }
        if (!r->cfg.group) /* nothing to overlap: a stage alone in its group */
            r->cfg.bucket_bytes = 0;
    } else if (r->cfg.dtype == VKG_COMM_BF16) {
        size_t bytes = (n * sizeof *r->grads16 + 3) / 4 * 4;
        VKG_TRY(vkg_comm_buffer_alloc(comm, bytes, (void **)&r->grads16));
    }
    if (r->cfg.shards) {
        r->N = vkg_job_dp(r->job), r->me = vkg_job_replica(r->job);
        r->bounds = malloc((size_t)(r->N + 1) * sizeof *r->bounds);
        VKG_CHECK(r->bounds, VKG_ERR_NOMEM, "no memory for %d shards", r->N);
        memcpy(r->bounds, r->cfg.shards, (size_t)(r->N + 1) * sizeof *r->bounds);
        r->cfg.shards = NULL; /* not kept */
    }
    if (!r->cfg.bucket_bytes)
        return VKG_OK;
    vkg_tensor packed;
    int zero_copy = import_grads(r, &packed);
    VKG_TRY(vkg_buckets_create(r->model, r->cfg.pipeline ? r->cfg.backward_slot : -1,
                               (size_t)r->cfg.bucket_bytes, zero_copy ? &packed : NULL,
                               &r->buckets));
    return r->bounds ? shard_buckets(r) : VKG_OK;
}

vkg_status vkg_grad_reducer_create(vkg_job *job, vkg_gpt2 *m, const vkg_grad_reducer_config *c,
                                   vkg_grad_reducer **out)
{
    vkg_grad_reducer *r = calloc(1, sizeof *r);
    VKG_CHECK(r, VKG_ERR_NOMEM, "no memory for the gradient reducer");
    r->job = job, r->model = m, r->cfg = *c;
    vkg_status st = setup(r);
    if (st != VKG_OK) {
        vkg_grad_reducer_destroy(&r);
        return st;
    }
    *out = r;
    return VKG_OK;
}

void vkg_grad_reducer_destroy(vkg_grad_reducer **pr)
{
    vkg_grad_reducer *r = pr ? *pr : NULL;
    if (!r)
        return;
    vkg_buckets_destroy(&r->buckets);
    vkg_arena_destroy(&r->grads_import);
    if (r->grads)
        vkg_comm_buffer_free(vkg_job_comm(r->job), r->grads);
    if (r->grads16)
        vkg_comm_buffer_free(vkg_job_comm(r->job), r->grads16);
    free(r->bounds), free(r->bucket_bounds), free(r->group16);
    free(r);
    *pr = NULL;
}

int vkg_grad_reducer_bucket_count(const vkg_grad_reducer *r)
{
    return r->buckets ? vkg_buckets_count(r->buckets) : 0;
}

const char *vkg_grad_reducer_bucket_path(const vkg_grad_reducer *r)
{
    return r->bucket_path;
}

uint64_t vkg_grad_reducer_zero_copy_buckets(const vkg_grad_reducer *r)
{
    return r->zero_copy_buckets;
}

float *vkg_grad_reducer_host(vkg_grad_reducer *r)
{
    return r->grads;
}

/* Notes when the device has finished the whole backward pass (for the exposed-time figure). */
typedef struct finish_watch {
    vkg_gpt2 *model;
    double done_ms;
    vkg_status st;
} finish_watch;

static void *watch_finish(void *p)
{
    finish_watch *w = p;
    w->st = vkg_gpt2_split_idle_wait(w->model);
    w->done_ms = vkg_os_now_ms();
    return NULL;
}

/* The end of an overlapped backward: the watcher joined (th NULL: none started), the first
 * error, and the step's figures: comm ms of reductions, the part of it after the device was done
 * (ended at `end`). */
static vkg_status overlap_end(vkg_grad_reducer *r, vkg_status st, vkg_os_thread *th,
                              const finish_watch *w, double comm, double end)
{
    if (th)
        vkg_os_thread_join(th, NULL);
    VKG_TRY(st);
    VKG_TRY(w->st);
    r->comm_ms = comm;
    r->exposed_ms = th && end > w->done_ms ? end - w->done_ms : 0.0;
    if (r->exposed_ms > comm)
        r->exposed_ms = comm;
    return VKG_OK;
}

/* The last micro-batch with the reduction overlapped: each bucket is read as soon as the device
 * has finished it (on the zero-copy path the device has put it in place already) and reduced
 * while the device goes on with the backward pass; every bucket but the first is handed back at
 * once (zero-copy: by the device at commit); the first (wte's classifier gradient) waits for the
 * embedding rows of the whole job (tied_wte.c). The calling thread is the communication thread:
 * once the step is submitted it has nothing else to do but wait for buckets and reduce them. */
static vkg_status backward_overlapped(vkg_grad_reducer *r, const int32_t *inputs,
                                      const int32_t *targets, float *loss)
{
    vkg_gpt2 *m = r->model;
    int copy = r->grads_import == NULL;
    const size_t(*r0)[2];
    VKG_CHECK(vkg_buckets_ranges(r->buckets, 0, &r0) > 0 && r0[0][0] == 0, VKG_ERR_STATE,
              "the first gradient bucket does not start with wte");
    VKG_TRY(vkg_gpt2_split_submit(m, inputs, targets));
    finish_watch w = {.model = m};
    vkg_os_thread *th = NULL;
    int watching = vkg_os_thread_start(&th, watch_finish, &w) == 0;
    vkg_status st = VKG_OK;
    double comm = 0.0, end = 0.0;
    size_t base = 0;
    for (int k = 0; st == VKG_OK && k < vkg_buckets_count(r->buckets); k++) {
        float *buf = r->grads + base;
        size_t n = vkg_buckets_floats(r->buckets, k);
        st = vkg_gpt2_split_wait(m, k);
        if (st == VKG_OK && copy)
            vkg_buckets_read(r->buckets, k, buf);
        double t0 = vkg_os_now_ms();
        if (st == VKG_OK)
            st = reduce_grads(r, k, buf, n);
        end = vkg_os_now_ms();
        comm += end - t0;
        if (st == VKG_OK && k > 0 && copy)
            vkg_buckets_write(r->buckets, k, buf);
        r->zero_copy_buckets += st == VKG_OK && !copy;
        base += n;
    }
    if (st == VKG_OK)
        st = vkg_gpt2_split_finish(m, loss);
    if (st == VKG_OK) {
        double t0 = vkg_os_now_ms();
        st = vkg_tied_wte_add_rows(r->job, m, inputs, r->grads);
        end = vkg_os_now_ms();
        comm += end - t0;
    }
    if (st == VKG_OK && copy)
        vkg_buckets_write(r->buckets, 0, r->grads);
    if (st == VKG_OK)
        st = vkg_gpt2_split_commit(m);
    return overlap_end(r, st, watching ? th : NULL, &w, comm, end);
}

vkg_status vkg_grad_reducer_last_micro(vkg_grad_reducer *r, const int32_t *inputs,
                                       const int32_t *targets, float *loss)
{
    r->comm_ms = r->exposed_ms = 0.0;
    if (!r->buckets)
        return vkg_gpt2_forward_backward(r->model, inputs, targets, loss);
    return backward_overlapped(r, inputs, targets, loss);
}

vkg_status vkg_grad_reducer_last_backward(vkg_grad_reducer *r, vkg_status (*done)(void *ctx),
                                          void *ctx)
{
    VKG_CHECK(r->cfg.pipeline && r->buckets, VKG_ERR_STATE,
              "a stage's overlapped last backward needs a pipeline reducer with buckets");
    vkg_gpt2 *m = r->model;
    int copy = r->grads_import == NULL, nb = vkg_buckets_count(r->buckets), wte_k = -1;
    r->comm_ms = r->exposed_ms = 0.0;
    VKG_TRY(vkg_gpt2_split_submit(m, NULL, NULL));
    finish_watch w = {.model = m};
    vkg_os_thread *th = NULL;
    int watching = vkg_os_thread_start(&th, watch_finish, &w) == 0;
    vkg_status st = VKG_OK;
    double comm = 0.0, end = 0.0;
    size_t base = 0, wte = 0;
    for (int k = 0; st == VKG_OK && k < nb; k++) {
        float *buf = r->grads + base;
        size_t n = vkg_buckets_floats(r->buckets, k);
        const size_t(*rg)[2];
        if (vkg_buckets_ranges(r->buckets, k, &rg) > 0 && rg[0][0] == 0)
            wte_k = k, wte = base; /* wte starts the part and its bucket (tied_wte.h) */
        st = vkg_gpt2_split_wait(m, k);
        if (st == VKG_OK && k == nb - 1 && done) /* DIN first: the previous stage waits for it */
            st = done(ctx);
        if (st == VKG_OK && copy)
            vkg_buckets_read(r->buckets, k, buf);
        double t0 = vkg_os_now_ms();
        if (st == VKG_OK)
            st = reduce_grads(r, k, buf, n);
        end = vkg_os_now_ms();
        comm += end - t0;
        if (st == VKG_OK && k != wte_k && copy)
            vkg_buckets_write(r->buckets, k, buf);
        r->zero_copy_buckets += st == VKG_OK && !copy;
        base += n;
    }
    if (st == VKG_OK && wte_k >= 0) { /* then wte's two copies over the tie group */
        double t0 = vkg_os_now_ms();
        st = vkg_tied_wte_pipe_sum(r->job, m, r->grads + wte);
        end = vkg_os_now_ms();
        comm += end - t0;
        if (st == VKG_OK && copy)
            vkg_buckets_write(r->buckets, wte_k, r->grads + wte);
    }
    if (st == VKG_OK)
        st = vkg_gpt2_split_finish(m, NULL);
    if (st == VKG_OK)
        st = vkg_gpt2_split_commit(m);
    return overlap_end(r, st, watching ? th : NULL, &w, comm, end);
}

vkg_status vkg_grad_reducer_reduce(vkg_grad_reducer *r, double *comm_ms, double *exposed_ms)
{
    int pipe_idle = r->cfg.pipeline && !r->cfg.group && !vkg_job_tie_group(r->job);
    if (!r->buckets && pipe_idle)
        r->comm_ms = r->exposed_ms = 0.0; /* a middle stage alone in its group: nothing to sum */
    else if (!r->buckets) {
        size_t n = vkg_gpt2_param_count(r->model);
        VKG_TRY(vkg_gpt2_get_grads(r->model, r->grads));
        double t0 = vkg_os_now_ms();
        VKG_TRY(reduce_grads(r, -1, r->grads, n));
        if (r->cfg.pipeline)
            VKG_TRY(vkg_tied_wte_pipe_sum(r->job, r->model, r->grads));
        r->comm_ms = r->exposed_ms = vkg_os_now_ms() - t0;
        VKG_TRY(vkg_gpt2_set_grads(r->model, r->grads));
    }
    *comm_ms = r->comm_ms;
    *exposed_ms = r->exposed_ms;
    return VKG_OK;
}
