/* The stage plan, before anything is allocated: how a model's layers split into pipeline stages
 * (vkg_pp_split), what each stage needs on its device (vkg_strategy_plan), whether it fits a
 * device (the check that names the pool or tensor at fault and the largest --batch that fits),
 * and the search for that batch. It does not measure a built strategy (vkg_strategy_memory,
 * strategy.c) or allocate anything. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "parallel/pp_schedule.h"
#include "parallel/strategy.h"

vkg_status vkg_pp_split(const vkg_model_config *cfg, int T, int S, const int *req, int *layers)
{
    int L = cfg->num_layers;
    VKG_CHECK(S >= 1 && S <= L, VKG_ERR_INVALID_ARG,
              "--pp %d is more stages than the model's %d layers: give --pp %d or fewer", S, L, L);
    if (req) {
        int sum = 0;
        for (int i = 0; i < S; i++) {
            VKG_CHECK(req[i] >= 1, VKG_ERR_INVALID_ARG,
                      "--pp-layers gives stage %d %d layers: every stage needs at least one", i,
                      req[i]);
            sum += req[i];
        }
        VKG_CHECK(sum == L, VKG_ERR_INVALID_ARG,
                  "--pp-layers sums to %d layers but the model has %d: the counts must add up "
                  "to the layer count",
                  sum, L);
        for (int i = 0; i < S; i++)
            layers[i] = req[i];
        return VKG_OK;
    }
    /* The split of L layers into S non-empty runs that minimises the costliest stage (the last
     * also runs the head): best[s][l] over the first l layers in s stages. */
    double block, head, best[65][257];
    int from[65][257];
    VKG_CHECK(S <= 64 && L <= 256, VKG_ERR_INVALID_ARG,
              "automatic pipeline split supports up to 64 stages and 256 layers: give "
              "--pp-layers");
    vkg_model_token_flops(cfg, T, &block, &head);
    for (int l = 0; l <= L; l++)
        best[0][l] = l == 0 ? 0.0 : INFINITY;
    for (int st = 1; st <= S; st++)
        for (int l = 0; l <= L; l++) {
            best[st][l] = INFINITY;
            for (int k = st - 1; k < l; k++) {
                double c = (double)(l - k) * block + (st == S && l == L ? head : 0.0);
                double m = best[st - 1][k] > c ? best[st - 1][k] : c;
                if (m < best[st][l] - 1e-9 * block) /* ties: the earlier cut, more layers later */
                    best[st][l] = m, from[st][l] = k;
            }
        }
    for (int st = S, l = L; st >= 1; st--) {
        layers[st - 1] = l - from[st][l];
        l = from[st][l];
    }
    return VKG_OK;
}

vkg_model_part vkg_pp_part(const int *layers, int S, int stage)
{
    vkg_model_part part = {.first = 0, .last = 0, .flags = 0};
    for (int i = 0; i < stage; i++)
        part.first += layers[i];
    part.last = part.first + layers[stage];
    part.flags =
        (stage == 0 ? VKG_MODEL_PART_EMBED : 0) | (stage == S - 1 ? VKG_MODEL_PART_HEAD : 0);
    return part;
}

vkg_status vkg_strategy_plan(const vkg_model_config *cfg, int B, int T, int M, int S,
                             const int *pp_layers, int kind, const vkg_plan_opts *po,
                             vkg_stage_memory *stages)
{
    int layers[64];
    VKG_CHECK(S >= 1 && S <= 64, VKG_ERR_INVALID_ARG, "%d pipeline stages: 1 to 64", S);
    VKG_TRY(vkg_pp_split(cfg, T, S, pp_layers, layers));
    for (int st = 0; st < S; st++) {
        vkg_stage_memory *m = &stages[st];
        vkg_model_opts o = vkg_model_opts_default();
        o.B = B, o.T = T, o.accum_steps = M;
        o.part = vkg_pp_part(layers, S, st);
        o.slots = S > 1 ? vkg_pp_slots(kind, S, st, M) : 1;
        o.split_w = S > 1 && kind == VKG_PP_ZBH1;
        o.recompute = po ? po->recompute : 0;
        o.precision = po ? po->precision : 0;
        o.max_allocation = po ? po->max_allocation : 0;
        memset(m, 0, sizeof *m);
        m->first = o.part.first, m->last = o.part.last, m->slots = o.slots;
        VKG_TRY(vkg_model_memory(cfg, &o, &m->model));
        m->optimizer = vkg_adamw_memory(m->model.params / 4);
        m->total = m->model.allocated + m->optimizer;
        /* AdamW: both moments in one allocation where it can hold them, and its scratch */
        uint64_t lim = vkg_arena_cursor_start(0, o.max_allocation).max_block;
        m->allocations = m->model.allocations + (2 * m->model.params <= lim ? 1 : 2) + 1;
    }
    return VKG_OK;
}

static double mib(size_t b)
{
    return (double)b / 1048576.0;
}

int vkg_strategy_largest_batch(const vkg_model_config *cfg, int B_max, int T, int M, int S,
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

vkg_status vkg_strategy_check_fit(const vkg_model_config *cfg, int B, int T, int M, int S,
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
