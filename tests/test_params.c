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
    for (int c = 0; c < NCONFIGS; c++) {
        const vkg_model_config *m = &configs[c];
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
static void test_part_layouts(void **state)
{
    (void)state;
    const vkg_model_config *m = &configs[1];
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
            int holds_tied = (p.flags & VKG_MODEL_PART_EMBED) || (p.flags & VKG_MODEL_PART_HEAD);
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

/* DiLoCo's fragments: for every F, each parameter in exactly one fragment, the ranges in order
 * inside one tensor each, a stacked tensor's layer l in fragment l % F. */
static void test_fragments_cover_once(void **state)
{
    (void)state;
    for (int c = 0; c < 2; c++) {
        const vkg_model_config *m = &configs[c];
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2_table_matches_reference),
        cmocka_unit_test(test_table_invariants),
        cmocka_unit_test(test_init_follows_the_table),
        cmocka_unit_test(test_part_layouts),
        cmocka_unit_test(test_fragments_cover_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
