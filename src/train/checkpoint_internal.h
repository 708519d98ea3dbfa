/* Internal to the checkpoint directories (checkpoint.c, ckptresume.c): their paths, the fsync of a
 * folder and the listing of its step_<n> directories. */
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

#endif
