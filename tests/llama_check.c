/* Checks shared by the tests of the Llama-family kernels (llama_check.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "llama_check.h"
#include "ref/ref.h"

void llama_expect_words(vkg_gpu *g, const char *what, vkg_tensor a, vkg_tensor b, size_t words)
{
    uint32_t *x = malloc(words * 4), *y = malloc(words * 4);
    assert_non_null(x);
    assert_non_null(y);
    vkg_gpu_download(g, a, x, words * 4);
    vkg_gpu_download(g, b, y, words * 4);
    for (size_t i = 0; i < words; i++)
        if (x[i] != y[i])
            fail_msg("%s: word %zu is %08x, expected %08x", what, i, x[i], y[i]);
    free(x), free(y);
}

void llama_expect_rounded(vkg_gpu *g, const char *what, vkg_tensor t, const float *want, size_t n)
{
    uint16_t *h = malloc((n + 1) / 2 * 4);
    assert_non_null(h);
    vkg_gpu_download(g, t, h, (n + 1) / 2 * 4);
    for (size_t i = 0; i < n; i++)
        if (h[i] != vkg_ref_bf16_bits(want[i]))
            fail_msg("%s: element %zu is bf16 %04x, the rounded fp32 result %04x (%.9g)", what, i,
                     h[i], vkg_ref_bf16_bits(want[i]), (double)want[i]);
    if (n % 2 && h[n] != 0)
        fail_msg("%s: the half word after the last element is %04x, not 0", what, h[n]);
    free(h);
}

double llama_fd(const char *what, double *x, const double *grad, size_t n, size_t count,
                vkg_ref_objective_fn f, void *ctx, double bound)
{
    vkg_ref_fd_result_t r = vkg_ref_fd_check(x, grad, n, count, 5e-6, n * 31 + count, f, ctx);
    print_message("  fd %-24s %5zu of %5zu coords  max rel err %.2e (at %zu: %.9g vs %.9g)\n", what,
                  r.checked, n, r.max_err, r.worst, r.analytic, r.numeric);
    if (!(r.max_err <= bound))
        fail_msg("%s: finite differences differ by %.3g (bound %.3g) at %zu: %.9g vs %.9g", what,
                 r.max_err, bound, r.worst, r.analytic, r.numeric);
    return r.max_err;
}
