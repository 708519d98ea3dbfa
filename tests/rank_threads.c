/* Threads as the ranks of a training job, and token shards for them (see rank_threads.h). */
#include "rank_threads.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"
#include "vkgpt/io.h"

void vkg_test_run_ranks(int world, void *job, void *(*fn)(void *))
{
    static uint64_t counter;
    vkg_comm_ctx_t *ctx = NULL;
    pthread_t th[16];
    vkg_test_rank args[16];
    assert_true(world >= 1 && world <= 16);
    fflush(stdout); /* what the test said so far survives a death among the ranks */
    assert_int_equal(vkg_comm_ctx_create(&ctx), VKG_OK);
    uint64_t job_id = 0x5eed00u + ++counter;
    for (int r = 0; r < world; r++) {
        args[r] = (vkg_test_rank){.rank = r, .ctx = ctx, .job_id = job_id, .job = job};
        assert_int_equal(pthread_create(&th[r], NULL, fn, &args[r]), 0);
    }
    for (int r = 0; r < world; r++)
        pthread_join(th[r], NULL);
    vkg_comm_ctx_destroy(&ctx);
}

vkg_train_config vkg_test_rank_config(void)
{
    vkg_train_config c = vkg_train_config_default();
    c.validation = 1;
    c.device = getenv("VKGPT_DEVICE");
    return c;
}

void vkg_test_rank_join(vkg_train_config *c, const vkg_test_rank *a, int world)
{
    c->par.comm.world_size = world, c->par.comm.rank = a->rank;
    c->par.comm.transport = VKG_COMM_INPROC, c->par.comm.ctx = a->ctx,
    c->par.comm.job_id = a->job_id;
    c->par.comm.timeout_ms = 30000;
}

static char test_dir[512];

int vkg_test_dir_make(const char *prefix)
{
    return vkg_test_tmp_make(test_dir, sizeof test_dir, prefix);
}

int vkg_test_dir_remove(void)
{
    return vkg_test_tmp_remove(test_dir);
}

int vkg_test_dir_teardown(void **state)
{
    (void)state;
    return vkg_test_dir_remove();
}

void vkg_test_path_in(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", test_dir, name);
}

vkg_status vkg_test_rank_finish(vkg_trainer_t **t, vkg_status st, char *err, size_t cap)
{
    if (st != VKG_OK)
        snprintf(err, cap, "%s", vkg_error_message());
    char first[1024]; /* messages over the trainer's life, its device's destruction included */
    int msgs = vkg_trainer_destroy_report(t, first, sizeof first);
    if (st == VKG_OK && msgs) {
        snprintf(err, cap, "%d validation messages: %.400s", msgs, first);
        st = VKG_ERR_VULKAN;
    }
    return st;
}

void vkg_test_ranks_ok(int world, const vkg_status *st, const char *err, size_t stride,
                       float *const *params, size_t n)
{
    for (int r = 0; r < world; r++)
        if (st[r] != VKG_OK)
            fail_msg("rank %d of %d failed: %s: %s", r, world, vkg_status_name(st[r]),
                     err + (size_t)r * stride);
    for (int r = 1; r < world && params; r++)
        if (memcmp(params[r], params[0], n * sizeof(float)))
            fail_msg("rank %d's parameters differ from rank 0's", r);
}

void vkg_test_ranks_refused(int world, const vkg_status *st, const char *err, size_t stride,
                            vkg_status want, const char *needle)
{
    for (int r = 0; r < world; r++) {
        const char *msg = err + (size_t)r * stride;
        printf("rank %d: %s: %s\n", r, vkg_status_name(st[r]), msg);
        fflush(stdout); /* said even if the process then dies (ctest reads a pipe) */
        if (st[r] != want || !strstr(msg, needle))
            fail_msg("rank %d: expected %s naming '%s', got %s: %s", r, vkg_status_name(want),
                     needle, vkg_status_name(st[r]), msg);
    }
}

void vkg_test_write_shard(const char *path, size_t n, uint64_t seed, int vocab, int markov)
{
    uint16_t *tok = malloc(n * sizeof *tok);
    assert_non_null(tok);
    vkg_test_rng r;
    vkg_test_rng_seed(&r, seed);
    uint16_t t = (uint16_t)(vkg_test_rng_u64(&r) % (uint64_t)vocab);
    for (size_t i = 0; i < n; i++) {
        tok[i] = t;
        if (!markov || vkg_test_rng_u64(&r) % 4 == 0)
            t = (uint16_t)(vkg_test_rng_u64(&r) % (uint64_t)vocab);
        else
            t = (uint16_t)((t * 7 + 3) % vocab);
    }
    assert_int_equal(vkg_shard_write(path, tok, n), VKG_OK);
    free(tok);
}

const char *vkg_test_family_name(vkg_test_family f)
{
    static const char *const names[] = {"gpt2", "llama", "qwen3", "qwen2"};
    return names[f];
}

const char *vkg_test_family_config(vkg_test_family f, int layers, int vocab, int max_pos, char *out,
                                   size_t cap)
{
    if (f == VKG_TEST_GPT2)
        return NULL;
    /* heads, kv heads, head_dim (0: none written), tied */
    static const int shape[][4] = {{0}, {4, 2, 0, 1}, {4, 2, 16, 0}, {2, 1, 0, 1}};
    char name[64], head_dim[32] = "";
    snprintf(name, sizeof name, "%s_L%d.json", vkg_test_family_name(f), layers);
    vkg_test_path_in(out, cap, name);
    if (shape[f][2])
        snprintf(head_dim, sizeof head_dim, "\"head_dim\":%d,", shape[f][2]);
    FILE *fp = fopen(out, "w");
    assert_non_null(fp);
    fprintf(fp,
            "{\"model_type\":\"%s\",\"hidden_size\":32,\"intermediate_size\":48,"
            "\"num_hidden_layers\":%d,\"num_attention_heads\":%d,\"num_key_value_heads\":%d,%s"
            "\"vocab_size\":%d,\"max_position_embeddings\":%d,\"rms_norm_eps\":1e-5,"
            "\"rope_theta\":10000.0,\"tie_word_embeddings\":%s,\"hidden_act\":\"silu\"}\n",
            vkg_test_family_name(f), layers, shape[f][0], shape[f][1], head_dim, vocab, max_pos,
            shape[f][3] ? "true" : "false");
    assert_int_equal(fclose(fp), 0);
    return out;
}
