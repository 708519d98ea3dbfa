/* Checks shared by the tests of the Llama-family kernels (test_rmsnorm.c, test_swiglu.c,
 * test_rope.c): bitwise comparisons of device tensors, bf16 outputs against fp32 results rounded
 * once, and finite differences of the double reference with a printed summary. */
#ifndef VKG_TEST_LLAMA_CHECK_H
#define VKG_TEST_LLAMA_CHECK_H

#include <stddef.h>

#include "gpu_fixture.h"
#include "ref/fd_check.h"

/* Fail naming what unless the first `words` 32-bit words of a and b are equal. */
void llama_expect_words(vkg_gpu *g, const char *what, vkg_tensor a, vkg_tensor b, size_t words);
/* Fail naming what unless the bf16 tensor t holds exactly the n values of want rounded once to
 * nearest even, and (n odd) the half word after the last element is 0. */
void llama_expect_rounded(vkg_gpu *g, const char *what, vkg_tensor t, const float *want, size_t n);
/* vkg_ref_fd_check (step 5e-6, count coordinates) with a printed line; fails the test naming
 * what when the largest error is above bound; returns it. */
double llama_fd(const char *what, double *x, const double *grad, size_t n, size_t count,
                vkg_ref_objective_fn f, void *ctx, double bound);

#endif
