/* --rank-batch auto: each data-parallel rank's micro-batch rows chosen from its measured speed.
 * Every rank times its steps minus the time it waited for the others (busy time); after a
 * calibration of the first min(3, --rebalance-every) steps and then every --rebalance-every
 * steps the ranks allgather (rows per millisecond, largest micro-batch their memory plan fits)
 * and each computes the same split from the same figures (vkg_job_balance). A split that would
 * finish the step sooner by 3 % or more replaces the old one through vkg_strategy_rebatch: the
 * global micro-batch, the accumulation steps and the rows of every global batch stay those of
 * a fixed --rank-batch run with that split (resumed at that step), bit for bit.
 *
 * Test-only: VKG_TEST_ROW_DELAY_MS="d0,d1,..." makes data-parallel rank k sleep d_k ms per row
 * of every micro-batch before each step (a slower device, for the tests and benchmarks of this
 * file on one machine); nothing else reads it. Not here: how a split is rebuilt (strategy.c),
 * what the log and the terminal show (metrics.c, the CLI). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "os/clock.h"
#include "parallel/job.h"
#include "train/trainer_internal.h"

#define DELAY_ENV "VKG_TEST_ROW_DELAY_MS"
#define CALIBRATION_STEPS 3
#define GAIN 0.97 /* a new split must finish in at most this share of the old one's time */

/* This rank's entry of VKG_TEST_ROW_DELAY_MS (0 when unset or shorter than the ranks). */
static vkg_status read_delay(int replica, double *ms)
{
    *ms = 0.0;
    const char *s = getenv(DELAY_ENV);
    if (!s || !s[0])
        return VKG_OK;
    for (int k = 0;; k++) {
        char *end = NULL;
        double v = strtod(s, &end);
        VKG_CHECK(end != s && v >= 0.0 && v <= 1e6 && (*end == ',' || *end == '\0'),
                  VKG_ERR_INVALID_ARG,
                  DELAY_ENV "='%s' is not a list of milliseconds per row (e.g. 0,5), one per "
                            "data-parallel rank",
                  getenv(DELAY_ENV));
        if (k == replica)
            *ms = v;
        if (*end == '\0')
            return VKG_OK;
        s = end + 1;
    }
}

vkg_status vkg__train_balance_setup(vkg_trainer_t *t)
{
    const vkg_train_config *c = &t->cfg;
    int pp, dp;
    vkg_strategy_layout(t->par, &pp, &dp);
    memset(&t->bal, 0, sizeof t->bal);
    VKG_TRY(read_delay(vkg_strategy_rank(t->par) % dp, &t->bal.row_delay_ms));
    t->bal.on = c->par.rank_batch_auto && dp > 1;
    if (!t->bal.on)
        return VKG_OK;
    VKG_CHECK(c->rebalance_every > 0, VKG_ERR_INVALID_ARG,
              "--rebalance-every must be > 0 (steps between re-balancings), got %d",
              c->rebalance_every);
    t->bal.calib = c->rebalance_every < CALIBRATION_STEPS ? c->rebalance_every : CALIBRATION_STEPS;
    t->bal.window = t->bal.calib;
    t->bal.next = t->step + t->bal.calib;
    t->bal.cap = vkg_strategy_fit_batch(t->par, vkg_strategy_global_batch(t->par));
    return VKG_OK;
}

void vkg__train_balance_delay(const vkg_trainer_t *t)
{
    double ms = t->bal.row_delay_ms * (double)t->B * (double)t->accum_steps;
    if (ms > 0.0)
        vkg_os_sleep_ms((unsigned)(ms + 0.5));
}

/* The time of the slowest rank with these rows at these speeds. */
static double makespan(const int *rows, const double *speed, int n)
{
    double worst = 0.0;
    for (int k = 0; k < n; k++) {
        double x = (double)rows[k] / speed[k];
        worst = x > worst ? x : worst;
    }
    return worst;
}

static void list_speeds(char *out, size_t cap, const double *v, int n)
{
    size_t len = 0;
    out[0] = '\0';
    for (int k = 0; k < n && len + 16 < cap; k++)
        len += (size_t)snprintf(out + len, cap - len, "%s%.3g", k ? "," : "", v[k] * 1e3);
}

/* Every rank: gather the window's speeds and caps, choose the split, rebuild when it gains. */
static vkg_status rebalance(vkg_trainer_t *t, vkg_step_info *info)
{
    int pp, dp;
    vkg_strategy_layout(t->par, &pp, &dp);
    double busy = t->bal.busy_ms > 1e-3 ? t->bal.busy_ms : 1e-3;
    double mine[2] = {(double)t->bal.rows / busy, (double)t->bal.cap};
    double *all = malloc((size_t)dp * sizeof mine);
    double *speed = malloc((size_t)dp * sizeof *speed);
    int *cap = malloc((size_t)dp * sizeof *cap), *cur = malloc((size_t)dp * sizeof *cur);
    int *out = malloc((size_t)dp * sizeof *out);
    vkg_status st = VKG_OK;
    VKG_CHECK_GOTO(st, all && speed && cap && cur && out, VKG_ERR_NOMEM, done,
                   "no memory to re-balance %d ranks", dp);
    VKG_TRY_GOTO(st, vkg_strategy_allgather(t->par, mine, sizeof mine, all), done);
    for (int k = 0; k < dp; k++) {
        speed[k] = all[2 * k] > 0.0 ? all[2 * k] : 1e-9;
        cap[k] = (int)all[2 * k + 1];
        cur[k] = vkg_strategy_batch_of(t->par, k);
    }
    VKG_TRY_GOTO(st, vkg_job_balance(vkg_strategy_global_batch(t->par), dp, speed, cap, out), done);
    list_speeds(info->rank_speeds, sizeof info->rank_speeds, speed, dp);
    if (memcmp(out, cur, (size_t)dp * sizeof *out) &&
        makespan(out, speed, dp) <= GAIN * makespan(cur, speed, dp)) {
        VKG_TRY_GOTO(st, vkg_strategy_rebatch(t->par, out), done);
        t->B = vkg_strategy_rank_batch(t->par);
        info->rebalanced = 1;
    }
done:
    free(all), free(speed), free(cap), free(cur), free(out);
    return st;
}

vkg_status vkg__train_balance_step(vkg_trainer_t *t, double ms, double waited_ms,
                                   vkg_step_info *info)
{
    snprintf(info->rank_batches, sizeof info->rank_batches, "%s", vkg_strategy_batch_list(t->par));
    if (!t->bal.on)
        return VKG_OK;
    /* The first step of a window of several (a new split's first) warms up: not counted. */
    if (t->bal.seen++ > 0 || t->bal.window == 1) {
        t->bal.busy_ms += ms - waited_ms > 0.0 ? ms - waited_ms : 0.0;
        t->bal.rows += (long long)t->B * t->accum_steps;
    }
    if (t->step < t->bal.next || t->step >= t->cfg.steps)
        return VKG_OK;
    VKG_TRY(rebalance(t, info));
    snprintf(info->next_rank_batches, sizeof info->next_rank_batches, "%s",
             vkg_strategy_batch_list(t->par));
    t->bal.busy_ms = 0.0, t->bal.rows = 0, t->bal.seen = 0;
    t->bal.window = t->cfg.rebalance_every;
    t->bal.next = t->step + t->cfg.rebalance_every;
    return VKG_OK;
}
