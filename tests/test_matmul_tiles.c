/* The tiled matmul's GPU forms on this device (lavapipe in CI), forced through the tuning:
 *  - every entry of the per-vendor table (src/ops/mmt.c) against the CPU reference: forward
 *    (with and without bias), dinp, dweight with and without split-K, dbias, on a GPT-2 shape
 *    and on awkward ones (sizes that are not multiples of any tile, K = 1, one row, leading
 *    dimensions that rule out vec4). Entries whose tiles equal an earlier entry's build the same
 *    pipeline (the same specialization constants and required subgroup size), so they run
 *    once: 24 entries, 8 distinct tilings, 8 pipelines or more (where the device honours the
 *    entries' required subgroup sizes). The shapes are few and small (the GPT-2 one at B*T = 32) so
 * that the run is mostly lavapipe compiling the pipelines, about 7 per tiling: about a minute on 2
 * busy cores the first time, a few seconds once Mesa's shader cache holds them;
 *  - vec4 loads taken where the operands allow them and not elsewhere (the recorded dispatch's
 *    VEC4 constant), with the same bits as the scalar path;
 *  - split-K taken for a small weight gradient over many rows, the same bits on two runs, and
 *    not taken without room in the scratch;
 *  - the required subgroup size passed where the device's subgroup size control allows it;
 *  - --tiles values: the device limits vkg_device_create checks (the parser: test_tiling_parse);
 *  - every entry also double buffered (DBUF), with the single-buffered run's bits, where the
 *    device's shared memory holds two buffers (else refused when forced, dropped by
 *    vkg__mmt_fit, and run at a smaller BK); both bufferings on the vec4 and scalar paths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_fixture.h"
#include "matmul_check.h"
#include "ops/ops.h"
#include "testutil.h"

#define SPEC_VEC4 11 /* matmul_tiled.comp's VEC4 constant_id */
#define SPEC_DBUF 16 /* and DBUF's (named only by double-buffered dispatches) */

/* Every entry's tiles for every product size, split-K wherever K allows (an unreachable fill),
 * vec4 where the operands allow. */
static void force(vkg_gpu *g, const vkg_device_tuning *saved, const vkg_matmul_tiling *t,
                  int splitk, int vec4)
{
    vkg_device_tuning tu = *saved;
    vkg__mmt_force(&tu, t);
    tu.mmt_fill = 1u << 20;
    tu.mmt_splitk = (uint32_t)splitk;
    tu.mmt_vec4 = (uint32_t)vec4;
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &tu));
}

static const vkg_mm_shape table_shapes[] = {
    {32, 768, 768}, /* GPT-2 attention projection at B*T = 32 (qkv's 2304 outputs would triple
                       the time for nothing new): vec4 loads of both operands in every pass */
    {7, 13, 37},    /* no tile's multiple, odd leading dimensions: the scalar path */
    {1, 768, 50},   /* one row */
    {7, 1, 5},      /* C = 1: K = 1 in the forward pass */
    {9, 6, 1},      /* OC = 1: K = 1 in dinp */
    {600, 36, 20},  /* dweight over K = N = 600 rows on a grid of a few workgroups: split-K */
};
#define NTABLE (sizeof table_shapes / sizeof table_shapes[0])

/* ref (M, N) = a (M, K) b (K, N), summed in double. */
static void ref_gemm(float *ref, const float *a, const float *b, int M, int N, int K)
{
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double acc = 0.0;
            for (int k = 0; k < K; k++)
                acc += (double)a[m * K + k] * b[k * N + n];
            ref[m * N + n] = (float)acc;
        }
}

/* Same tiles and required subgroup, whatever the buffering (both bufferings of each run). */
static int same_tiles(const vkg_matmul_tiling *a, const vkg_matmul_tiling *b, uint32_t sa,
                      uint32_t sb)
{
    return a->bm == b->bm && a->bn == b->bn && a->bk == b->bk && a->tm == b->tm && a->tn == b->tn &&
           sa == sb;
}

/* Floats of run_entry's outputs: per shape the forward output and the three gradients, then
 * the gradients of the dweight pass without split-K. */
static size_t shape_floats(vkg_mm_shape s)
{
    return (size_t)s.N * s.OC + (size_t)s.N * s.C + (size_t)s.OC * s.C + (size_t)s.OC;
}

static size_t entry_floats(void)
{
    vkg_mm_shape last = table_shapes[NTABLE - 1];
    size_t n = shape_floats(last) - (size_t)last.N * last.OC; /* no forward output */
    for (size_t k = 0; k < NTABLE; k++)
        n += shape_floats(table_shapes[k]);
    return n;
}

/* The backward pass on shape k's inputs, checked, its gradients stored from o; returns the end. */
static float *bwd_into(vkg_gpu *g, size_t k, int split, uint64_t seed, float *o)
{
    vkg_mm_shape s = table_shapes[k];
    vkg_mm_got got = {NULL, o, o + (size_t)s.N * s.C, o + (size_t)s.N * s.C + (size_t)s.OC * s.C};
    vkg_mm_check_bwd_out(g, s, 1, split, seed, &got);
    return got.db + s.OC;
}

/* Every pass on every shape with tiles t (split-K wherever K allows, then a dweight without),
 * each checked against the reference, the outputs stored in outs (entry_floats()). */
static void run_entry(vkg_gpu *g, const vkg_device_tuning *saved, const vkg_matmul_tiling *t, int i,
                      float *outs)
{
    float *o = outs;
    force(g, saved, t, 1, 1);
    for (size_t k = 0; k < NTABLE; k++) {
        vkg_mm_check_fwd_out(g, table_shapes[k], (int)((k + (size_t)i) % 2), 600 + k,
                             &(vkg_mm_got){.out = o});
        o += (size_t)table_shapes[k].N * table_shapes[k].OC;
        o = bwd_into(g, k, (int)(k % 2), 700 + k, o);
    }
    force(g, saved, t, 0, 1); /* dweight over many rows without split-K */
    o = bwd_into(g, NTABLE - 1, 1, 800, o);
    assert_int_equal(o - outs, entry_floats());
}

/* The double-buffered form of t that this device can run: t's own, or, where its shared memory
 * is too small for two buffers of t's tiles, t's blocks with BK halved until they fit (the same
 * bits: every output adds its products in the order of k whatever BK is), after checking that
 * t itself is refused when forced and loses its second buffer in vkg__mmt_fit. */
static vkg_matmul_tiling double_form(vkg_gpu *g, const vkg_device_tuning *saved,
                                     vkg_matmul_tiling t)
{
    uint32_t room = vkg_device_get_info(g->dev)->max_shared_memory;
    t.dbuf = 1;
    if (vkg_matmul_tiling_smem(&t) <= room)
        return t;
    vkg_device_tuning tu = *saved;
    vkg__mmt_force(&tu, &t);
    assert_int_equal(vkg_device_tuning_set(g->dev, &tu), VKG_ERR_INVALID_ARG);
    assert_non_null(strstr(vkg_error_message(), "double buffered"));
    assert_non_null(strstr(vkg_error_message(), "+sb"));
    vkg__mmt_fit(g->dev, &tu);
    for (int s = 0; s < VKG_MMT_SIZES; s++)
        assert_true(tu.mmt[s].dbuf == 0 && tu.mmt[s].bm == t.bm && tu.mmt[s].bk == t.bk);
    assert_int_equal(tu.mmt_dbuf_dropped, (1u << VKG_MMT_SIZES) - 1);
    while (vkg_matmul_tiling_smem(&t) > room && t.bk > 1)
        t.bk /= 2;
    printf("  double buffered needs %zu bytes of shared memory here: refused, run with BK = %u\n",
           vkg_matmul_tiling_smem(&(vkg_matmul_tiling){t.bm, t.bn, t.bk * 2, t.tm, t.tn, 0, 1}),
           t.bk);
    return t;
}

static void test_table_entries(void **state)
{
    vkg_gpu *g = *state;
    vkg_device_tuning saved = vkg_device_tuning_get(g->dev);
    int n = vkg_matmul_tiling_count(), ran = 0;
    assert_int_equal(n, 24);
    size_t nf = entry_floats();
    float *one = vkg_test_alloc(nf), *two = vkg_test_alloc(nf);
    for (int i = 0; i < n; i++) {
        vkg_matmul_tiling t, u;
        const char *name = vkg_matmul_tiling_entry(i, &t);
        uint32_t sg = vkg__mmt_subgroup(g->dev, &t);
        int dup = -1;
        for (int j = 0; j < i && dup < 0; j++) {
            vkg_matmul_tiling_entry(j, &u);
            if (same_tiles(&t, &u, sg, vkg__mmt_subgroup(g->dev, &u)))
                dup = j;
        }
        if (dup >= 0) {
            printf("%-18s same pipelines as %s\n", name, vkg_matmul_tiling_entry(dup, NULL));
            continue;
        }
        printf("%-18s %ux%ux%u:%ux%u subgroup %u (required here: %u), table: %s buffered\n", name,
               t.bm, t.bn, t.bk, t.tm, t.tn, t.subgroup, sg, t.dbuf ? "double" : "single");
        vkg_matmul_tiling single = t, dbl = double_form(g, &saved, t);
        single.dbuf = 0;
        run_entry(g, &saved, &single, i, one);
        run_entry(g, &saved, &dbl, i, two);
        for (size_t k = 0; k < nf; k++)
            if (memcmp(&one[k], &two[k], 4))
                fail_msg("%s: double buffered %a, single %a at output float %zu", name, two[k],
                         one[k], k);
        ran++;
    }
    /* 8 distinct tilings whatever the device; more pipelines where the device honours the
     * entries' different required subgroup sizes (11 on NVIDIA, 8 on lavapipe) */
    int tilings = 0;
    for (int i = 0; i < n; i++) {
        vkg_matmul_tiling t, u;
        vkg_matmul_tiling_entry(i, &t);
        int dup = 0;
        for (int j = 0; j < i && !dup; j++) {
            vkg_matmul_tiling_entry(j, &u);
            dup = same_tiles(&t, &u, 0, 0);
        }
        tilings += !dup;
    }
    assert_int_equal(tilings, 8);
    assert_true(ran >= tilings && ran <= n);
    free(one), free(two);
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &saved));
}

/* out (M, N) = A B with A, B in the given layouts, from a's and b's first elements at element
 * offsets ao, bo and with leading dimensions padded by pad; returns the dispatch as recorded,
 * the result in got. */
static vkg_cmd_logged run_gemm(vkg_gpu *g, int ak, int bk, uint32_t pad, size_t ao, size_t bo,
                               const float *a, const float *b, float *got, int M, int N, int K)
{
    uint32_t lda = (ak ? (uint32_t)K : (uint32_t)M) + pad;
    uint32_t ldb = (bk ? (uint32_t)K : (uint32_t)N) + pad;
    size_t na = (size_t)lda * (ak ? M : K), nb = (size_t)ldb * (bk ? N : K);
    float *sa = calloc(na + ao, 4), *sb = calloc(nb + bo, 4);
    assert_true(sa && sb);
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++)
            sa[ao + (ak ? (size_t)m * lda + k : (size_t)k * lda + m)] = a[m * K + k];
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++)
            sb[bo + (bk ? (size_t)n * ldb + k : (size_t)k * ldb + n)] = b[k * N + n];
    vkg_tensor ta = vkg_gpu_upload(g, sa, (na + ao) * 4), tb = vkg_gpu_upload(g, sb, (nb + bo) * 4);
    vkg_tensor out = vkg_gpu_poisoned(g, (size_t)M * N);
    vkg_gemm gm = {.out = out,
                   .a = vkg_tensor_view(ta, ao * 4, na * 4),
                   .b = vkg_tensor_view(tb, bo * 4, nb * 4),
                   .M = (uint32_t)M,
                   .N = (uint32_t)N,
                   .K = (uint32_t)K,
                   .lda = lda,
                   .ldb = ldb,
                   .ldo = (uint32_t)N,
                   .a_kcontig = ak,
                   .b_kcontig = bk,
                   .label = "gemm"};
    VKG_ASSERT_OK(vkg_op_gemm(g->cmd, &gm));
    vkg_cmd_logged l;
    assert_int_equal(vkg_cmd_logged_dispatch(g->cmd, 0, &l), 0);
    assert_int_equal(l.kernel, VKG_KERNEL_matmul_tiled);
    vkg_gpu_run(g);
    vkg_gpu_download(g, out, got, (size_t)M * N * 4);
    free(sa), free(sb);
    return l;
}

/* The VEC4 and DBUF constants a recorded dispatch of matmul_tiled.comp names (0 where unnamed). */
static uint32_t vec4_of(vkg_cmd_logged l)
{
    return l.spec[SPEC_VEC4];
}

static uint32_t dbuf_of(vkg_cmd_logged l)
{
    return l.nspec > SPEC_DBUF ? l.spec[SPEC_DBUF] : 0;
}

/* vec4 where every operand allows it, with the scalar path's bits; scalar where a leading
 * dimension, an extent or an address is not a multiple of 4 floats; both paths double buffered
 * (three steps of BK along K, so each buffer is refilled) with the same bits again. */
static void test_vec4_and_scalar(void **state)
{
    vkg_gpu *g = *state;
    vkg_device_tuning saved = vkg_device_tuning_get(g->dev);
    const vkg_matmul_tiling t = {32, 32, 16, 4, 4, 0, 0}, td = {32, 32, 16, 4, 4, 0, 1};
    enum { M = 36, N = 44, K = 40 };
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 31);
    float a[M * K], b[K * N], ref[M * N], v4[M * N], sc[M * N], odd[M * N];
    vkg_test_fill_uniform(&r, a, M * K, -1.0f, 1.0f);
    vkg_test_fill_uniform(&r, b, K * N, -1.0f, 1.0f);
    ref_gemm(ref, a, b, M, N, K);
    for (int lay = 0; lay < 4; lay++) {
        int ak = lay & 1, bk = lay >> 1;
        char what[64];
        force(g, &saved, &t, 0, 1);
        assert_int_equal(vec4_of(run_gemm(g, ak, bk, 0, 0, 0, a, b, v4, M, N, K)), 1);
        snprintf(what, sizeof what, "vec4 gemm a_kcontig %d b_kcontig %d", ak, bk);
        assert_true(vkg_test_compare(what, v4, ref, M * N, VKG_TEST_REL_BOUND, NULL));
        /* odd leading dimensions, or an operand 4 bytes off 16-byte alignment: scalar */
        assert_int_equal(vec4_of(run_gemm(g, ak, bk, 1, 0, 0, a, b, odd, M, N, K)), 0);
        assert_memory_equal(odd, v4, sizeof odd);
        assert_int_equal(vec4_of(run_gemm(g, ak, bk, 0, 1, 0, a, b, odd, M, N, K)), 0);
        assert_int_equal(vec4_of(run_gemm(g, ak, bk, 0, 0, 3, a, b, odd, M, N, K)), 0);
        assert_memory_equal(odd, v4, sizeof odd);
        force(g, &saved, &t, 0, 0); /* vec4 off in the tuning: scalar, the same bits */
        vkg_cmd_logged l = run_gemm(g, ak, bk, 0, 0, 0, a, b, sc, M, N, K);
        assert_true(vec4_of(l) == 0 && dbuf_of(l) == 0 && l.nspec == 13);
        assert_memory_equal(sc, v4, sizeof sc);
        force(g, &saved, &td, 0, 1); /* double buffered: vec4, then scalar */
        l = run_gemm(g, ak, bk, 0, 0, 0, a, b, sc, M, N, K);
        assert_true(vec4_of(l) == 1 && dbuf_of(l) == 1);
        assert_memory_equal(sc, v4, sizeof sc);
        l = run_gemm(g, ak, bk, 1, 0, 0, a, b, sc, M, N, K);
        assert_true(vec4_of(l) == 0 && dbuf_of(l) == 1);
        assert_memory_equal(sc, v4, sizeof sc);
    }
    /* K = 37: no vec4 along k, whatever the layout */
    force(g, &saved, &t, 0, 1);
    assert_int_equal(vec4_of(run_gemm(g, 1, 1, 3, 0, 0, a, b, sc, M, N, 37)), 0);
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &saved));
}

/* dweight (OC, C) += dout^T inp over N rows with the given scratch; the dispatches recorded. */
static void run_dweight(vkg_gpu *g, vkg_tensor dw, vkg_tensor dout, vkg_tensor inp,
                        const vkg_tensor *scratch, int N, int C, int OC, vkg_cmd_logged *prod,
                        vkg_cmd_logged *last)
{
    VKG_ASSERT_OK(vkg_op_matmul_bwd_dweight(g->cmd, dw, NULL, dout, inp, N, C, OC, scratch));
    assert_int_equal(vkg_cmd_logged_dispatch(g->cmd, 0, last), 0);
    *prod = *last;
    if (last->kernel == VKG_KERNEL_matmul_bwd_splitk)
        assert_int_equal(vkg_cmd_logged_dispatch(g->cmd, 1, prod), 0);
    assert_int_equal(prod->kernel, VKG_KERNEL_matmul_tiled);
    vkg_gpu_run(g);
}

/* Split-K: taken (partials over z, then the ordered sum), matching the reference, the same bits
 * twice; one chunk where the scratch has room for one partial product or there is none. */
static void test_splitk(void **state)
{
    vkg_gpu *g = *state;
    vkg_device_tuning saved = vkg_device_tuning_get(g->dev);
    const vkg_matmul_tiling t = {32, 32, 16, 4, 4, 0, 0};
    force(g, &saved, &t, 1, 1);
    enum { N = 2000, C = 24, OC = 40 };
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 41);
    float *inp = vkg_test_alloc((size_t)N * C), *dout = vkg_test_alloc((size_t)N * OC);
    float start[OC * C], ref[OC * C], first[OC * C], again[OC * C];
    vkg_test_fill_uniform(&r, inp, (size_t)N * C, -1.0f, 1.0f);
    vkg_test_fill_uniform(&r, dout, (size_t)N * OC, -1.0f, 1.0f);
    vkg_test_fill_uniform(&r, start, OC * C, -1.0f, 1.0f);
    for (int oc = 0; oc < OC; oc++) /* ref = start + dout^T inp */
        for (int c = 0; c < C; c++) {
            double acc = start[oc * C + c];
            for (int n = 0; n < N; n++)
                acc += (double)dout[(size_t)n * OC + oc] * inp[(size_t)n * C + c];
            ref[oc * C + c] = (float)acc;
        }
    vkg_tensor ti = vkg_gpu_upload(g, inp, (size_t)N * C * 4);
    vkg_tensor td = vkg_gpu_upload(g, dout, (size_t)N * OC * 4);
    vkg_tensor scratch = vkg_gpu_poisoned(g, (size_t)N * OC), one = vkg_gpu_poisoned(g, OC * C);
    vkg_cmd_logged prod, last;
    for (int run = 0; run < 2; run++) {
        vkg_tensor dw = vkg_gpu_upload(g, start, sizeof start);
        run_dweight(g, dw, td, ti, &scratch, N, C, OC, &prod, &last);
        /* a grid of 2 workgroups: min(8, 2000 / 256) = 7 chunks asked, of 286 rows rounded up
         * to 512: 4 chunks */
        assert_int_equal(last.kernel, VKG_KERNEL_matmul_bwd_splitk);
        assert_int_equal(prod.grid[2], 4);
        assert_int_equal(prod.spec[10], 0); /* partials overwrite their slices */
        vkg_gpu_download(g, dw, run ? again : first, sizeof first);
    }
    assert_true(vkg_test_compare("split-K dweight", first, ref, OC * C, VKG_TEST_REL_BOUND, NULL));
    assert_memory_equal(first, again, sizeof first);
    const vkg_tensor *none[2] = {&one, NULL};
    for (int i = 0; i < 2; i++) {
        vkg_tensor dw = vkg_gpu_upload(g, start, sizeof start);
        run_dweight(g, dw, td, ti, none[i], N, C, OC, &prod, &last);
        assert_int_equal(prod.grid[2], 1);
        assert_int_equal(prod.spec[10], 1); /* accumulates into dweight itself */
        vkg_gpu_download(g, dw, again, sizeof again);
        assert_true(
            vkg_test_compare("dweight, no split", again, ref, OC * C, VKG_TEST_REL_BOUND, NULL));
    }
    free(inp), free(dout);
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &saved));
}

/* A required subgroup size reaches the pipeline where the device's control covers it, and is
 * dropped where it does not (the pipeline is then built without one, validation stays quiet). */
static void test_required_subgroup(void **state)
{
    vkg_gpu *g = *state;
    vkg_device_tuning saved = vkg_device_tuning_get(g->dev);
    const vkg_device_info *info = vkg_device_get_info(g->dev);
    printf("subgroup size control: %d (%u..%u, %u subgroups per workgroup)\n",
           info->subgroup_size_control, info->subgroup_size_min, info->subgroup_size_max,
           info->max_workgroup_subgroups);
    uint32_t ok = info->subgroup_size_control ? info->subgroup_size_min : 0;
    uint32_t tries[2] = {ok ? ok : 32, 128};
    enum { M = 20, N = 24, K = 12 };
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 51);
    float a[M * K], b[K * N], ref[M * N], got[M * N];
    vkg_test_fill_uniform(&r, a, M * K, -1.0f, 1.0f);
    vkg_test_fill_uniform(&r, b, K * N, -1.0f, 1.0f);
    ref_gemm(ref, a, b, M, N, K);
    for (int i = 0; i < 2; i++) {
        vkg_matmul_tiling t = {16, 16, 8, 2, 2, tries[i], 0};
        force(g, &saved, &t, 0, 1);
        uint32_t want = i == 0 ? ok : (info->subgroup_size_max >= 128 ? 128 : 0);
        assert_int_equal(vkg__mmt_subgroup(g->dev, &t), want);
        run_gemm(g, 1, 0, 0, 0, 0, a, b, got, M, N, K);
        assert_true(
            vkg_test_compare("gemm, required subgroup", got, ref, M * N, VKG_TEST_REL_BOUND, NULL));
    }
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &saved));
}

/* Tiles forced on an open device (--tiles): taken for products of every size, or refused by the
 * device's limits with the tuning left as it was. */
static void test_force_tiles(void **state)
{
    (void)state;
    vkg_device_opts o = vkg_device_opts_default();
    o.validation = 1;
    vkg_device_t *dev = NULL;
    VKG_ASSERT_OK(vkg_device_create(&o, &dev));
    vkg_device_tuning before = vkg_device_tuning_get(dev);
    vkg_matmul_tiling big = {256, 256, 64, 16, 16, 0, 0}; /* 132 KiB of shared memory */
    assert_int_equal(vkg_device_force_tiles(dev, &big), VKG_ERR_INVALID_ARG);
    assert_non_null(strstr(vkg_error_message(), "bytes of shared memory"));
    vkg_device_tuning after = vkg_device_tuning_get(dev);
    assert_memory_equal(&after, &before, sizeof before);
    vkg_matmul_tiling t = {64, 32, 16, 4, 2, 0, 0};
    VKG_ASSERT_OK(vkg_device_force_tiles(dev, &t));
    vkg_matmul_choice mc;
    vkg_device_matmul_choice(dev, &mc);
    assert_true(mc.tiled == 1 && !strcmp(mc.row, "forced"));
    for (int i = 0; i < VKG_MMT_SIZES; i++)
        assert_memory_equal(&mc.tiles[i], &t, sizeof t);
    uint32_t room = vkg_device_get_info(dev)->max_shared_memory;
    /* 256 x 256 blocks with the BK at which one buffer fits this device's shared memory and two
     * do not (4112 bytes per k double buffered): refused double buffered, taken single */
    vkg_matmul_tiling two = {256, 256, room / 4112 + 1, 16, 16, 0, 1};
    assert_true(two.bk <= 64 && vkg_matmul_tiling_smem(&two) > room &&
                vkg_matmul_tiling_smem(&two) / 2 <= room);
    assert_int_equal(vkg_device_force_tiles(dev, &two), VKG_ERR_INVALID_ARG);
    assert_non_null(strstr(vkg_error_message(), "tiles, double buffered, need"));
    assert_non_null(strstr(vkg_error_message(), "(single buffered, +sb, they need half as much)"));
    two.dbuf = 0;
    VKG_ASSERT_OK(vkg_device_force_tiles(dev, &two));
    assert_int_equal(vkg_device_tuning_get(dev).mmt[VKG_MMT_LARGE].dbuf, 0);
    char first[256];
    assert_int_equal(vkg_device_destroy_report(&dev, first, sizeof first), 0);
}

/* The table's double-buffered tiles lose their second buffer where the device's shared memory
 * holds only one, say so in mmt_dbuf_dropped, and keep it where both fit. */
static void test_dbuf_fit(void **state)
{
    vkg_gpu *g = *state;
    vkg_device_tuning saved = vkg_device_tuning_get(g->dev), t = saved;
    uint32_t room = vkg_device_get_info(g->dev)->max_shared_memory;
    vkg_matmul_tiling big = {256, 256, room / 4112 + 1, 16, 16, 0, 1};  /* as above */
    t.mmt[VKG_MMT_SMALL] = (vkg_matmul_tiling){32, 32, 16, 4, 4, 0, 1}; /* 8448 bytes: fits */
    t.mmt[VKG_MMT_MEDIUM] = (vkg_matmul_tiling){64, 64, 16, 4, 4, 0, 0};
    t.mmt[VKG_MMT_LARGE] = big;
    t.mmt_dbuf_dropped = 0;
    vkg__mmt_fit(g->dev, &t);
    assert_int_equal(t.mmt_dbuf_dropped, 1u << VKG_MMT_LARGE);
    assert_int_equal(t.mmt[VKG_MMT_SMALL].dbuf, 1);
    big.dbuf = 0;
    assert_memory_equal(&t.mmt[VKG_MMT_LARGE], &big, sizeof big);
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &t));
    /* a fresh table row starts with nothing dropped */
    vkg__mmt_defaults(0x10DE, VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, &t);
    assert_true(t.mmt_dbuf_dropped == 0 && t.mmt[VKG_MMT_LARGE].dbuf == 1);
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &saved));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_force_tiles),
        cmocka_unit_test_setup_teardown(test_table_entries, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_vec4_and_scalar, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_splitk, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_required_subgroup, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_dbuf_fit, vkg_gpu_setup, vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
