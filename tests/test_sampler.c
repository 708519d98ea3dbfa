/* Tests of src/train/sampler: the splitmix64 generator (known values, save/restore, bounded
 * draws), normal draws (mean, std, tail mass), and token sampling: argmax at temperature 0 and
 * with top_k = 1, draw frequencies matching softmax(logits / T) with and without top-k, padding
 * columns beyond V never drawn, NaN/inf logits handled. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "train/sampler.h"

static void test_rng_known_values(void **state)
{
    (void)state;
    /* splitmix64 from state 0 (published reference sequence) */
    vkg_rng r;
    vkg_rng_seed(&r, 0);
    assert_true(vkg_rng_u64(&r) == 0xe220a8397b1dcdafull);
    assert_true(vkg_rng_u64(&r) == 0x6e789e6aa1b965f4ull);
    assert_true(vkg_rng_u64(&r) == 0x06c45d188009454full);
    vkg_rng a, b;
    vkg_rng_seed(&a, 1);
    vkg_rng_seed(&b, 2);
    assert_true(vkg_rng_u64(&a) != vkg_rng_u64(&b));
}

static void test_rng_save_restore(void **state)
{
    (void)state;
    vkg_rng r, saved;
    vkg_rng_seed(&r, 1234);
    for (int i = 0; i < 17; i++)
        vkg_rng_u64(&r);
    saved = r; /* the whole state is one uint64: copy out, copy back */
    uint64_t seq[64];
    double normals[8];
    for (int i = 0; i < 64; i++)
        seq[i] = vkg_rng_u64(&r);
    for (int i = 0; i < 8; i++)
        normals[i] = vkg_rng_normal(&r);
    vkg_rng restored = {saved.state};
    for (int i = 0; i < 64; i++)
        assert_true(vkg_rng_u64(&restored) == seq[i]);
    for (int i = 0; i < 8; i++)
        assert_true(vkg_rng_normal(&restored) == normals[i]);
    assert_true(restored.state == r.state);
}

static void test_rng_uniform_and_below(void **state)
{
    (void)state;
    vkg_rng r;
    vkg_rng_seed(&r, 7);
    int hist[7] = {0};
    double sum = 0;
    const int n = 350000;
    for (int i = 0; i < n; i++) {
        double u = vkg_rng_uniform(&r);
        assert_true(u >= 0.0 && u < 1.0);
        sum += u;
        uint64_t k = vkg_rng_below(&r, 7);
        assert_true(k < 7);
        hist[k]++;
    }
    assert_true(fabs(sum / n - 0.5) < 0.003); /* sd of the mean: 0.29/sqrt(n) = 4.9e-4 */
    for (int k = 0; k < 7; k++)               /* sd of a count: sqrt(n/7*6/7) = 207 */
        assert_true(fabs(hist[k] - n / 7.0) < 1000);
    assert_true(vkg_rng_below(&r, 1) == 0);
}

static void test_normal(void **state)
{
    (void)state;
    vkg_rng r;
    vkg_rng_seed(&r, 42);
    const int n = 500000;
    double s = 0, s2 = 0;
    int tail = 0;
    for (int i = 0; i < n; i++) {
        double z = vkg_rng_normal(&r);
        assert_true(isfinite(z));
        s += z;
        s2 += z * z;
        tail += fabs(z) > 1.959964;
    }
    double mean = s / n, sd = sqrt(s2 / n - mean * mean);
    printf("normal: mean %.5f std %.5f P(|z|>1.96) %.5f\n", mean, sd, (double)tail / n);
    assert_true(fabs(mean) < 0.007);                    /* sd of the mean 0.0014 */
    assert_true(fabs(sd - 1.0) < 0.005);                /* sd of the std 0.001 */
    assert_true(fabs((double)tail / n - 0.05) < 0.002); /* sd 0.0003 */
    float x[1000];
    vkg_rng_fill_normal(&r, x, 1000, 0.0f, 0.02f);
    double m = 0, q = 0;
    for (int i = 0; i < 1000; i++)
        m += x[i], q += (double)x[i] * x[i];
    assert_true(fabs(sqrt(q / 1000) - 0.02) < 0.002);
}

static void test_argmax(void **state)
{
    (void)state;
    float logits[10] = {0.1f, 3.0f, -2.0f, 5.0f, 4.9f, 5.0f, 0.0f, 1.0f, 100.0f, 200.0f};
    /* V = 8: entries 8 and 9 are padding and never win */
    assert_int_equal(vkg_sample_token(logits, 8, 0.0f, 0, NULL), 3); /* first of the tied max */
    assert_int_equal(vkg_sample_token(logits, 8, -1.0f, 0, NULL), 3);
    vkg_rng r;
    vkg_rng_seed(&r, 3);
    for (int i = 0; i < 200; i++) /* top_k = 1 at any temperature is the argmax */
        assert_int_equal(vkg_sample_token(logits, 8, 5.0f, 1, &r), 3);
    /* top_k = 2 with tied maxima: exactly the two tied tokens */
    int seen[8] = {0};
    for (int i = 0; i < 2000; i++)
        seen[vkg_sample_token(logits, 8, 1.0f, 2, &r)]++;
    assert_int_equal(seen[3] + seen[5], 2000);
    assert_true(seen[3] > 850 && seen[5] > 850);
}

/* Draw n tokens and compare frequencies with softmax(logits / T) over the top-k (0: all). */
static void check_frequencies(const float *logits, int V, float T, int k, uint64_t seed)
{
    double p[16] = {0}, sum = 0, mx = -INFINITY;
    int rank_ok[16];
    for (int i = 0; i < V; i++) {
        int above = 0;
        for (int j = 0; j < V; j++)
            above += logits[j] > logits[i];
        rank_ok[i] = k <= 0 || above < k; /* the test's logits have no ties */
        if (rank_ok[i] && logits[i] > mx)
            mx = logits[i];
    }
    for (int i = 0; i < V; i++)
        if (rank_ok[i])
            sum += p[i] = exp((logits[i] - mx) / T);
    const int n = 200000;
    int count[16] = {0};
    vkg_rng r;
    vkg_rng_seed(&r, seed);
    for (int d = 0; d < n; d++) {
        int t = vkg_sample_token(logits, V, T, k, &r);
        assert_true(t >= 0 && t < V);
        count[t]++;
    }
    for (int i = 0; i < V; i++) {
        double want = p[i] / sum, got = (double)count[i] / n;
        double tol = 5.0 * sqrt(want * (1 - want) / n) + 1e-9; /* 5 standard deviations */
        if (fabs(got - want) > tol) {
            fprintf(stderr, "token %d: frequency %.5f, softmax %.5f (tolerance %.5f)\n", i, got,
                    want, tol);
            fail();
        }
        if (!rank_ok[i])
            assert_int_equal(count[i], 0);
    }
}

static void test_frequencies(void **state)
{
    (void)state;
    const float logits[12] = {1.0f, 2.0f, 0.5f, -1.0f, 2.5f, 0.0f, 1.5f, -3.0f,
                              /* padding beyond V = 8: huge, must never be drawn */
                              50.0f, 60.0f, 70.0f, 80.0f};
    check_frequencies(logits, 8, 1.0f, 0, 11);
    check_frequencies(logits, 8, 0.7f, 0, 12);
    check_frequencies(logits, 8, 2.0f, 3, 13);
    check_frequencies(logits, 8, 1.0f, 5, 14);
    check_frequencies(logits, 8, 1.0f, 8, 15); /* k = V: all */
}

static void test_large_vocab_top_k(void **state)
{
    (void)state;
    /* GPT-2-sized row with negative and positive logits: top-k picks only from the k largest */
    enum { V = 50257, K = 40 };
    static float logits[50304];
    vkg_rng g;
    vkg_rng_seed(&g, 99);
    for (int i = 0; i < 50304; i++)
        logits[i] = (float)(vkg_rng_normal(&g) * 3.0);
    float sorted_kth = 0;
    { /* the K-th largest by counting */
        for (int i = 0; i < V; i++) {
            int above = 0;
            for (int j = 0; j < V && above < K; j++)
                above += logits[j] > logits[i];
            if (above == K - 1) {
                sorted_kth = logits[i];
                break;
            }
        }
    }
    vkg_rng r;
    vkg_rng_seed(&r, 5);
    for (int d = 0; d < 300; d++) {
        int t = vkg_sample_token(logits, V, 1.0f, K, &r);
        assert_true(t >= 0 && t < V);
        assert_true(logits[t] >= sorted_kth);
    }
}

static void test_nonfinite(void **state)
{
    (void)state;
    vkg_rng r;
    vkg_rng_seed(&r, 1);
    float a[4] = {NAN, 1.0f, NAN, 0.5f};
    for (int i = 0; i < 100; i++) {
        int t = vkg_sample_token(a, 4, 1.0f, 0, &r);
        assert_true(t == 1 || t == 3); /* NaN never drawn */
    }
    assert_int_equal(vkg_sample_token(a, 4, 0.0f, 0, NULL), 1);
    float b[3] = {1.0f, INFINITY, 2.0f};
    assert_int_equal(vkg_sample_token(b, 3, 1.0f, 0, &r), 1);
    float c[3] = {-INFINITY, -INFINITY, -INFINITY};
    assert_int_equal(vkg_sample_token(c, 3, 1.0f, 0, &r), 0);
    float d[3] = {-INFINITY, 0.0f, -INFINITY};
    for (int i = 0; i < 50; i++)
        assert_int_equal(vkg_sample_token(d, 3, 1.0f, 0, &r), 1);
    float e[2] = {1000.0f, -1000.0f}; /* exp overflow would break a naive softmax */
    for (int i = 0; i < 50; i++)
        assert_int_equal(vkg_sample_token(e, 2, 1e-3f, 0, &r), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rng_known_values),
        cmocka_unit_test(test_rng_save_restore),
        cmocka_unit_test(test_rng_uniform_and_below),
        cmocka_unit_test(test_normal),
        cmocka_unit_test(test_argmax),
        cmocka_unit_test(test_frequencies),
        cmocka_unit_test(test_large_vocab_top_k),
        cmocka_unit_test(test_nonfinite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
