/* The CPU reference of grouped-query attention (vkg_ref_attention_gqa_fwd/_bwd in
 * src/ref/ref_llama_impl.h), on the CPU only:
 *  - its backward against central differences of sum(dout * out) in double (step 5e-6, bound
 *    1e-6 relative, as tests/test_ref.c: measured about 1e-8), with the gradient pre-filled (it
 *    accumulates); groups of several sizes, D across the 64-channel chunk, T across the 256-row
 *    block;
 *  - at NKV = NH and D = C/NH it is GPT-2's reference vkg_ref_attention_*_f64 (to 1e-12);
 *  - the float instantiation agrees with the double one to 1e-6 relative L2.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/fd_check.h"
#include "ref/ref.h"
#include "testutil.h"

#define FD_H 5e-6
#define FD_BOUND 1e-6

typedef struct gqa_shape {
    int B, T, NH, NKV, D;
} gqa_shape;

typedef struct gqa_sizes {
    size_t ld, oc, n_qkv, n_out, n_lse;
} gqa_sizes;

static gqa_sizes sizes_of(gqa_shape s)
{
    gqa_sizes z;
    z.oc = (size_t)s.NH * s.D;
    z.ld = z.oc + 2 * (size_t)s.NKV * s.D;
    z.n_qkv = (size_t)s.B * s.T * z.ld;
    z.n_out = (size_t)s.B * s.T * z.oc;
    z.n_lse = (size_t)s.B * s.NH * s.T;
    return z;
}

static double *dalloc(size_t n)
{
    double *x = calloc(n ? n : 1, sizeof *x);
    assert_non_null(x);
    return x;
}

typedef struct fd_ctx {
    gqa_shape s;
    double *qkv, *dout, *out, *lse;
    size_t n_out;
} fd_ctx;

static double objective(void *p)
{
    fd_ctx *c = p;
    vkg_ref_attention_gqa_fwd_f64(c->out, c->lse, c->qkv, c->s.B, c->s.T, c->s.NH, c->s.NKV,
                                  c->s.D);
    return vkg_ref_dot_compensated(c->out, c->dout, c->n_out);
}

/* Central differences of sum(dout * out) over the coordinates of qkv against the backward,
 * whose gradient starts at 0.25 (subtracted afterwards: it must accumulate). Groups of 2, 6 and 1
 * query heads, D = 67 across the 64-channel chunk, T = 259 across the 256-row block. */
static void test_reference_fd(void **state)
{
    (void)state;
    static const gqa_shape shapes[] = {{2, 5, 4, 2, 3}, {1, 6, 6, 1, 5},  {2, 4, 2, 2, 4},
                                       {1, 3, 3, 3, 2}, {1, 2, 2, 1, 67}, {1, 259, 2, 1, 2}};
    /* coordinates checked: all, but a sample where T crosses the 256-row block */
    static const size_t count[] = {100000, 100000, 100000, 100000, 100000, 120};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        gqa_shape s = shapes[i];
        gqa_sizes z = sizes_of(s);
        vkg_test_rng r;
        vkg_test_rng_seed(&r, 40 + i);
        fd_ctx c = {s, dalloc(z.n_qkv), dalloc(z.n_out), dalloc(z.n_out), dalloc(z.n_lse), z.n_out};
        double *grad = dalloc(z.n_qkv);
        vkg_test_fill_uniform_f64(&r, c.qkv, z.n_qkv, -1.5, 1.5);
        vkg_test_fill_uniform_f64(&r, c.dout, z.n_out, -1.0, 1.0);
        for (size_t j = 0; j < z.n_qkv; j++)
            grad[j] = 0.25;
        objective(&c);
        vkg_ref_attention_gqa_bwd_f64(grad, c.dout, c.qkv, c.lse, s.B, s.T, s.NH, s.NKV, s.D);
        for (size_t j = 0; j < z.n_qkv; j++)
            grad[j] -= 0.25;
        vkg_ref_fd_result_t res =
            vkg_ref_fd_check(c.qkv, grad, z.n_qkv, count[i], FD_H, 7 + i, objective, &c);
        printf("fd gqa B=%d T=%d NH=%d NKV=%d D=%d: %zu coords, max rel err %.2e (at %zu: %.9g vs "
               "%.9g)\n",
               s.B, s.T, s.NH, s.NKV, s.D, res.checked, res.max_err, res.worst, res.analytic,
               res.numeric);
        assert_true(res.max_err < FD_BOUND);
        free(c.qkv), free(c.dout), free(c.out), free(c.lse), free(grad);
    }
}

/* At NKV = NH and D = C/NH the grouped layout is GPT-2's and so are the results. */
static void test_reference_is_gpt2(void **state)
{
    (void)state;
    gqa_shape s = {2, 9, 3, 3, 4};
    gqa_sizes z = sizes_of(s);
    int C = s.NH * s.D;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 5);
    double *qkv = dalloc(z.n_qkv), *dout = dalloc(z.n_out), *o1 = dalloc(z.n_out);
    double *o2 = dalloc(z.n_out), *l1 = dalloc(z.n_lse), *l2 = dalloc(z.n_lse);
    double *g1 = dalloc(z.n_qkv), *g2 = dalloc(z.n_qkv);
    vkg_test_fill_uniform_f64(&r, qkv, z.n_qkv, -2.0, 2.0);
    vkg_test_fill_uniform_f64(&r, dout, z.n_out, -1.0, 1.0);
    vkg_ref_attention_gqa_fwd_f64(o1, l1, qkv, s.B, s.T, s.NH, s.NKV, s.D);
    vkg_ref_attention_fwd_f64(o2, l2, NULL, qkv, s.B, s.T, C, s.NH);
    vkg_ref_attention_gqa_bwd_f64(g1, dout, qkv, l1, s.B, s.T, s.NH, s.NKV, s.D);
    vkg_ref_attention_bwd_f64(g2, dout, qkv, l2, s.B, s.T, C, s.NH);
    double worst = 0.0;
    for (size_t i = 0; i < z.n_out; i++)
        worst = fmax(worst, fabs(o1[i] - o2[i]));
    for (size_t i = 0; i < z.n_lse; i++)
        worst = fmax(worst, fabs(l1[i] - l2[i]));
    for (size_t i = 0; i < z.n_qkv; i++)
        worst = fmax(worst, fabs(g1[i] - g2[i]));
    printf("gqa reference at NKV = NH vs GPT-2's: max abs difference %.2e\n", worst);
    assert_true(worst < 1e-12);
    free(qkv), free(dout), free(o1), free(o2), free(l1), free(l2), free(g1), free(g2);
}

/* float against double on the same inputs: out, lse and dqkv within 1e-6 relative L2 */
static void test_float_matches_double(void **state)
{
    (void)state;
    gqa_shape s = {2, 21, 6, 2, 16};
    gqa_sizes z = sizes_of(s);
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 6);
    float *q = vkg_test_random(&r, z.n_qkv, -2.0f, 2.0f), *dy = vkg_test_random(&r, z.n_out, -1, 1);
    float *o = vkg_test_alloc(z.n_out), *l = vkg_test_alloc(z.n_lse), *g = vkg_test_alloc(z.n_qkv);
    float *o2 = vkg_test_alloc(z.n_out), *l2 = vkg_test_alloc(z.n_lse);
    float *g2 = vkg_test_alloc(z.n_qkv);
    double *qd = dalloc(z.n_qkv), *dyd = dalloc(z.n_out), *od = dalloc(z.n_out);
    double *ld = dalloc(z.n_lse), *gd = dalloc(z.n_qkv);
    for (size_t i = 0; i < z.n_qkv; i++)
        qd[i] = q[i], g[i] = 0.0f;
    for (size_t i = 0; i < z.n_out; i++)
        dyd[i] = dy[i];
    vkg_ref_attention_gqa_fwd(o, l, q, s.B, s.T, s.NH, s.NKV, s.D);
    vkg_ref_attention_gqa_bwd(g, dy, q, l, s.B, s.T, s.NH, s.NKV, s.D);
    vkg_ref_attention_gqa_fwd_f64(od, ld, qd, s.B, s.T, s.NH, s.NKV, s.D);
    vkg_ref_attention_gqa_bwd_f64(gd, dyd, qd, ld, s.B, s.T, s.NH, s.NKV, s.D);
    for (size_t i = 0; i < z.n_out; i++)
        o2[i] = (float)od[i];
    for (size_t i = 0; i < z.n_lse; i++)
        l2[i] = (float)ld[i];
    for (size_t i = 0; i < z.n_qkv; i++)
        g2[i] = (float)gd[i];
    vkg_test_cmp c;
    assert_true(vkg_test_compare("out", o, o2, z.n_out, 1e-6, &c));
    assert_true(vkg_test_compare("lse", l, l2, z.n_lse, 1e-6, &c));
    assert_true(vkg_test_compare("dqkv", g, g2, z.n_qkv, 1e-6, &c));
    printf("float reference vs double: dqkv rel_l2 %.2e\n", c.rel_l2);
    free(q), free(dy), free(o), free(l), free(g), free(o2), free(l2), free(g2);
    free(qd), free(dyd), free(od), free(ld), free(gd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_fd),
        cmocka_unit_test(test_reference_is_gpt2),
        cmocka_unit_test(test_float_matches_double),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
