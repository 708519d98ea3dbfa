/* Whether a model fits a device, before anything is allocated: the check against the memory
 * plan (vkg_strategy_plan) that names the pool or tensor at fault and the largest --batch that
 * fits, and the search for that batch. It does not make the plan (pp_strategy.c), measure a
 * built strategy (vkg_strategy_memory, strategy.c) or allocate anything. */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "parallel/strategy.h"

static double mib(size_t b)
{
    return (double)b / 1048576.0;
}

int vkg_strategy_largest_batch(const vkg_gpt2_config *cfg, int B_max, int T, int M, int S,
                               const int *pp_layers, int kind, const vkg_plan_opts *po, int stage,
                               uint64_t has)
{
    int lo = 0, hi = B_max; /* lo fits (0: nothing known to), hi + 1 does not */
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        vkg_stage_memory st[64];
        vkg_status s = vkg_strategy_plan(cfg, mid, T, M, S, pp_layers, kind, po, st);
        if (s == VKG_OK && (!has || st[stage].total <= has))
            lo = mid;
        else
            hi = mid - 1;
    }
    vkg_error_clear();
    return lo;
}

vkg_status vkg_strategy_check_fit(const vkg_gpt2_config *cfg, int B, int T, int M, int S,
                                  const int *pp_layers, int kind, const vkg_plan_opts *po,
                                  int stage, uint64_t has)
{
    vkg_stage_memory plan[64];
    char where[96] = "";
    if (S > 1)
        snprintf(where, sizeof where, "pipeline stage %d of %d: ", stage, S);
    vkg_status st = vkg_strategy_plan(cfg, B, T, M, S, pp_layers, kind, po, plan);
    if (st == VKG_ERR_NOMEM) { /* a tensor larger than the largest allocation */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", vkg_error_message());
        int best = vkg_strategy_largest_batch(cfg, B, T, M, S, pp_layers, kind, po, stage, has);
        if (best)
            return VKG_FAIL(VKG_ERR_NOMEM,
                            "%s%s at --batch %d; the largest --batch that fits is %d", where, msg,
                            B, best);
        int params = strstr(msg, "tensor params ") != NULL; /* no batch shrinks these */
        return VKG_FAIL(VKG_ERR_NOMEM, "%s%s at --batch %d; no --batch fits: use %s", where, msg, B,
                        params ? "(more) pipeline stages (--pp), each holding part of the "
                                 "parameters"
                               : "a shorter --seq or (more) pipeline stages");
    }
    VKG_TRY(st);
    const vkg_stage_memory *m = &plan[stage];
    if (!has || m->total <= has)
        return VKG_OK;
    const char *pool = "activations";
    size_t worst = m->model.activations;
    if (m->model.params + m->model.grads > worst)
        pool = "parameters and gradients", worst = m->model.params + m->model.grads;
    if (m->optimizer > worst)
        pool = "AdamW moments", worst = m->optimizer;
    if (m->model.shared > worst)
        pool = "gradients of the activations and scratch", worst = m->model.shared;
    int best = vkg_strategy_largest_batch(cfg, B, T, M, S, pp_layers, kind, po, stage, has);
    char fix[96];
    if (best)
        snprintf(fix, sizeof fix, "the largest --batch that fits is %d", best);
    else
        snprintf(fix, sizeof fix, "no --batch fits%s", S > 1 ? "; move layers off this stage" : "");
    return VKG_FAIL(VKG_ERR_NOMEM,
                    "%s%d layers, %d activation slot%s, --batch %d x --seq %d need %.1f MiB of "
                    "device memory (parameters and gradients %.1f, AdamW %.1f, activations %.1f, "
                    "their gradients and scratch %.1f; the largest pool: %s) but the device has "
                    "%.1f MiB: %s",
                    where, m->last - m->first, m->slots, m->slots == 1 ? "" : "s", B, T,
                    mib(m->total), mib(m->model.params + m->model.grads), mib(m->optimizer),
                    mib(m->model.activations), mib(m->model.shared), pool, mib(has), fix);
}
