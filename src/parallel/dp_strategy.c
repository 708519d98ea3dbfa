/* The data-parallel strategy: every rank holds the whole model; rank 0's starting point is
 * broadcast; gradients are summed over the ranks (each rank's loss is pre-scaled by its token
 * share, dp.h), per bucket while the device computes the rest of the last micro-batch's backward
 * pass, or in one allreduce after it; the loss is a token-weighted mean and the stop flag the OR
 * of every rank's. ZeRO-1 (zero.c) runs the same passes with a reduce-scatter in place of each
 * allreduce. */
#include <pthread.h>
#include <stdlib.h>

#include "base/clock.h"
#include "parallel/strategy_internal.h"
#include "parallel/tied_wte.h"

vkg_status vkg__dp_reduce_grads(vkg_strategy *s, int k, float *buf, size_t n)
{
    if (s->zero)
        return vkg__zero_reduce_grads(s, k, buf, n);
    return vkg_dp_allreduce_grads(s->dp, buf, n);
}

vkg_status vkg__dp_setup(vkg_strategy *s)
{
    size_t n = vkg_gpt2_param_count(s->model);
    s->grads = malloc(n * sizeof *s->grads);
    VKG_CHECK(s->grads, VKG_ERR_NOMEM, "no memory for %zu gradients", n);
    if (s->bucket_bytes)
        VKG_TRY(vkg_buckets_create(s->model, (size_t)s->bucket_bytes, &s->buckets));
    return VKG_OK;
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
 * has finished it and reduced while the device goes on with the backward pass; every bucket but
 * the first is handed back at once; the first (wte's classifier gradient) waits for the
 * embedding rows of the whole job (tied_wte.c). The calling thread is the communication thread:
 * once the step is submitted it has nothing else to do but wait for buckets and reduce them. */
static vkg_status backward_overlapped(vkg_strategy *s, float *loss, double *comm_ms,
                                      double *exposed_ms)
{
    vkg_gpt2 *m = s->model;
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
        if (st == VKG_OK)
            vkg_buckets_read(s->buckets, k, buf);
        double t0 = vkg_now_ms();
        if (st == VKG_OK)
            st = vkg__dp_reduce_grads(s, k, buf, n);
        end = vkg_now_ms();
        comm += end - t0;
        if (st == VKG_OK && k > 0)
            vkg_buckets_write(s->buckets, k, buf);
        base += n;
    }
    if (st == VKG_OK)
        st = vkg_gpt2_split_finish(m, loss);
    if (st == VKG_OK) {
        double t0 = vkg_now_ms();
        st = vkg_tied_wte_add_rows(s->dp, m, s->inputs, s->grads);
        end = vkg_now_ms();
        comm += end - t0;
    }
    if (st == VKG_OK)
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
    float x[2] = {(float)(*loss * (double)vkg_dp_loss_scale(s->dp)), *stop ? 1.0f : 0.0f};
    VKG_TRY(vkg_dp_allreduce_sum(s->dp, x, 2));
    *loss = x[0];
    *stop = x[1] > 0.0f;
    return VKG_OK;
}

vkg_status vkg__dp_mean(vkg_strategy *s, double *value)
{
    float x = (float)(*value * (double)vkg_dp_loss_scale(s->dp));
    VKG_TRY(vkg_dp_allreduce_sum(s->dp, &x, 1));
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
