/* What the checkpoint tests share (ckpt_fixture.h): a temporary folder and a tiny model's
 * parameters and moments per test, checkpoints of a given step written into it, and file
 * helpers. Not here: the checks themselves (test_checkpoint.c, test_checkpoint_resume.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "os/file.h"
#include "ckpt_fixture.h"
#include "testutil.h"

vkg_model_config vkg_ck_config(int maxT)
{
    vkg_model_config c = {.max_seq_len = maxT,
                          .vocab_size = 50,
                          .padded_vocab_size = vkg_model_pad_vocab(50),
                          .num_layers = 2,
                          .num_heads = 2,
                          .channels = 8};
    return c;
}

int vkg_ck_setup(void **state)
{
    vkg_ck_fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/vkg_test_ckpt_XXXXXX");
    if (!f || vkg_os_mkdtemp(f->dir) != 0)
        return -1;
    f->cfg = vkg_ck_config(16);
    f->n = vkg_model_num_params(&f->cfg);
    f->params = vkg_test_alloc(f->n);
    f->m = vkg_test_alloc(f->n);
    f->v = vkg_test_alloc(f->n);
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 2024);
    vkg_test_fill_uniform(&r, f->params, f->n, -1.0f, 1.0f);
    vkg_test_fill_uniform(&r, f->m, f->n, -1e-3f, 1e-3f);
    vkg_test_fill_uniform(&r, f->v, f->n, 0.0f, 1e-6f);
    *state = f;
    return 0;
}

int vkg_ck_teardown(void **state)
{
    vkg_ck_fixture *f = *state;
    vkg_test_tmp_remove(f->dir);
    free(f->params);
    free(f->m);
    free(f->v);
    free(f);
    return 0;
}

const char *vkg_ck_path(vkg_ck_fixture *f, const char *rel)
{
    snprintf(f->path, sizeof f->path, "%s/%s", f->dir, rel);
    return f->path;
}

vkg_checkpoint_state vkg_ck_state(uint64_t step)
{
    vkg_checkpoint_state s;
    memset(&s, 0, sizeof s);
    s.hp = vkg_train_hparams_default();
    s.hp.batch_size = 3;
    s.hp.seq_len = 16;
    s.hp.total_batch = 96;
    s.hp.world_size = 2;
    s.hp.shuffle = 1;
    s.hp.seed = 0x123456789abcdefull;
    s.hp.schedule.kind = VKG_SCHEDULE_LINEAR;
    s.hp.schedule.lr = 6e-4f;
    s.hp.schedule.lr_min_frac = 0.1f;
    s.hp.schedule.warmup = 7;
    s.hp.schedule.total_steps = 5000;
    s.hp.weight_decay = 0.1f;
    s.hp.beta2 = 0.95f;
    s.step = step;
    s.tokens = step * 96 + 0x100000000ull;
    for (int i = 0; i < VKG_CHECKPOINT_NUM_RNG; i++)
        s.rng[i] = 0xfedcba9876543210ull ^ (step * 31 + (uint64_t)i);
    vkg_data_pos d = {3, step % 11, 11, 1, 0x123456789abcdefull};
    s.data_pos = d;
    return s;
}

void vkg_ck_write(vkg_ck_fixture *f, uint64_t step)
{
    vkg_checkpoint_state s = vkg_ck_state(step);
    char out[512];
    assert_int_equal(vkg_checkpoint_write(vkg_ck_path(f, "ck"), &f->cfg, f->params, f->m, f->v, &s,
                                          out, sizeof out),
                     VKG_OK);
    char want[512];
    snprintf(want, sizeof want, "%s/ck/step_%08llu", f->dir, (unsigned long long)step);
    assert_string_equal(out, want);
}

void vkg_ck_expect_msg(const char *a, const char *b)
{
    const char *msg = vkg_error_message();
    if (!strstr(msg, a) || (b && !strstr(msg, b))) {
        fprintf(stderr, "error message \"%s\" lacks \"%s\" or \"%s\"\n", msg, a, b ? b : "");
        fail();
    }
}

void vkg_ck_spit(const char *path, const unsigned char *b, size_t n)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(b, 1, n, fp), n);
    fclose(fp);
}

int vkg_ck_exists(vkg_ck_fixture *f, const char *rel)
{
    return access(vkg_ck_path(f, rel), F_OK) == 0;
}
