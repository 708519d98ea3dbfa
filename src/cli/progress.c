/* How `vkgpt train` shows its progress: one line per step, rewritten in place on a terminal and
 * plain (no control codes) otherwise, each with the time elapsed and an ETA, as tqdm and HF
 * accelerate show them. Knows nothing of the trainer beyond a step's figures. */
#include <stdio.h>
#include <time.h>

#include "os/clock.h"
#include "cli/cli.h"
#include "vkgpt/train.h"

double vkg_cli_now_s(void)
{
    return vkg_os_now_ms() / 1e3;
}

void vkg_cli_duration(double seconds, char *buf, size_t cap)
{
    long s = seconds > 0.0 ? (long)(seconds + 0.5) : 0;
    if (s >= 3600)
        snprintf(buf, cap, "%ldh%02ldm", s / 3600, (s / 60) % 60);
    else if (s >= 60)
        snprintf(buf, cap, "%ldm%02lds", s / 60, s % 60);
    else
        snprintf(buf, cap, "%lds", s);
}

void vkg_cli_print_step(const vkg_step_info *s, long long steps, double elapsed_s, long long done,
                        int tty)
{
    char eta[32], elapsed[32];
    /* The wall time per step of this run so far, evaluations, samples and checkpoints included. */
    double per_step = done > 0 ? elapsed_s / (double)done : 0.0;
    vkg_cli_duration(per_step * (double)(steps - s->step), eta, sizeof eta);
    vkg_cli_duration(elapsed_s, elapsed, sizeof elapsed);
    if (tty) {
        printf("\r\033[Kstep %lld/%lld | loss %.4f | lr %.2e | norm %.3f | %.0f tok/s | ETA %s | "
               "elapsed %s",
               s->step, steps, (double)s->loss, (double)s->lr, (double)s->grad_norm,
               s->tokens_per_s, eta, elapsed);
        if (s->has_eval)
            printf(" | eval %.4f\n", (double)s->eval_loss);
    } else {
        printf("step %lld/%lld loss %.4f lr %.3e norm %.4f %.0f tok/s %.1f ms elapsed %s ETA %s",
               s->step, steps, (double)s->loss, (double)s->lr, (double)s->grad_norm,
               s->tokens_per_s, s->ms, elapsed, eta);
        if (s->has_eval)
            printf(" eval %.4f", (double)s->eval_loss);
        if (s->comm_ms > 0.0) /* data parallel: allreduce time and the part not overlapped */
            printf(" allreduce %.1f ms (exposed %.1f)", s->comm_ms, s->exposed_comm_ms);
        printf("\n");
    }
    fflush(stdout);
}

static double mib_of(size_t bytes)
{
    return (double)bytes / 1048576.0;
}

void vkg_cli_print_run(const vkg_trainer_info *info, int recompute, const char *schedule)
{
    printf("device: %s\nmodel: L=%d NH=%d C=%d maxT=%d V=%d (Vp=%d), %zu parameters, %.1f MiB on "
           "the device\n",
           info->device, info->layers, info->heads, info->channels, info->max_seq_len,
           info->vocab_size, info->padded_vocab_size, info->num_params,
           (double)info->device_bytes / 1048576.0);
    printf("family: %s\n", info->family);
    if (info->coopmat[0])
        printf("coopmat: %s\n", info->coopmat);
    if (info->param_copy_bytes)
        printf("precision: bf16 (fp32 master weights, AdamW and weight gradients; bf16 weight copy "
               "%.1f MiB read by the matrix products)\n",
               mib_of(info->param_copy_bytes));
    printf("memory: params %.1f + grads %.1f + AdamW %.1f + activations %.1f + their gradients and "
           "scratch %.1f MiB in %d allocations of at most %.0f MiB; host copies %.1f MiB%s\n",
           mib_of(info->param_bytes), mib_of(info->grad_bytes), mib_of(info->optimizer_bytes),
           mib_of(info->activation_bytes), mib_of(info->shared_bytes), info->allocations,
           mib_of(info->max_allocation), mib_of(info->host_bytes),
           recompute ? "; GELU recomputed" : "");
    int dp = info->dp; /* data-parallel ranks */
    if (dp > 1)
        printf("batch: %d x %d tokens x %d accumulation, summed over %d ranks (rows %s) = %lld "
               "tokens per step\n",
               info->global_batch, info->seq, info->accum_steps, dp, info->rank_batches,
               info->total_batch);
    else
        printf("batch: %d x %d tokens x %d accumulation = %lld tokens per step\n", info->batch,
               info->seq, info->accum_steps, info->total_batch);
    if (dp > 1)
        printf("data parallel: rank %d of %d, micro-batches %s rows (%d x %d = %lld tokens per "
               "micro-step over all ranks), lr %.3e\n",
               info->rank, info->world_size, info->rank_batches, info->global_batch, info->seq,
               (long long)info->global_batch * info->seq, (double)info->lr);
    if (dp > 1 && info->rebalance_every)
        printf("data parallel: --rank-batch auto: the split is chosen from each rank's measured "
               "speed after step %lld, then every %d steps, within each rank's memory plan\n",
               info->start_step + (info->rebalance_every < 3 ? info->rebalance_every : 3),
               info->rebalance_every);
    if (info->world_size > 1)
        printf("transport: collectives over %s\n", info->comm_path);
    if (info->bucket_path[0])
        printf("transport: gradient buckets: %s\n", info->bucket_path);
    if (info->grad_exchange[0])
        printf("transport: gradients exchanged in %s\n", info->grad_exchange);
    if (info->sync[0])
        printf("sync: diloco: %s\n", info->sync);
    if (info->pp > 1)
        printf("pipeline: %d stages (%s), %d micro-batches per step; rank %d is stage %d with "
               "layers [%d, %d)\n",
               info->pp, schedule, info->accum_steps, info->rank, info->stage, info->first_layer,
               info->last_layer);
    if (info->zero && info->pp > 1)
        printf("optimizer: AdamW, each stage's moments sharded over its %d data-parallel ranks "
               "(ZeRO-1): this rank holds those of its stage's parameters [%zu, %zu), %.1f MiB\n",
               dp, info->moment_first, info->moment_first + info->moment_count,
               (double)(2 * info->moment_count * sizeof(float)) / 1048576.0);
    else if (info->zero)
        printf("optimizer: AdamW, moments sharded over %d ranks (ZeRO-1): this rank holds those of "
               "parameters [%zu, %zu) of %zu, %zu bytes of moments (%.1f MiB; unsharded %.1f "
               "MiB)\n",
               dp, info->moment_first, info->moment_first + info->moment_count, info->num_params,
               2 * info->moment_count * sizeof(float),
               (double)(2 * info->moment_count * sizeof(float)) / 1048576.0,
               (double)(2 * info->num_params * sizeof(float)) / 1048576.0);
}
