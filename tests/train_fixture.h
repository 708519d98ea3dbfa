/* What the trainer's tests (test_train.c, test_train_refused.c) share: the tiny model and run
 * they start from, llm.c shards of a small "language" in a temporary folder, files read, copied
 * and compared in it, steps run and recorded, refusals checked for their status and message, and
 * trainers destroyed only after the Khronos validation layer reported nothing.
 * Not here: the checks themselves, or anything about a rank or a job (rank_threads.h). */
#ifndef VKG_TEST_TRAIN_FIXTURE_H
#define VKG_TEST_TRAIN_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "vkgpt/train.h"

/* Model L=2 C=32 NH=4 maxT=16 V=100 (Vp=128); micro-batch B=2 x T=8; total batch 2 x B x T. */
enum { L = 2, C = 32, NH = 4, MAXT = 16, V = 100, B = 2, T = 8, STEPS = 6 };
#define PATH_CAP 512

/* cmocka group setup/teardown: a new temporary folder that every path below lies in, and its
 * removal with everything in it. */
int vkg_test_train_setup(void **state);
int vkg_test_train_teardown(void **state);

/* buf (PATH_CAP bytes) = the temporary folder / the formatted name; returns buf. */
const char *vkg_test_path_in(char *buf, const char *fmt, ...);
/* out (PATH_CAP bytes) = dir/name; returns out. */
const char *vkg_test_join(char *out, const char *dir, const char *name);
/* Fails the test unless a and b hold the same bytes. */
void vkg_test_expect_same_file(const char *a, const char *b);
void vkg_test_copy_file(const char *from, const char *to);
int vkg_test_exists(const char *path);

/* Train data: two shards, 4 + 3 = 7 global batches of B*T tokens, so 6 steps of 2 micro-batches
 * cross an epoch boundary (and reshuffle) after the mid-run resume at step 3. */
void vkg_test_train_data(const char *tag);

/* The tiny run every test starts from (strings point into bufs, which must outlive create). */
typedef struct vkg_test_run_paths {
    char data[PATH_CAP], val[PATH_CAP], ckpt[PATH_CAP];
} vkg_test_run_paths;

vkg_train_config vkg_test_train_config(vkg_test_run_paths *p, const char *tag, const char *ckpt);

/* Destroy the trainer; the validation layer must have reported nothing over its whole life, its
 * device's destruction (objects left behind) included. */
void vkg_test_trainer_destroy_clean(vkg_trainer_t **t);

/* Fails the test unless got is want and the error message names needle1 and needle2 (each may be
 * NULL); prints the refusal. */
void vkg_test_expect_refused(vkg_status got, vkg_status want, const char *needle1,
                             const char *needle2);

typedef struct vkg_test_step_record {
    float loss[STEPS], lr[STEPS], norm[STEPS], eval[STEPS];
} vkg_test_step_record;

/* Run steps first..last (1-based, inclusive) and record them. */
void vkg_test_train_steps(vkg_trainer_t *t, int first, int last, vkg_test_step_record *rec);

#endif
