/* `vkgpt bench train`: times whole training steps (zero grads, forward, loss, backward, global
 * norm with clipping, AdamW) of a GPT-2 config or a named model (--model) on one device and prints
 * tokens/s, ms/step (median of the timed steps, wall clock), the GPU time of every op label per
 * step (timestamp queries) and the device memory the model holds.
 *
 * It drives the model API (src/model/model.h) directly with random tokens and a random GPT-2
 * initialisation, so it needs no data files. It prints figures and asserts nothing; it does not
 * check results (the tests do that) beyond printing the loss, which should stay near ln(V). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/flags.h"
#include "cli/internal.h"
#include "os/clock.h"
#include "os/proc.h"
#include "vkgpt/io.h"

typedef struct preset {
    const char *name;
    int L, NH, C, maxT, V, B, T;
    const char *what;
} preset;

/* "default" is the README's fortunes model as scripts/train-default.sh trains it (byte-level
 * vocabulary: 256 bytes + end-of-text). */
static const preset presets[] = {
    {"l4", 4, 4, 256, 128, 50257, 8, 128, "issue 3's L=4 config, GPT-2 BPE vocabulary"},
    {"default", 4, 4, 128, 64, 257, 8, 64,
     "the default fortunes model of scripts/train-default.sh, byte-level vocabulary"},
};
static const char *const preset_names[] = {"l4", "default", NULL};
/* --tuning: the device's own, or a discrete GPU's forced on it (tiled matmul, chunked parameter
 * gradients, wide reductions, the shared-memory attention), as test_gpt2 forces it. */
static const char *const tuning_names[] = {"device", "gpu", NULL};

typedef struct bench_opts {
    int preset, tuning;
    int L, NH, C, maxT, V, B, T; /* 0: the preset's */
    int steps, warmup, no_profile, per_dispatch;
    int precision; /* VKG_PRECISION_* */
    int coopmat;   /* vkg_coopmat_mode */
    float lr, grad_clip;
    float loss_scale; /* > 0: d(loss) x this, divided out in the update (a fixed loss scale) */
    uint64_t seed;
    const char *device, *tiles;
    const char *model;        /* --model: a preset or config.json in place of the GPT-2 shapes */
    vkg_matmul_tiling tiling; /* --tiles parsed */
} bench_opts;

/* One op label: its GPU time in each timed step, and its median. */
typedef struct op_row {
    const char *label;
    double *step_ns; /* steps entries: the label's summed dispatch time in each timed step */
    double median_ms;
    int calls; /* dispatches per step */
} op_row;

#define MAX_ROWS 64

typedef struct op_table {
    op_row rows[MAX_ROWS];
    int n, steps;
    double *row_ns; /* MAX_ROWS x steps: the rows' step_ns */
    double *seq_ns; /* per dispatch of both lists, in recording order, summed over the steps */
    const char **seq_label;
    int nseq;
} op_table;

/* splitmix64: seeds and tokens; Box-Muller for the normal initialisation. */
static uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static int cmp_row(const void *x, const void *y)
{
    double a = ((const op_row *)x)->median_ms, b = ((const op_row *)y)->median_ms;
    return (a < b) - (a > b);
}

/* Median of x[0..n), n >= 1; sorts x. */
static double median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* Add one run's dispatch times of a list to timed step `step` (0 counts calls per label). */
static void add_timings(op_table *t, const vkg_cmd_timing *tim, int n, int step, int *pos)
{
    for (int i = 0; i < n; i++) {
        int r = 0;
        while (r < t->n && strcmp(t->rows[r].label, tim[i].label))
            r++;
        if (r == t->n) {
            if (t->n == MAX_ROWS)
                r = MAX_ROWS - 1; /* not reached with today's ops: fold into the last row */
            else
                t->rows[t->n++] =
                    (op_row){.label = tim[i].label, .step_ns = t->row_ns + (size_t)t->n * t->steps};
        }
        t->rows[r].step_ns[step] += tim[i].ns;
        if (step == 0)
            t->rows[r].calls++;
        if (*pos < t->nseq) {
            t->seq_ns[*pos] += tim[i].ns;
            t->seq_label[*pos] = tim[i].label;
        }
        (*pos)++;
    }
}

/* One training step as the trainer takes it (accumulation 1); *ms gets its wall time. */
static vkg_status step(vkg_model *m, vkg_adamw *opt, const bench_opts *o, const int32_t *x,
                       const int32_t *y, uint32_t t, float *loss, double *ms)
{
    double t0 = vkg_os_now_ms();
    float sumsq;
    VKG_TRY(vkg_model_zero_grad(m));
    VKG_TRY(vkg_model_forward_backward(m, x, y, loss));
    VKG_TRY(vkg_adamw_grad_sumsq(opt, &sumsq));
    VKG_TRY(vkg_adamw_update(opt, o->lr, t, o->grad_clip, sumsq,
                             o->loss_scale > 0.0f ? o->loss_scale : 1.0f));
    *ms = vkg_os_now_ms() - t0;
    return VKG_OK;
}

static void print_memory(vkg_model *m, vkg_adamw *opt)
{
    size_t total = vkg_model_device_bytes(m) + vkg_adamw_device_bytes(opt);
    /* model.h's memory plan: params and grads are each num_params floats (256-aligned arenas), the
     * activations arena (with their gradients and scratch) the rest; AdamW's m and v (and its
     * small scratch) are the optimizer's. */
    size_t pb = (vkg_model_param_count(m) * 4 + 255) / 256 * 256;
    size_t copy = vkg_model_opts_of(m)->precision == VKG_PRECISION_BF16
                      ? (vkg_model_param_count(m) * 2 + 255) / 256 * 256
                      : 0;
    size_t acts = vkg_model_device_bytes(m) - 2 * pb - copy;
    double mib = 1048576.0;
    printf("device memory: %.1f MiB = params %.1f + grads %.1f + adamw m,v %.1f + activations, "
           "their gradients and scratch %.1f\n",
           (double)total / mib, (double)pb / mib, (double)pb / mib, 2.0 * (double)pb / mib,
           (double)acts / mib);
    if (copy)
        printf("precision: bf16, the weight copy %.1f MiB (in the params arena)\n",
               (double)copy / mib);
    printf("peak host RSS: %.1f MiB (on unified-memory devices such as lavapipe device memory is "
           "host memory)\n",
           (double)vkg_os_peak_rss() / mib);
}

/* The per-label table (medians over the timed steps: robust to a step slowed by other load),
 * sorted by time; sorts each row's step_ns. */
static void print_ops(op_table *t, double wall_ms, int per_dispatch)
{
    op_row rows[MAX_ROWS];
    double total = 0.0;
    for (int i = 0; i < t->n; i++) {
        t->rows[i].median_ms = median(t->rows[i].step_ns, t->steps) / 1e6;
        total += t->rows[i].median_ms;
    }
    memcpy(rows, t->rows, (size_t)t->n * sizeof *rows);
    qsort(rows, (size_t)t->n, sizeof *rows, cmp_row);
    printf("\nper-op GPU time (timestamp queries; per label, median over the timed steps):\n");
    printf("%-22s %6s %10s %7s\n", "op", "calls", "ms/step", "%");
    for (int i = 0; i < t->n; i++)
        printf("%-22s %6d %10.2f %6.1f%%\n", rows[i].label, rows[i].calls, rows[i].median_ms,
               total > 0 ? 100.0 * rows[i].median_ms / total : 0.0);
    printf("%-22s %6s %10.2f %6.1f%%\n", "total (dispatches)", "", total, 100.0);
    printf("median wall step %.2f ms: dispatches %.1f%%, the rest (%.2f ms) is zeroing the "
           "gradients, uploads, barriers, submission and waits\n",
           wall_ms, wall_ms > 0 ? 100.0 * total / wall_ms : 0.0, wall_ms - total);
    if (!per_dispatch)
        return;
    printf("\nper dispatch, in recording order (forward/backward list, then the norm and update "
           "lists), mean "
           "over the timed steps:\n");
    for (int i = 0; i < t->nseq && t->seq_label[i]; i++)
        printf("%5d %-22s %9.3f ms\n", i, t->seq_label[i], t->seq_ns[i] / (double)t->steps / 1e6);
}

/* Build the model, run warm-up and timed steps, print the figures. */
static vkg_status run(const bench_opts *o, const vkg_model_config *cfg)
{
    vkg_status st = VKG_OK;
    vkg_device_t *dev = NULL;
    vkg_model *m = NULL;
    vkg_adamw *opt = NULL;
    float *params = NULL;
    int32_t *tok = NULL;
    double *ms = NULL;
    op_table tab = {0};
    size_t BT = (size_t)o->B * (size_t)o->T;

    vkg_device_opts dopts = vkg_device_opts_default();
    dopts.select = o->device;
    dopts.profiling = !o->no_profile;
    dopts.coopmat = o->coopmat == VKG_COOPMAT_AUTO && o->precision != VKG_PRECISION_BF16
                        ? VKG_COOPMAT_OFF
                        : (vkg_coopmat_mode)o->coopmat;
    VKG_TRY_GOTO(st, vkg_device_create(&dopts, &dev), done);
    if (o->tiling.bm) /* --tiles: checked against this device's limits */
        VKG_TRY_GOTO(st, vkg_device_force_tiles(dev, &o->tiling), done);
    char why[320] = "";
    double race[2] = {0, 0};
    if (dopts.coopmat == VKG_COOPMAT_AUTO && vkg_device_tuning_get(dev).coopmat) {
        VKG_TRY_GOTO(st, vkg_op_coopmat_selfcheck(dev, 0.0f, why, sizeof why), done);
        size_t rows = BT < 64 ? 64 : BT < 4096 ? BT : 4096; /* the fc product's, capped */
        if (vkg_device_tuning_get(dev).coopmat)
            VKG_TRY_GOTO(st, vkg_op_coopmat_race(dev, (uint32_t)rows, why, sizeof why, race), done);
    } else if (dopts.coopmat == VKG_COOPMAT_AUTO)
        snprintf(why, sizeof why, "%s", vkg_device_coopmat_note(dev));
    if (o->precision == VKG_PRECISION_BF16) {
        vkg_device_tuning ct = vkg_device_tuning_get(dev);
        if (ct.coopmat)
            printf("coopmat: %s %ux%ux%u f16 fragments, f32 sums (%s)\n",
                   ct.coopmat == 2 ? "emulated" : "on,", ct.coopmat_m, ct.coopmat_n, ct.coopmat_k,
                   dopts.coopmat == VKG_COOPMAT_AUTO
                       ? "auto: the self-check passed, and it was the faster"
                       : "asked for");
        if (race[0] > 0)
            printf("coopmat race (--coopmat auto): the cooperative-matrix kernel %.3f ms, the "
                   "other %.3f ms for the fc product\n",
                   race[0], race[1]);
        if (!ct.coopmat)
            printf("coopmat: off (%s)\n",
                   dopts.coopmat == VKG_COOPMAT_AUTO ? why : "--coopmat off");
    }
    const vkg_device_info *info = vkg_device_get_info(dev);
    if (o->tuning == 1) {
        vkg_device_tuning t =
            vkg__device_tuning_defaults(VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, info->subgroup_size);
        vkg__mmt_fit(dev, &t);
        if (o->tiles)
            vkg__mmt_force(&t, &o->tiling);
        vkg_device_tuning cur = vkg_device_tuning_get(dev); /* --coopmat as the device opened */
        t.coopmat = cur.coopmat, t.coopmat_m = cur.coopmat_m, t.coopmat_n = cur.coopmat_n;
        t.coopmat_k = cur.coopmat_k;
        VKG_TRY_GOTO(st, vkg_device_tuning_set(dev, &t), done);
    }
    if (o->loss_scale > 0.0f && vkg_device_tuning_get(dev).coopmat) { /* as the trainer does */
        vkg_device_tuning t = vkg_device_tuning_get(dev);
        t.coopmat_grads = 1;
        VKG_TRY_GOTO(st, vkg_device_tuning_set(dev, &t), done);
        printf("coopmat: the gradient products too (--loss-scale %g)\n", (double)o->loss_scale);
    }
    vkg_model_opts mo = vkg_model_opts_default();
    mo.B = o->B, mo.T = o->T, mo.precision = o->precision;
    VKG_TRY_GOTO(st, vkg_model_create(dev, cfg, &mo, &m), done);
    if (o->loss_scale > 0.0f)
        VKG_TRY_GOTO(st, vkg_model_set_grad_scale(m, o->loss_scale), done);
    vkg_adamw_config ac = vkg_adamw_config_default();
    ac.weight_decay = 0.1f;
    VKG_TRY_GOTO(st, vkg_strategy_create_adamw(&ac, m, &opt), done);
    size_t np = vkg_model_param_count(m);
    params = malloc(np * sizeof *params);
    tok = malloc((BT + 1) * sizeof *tok);
    ms = calloc((size_t)o->steps, sizeof *ms);
    tab.steps = o->steps;
    tab.row_ns = calloc((size_t)MAX_ROWS * (size_t)o->steps, sizeof *tab.row_ns);
    tab.nseq = 8192;
    tab.seq_ns = calloc((size_t)tab.nseq, sizeof *tab.seq_ns);
    tab.seq_label = calloc((size_t)tab.nseq, sizeof *tab.seq_label);
    VKG_CHECK_GOTO(st, params && tok && ms && tab.row_ns && tab.seq_ns && tab.seq_label,
                   VKG_ERR_NOMEM, done, "no memory for %zu parameters", np);
    uint64_t seed = o->seed;
    vkg_model_init_params(cfg, params, next_u64(&seed));
    VKG_TRY_GOTO(st, vkg_model_set_params(m, params), done);
    for (size_t i = 0; i <= BT; i++)
        tok[i] = (int32_t)(next_u64(&seed) % (uint64_t)cfg->vocab_size);

    printf("device: %s (%s)%s\n", info->name, info->driver,
           o->no_profile ? "" : ", timestamp queries on");
    vkg_cli_print_matmul(dev, "");
    char family[256];
    vkg_model_describe(cfg, family, sizeof family);
    printf("family: %s\n", family);
    printf("model: L=%d NH=%d C=%d maxT=%d V=%d (Vp=%d), %zu parameters\n", cfg->num_layers,
           cfg->num_heads, cfg->channels, cfg->max_seq_len, cfg->vocab_size, cfg->padded_vocab_size,
           np);
    printf("batch: B=%d x T=%d = %zu tokens per step; AdamW lr %g, weight decay 0.1, clip %g\n",
           o->B, o->T, BT, (double)o->lr, (double)o->grad_clip);
    print_memory(m, opt);
    printf("running %d warm-up and %d timed steps...\n", o->warmup, o->steps);
    fflush(stdout);

    float loss0 = 0.0f, loss = 0.0f;
    for (int s = 0; s < o->warmup + o->steps; s++) {
        double t;
        /* Inputs tok[0..BT), targets shifted by one: a fixed random batch. */
        VKG_TRY_GOTO(st, step(m, opt, o, tok, tok + 1, (uint32_t)s + 1, &loss, &t), done);
        if (s == 0)
            loss0 = loss;
        if (s < o->warmup)
            continue;
        ms[s - o->warmup] = t;
        int pos = 0;
        for (int l = 0; l < 3; l++) { /* forward-backward, the norm, the update */
            const vkg_cmd_timing *tim;
            int n = l ? vkg_adamw_timings(opt, l - 1, &tim) : vkg_model_timings(m, &tim);
            add_timings(&tab, tim, n, s - o->warmup, &pos);
        }
    }
    double med = median(ms, o->steps); /* ms is sorted now */
    printf("loss: %.4f at the first step, %.4f at the last (ln V = %.4f)\n", (double)loss0,
           (double)loss, log((double)cfg->vocab_size));
    printf("steps: %d warm-up (untimed), %d timed: ms/step min %.2f median %.2f max %.2f\n",
           o->warmup, o->steps, ms[0], med, ms[o->steps - 1]);
    printf("ms/step: %.2f\ntokens/s: %.1f\n", med, (double)BT / (med / 1e3));
    int d1, b1, d2, b2;
    vkg_model_list_counts(m, &d1, &b1);
    vkg_adamw_list_counts(opt, &d2, &b2);
    printf("dispatches/step: %d (forward-backward %d, norm and update %d)\nbarriers/step: %d "
           "(forward-backward %d, norm and update %d)\n",
           d1 + d2, d1, d2, b1 + b2, b1, b2);
    if (!o->no_profile && tab.n > 0)
        print_ops(&tab, med, o->per_dispatch);
    else if (!o->no_profile)
        printf("(no per-op times: %s has no compute timestamps)\n", info->name);
done:
    free(tab.seq_label);
    free(tab.seq_ns);
    free(tab.row_ns);
    free(ms);
    free(tok);
    free(params);
    vkg_adamw_destroy(&opt);
    vkg_model_destroy(&m);
    vkg_device_destroy(&dev);
    return st;
}

int vkg_cli_bench_train(int argc, char **argv)
{
    bench_opts o = {.steps = 10,
                    .warmup = 3,
                    .lr = 3e-4f,
                    .grad_clip = 1.0f,
                    .seed = 1337,
                    .coopmat = VKG_COOPMAT_AUTO};
    const vkg_flag flags[] = {
        {"--model", VKG_FLAG_STR, &o.model,
         "a model preset (llama-125m, gpt2-124m, smollm2-135m, ...) or a config.json in place of "
         "--preset's shapes; --layers, --batch and --seq still apply",
         0, 0, 0},
        {"--preset", VKG_FLAG_CHOICE, &o.preset,
         "l4 (the default): L=4 C=256 NH=4 V=50257 "
         "T=128 B=8; default: the README's model, L=4 C=128 NH=4 V=257 T=64 B=8. Flags below "
         "override it",
         preset_names, 0, 0},
        {"--layers", VKG_FLAG_INT, &o.L, "layers L (default: the preset's)", 0, 1, 1000},
        {"--heads", VKG_FLAG_INT, &o.NH, "attention heads NH (default: the preset's)", 0, 1, 1000},
        {"--channels", VKG_FLAG_INT, &o.C, "channels C (default: the preset's)", 0, 1, 65536},
        {"--ctx", VKG_FLAG_INT, &o.maxT, "context length maxT (default: the preset's, or --seq)", 0,
         1, 65536},
        {"--vocab", VKG_FLAG_INT, &o.V,
         "vocabulary V, padded to a multiple of 128 (default: the preset's)", 0, 1, 1 << 24},
        {"--batch", VKG_FLAG_INT, &o.B, "micro-batch size B (default: the preset's)", 0, 1,
         1 << 20},
        {"--seq", VKG_FLAG_INT, &o.T, "sequence length T (default: the preset's)", 0, 1, 1 << 20},
        {"--steps", VKG_FLAG_INT, &o.steps, "timed steps (median reported; default 10)", 0, 1,
         4096},
        {"--warmup-steps", VKG_FLAG_INT, &o.warmup, "untimed steps first (default 3)", 0, 0, 1e6},
        {"--lr", VKG_FLAG_FLOAT, &o.lr, "AdamW learning rate (default 3e-4)", 0, 0, 10},
        {"--grad-clip", VKG_FLAG_FLOAT, &o.grad_clip, "global-norm clip, 0: off (default 1)", 0, 0,
         1e9},
        {"--seed", VKG_FLAG_U64, &o.seed, "seed of the initialisation and tokens", 0, 0, 0},
        {"--device", VKG_FLAG_STR, &o.device, "device index or name (default: VKGPT_DEVICE)", 0, 0,
         0},
        {"--tiles", VKG_FLAG_STR, &o.tiles,
         "tiled matmul for every product with these tiles: BMxBNxBK:TMxTN[/SG][+db|+sb] or a "
         "table entry such as nvidia-large (+db double-buffered, +sb single-buffered shared "
         "tiles); default: the device's",
         0, 0, 0},
        {"--tuning", VKG_FLAG_CHOICE, &o.tuning,
         "device (the default): the device's own kernels; gpu: a discrete GPU's forced on it",
         tuning_names, 0, 0},
        {"--precision", VKG_FLAG_CHOICE, &o.precision, VKG_CLI_PRECISION_HELP, vkg_cli_precisions,
         0, 0},
        {"--coopmat", VKG_FLAG_CHOICE, &o.coopmat, VKG_CLI_COOPMAT_HELP, vkg_cli_coopmats, 0, 0},
        {"--loss-scale", VKG_FLAG_FLOAT, &o.loss_scale,
         "a fixed loss scale (0: none): d(loss) times it, divided out in the update; with bf16 "
         "and the cooperative-matrix kernel on, the gradient products run on it too",
         0, 0, 0x1p127},
        {"--no-profile", VKG_FLAG_BOOL, &o.no_profile, "no timestamp queries (no per-op table)", 0,
         0, 0},
        {"--per-dispatch", VKG_FLAG_BOOL, &o.per_dispatch, "also list every dispatch in order", 0,
         0, 0},
    };
    o.device = getenv("VKGPT_DEVICE");
    int rc = vkg_flags_parse("bench train", "[--preset l4|default] [options]", flags,
                             (int)(sizeof flags / sizeof flags[0]), argc, argv, NULL, NULL);
    if (rc)
        return rc == 1 ? 0 : 2;
    if (vkg_cli_tiles("bench train", o.tiles, &o.tiling) ||
        vkg_cli_coopmat_check("bench train", o.coopmat, o.precision))
        return 2;
    const preset *p = &presets[o.preset];
    int maxT_given = o.maxT, L_given = o.L;
    vkg_status st0;
    o.L = o.L ? o.L : p->L, o.NH = o.NH ? o.NH : p->NH, o.C = o.C ? o.C : p->C;
    o.V = o.V ? o.V : p->V, o.B = o.B ? o.B : p->B, o.T = o.T ? o.T : p->T;
    o.maxT = maxT_given ? maxT_given : (o.T > p->maxT ? o.T : p->maxT);
    vkg_model_config cfg = {.max_seq_len = o.maxT,
                            .vocab_size = o.V,
                            .padded_vocab_size = vkg_model_pad_vocab(o.V),
                            .num_layers = o.L,
                            .num_heads = o.NH,
                            .channels = o.C};
    if (o.model) { /* the named model's shapes, its layers overridable (a shorter run) */
        st0 = vkg_model_config_named(o.model, &cfg);
        if (st0 != VKG_OK)
            return vkg_cli_report("bench train", st0);
        cfg.num_layers = L_given ? L_given : cfg.num_layers;
        cfg.max_seq_len = cfg.max_seq_len < o.T ? o.T : cfg.max_seq_len;
        o.L = cfg.num_layers, o.NH = cfg.num_heads, o.C = cfg.channels, o.V = cfg.vocab_size;
        printf("# vkgpt bench train: model %s%s\n", o.model,
               L_given ? ", layers overridden by --layers" : "");
        vkg_status st = run(&o, &cfg);
        return st == VKG_OK ? 0 : vkg_cli_report("bench train", st);
    }
    printf("# vkgpt bench train: preset %s (%s)%s\n", p->name, p->what,
           o.L != p->L || o.NH != p->NH || o.C != p->C || o.V != p->V || o.B != p->B ||
                   o.T != p->T || o.maxT != p->maxT
               ? ", overridden by flags"
               : "");
    vkg_status st = run(&o, &cfg);
    return st == VKG_OK ? 0 : vkg_cli_report("bench train", st);
}
