/* What the trainer's tests share (train_fixture.h): the temporary folder, the tiny run's data and
 * configuration, file helpers, steps recorded, refusals and clean destruction checked.
 * Not here: the checks themselves (test_train.c, test_train_refused.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gpu_fixture.h"
#include "testutil.h"
#include "train_fixture.h"
#include "vkgpt/io.h"

static char tmp_root[PATH_CAP];

const char *vkg_test_path_in(char *buf, const char *fmt, ...)
{
    char rel[PATH_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof rel, fmt, ap);
    va_end(ap);
    int len = snprintf(buf, PATH_CAP, "%s/%s", tmp_root, rel);
    assert_true(len > 0 && len < PATH_CAP);
    return buf;
}

const char *vkg_test_join(char *out, const char *dir, const char *name)
{
    int len = snprintf(out, PATH_CAP, "%s/%s", dir, name);
    assert_true(len > 0 && len < PATH_CAP);
    return out;
}

int vkg_test_train_setup(void **state)
{
    (void)state;
    return vkg_test_tmp_make(tmp_root, sizeof tmp_root, "vkg_test_train");
}

int vkg_test_train_teardown(void **state)
{
    (void)state;
    return vkg_test_tmp_remove(tmp_root);
}

/* A shard of n tokens from a small "language": mostly (prev * 7 + 3) % V, sometimes random. */
static void write_shard(const char *path, size_t n, uint64_t seed)
{
    uint16_t *tok = malloc(n * sizeof *tok);
    assert_non_null(tok);
    vkg_test_rng r;
    vkg_test_rng_seed(&r, seed);
    uint16_t t = (uint16_t)(vkg_test_rng_u64(&r) % V);
    for (size_t i = 0; i < n; i++) {
        tok[i] = t;
        t = vkg_test_rng_u64(&r) % 4 == 0 ? (uint16_t)(vkg_test_rng_u64(&r) % V)
                                          : (uint16_t)((t * 7 + 3) % V);
    }
    VKG_ASSERT_OK(vkg_shard_write(path, tok, n));
    free(tok);
}

void vkg_test_expect_same_file(const char *a, const char *b)
{
    size_t na, nb;
    unsigned char *x = vkg_test_must_read(a, &na), *y = vkg_test_must_read(b, &nb);
    if (na != nb || memcmp(x, y, na) != 0)
        fail_msg("%s and %s differ (%zu and %zu bytes)", a, b, na, nb);
    free(x);
    free(y);
}

void vkg_test_copy_file(const char *from, const char *to)
{
    size_t n;
    unsigned char *buf = vkg_test_must_read(from, &n);
    FILE *f = fopen(to, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
    free(buf);
}

int vkg_test_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

void vkg_test_train_data(const char *tag)
{
    char p[PATH_CAP];
    write_shard(vkg_test_path_in(p, "%s_train_000.bin", tag), 4 * B * T + 1, 11);
    write_shard(vkg_test_path_in(p, "%s_train_001.bin", tag), 3 * B * T + 1, 12);
    write_shard(vkg_test_path_in(p, "%s_val.bin", tag), 3 * B * T + 1, 13);
}

vkg_train_config vkg_test_train_config(vkg_test_run_paths *p, const char *tag, const char *ckpt)
{
    vkg_train_config c = vkg_train_config_default();
    c.validation = 1;
    c.device = getenv("VKGPT_DEVICE");
    c.layers = L, c.heads = NH, c.channels = C, c.max_seq_len = MAXT, c.vocab_size = V;
    c.seed = 1234;
    c.data = vkg_test_path_in(p->data, "%s_train_*.bin", tag);
    c.val_data = vkg_test_path_in(p->val, "%s_val.bin", tag);
    c.shuffle = 1;
    c.batch = B, c.seq = T, c.total_batch = 2 * B * T;
    c.steps = STEPS;
    c.lr = 1e-2f, c.warmup = 2, c.schedule = VKG_SCHEDULE_COSINE;
    c.weight_decay = 0.1f, c.grad_clip = 1.0f;
    c.eval_every = 2, c.eval_batches = 2;
    c.ckpt_dir = ckpt ? vkg_test_path_in(p->ckpt, "%s", ckpt) : NULL;
    c.keep_checkpoints = 0;
    return c;
}

void vkg_test_trainer_destroy_clean(vkg_trainer_t **t)
{
    char first[1024];
    int n = vkg_trainer_destroy_report(t, first, sizeof first);
    if (n != 0)
        fail_msg("the validation layer reported %d message(s); the first: %s", n, first);
}

void vkg_test_expect_refused(vkg_status got, vkg_status want, const char *needle1,
                             const char *needle2)
{
    const char *msg = vkg_error_message();
    if (got != want)
        fail_msg("expected %s, got %s: %s", vkg_status_name(want), vkg_status_name(got), msg);
    if ((needle1 && !strstr(msg, needle1)) || (needle2 && !strstr(msg, needle2)))
        fail_msg("the message does not name '%s'%s%s: %s", needle1, needle2 ? " and " : "",
                 needle2 ? needle2 : "", msg);
    printf("refused as expected (%s): %s\n", vkg_status_name(got), msg);
}

void vkg_test_train_steps(vkg_trainer_t *t, int first, int last, vkg_test_step_record *rec)
{
    for (int s = first; s <= last; s++) {
        assert_false(vkg_trainer_done(t));
        vkg_step_info info;
        VKG_ASSERT_OK(vkg_trainer_step(t, &info));
        assert_int_equal(info.step, s);
        assert_true(isfinite(info.loss));
        assert_int_equal(info.has_eval, s % 2 == 0);
        assert_int_equal(info.tokens, (uint64_t)s * 2 * B * T);
        rec->loss[s - 1] = info.loss, rec->lr[s - 1] = info.lr;
        rec->norm[s - 1] = info.grad_norm, rec->eval[s - 1] = info.has_eval ? info.eval_loss : 0;
    }
}
