/* Checkpoints: the vkgpt state file and checkpoint directories.
 *
 * A checkpoint is a directory DIR/step_<step, at least 8 digits>/ holding, written in this order
 * and each crash-safely (temporary file, fsync, rename, directory fsync via vkg_io_write_atomic):
 *   the model  its parameters, as one of two kinds, by the model's family:
 *              GPT-2 (vkg_model_is_gpt2): model.bin, the llm.c model file (fp32, version 3);
 *              every other family: config.json + model.safetensors, Hugging Face's layout in
 *              fp32 (vkg_hf_model_write), the vocabulary's padding rows (all 0) left out
 *   state.bin  the state file below (AdamW m and v, step, RNG, data position, hyperparameters,
 *              the model's configuration, which says which kind the model is stored as)
 *   outer.bin  only under DiLoCo (--sync diloco): the outer state below
 *   hf/        only with --save-hf: the model again in Hugging Face's layout (fp32 or bf16)
 *   DONE       a marker; a directory without it is incomplete and never resumed from
 * A checkpoint holding the other kind than its state.bin says, or both, is refused naming both
 * files; so is a model whose configuration differs from state.bin's in any field.
 * A directory marked complete is never written into again: writing a step whose directory holds
 * DONE is refused, damaged or not. A directory without DONE (an interrupted write) is written
 * over, so a failure at any point leaves the other checkpoints untouched and never a DONE beside
 * files of two different writes. A damaged complete checkpoint that resuming passes over (only
 * when asked to) is renamed step_<n>.damaged, which nothing here reads, prunes or writes.
 * The folder holding the step directories is claimed by one trainer at a time through a lock file
 * (vkg_checkpoint_lock, ckptlock.c).
 *
 * State file (little-endian; 1024-byte header of 256 32-bit slots, llm.c style; a u64 takes two
 * slots, low half first; a float its IEEE-754 bits):
 *   0 magic 20250611   1 version 1
 *   2 maxT  3 V  4 L  5 NH  6 C  7 Vp                          model configuration (GPT-2's)
 *   8 B  9 T  10-11 total batch tokens (u64)  12 world size    must match on resume
 *   13 shuffle  14-15 seed (u64)                               must match on resume
 *   16 schedule kind  17 total steps  18 warmup  19 lr (f32)   informative
 *   20 lr_min_frac  21 weight decay  22 beta1  23 beta2  24 eps  25 grad clip (f32)  informative
 *   26 loss scale (f32)  28-29 steps without overflow (u64)   dynamic loss scaling (0: none)
 *   32-33 step (u64, optimizer steps done)  34-35 tokens trained on (u64)
 *   36-43 rng[4] (u64 each)
 *   44-53 data position: epoch, batch, num_batches, shuffle, seed (u64 each)
 *   54-55 number of parameters n (u64)
 *   56 CRC-32 of model.bin's parameters (their little-endian float32 bytes, as in the file)
 *   57 1 when slot 56 is set (0 in files written before it existed: not checked)
 *   64-78 the model configuration's family fields (vkgpt/model.h), each in one slot, floats as
 *   their bits: 64 num_kv_heads  65 head_dim  66 mlp_hidden  67 mlp  68 norm  69 norm_eps (f32)
 *   70 pos  71 rope_theta (f32)  72 rope_factor  73 rope_low_freq_factor  74
 *   rope_high_freq_factor (f32 each)  75 rope_original_max  76 qk_norm  77 bias  78 untied
 *   (all 0 for GPT-2, as in files written before these slots were: those read as GPT-2)
 *   all other slots 0 (reserved)
 * then m float32[n], v float32[n] (table order, as the parameters), then a uint32 CRC-32 (the
 * IEEE/zlib polynomial, as zlib's crc32() or Python's zlib.crc32) of every preceding byte of the
 * file. The file is exactly 1024 + 8n + 4 bytes.
 *
 * Outer state file (DiLoCo; little-endian; 1024-byte header of 256 32-bit slots):
 *   0 magic 20261128   1 version 1   2-3 number of parameters n (u64)   4-5 count of floats (u64)
 *   6 CRC-32 of the floats' bytes    all other slots 0
 * then count float32: the global parameters (n), the outer momentum (n), and for each replica
 * q = 1 .. N-1 its parameters, AdamW m and v (n each), so count = n (2 + 3 (N - 1)); replica 0's
 * parameters and moments are model.bin's and state.bin's. Streaming with a delay (--outer-delay
 * 1 or more) adds every replica's exchanges in flight (n each, zero outside the fragments in
 * flight): replica 0's after the momentum, each other's after its v, so count = n (3 + 4 (N - 1)).
 * The file is exactly 1024 + 4 count bytes.
 *
 * The state file is implemented in statefile.c (vkg_statefile_*), the directories in checkpoint.c,
 * ckptresume.c and ckptmodel.c (vkg_checkpoint_*; the model's two kinds in ckptmodel.c). Host
 * memory only; nothing here knows of devices or prints. Internal to vkgpt until the trainer's
 * public API exists.
 */
#ifndef VKG_TRAIN_CHECKPOINT_H
#define VKG_TRAIN_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "optim/schedule.h"
#include "os/file.h"
#include "vkgpt/data.h"
#include "vkgpt/model.h"
#include "vkgpt/status.h"

#define VKG_STATE_MAGIC 20250611
#define VKG_STATE_VERSION 1
#define VKG_CHECKPOINT_NUM_RNG 4
#define VKG_OUTER_MAGIC 20261128
#define VKG_OUTER_VERSION 1

/* Training hyperparameters recorded in the state file. */
typedef struct vkg_train_hparams {
    /* must match when resuming (vkg_checkpoint_check_resume) */
    int batch_size;       /* B */
    int seq_len;          /* T */
    uint64_t total_batch; /* tokens per optimizer step */
    int world_size;       /* data-parallel ranks */
    int shuffle;          /* data shuffling on/off */
    uint64_t seed;        /* run seed */
    /* informative: may change on resume */
    vkg_schedule_config schedule;
    float weight_decay, beta1, beta2, eps, grad_clip;
} vkg_train_hparams;

/* Everything besides parameters and moments that a resumed run needs. */
typedef struct vkg_checkpoint_state {
    vkg_train_hparams hp;
    uint64_t step;                        /* optimizer steps completed */
    uint64_t tokens;                      /* tokens trained on so far */
    uint64_t rng[VKG_CHECKPOINT_NUM_RNG]; /* generator states (vkg_rng.state), unused ones 0 */
    vkg_data_pos data_pos;                /* the training loader's position */
    uint32_t params_crc; /* CRC-32 of the parameters' file bytes (set by vkg_checkpoint_write) */
    uint32_t params_crc_set; /* 1 when params_crc is known */
    /* Dynamic loss scaling: the scale the next step runs with and the steps in a row without an
     * overflow (0, 0 in a run without it, and in files written before it). */
    float loss_scale;
    uint64_t loss_scale_good;
} vkg_checkpoint_state;

/* A loaded checkpoint. */
typedef struct vkg_checkpoint {
    vkg_model_config cfg;
    size_t num_params;
    float *params; /* (num_params) table order, from model.bin or model.safetensors */
    float *m, *v;  /* (num_params) AdamW moments, from state.bin */
    vkg_checkpoint_state state;
    float *outer; /* (outer_count) DiLoCo's outer state from outer.bin; NULL without one */
    size_t outer_count;
} vkg_checkpoint;

/* Hyperparameter defaults: B 4, T 64, total batch 256, 1 rank, no shuffle, seed 1337,
 * vkg_schedule_default(), weight decay 0, beta1 0.9, beta2 0.999, eps 1e-8, grad clip 1. */
vkg_train_hparams vkg_train_hparams_default(void);

/* Check that the must-match fields of saved (from a checkpoint) equal those of now (this run).
 * VKG_ERR_MISMATCH naming the first differing field with both values. */
vkg_status vkg_checkpoint_check_resume(const vkg_train_hparams *saved,
                                       const vkg_train_hparams *now);

/* ---- the state file (statefile.c) ---- */

/* Write a state file at path crash-safely: cfg's header fields (every family's), st, and m, v of
 * vkg_model_num_params(cfg) floats each. VKG_ERR_INVALID_ARG for an invalid cfg or NULL arrays,
 * VKG_ERR_IO naming the file. */
vkg_status vkg_statefile_write(const char *path, const vkg_model_config *cfg,
                               const vkg_checkpoint_state *st, const float *m, const float *v);

/* Read a state file. With m and v NULL only the header is read and checked (magic, version, a
 * valid model configuration, the parameter count agreeing with it, the exact file size); with
 * both non-NULL the moments are read into new malloc'ed arrays (*m, *v; the caller frees them),
 * the CRC-32 is verified and so are the moments themselves: every m and v finite, every v >= 0
 * (a NaN with a valid checksum is still refused, naming the tensor and element). Fills *cfg, *st,
 * *num_params. Errors: VKG_ERR_IO (cannot open or read), VKG_ERR_FORMAT naming the file and the
 * problem (too short, bad magic, wrong version, bad configuration, size not matching the header:
 * truncated or oversized, checksum mismatch), VKG_ERR_NOMEM. On error nothing is allocated. */
vkg_status vkg_statefile_read(const char *path, vkg_model_config *cfg, vkg_checkpoint_state *st,
                              size_t *num_params, float **m, float **v);

/* vkg_statefile_read's parser on an open stream f of `size` bytes positioned at its start (a file,
 * or an fmemopen buffer for the fuzz target); path names it in messages; the caller closes f. */
vkg_status vkg__statefile_read_stream(FILE *f, const char *path, uint64_t size,
                                      vkg_model_config *cfg, vkg_checkpoint_state *st,
                                      size_t *num_params, float **m, float **v);

/* CRC-32 of n floats as little-endian bytes (the body of an fp32 model file). */
uint32_t vkg_statefile_crc32_floats(const float *x, size_t n);

/* Check x (vkg_model_num_params(cfg) floats in table order: parameters or a moment) for a value
 * that is not finite, or negative when nonneg. VKG_OK, or `code` with "<where>: <what> of tensor
 * <name>, element <i>, is <value>" and why (the caller's wording, `why`). */
vkg_status vkg_statefile_check_values(vkg_status code, const char *where, const char *what,
                                      const vkg_model_config *cfg, const float *x, int nonneg,
                                      const char *why);

/* ---- the outer state file (outerfile.c) ---- */

/* Write count floats x, the outer state of a model of n parameters, at path crash-safely.
 * VKG_ERR_INVALID_ARG when count is not n (2 + 3k) or n (3 + 4k) or a value is not finite (naming
 * it), VKG_ERR_IO naming the file. */
vkg_status vkg_outerfile_write(const char *path, size_t n, const float *x, size_t count);
/* Read an outer state file of a model of n parameters into a new malloc'ed array (*x, *count;
 * the caller frees it). Errors: VKG_ERR_IO, VKG_ERR_FORMAT naming the file and the problem (bad
 * magic or version, another parameter count, a size not matching the header, checksum mismatch,
 * a value not finite, another replica's second moment v negative in every layout the count
 * fits), VKG_ERR_NOMEM. On error nothing is allocated. */
vkg_status vkg_outerfile_read(const char *path, size_t n, float **x, size_t *count);
/* vkg_outerfile_read from the stream f, size bytes long, named path in messages (f is not
 * closed): the fuzz target's entry. */
vkg_status vkg__outerfile_read_stream(FILE *f, const char *path, uint64_t size, size_t n, float **x,
                                      size_t *count);

/* ---- checkpoint directories (checkpoint.c; vkg_checkpoint_resume: ckptresume.c) ---- */

/* Write the checkpoint for st->step under dir (created, with missing parents, when absent):
 * dir/step_<%08 step>/ with the model (params: model.bin for GPT-2, config.json +
 * model.safetensors for every other family; the other kind's files, left by an interrupted write,
 * removed), state.bin (st, m, v) and DONE, in that order. params, m and v hold
 * vkg_model_num_params(cfg) floats each; stored as config.json + model.safetensors, Vp must be V
 * padded to 128 and the padding rows 0, else VKG_ERR_INVALID_ARG before anything is written (as
 * for a configuration that config.json describes no family of: refused when writing it). When
 * path_out is not NULL the checkpoint directory's path is copied there (cap bytes). A failure
 * leaves every other checkpoint complete and this one without DONE. A checkpoint is never marked
 * complete holding a value that is not finite: a NaN or infinity in params, m or v, or a negative
 * v, is refused before anything is written (VKG_ERR_INVALID_ARG naming the tensor and element).
 * Errors: VKG_ERR_STATE when that directory already holds DONE (nothing is written),
 * VKG_ERR_INVALID_ARG (bad cfg, NULL arrays, path too long), VKG_ERR_IO naming the path,
 * VKG_ERR_NOMEM. */
vkg_status vkg_checkpoint_write(const char *dir, const vkg_model_config *cfg, const float *params,
                                const float *m, const float *v, const vkg_checkpoint_state *st,
                                char *path_out, size_t cap);
/* vkg_checkpoint_write_outer that also writes the model in Hugging Face's layout into
 * dir/step_<n>/hf (config.json, model.safetensors: vkg_hf_model_write) before DONE, when hf is
 * 1 (fp32) or 2 (bf16), vkgpt/train.h's VKG_SAVE_HF_FP32 and _BF16 (0: not). */
vkg_status vkg_checkpoint_write_hf(const char *dir, const vkg_model_config *cfg,
                                   const float *params, const float *m, const float *v,
                                   const float *outer, size_t outer_count, int hf,
                                   const vkg_checkpoint_state *st, char *path_out, size_t cap);
/* vkg_checkpoint_write with DiLoCo's outer state (outer_count floats; outer NULL: none) written
 * as outer.bin after state.bin and before DONE. */
vkg_status vkg_checkpoint_write_outer(const char *dir, const vkg_model_config *cfg,
                                      const float *params, const float *m, const float *v,
                                      const float *outer, size_t outer_count,
                                      const vkg_checkpoint_state *st, char *path_out, size_t cap);

/* Find the newest complete checkpoint under dir: among the subdirectories named step_<digits>,
 * the highest step whose DONE exists and whose model (of the kind state.bin's configuration says:
 * model.bin's header, or config.json and model.safetensors' header and size) and state.bin
 * headers are readable, agree on the configuration and whose state step equals the directory's
 * (only headers and sizes are checked here; vkg_checkpoint_load verifies the checksum). Incomplete
 * or unreadable ones are skipped. Copies the directory's path to path_out (cap bytes) and its step
 * to *step (may be NULL). VKG_ERR_NOT_FOUND when dir does not exist or holds no complete checkpoint
 * (the message says how many were skipped and why the newest was), VKG_ERR_INVALID_ARG when cap is
 * too small, VKG_ERR_IO when dir cannot be read. For reading a model; resuming uses
 * vkg_checkpoint_resume, which never passes over a damaged checkpoint unless asked to. */
vkg_status vkg_checkpoint_find_latest(const char *dir, char *path_out, size_t cap, uint64_t *step);

/* Load the checkpoint to resume from under dir into *out (free with vkg_checkpoint_deinit): the
 * newest step_<n> directory marked complete (DONE), fully read and validated as by
 * vkg_checkpoint_load. Directories without DONE (interrupted writes) are passed over. When the
 * newest complete one does not load: without fallback the call fails with the load's error
 * (VKG_ERR_FORMAT naming the file and what is wrong: truncated, bad header, checksum, ...) and
 * nothing is changed; with fallback the newest complete one that loads is used and each newer
 * complete one that did not is renamed, files untouched, to step_<n>.damaged (or .damaged.2, ...)
 * so that no later checkpoint is written over it. When none loads the call fails and nothing is
 * changed. The chosen directory's path goes to path_out (cap bytes), and what was passed over,
 * why and where it went to notes ("step_00000012 (does not load: ...; set aside untouched as
 * step_00000012.damaged)"; "" when nothing). Errors: VKG_ERR_NOT_FOUND when dir does not exist or
 * holds no directory marked complete, the load's errors, VKG_ERR_IO (dir unreadable, a rename
 * failed), VKG_ERR_INVALID_ARG (cap too small), VKG_ERR_NOMEM. On error *out is left empty. */
vkg_status vkg_checkpoint_resume(const char *dir, int fallback, vkg_checkpoint *out, char *path_out,
                                 size_t cap, char *notes, size_t notes_cap);

/* Load the checkpoint directory ckpt_dir (a step_<n> directory) into *out, allocating its arrays
 * (free with vkg_checkpoint_deinit). It must hold DONE; the model (of the kind state.bin says) and
 * state.bin are fully read and validated (sizes, versions, the state file's checksum, and the
 * parameters against the checksum the state file records for them), must describe the same
 * configuration in every field (out->cfg is state.bin's, exactly), and the state's step
 * must be n when the directory is named step_<n>. An outer.bin beside them is read too
 * (vkg_outerfile_read) into out->outer. Errors:
 * VKG_ERR_FORMAT naming the file and what was wrong (no DONE, truncated, corrupted, foreign,
 * wrong version, model/state configuration mismatch, the other kind of model), VKG_ERR_IO,
 * VKG_ERR_NOMEM. On error *out is left empty. */
vkg_status vkg_checkpoint_load(const char *ckpt_dir, vkg_checkpoint *out);

/* Read the model in the folder sd, whichever kind it holds, for a reader that needs no moments
 * (sampling, --init): a checkpoint directory (step_<n>, DONE not required), or a folder holding a
 * model alone (model.bin, or a Hugging Face model: config.json + model.safetensors or a sharded
 * one). With state.bin beside it the checks of vkg_checkpoint_load apply to the model (its kind,
 * configuration and, with params, checksum) and *cfg is state.bin's configuration; without, the
 * model file's. params NULL: only the configuration (headers). Else *params gets a new malloc'ed
 * array of vkg_model_num_params(cfg) floats (the caller frees it). Errors: VKG_ERR_NOT_FOUND
 * when sd holds no model, VKG_ERR_FORMAT naming the file and the problem, VKG_ERR_IO,
 * VKG_ERR_NOMEM. On error nothing is allocated. */
vkg_status vkg_checkpoint_read_model(const char *sd, vkg_model_config *cfg, float **params);

/* Free the arrays of c and zero it. NULL-safe. */
void vkg_checkpoint_deinit(vkg_checkpoint *c);

/* Remove old checkpoints under dir, keeping protect_step's directory (the one just written)
 * and the newest keep - 1 other complete ones (with DONE) at or below it: every other step_<n>
 * directory with n < protect_step, complete or not, is removed (its DONE first, then its files,
 * then the directory). Directories above protect_step are left alone. keep <= 0 removes nothing.
 * *removed (may be NULL) gets the number removed. VKG_ERR_IO naming the path that could not be
 * removed (earlier removals stay done). */
vkg_status vkg_checkpoint_prune(const char *dir, int keep, uint64_t protect_step, int *removed);

/* ---- the folder's lock (ckptlock.c) ---- */

#define VKG_CHECKPOINT_LOCK_NAME "vkgpt.lock"

/* Claim the checkpoint folder dir (which must exist) for this process: an exclusive advisory lock
 * (os/file.h) on dir/vkgpt.lock (created when absent), held until vkg_checkpoint_unlock or the
 * process ends (the system releases it then, so a file left by a dead process never blocks). The
 * holder writes "pid <pid> host <host name>" into the file, for the message a second claimant
 * gets. *lock gets the lock (its descriptor close-on-exec). Errors: VKG_ERR_STATE when another
 * holder has it, naming the folder and the holder's pid and host; VKG_ERR_IO naming the file. */
vkg_status vkg_checkpoint_lock(const char *dir, vkg_os_lockfile **lock);

/* Release a lock taken by vkg_checkpoint_lock (its file is emptied and left in place) and set
 * *lock to NULL. No-op when *lock is NULL. */
void vkg_checkpoint_unlock(vkg_os_lockfile **lock);

#endif
