/* The ranks of one training job as threads of a test, joined by the inproc transport (each with
 * its own trainer and device), and the token shards they train on. */
#ifndef VKG_TEST_RANK_THREADS_H
#define VKG_TEST_RANK_THREADS_H

#include <stddef.h>
#include <stdint.h>

#include "vkgpt/comm.h"
#include "vkgpt/train.h"

typedef struct vkg_test_rank {
    int rank;
    vkg_comm_ctx_t *ctx; /* the job's inproc context */
    uint64_t job_id;     /* one per job, shared by its ranks */
    void *job;           /* the caller's */
} vkg_test_rank;

/* Run fn for ranks 0..world-1 (world <= 16) as threads and wait for all; fails the test when the
 * context or a thread cannot be made. */
void vkg_test_run_ranks(int world, void *job, void *(*fn)(void *));

/* The end of a rank: destroy its trainer (NULL-safe) and return its final status: st when it
 * failed (its message in err), else VKG_ERR_VULKAN when the validation layer reported anything
 * over the trainer's life (the count and first message in err), else VKG_OK. */
vkg_status vkg_test_rank_finish(vkg_trainer_t **t, vkg_status st, char *err, size_t cap);

/* The outcome of a job's world ranks: st[r] and the message at err + r * stride (the job's
 * per-rank arrays). ranks_ok fails the test unless every rank succeeded and, when params is not
 * NULL, every rank holds rank 0's n parameters (params[r]); ranks_refused unless every rank
 * failed with want and a message containing needle (each rank's outcome is printed). */
void vkg_test_ranks_ok(int world, const vkg_status *st, const char *err, size_t stride,
                       float *const *params, size_t n);
void vkg_test_ranks_refused(int world, const vkg_status *st, const char *err, size_t stride,
                            vkg_status want, const char *needle);

/* A rank's configuration to start from: the defaults, with the validation layer on and the device
 * VKGPT_DEVICE names (the first suitable one when unset). */
vkg_train_config vkg_test_rank_config(void);

/* c joins the job of rank a as rank a->rank of world: the inproc transport of a's context, a 30 s
 * timeout. */
void vkg_test_rank_join(vkg_train_config *c, const vkg_test_rank *a, int world);

/* The folder of a test program's files: made (vkg_test_tmp_make with prefix; 0 on success) by its
 * group setup, removed by its teardown; vkg_test_path_in writes the path of name in it. */
int vkg_test_dir_make(const char *prefix);
int vkg_test_dir_remove(void);
/* vkg_test_dir_remove as a cmocka group teardown. */
int vkg_test_dir_teardown(void **state);
void vkg_test_path_in(char *out, size_t cap, const char *name);

/* An llm.c token shard of n tokens below vocab at path: uniform random, or (markov) a chain where
 * token t is followed by (7t + 3) mod vocab three times in four, so a model can learn it. */
void vkg_test_write_shard(const char *path, size_t n, uint64_t seed, int vocab, int markov);

/* The model families the strategy tests run their comparisons on besides GPT-2 (hidden size 32):
 *  - LLAMA: 4 heads over 2 kv heads (GQA), RMSNorm, rope, SwiGLU (48), tied head, no biases;
 *  - QWEN3: QK-norm, an untied lm_head, head_dim 16 (not 32/4), 4 heads over 2 kv heads;
 *  - QWEN2: q/k/v biases, tied, 2 heads over 1 kv head (MQA). */
typedef enum { VKG_TEST_GPT2, VKG_TEST_LLAMA, VKG_TEST_QWEN3, VKG_TEST_QWEN2 } vkg_test_family;

/* The family's name ("gpt2", "llama", "qwen3", "qwen2"). */
const char *vkg_test_family_name(vkg_test_family f);

/* For GPT2: NULL (the trainer's GPT-2 fields describe the model). Otherwise writes the family's
 * config.json (layers, vocab, max positions) as <name>_L<layers>.json in the test's folder and
 * returns out (cap bytes) holding its path, for vkg_train_config.model. Fails the test when the
 * file cannot be written. */
const char *vkg_test_family_config(vkg_test_family f, int layers, int vocab, int max_pos, char *out,
                                   size_t cap);

#endif
