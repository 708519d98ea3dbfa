/* Internal to the checkpoint directories (checkpoint.c, ckptresume.c, ckptmodel.c): their paths,
 * the fsync of a folder, the listing of its step_<n> directories and the model inside one. */
#ifndef VKG_TRAIN_CHECKPOINT_INTERNAL_H
#define VKG_TRAIN_CHECKPOINT_INTERNAL_H

#include "train/checkpoint.h"

#define VKG_CHECKPOINT_PATH_CAP 4096
#define VKG_CHECKPOINT_NAME_CAP 32 /* "step_" and up to 26 digits */

/* A step_<n> directory of a checkpoint folder. */
typedef struct vkg_checkpoint_entry {
    uint64_t step;
    char name[VKG_CHECKPOINT_NAME_CAP];
} vkg_checkpoint_entry;

/* out (VKG_CHECKPOINT_PATH_CAP bytes) = a + "/" + b; VKG_ERR_INVALID_ARG when it does not fit. */
vkg_status vkg__checkpoint_join(char *out, const char *a, const char *b);
/* 1 when path is a regular file. */
int vkg__checkpoint_is_file(const char *path);
/* fsync a directory so entries created or removed in it survive a crash. VKG_ERR_IO naming it. */
vkg_status vkg__checkpoint_sync_dir(const char *dir);
/* Every step_<n> entry under dir, newest first, in a malloc'ed array (*out, *count; the caller
 * frees it). VKG_ERR_NOT_FOUND when dir does not exist, VKG_ERR_IO, VKG_ERR_NOMEM. */
vkg_status vkg__checkpoint_list_steps(const char *dir, vkg_checkpoint_entry **out, size_t *count);

/* ---- the model inside a checkpoint directory (ckptmodel.c) ---- */

/* How a checkpoint stores its model: llm.c's model.bin (GPT-2) or Hugging Face's config.json +
 * model.safetensors in fp32 (every other family). */
enum { VKG_CKPT_MODEL_BIN = 1, VKG_CKPT_MODEL_HF = 2 };

/* The kind cfg is stored as: model.bin when vkg_model_is_gpt2, else config.json + safetensors. */
int vkg__checkpoint_model_kind(const vkg_model_config *cfg);
/* Check, before anything is written, that params (of the valid cfg) can be stored in cfg's kind
 * and read back bit for bit: for config.json + model.safetensors, Vp is V padded to 128 and every
 * padding row of the vocabulary is +0. VKG_ERR_INVALID_ARG naming sd and the tensor otherwise. */
vkg_status vkg__checkpoint_check_storable(const char *sd, const vkg_model_config *cfg,
                                          const float *params);
/* Write params into the checkpoint directory sd (which exists and holds no DONE) in cfg's kind,
 * each file crash-safely, after removing the other kind's files left by an interrupted write.
 * VKG_ERR_IO naming the file, the writers' errors. */
vkg_status vkg__checkpoint_write_model(const char *sd, const vkg_model_config *cfg,
                                       const float *params);
/* Compare the configuration state_path holds (s) with the model file's (m) field by field, every
 * family field included, a default (0) equal to the value it stands for. VKG_ERR_FORMAT naming
 * both files, the first differing field and both values. */
vkg_status vkg__checkpoint_same_config(const char *state_path, const vkg_model_config *s,
                                       const char *model_path, const vkg_model_config *m);
/* Read the model of sd: model.bin or config.json + model.safetensors. With want (the
 * configuration state_path's header holds, NULL: no state file), sd must hold want's kind (the
 * other kind is refused naming both files), the same configuration (vkg__checkpoint_same_config)
 * and, as a checkpoint writes it, a model.safetensors of fp32 tensors of exactly the parameters'
 * size; *cfg gets *want then, else the model file's configuration. With params NULL only headers
 * (and the safetensors' size) are read; else *params gets a new malloc'ed array (the caller frees
 * it) whose values are finite and, when st records it, match the parameters' CRC-32. Errors:
 * VKG_ERR_FORMAT naming the file and the problem, VKG_ERR_NOT_FOUND (no model at all, without
 * want), VKG_ERR_IO, VKG_ERR_NOMEM. On error nothing is allocated. */
vkg_status vkg__checkpoint_read_model(const char *sd, const char *state_path,
                                      const vkg_model_config *want, const vkg_checkpoint_state *st,
                                      vkg_model_config *cfg, float **params);

#endif
