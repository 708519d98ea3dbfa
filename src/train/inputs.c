/* The trainer's inputs: the tokenizer (named, or the one `vkgpt prepare` wrote beside the shards),
 * the starting model (new from the seed, read from --init, or resumed from --ckpt-dir, and checked
 * to hold only finite numbers) and the training and validation loaders. Not here: what the ranks
 * share and check of these (agree.c), the device, the strategy, the log (trainer.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "os/file.h"
#include "os/glob.h"
#include "train/trainer_internal.h"
#include "vkgpt/io.h"

static int is_shard_path(const char *p)
{
    size_t n = strlen(p);
    return n >= 4 && !strcmp(p + n - 4, ".bin");
}

vkg_status vkg__train_open_tokenizer(vkg_trainer_t *t)
{
    const vkg_train_config *c = &t->cfg;
    if (c->tokenizer && !strcmp(c->tokenizer, "gpt2")) {
        VKG_CHECK(c->vocab_dir, VKG_ERR_INVALID_ARG,
                  "--tokenizer gpt2 needs --vocab-dir (the folder of vocab.bpe and encoder.json)");
        return vkg_tokenizer_create_gpt2(c->vocab_dir, &t->tok);
    }
    if (c->tokenizer && !strcmp(c->tokenizer, "byte"))
        return vkg_tokenizer_create_byte(&t->tok);
    if (c->tokenizer)
        return vkg_tokenizer_load(c->tokenizer, &t->tok);
    if (!c->data || !is_shard_path(c->data))
        return vkg_tokenizer_create_byte(&t->tok);
    /* Shards: the tokenizer file `vkgpt prepare` writes beside them, when there is one. */
    char path[1100];
    const char *slash = strrchr(c->data, '/');
    int dirlen = slash ? (int)(slash - c->data) : 0;
    if (slash == c->data)
        dirlen = 1; /* a shard in / */
    snprintf(path, sizeof path, "%.*s/tokenizer.bin", slash ? dirlen : 1, slash ? c->data : ".");
    if (vkg_os_exists(path) == 1)
        return vkg_tokenizer_load(path, &t->tok);
    return VKG_OK;
}

/* The name of a step_<n> directory under dir that holds a DONE marker, or "" when none does. */
static void find_marked_complete(const char *dir, char *name, size_t cap)
{
    name[0] = '\0';
    vkg_os_paths names;
    if (vkg_os_list_dir(dir, &names) != 0)
        return;
    for (size_t i = 0; !name[0] && i < names.n; i++) {
        char done[1400];
        snprintf(done, sizeof done, "%s/%s/DONE", dir, names.v[i]);
        if (!strncmp(names.v[i], "step_", 5) && vkg_os_exists(done) == 1)
            snprintf(name, cap, "%s", names.v[i]);
    }
    vkg_os_paths_free(&names);
}

/* A loaded model must hold only finite parameters: a NaN or infinity would poison every step. */
static vkg_status check_finite(const char *path, const float *params, const vkg_model_config *cfg)
{
    vkg_param_table t;
    vkg_model_params(cfg, &t);
    for (int i = 0; i < t.n; i++)
        for (size_t k = 0, at = t.t[i].offset; k < t.t[i].count; k++)
            VKG_CHECK(isfinite(params[at + k]), VKG_ERR_FORMAT,
                      "%s: parameter %zu of tensor %s is %g: the model holds non-finite values "
                      "(a diverged run or a corrupted file)",
                      path, k, t.t[i].name, (double)params[at + k]);
    return VKG_OK;
}

/* Model config, parameters and (when resuming) moments and state. Resuming, only rank 0 reads the
 * checkpoint: the other ranks build no model of their own (their flags may not describe it, as
 * when it came from --init) and take rank 0's in vkg__train_share_start. Resuming from a folder
 * without a checkpoint marked complete (DONE) starts afresh; one marked complete that does not load
 * is refused rather than passed over (unless --resume-fallback) or silently restarted from scratch
 * (which would also wipe the log). A new run refuses a folder holding another run's checkpoints. */
vkg_status vkg__train_load_model(vkg_trainer_t *t, float **params, vkg_checkpoint *ck)
{
    const vkg_train_config *c = &t->cfg;
    VKG_CHECK(!c->resume || t->ckpt_dir[0], VKG_ERR_INVALID_ARG,
              "--resume needs --ckpt-dir (the folder to resume from)");
    VKG_CHECK(!c->resume_fallback || c->resume, VKG_ERR_INVALID_ARG,
              "--resume-fallback needs --resume (it says where --resume goes when the newest "
              "checkpoint is damaged)");
    if (c->resume && vkg_strategy_rank(t->par) == 0) { /* other ranks get rank 0's checkpoint */
        char path[1100];
        vkg_status st =
            vkg_checkpoint_resume(t->ckpt_dir, c->resume_fallback, ck, path, sizeof path,
                                  t->resume_skipped, sizeof t->resume_skipped);
        if (st == VKG_OK) {
            t->mcfg = ck->cfg;
            *params = ck->params;
            ck->params = NULL;
            t->resumed = 1;
            return check_finite(path, *params, &t->mcfg);
        }
        if (st != VKG_ERR_NOT_FOUND && !c->resume_fallback)
            return vkg__error_wrap(st, "--resume (--resume-fallback would resume from the newest "
                                       "checkpoint that loads and set the damaged newer ones "
                                       "aside as step_<n>.damaged)");
        if (st != VKG_ERR_NOT_FOUND)
            return vkg__error_wrap(st, "--resume-fallback");
    } else if (t->ckpt_dir[0] && vkg_strategy_rank(t->par) == 0) {
        char marked[256];
        find_marked_complete(t->ckpt_dir, marked, sizeof marked);
        VKG_CHECK(!marked[0], VKG_ERR_INVALID_ARG,
                  "--ckpt-dir %s already holds checkpoints (%s is marked complete): give --resume "
                  "to continue that run, or another --ckpt-dir; a new run never writes over them",
                  t->ckpt_dir, marked);
    }
    if (c->resume && vkg_strategy_rank(t->par) != 0)
        return VKG_OK; /* rank 0's checkpoint or fresh start decides (vkg__train_share_start) */
    if (c->init_path) {
        if (vkg_os_is_dir(c->init_path)) { /* a checkpoint, a Hugging Face folder: either kind */
            VKG_TRY(vkg_checkpoint_read_model(c->init_path, &t->mcfg, params));
            return check_finite(c->init_path, *params, &t->mcfg);
        }
        int version = 0;
        VKG_TRY(vkg_modelfile_read_header(c->init_path, &t->mcfg, &version));
        VKG_TRY(vkg_modelfile_read(c->init_path, &t->mcfg, params));
        return check_finite(c->init_path, *params, &t->mcfg);
    }
    return vkg__train_new_model(t, params);
}

vkg_status vkg__train_new_model(vkg_trainer_t *t, float **params)
{
    const vkg_train_config *c = &t->cfg;
    if (c->model) {
        vkg_status st = vkg_model_config_named(c->model, &t->mcfg);
        if (st != VKG_OK)
            return vkg__error_wrap(st, "--model");
    } else {
        int V = c->vocab_size ? c->vocab_size : (t->tok ? vkg_tokenizer_vocab_size(t->tok) : 0);
        VKG_CHECK(V > 0, VKG_ERR_INVALID_ARG, "no vocabulary size: give --vocab or a tokenizer");
        t->mcfg = (vkg_model_config){.max_seq_len = c->max_seq_len,
                                     .vocab_size = V,
                                     .padded_vocab_size = vkg_model_pad_vocab(V),
                                     .num_layers = c->layers,
                                     .num_heads = c->heads,
                                     .channels = c->channels};
    }
    VKG_TRY(vkg_model_config_validate(&t->mcfg));
    *params = malloc(vkg_model_num_params(&t->mcfg) * sizeof **params);
    VKG_CHECK(*params, VKG_ERR_NOMEM, "no memory for %zu parameters",
              vkg_model_num_params(&t->mcfg));
    vkg_model_init_params(&t->mcfg, *params, c->seed);
    return VKG_OK;
}

/* The data loaders' cancellation: cfg.stop (a signal) ends loading too. */
static int stop_requested(void *ctx)
{
    const vkg_trainer_t *t = ctx;
    return t->cfg.stop && *t->cfg.stop;
}

vkg_status vkg__train_open_data(vkg_trainer_t *t)
{
    const vkg_train_config *c = &t->cfg;
    vkg_data_config d = vkg_data_config_default();
    d.cancel = (vkg_cancel){stop_requested, t};
    d.batch_size = c->batch;
    d.seq_len = c->seq;
    d.vocab_size = t->mcfg.vocab_size;
    d.tokenizer = t->tok;
    d.seed = c->seed;
    vkg_strategy_data_config(t->par, &d);
    if (c->data) {
        d.path = c->data;
        d.shuffle = c->shuffle;
        VKG_TRY(vkg_data_create(&d, &t->train));
    }
    if (c->val_data) {
        d.path = c->val_data;
        d.shuffle = 0;
        VKG_TRY(vkg_data_create(&d, &t->val));
    }
    return VKG_OK;
}
