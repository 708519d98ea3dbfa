/* The trainer: builds device, model, data and log from a vkg_train_config, runs optimizer steps
 * (accumulating micro-batches), evaluates, samples and writes/resumes checkpoints. It does not
 * print and does not install signal handlers (the CLI does both). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os/clock.h"
#include "base/error.h"
#include "ops/ops.h"
#include "parallel/job.h"
#include "train/trainer_internal.h"
#include "vkgpt/io.h"

vkg_train_config vkg_train_config_default(void)
{
    vkg_train_config c = {0};
    c.layers = 4, c.heads = 4, c.channels = 128, c.max_seq_len = 64;
    c.seed = 1337;
    c.coopmat = VKG_COOPMAT_AUTO;
    c.batch = 8, c.seq = 64;
    c.steps = 1000;
    c.lr = 6e-4f, c.lr_min_frac = 0.1f, c.warmup = 0, c.schedule = VKG_SCHEDULE_COSINE;
    c.weight_decay = 0.1f, c.beta1 = 0.9f, c.beta2 = 0.95f, c.eps = 1e-8f, c.grad_clip = 1.0f;
    c.max_skipped = 3;
    c.par.inner_steps = 100, c.par.outer_lr = 0.7f,
    c.par.outer_momentum = 0.9f; /* DiLoCo's paper's */
    c.par.fragments = 1, c.par.outer_delay = -1, c.par.outer_mix = 0.5f;
    c.eval_every = 0, c.eval_batches = 8;
    c.keep_checkpoints = 3;
    vkg_comm_config_default(&c.par.comm);
    return c;
}

/* Record the trainer's first failure: destroy tells the other ranks (vkg_comm_abort) with its
 * message, so that they fail naming this rank and why instead of waiting for it. Returns st. */
static vkg_status failed(vkg_trainer_t *t, vkg_status st)
{
    if (st != VKG_OK && !t->failed) {
        t->failed = 1;
        snprintf(t->fail_msg, sizeof t->fail_msg, "%s", vkg_error_message());
    }
    return st;
}

/* Join the job: the parallel strategy (from the config or the launcher's environment). */
static vkg_status join(vkg_trainer_t *t)
{
    const vkg_train_config *c = &t->cfg;
    vkg_strategy_config sc = {.par = c->par, .batch = c->batch};
    if (c->comm_from_env) {
        VKG_TRY(vkg_comm_config_from_env(&sc.par.comm, NULL));
        sc.par.comm.ctx = c->par.comm.ctx;
    }
    return vkg_strategy_create(&sc, &t->par);
}

/* Batch sizes, schedule and the hyperparameters a checkpoint records. */
static vkg_status plan_steps(vkg_trainer_t *t)
{
    const vkg_train_config *c = &t->cfg;
    VKG_CHECK(c->batch > 0 && c->seq > 0 && c->seq <= t->mcfg.max_seq_len, VKG_ERR_INVALID_ARG,
              "--batch must be > 0 and --seq in [1, %d] (the model's context), got %d and %d",
              t->mcfg.max_seq_len, c->batch, c->seq);
    /* With several ranks a micro-step covers the global micro-batch: every rank's rows. */
    int world = vkg_strategy_world(t->par);
    long long micro = (long long)vkg_strategy_global_batch(t->par) * c->seq;
    long long total = c->total_batch > 0 ? c->total_batch : micro;
    VKG_CHECK(total % micro == 0, VKG_ERR_INVALID_ARG,
              "--total-batch %lld is not a multiple of batch x seq = %lld tokens%s", total, micro,
              world > 1 ? " (summed over the ranks)" : "");
    VKG_CHECK(c->max_skipped >= 1, VKG_ERR_INVALID_ARG,
              "--max-skipped must be >= 1 (consecutive skipped steps that stop the run), got %d",
              c->max_skipped);
    t->B = vkg_strategy_rank_batch(t->par), t->T = c->seq, t->accum_steps = (int)(total / micro);
    t->sched = vkg_schedule_default();
    t->sched.kind = c->schedule;
    VKG_CHECK(c->lr_scale == VKG_LR_SCALE_NONE || c->base_batch > 0, VKG_ERR_INVALID_ARG,
              "--lr-scale needs --base-batch (the total batch --lr was tuned for)");
    t->sched.lr = c->lr * vkg_lr_scale_factor(c->lr_scale, total, c->base_batch);
    t->sched.lr_min_frac = c->lr_min_frac, t->sched.warmup = c->warmup;
    t->sched.total_steps = c->steps > 0 ? c->steps : 1;
    VKG_TRY(vkg_schedule_validate(&t->sched));
    t->hp = vkg_train_hparams_default();
    t->hp.batch_size = vkg_strategy_global_batch(t->par), t->hp.seq_len = c->seq;
    t->hp.total_batch = (uint64_t)total, t->hp.world_size = world;
    t->hp.shuffle = c->shuffle, t->hp.seed = c->seed;
    t->hp.schedule = t->sched;
    t->hp.weight_decay = c->weight_decay, t->hp.beta1 = c->beta1, t->hp.beta2 = c->beta2;
    t->hp.eps = c->eps, t->hp.grad_clip = c->grad_clip;
    return VKG_OK;
}

#define SCALE_MAX 0x1p127f /* the largest power of two a float holds */

/* Dynamic loss scaling's settings, and the gradient products on cooperative matrices with it
 * (before the model's lists are recorded). */
static vkg_status plan_loss_scale(vkg_trainer_t *t)
{
    const vkg_train_config *c = &t->cfg;
    int e = 0;
    VKG_CHECK(c->loss_scale == 0.0f || (c->loss_scale >= 1.0f && c->loss_scale <= SCALE_MAX &&
                                        frexpf(c->loss_scale, &e) == 0.5f),
              VKG_ERR_INVALID_ARG,
              "--loss-scale-init must be a power of two from 1 to 2^127 (the scale is halved and "
              "doubled exactly), got %g",
              (double)c->loss_scale);
    VKG_CHECK(c->loss_scale_window >= 0, VKG_ERR_INVALID_ARG,
              "--loss-scale-window must be >= 0 (0: 2000 steps), got %d", c->loss_scale_window);
    t->scale = c->loss_scale, t->scale_good = 0;
    vkg_device_tuning tu = vkg_device_tuning_get(t->dev);
    if (c->loss_scale == 0.0f || !tu.coopmat)
        return VKG_OK;
    tu.coopmat_grads = 1;
    VKG_TRY(vkg_device_tuning_set(t->dev, &tu));
    size_t n = strlen(t->coopmat);
    snprintf(t->coopmat + n, sizeof t->coopmat - n,
             "; the gradient products too, under dynamic loss scaling");
    return VKG_OK;
}

/* After a step under dynamic loss scaling: an overflow halves the scale (not below 1); a run of
 * loss_scale_window applied steps doubles it. */
static void loss_scale_update(vkg_trainer_t *t, int skipped, int overflow)
{
    long long window = t->cfg.loss_scale_window > 0 ? t->cfg.loss_scale_window : 2000;
    if (skipped) {
        if (overflow && t->scale > 1.0f)
            t->scale *= 0.5f;
        t->scale_good = 0;
    } else if (++t->scale_good >= window) {
        if (t->scale < SCALE_MAX)
            t->scale *= 2.0f;
        t->scale_good = 0;
    }
}

/* The data is looked for first: a mistyped path is reported as such, not as whatever fails
 * without it (a vocabulary size a tokenizer beside the data would have given). */
static vkg_status check_data_paths(const vkg_train_config *c)
{
    vkg_status st = c->data ? vkg_data_check_path(c->data) : VKG_OK;
    if (st != VKG_OK)
        return vkg__error_wrap(st, "--data");
    st = c->val_data ? vkg_data_check_path(c->val_data) : VKG_OK;
    return st == VKG_OK ? VKG_OK : vkg__error_wrap(st, "--val-data");
}

/* --coopmat auto with several ranks: every rank takes rank 0's choice, so that all of them run
 * the same products (the race's timings may differ from rank to rank). A rank that cannot follow
 * rank 0 onto the kernel (its device lacks it, or its results failed the self-check: usable = 0)
 * fails, naming why; one that only lost its own race follows. tu: the tuning as the device
 * opened (the kernel's configuration). why gets the reason when rank 0's choice turned it off. */
static vkg_status agree_coopmat(vkg_trainer_t *t, vkg_device_tuning tu, int usable, char *why,
                                size_t cap)
{
    int32_t on = vkg_device_tuning_get(t->dev).coopmat != 0;
    VKG_TRY(vkg_strategy_broadcast(t->par, &on, sizeof on));
    int have = vkg_device_tuning_get(t->dev).coopmat != 0;
    if (on == have)
        return VKG_OK;
    VKG_CHECK(!on || usable, VKG_ERR_UNSUPPORTED,
              "--coopmat auto: rank 0 runs the bf16 products on cooperative matrices, which this "
              "rank's device cannot (%s); pass --coopmat off",
              why[0] ? why : vkg_device_coopmat_note(t->dev));
    vkg_device_tuning now = vkg_device_tuning_get(t->dev);
    now.coopmat = on ? tu.coopmat : 0;
    if (!on)
        snprintf(why, cap, "rank 0 left them off, so that every rank runs the same products");
    return vkg_device_tuning_set(t->dev, &now);
}

/* Under bf16, whether the products run on cooperative matrices, said in t->coopmat: asked for
 * (on, emulate), found, self-checked and faster than the other kernel (auto; a device whose
 * results are wrong, or whose tensor-core kernel is the slower, gets it off), or off and why. */
static vkg_status check_coopmat(vkg_trainer_t *t, vkg_coopmat_mode mode)
{
    vkg_device_tuning tu = vkg_device_tuning_get(t->dev);
    char why[320] = "";
    double ms[2];
    if (mode == VKG_COOPMAT_AUTO && tu.coopmat) {
        VKG_TRY(vkg_op_coopmat_selfcheck(t->dev, 0.0f, why, sizeof why));
        int usable = vkg_device_tuning_get(t->dev).coopmat != 0;
        long long rows = (long long)t->cfg.batch * t->cfg.seq; /* the fc product's, capped */
        if (usable)
            VKG_TRY(vkg_op_coopmat_race(t->dev,
                                        (uint32_t)(rows < 64     ? 64
                                                   : rows < 4096 ? rows
                                                                 : 4096),
                                        why, sizeof why, ms));
        VKG_TRY(agree_coopmat(t, tu, usable, why, sizeof why));
    } else if (mode == VKG_COOPMAT_AUTO) {
        VKG_TRY(agree_coopmat(t, tu, 0, why, sizeof why));
        if (!why[0])
            snprintf(why, sizeof why, "%s", vkg_device_coopmat_note(t->dev));
    } else {
        snprintf(why, sizeof why, "--coopmat off");
    }
    if (vkg_device_tuning_get(t->dev).coopmat)
        snprintf(t->coopmat, sizeof t->coopmat, "%s %ux%ux%u f16 fragments, f32 sums (%s)",
                 tu.coopmat == 2 ? "emulated" : "on,", tu.coopmat_m, tu.coopmat_n, tu.coopmat_k,
                 mode == VKG_COOPMAT_AUTO ? "auto: the self-check passed, and it was the faster"
                                          : "asked for");
    else
        snprintf(t->coopmat, sizeof t->coopmat, "off (%s)", why);
    return VKG_OK;
}

/* DiLoCo's outer state from a resumed checkpoint's outer.bin (rank 0's, every rank told the
 * outcome): under DiLoCo it must hold this job's replicas (a checkpoint without one starts the
 * outer optimizer from the loaded parameters); without DiLoCo a checkpoint holding one is
 * refused, since the other replicas' state would be lost. */
static vkg_status resume_outer(vkg_trainer_t *t, const vkg_checkpoint *ck)
{
    size_t want = vkg_strategy_outer_state_count(t->par);
    int32_t has = t->resumed && ck->outer != NULL; /* rank 0 knows */
    VKG_TRY(vkg_strategy_broadcast(t->par, &has, sizeof has));
    vkg_status st = VKG_OK;
    if (vkg_strategy_rank(t->par) == 0 && has) {
        size_t n = vkg_model_num_params(&t->mcfg);
        if (!want)
            st = VKG_FAIL(VKG_ERR_MISMATCH,
                          "--resume: the checkpoint holds DiLoCo's outer state (outer.bin, %zu "
                          "floats per parameter): resume it with --sync diloco on as many ranks",
                          ck->outer_count / n);
        else if (ck->outer_count != want)
            st = VKG_FAIL(VKG_ERR_MISMATCH,
                          "--resume: the checkpoint's outer state (outer.bin) holds %zu floats per "
                          "parameter, this job needs %zu: DiLoCo resumes on the same number of "
                          "ranks, with a delayed exchange (--outer-delay 1 or more) or without "
                          "one alike",
                          ck->outer_count / n, want / n);
    }
    VKG_TRY(vkg_strategy_rank0_outcome(t->par, st, "resuming DiLoCo's outer state"));
    return has ? vkg_strategy_outer_state_load(t->par, ck->state.step, ck->outer) : VKG_OK;
}

static vkg_status setup(vkg_trainer_t *t)
{
    const vkg_train_config *c = &t->cfg;
    vkg_checkpoint ck = {0};
    float *params = NULL;
    vkg_status st = VKG_OK;
    vkg_device_opts dopts = vkg_device_opts_default();
    dopts.select = c->device;
    dopts.validation = c->validation;
    dopts.force_staging = c->force_staging;
    dopts.memory_limit = c->memory_limit;
    dopts.max_allocation = c->max_allocation;
    /* auto: only bf16 runs have products for the kernel; fp32 runs open the device without it */
    dopts.coopmat = c->coopmat == VKG_COOPMAT_AUTO && c->precision != VKG_PRECISION_BF16
                        ? VKG_COOPMAT_OFF
                        : (vkg_coopmat_mode)c->coopmat;
    dopts.profiling = c->profile;
    VKG_TRY(check_data_paths(c));
    VKG_TRY(join(t));
    if (t->ckpt_dir[0] && vkg_strategy_rank(t->par) == 0) /* before anything is written there */
        VKG_TRY(vkg_checkpoint_lock(t->ckpt_dir, &t->lock));
    VKG_TRY(vkg_device_create(&dopts, &t->dev));
    if (c->tiles.bm) /* --tiles: checked against this device's limits */
        VKG_TRY(vkg_device_force_tiles(t->dev, &c->tiles));
    if (c->precision == VKG_PRECISION_BF16)
        VKG_TRY(check_coopmat(t, dopts.coopmat));
    VKG_TRY(vkg__train_open_tokenizer(t));
    VKG_TRY_GOTO(st, vkg__train_load_model(t, &params, &ck), done);
    VKG_TRY_GOTO(st, vkg__train_share_start(t, &params, &ck), done);
    VKG_TRY_GOTO(st, plan_steps(t), done);
    VKG_TRY_GOTO(st, plan_loss_scale(t), done);
    vkg_rng_seed(&t->rng, c->seed ^ 0x5A3D1EULL);

    vkg_strategy_model sm = {
        .dev = t->dev,
        .cfg = t->mcfg,
        .T = t->T,
        .accum_steps = t->accum_steps,
        .recompute = c->recompute,
        .precision = c->precision,
        .adamw = {
            .beta1 = c->beta1, .beta2 = c->beta2, .eps = c->eps, .weight_decay = c->weight_decay}};
    VKG_TRY_GOTO(st, vkg_strategy_build(t->par, &sm), done);
    VKG_TRY_GOTO(st, vkg__train_open_data(t), done);
    VKG_TRY_GOTO(st, vkg__train_agree(t, &ck), done);
    VKG_TRY_GOTO(
        st, vkg_strategy_load(t->par, params, t->resumed ? ck.m : NULL, t->resumed ? ck.v : NULL),
        done);
    VKG_TRY_GOTO(st, resume_outer(t, &ck), done);
    if (t->resumed) {
        VKG_TRY_GOTO(st, vkg__train_resume_data(t, &ck.state), done);
        t->step = (long long)ck.state.step;
        t->tokens = ck.state.tokens;
        if (c->loss_scale > 0.0f && ck.state.loss_scale >= 1.0f &&
            ck.state.loss_scale <= SCALE_MAX) /* else the checkpoint ran without it */
            t->scale = ck.state.loss_scale, t->scale_good = (long long)ck.state.loss_scale_good;
        t->rng.state = ck.state.rng[0];
    }
    t->start_step = t->step;
    VKG_TRY_GOTO(st, vkg__train_balance_setup(t), done);
    if ((c->log_path || t->ckpt_dir[0]) && vkg_strategy_rank(t->par) == 0) {
        char log[1100];
        snprintf(log, sizeof log, "%s/log.jsonl", t->ckpt_dir);
        vkg_metrics_config mc = vkg_metrics_config_default();
        mc.log_path = c->log_path ? c->log_path : log;
        mc.resume = t->resumed;
        mc.first_step = t->step + 1;
        VKG_TRY_GOTO(st, vkg_metrics_create(&mc, &t->metrics), done);
    }
    if (c->trace_path)
        VKG_TRY_GOTO(st,
                     vkg_trace_open(c->trace_path, vkg_strategy_rank(t->par),
                                    vkg_strategy_world(t->par), &t->trace),
                     done);
    if (t->ckpt_dir[0] && t->tok && vkg_strategy_rank(t->par) == 0) {
        char path[1100];
        snprintf(path, sizeof path, "%s/tokenizer.bin", t->ckpt_dir);
        VKG_TRY_GOTO(st, vkg_tokenizer_save(t->tok, path), done);
    }
done:
    free(params);
    vkg_checkpoint_deinit(&ck);
    return st;
}

int vkg_train_dp_ranks(const vkg_train_config *cfg)
{
    vkg_job_layout lay;
    if (vkg_job_layout_of(cfg->par.comm.world_size, cfg->par.comm.rank, cfg->par.pp, &lay) !=
        VKG_OK) {
        vkg_error_clear();
        return 0;
    }
    return lay.dp;
}

vkg_status vkg_trainer_create(const vkg_train_config *cfg, vkg_trainer_t **out)
{
    vkg_trainer_t *t = calloc(1, sizeof *t);
    VKG_CHECK(t, VKG_ERR_NOMEM, "no memory for the trainer");
    t->cfg = *cfg;
    if (cfg->ckpt_dir && cfg->run_config && !(t->run_config = strdup(cfg->run_config))) {
        vkg_trainer_destroy(&t);
        return VKG_FAIL(VKG_ERR_NOMEM, "no memory for the run's settings");
    }
    if (cfg->ckpt_dir) {
        snprintf(t->ckpt_dir, sizeof t->ckpt_dir, "%s", cfg->ckpt_dir);
        vkg_status st = vkg_io_make_dirs(cfg->ckpt_dir);
        if (st != VKG_OK) {
            vkg__error_wrap(st, "--ckpt-dir");
            vkg_trainer_destroy(&t);
            return st;
        }
    }
    /* Strings in cfg are used only during create, except those copied above. */
    vkg_status st = setup(t);
    t->cfg.init_path = t->cfg.data = t->cfg.val_data = NULL;
    t->cfg.tokenizer = t->cfg.vocab_dir = t->cfg.device = t->cfg.log_path = NULL;
    t->cfg.ckpt_dir = NULL, t->cfg.trace_path = NULL, t->cfg.run_config = NULL;
    if (st != VKG_OK) {
        char msg[sizeof t->fail_msg]; /* destroying may record messages of its own */
        failed(t, st);
        snprintf(msg, sizeof msg, "%s", t->fail_msg);
        vkg_trainer_destroy(&t);
        vkg__error_restore(msg);
        return st;
    }
    *out = t;
    return VKG_OK;
}

void vkg_trainer_destroy(vkg_trainer_t **pt)
{
    vkg_trainer_destroy_report(pt, NULL, 0);
}

int vkg_trainer_destroy_report(vkg_trainer_t **pt, char *first, size_t cap)
{
    vkg_trainer_t *t = pt ? *pt : NULL;
    if (first && cap)
        first[0] = '\0';
    if (!t)
        return 0;
    vkg_trace_close(&t->trace); /* a write error was reported by the step that met it */
    vkg_metrics_destroy(&t->metrics);
    vkg_data_destroy(&t->val);
    vkg_data_destroy(&t->train);
    vkg_strategy_destroy(&t->par, t->failed ? t->fail_msg : NULL);
    vkg_tokenizer_destroy(&t->tok);
    free(t->run_config);
    int n = vkg_device_destroy_report(&t->dev, first, cap);
    vkg_checkpoint_unlock(&t->lock); /* last: the log is closed */
    free(t);
    *pt = NULL;
    return n;
}

void vkg_trainer_get_info(const vkg_trainer_t *t, vkg_trainer_info *info)
{
    memset(info, 0, sizeof *info);
    snprintf(info->device, sizeof info->device, "%s", vkg_device_get_info(t->dev)->name);
    snprintf(info->coopmat, sizeof info->coopmat, "%s", t->coopmat);
    info->layers = t->mcfg.num_layers, info->heads = t->mcfg.num_heads;
    info->channels = t->mcfg.channels, info->max_seq_len = t->mcfg.max_seq_len;
    info->vocab_size = t->mcfg.vocab_size, info->padded_vocab_size = t->mcfg.padded_vocab_size;
    vkg_model_describe(&t->mcfg, info->family, sizeof info->family);
    info->num_params = vkg_model_num_params(&t->mcfg);
    info->device_bytes = vkg_strategy_device_bytes(t->par);
    info->batch = t->B, info->seq = t->T, info->accum_steps = t->accum_steps;
    info->total_batch = (long long)t->hp.total_batch;
    info->start_step = t->start_step, info->steps = t->cfg.steps, info->resumed = t->resumed;
    snprintf(info->resume_skipped, sizeof info->resume_skipped, "%s", t->resume_skipped);
    info->has_tokenizer = t->tok != NULL;
    const char *first = "";
    info->validation_messages = vkg_device_validation_messages(t->dev, &first);
    snprintf(info->validation_first, sizeof info->validation_first, "%.500s", first);
    if (t->metrics) {
        snprintf(info->log_path, sizeof info->log_path, "%s", vkg_metrics_log_path(t->metrics));
        snprintf(info->svg_path, sizeof info->svg_path, "%s", vkg_metrics_svg_path(t->metrics));
    }
    info->rank = vkg_strategy_rank(t->par), info->world_size = vkg_strategy_world(t->par);
    info->global_batch = vkg_strategy_global_batch(t->par), info->lr = t->sched.lr;
    snprintf(info->rank_batches, sizeof info->rank_batches, "%s", vkg_strategy_batch_list(t->par));
    info->rebalance_every = t->bal.on ? t->cfg.rebalance_every : 0;
    snprintf(info->comm_path, sizeof info->comm_path, "%s", vkg_strategy_comm_path(t->par));
    snprintf(info->bucket_path, sizeof info->bucket_path, "%s", vkg_strategy_bucket_path(t->par));
    snprintf(info->grad_exchange, sizeof info->grad_exchange, "%s",
             vkg_strategy_grad_exchange(t->par));
    vkg_strategy_layout(t->par, &info->pp, &info->dp);
    vkg_strategy_stage(t->par, &info->stage, &info->first_layer, &info->last_layer);
    info->activation_bytes = vkg_strategy_activation_bytes(t->par);
    vkg_stage_memory mem;
    vkg_strategy_memory(t->par, &mem);
    info->param_bytes = mem.model.params, info->grad_bytes = mem.model.grads;
    info->param_copy_bytes = mem.model.param_copy;
    info->shared_bytes = mem.model.shared, info->host_bytes = mem.host;
    info->allocations = mem.model.allocations;
    info->max_allocation = vkg_device_get_info(t->dev)->max_allocation_bytes;
    info->zero = vkg_strategy_zero(t->par);
    info->optimizer_bytes = vkg_strategy_optimizer_bytes(t->par);
    vkg_strategy_moment_range(t->par, &info->moment_first, &info->moment_count);
    snprintf(info->sync, sizeof info->sync, "%s", vkg_strategy_outer_describe(t->par));
}

int vkg_trainer_done(const vkg_trainer_t *t)
{
    return t->step >= t->cfg.steps;
}

static vkg_status eval(vkg_trainer_t *t, float *loss)
{
    VKG_CHECK(t->val, VKG_ERR_STATE, "no validation data (--val-data)");
    int n = t->cfg.eval_batches > 0 ? t->cfg.eval_batches : 1;
    return vkg_strategy_eval(t->par, t->val, n, loss);
}

vkg_status vkg_trainer_eval(vkg_trainer_t *t, float *loss)
{
    return failed(t, eval(t, loss));
}

static vkg_status step(vkg_trainer_t *t, vkg_step_info *info)
{
    VKG_CHECK(t->train, VKG_ERR_STATE, "no training data (--data)");
    VKG_CHECK(!vkg_trainer_done(t), VKG_ERR_STATE, "all %d steps have run", t->cfg.steps);
    double t0 = vkg_os_now_ms();
    float lr = vkg_schedule_lr(&t->sched, t->step);
    vkg_strategy_step_in in = {.lr = lr,
                               .t = (uint32_t)(t->step + 1),
                               .grad_clip = t->cfg.grad_clip,
                               .stop = t->cfg.stop && *t->cfg.stop,
                               .loss_scale = t->scale};
    vkg_strategy_step_out out;
    vkg__train_balance_delay(t);
    VKG_TRY(vkg_strategy_step(t->par, t->train, &in, &out));
    float norm = out.grad_norm;
    t->step++;
    t->tokens += t->hp.total_batch;
    double ms = vkg_os_now_ms() - t0;
    memset(info, 0, sizeof *info);
    info->step = t->step, info->loss = out.loss, info->lr = lr, info->grad_norm = norm;
    info->ms = ms, info->tokens = t->tokens, info->stop = out.stop;
    info->comm_ms = out.comm_ms, info->exposed_comm_ms = out.exposed_comm_ms;
    info->outer = out.outer, info->outer_skipped = out.outer_skipped;
    info->outer_bytes = out.outer_bytes, info->outer_ms = out.outer_ms;
    info->comm_bytes = out.comm_bytes;
    /* An overflow under loss scaling is expected now and then: the scale halves and the step is
     * not counted toward --max-skipped, until the scale is 1. */
    int overflow = t->scale > 0.0f && out.skipped && isfinite(out.loss);
    int forgiven = overflow && t->scale > 1.0f;
    info->loss_scale = t->scale, info->overflow = overflow;
    if (t->scale > 0.0f)
        loss_scale_update(t, out.skipped, overflow);
    t->skipped += out.skipped;
    t->skipped_run = !out.skipped ? 0 : forgiven ? t->skipped_run : t->skipped_run + 1;
    if (out.outer_skipped)
        t->outer_reset = t->step;
    info->skipped = out.skipped;
    info->skipped_total = t->skipped, info->skipped_run = t->skipped_run;
    if (t->trace) {
        const vkg_span *spans;
        int n = vkg_strategy_spans(t->par, &spans);
        VKG_TRY(vkg_trace_write(t->trace, t->step, spans, n));
    }
    info->tokens_per_s = ms > 0 ? (double)t->hp.total_batch / (ms / 1e3) : 0.0;
    int eval_due = t->val && t->cfg.eval_every > 0 &&
                   (t->step % t->cfg.eval_every == 0 || t->step == t->cfg.steps);
    if (eval_due) {
        VKG_TRY(eval(t, &info->eval_loss));
        info->has_eval = 1;
    }
    /* after the evaluation, which runs with the split of the step it follows */
    VKG_TRY(vkg__train_balance_step(t, ms, out.exposed_comm_ms, info));
    if (t->metrics) {
        vkg_metrics_row row = {.step = t->step,
                               .loss = info->loss,
                               .lr = lr,
                               .grad_norm = norm,
                               .tokens = t->tokens,
                               .tokens_per_s = (float)info->tokens_per_s,
                               .ms = (float)ms,
                               .has_eval = info->has_eval,
                               .eval_loss = info->eval_loss,
                               .skipped = out.skipped,
                               .rank_batch = t->bal.on ? info->rank_batches : NULL,
                               .rebalance = info->rank_speeds[0] ? info->next_rank_batches : NULL,
                               .rank_speeds = info->rank_speeds,
                               .outer_bytes = out.outer_bytes,
                               .comm = vkg_strategy_world(t->par) > 1,
                               .comm_bytes = out.comm_bytes,
                               .comm_ms = (float)out.comm_ms,
                               .exposed_comm_ms = (float)out.exposed_comm_ms,
                               .loss_scale = info->loss_scale,
                               .overflow = overflow};
        VKG_TRY(vkg_metrics_log(t->metrics, &row));
    }
    long long last = t->step - t->skipped_run;
    char whose[160];
    if (t->outer_reset > last) /* a DiLoCo round ended inside the run without its outer step */
        snprintf(whose, sizeof whose,
                 "the global ones of the last outer step, which every replica took at step %lld",
                 t->outer_reset);
    else
        snprintf(whose, sizeof whose, "those of step %lld", last);
    VKG_CHECK(t->skipped_run < t->cfg.max_skipped, VKG_ERR_ABORTED,
              "step %lld: the loss (%g) or the gradient norm (%g) was not finite in %lld steps in "
              "a row (--max-skipped %d), none of them applied: the parameters are %s; lower --lr, "
              "check the data, or resume from an earlier checkpoint",
              t->step, (double)info->loss, (double)norm, t->skipped_run, t->cfg.max_skipped, whose);
    return VKG_OK;
}

vkg_status vkg_trainer_step(vkg_trainer_t *t, vkg_step_info *info)
{
    return failed(t, step(t, info));
}

vkg_status vkg_trainer_sample(vkg_trainer_t *t, const char *prompt, int len, float temperature,
                              int top_k, uint64_t seed, char **text)
{
    vkg_rng r;
    vkg_rng_seed(&r, seed);
    int pp, dp;
    vkg_strategy_layout(t->par, &pp, &dp);
    /* A pipeline's ranks run every forward together: a rank that stopped alone would leave the
     * others waiting, so only ranks that sample alone stop early. */
    const volatile sig_atomic_t *stop = pp == 1 ? t->cfg.stop : NULL;
    return failed(t, vkg__generate(t->par, &t->mcfg, t->B, t->T, t->tok, prompt, len, temperature,
                                   top_k, &r, stop, text));
}

vkg_status vkg_trainer_write_plot(vkg_trainer_t *t)
{
    return failed(t, t->metrics ? vkg_metrics_write_svg(t->metrics) : VKG_OK);
}

vkg_status vkg_trainer_get_params(vkg_trainer_t *t, float *params)
{
    return failed(t, vkg_strategy_gather(t->par, params, NULL, NULL));
}

int vkg_trainer_spans(const vkg_trainer_t *t, const vkg_span **spans)
{
    return vkg_strategy_spans(t->par, spans);
}

static vkg_status write_text(FILE *f, void *ctx)
{
    const char *text = ctx;
    return vkg_io_write_bytes(f, text, strlen(text));
}

/* ckpt_dir/run.json from the run's settings, once per trainer (rank 0), before its first
 * checkpoint is marked complete. */
static vkg_status write_run_config(vkg_trainer_t *t)
{
    if (!t->run_config)
        return VKG_OK;
    char path[1100];
    snprintf(path, sizeof path, "%s/run.json", t->ckpt_dir);
    VKG_TRY(vkg_io_write_atomic(path, write_text, t->run_config));
    free(t->run_config);
    t->run_config = NULL;
    return VKG_OK;
}

/* vkg_trainer_checkpoint: every rank hands its part of the model and optimizer state to rank 0
 * (a pipeline's stages each hold some layers), which writes, prunes and plots. */
static vkg_status write_checkpoint(vkg_trainer_t *t, char *path_out, size_t cap)
{
    int rank0 = vkg_strategy_rank(t->par) == 0;
    size_t n = rank0 ? vkg_model_num_params(&t->mcfg) : 0;
    float *p = rank0 ? malloc(n * sizeof *p) : NULL, *m = rank0 ? malloc(n * sizeof *m) : NULL;
    float *v = rank0 ? malloc(n * sizeof *v) : NULL;
    size_t nouter = vkg_strategy_outer_state_count(t->par); /* DiLoCo's, else 0 */
    float *outer = rank0 && nouter ? malloc(nouter * sizeof *outer) : NULL;
    vkg_status st = vkg_strategy_gather(t->par, p, m, v);
    if (st == VKG_OK && nouter && (!rank0 || outer))
        st = vkg_strategy_outer_state_gather(t->par, (uint64_t)t->step, outer);
    if (!rank0)
        return st;
    if (st == VKG_OK && !(p && m && v && (outer || !nouter)))
        st = VKG_FAIL(VKG_ERR_NOMEM, "no memory for a checkpoint");
    if (st != VKG_OK)
        goto done;
    vkg_checkpoint_state cs = {.hp = t->hp,
                               .step = (uint64_t)t->step,
                               .tokens = t->tokens,
                               .loss_scale = t->scale,
                               .loss_scale_good = (uint64_t)t->scale_good};
    cs.rng[0] = t->rng.state;
    if (t->train)
        vkg_data_position(t->train, &cs.data_pos);
    char path[1100];
    VKG_TRY_GOTO(st, write_run_config(t), done);
    VKG_TRY_GOTO(st,
                 vkg_checkpoint_write_hf(t->ckpt_dir, &t->mcfg, p, m, v, outer, nouter,
                                         t->cfg.save_hf, &cs, path, sizeof path),
                 done);
    if (path_out)
        snprintf(path_out, cap, "%s", path);
    int removed = 0;
    if (t->cfg.keep_checkpoints > 0)
        VKG_TRY_GOTO(
            st,
            vkg_checkpoint_prune(t->ckpt_dir, t->cfg.keep_checkpoints, (uint64_t)t->step, &removed),
            done);
    if (t->metrics)
        VKG_TRY_GOTO(st, vkg_metrics_write_svg(t->metrics), done);
done:
    free(p);
    free(m);
    free(v);
    free(outer);
    return st;
}

vkg_status vkg_trainer_checkpoint(vkg_trainer_t *t, char *path_out, size_t cap)
{
    VKG_CHECK(t->ckpt_dir[0], VKG_ERR_STATE, "no checkpoint folder (--ckpt-dir)");
    if (path_out && cap)
        path_out[0] = '\0';
    vkg_status st = write_checkpoint(t, path_out, cap);
    char what[64]; /* rank 0 writes for everyone, and everyone learns whether it could */
    snprintf(what, sizeof what, "writing the checkpoint of step %lld", t->step);
    return failed(t, vkg_strategy_rank0_outcome(t->par, st, what));
}
