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
#include "parallel/tied.h"

struct vkg_grad_reducer {
    vkg_job *job;
    vkg_model *model;
    vkg_grad_reducer_config cfg;
    vkg_group_t *group;         /* the data-parallel group summed over (NULL: none) */
    float *grads;               /* (param count) the collectives' buffer (vkg_comm_buffer_alloc) */
    size_t grads_bytes;         /* its size: whole units of the device's import alignment */
    vkg_arena *grads_import;    /* grads as a device buffer: zero-copy buckets (NULL: copy path) */
    uint64_t zero_copy_buckets; /* buckets reduced with neither a pack nor an unpack on the host */
    char bucket_path[256];      /* how buckets reach grads, and why ("" without buckets) */
    uint16_t *grads16;          /* (param count) bf16 exchange buffer (NULL unless bf16) */
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
        return "bf16 (rounded to nearest even, each chunk sent to its owner in the stage's "
               "data-parallel group, summed in fp32 in rank order, rounded once and gathered; "
               "widened to fp32 for clipping and AdamW; the first and last stages' tied embedding "
               "sum stays "
               "fp32)";
    if (c->shards)
        return "bf16 (rounded to nearest even, reduce-scattered in bf16, summed in fp32 and "
               "rounded once; this rank's shard widened to fp32 for clipping and AdamW)";
    return "bf16 (rounded to nearest even, allreduced in bf16, summed in fp32 and rounded once; "
           "widened to fp32 for clipping and AdamW; the tied embedding's encoder rows stay fp32)";
}

/* Sum gradients over the group, the reducer's one call into the collectives: buf (n floats at its
 * place in r->grads) is gradient bucket k packed (k < 0: the whole gradient). An allreduce, or
 * sharded a reduce-scatter that leaves this rank's shard summed, bitwise what the allreduce gives
 * there (the rest of buf is not used). bf16: every element rounded into r->grads16 at the same
 * offset (the peers' chunks leave from there), reduced in bf16, and the summed part widened back.
 */
static vkg_status reduce_grads(vkg_grad_reducer *r, int k, float *buf, size_t n)
{
    if (!r->group)
        return VKG_OK;
    const size_t *b = !r->bounds ? NULL
                      : k < 0    ? r->bounds
                                 : r->bucket_bounds + (size_t)k * (size_t)(r->N + 1);
    vkg_comm_dtype dt = r->grads16 ? VKG_COMM_BF16 : VKG_COMM_F32;
    void *x = buf;
    if (r->grads16)
        vkg_grad_bf16_narrow(buf, x = r->grads16 + (buf - r->grads), n);
    VKG_TRY(b ? vkg_group_reduce_scatter(r->group, x, n, b, dt)
              : vkg_group_allreduce(r->group, x, n, dt));
    size_t lo = b ? b[r->me] : 0, hi = b ? b[r->me + 1] : n;
    if (r->grads16)
        vkg_grad_bf16_widen(r->grads16 + (buf - r->grads) + lo, buf + lo, hi - lo);
    return VKG_OK;
}

/* A pipeline stage's tied embedding (at emb, the part's first parameter) summed with its copy:
 * the part of it this rank's shard holds summed, or all of it. */
static vkg_status tie_sum(vkg_grad_reducer *r, float *emb)
{
    size_t first = r->bounds ? r->bounds[r->me] : 0;
    size_t end = r->bounds ? r->bounds[r->me + 1] : SIZE_MAX;
    return vkg_tied_pipe_sum(r->job, r->model, emb, first, end);
}

/* Import the collectives' buffer for the zero-copy path into *packed; 0 (and why, in
 * r->bucket_path) when the copy path must be taken. */
static int import_grads(vkg_grad_reducer *r, vkg_tensor *packed)
{
    vkg_device_t *dev = vkg_model_device(r->model);
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
    size_t n = vkg_model_param_count(r->model);
    size_t align = (size_t)vkg_device_get_info(vkg_model_device(r->model))->host_import_alignment;
    align = align ? align : 1;
    r->grads_bytes = (n * sizeof *r->grads + align - 1) / align * align;
    VKG_TRY(vkg_comm_buffer_alloc(comm, r->grads_bytes, (void **)&r->grads));
    VKG_CHECK(!r->cfg.shards || r->group, VKG_ERR_INVALID_ARG,
              "a gradient reducer with shards needs a data-parallel group");
    if (!r->group) /* nothing to sum or overlap: a stage alone in its group */
        r->cfg.bucket_bytes = 0;
    if (r->group && r->cfg.dtype == VKG_COMM_BF16) {
        size_t bytes = (n * sizeof *r->grads16 + 3) / 4 * 4;
        VKG_TRY(vkg_comm_buffer_alloc(comm, bytes, (void **)&r->grads16));
    }
    if (r->cfg.shards) {
        r->N = vkg_group_size(r->group), r->me = vkg_group_rank(r->group);
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

vkg_status vkg_grad_reducer_create(vkg_job *job, vkg_model *m, const vkg_grad_reducer_config *c,
                                   vkg_grad_reducer **out)
{
    vkg_grad_reducer *r = calloc(1, sizeof *r);
    VKG_CHECK(r, VKG_ERR_NOMEM, "no memory for the gradient reducer");
    r->job = job, r->model = m, r->cfg = *c;
    r->group = c->pipeline ? c->group : vkg_job_dp_group(job);
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
    free(r->bounds), free(r->bucket_bounds);
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
    vkg_model *model;
    double done_ms;
    vkg_status st;
} finish_watch;

static void *watch_finish(void *p)
{
    finish_watch *w = p;
    w->st = vkg_model_split_idle_wait(w->model);
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

/* The step's last backward with the reduction overlapped (whole models: the last micro-batch's
 * forward and backward, inputs and targets; a pipeline stage: its last backward, both NULL): each
 * bucket is read as soon as the device has finished it (on the zero-copy path the device has put
 * it in place already) and reduced while the device goes on with the backward pass; every bucket
 * but the tied embedding's is handed back at once (zero-copy: by the device at commit). That
 * bucket (the one that starts at the part's first parameter, where the part holds the tied
 * embedding) waits for the tied copy's share (tied.h): the
 * embedding rows of the whole job once the device is done (whole models), or the sum over the
 * pipeline's tie group. done(ctx), when given, runs once the device has finished the last
 * bucket, before its reduction. The calling thread is the communication thread: once the step
 * is submitted it has nothing else to do but wait for buckets and reduce them. */
static vkg_status overlapped(vkg_grad_reducer *r, const int32_t *inputs, const int32_t *targets,
                             float *loss, vkg_status (*done)(void *ctx), void *ctx)
{
    vkg_model *m = r->model;
    int copy = r->grads_import == NULL, nb = vkg_buckets_count(r->buckets), tied_k = -1;
    size_t tied = vkg_model_layout_of(m)->tied;
    const size_t(*r0)[2];
    VKG_CHECK(r->cfg.pipeline || !tied ||
                  (vkg_buckets_ranges(r->buckets, 0, &r0) > 0 && r0[0][0] == 0),
              VKG_ERR_STATE, "the first gradient bucket does not start with the tied embedding");
    r->comm_ms = r->exposed_ms = 0.0;
    VKG_TRY(vkg_model_split_submit(m, inputs, targets));
    finish_watch w = {.model = m};
    vkg_os_thread *th = NULL;
    int watching = vkg_os_thread_start(&th, watch_finish, &w) == 0;
    vkg_status st = VKG_OK;
    double comm = 0.0, end = 0.0;
    size_t base = 0, tied_at = 0;
    for (int k = 0; st == VKG_OK && k < nb; k++) {
        float *buf = r->grads + base;
        size_t n = vkg_buckets_floats(r->buckets, k);
        const size_t(*rg)[2];
        if (tied && vkg_buckets_ranges(r->buckets, k, &rg) > 0 && rg[0][0] == 0)
            tied_k = k, tied_at = base;
        st = vkg_model_split_wait(m, k);
        if (st == VKG_OK && k == nb - 1 && done) /* e.g. DIN first: the previous stage waits */
            st = done(ctx);
        if (st == VKG_OK && copy)
            vkg_buckets_read(r->buckets, k, buf);
        double t0 = vkg_os_now_ms();
        if (st == VKG_OK)
            st = reduce_grads(r, k, buf, n);
        end = vkg_os_now_ms();
        comm += end - t0;
        if (st == VKG_OK && k != tied_k && copy)
            vkg_buckets_write(r->buckets, k, buf);
        r->zero_copy_buckets += st == VKG_OK && !copy;
        base += n;
    }
    if (st == VKG_OK && !r->cfg.pipeline) /* the encoder's rows need the whole backward */
        st = vkg_model_split_finish(m, loss);
    if (st == VKG_OK && tied_k >= 0) {
        double t0 = vkg_os_now_ms();
        st = r->cfg.pipeline ? tie_sum(r, r->grads + tied_at)
                             : vkg_tied_add_rows(r->job, m, inputs, r->grads + tied_at);
        end = vkg_os_now_ms();
        comm += end - t0;
        if (st == VKG_OK && copy)
            vkg_buckets_write(r->buckets, tied_k, r->grads + tied_at);
    }
    if (st == VKG_OK && r->cfg.pipeline)
        st = vkg_model_split_finish(m, NULL);
    if (st == VKG_OK)
        st = vkg_model_split_commit(m);
    return overlap_end(r, st, watching ? th : NULL, &w, comm, end);
}

vkg_status vkg_grad_reducer_last_micro(vkg_grad_reducer *r, const int32_t *inputs,
                                       const int32_t *targets, float *loss)
{
    r->comm_ms = r->exposed_ms = 0.0;
    if (!r->buckets)
        return vkg_model_forward_backward(r->model, inputs, targets, loss);
    return overlapped(r, inputs, targets, loss, NULL, NULL);
}

vkg_status vkg_grad_reducer_last_backward(vkg_grad_reducer *r, vkg_status (*done)(void *ctx),
                                          void *ctx)
{
    VKG_CHECK(r->cfg.pipeline && r->buckets, VKG_ERR_STATE,
              "a stage's overlapped last backward needs a pipeline reducer with buckets");
    return overlapped(r, NULL, NULL, NULL, done, ctx);
}

vkg_status vkg_grad_reducer_reduce(vkg_grad_reducer *r, double *comm_ms, double *exposed_ms)
{
    int pipe_idle = r->cfg.pipeline && !r->group && !vkg_job_tie_group(r->job);
    if (!r->buckets && pipe_idle)
        r->comm_ms = r->exposed_ms = 0.0; /* a middle stage alone in its group: nothing to sum */
    else if (!r->buckets) {
        size_t n = vkg_model_param_count(r->model);
        VKG_TRY(vkg_model_get_grads(r->model, r->grads));
        double t0 = vkg_os_now_ms();
        VKG_TRY(reduce_grads(r, -1, r->grads, n));
        if (r->cfg.pipeline)
            VKG_TRY(tie_sum(r, r->grads));
        r->comm_ms = r->exposed_ms = vkg_os_now_ms() - t0;
        VKG_TRY(vkg_model_set_grads(r->model, r->grads));
    }
    *comm_ms = r->comm_ms;
    *exposed_ms = r->exposed_ms;
    return VKG_OK;
}
