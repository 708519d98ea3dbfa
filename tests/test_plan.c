/* The memory plan against an independent count: GPT-2 124M at T = 1024, B = 1..16, under the
 * largest allocation of each driver table (none, 4 GiB, 2 GiB) and device sizes of 16, 24 and
 * 80 GiB. The bytes of every pool are recounted here from the model's shapes (each tensor rounded
 * to 256 bytes, the layout docs/DESIGN-NOTES.md describes), the fit decision is made here from
 * those counts, and the planner must agree on every case: fits, or refuses naming the tensor or
 * pool and the largest --batch that fits, which is also recomputed here. No device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "parallel/strategy.h"
#include "vkgpt/model.h"

#define ASSERT_OK(expr)                                                                            \
    do {                                                                                           \
        vkg_status st_ = (expr);                                                                   \
        if (st_ != VKG_OK)                                                                         \
            fail_msg("%s -> %s: %s", #expr, vkg_status_name(st_), vkg_error_message());            \
    } while (0)

enum { T = 1024, L = 12, C = 768, NH = 12, V = 50257, VP = 50304 };
/* The largest --batch searched: above what fits 80 GiB with no allocation limit (86). */
enum { B_MAX = 128 };

static size_t r256(size_t floats)
{
    size_t b = (floats ? floats : 1) * 4;
    return (b + 255) / 256 * 256;
}

typedef struct count {
    size_t params, acts, shared, adamw, total, largest;
} count;

static count recount(size_t B, int recompute)
{
    count k = {0};
    size_t BT = B * T, BTC = BT * C, stat = B * NH * (size_t)T;
    size_t np = (size_t)VP * C + (size_t)1024 * C +
                (size_t)L * (2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + 4 * C * C + 4 * C +
                             4 * C * C + C) +
                2 * C;
    k.params = r256(np);
    /* a slot: encoded; per layer ln1, mean, rstd, qkv, atty, attention's logsumexp (B, NH, T),
     * attproj, residual2, ln2, mean, rstd, fch, fch_gelu, fcproj, residual3; lnf, mean, rstd,
     * logits, losses; tokens */
    size_t layer = r256(BTC) + 2 * r256(BT) + r256(3 * BTC) + r256(BTC) + r256(stat) + r256(BTC) +
                   r256(BTC) + r256(BTC) + 2 * r256(BT) + r256(4 * BTC) +
                   r256(recompute ? 0 : 4 * BTC) + r256(BTC) + r256(BTC);
    k.acts =
        r256(BTC) + L * layer + r256(BTC) + 2 * r256(BT) + r256(BT * VP) + r256(BT) + 2 * r256(BT);
    /* one layer's gradients of the activations, two residual-stream buffers, dencoded, dlnf;
     * scratch: the transposed matmul input, attention's row sums of dout * out (B, NH, T), dtop,
     * the GELU buffer, the loss scale (4 floats) */
    k.shared = r256(BTC) * 8 + r256(3 * BTC) + 2 * r256(4 * BTC) + 2 * r256(BTC) + r256(4 * BTC) +
               r256(stat) + r256(BTC) + r256(recompute ? 4 * BTC : 0) + r256(4);
    k.adamw = 2 * r256(np) + r256(64) + 512; /* the norm: 64 partial sums, on every device */
    k.total = 2 * k.params + k.acts + k.shared + k.adamw;
    k.largest = k.params;
    size_t cand[] = {r256(BT * VP), r256(4 * BTC)};
    for (int i = 0; i < 2; i++)
        k.largest = cand[i] > k.largest ? cand[i] : k.largest;
    return k;
}

static int fits(size_t B, int recompute, uint64_t max_alloc, uint64_t has)
{
    count k = recount(B, recompute);
    uint64_t lim = max_alloc ? max_alloc & ~(uint64_t)0xFFFF : UINT64_MAX;
    return k.largest <= lim && k.total <= has;
}

static void test_gpt2_124m_under_every_driver(void **state)
{
    (void)state;
    vkg_model_config cfg = {.num_layers = L,
                            .num_heads = NH,
                            .channels = C,
                            .max_seq_len = T,
                            .vocab_size = V,
                            .padded_vocab_size = VP};
    const uint64_t drivers[] = {0, 4ull << 30, 2ull << 30};
    const uint64_t memories[] = {16ull << 30, 24ull << 30, 80ull << 30};
    int checked = 0;
    for (int recompute = 0; recompute <= 1; recompute++)
        for (int d = 0; d < 3; d++) {
            vkg_plan_opts po = {.recompute = recompute, .max_allocation = drivers[d]};
            for (int B = 1; B <= 16; B++) {
                vkg_stage_memory st[1];
                vkg_status s = vkg_strategy_plan(&cfg, B, T, 1, 1, NULL, 0, &po, st);
                count k = recount((size_t)B, recompute);
                int tensor_ok = fits((size_t)B, recompute, drivers[d], UINT64_MAX);
                if (!tensor_ok) {
                    assert_int_equal(s, VKG_ERR_NOMEM);
                    assert_non_null(strstr(vkg_error_message(), "largest allocation"));
                } else {
                    ASSERT_OK(s);
                    assert_int_equal(st[0].model.params, k.params);
                    assert_int_equal(st[0].model.activations, k.acts);
                    assert_int_equal(st[0].model.shared, k.shared);
                    assert_int_equal(st[0].optimizer, k.adamw);
                    assert_int_equal(st[0].total, k.total);
                    assert_int_equal(st[0].model.largest_tensor + 0, k.largest - 0);
                }
                for (int mm = 0; mm < 3; mm++) {
                    int want = fits((size_t)B, recompute, drivers[d], memories[mm]);
                    int best = 0;
                    for (int b = 1; b <= B_MAX; b++)
                        if (fits((size_t)b, recompute, drivers[d], memories[mm]))
                            best = b;
                    s = vkg_strategy_check_fit(&cfg, B, T, 1, 1, NULL, 0, &po, 0, memories[mm]);
                    if (want) {
                        ASSERT_OK(s);
                    } else {
                        assert_int_equal(s, VKG_ERR_NOMEM);
                        char needle[64];
                        snprintf(needle, sizeof needle, "the largest --batch that fits is %d",
                                 best);
                        if (!best)
                            snprintf(needle, sizeof needle, "no --batch fits");
                        if (!strstr(vkg_error_message(), needle))
                            fail_msg("B=%d limit %llu memory %llu: wanted '%s' in: %s", B,
                                     (unsigned long long)drivers[d],
                                     (unsigned long long)memories[mm], needle, vkg_error_message());
                    }
                    assert_int_equal(vkg_strategy_largest_batch(&cfg, B_MAX, T, 1, 1, NULL, 0, &po,
                                                                0, memories[mm]),
                                     best);
                    checked++;
                }
            }
        }
    printf("%d cases agree with the recount\n", checked);
    /* The figures docs/BENCHMARKS.md quotes: 16, 24, 80 GiB under each limit. */
    for (int d = 0; d < 3; d++)
        for (int mm = 0; mm < 3; mm++) {
            vkg_plan_opts po = {.max_allocation = drivers[d]};
            printf("limit %4llu MiB, %2llu GiB: largest --batch %d\n",
                   (unsigned long long)(drivers[d] >> 20), (unsigned long long)(memories[mm] >> 30),
                   vkg_strategy_largest_batch(&cfg, B_MAX, T, 1, 1, NULL, 0, &po, 0, memories[mm]));
        }
}

/* The Llama family's plan against a recount from its shapes: the published Qwen3-0.6B (QK-norm,
 * head_dim 128 with NH D = 2 C, GQA 16/8, SwiGLU 3072, tied) and TinyLlama-1.1B (GQA 32/4, untied)
 * parameter counts, and every activation and scratch tensor of the device model's layers (the
 * RMSNorm's unused mean a 256-byte placeholder, QK-norm's pre-norm q/k/v and statistics, the
 * rotary frequencies). */
static void test_llama_family_recount(void **state)
{
    (void)state;
    const char *names[] = {"qwen3-0.6b", "tinyllama-1.1b"};
    const size_t published[] = {596049920, 1100048384}; /* their model cards' sums of tensors */
    for (int i = 0; i < 2; i++) {
        vkg_model_config c;
        ASSERT_OK(vkg_model_preset(names[i], &c));
        size_t B = 2, Tq = 512, BT = B * Tq, Cc = (size_t)c.channels, NHq = (size_t)c.num_heads;
        size_t NKV = (size_t)c.num_kv_heads, D = c.head_dim ? (size_t)c.head_dim : Cc / NHq;
        size_t F = (size_t)c.mlp_hidden, QKV = (NHq + 2 * NKV) * D, A = NHq * D, FW = 2 * F;
        size_t qk = (size_t)c.qk_norm, Vp = (size_t)c.padded_vocab_size, BTC = BT * Cc;
        size_t stat = B * NHq * Tq, Lq = (size_t)c.num_layers;
        size_t np = Vp * Cc * (c.untied ? 2 : 1) + Cc +
                    Lq * (2 * Cc + QKV * Cc + Cc * A + 3 * Cc * F + qk * 2 * D);
        /* Vp = V for both (multiples of 128): the published counts hold no padding */
        assert_int_equal(np, published[i]);
        size_t layer = r256(BTC) + r256(0) + r256(BT) + r256(BT * QKV) + r256(BT * A) + r256(stat) +
                       r256(BTC) + r256(BTC) + r256(BTC) + r256(0) + r256(BT) + r256(BT * FW) +
                       r256(BT * F) + r256(BTC) + r256(BTC) +
                       (qk ? r256(BT * QKV) + r256(BT * (NHq + NKV)) : 0);
        size_t acts = r256(BTC) + Lq * layer + r256(BTC) + r256(0) + r256(BT) + r256(BT * Vp) +
                      r256(BT) + 2 * r256(BT);
        size_t widest = QKV > FW ? QKV : FW;
        size_t shared = 7 * r256(BTC) + r256(BT * QKV) + r256(BT * A) + r256(BT * FW) +
                        r256(BT * F) + 2 * r256(BTC) + (qk ? r256(BT * QKV) : 0) +
                        r256(BT * widest) + r256(stat) + r256(BTC) + r256(0) + r256(4) +
                        r256(D / 2);
        vkg_stage_memory st[1];
        vkg_plan_opts po = {0};
        ASSERT_OK(vkg_strategy_plan(&c, (int)B, (int)Tq, 1, 1, NULL, 0, &po, st));
        assert_int_equal(st[0].model.params, r256(np));
        assert_int_equal(st[0].model.activations, acts);
        assert_int_equal(st[0].model.shared, shared);
        printf("%s: %zu parameters, %.1f MiB of activations and %.1f MiB shared at B=%zu T=%zu "
               "agree with the recount\n",
               names[i], np, (double)acts / 1048576.0, (double)shared / 1048576.0, B, Tq);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2_124m_under_every_driver),
        cmocka_unit_test(test_llama_family_recount),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
