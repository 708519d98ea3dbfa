/* `vkgpt plan`: the device memory each rank of a training run needs, per pipeline stage (or, with
 * --zero 1, per data-parallel rank), from the model and batch alone (no device is opened unless
 * --device asks to compare): parameters and gradients, AdamW's moments, the activation slots of
 * the schedule, the gradients of the activations and scratch. What a user reads to choose --pp,
 * --batch, the split and --zero; the numbers are the arenas vkgpt train allocates. ZeRO-1's
 * shards follow the gradient norm's partial sums, which depend on the device: a GPU's unless
 * --device names another. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/flags.h"
#include "parallel/strategy.h"
#include "vkgpt/device.h"

static const char *const presets[] = {"none", "gpt2", "gpt2-medium", NULL};
static const char *const pp_schedules[] = {"1f1b", "gpipe", NULL};

static double mib(size_t b)
{
    return (double)b / 1048576.0;
}

int vkg_cli_plan(int argc, char **argv)
{
    int preset = 1, layers = 0, heads = 0, channels = 0, ctx = 0, vocab = 0;
    int batch = 4, seq = 1024, pp = 1, schedule = 0, dp = 1, zero = 0;
    long long total = 0;
    const char *pp_layers = NULL, *device = NULL;
    const vkg_flag flags[] = {
        {"--preset", VKG_FLAG_CHOICE, &preset,
         "gpt2 (124M: L=12 C=768), gpt2-medium (350M: L=24 C=1024), or none", presets, 0, 0},
        {"--layers", VKG_FLAG_INT, &layers, "layers (overrides the preset)", 0, 1, 1000},
        {"--heads", VKG_FLAG_INT, &heads, "attention heads", 0, 1, 1000},
        {"--channels", VKG_FLAG_INT, &channels, "channels", 0, 1, 65536},
        {"--ctx", VKG_FLAG_INT, &ctx, "context length (default: --seq)", 0, 1, 65536},
        {"--vocab", VKG_FLAG_INT, &vocab, "vocabulary (default 50257)", 0, 1, 1 << 24},
        {"--batch", VKG_FLAG_INT, &batch, "micro-batch rows per rank", 0, 1, 1 << 20},
        {"--seq", VKG_FLAG_INT, &seq, "sequence length T", 0, 1, 65536},
        {"--total-batch", VKG_FLAG_LL, &total,
         "tokens per step of one pipeline (default: pp x batch x seq: M = pp)", 0, 1, 2147483647},
        {"--pp", VKG_FLAG_INT, &pp, "pipeline stages", 0, 1, 64},
        {"--pp-layers", VKG_FLAG_STR, &pp_layers, "layers per stage, e.g. 3,3,2", 0, 0, 0},
        {"--pp-schedule", VKG_FLAG_CHOICE, &schedule, "pipeline schedule", pp_schedules, 0, 0},
        {"--dp", VKG_FLAG_INT, &dp, "data-parallel ranks (per stage)", 0, 1, 1024},
        {"--zero", VKG_FLAG_INT, &zero,
         "1: ZeRO-1, AdamW's moments sharded over the --dp ranks (a row per rank)", 0, 0, 1},
        {"--device", VKG_FLAG_STR, &device,
         "compare with this device's memory (and shard for its norm)", 0, 0, 0},
    };
    int rc = vkg_flags_parse("plan", "[options]", flags, (int)(sizeof flags / sizeof flags[0]),
                             argc, argv, NULL, NULL);
    if (rc)
        return rc == 1 ? 0 : 2;
    vkg_gpt2_config cfg = {.max_seq_len = 1024, .vocab_size = 50257};
    if (preset == 1)
        cfg.num_layers = 12, cfg.num_heads = 12, cfg.channels = 768;
    if (preset == 2)
        cfg.num_layers = 24, cfg.num_heads = 16, cfg.channels = 1024;
    cfg.num_layers = layers ? layers : cfg.num_layers;
    cfg.num_heads = heads ? heads : cfg.num_heads;
    cfg.channels = channels ? channels : cfg.channels;
    cfg.max_seq_len = ctx ? ctx : seq > cfg.max_seq_len ? seq : cfg.max_seq_len;
    cfg.vocab_size = vocab ? vocab : cfg.vocab_size;
    cfg.padded_vocab_size = vkg_gpt2_pad_vocab(cfg.vocab_size);
    if (!cfg.num_layers || !cfg.num_heads || !cfg.channels) {
        fprintf(stderr, "vkgpt plan: --preset none needs --layers, --heads and --channels\n");
        return 2;
    }
    int req[64], nreq = 0;
    if (pp_layers && (nreq = vkg_flags_int_list(pp_layers, 1, 1 << 20, req, 64)) != pp) {
        fprintf(stderr,
                "vkgpt plan: --pp-layers wants %d layer counts separated by commas, got '%s'\n", pp,
                pp_layers);
        return 2;
    }
    long long micro = (long long)batch * seq;
    long long tot = total ? total : micro * pp;
    if (tot % micro) {
        fprintf(stderr, "vkgpt plan: --total-batch %lld is not a multiple of batch x seq = %lld\n",
                tot, micro);
        return 2;
    }
    int M = (int)(tot / micro);
    if (zero && dp < 2) {
        fprintf(stderr, "vkgpt plan: --zero 1 needs --dp 2 or more (the data-parallel ranks to "
                        "shard AdamW's moments over)\n");
        return 2;
    }
    if (zero && pp > 1) {
        fprintf(stderr, "vkgpt plan: --zero 1 does not combine with --pp: ZeRO-1 shards AdamW's "
                        "moments over data-parallel ranks that each hold the whole model\n");
        return 2;
    }
    vkg_stage_memory st[64];
    vkg_status s = vkg_gpt2_config_validate(&cfg);
    if (s == VKG_OK)
        s = vkg_strategy_plan(&cfg, batch, seq, M, pp, nreq ? req : NULL, schedule, st);
    if (s != VKG_OK)
        return vkg_cli_report("plan", s);
    uint64_t has = 0;
    char tuned[300] = "a GPU (--device for another)";
    vkg_device_tuning tu = vkg__device_tuning_defaults(VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, 32);
    if (device) {
        vkg_device_opts dopts = vkg_device_opts_default();
        dopts.select = device;
        vkg_device_t *dev = NULL;
        if ((s = vkg_device_create(&dopts, &dev)) != VKG_OK)
            return vkg_cli_report("plan", s);
        has = vkg_device_get_info(dev)->device_local_bytes;
        tu = vkg_device_tuning_get(dev);
        snprintf(tuned, sizeof tuned, "%s", vkg_device_get_info(dev)->name);
        printf("device: %s, %.1f MiB device-local\n", vkg_device_get_info(dev)->name, mib(has));
        vkg_device_destroy(&dev);
    }
    vkg_zero_shard *sh = zero ? calloc((size_t)dp, sizeof *sh) : NULL;
    if (zero && !sh)
        return vkg_cli_report("plan", VKG_ERR_NOMEM);
    if (zero && (s = vkg_strategy_zero_plan(&cfg, dp, tu, sh)) != VKG_OK) {
        free(sh);
        return vkg_cli_report("plan", s);
    }
    printf("model: L=%d NH=%d C=%d maxT=%d V=%d (Vp=%d), %zu parameters; micro-batch %d x %d, "
           "%d micro-batches per step, %d stage%s (%s)\n",
           cfg.num_layers, cfg.num_heads, cfg.channels, cfg.max_seq_len, cfg.vocab_size,
           cfg.padded_vocab_size, vkg_gpt2_num_params(&cfg), batch, seq, M, pp, pp > 1 ? "s" : "",
           pp > 1 ? pp_schedules[schedule] : "no pipeline");
    if (dp > 1 && !zero)
        printf("data parallel: %d ranks per stage, each holding its stage's whole AdamW (--zero 1 "
               "shards it)\n",
               dp);
    if (zero)
        printf("data parallel: %d ranks, ZeRO-1: AdamW's moments sharded at the gradient norm's "
               "partial sums on %s; unsharded AdamW %.1f MiB per rank\n",
               dp, tuned, mib(st[0].optimizer));
    printf("%5s %8s %5s %10s %10s %10s %12s %12s %10s%s\n", zero ? "rank" : "stage", "layers",
           "slots", "params", "grads", "adamw", "activations", "act_grads", "total",
           has ? "  fits" : "");
    for (int i = 0; i < (zero ? dp : pp); i++) {
        const vkg_stage_memory *m = &st[zero ? 0 : i];
        size_t opt = zero ? sh[i].optimizer : m->optimizer, sum = m->model.total + opt;
        printf("%5d  [%2d,%2d) %5d %10.1f %10.1f %10.1f %12.1f %12.1f %10.1f%s\n", i, m->first,
               m->last, m->slots, mib(m->model.params), mib(m->model.grads), mib(opt),
               mib(m->model.activations), mib(m->model.shared), mib(sum),
               has ? (sum <= has ? "  yes" : "  NO") : "");
    }
    printf("(MiB; activations = slots x %.1f MiB; act_grads = the gradients of the activations "
           "and scratch, one set%s)\n",
           mib(st[0].model.slot),
           zero ? "; a rank's adamw = the moments of its shard and the norm's scratch" : "");
    for (int i = 0; zero && i < dp; i++)
        printf("rank %d: the moments of parameters [%zu, %zu)\n", i, sh[i].first,
               sh[i].first + sh[i].count);
    free(sh);
    return 0;
}
