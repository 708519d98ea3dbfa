/* llm.c's debug-state check, end to end: the CPU reference (in double precision) writes an llm.c
 * model file and a debug-state file (x, y, logits with V columns, loss, all gradients) for a small
 * GPT-2 (L=2, C=32, NH=4, V=100, Vp=128, maxT=16, B=2, T=8); the Vulkan path loads both files
 * (vkg_modelfile_read, vkg_debugstate_read) and must reproduce them:
 *   logits   max |gpu - file| <= 1e-4 (llm.c's test_gpt2 allows 1e-2) and relative L2 <= 1e-5
 *   loss     |gpu - file| <= 1e-5 x file
 *   grads    each of the 16 tensors: relative L2 <= 1e-5 and max abs <= 1e-4 (llm.c: ~1e-2)
 * Then the checker is shown to bite: one parameter nudged by 0.05 makes the gradients disagree
 * with the file. Runs on the fixture's device with the validation layer on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "os/file.h"
#include "gpu_fixture.h"
#include "model/model.h"
#include "ref/gpt2_ref.h"
#include "testutil.h"
#include "vkgpt/io.h"

enum { L = 2, C = 32, NH = 4, V = 100, VP = 128, MAXT = 16, B = 2, T = 8 };
#define LOGIT_MAX_ABS 1e-4
#define GRAD_MAX_ABS 1e-4
#define REL_L2 1e-5

static const char *const tensor_names[VKG_REF_GPT2_NUM_TENSORS] = {
    "wte",  "wpe",  "ln1w", "ln1b", "qkvw",    "qkvb",    "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw",  "fcb",  "fcprojw", "fcprojb", "lnfw",     "lnfb"};

static char model_path[512], state_path[512];

/* The reference writes model.bin and debug_state.bin into a fresh temporary folder. */
static void write_reference_files(void)
{
    const char *base = getenv("TMPDIR");
    char dir[400];
    snprintf(dir, sizeof dir, "%s/vkg_test_debugstate_XXXXXX", base && *base ? base : "/tmp");
    assert_int_equal(vkg_os_mkdtemp(dir), 0);
    assert_true(snprintf(model_path, sizeof model_path, "%s/model.bin", dir) < 512);
    assert_true(snprintf(state_path, sizeof state_path, "%s/debug_state.bin", dir) < 512);

    const vkg_ref_gpt2_config_t rcfg = {.maxT = MAXT, .V = V, .Vp = VP, .L = L, .NH = NH, .C = C};
    const vkg_model_config cfg = {.max_seq_len = MAXT,
                                  .vocab_size = V,
                                  .padded_vocab_size = VP,
                                  .num_layers = L,
                                  .num_heads = NH,
                                  .channels = C};
    size_t n = vkg_ref_gpt2_num_params(&rcfg);
    float *params = vkg_test_alloc(n);
    double *p64 = calloc(n, sizeof *p64), *g64 = calloc(n, sizeof *g64);
    assert_non_null(p64);
    assert_non_null(g64);
    vkg_ref_gpt2_init_params(&rcfg, params, 20240327);
    for (size_t i = 0; i < n; i++)
        p64[i] = params[i];
    vkg_debug_state ds = {.batch_size = B, .seq_len = T, .vocab_size = V, .num_params = n};
    ds.x = calloc(B * T, sizeof *ds.x);
    ds.y = calloc(B * T, sizeof *ds.y);
    ds.logits = vkg_test_alloc((size_t)B * T * V);
    ds.grads = vkg_test_alloc(n);
    assert_non_null(ds.x);
    assert_non_null(ds.y);
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 4);
    vkg_test_fill_int(&r, ds.x, B * T, V);
    vkg_test_fill_int(&r, ds.y, B * T, V);

    vkg_ref_gpt2_f64_t *ref = NULL;
    assert_int_equal(vkg_ref_gpt2_create_f64(&rcfg, B, T, &ref), 0);
    ds.loss = (float)vkg_ref_gpt2_forward_f64(ref, p64, ds.x, ds.y);
    vkg_ref_gpt2_zero_grad_f64(&rcfg, g64);
    vkg_ref_gpt2_backward_f64(ref, p64, g64, 1.0);
    const double *logits = vkg_ref_gpt2_logits_f64(ref); /* (B,T,Vp) */
    for (int bt = 0; bt < B * T; bt++)
        for (int v = 0; v < V; v++)
            ds.logits[(size_t)bt * V + v] = (float)logits[(size_t)bt * VP + v];
    for (size_t i = 0; i < n; i++)
        ds.grads[i] = (float)g64[i];
    VKG_ASSERT_OK(vkg_modelfile_write(model_path, &cfg, params));
    VKG_ASSERT_OK(vkg_debugstate_write(state_path, &cfg, &ds));
    printf("reference: loss %.7f (ln V = %.7f)\n", (double)ds.loss, log((double)V));
    vkg_ref_gpt2_destroy_f64(&ref);
    vkg_debugstate_deinit(&ds);
    free(params);
    free(p64);
    free(g64);
}

static void remove_reference_files(void)
{
    char dir[512];
    unlink(model_path);
    unlink(state_path);
    snprintf(dir, sizeof dir, "%s", model_path);
    *strrchr(dir, '/') = '\0';
    rmdir(dir);
}

/* Compare every gradient tensor with the file; returns how many failed (printing each). */
static int compare_grads(const vkg_model_config *cfg, const float *got, const float *want,
                         int verbose)
{
    vkg_param_table pt;
    vkg_model_params(cfg, &pt);
    size_t sizes[VKG_MAX_PARAM_TENSORS];
    for (int i = 0; i < pt.n; i++)
        sizes[i] = pt.t[i].count;
    int bad = 0;
    double worst_rel = 0.0, worst_abs = 0.0;
    for (int i = 0; i < pt.n; i++) {
        vkg_test_cmp cmp;
        int ok = vkg_test_compare(tensor_names[i], got, want, sizes[i], REL_L2, &cmp);
        ok = ok && cmp.max_abs <= GRAD_MAX_ABS;
        if (verbose)
            printf("  grad %-9s %6zu values: rel_l2 %.2e max_abs %.2e %s\n", tensor_names[i],
                   sizes[i], cmp.rel_l2, cmp.max_abs, ok ? "ok" : "MISMATCH");
        worst_rel = fmax(worst_rel, cmp.rel_l2);
        worst_abs = fmax(worst_abs, cmp.max_abs);
        bad += !ok;
        got += sizes[i];
        want += sizes[i];
    }
    if (verbose)
        printf("  gradients: worst rel_l2 %.2e, worst max_abs %.2e over 16 tensors\n", worst_rel,
               worst_abs);
    return bad;
}

static void test_vulkan_reproduces_debug_state(void **state)
{
    vkg_gpu *g = *state;
    write_reference_files();

    vkg_model_config cfg;
    float *params = NULL;
    VKG_ASSERT_OK(vkg_modelfile_read(model_path, &cfg, &params));
    assert_int_equal(cfg.padded_vocab_size, VP);
    vkg_debug_state ds;
    VKG_ASSERT_OK(vkg_debugstate_read(state_path, &cfg, &ds));
    assert_int_equal(ds.batch_size, B);
    assert_int_equal(ds.seq_len, T);
    size_t n = vkg_model_num_params(&cfg);
    assert_int_equal(ds.num_params, n);

    vkg_model_opts o = vkg_model_opts_default();
    o.B = ds.batch_size, o.T = ds.seq_len, o.accum_steps = 1;
    vkg_model *m = NULL;
    VKG_ASSERT_OK(vkg_model_create(g->dev, &cfg, &o, &m));
    VKG_ASSERT_OK(vkg_model_set_params(m, params));

    /* Logits: a forward without targets, the V real columns of each row. */
    float *logits = vkg_test_alloc((size_t)B * T * V), *row = vkg_test_alloc(VP);
    VKG_ASSERT_OK(vkg_model_forward(m, ds.x, NULL, NULL));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            VKG_ASSERT_OK(vkg_model_logits_row(m, b, t, row));
            memcpy(logits + ((size_t)b * T + t) * V, row, V * sizeof *row);
        }
    vkg_test_cmp lc;
    int logits_ok = vkg_test_compare("logits", logits, ds.logits, (size_t)B * T * V, REL_L2, &lc);
    printf("logits (%d x %d): rel_l2 %.2e max_abs %.2e\n", B * T, V, lc.rel_l2, lc.max_abs);
    assert_true(logits_ok);
    assert_true(lc.max_abs <= LOGIT_MAX_ABS);

    /* Loss and gradients: forward + backward on the file's x, y. */
    float loss = 0.0f;
    float *grads = vkg_test_alloc(n);
    VKG_ASSERT_OK(vkg_model_zero_grad(m));
    VKG_ASSERT_OK(vkg_model_forward_backward(m, ds.x, ds.y, &loss));
    VKG_ASSERT_OK(vkg_model_get_grads(m, grads));
    double loss_err = fabs((double)loss - (double)ds.loss);
    printf("loss: gpu %.7f file %.7f |diff| %.2e\n", (double)loss, (double)ds.loss, loss_err);
    assert_true(loss_err <= 1e-5 * fabs((double)ds.loss));
    assert_int_equal(compare_grads(&cfg, grads, ds.grads, 1), 0);

    /* The checker bites: nudge one weight of layer 1's fcw and the gradients no longer match. */
    vkg_param_table pt;
    vkg_model_params(&cfg, &pt);
    params[pt.t[10].offset + pt.t[10].count / 2 + 7] += 0.05f;
    VKG_ASSERT_OK(vkg_model_set_params(m, params));
    VKG_ASSERT_OK(vkg_model_zero_grad(m));
    VKG_ASSERT_OK(vkg_model_forward_backward(m, ds.x, ds.y, &loss));
    VKG_ASSERT_OK(vkg_model_get_grads(m, grads));
    int bad = compare_grads(&cfg, grads, ds.grads, 0);
    printf("with one weight nudged by 0.05: %d of 16 gradient tensors disagree (as they must)\n",
           bad);
    assert_true(bad > 0);

    vkg_model_destroy(&m);
    vkg_debugstate_deinit(&ds);
    free(params);
    free(logits);
    free(row);
    free(grads);
    remove_reference_files();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_vulkan_reproduces_debug_state, vkg_gpu_setup,
                                        vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
