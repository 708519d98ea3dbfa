/* `vkgpt train`: parse flags into a vkg_train_config (refusing combinations that cannot all be
 * honoured), run the trainer with a live progress line on a terminal (plain lines otherwise),
 * samples and checkpoints at intervals, and on SIGTERM or SIGUSR1 (a preemption notice, to any
 * rank) or SIGINT finish the current step on every rank, write a checkpoint and exit 75 (130 for
 * SIGINT: vkg_cli_stop_status); a signal while the data loads stops at once,
 * writing nothing. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/flags.h"
#include "cli/train_resume.h"
#include "os/proc.h"
#include "vkgpt/train.h"

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    stop_requested = sig;
}

static const char *const schedules[] = {"cosine", "linear", "constant", NULL};
static const char *const pp_schedules[] = {"1f1b", "gpipe", "zb-h1", NULL}; /* as train.h */
static const char *const recomputes[] = {"none", "gelu", NULL}; /* as vkg_train_config */
static const char *const syncs[] = {"step", "diloco", NULL};    /* vkg_train_config.sync */
static const char *const outer_dtypes[] = {"fp32", "bf16", "int8", "int4", NULL}; /* .outer_dtype */
static const char *const loss_scales[] = {"off", "dynamic", NULL};
static const char *const save_hf[] = {"none", "fp32", "bf16", NULL}; /* VKG_SAVE_HF_* */

typedef struct train_opts {
    vkg_train_config cfg;
    int sample_every, sample_len, top_k, quiet, schedule, raw;
    int loss_scale; /* loss_scales */
    float temperature, loss_scale_init;
    const char *prompt, *tiles;
    vkg_cli_dp_flags dp;
    const char *pp_layers;
    int pp_layers_v[256];
    int arch_given[5]; /* --layers --heads --channels --ctx --vocab given (checked on resume) */
} train_opts;

/* The first combination of flags that cannot all be honoured, described in why (cap bytes);
 * 0 when there is none. */
static int find_conflict(const train_opts *o, const vkg_flag *flags, int n,
                         const vkg_flags_result *r, char *why, size_t cap)
{
    static const char *const arch[] = {"--layers", "--heads", "--channels", "--ctx", "--vocab"};
    static const char *const sampling[] = {"--prompt", "--temperature", "--top-k"};
    const vkg_train_config *c = &o->cfg;
    if (c->init_path && c->resume) {
        snprintf(why, cap,
                 "--init conflicts with --resume: --resume continues from the newest "
                 "checkpoint in --ckpt-dir (drop --init)");
        return 1;
    }
    for (size_t i = 0; i < sizeof arch / sizeof arch[0]; i++)
        if ((c->init_path || c->model) && vkg_flags_seen(flags, n, r, arch[i])) {
            snprintf(why, cap, "%s conflicts with %s: it sets the architecture", arch[i],
                     c->init_path ? "--init" : "--model");
            return 1;
        }
    if (c->init_path && c->model) {
        snprintf(why, cap, "--model conflicts with --init: the model to start from has its own");
        return 1;
    }
    const char *needs = NULL, *what = NULL;
    if (c->eval_every > 0 && !c->val_data)
        needs = "--eval-every", what = "--val-data (the data to evaluate on)";
    else if (vkg_flags_seen(flags, n, r, "--eval-batches") && !c->val_data)
        needs = "--eval-batches", what = "--val-data (the data to evaluate on)";
    else if (c->val_data && c->eval_every == 0)
        needs = "--val-data", what = "--eval-every N (it is read only for evaluations)";
    else if (!c->ckpt_dir && vkg_flags_seen(flags, n, r, "--ckpt-every"))
        needs = "--ckpt-every", what = "--ckpt-dir";
    else if (!c->ckpt_dir && vkg_flags_seen(flags, n, r, "--keep"))
        needs = "--keep", what = "--ckpt-dir";
    else if (!c->ckpt_dir && vkg_flags_seen(flags, n, r, "--save-hf"))
        needs = "--save-hf", what = "--ckpt-dir";
    else if (c->vocab_dir && (!c->tokenizer || strcmp(c->tokenizer, "gpt2")))
        needs = "--vocab-dir", what = "--tokenizer gpt2 (other tokenizers do not read it)";
    else if (vkg_flags_seen(flags, n, r, "--base-batch") && o->dp.lr_scale == 0)
        needs = "--base-batch", what = "--lr-scale linear or sqrt";
    else if (vkg_flags_seen(flags, n, r, "--pp-schedule") && c->par.pp < 2)
        needs = "--pp-schedule", what = "--pp 2 or more (a pipeline to schedule)";
    else if (vkg_flags_seen(flags, n, r, "--loss-scale-init") && o->loss_scale == 0)
        needs = "--loss-scale-init", what = "--loss-scale dynamic";
    else if (vkg_flags_seen(flags, n, r, "--loss-scale-window") && o->loss_scale == 0)
        needs = "--loss-scale-window", what = "--loss-scale dynamic";
    if (needs) {
        snprintf(why, cap, "%s needs %s", needs, what);
        return 1;
    }
    static const char *const outer[] = {"--inner-steps", "--outer-lr",  "--outer-momentum",
                                        "--outer-dtype", "--fragments", "--outer-delay",
                                        "--outer-mix"};
    for (size_t i = 0; i < sizeof outer / sizeof outer[0] && c->par.sync == 0; i++)
        if (vkg_flags_seen(flags, n, r, outer[i])) {
            snprintf(why, cap,
                     "%s needs --sync diloco: with --sync step the gradients are summed every "
                     "step and there is no outer step",
                     outer[i]);
            return 1;
        }
    if (o->dp.rank_batch && strcmp(o->dp.rank_batch, "auto") &&
        vkg_flags_seen(flags, n, r, "--batch")) {
        snprintf(why, cap,
                 "--batch conflicts with --rank-batch, which sets every rank's "
                 "micro-batch");
        return 1;
    }
    if (o->dp.no_overlap && vkg_flags_seen(flags, n, r, "--bucket-mb")) {
        snprintf(why, cap,
                 "--bucket-mb conflicts with --no-overlap (one allreduce of the whole "
                 "gradient, no buckets)");
        return 1;
    }
    if (c->par.pp > 1 && c->par.pp_schedule == 2 &&
        (o->dp.no_overlap || vkg_flags_seen(flags, n, r, "--bucket-mb"))) {
        snprintf(why, cap,
                 "%s has no effect with --pp-schedule zb-h1: its stages reduce their gradients "
                 "after the last weight pass, without buckets",
                 o->dp.no_overlap ? "--no-overlap" : "--bucket-mb");
        return 1;
    }
    const char *unused = o->sample_len == 0 && o->sample_every > 0 ? "--sample-every" : NULL;
    for (size_t i = 0; i < sizeof sampling / sizeof sampling[0] && o->sample_len == 0; i++)
        if (!unused && vkg_flags_seen(flags, n, r, sampling[i]))
            unused = sampling[i];
    if (unused) {
        snprintf(why, cap, "%s has no effect with --sample-len 0 (no samples)", unused);
        return 1;
    }
    return 0;
}

static int show_sample(vkg_trainer_t *t, const train_opts *o, uint64_t seed, int tty, int final)
{
    char *text = NULL;
    if (final && o->cfg.par.comm.rank == 0) { /* a long sample on a slow device takes minutes */
        printf("sampling %d tokens (--sample-len)...\n", o->sample_len);
        fflush(stdout);
    }
    vkg_status st =
        vkg_trainer_sample(t, o->prompt, o->sample_len, o->temperature, o->top_k, seed, &text);
    if (st != VKG_OK)
        return vkg_cli_report("train", st);
    if (o->cfg.par.comm.rank == 0) {
        printf("%s--- sample ---\n", tty ? "\r\033[K" : "");
        vkg_cli_print_sample(text, o->raw);
        printf("--------------\n");
    }
    free(text);
    return 0;
}

static int checkpoint(vkg_trainer_t *t, int tty)
{
    char path[1100];
    vkg_status st = vkg_trainer_checkpoint(t, path, sizeof path);
    if (st != VKG_OK)
        return vkg_cli_report("train", st);
    if (path[0]) /* ranks other than 0 write nothing */
        printf("%scheckpoint %s\n", tty ? "\r\033[K" : "", path);
    return 0;
}

static int run(vkg_trainer_t *t, const train_opts *o)
{
    int tty = vkg_os_isatty(1) && !o->quiet;
    vkg_trainer_info info;
    vkg_trainer_get_info(t, &info);
    vkg_cli_print_run(&info, o->cfg.recompute, pp_schedules[o->cfg.par.pp_schedule]);
    if (info.resumed)
        printf("resumed at step %lld\n", info.start_step);
    if (info.resume_skipped[0])
        fprintf(stderr, "vkgpt train: warning: --resume passed over newer checkpoints: %s\n",
                info.resume_skipped);
    train_opts so = *o; /* samples need a tokenizer: without one, say so once and skip them */
    if (!info.has_tokenizer && (so.sample_every > 0 || so.sample_len > 0)) {
        printf("note: no tokenizer (no --tokenizer, no tokenizer.bin beside the data): samples are "
               "skipped; give --tokenizer to see them\n");
        so.sample_every = so.sample_len = 0;
    }
    o = &so;
    if (info.log_path[0])
        printf("log: %s\n", info.log_path);
    if (info.rank == 0)
        vkg_cli_train_ckpt_line(&o->cfg, o->cfg.ckpt_every);
    double start = vkg_cli_now_s();
    long long done = 0;
    int rc = 0, stop = 0;
    /* The step the newest checkpoint holds (a resumed run's is on disk already), so a stop right
     * after a periodic checkpoint does not write the same one again. */
    long long step = info.start_step, saved = info.resumed ? info.start_step : -1;
    while (!vkg_trainer_done(t) && !stop && rc == 0) {
        vkg_step_info s;
        vkg_status st = vkg_trainer_step(t, &s);
        if (st != VKG_OK)
            return vkg_cli_report("train", st);
        done++;
        step = s.step;
        stop = s.stop;
        if (!o->quiet)
            vkg_cli_print_step(&s, info.steps, vkg_cli_now_s() - start, done, tty);
        int streaming =
            o->cfg.par.fragments > 1 || o->cfg.par.outer_delay > 0; /* logged per step */
        if (s.outer && !streaming && o->cfg.par.comm.rank == 0 && !o->quiet) {
            char how[64] = "allreduced";
            if (o->cfg.par.outer_dtype) /* bf16, int8: each rank receives every other rank's */
                snprintf(how, sizeof how, "allgathered: each rank receives %d of them",
                         info.world_size - 1);
            printf("%souter step after step %lld: pseudo-gradient exchanged in %s, %.3f MiB per "
                   "rank, %s, %.1f ms\n",
                   tty ? "\r\033[K" : "", s.step, outer_dtypes[o->cfg.par.outer_dtype],
                   (double)s.outer_bytes / 1048576.0, how, s.outer_ms);
        }
        if (s.outer_skipped && o->cfg.par.comm.rank == 0)
            printf("%sstep %lld ends a DiLoCo round that had a skipped step: no outer step, the "
                   "global parameters stay those of the last one and every replica restarts from "
                   "them\n",
                   tty ? "\r\033[K" : "", s.step);
        if (s.overflow && o->cfg.par.comm.rank == 0 && !o->quiet)
            printf("%sstep %lld skipped: its gradient overflowed at loss scale %g (loss %g); "
                   "the next step runs at %g\n",
                   tty ? "\r\033[K" : "", s.step, (double)s.loss_scale, (double)s.loss,
                   (double)(s.loss_scale > 1.0f ? s.loss_scale / 2 : s.loss_scale));
        else if (s.skipped && o->cfg.par.comm.rank == 0)
            printf("%sstep %lld skipped: loss %g, gradient norm %g; parameters and moments "
                   "unchanged (%lld in a row, the run stops at --max-skipped %d; %lld so far)\n",
                   tty ? "\r\033[K" : "", s.step, (double)s.loss, (double)s.grad_norm,
                   s.skipped_run, o->cfg.max_skipped, s.skipped_total);
        if (s.rank_speeds[0] && o->cfg.par.comm.rank == 0 && !o->quiet)
            printf("%sstep %lld: --rank-batch auto %s %s%s%s (rows/s per rank: %s)\n",
                   tty ? "\r\033[K" : "", s.step, s.rebalanced ? "moves from" : "keeps",
                   s.rank_batches, s.rebalanced ? " to " : "",
                   s.rebalanced ? s.next_rank_batches : "", s.rank_speeds);
        if (o->sample_every > 0 && s.step % o->sample_every == 0)
            rc = show_sample(t, o, o->cfg.seed + (uint64_t)s.step, tty, 0);
        if (rc == 0 && o->cfg.ckpt_dir && o->cfg.ckpt_every > 0 &&
            s.step % o->cfg.ckpt_every == 0 && !vkg_trainer_done(t)) {
            rc = checkpoint(t, tty);
            saved = s.step;
        }
    }
    if (tty)
        printf("\n");
    if (rc)
        return rc;
    if (stop && stop_requested)
        printf("stopping on signal %d after the current step\n", (int)stop_requested);
    else if (stop)
        printf("stopping after the current step: another rank was signalled\n");
    char took[32];
    vkg_cli_duration(vkg_cli_now_s() - start, took, sizeof took);
    if (!o->quiet)
        printf("%lld step(s) in %s\n", done, took);
    if (o->cfg.ckpt_dir && step != saved && !o->quiet) {
        printf("writing the checkpoint of step %lld...\n", step);
        fflush(stdout);
    }
    if (o->cfg.ckpt_dir && step != saved && (rc = checkpoint(t, 0)) != 0)
        return rc;
    vkg_status st = vkg_trainer_write_plot(t);
    if (st != VKG_OK)
        return vkg_cli_report("train", st);
    if (info.svg_path[0])
        printf("loss curve: %s\n", info.svg_path);
    if (o->sample_len > 0 && !stop) {
        rc = show_sample(t, o, o->cfg.seed, 0, 1);
        stop = stop_requested != 0; /* a signal cut the sample short: not finished */
        if (stop && o->cfg.par.comm.rank == 0)
            printf("sample cut short by signal %d\n", (int)stop_requested);
    }
    /* Stopped by a signal, on this rank or another: not finished, whatever was saved. */
    if (rc == 0 && stop)
        rc = vkg_cli_stop_status((int)stop_requested);
    return rc;
}

/* Every option at its default (a reset callback: --resume applies run.json over these). */
static void opts_default(void *p)
{
    train_opts *o = p;
    *o = (train_opts){.cfg = vkg_train_config_default(),
                      .sample_len = 200,
                      .temperature = 0.8f,
                      .top_k = 40,
                      .loss_scale_init = 65536.0f,
                      .dp = VKG_CLI_DP_FLAGS_INIT};
    o->cfg.device = getenv("VKGPT_DEVICE");
}

static int train_main(int argc, char **argv, vkg_cli_resume *res)
{
    train_opts o;
    opts_default(&o);
    vkg_train_config *c = &o.cfg;
    const vkg_flag flags[] = {
        {"--device", VKG_FLAG_STR, &c->device, "device index or name (default: VKGPT_DEVICE)", 0, 0,
         0},
        {"--tiles", VKG_FLAG_STR, &o.tiles,
         "tiled matmul for every product with these tiles: BMxBNxBK:TMxTN[/SG][+db|+sb] or a "
         "table entry such as nvidia-large (vkgpt devices lists them; +db double-buffered, +sb "
         "single-buffered shared tiles); default: the device's",
         0, 0, 0},
        {"--data", VKG_FLAG_STR, &c->data, "training data: llm.c shards (.bin) or text; a glob", 0,
         0, 0},
        {"--val-data", VKG_FLAG_STR, &c->val_data, "validation data, as --data", 0, 0, 0},
        {"--tokenizer", VKG_FLAG_STR, &c->tokenizer,
         "byte, gpt2, an llm.c tokenizer file or a Hugging Face tokenizer (a folder with "
         "tokenizer.json, or the file) (default: the tokenizer.bin beside llm.c shards, else byte)",
         0, 0, 0},
        {"--vocab-dir", VKG_FLAG_STR, &c->vocab_dir, "folder of vocab.bpe + encoder.json (gpt2)", 0,
         0, 0},
        {"--shuffle", VKG_FLAG_INT, &c->shuffle, "1: seeded batch order per epoch", 0, 0, 1},
        {"--init", VKG_FLAG_STR, &c->init_path,
         "start from an llm.c model file or a Hugging Face directory (config.json and "
         "model.safetensors)",
         0, 0, 0},
        {"--model", VKG_FLAG_STR, &c->model,
         "new model: a preset (gpt2-124m, gpt2-350m, llama-125m, smollm2-135m, qwen2.5-0.5b, "
         "qwen3-0.6b, tinyllama-1.1b) or a Hugging Face config.json (default: GPT-2 of --layers, "
         "--heads, --channels, --ctx, --vocab). config.json's model_type gpt2, llama, mistral, "
         "qwen2 or qwen3 and its fields hidden_size, num_hidden_layers, num_attention_heads, "
         "num_key_value_heads, head_dim, intermediate_size, hidden_act (silu: SwiGLU), "
         "rms_norm_eps, rope_theta, rope_scaling (llama3), max_position_embeddings, vocab_size, "
         "tie_word_embeddings; vkgpt plan --model shows what they give",
         0, 0, 0},
        {"--layers", VKG_FLAG_INT, &c->layers, "new model: layers", 0, 1, 1000},
        {"--heads", VKG_FLAG_INT, &c->heads, "new model: attention heads", 0, 1, 1000},
        {"--channels", VKG_FLAG_INT, &c->channels, "new model: channels", 0, 1, 65536},
        {"--ctx", VKG_FLAG_INT, &c->max_seq_len, "new model: context length", 0, 1, 65536},
        {"--vocab", VKG_FLAG_INT, &c->vocab_size, "new model: vocabulary (default: tokenizer's)", 0,
         0, 1 << 24},
        {"--seed", VKG_FLAG_U64, &c->seed, "seed of initialisation, shuffling and samples", 0, 0,
         0},
        {"--batch", VKG_FLAG_INT, &c->batch, "micro-batch size B", 0, 1, 1 << 20},
        {"--seq", VKG_FLAG_INT, &c->seq, "sequence length T", 0, 1, 1 << 20},
        {"--total-batch", VKG_FLAG_LL, &c->total_batch,
         "tokens per optimizer step, a multiple of B*T (default: B*T on every data-parallel "
         "rank, no accumulation)",
         0, 1, 2147483647},
        {"--steps", VKG_FLAG_INT, &c->steps, "optimizer steps", 0, 0, 1e9},
        {"--lr", VKG_FLAG_FLOAT, &c->lr, "peak learning rate", 0, 0, 10},
        {"--warmup", VKG_FLAG_INT, &c->warmup, "warmup steps", 0, 0, 1e9},
        {"--schedule", VKG_FLAG_CHOICE, &o.schedule, "learning-rate schedule", schedules, 0, 0},
        {"--lr-min-frac", VKG_FLAG_FLOAT, &c->lr_min_frac, "final lr as a fraction of --lr", 0, 0,
         1},
        {"--weight-decay", VKG_FLAG_FLOAT, &c->weight_decay, "AdamW decay (2-D weights only)", 0, 0,
         10},
        {"--beta1", VKG_FLAG_FLOAT, &c->beta1, "AdamW beta1", 0, 0, 1},
        {"--beta2", VKG_FLAG_FLOAT, &c->beta2, "AdamW beta2", 0, 0, 1},
        {"--eps", VKG_FLAG_FLOAT, &c->eps, "AdamW epsilon", 0, 0, 1},
        {"--grad-clip", VKG_FLAG_FLOAT, &c->grad_clip, "global gradient-norm clip (0: off)", 0, 0,
         1e9},
        {"--max-skipped", VKG_FLAG_INT, &c->max_skipped,
         "stop the run after N steps in a row skipped because their loss or gradient norm was not "
         "finite (a skipped step leaves parameters and AdamW moments untouched; default 3)",
         0, 1, 1e9},
        {"--loss-scale", VKG_FLAG_CHOICE, &o.loss_scale,
         "dynamic loss scaling (as PyTorch's GradScaler): d(loss) times a power-of-two scale, "
         "divided out in the update; an overflowing gradient skips the step and halves the scale, "
         "--loss-scale-window good steps double it. With --precision bf16 and --coopmat on, "
         "emulate or auto (when on), the gradient products run on cooperative matrices too",
         loss_scales, 0, 0},
        {"--loss-scale-init", VKG_FLAG_FLOAT, &o.loss_scale_init,
         "the first loss scale, a power of two (default 65536)", 0, 1, 0x1p127},
        {"--loss-scale-window", VKG_FLAG_INT, &c->loss_scale_window,
         "steps in a row without an overflow that double the loss scale (default 2000)", 0, 1, 1e9},
        {"--eval-every", VKG_FLAG_INT, &c->eval_every, "evaluate every N steps (0: never)", 0, 0,
         1e9},
        {"--eval-batches", VKG_FLAG_INT, &c->eval_batches, "validation batches per evaluation", 0,
         1, 1e9},
        {"--sample-every", VKG_FLAG_INT, &o.sample_every, "print a sample every N steps (0: never)",
         0, 0, 1e9},
        {"--sample-len", VKG_FLAG_INT, &o.sample_len, "tokens per sample (also the final one)", 0,
         0, 1e6},
        {"--prompt", VKG_FLAG_STR, &o.prompt, "sample prompt (default: start of a document)", 0, 0,
         0},
        {"--raw", VKG_FLAG_BOOL, &o.raw,
         "print samples' bytes as they are on a terminal too (by default control bytes are shown "
         "as \\xNN there; a pipe or file always gets them raw)",
         0, 0, 0},
        {"--temperature", VKG_FLAG_FLOAT, &o.temperature, "sampling temperature (0: greedy)", 0, 0,
         100},
        {"--top-k", VKG_FLAG_INT, &o.top_k, "sample among the k likeliest tokens (0: all)", 0, 0,
         1 << 24},
        {"--recompute", VKG_FLAG_CHOICE, &c->recompute,
         "recompute activations in the backward pass to save memory (gelu: llm.c's -r 1)",
         recomputes, 0, 0},
        {"--precision", VKG_FLAG_CHOICE, &c->precision, VKG_CLI_PRECISION_HELP, vkg_cli_precisions,
         0, 0},
        {"--coopmat", VKG_FLAG_CHOICE, &c->coopmat, VKG_CLI_COOPMAT_HELP, vkg_cli_coopmats, 0, 0},
        {"--pp", VKG_FLAG_INT, &c->par.pp,
         "pipeline stages (ranks = data-parallel x pp; default: 1)", 0, 1, 64},
        {"--pp-layers", VKG_FLAG_STR, &o.pp_layers,
         "layers per stage, e.g. 3,3,2 (default: balanced by estimated compute)", 0, 0, 0},
        {"--pp-schedule", VKG_FLAG_CHOICE, &c->par.pp_schedule, "pipeline schedule", pp_schedules,
         0, 0},
        {"--zero", VKG_FLAG_INT, &c->par.zero,
         "1: ZeRO-1, AdamW's moments sharded over the data-parallel ranks (stage 1 only)", 0, 0, 1},
        {"--sync", VKG_FLAG_CHOICE, &c->par.sync,
         "how data-parallel ranks synchronise: step (gradients summed every step) or diloco "
         "(--inner-steps AdamW steps alone, then an outer Nesterov step on the averaged "
         "pseudo-gradient; not with --pp or --zero)",
         syncs, 0, 0},
        {"--inner-steps", VKG_FLAG_INT, &c->par.inner_steps,
         "diloco: optimizer steps between outer steps (H; default 100)", 0, 0, 1e9},
        {"--outer-lr", VKG_FLAG_FLOAT, &c->par.outer_lr,
         "diloco: outer learning rate (default 0.7)", 0, 0, 100},
        {"--outer-momentum", VKG_FLAG_FLOAT, &c->par.outer_momentum,
         "diloco: outer Nesterov momentum in [0, 1) (default 0.9)", 0, 0, 1},
        {"--outer-dtype", VKG_FLAG_CHOICE, &c->par.outer_dtype,
         "diloco: the pseudo-gradient's exchange (bf16, int8 and int4 allgathered and summed in "
         "fp32; int8 and int4 with an absmax scale per 256 elements)",
         outer_dtypes, 0, 0},
        {"--fragments", VKG_FLAG_INT, &c->par.fragments,
         "diloco, streaming: the model in F fragments (layers l with l % F == p) whose rounds "
         "end at staggered steps (default 1; at most --layers and --inner-steps)",
         0, 1, 1e6},
        {"--outer-delay", VKG_FLAG_INT, &c->par.outer_delay,
         "diloco: inner steps each exchange runs beside before its outer step lands (default 1 "
         "with --fragments 2 or more, else 0: blocking; at most --inner-steps; 0 with --pp)",
         0, 0, 1e9},
        {"--outer-mix", VKG_FLAG_FLOAT, &c->par.outer_mix,
         "diloco with a delay: weight of the replica's own parameters when an outer step lands, "
         "the rest the new global ones (default 0.5)",
         0, 0, 0.999999},
        {"--trace", VKG_FLAG_STR, &c->trace_path,
         "write each step's timeline (pipelines) as Chrome trace JSON (FILE.rank<N> per rank)", 0,
         0, 0},
        {"--ckpt-dir", VKG_FLAG_STR, &c->ckpt_dir,
         "checkpoint folder (also holds log.jsonl, run.json)", 0, 0, 0},
        {"--ckpt-every", VKG_FLAG_INT, &c->ckpt_every,
         "checkpoint every N steps (0: only at the end)", 0, 0, 1e9},
        {"--save-hf", VKG_FLAG_CHOICE, &c->save_hf,
         "each checkpoint also as a Hugging Face directory, step_N/hf (config.json and "
         "model.safetensors in fp32 or bf16), which transformers loads and --init starts from",
         save_hf, 0, 0},
        {"--keep", VKG_FLAG_INT, &c->keep_checkpoints,
         "newest checkpoints kept, older ones deleted (0: all)", 0, 0, 1e6},
        {"--resume", VKG_FLAG_BOOL, &c->resume,
         "continue the newest complete checkpoint, flags from CKPT_DIR/run.json (given: override)",
         0, 0, 0},
        {"--resume-fallback", VKG_FLAG_BOOL, &c->resume_fallback,
         "with --resume: a damaged newest checkpoint is set aside (renamed step_N.damaged), "
         "resume from the newest that loads",
         0, 0, 0},
        {"--log", VKG_FLAG_STR, &c->log_path, "JSON-lines log (default: CKPT_DIR/log.jsonl)", 0, 0,
         0},
        {"--validation", VKG_FLAG_BOOL, &c->validation, "Vulkan validation layer on (slow)", 0, 0,
         0},
        {"--quiet", VKG_FLAG_BOOL, &o.quiet, "no per-step lines", 0, 0, 0},
        VKG_CLI_DP_FLAGS(o.dp),
    };
    vkg_flags_result fr;
    int nflags = (int)(sizeof flags / sizeof flags[0]);
    int rc = vkg_flags_parse("train", "--data FILES [options]" VKG_CLI_EXIT_HELP, flags, nflags,
                             argc, argv, NULL, &fr);
    if (rc)
        return rc == VKG_FLAGS_HELP ? 0 : 2;
    if (c->resume && c->ckpt_dir &&
        (rc = vkg_cli_train_resume_settings(c->ckpt_dir, flags, nflags, argc, argv, opts_default,
                                            &o, &fr, res)) != 0)
        return rc;
    unsigned char skip[VKG_FLAGS_MAX];
    vkg_cli_train_runconf_skip(flags, nflags, c->init_path != NULL, c->resume ? res : NULL, &fr,
                               skip);
    if (c->ckpt_dir && !(c->run_config = res->json = vkg_cli_runconf_json(flags, nflags, skip))) {
        fprintf(stderr, "vkgpt train: out of memory\n");
        return 1;
    }
    vkg_cli_train_arch_given(flags, nflags, &fr, o.arch_given);
    char why[256];
    if (find_conflict(&o, flags, nflags, &fr, why, sizeof why)) {
        fprintf(stderr, "vkgpt train: %s%s\n", why,
                res->found ? " (run.json's flags count as given)" : "");
        return 2;
    }
    if (vkg_cli_tiles("train", o.tiles, &c->tiles) ||
        vkg_cli_coopmat_check("train", c->coopmat, c->precision))
        return 2;
    c->schedule = (vkg_schedule_kind)o.schedule;
    c->loss_scale = o.loss_scale ? o.loss_scale_init : 0.0f;
    if (o.pp_layers) {
        int n = vkg_flags_int_list(o.pp_layers, 1, 1 << 20, o.pp_layers_v, 256);
        if (n < 0) {
            fprintf(stderr,
                    "vkgpt train: --pp-layers wants layer counts separated by commas, one per "
                    "stage (e.g. 3,3,2), got '%s'\n",
                    o.pp_layers);
            return 2;
        }
        if (c->par.pp < 2 || n != c->par.pp) {
            fprintf(stderr,
                    "vkgpt train: --pp-layers lists %d stages but --pp is %d: give one count per "
                    "stage of --pp\n",
                    n, c->par.pp < 2 ? 1 : c->par.pp);
            return 2;
        }
        c->par.pp_layers = o.pp_layers_v, c->par.pp_layers_count = n;
    }
    if ((rc = vkg_cli_dp_resolve(&o.dp, c)) != 0)
        return rc;
    vkg_cli_train_resume_report(res, c->resume, c->par.comm.rank);
    if (c->par.zero && c->par.comm.world_size < 2) {
        fprintf(stderr,
                "vkgpt train: --zero 1 needs 2 or more data-parallel ranks: with one there is "
                "nothing to shard the optimizer over (--world-size N, or vkgpt launch -n N)\n");
        return 2;
    }
    if (c->par.comm.rank != 0) /* rank 0 speaks for the job; a pipeline samples on every rank */
        o.quiet = 1, o.sample_every = c->par.pp > 1 ? o.sample_every : 0,
        o.sample_len = c->par.pp > 1 ? o.sample_len : 0;
    c->stop = &stop_requested;
    if (!c->data) {
        fprintf(stderr, "vkgpt train: --data is required (llm.c shards or text files)\n");
        return 2;
    }
    if (vkg_cli_train_paths(c))
        return 2;
    if (!o.quiet) {
        printf("setting up the device, the model and the data (text is tokenized first)...\n");
        fflush(stdout);
    }
    vkg_os_on_stop(on_signal);
    vkg_trainer_t *t = NULL;
    vkg_status st = vkg_trainer_create(c, &t);
    if (st != VKG_OK) {
        rc = vkg_cli_report("train", st);
        if (st == VKG_ERR_ABORTED && stop_requested) {
            fprintf(stderr,
                    "vkgpt train: stopped on signal %d before training: nothing was saved\n",
                    (int)stop_requested);
            return vkg_cli_stop_status((int)stop_requested);
        }
        return rc;
    }
    rc = vkg_cli_train_check_resumed(t, c, o.arch_given);
    if (rc == 0)
        rc = run(t, &o);
    char first[1024];
    int msgs = vkg_trainer_destroy_report(&t, first, sizeof first);
    if (c->validation) { /* counted to the end: the device's destruction reports leaks */
        printf("validation layer: %d message(s)\n", msgs);
        if (msgs) {
            fprintf(stderr, "vkgpt train: the validation layer reported: %s\n", first);
            rc = rc ? rc : 1;
        }
    }
    return rc;
}

int vkg_cli_train(int argc, char **argv)
{
    vkg_cli_resume res = {0};
    int rc = train_main(argc, argv, &res);
    vkg_cli_runconf_free(&res.saved);
    free(res.json);
    return rc;
}
