/* The matmul passes against the CPU reference on one shape (see matmul_check.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>

#include "matmul_check.h"
#include "ops/ops.h"
#include "ref/ref.h"
#include "testutil.h"

/* Download t (n floats) into dst when dst is not NULL. */
static void keep(vkg_gpu *g, vkg_tensor t, float *dst, size_t n)
{
    if (dst)
        vkg_gpu_download(g, t, dst, n * 4);
}

void vkg_mm_check_fwd(vkg_gpu *g, vkg_mm_shape s, int with_bias, uint64_t seed)
{
    vkg_mm_check_fwd_out(g, s, with_bias, seed, &(vkg_mm_got){0});
}

void vkg_mm_check_bwd(vkg_gpu *g, vkg_mm_shape s, int with_bias, int split, uint64_t seed)
{
    vkg_mm_check_bwd_out(g, s, with_bias, split, seed, &(vkg_mm_got){0});
}

void vkg_mm_check_fwd_out(vkg_gpu *g, vkg_mm_shape s, int with_bias, uint64_t seed,
                          const vkg_mm_got *got)
{
    vkg_test_rng r;
    vkg_test_rng_seed(&r, seed);
    size_t nin = (size_t)s.N * s.C, nw = (size_t)s.OC * s.C, nout = (size_t)s.N * s.OC;
    float *inp = vkg_test_alloc(nin), *w = vkg_test_alloc(nw), *b = vkg_test_alloc(s.OC);
    float *ref = vkg_test_alloc(nout);
    vkg_test_fill_uniform(&r, inp, nin, -1.0f, 1.0f);
    vkg_test_fill_uniform(&r, w, nw, -0.5f, 0.5f);
    vkg_test_fill_uniform(&r, b, (size_t)s.OC, -1.0f, 1.0f);
    vkg_ref_matmul_fwd(ref, inp, w, with_bias ? b : NULL, s.N, s.C, s.OC);

    vkg_tensor t_inp = vkg_gpu_upload(g, inp, nin * 4), t_w = vkg_gpu_upload(g, w, nw * 4);
    vkg_tensor t_b = vkg_gpu_upload(g, b, (size_t)s.OC * 4);
    vkg_tensor t_out = vkg_gpu_poisoned(g, nout), t_scratch = vkg_gpu_poisoned(g, nin);
    VKG_ASSERT_OK(vkg_op_matmul_fwd(g->cmd, t_out, t_inp, t_w, with_bias ? &t_b : NULL, s.N, s.C,
                                    s.OC, t_scratch));
    vkg_gpu_run(g);
    char what[96];
    snprintf(what, sizeof what, "matmul_fwd out N=%d C=%d OC=%d bias=%d", s.N, s.C, s.OC,
             with_bias);
    vkg_gpu_expect(g, what, t_out, ref, nout, VKG_TEST_REL_BOUND);
    keep(g, t_out, got->out, nout);
    free(inp), free(w), free(b), free(ref);
}

void vkg_mm_check_bwd_out(vkg_gpu *g, vkg_mm_shape s, int with_bias, int split, uint64_t seed,
                          const vkg_mm_got *got)
{
    vkg_test_rng r;
    vkg_test_rng_seed(&r, seed);
    size_t nin = (size_t)s.N * s.C, nw = (size_t)s.OC * s.C, nout = (size_t)s.N * s.OC;
    float *inp = vkg_test_alloc(nin), *w = vkg_test_alloc(nw), *dout = vkg_test_alloc(nout);
    float *dinp = vkg_test_alloc(nin), *dw = vkg_test_alloc(nw), *db = vkg_test_alloc(s.OC);
    vkg_test_fill_uniform(&r, inp, nin, -1.0f, 1.0f);
    vkg_test_fill_uniform(&r, w, nw, -0.5f, 0.5f);
    vkg_test_fill_uniform(&r, dout, nout, -1.0f, 1.0f);
    vkg_test_fill_uniform(&r, dinp, nin, -1.0f, 1.0f);
    vkg_test_fill_uniform(&r, dw, nw, -1.0f, 1.0f);
    vkg_test_fill_uniform(&r, db, (size_t)s.OC, -1.0f, 1.0f);
    vkg_tensor t_inp = vkg_gpu_upload(g, inp, nin * 4), t_w = vkg_gpu_upload(g, w, nw * 4);
    vkg_tensor t_dout = vkg_gpu_upload(g, dout, nout * 4),
               t_dinp = vkg_gpu_upload(g, dinp, nin * 4);
    vkg_tensor t_dw = vkg_gpu_upload(g, dw, nw * 4), t_db = vkg_gpu_upload(g, db, (size_t)s.OC * 4);
    /* the model's matmul scratch (B*T x 4C): room for split-K's partial products */
    vkg_tensor t_scratch = vkg_gpu_poisoned(g, (size_t)s.N * (size_t)(s.C > s.OC ? s.C : s.OC));
    vkg_ref_matmul_bwd(dinp, dw, with_bias ? db : NULL, dout, inp, w, s.N, s.C, s.OC);

    if (split) {
        VKG_ASSERT_OK(vkg_op_matmul_bwd_dweight(g->cmd, t_dw, with_bias ? &t_db : NULL, t_dout,
                                                t_inp, s.N, s.C, s.OC, &t_scratch));
        VKG_ASSERT_OK(vkg_op_matmul_bwd_dinp(g->cmd, t_dinp, t_dout, t_w, s.N, s.C, s.OC));
    } else {
        VKG_ASSERT_OK(vkg_op_matmul_bwd(g->cmd, t_dinp, t_dw, with_bias ? &t_db : NULL, t_dout,
                                        t_inp, t_w, s.N, s.C, s.OC, &t_scratch));
    }
    vkg_gpu_run(g);
    char what[96];
    snprintf(what, sizeof what, "matmul_bwd%s dinp N=%d C=%d OC=%d", split ? " (split)" : "", s.N,
             s.C, s.OC);
    vkg_gpu_expect(g, what, t_dinp, dinp, nin, VKG_TEST_REL_BOUND);
    snprintf(what, sizeof what, "matmul_bwd dweight N=%d C=%d OC=%d", s.N, s.C, s.OC);
    vkg_gpu_expect(g, what, t_dw, dw, nw, VKG_TEST_REL_BOUND);
    snprintf(what, sizeof what, "matmul_bwd dbias N=%d C=%d OC=%d", s.N, s.C, s.OC);
    vkg_gpu_expect(g, what, t_db, db, (size_t)s.OC, VKG_TEST_REL_BOUND);
    keep(g, t_dinp, got->dinp, nin);
    keep(g, t_dw, got->dw, nw);
    keep(g, t_db, got->db, (size_t)s.OC);
    free(inp), free(w), free(dout), free(dinp), free(dw), free(db);
}
