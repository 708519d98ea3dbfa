/* Checkpoint directories: writing the model, state.bin and DONE crash-safely, finding the newest
 * complete checkpoint, loading and cross-validating one, pruning old ones; plus the training
 * hyperparameters' defaults and resume check (rules in checkpoint.h). Choosing the checkpoint to
 * resume from lives in ckptresume.c, the model's two kinds (model.bin, config.json +
 * model.safetensors) in ckptmodel.c, the state file format in statefile.c, the model files in
 * src/io. Nothing here prints. */
#include "train/checkpoint_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "os/file.h"
#include "os/glob.h"
#include "vkgpt/io.h"

/* ---- hyperparameters ------------------------------------------------------------------------ */

vkg_train_hparams vkg_train_hparams_default(void)
{
    vkg_train_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.batch_size = 4;
    hp.seq_len = 64;
    hp.total_batch = 256;
    hp.world_size = 1;
    hp.seed = 1337;
    hp.schedule = vkg_schedule_default();
    hp.beta1 = 0.9f;
    hp.beta2 = 0.999f;
    hp.eps = 1e-8f;
    hp.grad_clip = 1.0f;
    return hp;
}

vkg_status vkg_checkpoint_check_resume(const vkg_train_hparams *saved, const vkg_train_hparams *now)
{
    typedef unsigned long long ull;
    const struct {
        const char *name;
        ull was, is;
    } f[] = {
        {"batch size B", (ull)saved->batch_size, (ull)now->batch_size},
        {"sequence length T", (ull)saved->seq_len, (ull)now->seq_len},
        {"total batch (tokens per step)", saved->total_batch, now->total_batch},
        {"world size", (ull)saved->world_size, (ull)now->world_size},
        {"shuffle", (ull)saved->shuffle, (ull)now->shuffle},
        {"seed", saved->seed, now->seed},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        VKG_CHECK(f[i].was == f[i].is, VKG_ERR_MISMATCH,
                  "the checkpoint was written with %s = %llu but this run has %llu", f[i].name,
                  f[i].was, f[i].is);
    return VKG_OK;
}

/* ---- paths and directories ------------------------------------------------------------------ */

/* out = a + "/" + b; VKG_ERR_INVALID_ARG when it does not fit VKG_CHECKPOINT_PATH_CAP. */
vkg_status vkg__checkpoint_join(char *out, const char *a, const char *b)
{
    int len = snprintf(out, VKG_CHECKPOINT_PATH_CAP, "%s/%s", a, b);
    VKG_CHECK(len > 0 && len < VKG_CHECKPOINT_PATH_CAP, VKG_ERR_INVALID_ARG,
              "path '%s/%s' is too long", a, b);
    return VKG_OK;
}

int vkg__checkpoint_is_file(const char *path)
{
    return vkg_os_is_file(path);
}

/* Sync a directory so entries created or removed in it survive a crash. */
vkg_status vkg__checkpoint_sync_dir(const char *dir)
{
    int err = vkg_os_sync_dir(dir);
    VKG_CHECK(err == 0, VKG_ERR_IO, "%s: cannot sync the directory: %s", dir, strerror(err));
    return VKG_OK;
}

/* mkdir -p dir; *created says whether its last component was new. */
static vkg_status make_dirs(const char *dir, int *created)
{
    char p[VKG_CHECKPOINT_PATH_CAP];
    int len = snprintf(p, sizeof p, "%s", dir);
    VKG_CHECK(len > 0 && len < VKG_CHECKPOINT_PATH_CAP, VKG_ERR_INVALID_ARG,
              "path '%s' is too long", dir);
    for (char *c = p + 1;; c++) {
        if (*c != '/' && *c != '\0')
            continue;
        char saved = *c;
        *c = '\0';
        int existed = vkg_os_is_dir(p);
        int err = vkg_os_mkdir(p);
        VKG_CHECK(err == 0, VKG_ERR_IO, "%s: cannot create directory: %s", p,
                  err == EEXIST ? "a file of that name is in the way" : strerror(err));
        *created = !existed;
        if (saved == '\0')
            return VKG_OK;
        *c = saved;
    }
}

static vkg_status write_text(FILE *f, void *ctx)
{
    return vkg_io_write_bytes(f, ctx, strlen(ctx));
}

vkg_status vkg_checkpoint_write(const char *dir, const vkg_model_config *cfg, const float *params,
                                const float *m, const float *v, const vkg_checkpoint_state *st,
                                char *path_out, size_t cap)
{
    return vkg_checkpoint_write_outer(dir, cfg, params, m, v, NULL, 0, st, path_out, cap);
}

vkg_status vkg_checkpoint_write_outer(const char *dir, const vkg_model_config *cfg,
                                      const float *params, const float *m, const float *v,
                                      const float *outer, size_t outer_count,
                                      const vkg_checkpoint_state *st, char *path_out, size_t cap)
{
    return vkg_checkpoint_write_hf(dir, cfg, params, m, v, outer, outer_count, 0, st, path_out,
                                   cap);
}

vkg_status vkg_checkpoint_write_hf(const char *dir, const vkg_model_config *cfg,
                                   const float *params, const float *m, const float *v,
                                   const float *outer, size_t outer_count, int hf,
                                   const vkg_checkpoint_state *st, char *path_out, size_t cap)
{
    char sd[VKG_CHECKPOINT_PATH_CAP], file[VKG_CHECKPOINT_PATH_CAP], name[VKG_CHECKPOINT_NAME_CAP],
        done_text[64];
    int created = 0;
    VKG_CHECK(dir && cfg && params && m && v && st, VKG_ERR_INVALID_ARG,
              "checkpoint: NULL argument");
    snprintf(name, sizeof name, "step_%08llu", (unsigned long long)st->step);
    VKG_TRY(vkg__checkpoint_join(sd, dir, name));
    const char *why = "not written: a checkpoint is never marked complete holding a value that "
                      "is not finite";
    VKG_TRY(vkg_statefile_check_values(VKG_ERR_INVALID_ARG, sd, "parameter", cfg, params, 0, why));
    VKG_TRY(vkg_statefile_check_values(VKG_ERR_INVALID_ARG, sd, "AdamW first moment m", cfg, m, 0,
                                       why));
    VKG_TRY(vkg_statefile_check_values(VKG_ERR_INVALID_ARG, sd, "AdamW second moment v", cfg, v, 1,
                                       why));
    VKG_TRY(vkg__checkpoint_check_storable(sd, cfg, params));
    VKG_CHECK(!path_out || strlen(sd) < cap, VKG_ERR_INVALID_ARG,
              "%s: path longer than the %zu-byte buffer", sd, cap);
    VKG_TRY(make_dirs(dir, &created));
    VKG_TRY(vkg__checkpoint_join(file, sd, "DONE"));
    /* A complete checkpoint is never written over, damaged or not: it may be all a user has. */
    VKG_CHECK(!vkg__checkpoint_is_file(file), VKG_ERR_STATE,
              "%s already holds a checkpoint marked complete (DONE): a checkpoint is never "
              "written over another; move it away to write this step there",
              sd);
    VKG_TRY(make_dirs(sd, &created));
    VKG_TRY(vkg__checkpoint_sync_dir(dir));
    VKG_TRY(vkg__checkpoint_write_model(sd, cfg, params));
    VKG_TRY(vkg__checkpoint_join(file, sd, "state.bin"));
    vkg_checkpoint_state with_crc = *st;
    with_crc.params_crc = vkg_statefile_crc32_floats(params, vkg_model_num_params(cfg));
    with_crc.params_crc_set = 1;
    VKG_TRY(vkg_statefile_write(file, cfg, &with_crc, m, v));
    if (outer) {
        VKG_TRY(vkg__checkpoint_join(file, sd, "outer.bin"));
        VKG_TRY(vkg_outerfile_write(file, vkg_model_num_params(cfg), outer, outer_count));
    }
    if (hf) { /* Hugging Face's layout beside it, before DONE */
        VKG_TRY(vkg__checkpoint_join(file, sd, "hf"));
        VKG_TRY(vkg_hf_model_write(file, cfg, params, hf == 2 /* VKG_SAVE_HF_BF16 */));
    }
    VKG_TRY(vkg__checkpoint_join(file, sd, "DONE"));
    snprintf(done_text, sizeof done_text, "vkgpt checkpoint, step %llu\n",
             (unsigned long long)st->step);
    VKG_TRY(vkg_io_write_atomic(file, write_text, done_text));
    if (path_out)
        snprintf(path_out, cap, "%s", sd);
    return VKG_OK;
}

/* ---- listing -------------------------------------------------------------------------------- */

/* The step of a directory entry named step_<digits>, or -1 for any other name. */
static int parse_step_name(const char *name, uint64_t *step)
{
    if (strncmp(name, "step_", 5) != 0 || name[5] == '\0' ||
        strlen(name) >= VKG_CHECKPOINT_NAME_CAP)
        return -1;
    uint64_t s = 0;
    for (const char *p = name + 5; *p; p++) {
        if (*p < '0' || *p > '9' || s > (UINT64_MAX - 9) / 10)
            return -1;
        s = s * 10 + (uint64_t)(*p - '0');
    }
    *step = s;
    return 0;
}

/* Every step_<n> entry under dir, newest first (the same step under two names: either order). */
vkg_status vkg__checkpoint_list_steps(const char *dir, vkg_checkpoint_entry **out, size_t *count)
{
    *out = NULL;
    *count = 0;
    vkg_os_paths names;
    int err = vkg_os_list_dir(dir, &names);
    if (err == ENOENT)
        return VKG_FAIL(VKG_ERR_NOT_FOUND, "%s: no such checkpoint directory", dir);
    VKG_CHECK(err == 0, VKG_ERR_IO, "%s: cannot read the directory: %s", dir, strerror(err));
    size_t n = 0, cap = 0;
    vkg_checkpoint_entry *e = NULL;
    uint64_t step;
    vkg_status st = VKG_OK;
    for (size_t i = 0; i < names.n; i++) {
        const char *name = names.v[i];
        size_t len = strlen(name);
        if (parse_step_name(name, &step) < 0 || len >= VKG_CHECKPOINT_NAME_CAP)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            vkg_checkpoint_entry *ne = realloc(e, cap * sizeof *ne);
            VKG_CHECK_GOTO(st, ne, VKG_ERR_NOMEM, done, "%s: out of memory", dir);
            e = ne;
        }
        e[n].step = step;
        memcpy(e[n].name, name, len + 1);
        n++;
    }
    for (size_t i = 1; i < n; i++) /* insertion sort, newest first */
        for (size_t j = i; j > 0 && e[j - 1].step < e[j].step; j--) {
            vkg_checkpoint_entry t = e[j];
            e[j] = e[j - 1];
            e[j - 1] = t;
        }
    *out = e;
    *count = n;
    e = NULL;
done:
    free(e);
    vkg_os_paths_free(&names);
    return st;
}

/* Headers-only check that sd is a complete checkpoint of its directory's step. */
static vkg_status check_complete(const char *sd, uint64_t step)
{
    char done[VKG_CHECKPOINT_PATH_CAP], state[VKG_CHECKPOINT_PATH_CAP];
    vkg_model_config mc, sc;
    vkg_checkpoint_state st;
    size_t n;
    VKG_TRY(vkg__checkpoint_join(done, sd, "DONE"));
    VKG_TRY(vkg__checkpoint_join(state, sd, "state.bin"));
    VKG_CHECK(vkg__checkpoint_is_file(done), VKG_ERR_FORMAT,
              "%s: incomplete checkpoint (no DONE marker)", sd);
    VKG_TRY(vkg_statefile_read(state, &sc, &st, &n, NULL, NULL));
    VKG_TRY(vkg__checkpoint_read_model(sd, state, &sc, &st, &mc, NULL));
    VKG_CHECK(st.step == step, VKG_ERR_FORMAT, "%s: holds step %llu, not the directory's %llu",
              state, (unsigned long long)st.step, (unsigned long long)step);
    return VKG_OK;
}

vkg_status vkg_checkpoint_find_latest(const char *dir, char *path_out, size_t cap, uint64_t *step)
{
    vkg_checkpoint_entry *e = NULL;
    size_t n = 0, i;
    char sd[VKG_CHECKPOINT_PATH_CAP], why[600] = "";
    vkg_status st = VKG_OK;
    VKG_CHECK(dir && path_out, VKG_ERR_INVALID_ARG, "checkpoint: NULL argument");
    VKG_TRY(vkg__checkpoint_list_steps(dir, &e, &n));
    for (i = 0; i < n; i++) {
        if (vkg__checkpoint_join(sd, dir, e[i].name) == VKG_OK &&
            check_complete(sd, e[i].step) == VKG_OK)
            break;
        if (!why[0])
            snprintf(why, sizeof why, "; the newest was skipped: %s", vkg_error_message());
    }
    VKG_CHECK_GOTO(st, i < n, VKG_ERR_NOT_FOUND, done,
                   "%s: no complete checkpoint among %zu step directories%s", dir, n, why);
    VKG_CHECK_GOTO(st, strlen(sd) < cap, VKG_ERR_INVALID_ARG, done,
                   "%s: path longer than the %zu-byte buffer", sd, cap);
    snprintf(path_out, cap, "%s", sd);
    if (step)
        *step = e[i].step;
    vkg_error_clear();
done:
    free(e);
    return st;
}

/* ---- loading -------------------------------------------------------------------------------- */

vkg_status vkg_checkpoint_load(const char *ckpt_dir, vkg_checkpoint *out)
{
    char done[VKG_CHECKPOINT_PATH_CAP], state[VKG_CHECKPOINT_PATH_CAP];
    vkg_model_config sc;
    vkg_status st;
    memset(out, 0, sizeof *out);
    VKG_CHECK(ckpt_dir, VKG_ERR_INVALID_ARG, "checkpoint: NULL path");
    VKG_TRY(vkg__checkpoint_join(done, ckpt_dir, "DONE"));
    VKG_TRY(vkg__checkpoint_join(state, ckpt_dir, "state.bin"));
    VKG_CHECK(vkg__checkpoint_is_file(done), VKG_ERR_FORMAT,
              "%s: incomplete checkpoint (no DONE marker)", ckpt_dir);
    VKG_TRY_GOTO(
        st, vkg_statefile_read(state, &sc, &out->state, &out->num_params, &out->m, &out->v), fail);
    /* the kind, the configuration field by field, the parameters' checksum and values */
    VKG_TRY_GOTO(
        st, vkg__checkpoint_read_model(ckpt_dir, state, &sc, &out->state, &out->cfg, &out->params),
        fail);
    const char *base = strrchr(ckpt_dir, '/');
    uint64_t dir_step;
    if (parse_step_name(base ? base + 1 : ckpt_dir, &dir_step) == 0)
        VKG_CHECK_GOTO(st, out->state.step == dir_step, VKG_ERR_FORMAT, fail,
                       "%s: holds step %llu, not the directory's %llu", state,
                       (unsigned long long)out->state.step, (unsigned long long)dir_step);
    VKG_TRY_GOTO(st, vkg__checkpoint_join(done, ckpt_dir, "outer.bin"), fail);
    if (vkg__checkpoint_is_file(done))
        VKG_TRY_GOTO(st, vkg_outerfile_read(done, out->num_params, &out->outer, &out->outer_count),
                     fail);
    return VKG_OK;
fail:
    vkg_checkpoint_deinit(out);
    return st;
}

void vkg_checkpoint_deinit(vkg_checkpoint *c)
{
    if (!c)
        return;
    free(c->params);
    free(c->m);
    free(c->v);
    free(c->outer);
    memset(c, 0, sizeof *c);
}

/* ---- pruning -------------------------------------------------------------------------------- */

/* Remove a checkpoint directory: DONE first (so it never looks complete half-removed), then its
 * other files, then itself. */
/* Remove the files of folder sd and then sd, and (depth 1) the same for a folder in it: a
 * checkpoint's hf folder (--save-hf). */
static vkg_status remove_files_and_dir(const char *sd, int depth)
{
    char file[VKG_CHECKPOINT_PATH_CAP];
    vkg_os_paths names;
    int err = vkg_os_list_dir(sd, &names);
    VKG_CHECK(err == 0, VKG_ERR_IO, "%s: cannot read the directory: %s", sd, strerror(err));
    vkg_status st = VKG_OK;
    for (size_t i = 0; st == VKG_OK && i < names.n; i++) {
        st = vkg__checkpoint_join(file, sd, names.v[i]);
        if (st == VKG_OK && remove(file) != 0) {
            int e = errno;
            st = depth > 0 &&
                         (e == ENOTEMPTY || e == EEXIST || e == EISDIR || e == EPERM || e == EACCES)
                     ? remove_files_and_dir(file, depth - 1) /* a folder that holds files */
                     : VKG_FAIL(VKG_ERR_IO, "%s: cannot remove: %s", file, strerror(e));
        }
    }
    vkg_os_paths_free(&names);
    VKG_TRY(st);
    err = vkg_os_rmdir(sd);
    VKG_CHECK(err == 0, VKG_ERR_IO, "%s: cannot remove the directory: %s", sd, strerror(err));
    return VKG_OK;
}

static vkg_status remove_ckpt_dir(const char *sd)
{
    char file[VKG_CHECKPOINT_PATH_CAP];
    VKG_TRY(vkg__checkpoint_join(file, sd, "DONE"));
    VKG_CHECK(remove(file) == 0 || errno == ENOENT, VKG_ERR_IO, "%s: cannot remove: %s", file,
              strerror(errno));
    return remove_files_and_dir(sd, 1);
}

vkg_status vkg_checkpoint_prune(const char *dir, int keep, uint64_t protect_step, int *removed)
{
    vkg_checkpoint_entry *e = NULL;
    size_t n = 0;
    int kept = 0, gone = 0;
    char sd[VKG_CHECKPOINT_PATH_CAP], done[VKG_CHECKPOINT_PATH_CAP];
    vkg_status st = VKG_OK;
    if (removed)
        *removed = 0;
    if (keep <= 0)
        return VKG_OK;
    VKG_TRY(vkg__checkpoint_list_steps(dir, &e, &n));
    for (size_t i = 0; i < n && st == VKG_OK; i++) {
        if (e[i].step > protect_step)
            continue;
        VKG_TRY_GOTO(st, vkg__checkpoint_join(sd, dir, e[i].name), done);
        VKG_TRY_GOTO(st, vkg__checkpoint_join(done, sd, "DONE"), done);
        if (e[i].step == protect_step) /* the one just written: always kept, one of the keep */
            continue;
        if (vkg__checkpoint_is_file(done) && kept < keep - 1) {
            kept++;
            continue;
        }
        VKG_TRY_GOTO(st, remove_ckpt_dir(sd), done);
        gone++;
    }
    if (gone)
        st = vkg__checkpoint_sync_dir(dir);
done:
    if (removed)
        *removed = gone;
    free(e);
    return st;
}
