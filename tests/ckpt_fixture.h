/* What the checkpoint tests share (test_checkpoint.c: files, layout, writing, pruning;
 * test_checkpoint_resume.c: resuming past damage and the folder's lock): a per-test temporary
 * folder with a tiny model's parameters and moments, the training state of a given step,
 * checkpoints of it written under "ck", error messages checked and files read and written whole.
 * Not here: the checks themselves. */
#ifndef VKG_TEST_CKPT_FIXTURE_H
#define VKG_TEST_CKPT_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "train/checkpoint.h"

typedef struct vkg_ck_fixture {
    char dir[64];
    char path[512];
    vkg_model_config cfg;
    size_t n;
    float *params, *m, *v;
} vkg_ck_fixture;

/* The tiny model: maxT, V = 50, L = 2, NH = 2, C = 8. */
vkg_model_config vkg_ck_config(int maxT);
/* cmocka setup/teardown: *state becomes a fixture with its own temporary folder and random
 * parameters and moments (maxT = 16); teardown removes the folder and frees the fixture. */
int vkg_ck_setup(void **state);
int vkg_ck_teardown(void **state);
/* f->path = the folder / rel; returns f->path (overwritten by the next call). */
const char *vkg_ck_path(vkg_ck_fixture *f, const char *rel);
/* The training state of a run at `step` (every field set, most to values that wrap 32 bits). */
vkg_checkpoint_state vkg_ck_state(uint64_t step);
/* Write the checkpoint of step under the folder's "ck" (f's parameters and moments). */
void vkg_ck_write(vkg_ck_fixture *f, uint64_t step);
/* Fails the test unless the error message holds a and b (b may be NULL). */
void vkg_ck_expect_msg(const char *a, const char *b);
/* A file written whole (read one whole with vkg_test_must_read). */
void vkg_ck_spit(const char *path, const unsigned char *b, size_t n);
int vkg_ck_exists(vkg_ck_fixture *f, const char *rel);

#endif
