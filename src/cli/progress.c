/* How `vkgpt train` shows its progress: one line per step, rewritten in place on a terminal and
 * plain (no control codes) otherwise, each with the time elapsed and an ETA, as tqdm and HF
 * accelerate show them. Knows nothing of the trainer beyond a step's figures. */
#include <stdio.h>
#include <time.h>

#include "cli/cli.h"
#include "vkgpt/train.h"

double vkg_cli_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
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
