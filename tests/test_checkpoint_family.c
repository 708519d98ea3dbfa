/* Tests of checkpoints of every model family (src/train/ckptmodel.c, statefile.c's family slots):
 * Llama-family checkpoints (GQA, SwiGLU, RMSNorm, rope with and without Llama 3's scaling,
 * QK-norm, q/k/v biases, tied and untied) written as config.json + model.safetensors and loaded
 * back with configuration, parameters, m and v bit for bit; GPT-2's still model.bin, byte for
 * byte vkg_modelfile_write's; a state.bin of another configuration refused naming the field; the
 * other kind of model file refused naming both files; a damaged model.safetensors refused, with
 * find_latest and resume falling back to the older checkpoint; a state.bin with the family slots
 * zero (as written before them) read as GPT-2; hostile family slots refused before anything is
 * counted; pruning either kind. Host only: no device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt_fixture.h"
#include "testutil.h"
#include "train/checkpoint.h"
#include "vkgpt/io.h"

/* A tiny Llama: L 2, NH 4, NKV 2, C 32, SwiGLU of 48, RMSNorm (eps 1e-6), rope (theta left 0:
 * 10000), no biases, untied. */
static vkg_model_config llama_cfg(void)
{
    vkg_model_config c = vkg_ck_config(16);
    c.num_heads = 4, c.channels = 32, c.num_kv_heads = 2, c.mlp_hidden = 48;
    c.mlp = VKG_MLP_SWIGLU, c.norm = VKG_NORM_RMS, c.pos = VKG_POS_ROPE;
    c.norm_eps = 1e-6f, c.bias = VKG_BIAS_NONE, c.untied = 1;
    return c;
}

/* Qwen 3's shape: QK-norm, head_dim 16 (NH D != C), rope theta 1e6 with Llama 3's scaling, tied. */
static vkg_model_config qwen3_cfg(void)
{
    vkg_model_config c = llama_cfg();
    c.qk_norm = 1, c.head_dim = 16, c.untied = 0, c.rope_theta = 1e6f;
    c.rope_factor = 8.0f, c.rope_low_freq_factor = 1.0f, c.rope_high_freq_factor = 4.0f;
    c.rope_original_max = 16;
    return c;
}

/* Qwen 2's: biases on q, k and v, every head its own k/v (num_kv_heads 0), untied. */
static vkg_model_config qwen2_cfg(void)
{
    vkg_model_config c = llama_cfg();
    c.bias = VKG_BIAS_QKV, c.num_kv_heads = 0;
    return c;
}

/* Random parameters (padding rows of the vocabulary 0, as a trainer keeps them), m and v. */
typedef struct model {
    vkg_model_config cfg;
    size_t n;
    float *params, *m, *v;
} model;

static model make_model(vkg_model_config cfg, uint64_t seed)
{
    model x = {.cfg = cfg, .n = vkg_model_num_params(&cfg)};
    vkg_test_rng r;
    vkg_test_rng_seed(&r, seed);
    x.params = vkg_test_random(&r, x.n, -1.0f, 1.0f);
    x.m = vkg_test_random(&r, x.n, -1e-3f, 1e-3f);
    x.v = vkg_test_random(&r, x.n, 0.0f, 1e-6f);
    vkg_param_table t;
    vkg_model_params(&cfg, &t);
    for (int i = 0; i < t.n; i++)
        if (t.t[i].used_rows < t.t[i].rows)
            memset(x.params + t.t[i].offset + (size_t)t.t[i].used_rows * t.t[i].cols, 0,
                   (size_t)(t.t[i].rows - t.t[i].used_rows) * t.t[i].cols * sizeof(float));
    return x;
}

static void free_model(model *x)
{
    free(x->params), free(x->m), free(x->v);
}

static void write_ckpt(vkg_ck_fixture *f, const model *x, uint64_t step)
{
    vkg_checkpoint_state s = vkg_ck_state(step);
    assert_int_equal(
        vkg_checkpoint_write(vkg_ck_path(f, "ck"), &x->cfg, x->params, x->m, x->v, &s, NULL, 0),
        VKG_OK);
}

/* f->dir/ck/step_<step>/name, or the step's directory when name is NULL. */
static const char *step_file(vkg_ck_fixture *f, uint64_t step, const char *name)
{
    char rel[128];
    snprintf(rel, sizeof rel, "ck/step_%08llu%s%s", (unsigned long long)step, name ? "/" : "",
             name ? name : "");
    return vkg_ck_path(f, rel);
}

static int has(vkg_ck_fixture *f, uint64_t step, const char *name)
{
    char rel[128];
    snprintf(rel, sizeof rel, "ck/step_%08llu/%s", (unsigned long long)step, name);
    return vkg_ck_exists(f, rel);
}

static void expect_loads(vkg_ck_fixture *f, const model *x, uint64_t step)
{
    vkg_checkpoint c;
    assert_int_equal(vkg_checkpoint_load(step_file(f, step, NULL), &c), VKG_OK);
    assert_memory_equal(&c.cfg, &x->cfg, sizeof c.cfg);
    assert_int_equal(c.num_params, x->n);
    assert_memory_equal(c.params, x->params, x->n * sizeof(float));
    assert_memory_equal(c.m, x->m, x->n * sizeof(float));
    assert_memory_equal(c.v, x->v, x->n * sizeof(float));
    assert_true(c.state.step == step);
    vkg_checkpoint_deinit(&c);
}

static void test_llama_family_roundtrip(void **state)
{
    vkg_ck_fixture *f = *state;
    vkg_model_config cfgs[3] = {llama_cfg(), qwen3_cfg(), qwen2_cfg()};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(vkg_model_config_validate(&cfgs[k]), VKG_OK);
        model x = make_model(cfgs[k], 100 + (uint64_t)k);
        uint64_t step = 10 + (uint64_t)k;
        write_ckpt(f, &x, step);
        assert_true(has(f, step, "config.json") && has(f, step, "model.safetensors"));
        assert_false(has(f, step, "model.bin"));
        char latest[512];
        uint64_t got = 0;
        assert_int_equal(
            vkg_checkpoint_find_latest(vkg_ck_path(f, "ck"), latest, sizeof latest, &got), VKG_OK);
        assert_true(got == step);
        expect_loads(f, &x, step);
        /* the state file's header alone holds the whole configuration */
        vkg_model_config sc;
        vkg_checkpoint_state st;
        size_t n;
        assert_int_equal(
            vkg_statefile_read(step_file(f, step, "state.bin"), &sc, &st, &n, NULL, NULL), VKG_OK);
        assert_memory_equal(&sc, &x.cfg, sizeof sc);
        /* the readers of a model (sample, --init) */
        vkg_model_config rc;
        float *p = NULL;
        assert_int_equal(vkg_checkpoint_read_model(step_file(f, step, NULL), &rc, &p), VKG_OK);
        assert_memory_equal(&rc, &x.cfg, sizeof rc);
        assert_memory_equal(p, x.params, x.n * sizeof(float));
        free(p);
        free_model(&x);
    }
    int removed = 0; /* pruning: the two older ones go, files and folders */
    assert_int_equal(vkg_checkpoint_prune(vkg_ck_path(f, "ck"), 1, 12, &removed), VKG_OK);
    assert_int_equal(removed, 2);
    assert_false(vkg_ck_exists(f, "ck/step_00000010"));
    assert_false(vkg_ck_exists(f, "ck/step_00000011"));
    assert_true(vkg_ck_exists(f, "ck/step_00000012/DONE"));
}

static void test_gpt2_writes_model_bin(void **state)
{
    vkg_ck_fixture *f = *state;
    vkg_ck_write(f, 5);
    assert_int_equal(vkg_modelfile_write(vkg_ck_path(f, "ref.bin"), &f->cfg, f->params), VKG_OK);
    size_t na, nb;
    unsigned char *a = vkg_test_must_read(vkg_ck_path(f, "ref.bin"), &na);
    unsigned char *b = vkg_test_must_read(vkg_ck_path(f, "ck/step_00000005/model.bin"), &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na);
    free(a), free(b);
    assert_false(vkg_ck_exists(f, "ck/step_00000005/config.json"));
    assert_false(vkg_ck_exists(f, "ck/step_00000005/model.safetensors"));
    /* the family slots of a GPT-2 state file are 0, as in files written before they existed:
     * such a file reads as GPT-2 */
    uint32_t *h = vkg_test_must_read(vkg_ck_path(f, "ck/step_00000005/state.bin"), &na);
    for (int s = 58; s < 256; s++)
        assert_int_equal(h[s], 0);
    free(h);
    vkg_checkpoint c;
    assert_int_equal(vkg_checkpoint_load(vkg_ck_path(f, "ck/step_00000005"), &c), VKG_OK);
    assert_true(vkg_model_is_gpt2(&c.cfg));
    assert_memory_equal(&c.cfg, &f->cfg, sizeof c.cfg);
    vkg_checkpoint_deinit(&c);
}

/* Set header slot `slot` of the state file at path to value, the trailing CRC made valid. */
static void poke_state(const char *path, int slot, uint32_t value)
{
    size_t n;
    unsigned char *b = vkg_test_must_read(path, &n);
    memcpy(b + 4 * slot, &value, 4);
    uint32_t crc = vkg_test_crc32(b, n - 4);
    memcpy(b + n - 4, &crc, 4);
    vkg_ck_spit(path, b, n);
    free(b);
}

static void test_documented_slots_and_hostile_header(void **state)
{
    vkg_ck_fixture *f = *state;
    model x = make_model(qwen3_cfg(), 7);
    write_ckpt(f, &x, 1);
    size_t n;
    uint32_t *h = vkg_test_must_read(step_file(f, 1, "state.bin"), &n);
    uint32_t theta_bits, eps_bits;
    memcpy(&theta_bits, &x.cfg.rope_theta, 4);
    memcpy(&eps_bits, &x.cfg.norm_eps, 4);
    assert_int_equal(h[64], 2);  /* num_kv_heads */
    assert_int_equal(h[65], 16); /* head_dim */
    assert_int_equal(h[66], 48); /* mlp_hidden */
    assert_int_equal(h[67], VKG_MLP_SWIGLU);
    assert_int_equal(h[68], VKG_NORM_RMS);
    assert_int_equal(h[69], eps_bits);
    assert_int_equal(h[70], VKG_POS_ROPE);
    assert_int_equal(h[71], theta_bits);
    assert_int_equal(h[75], 16); /* rope_original_max */
    assert_int_equal(h[76], 1);  /* qk_norm */
    assert_int_equal(h[77], VKG_BIAS_NONE);
    assert_int_equal(h[78], 0); /* tied */
    free(h);
    vkg_model_config sc;
    vkg_checkpoint_state st;
    size_t np;
    const char *path = step_file(f, 1, "state.bin");
    poke_state(path, 65, 1u << 30); /* head_dim 2^30: q's rows past an int */
    assert_int_equal(vkg_statefile_read(path, &sc, &st, &np, NULL, NULL), VKG_ERR_FORMAT);
    vkg_ck_expect_msg(path, "more than 2^31 - 1");
    poke_state(path, 65, 16);
    poke_state(path, 66, 0x7fffffffu); /* mlp_hidden 2^31 - 1: the gate and up rows past an int */
    assert_int_equal(vkg_statefile_read(path, &sc, &st, &np, NULL, NULL), VKG_ERR_FORMAT);
    vkg_ck_expect_msg(path, "more than 2^31 - 1");
    poke_state(path, 66, 48);
    poke_state(path, 4, 1u << 30); /* 2^30 layers: valid shapes, an implausible count */
    assert_int_equal(vkg_statefile_read(path, &sc, &st, &np, NULL, NULL), VKG_ERR_FORMAT);
    vkg_ck_expect_msg(path, "implausible");
    poke_state(path, 4, (uint32_t)x.cfg.num_layers);
    poke_state(path, 66, 48);
    assert_int_equal(vkg_statefile_read(path, &sc, &st, &np, NULL, NULL), VKG_OK);
    free_model(&x);
}

static void expect_refused(vkg_ck_fixture *f, uint64_t step, const char *a, const char *b)
{
    vkg_checkpoint c;
    assert_int_equal(vkg_checkpoint_load(step_file(f, step, NULL), &c), VKG_ERR_FORMAT);
    assert_null(c.params);
    vkg_ck_expect_msg(a, b);
}

static void test_mismatch_refused(void **state)
{
    vkg_ck_fixture *f = *state;
    model x = make_model(llama_cfg(), 3);
    char state_path[512], json[512];
    vkg_checkpoint_state s;
    /* 1: a state.bin of another configuration (another count: num_kv_heads) */
    write_ckpt(f, &x, 1);
    vkg_model_config other = x.cfg;
    other.num_kv_heads = 4;
    model y = make_model(other, 4);
    s = vkg_ck_state(1);
    snprintf(state_path, sizeof state_path, "%s", step_file(f, 1, "state.bin"));
    snprintf(json, sizeof json, "%s", step_file(f, 1, "config.json"));
    assert_int_equal(vkg_statefile_write(state_path, &other, &s, y.m, y.v), VKG_OK);
    expect_refused(f, 1, state_path, "num_kv_heads is 4");
    vkg_ck_expect_msg(json, "2 in the model");
    /* 2: the same count, another float: norm_eps */
    write_ckpt(f, &x, 2);
    other = x.cfg;
    other.norm_eps = 1e-5f;
    s = vkg_ck_state(2);
    snprintf(state_path, sizeof state_path, "%s", step_file(f, 2, "state.bin"));
    assert_int_equal(vkg_statefile_write(state_path, &other, &s, x.m, x.v), VKG_OK);
    expect_refused(f, 2, state_path, "norm_eps");
    /* 3: a Llama state.bin beside GPT-2's model.bin */
    vkg_ck_write(f, 3);
    s = vkg_ck_state(3);
    snprintf(state_path, sizeof state_path, "%s", step_file(f, 3, "state.bin"));
    assert_int_equal(vkg_statefile_write(state_path, &x.cfg, &s, x.m, x.v), VKG_OK);
    expect_refused(f, 3, state_path, "model.bin");
    /* 4: a GPT-2 state.bin beside a Llama's config.json + model.safetensors */
    write_ckpt(f, &x, 4);
    s = vkg_ck_state(4);
    snprintf(state_path, sizeof state_path, "%s", step_file(f, 4, "state.bin"));
    assert_int_equal(vkg_statefile_write(state_path, &f->cfg, &s, f->m, f->v), VKG_OK);
    expect_refused(f, 4, state_path, "config.json");
    /* 5: both kinds in one checkpoint */
    write_ckpt(f, &x, 5);
    assert_int_equal(vkg_modelfile_write(step_file(f, 5, "model.bin"), &f->cfg, f->params), VKG_OK);
    expect_refused(f, 5, "model.bin", "config.json");
    char latest[512];
    uint64_t got = 0; /* none of them counts as complete */
    assert_int_equal(vkg_checkpoint_find_latest(vkg_ck_path(f, "ck"), latest, sizeof latest, &got),
                     VKG_ERR_NOT_FOUND);
    /* a padding row that is not 0 cannot be stored: refused before anything is written */
    x.params[(size_t)x.cfg.vocab_size * (size_t)x.cfg.channels + 3] = 0.5f;
    s = vkg_ck_state(6);
    assert_int_equal(
        vkg_checkpoint_write(vkg_ck_path(f, "ck"), &x.cfg, x.params, x.m, x.v, &s, NULL, 0),
        VKG_ERR_INVALID_ARG);
    vkg_ck_expect_msg("wte", "padding row");
    assert_false(vkg_ck_exists(f, "ck/step_00000006"));
    free_model(&x);
    free_model(&y);
}

static void test_damaged_safetensors_falls_back(void **state)
{
    vkg_ck_fixture *f = *state;
    model x = make_model(llama_cfg(), 5);
    for (uint64_t step = 1; step <= 3; step++)
        write_ckpt(f, &x, step);
    char st2[512], st3[512];
    snprintf(st2, sizeof st2, "%s", step_file(f, 2, "model.safetensors"));
    snprintf(st3, sizeof st3, "%s", step_file(f, 3, "model.safetensors"));
    size_t n;
    unsigned char *b = vkg_test_must_read(st3, &n);
    assert_int_equal(truncate(st3, (off_t)n - 4), 0); /* 3: truncated */
    b[n - 6] ^= 0x20; /* 2: one flipped bit of the last tensor (same size and header) */
    vkg_ck_spit(st2, b, n);
    free(b);
    expect_refused(f, 3, st3, NULL);
    expect_refused(f, 2, st2, "checksum");
    char latest[512];
    uint64_t got = 0; /* headers only: 3 is skipped, 2 looks complete */
    assert_int_equal(vkg_checkpoint_find_latest(vkg_ck_path(f, "ck"), latest, sizeof latest, &got),
                     VKG_OK);
    assert_true(got == 2);
    vkg_checkpoint c;
    char path[512], notes[2048];
    assert_int_equal(
        vkg_checkpoint_resume(vkg_ck_path(f, "ck"), 1, &c, path, sizeof path, notes, sizeof notes),
        VKG_OK);
    assert_true(c.state.step == 1);
    assert_memory_equal(c.params, x.params, x.n * sizeof(float));
    vkg_checkpoint_deinit(&c);
    assert_true(vkg_ck_exists(f, "ck/step_00000002.damaged/model.safetensors"));
    assert_true(vkg_ck_exists(f, "ck/step_00000003.damaged/config.json"));
    assert_non_null(strstr(notes, "step_00000003 (does not load"));
    free_model(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_llama_family_roundtrip, vkg_ck_setup, vkg_ck_teardown),
        cmocka_unit_test_setup_teardown(test_gpt2_writes_model_bin, vkg_ck_setup, vkg_ck_teardown),
        cmocka_unit_test_setup_teardown(test_documented_slots_and_hostile_header, vkg_ck_setup,
                                        vkg_ck_teardown),
        cmocka_unit_test_setup_teardown(test_mismatch_refused, vkg_ck_setup, vkg_ck_teardown),
        cmocka_unit_test_setup_teardown(test_damaged_safetensors_falls_back, vkg_ck_setup,
                                        vkg_ck_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
