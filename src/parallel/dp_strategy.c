/* The data-parallel strategy: every rank holds the whole model; rank 0's starting point is
 * broadcast; gradients are summed over the ranks (each rank's loss is pre-scaled by its token
 * share, dp.h), per bucket while the device computes the rest of the last micro-batch's backward
 * pass, or in one allreduce after it; the loss is a token-weighted mean and the stop flag the OR
 * of every rank's. ZeRO-1 (zero.c) runs the same passes with a reduce-scatter in place of each
 * allreduce.
 *
 * The buckets' way to the collectives. The packed buckets live in one buffer from the
 * communicator (vkg_comm_buffer_alloc: this rank's part of the shared-memory segment when the
 * collectives run there, so that the peers read it in place). Zero-copy path: where the device
 * imports host memory (VK_EXT_external_memory_host) that buffer is imported, every bucket's
 * command list ends by copying its ranges straight to its packed place there, and the reduced
 * buckets are copied back by the device (vkg_buckets_create with a packed tensor). Copy path
 * (no extension, a failed import, or force_copy_path): the host packs each bucket from its view
 * of the gradients into the buffer and unpacks it after the reduction (vkg_buckets_read/_write).
 * Both paths reduce the same bits in the same order.
 *
 * bf16 exchange (grad_dtype, grad_bf16.h). A second collectives' buffer holds the gradient in
 * bf16 at the same element offsets; each reduction rounds its floats of the fp32 buffer into it,
 * allreduces them as VKG_COMM_BF16 (the transport sums in fp32 and rounds once) and widens the sum
 * back, on the copy path and the zero-copy path alike (the device still copies fp32 buckets
 * straight into the fp32 buffer and back: only the rounding and widening are the host's), so
 * both paths still train bitwise alike. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/clock.h"
#include "parallel/grad_bf16.h"
#include "parallel/strategy_internal.h"
#include "parallel/tied_wte.h"

vkg_status vkg__grad_dtype_check(const vkg_strategy_config *c, const vkg_job_layout *lay)
{
    int pp = lay->pp, ranks = lay->dp;
    VKG_CHECK(vkg_grad_dtype_name(c->grad_dtype), VKG_ERR_INVALID_ARG,
              "--grad-dtype: dtype %d is neither fp32 nor bf16", (int)c->grad_dtype);
    VKG_CHECK(c->grad_dtype == VKG_COMM_F32 || ranks >= 2, VKG_ERR_INVALID_ARG,
              "--grad-dtype bf16 needs 2 or more data-parallel ranks, got %d%s: a lone rank "
              "exchanges no gradients (drop the flag, or add ranks)",
              ranks, pp > 1 ? " (ranks / --pp)" : "");
    return VKG_OK;
}

const char *vkg_strategy_grad_exchange(const vkg_strategy *s)
{
    if (vkg_job_dp(s->job) < 2)
        return "";
    if (s->cfg.grad_dtype != VKG_COMM_BF16)
        return "fp32";
    if (s->pp)
        return "bf16 (rounded to nearest even, gathered over the stage's data-parallel group and "
               "summed in fp32 in rank order, rounded once; widened to fp32 for clipping and "
               "AdamW; the first and last stages' wte sum stays fp32)";
    if (s->zero)
        return "bf16 (rounded to nearest even, reduce-scattered in bf16, summed in fp32 and "
               "rounded once; this rank's shard widened to fp32 for clipping and AdamW)";
    return "bf16 (rounded to nearest even, allreduced in bf16, summed in fp32 and rounded once; "
           "widened to fp32 for clipping and AdamW; the tied wte's embedding rows stay fp32)";
}

/* bf16: buf (n floats at its place in s->grads) rounded into the same place of s->grads16,
 * summed over the ranks there, and widened back. (ZeRO-1 reduce-scatters in bf16 instead:
 * vkg__zero_reduce_grads.) */
static vkg_status reduce_bf16(vkg_strategy *s, float *buf, size_t n)
{
    uint16_t *half = s->grads16 + (buf - s->grads);
    vkg_grad_bf16_narrow(buf, half, n);
    VKG_TRY(vkg_comm_allreduce(vkg_job_comm(s->job), half, half, n, VKG_COMM_BF16, VKG_COMM_SUM));
    vkg_grad_bf16_widen(half, buf, n);
    return VKG_OK;
}

vkg_status vkg__dp_reduce_grads(vkg_strategy *s, int k, float *buf, size_t n)
{
    if (s->zero)
        return vkg__zero_reduce_grads(s, k, buf, n);
    if (s->grads16)
        return reduce_bf16(s, buf, n);
    return vkg_job_allreduce_sum(s->job, buf, n);
}

/* Import the collectives' buffer for the zero-copy path into *packed; 0 (and why, in
 * s->bucket_path) when the copy path must be taken. */
static int import_grads(vkg_strategy *s, vkg_tensor *packed)
{
    const vkg_device_info *info = vkg_device_get_info(s->mc.dev);
    const vkg_comm_t *comm = vkg_job_comm(s->job);
    const char *where = vkg_comm_buffer_in_segment(comm, s->grads, s->grads_bytes)
                            ? "this rank's part of the shared-memory segment"
                        : vkg_comm_uses_shm(comm)
                            ? "host memory of the collectives (the segment's pool is too small: "
                              "VKG_COMM_SHM_POOL)"
                            : "host memory of the collectives";
    size_t cap = sizeof s->bucket_path;
    if (s->cfg.force_copy_path) {
        snprintf(s->bucket_path, cap, "copy: zero-copy turned off (--zero-copy 0)");
        return 0;
    }
    if (!info->external_memory_host) {
        snprintf(s->bucket_path, cap, "copy: %.160s lacks VK_EXT_external_memory_host", info->name);
        return 0;
    }
    vkg_status st = vkg_arena_import_host(s->mc.dev, s->grads, s->grads_bytes, "gradient buckets",
                                          &s->grads_import);
    if (st == VKG_OK)
        st = vkg_arena_alloc(s->grads_import, s->grads_bytes, packed);
    if (st != VKG_OK) {
        snprintf(s->bucket_path, cap, "copy: the import failed: %.200s", vkg_error_message());
        vkg_arena_destroy(&s->grads_import);
        return 0;
    }
    snprintf(s->bucket_path, cap,
             "zero-copy: the device copies each bucket into %s (VK_EXT_external_memory_host)",
             where);
    return 1;
}

vkg_status vkg__dp_setup(vkg_strategy *s)
{
    size_t n = vkg_gpt2_param_count(s->model);
    size_t align = (size_t)vkg_device_get_info(s->mc.dev)->host_import_alignment;
    align = align ? align : 1;
    s->grads_bytes = (n * sizeof *s->grads + align - 1) / align * align;
    VKG_TRY(vkg_comm_buffer_alloc(vkg_job_comm(s->job), s->grads_bytes, (void **)&s->grads));
    if (s->cfg.grad_dtype == VKG_COMM_BF16) {
        s->grads16_bytes = (n * sizeof *s->grads16 + 3) / 4 * 4;
        VKG_TRY(
            vkg_comm_buffer_alloc(vkg_job_comm(s->job), s->grads16_bytes, (void **)&s->grads16));
    }
    if (!s->bucket_bytes)
        return VKG_OK;
    vkg_tensor packed;
    int zero_copy = import_grads(s, &packed);
    return vkg_buckets_create(s->model, (size_t)s->bucket_bytes, zero_copy ? &packed : NULL,
                              &s->buckets);
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
    w->done_ms = vkg_now_ms();
    return NULL;
}

/* The last micro-batch with the allreduce overlapped: each bucket is read as soon as the device
 * has finished it (on the zero-copy path the device has put it in place already) and reduced
 * while the device goes on with the backward pass; every bucket but the first is handed back at
 * once (zero-copy: by the device at commit); the first (wte's classifier gradient) waits for the
 * embedding rows of the whole job (tied_wte.c). The calling thread is the communication thread:
 * once the step is submitted it has nothing else to do but wait for buckets and reduce them. */
static vkg_status backward_overlapped(vkg_strategy *s, float *loss, double *comm_ms,
                                      double *exposed_ms)
{
    vkg_gpt2 *m = s->model;
    int copy = s->grads_import == NULL;
    const size_t(*r0)[2];
    VKG_CHECK(vkg_buckets_ranges(s->buckets, 0, &r0) > 0 && r0[0][0] == 0, VKG_ERR_STATE,
              "the first gradient bucket does not start with wte");
    VKG_TRY(vkg_gpt2_split_submit(m, s->inputs, s->targets));
    finish_watch w = {.model = m};
    pthread_t th;
    int watching = pthread_create(&th, NULL, watch_finish, &w) == 0;
    vkg_status st = VKG_OK;
    double comm = 0.0, end = 0.0;
    size_t base = 0;
    for (int k = 0; st == VKG_OK && k < vkg_buckets_count(s->buckets); k++) {
        float *buf = s->grads + base;
        size_t n = vkg_buckets_floats(s->buckets, k);
        st = vkg_gpt2_split_wait(m, k);
        if (st == VKG_OK && copy)
            vkg_buckets_read(s->buckets, k, buf);
        double t0 = vkg_now_ms();
        if (st == VKG_OK)
            st = vkg__dp_reduce_grads(s, k, buf, n);
        end = vkg_now_ms();
        comm += end - t0;
        if (st == VKG_OK && k > 0 && copy)
            vkg_buckets_write(s->buckets, k, buf);
        s->zero_copy_buckets += st == VKG_OK && !copy;
        base += n;
    }
    if (st == VKG_OK)
        st = vkg_gpt2_split_finish(m, loss);
    if (st == VKG_OK) {
        double t0 = vkg_now_ms();
        st = vkg_tied_wte_add_rows(s->job, m, s->inputs, s->grads);
        end = vkg_now_ms();
        comm += end - t0;
    }
    if (st == VKG_OK && copy)
        vkg_buckets_write(s->buckets, 0, s->grads);
    if (st == VKG_OK)
        st = vkg_gpt2_split_commit(m);
    if (watching)
        pthread_join(th, NULL);
    VKG_TRY(st);
    VKG_TRY(w.st);
    *comm_ms = comm;
    *exposed_ms = watching && end > w.done_ms ? end - w.done_ms : 0.0;
    if (*exposed_ms > comm)
        *exposed_ms = comm;
    return VKG_OK;
}

vkg_status vkg__dp_last_micro(vkg_strategy *s, float *loss)
{
    s->comm_ms = s->exposed_ms = 0.0;
    if (!s->buckets)
        return vkg_gpt2_forward_backward(s->model, s->inputs, s->targets, loss);
    return backward_overlapped(s, loss, &s->comm_ms, &s->exposed_ms);
}

vkg_status vkg__dp_reduce(vkg_strategy *s, double *loss, int *stop, vkg_strategy_step_out *out)
{
    if (!s->buckets) {
        size_t n = vkg_gpt2_param_count(s->model);
        VKG_TRY(vkg_gpt2_get_grads(s->model, s->grads));
        double t0 = vkg_now_ms();
        VKG_TRY(vkg__dp_reduce_grads(s, -1, s->grads, n));
        s->comm_ms = s->exposed_ms = vkg_now_ms() - t0;
        VKG_TRY(vkg_gpt2_set_grads(s->model, s->grads));
    }
    out->comm_ms = s->comm_ms;
    out->exposed_comm_ms = s->exposed_ms;
    /* The loss as a token-weighted mean, and the stop request of any rank. */
    float x[2] = {(float)(*loss * (double)vkg_job_loss_scale(s->job)), *stop ? 1.0f : 0.0f};
    VKG_TRY(vkg_job_allreduce_sum(s->job, x, 2));
    *loss = x[0];
    *stop = x[1] > 0.0f;
    return VKG_OK;
}

vkg_status vkg__dp_mean(vkg_strategy *s, double *value)
{
    float x = (float)(*value * (double)vkg_job_loss_scale(s->job));
    VKG_TRY(vkg_job_allreduce_sum(s->job, &x, 1));
    *value = x;
    return VKG_OK;
}

const vkg_strategy_vt vkg__strategy_dp = {
    .name = "dp",
    .setup = vkg__dp_setup,
    .share = vkg__strategy_share,
    .last_micro = vkg__dp_last_micro,
    .reduce = vkg__dp_reduce,
    .mean = vkg__dp_mean,
};
