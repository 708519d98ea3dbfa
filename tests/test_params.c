/* The parameter table (vkgpt/model.h) and what walks it, without a device: GPT-2's table against
 * the CPU reference's own count (src/ref, written from llm.c), the table's invariants (contiguous
 * offsets, unique names, decay exactly on matrices, the tied embedding first), the
 * initialisation each row names, every pipeline split's part layouts (each tensor's floats held
 * once, the tied embedding twice, at the head part's start), and DiLoCo's fragments (every
 * parameter in exactly one fragment, for every fragment count). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ref/gpt2_ref.h"
#include "parallel/pp_schedule.h"
#include "parallel/strategy.h"
#include "vkgpt/model.h"

static const vkg_model_config configs[] = {
    {.max_seq_len = 16,
     .vocab_size = 50,
     .padded_vocab_size = 128,
     .num_layers = 3,
     .num_heads = 2,
     .channels = 8},
    {.max_seq_len = 64,
     .vocab_size = 257,
     .padded_vocab_size = 384,
     .num_layers = 4,
     .num_heads = 4,
     .channels = 32},
    {.max_seq_len = 1024,
     .vocab_size = 50257,
     .padded_vocab_size = 50304,
     .num_layers = 12,
     .num_heads = 12,
     .channels = 768},
};
#define NCONFIGS ((int)(sizeof configs / sizeof configs[0]))

/* Small Llama-family configurations: GQA with a tied embedding; Qwen 3's QK-norm, explicit head
 * dim and untied head; Qwen 2's q/k/v biases with ReLU^2; GPT-2's sizes with an untied head. */
static const vkg_model_config family[] = {
    {.max_seq_len = 32,
     .vocab_size = 100,
     .padded_vocab_size = 128,
     .num_layers = 4,
     .num_heads = 4,
     .channels = 32,
     .num_kv_heads = 2,
     .mlp_hidden = 48,
     .mlp = VKG_MLP_SWIGLU,
     .norm = VKG_NORM_RMS,
     .pos = VKG_POS_ROPE,
     .bias = VKG_BIAS_NONE},
    {.max_seq_len = 32,
     .vocab_size = 300,
     .padded_vocab_size = 384,
     .num_layers = 3,
     .num_heads = 4,
     .channels = 24,
     .num_kv_heads = 1,
     .head_dim = 16,
     .mlp_hidden = 40,
     .mlp = VKG_MLP_SWIGLU,
     .norm = VKG_NORM_RMS,
     .pos = VKG_POS_ROPE,
     .qk_norm = 1,
     .bias = VKG_BIAS_NONE,
     .untied = 1},
    {.max_seq_len = 16,
     .vocab_size = 128,
     .padded_vocab_size = 128,
     .num_layers = 2,
     .num_heads = 2,
     .channels = 16,
     .mlp = VKG_MLP_RELU2,
     .norm = VKG_NORM_RMS,
     .pos = VKG_POS_ROPE,
     .bias = VKG_BIAS_QKV},
    {.max_seq_len = 16,
     .vocab_size = 50,
     .padded_vocab_size = 128,
     .num_layers = 2,
     .num_heads = 2,
     .channels = 8,
     .untied = 1},
};
#define NFAMILY ((int)(sizeof family / sizeof family[0]))

/* configs then family: every configuration the walks below are checked on */
static const vkg_model_config *any_config(int i)
{
    return i < NCONFIGS ? &configs[i] : &family[i - NCONFIGS];
}
#define NANY (NCONFIGS + NFAMILY)

static void test_gpt2_table_matches_reference(void **state)
{
    (void)state;
    for (int c = 0; c < NCONFIGS; c++) {
        const vkg_model_config *m = &configs[c];
        vkg_ref_gpt2_config_t r = {.maxT = m->max_seq_len,
                                   .V = m->vocab_size,
                                   .Vp = m->padded_vocab_size,
                                   .L = m->num_layers,
                                   .NH = m->num_heads,
                                   .C = m->channels};
        size_t sizes[VKG_REF_GPT2_NUM_TENSORS], offsets[VKG_REF_GPT2_NUM_TENSORS];
        vkg_ref_gpt2_param_sizes(&r, sizes);
        vkg_ref_gpt2_param_offsets(&r, offsets);
        vkg_param_table t;
        vkg_model_params(m, &t);
        assert_int_equal(t.n, VKG_REF_GPT2_NUM_TENSORS);
        assert_int_equal(t.total, vkg_ref_gpt2_num_params(&r));
        assert_int_equal(vkg_model_num_params(m), t.total);
        assert_int_equal(t.tied, 0);
        for (int i = 0; i < t.n; i++) {
            assert_int_equal(t.t[i].count, sizes[i]);
            assert_int_equal(t.t[i].offset, offsets[i]);
            assert_int_equal(t.t[i].decays, vkg_ref_gpt2_param_decays(i));
        }
    }
}

static void test_table_invariants(void **state)
{
    (void)state;
    for (int c = 0; c < NANY; c++) {
        const vkg_model_config *m = any_config(c);
        assert_int_equal(vkg_model_config_validate(m), VKG_OK);
        vkg_param_table t;
        vkg_model_params(m, &t);
        size_t at = 0;
        assert_true(t.n > 0 && t.n <= VKG_MAX_PARAM_TENSORS);
        for (int i = 0; i < t.n; i++) {
            const vkg_param_info *p = &t.t[i];
            size_t slices = p->place == VKG_PARAM_LAYER ? (size_t)m->num_layers : 1;
            assert_int_equal(p->offset, at);
            assert_int_equal(p->count, (size_t)p->rows * (size_t)p->cols * slices);
            assert_true(p->used_rows > 0 && p->used_rows <= p->rows);
            assert_int_equal(p->decays, p->rows > 1); /* matrices decay, vectors do not */
            for (int j = 0; j < i; j++)
                assert_string_not_equal(p->name, t.t[j].name);
            /* the table order: embeddings, the layers' tensors, the head's */
            if (i > 0)
                assert_true(p->place >= t.t[i - 1].place);
            at += p->count;
        }
        assert_int_equal(at, t.total);
        assert_true(t.tied == -1 || (t.tied == 0 && t.t[0].place == VKG_PARAM_EMBED));
        assert_int_equal(t.t[0].used_rows, m->vocab_size); /* the padded vocabulary */
    }
}

static void test_init_follows_the_table(void **state)
{
    (void)state;
    const vkg_model_config *m = &configs[1];
    vkg_param_table t;
    vkg_model_params(m, &t);
    float *a = malloc(t.total * sizeof *a), *b = malloc(t.total * sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    vkg_model_init_params(m, a, 7);
    vkg_model_init_params(m, b, 7);
    assert_memory_equal(a, b, t.total * sizeof *a); /* the same draws for the same seed */
    for (int i = 0; i < t.n; i++) {
        const vkg_param_info *p = &t.t[i];
        const float *x = a + p->offset;
        size_t used = (size_t)p->used_rows * (size_t)p->cols;
        if (p->init == VKG_INIT_ZEROS || p->init == VKG_INIT_ONES) {
            for (size_t k = 0; k < p->count; k++)
                assert_true(x[k] == (p->init == VKG_INIT_ONES ? 1.0f : 0.0f));
            continue;
        }
        double sum2 = 0.0;
        for (size_t k = 0; k < used; k++)
            sum2 += (double)x[k] * x[k];
        double sd = 0.02 / (p->init == VKG_INIT_RESIDUAL ? sqrt(2.0 * m->num_layers) : 1.0);
        double got = sqrt(sum2 / (double)used);
        assert_true(got > 0.8 * sd && got < 1.2 * sd); /* thousands of draws: within 20 % */
        for (size_t k = used; k < p->count && p->place != VKG_PARAM_LAYER; k++)
            assert_true(x[k] == 0.0f); /* rows past the vocabulary stay 0 */
    }
    vkg_model_init_params(m, b, 8);
    assert_memory_not_equal(a, b, t.total * sizeof *a);
    free(a), free(b);
}

/* Every split of the layers into S parts: each tensor's floats held by exactly one part, but the
 * tied embedding by the first part and the last (at its start: layout.tied); the extract and
 * insert of every part rebuild the whole model. */
static void check_part_layouts(const vkg_model_config *m)
{
    vkg_param_table t;
    vkg_model_params(m, &t);
    int L = m->num_layers;
    float *whole = malloc(t.total * sizeof *whole), *back = malloc(t.total * sizeof *back);
    float *part = malloc(t.total * sizeof *part);
    int *held = malloc(t.total * sizeof *held);
    assert_true(whole && back && part && held);
    for (size_t k = 0; k < t.total; k++)
        whole[k] = (float)k;
    for (int S = 1; S <= L; S++) {
        int layers[16];
        assert_int_equal(vkg_pp_split(m, 16, S, NULL, layers), VKG_OK);
        memset(held, 0, t.total * sizeof *held);
        memset(back, 0xff, t.total * sizeof *back);
        for (int s = 0; s < S; s++) {
            vkg_model_part p = vkg_pp_part(layers, S, s);
            assert_int_equal(vkg_model_part_validate(m, &p), VKG_OK);
            vkg_model_layout lo;
            vkg_model_part_layout(m, &p, &lo);
            assert_int_equal(lo.n, t.n);
            size_t at = 0;
            for (int i = 0; i < t.n; i++) {
                assert_int_equal(lo.part_offset[i], at);
                for (size_t k = 0; k < lo.count[i]; k++)
                    held[lo.whole_offset[i] + k]++;
                at += lo.count[i];
            }
            assert_int_equal(lo.total, at);
            int holds_tied = t.tied >= 0 &&
                             ((p.flags & VKG_MODEL_PART_EMBED) || (p.flags & VKG_MODEL_PART_HEAD));
            assert_int_equal(lo.tied, holds_tied ? t.t[t.tied].count : 0);
            if (lo.tied)
                assert_int_equal(lo.part_offset[t.tied], 0);
            vkg_model_part_extract(&lo, whole, part);
            vkg_model_part_insert(&lo, part, back);
        }
        for (int i = 0; i < t.n; i++)
            for (size_t k = 0; k < t.t[i].count; k++)
                assert_int_equal(held[t.t[i].offset + k], i == t.tied && S > 1 ? 2 : 1);
        assert_memory_equal(whole, back, t.total * sizeof *whole);
    }
    free(whole), free(back), free(part), free(held);
}

static void test_part_layouts(void **state)
{
    (void)state;
    check_part_layouts(&configs[1]);
    for (int c = 0; c < NFAMILY; c++)
        check_part_layouts(&family[c]);
}

/* DiLoCo's fragments: for every F, each parameter in exactly one fragment, the ranges in order
 * inside one tensor each, a stacked tensor's layer l in fragment l % F. */
static void test_fragments_cover_once(void **state)
{
    (void)state;
    for (int c = 0; c < NANY; c++) {
        if (c == 2)
            continue; /* GPT-2 124M: 12 fragment counts of 124 M floats, long for nothing new */
        const vkg_model_config *m = any_config(c);
        vkg_param_table t;
        vkg_model_params(m, &t);
        int L = m->num_layers;
        int *owner = malloc(t.total * sizeof *owner);
        assert_non_null(owner);
        for (int F = 1; F <= L; F++) {
            for (size_t k = 0; k < t.total; k++)
                owner[k] = -1;
            for (int p = 0; p < F; p++) {
                int n = 0;
                assert_int_equal(vkg_diloco_fragment_ranges(m, F, p, NULL, &n), VKG_OK);
                size_t *r = malloc(2 * (size_t)(n + 1) * sizeof *r);
                assert_non_null(r);
                int n2 = 0;
                assert_int_equal(vkg_diloco_fragment_ranges(m, F, p, r, &n2), VKG_OK);
                assert_int_equal(n, n2);
                for (int j = 0; j < n; j++) {
                    assert_true(r[2 * j + 1] > 0);
                    assert_true(j == 0 || r[2 * j] >= r[2 * j - 2] + r[2 * j - 1]);
                    for (size_t k = r[2 * j]; k < r[2 * j] + r[2 * j + 1]; k++) {
                        assert_int_equal(owner[k], -1);
                        owner[k] = p;
                    }
                }
                free(r);
            }
            for (int i = 0; i < t.n; i++) {
                const vkg_param_info *x = &t.t[i];
                for (size_t k = 0; k < x->count; k++) {
                    assert_true(owner[x->offset + k] >= 0);
                    if (x->place == VKG_PARAM_LAYER) {
                        size_t per = x->count / (size_t)L;
                        assert_int_equal(owner[x->offset + k], (int)(k / per) % F);
                    }
                }
            }
        }
        int n = 0;
        assert_int_equal(vkg_diloco_fragment_ranges(m, L + 1, 0, NULL, &n), VKG_ERR_INVALID_ARG);
        free(owner);
    }
}

/* The presets' parameter counts against the published ones (their vocabularies are multiples
 * of 128, so the padded table is the published model; GPT-2's are llm.c's, padded to 50304). */
static void test_presets_published_counts(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        size_t params;
    } want[] = {
        {"gpt2-124m", 124475904},       /* llm.c's GPT-2 124M (Vp 50304) */
        {"gpt2-350m", 354871296},       /* GPT-2 medium, 354,823,168 at V = 50257 */
        {"smollm2-135m", 134515008},    /* HuggingFaceTB/SmolLM2-135M */
        {"qwen2.5-0.5b", 494032768},    /* Qwen/Qwen2.5-0.5B */
        {"qwen3-0.6b", 596049920},      /* Qwen/Qwen3-0.6B */
        {"tinyllama-1.1b", 1100048384}, /* TinyLlama/TinyLlama-1.1B */
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        vkg_model_config m;
        assert_int_equal(vkg_model_preset(want[i].name, &m), VKG_OK);
        assert_int_equal(vkg_model_config_validate(&m), VKG_OK);
        if (vkg_model_num_params(&m) != want[i].params)
            fail_msg("%s: %zu parameters, published %zu", want[i].name, vkg_model_num_params(&m),
                     want[i].params);
    }
    vkg_model_config m;
    assert_int_equal(vkg_model_preset("llama-125m", &m), VKG_OK);
    assert_false(vkg_model_is_gpt2(&m));
    assert_int_equal(vkg_model_preset("gpt2-124m", &m), VKG_OK);
    assert_true(vkg_model_is_gpt2(&m));
    assert_int_equal(vkg_model_preset("gpt5", &m), VKG_ERR_NOT_FOUND);
    const char *const *names = vkg_model_preset_names();
    int n = 0;
    while (names[n])
        assert_int_equal(vkg_model_preset(names[n++], &m), VKG_OK);
    assert_int_equal(n, 7);
}

/* Each family's tensors where Hugging Face's definitions put them: Qwen 3's q and k norms of D,
 * q/k/v rows (NH + 2 NKV) D, the output projection from NH D (not C), an untied lm_head last;
 * Qwen 2's q/k/v bias and no other; no wpe and no norm biases with rotary RMSNorm models. */
static void test_family_tables(void **state)
{
    (void)state;
    vkg_model_config q3;
    assert_int_equal(vkg_model_preset("qwen3-0.6b", &q3), VKG_OK);
    vkg_param_table t;
    vkg_model_params(&q3, &t);
    static const char *const q3_names[] = {"wte",      "ln1w", "qkvw", "qnormw",  "knormw",
                                           "attprojw", "ln2w", "fcw",  "fcprojw", "lnfw"};
    assert_int_equal(t.n, 10);
    for (int i = 0; i < t.n; i++)
        assert_string_equal(t.t[i].name, q3_names[i]);
    assert_int_equal(t.tied, 0);
    assert_int_equal(t.t[2].rows, (16 + 2 * 8) * 128);
    assert_int_equal(t.t[2].cols, 1024);
    assert_int_equal(t.t[3].cols, 128);
    assert_int_equal(t.t[5].rows, 1024);
    assert_int_equal(t.t[5].cols, 16 * 128);
    assert_int_equal(t.t[7].rows, 2 * 3072); /* gate then up */
    assert_int_equal(t.t[8].cols, 3072);
    vkg_model_config tl;
    assert_int_equal(vkg_model_preset("tinyllama-1.1b", &tl), VKG_OK);
    vkg_model_params(&tl, &t);
    assert_int_equal(t.tied, -1);
    assert_string_equal(t.t[t.n - 1].name, "lm_head");
    assert_int_equal(t.t[t.n - 1].place, VKG_PARAM_HEAD);
    assert_int_equal(t.t[t.n - 1].decays, 1);
    vkg_model_config q2;
    assert_int_equal(vkg_model_preset("qwen2.5-0.5b", &q2), VKG_OK);
    vkg_model_params(&q2, &t);
    int qkvb = 0, other_bias = 0;
    for (int i = 0; i < t.n; i++) {
        qkvb += !strcmp(t.t[i].name, "qkvb");
        other_bias += !strcmp(t.t[i].name, "attprojb") || !strcmp(t.t[i].name, "fcb") ||
                      !strcmp(t.t[i].name, "fcprojb") || !strcmp(t.t[i].name, "ln1b") ||
                      !strcmp(t.t[i].name, "wpe");
    }
    assert_int_equal(qkvb, 1);
    assert_int_equal(other_bias, 0);
}

/* Refusals name the field; FLOPs per token: GPT-2's 24 C^2 + 4 T C, a Llama's from its shapes. */
static void test_family_validation_and_flops(void **state)
{
    (void)state;
    vkg_model_config m = family[0];
    m.num_kv_heads = 3;
    assert_int_equal(vkg_model_config_validate(&m), VKG_ERR_INVALID_ARG);
    m = family[1];
    m.head_dim = 15;
    assert_int_equal(vkg_model_config_validate(&m), VKG_ERR_INVALID_ARG);
    m = family[0];
    m.mlp = 7;
    assert_int_equal(vkg_model_config_validate(&m), VKG_ERR_INVALID_ARG);
    m = family[0];
    m.rope_factor = 8.0f; /* Llama 3 scaling without its other fields */
    assert_int_equal(vkg_model_config_validate(&m), VKG_ERR_INVALID_ARG);
    m = family[0];
    m.head_dim = 1 << 28; /* (NH + 2 NKV) D rows would overflow the table's ints */
    assert_int_equal(vkg_model_config_validate(&m), VKG_ERR_INVALID_ARG);
    assert_non_null(strstr(vkg_error_message(), "rows"));
    double layer, head;
    vkg_model_token_flops(&configs[2], 1024, &layer, &head);
    assert_true(layer == 24.0 * 768 * 768 + 4.0 * 1024 * 768);
    assert_true(head == 2.0 * 768 * 50304);
    vkg_model_config q3;
    assert_int_equal(vkg_model_preset("qwen3-0.6b", &q3), VKG_OK);
    vkg_model_token_flops(&q3, 100, &layer, &head);
    /* q, k, v: 1024 x 4096; o: 2048 x 1024; gate, up, down: 3 x 1024 x 3072; attention 4 T NH D */
    double want = 2.0 * (1024.0 * 4096 + 2048.0 * 1024 + 3.0 * 1024 * 3072) + 4.0 * 100 * 2048;
    assert_true(layer == want);
}

/* Rotary frequencies from the definitions: theta^(-2i/D); Llama 3.1's scaling (factor 8, low 1,
 * high 4, original context 8192, theta 500000, D 128) leaves short wavelengths, divides long ones
 * by 8 and blends the band between. */
static void test_rope_frequencies(void **state)
{
    (void)state;
    vkg_model_config m = family[0]; /* D = 8, theta 10000 by default */
    float f[64];
    vkg_model_rope_inv_freq(&m, f);
    for (int i = 0; i < 4; i++)
        assert_true(f[i] == (float)pow(10000.0, -(2.0 * i) / 8.0));
    m.head_dim = 128, m.channels = 512, m.rope_theta = 500000.0f;
    m.rope_factor = 8.0f, m.rope_low_freq_factor = 1.0f, m.rope_high_freq_factor = 4.0f;
    m.rope_original_max = 8192;
    assert_int_equal(vkg_model_config_validate(&m), VKG_OK);
    vkg_model_rope_inv_freq(&m, f);
    const double pi = 3.14159265358979323846;
    int high = 0, low = 0, mid = 0;
    for (int i = 0; i < 64; i++) {
        double base = pow(500000.0, -(2.0 * i) / 128.0), wl = 2.0 * pi / base, want = base;
        if (wl < 8192.0 / 4.0) {
            high++;
        } else if (wl > 8192.0) {
            want = base / 8.0, low++;
        } else {
            double s = (8192.0 / wl - 1.0) / (4.0 - 1.0);
            want = (1.0 - s) * base / 8.0 + s * base, mid++;
        }
        assert_true(fabs(f[i] - want) <= 1e-6 * want);
    }
    assert_true(high > 0 && low > 0 && mid > 0); /* every band is exercised */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2_table_matches_reference),
        cmocka_unit_test(test_table_invariants),
        cmocka_unit_test(test_init_follows_the_table),
        cmocka_unit_test(test_part_layouts),
        cmocka_unit_test(test_fragments_cover_once),
        cmocka_unit_test(test_presets_published_counts),
        cmocka_unit_test(test_family_tables),
        cmocka_unit_test(test_family_validation_and_flops),
        cmocka_unit_test(test_rope_frequencies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
