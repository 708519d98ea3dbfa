/* `vkgpt plan`: the device memory each rank of a training run needs, per pipeline stage (or, with
 * --zero 1, per data-parallel rank), from the model and batch alone (no device is opened unless
 * --device asks to compare): parameters and gradients, AdamW's moments, the activation slots of
 * the schedule, the gradients of the activations and scratch, and how many allocations that takes
 * under a driver's largest allocation. What a user reads to choose --pp, --batch, the split and
 * --zero; the numbers are the arenas vkgpt train allocates. With a memory size (--memory,
 * --device) it says whether each rank fits and the largest --batch that does. ZeRO-1's shards
 * follow the gradient norm's partial sums, which depend on the device: a GPU's unless --device
 * names another. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/flags.h"
#include "cli/internal.h"
#include "vkgpt/device.h"
#include "vkgpt/io.h"

static const char *const presets[] = {"none", "gpt2", "gpt2-medium", NULL};
static const char *const pp_schedules[] = {"1f1b", "gpipe", "zb-h1", NULL};
static const char *const recomputes[] = {"none", "gelu", NULL};

/* Drivers' largest single allocation (maxMemoryAllocationSize; maxBufferSize is not smaller on
 * these), as their users report them. */
static const struct driver_limit {
    const char *name;
    uint64_t max_allocation;
    const char *source;
} drivers[] = {
    {"none", 0, "no limit"},
    {"nvidia", 4ull << 30, "NVIDIA proprietary: 4 GiB (GPUOpen-Drivers/xgl#40)"},
    {"radv", 4ull << 30, "Mesa RADV: 4 GiB (GPUOpen-Drivers/AMDVLK#413)"},
    {"amdvlk", 2ull << 30, "AMDVLK and AMD proprietary: 2 GiB (GPUOpen-Drivers/AMDVLK#413)"},
    {"anv", 2ull << 30, "Mesa ANV (Intel): 2 GiB (vulkaninfo in GpuZelenograd/memtest_vulkan#7)"},
    {"lavapipe", 2ull << 30, "Mesa lavapipe: 2 GiB (the same vulkaninfo)"},
};
enum { NDRIVERS = (int)(sizeof drivers / sizeof drivers[0]) };

/* Bytes a slot keeps per layer for ZB-H1's deferred weight pass: the output gradients of the
 * layer's four products (fp32). */
static size_t kept_bytes(const vkg_model_config *c, int batch, int seq)
{
    size_t C = (size_t)c->channels, D = (size_t)vkg_model_head_dim(c);
    size_t qkv = ((size_t)c->num_heads + 2 * (size_t)vkg_model_kv_heads(c)) * D;
    size_t fw = (c->mlp == VKG_MLP_SWIGLU ? 2 : 1) * (size_t)vkg_model_mlp_hidden(c);
    return 4 * (size_t)batch * (size_t)seq * (2 * C + fw + qkv); /* GPT-2: 36 B T C */
}

static double mib(size_t b)
{
    return (double)b / 1048576.0;
}

int vkg_cli_plan(int argc, char **argv)
{
    int preset = 1, layers = 0, heads = 0, channels = 0, ctx = 0, vocab = 0;
    int batch = 4, seq = 1024, pp = 1, schedule = 0, recompute = 0, driver = 0, dp = 1, zero = 0;
    int precision = 0;
    long long total = 0, max_alloc = 0;
    double memory_gib = 0.0;
    const char *driver_names[NDRIVERS + 1];
    for (int i = 0; i < NDRIVERS; i++)
        driver_names[i] = drivers[i].name;
    driver_names[NDRIVERS] = NULL;
    const char *pp_layers = NULL, *device = NULL, *model = NULL;
    const vkg_flag flags[] = {
        {"--model", VKG_FLAG_STR, &model,
         "a model preset (gpt2-124m, llama-125m, smollm2-135m, qwen2.5-0.5b, qwen3-0.6b, "
         "tinyllama-1.1b, ...) or a config.json: its shapes, in place of --preset and the sizes",
         0, 0, 0},
        {"--preset", VKG_FLAG_CHOICE, &preset,
         "gpt2 (124M: L=12 C=768), gpt2-medium (350M: L=24 C=1024), or none", presets, 0, 0},
        {"--layers", VKG_FLAG_INT, &layers, "layers (default: the preset's)", 0, 1, 1000},
        {"--heads", VKG_FLAG_INT, &heads, "attention heads (default: the preset's)", 0, 1, 1000},
        {"--channels", VKG_FLAG_INT, &channels, "channels (default: the preset's)", 0, 1, 65536},
        {"--ctx", VKG_FLAG_INT, &ctx, "context length (default: --seq)", 0, 1, 65536},
        {"--vocab", VKG_FLAG_INT, &vocab, "vocabulary (default 50257)", 0, 1, 1 << 24},
        {"--batch", VKG_FLAG_INT, &batch, "micro-batch rows per rank", 0, 1, 1 << 20},
        {"--seq", VKG_FLAG_INT, &seq, "sequence length T", 0, 1, 65536},
        {"--total-batch", VKG_FLAG_LL, &total,
         "tokens per step of one pipeline (default: pp x batch x seq: M = pp)", 0, 1, 2147483647},
        {"--pp", VKG_FLAG_INT, &pp, "pipeline stages", 0, 1, 64},
        {"--pp-layers", VKG_FLAG_STR, &pp_layers, "layers per stage, e.g. 3,3,2", 0, 0, 0},
        {"--pp-schedule", VKG_FLAG_CHOICE, &schedule, "pipeline schedule", pp_schedules, 0, 0},
        {"--recompute", VKG_FLAG_CHOICE, &recompute,
         "activations recomputed in the backward pass (gelu: llm.c's -r 1)", recomputes, 0, 0},
        {"--precision", VKG_FLAG_CHOICE, &precision, VKG_CLI_PRECISION_HELP, vkg_cli_precisions, 0,
         0},
        {"--dp", VKG_FLAG_INT, &dp, "data-parallel ranks (per stage)", 0, 1, 1024},
        {"--zero", VKG_FLAG_INT, &zero,
         "1: ZeRO-1, AdamW's moments sharded over the --dp ranks (a row per rank)", 0, 0, 1},
        {"--driver", VKG_FLAG_CHOICE, &driver, "plan under this driver's largest allocation",
         driver_names, 0, 0},
        {"--max-alloc", VKG_FLAG_LL, &max_alloc,
         "largest allocation in bytes, e.g. 2G (default: --driver's)", 0, 4096, (long long)1 << 50},
        {"--memory", VKG_FLAG_DOUBLE, &memory_gib,
         "device memory in GiB: does it fit? (default: not checked)", 0, 0, 1 << 20},
        {"--device", VKG_FLAG_STR, &device,
         "compare with this device's memory and largest allocation (and shard for its norm)", 0, 0,
         0},
    };
    int rc = vkg_flags_parse("plan", "[options]", flags, (int)(sizeof flags / sizeof flags[0]),
                             argc, argv, NULL, NULL);
    if (rc)
        return rc == 1 ? 0 : 2;
    vkg_model_config cfg = {.max_seq_len = 1024, .vocab_size = 50257};
    if (preset == 1)
        cfg.num_layers = 12, cfg.num_heads = 12, cfg.channels = 768;
    if (preset == 2)
        cfg.num_layers = 24, cfg.num_heads = 16, cfg.channels = 1024;
    cfg.num_layers = layers ? layers : cfg.num_layers;
    cfg.num_heads = heads ? heads : cfg.num_heads;
    cfg.channels = channels ? channels : cfg.channels;
    cfg.max_seq_len = ctx ? ctx : seq > cfg.max_seq_len ? seq : cfg.max_seq_len;
    cfg.vocab_size = vocab ? vocab : cfg.vocab_size;
    cfg.padded_vocab_size = vkg_model_pad_vocab(cfg.vocab_size);
    if (model) { /* the named model's shapes; --seq past its context is refused below */
        vkg_status ms = vkg_model_config_named(model, &cfg);
        if (ms != VKG_OK)
            return vkg_cli_report("plan", ms);
        if (layers || heads || channels || ctx || vocab) {
            fprintf(stderr, "vkgpt plan: --model gives the shapes; drop --layers, --heads, "
                            "--channels, --ctx and --vocab\n");
            return 2;
        }
    }
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
    vkg_plan_opts po = {.recompute = recompute,
                        .precision = precision,
                        .max_allocation = drivers[driver].max_allocation};
    if (max_alloc)
        po.max_allocation = (uint64_t)max_alloc;
    uint64_t has = (uint64_t)(memory_gib * 1073741824.0);
    if (device) {
        vkg_device_opts dopts = vkg_device_opts_default();
        dopts.select = device;
        vkg_device_t *dev = NULL;
        vkg_status ds = vkg_device_create(&dopts, &dev);
        if (ds != VKG_OK)
            return vkg_cli_report("plan", ds);
        const vkg_device_info *di = vkg_device_get_info(dev);
        has = di->device_local_bytes;
        if (!max_alloc && !driver)
            po.max_allocation = di->max_allocation_bytes;
        printf("device: %s, %.1f MiB device-local, largest allocation %.1f MiB\n", di->name,
               mib(has), mib(di->max_allocation_bytes));
        vkg_device_destroy(&dev);
    }
    vkg_stage_memory st[64];
    const int *layers_req = nreq ? req : NULL;
    vkg_status s = vkg_model_config_validate(&cfg);
    if (s == VKG_OK)
        s = vkg_strategy_plan(&cfg, batch, seq, M, pp, layers_req, schedule, &po, st);
    if (s != VKG_OK) {
        if (s == VKG_ERR_NOMEM) /* a tensor larger than the largest allocation */
            s = vkg_strategy_check_fit(&cfg, batch, seq, M, pp, layers_req, schedule, &po, 0, has);
        return vkg_cli_report("plan", s);
    }
    int zpp = zero && pp > 1; /* each stage's moments sharded over its dp ranks */
    zero = zero && !zpp;      /* the whole model's moments sharded over the dp ranks */
    vkg_zero_shard *sh = zero ? calloc((size_t)dp, sizeof *sh) : NULL;
    if (zero && !sh)
        return vkg_cli_report("plan", VKG_ERR_NOMEM);
    if (zero && (s = vkg_strategy_zero_plan(&cfg, dp, sh)) != VKG_OK) {
        free(sh);
        return vkg_cli_report("plan", s);
    }
    printf("model: L=%d NH=%d C=%d maxT=%d V=%d (Vp=%d), %zu parameters; micro-batch %d x %d, "
           "%d micro-batches per step, %d stage%s (%s)\n",
           cfg.num_layers, cfg.num_heads, cfg.channels, cfg.max_seq_len, cfg.vocab_size,
           cfg.padded_vocab_size, vkg_model_num_params(&cfg), batch, seq, M, pp, pp > 1 ? "s" : "",
           pp > 1 ? pp_schedules[schedule] : "no pipeline");
    char family[256];
    vkg_model_describe(&cfg, family, sizeof family);
    double fl_layer, fl_head;
    vkg_model_token_flops(&cfg, seq, &fl_layer, &fl_head);
    double fwd = fl_layer * cfg.num_layers + fl_head; /* per token, at T = --seq */
    printf("family: %s\n", family);
    printf("compute: %.3g forward FLOPs per token at T=%d, %.3g per training token (forward and "
           "backward: 3x), %.3g per step\n",
           fwd, seq, 3.0 * fwd, 3.0 * fwd * (double)tot * dp);
    if (po.max_allocation)
        printf("largest allocation: %.1f MiB (%s)\n", mib(po.max_allocation),
               max_alloc || !driver ? "given" : drivers[driver].source);
    if (recompute)
        printf("recompute: %s (recomputed in the backward pass, one layer's kept)\n",
               recomputes[recompute]);
    if (precision)
        printf("precision: bf16 (fp32 master weights, gradients and AdamW; the bf16 weight copy "
               "is in params: %.1f MiB of stage 0's)\n",
               mib(st[0].model.param_copy));
    if (pp > 1 && schedule == VKG_PP_ZBH1)
        printf("zb-h1: up to min(stages, micro-batches) = %d micro-batches alive on every stage "
               "(1F1B's first stage's count); each slot also keeps its layers' product output "
               "gradients for the deferred weight pass (%.1f MiB of stage 0's slot)\n",
               pp < M ? pp : M,
               mib(kept_bytes(&cfg, batch, seq) * (size_t)(st[0].last - st[0].first)));
    if (dp > 1 && !zero && !zpp)
        printf("data parallel: %d ranks per stage, each holding its stage's whole AdamW (--zero 1 "
               "shards it)\n",
               dp);
    if (zpp)
        printf("data parallel: %d ranks per stage, ZeRO-1: each holds the moments of 1/%d of its "
               "stage's parameters (the adamw column: the largest shard's)\n",
               dp, dp);
    if (zero)
        printf("data parallel: %d ranks, ZeRO-1: AdamW's moments sharded at the gradient norm's "
               "partial sums; unsharded AdamW %.1f MiB per rank\n",
               dp, mib(st[0].optimizer));
    printf("%5s %8s %5s %10s %10s %10s %12s %12s %10s %6s %10s%s\n", zero ? "rank" : "stage",
           "layers", "slots", "params", "grads", "adamw", "activations", "act_grads", "total",
           "allocs", "largest", has ? "  fits" : "");
    int all_fit = 1;
    for (int i = 0; i < (zero ? dp : pp); i++) {
        const vkg_stage_memory *m = &st[zero ? 0 : i];
        size_t opt = zero ? sh[i].optimizer : m->optimizer, sum;
        if (zpp) {
            size_t n = m->model.params / 4;
            opt = vkg_adamw_memory_of((n + (size_t)dp - 1) / (size_t)dp,
                                      vkg_adamw_norm_partition(n, NULL));
        }
        sum = m->total - m->optimizer + opt;
        int fits = !has || sum <= has;
        all_fit &= fits;
        printf("%5d  [%2d,%2d) %5d %10.1f %10.1f %10.1f %12.1f %12.1f %10.1f %6d %10.1f%s\n", i,
               m->first, m->last, m->slots, mib(m->model.params + m->model.param_copy),
               mib(m->model.grads), mib(opt), mib(m->model.activations), mib(m->model.shared),
               mib(sum), m->allocations, mib(m->model.largest_tensor),
               has ? (fits ? "  yes" : "  NO") : "");
    }
    printf("(MiB; activations = slots x %.1f MiB; act_grads = the gradients of the activations "
           "and scratch, one set; allocs = device allocations, AdamW's included; largest = the "
           "largest tensor, %s%s)\n",
           mib(st[0].model.slot), st[0].model.largest_of,
           zero ? "; a rank's adamw = the moments of its shard and the norm's scratch" : "");
    for (int i = 0; zero && i < dp; i++)
        printf("rank %d: the moments of parameters [%zu, %zu)\n", i, sh[i].first,
               sh[i].first + sh[i].count);
    free(sh);
    if (has) {
        int best = 0;
        for (int i = 0; i < pp; i++) {
            int b = vkg_strategy_largest_batch(&cfg, 1 << 16, seq, M, pp, layers_req, schedule, &po,
                                               i, has);
            best = i == 0 || b < best ? b : best;
        }
        const char *note = zero || zpp ? " (counting the unsharded AdamW)" : "";
        if (best)
            printf("the largest --batch that fits %.1f GiB is %d%s%s\n", (double)has / 1073741824.0,
                   best, note, all_fit ? "" : ": this --batch does not fit");
        else
            printf("no --batch fits %.1f GiB%s\n", (double)has / 1073741824.0, note);
        return all_fit ? 0 : 1;
    }
    return 0;
}
