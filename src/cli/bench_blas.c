/* OpenBLAS reference timings for `vkgpt bench ops`. Compiled with VKG_HAVE_OPENBLAS when the
 * build found OpenBLAS; otherwise reports it unavailable. */
#include "os/clock.h"
#include "cli/bench_blas.h"

#include <stdlib.h>

#ifdef VKG_HAVE_OPENBLAS
#include <cblas.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int vkg_bench_blas_available(void)
{
    return 1;
}

static float *filled(size_t n, int mod)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; x && i < n; i++)
        x[i] = (float)(i % (size_t)mod) * 0.01f;
    return x;
}

/* Median ms of `iters` runs of one forward (bwd 0) or backward (bwd 1) after a warm-up. */
static double timed(int bwd, int M, int N, int K, int iters)
{
    /* forward: out (M,N) = a (M,K) x b (N,K)^T. backward with M = rows, N = C, K = OC:
     * dinp (M,N) += dout (M,K) x W (K,N); dW (K,N) += dout^T x inp (M,N). */
    float *a = filled((size_t)M * K, 13), *b = filled((size_t)N * K, 7);
    float *c = filled((size_t)M * N, 5), *d = bwd ? filled((size_t)N * K, 3) : NULL;
    double *t = malloc((size_t)(iters > 0 ? iters : 1) * sizeof *t);
    double ms = -1.0;
    if (a && b && c && t && (!bwd || d)) {
        for (int it = -1; it < iters; it++) {
            double t0 = vkg_os_now_ms();
            if (!bwd) {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K,
                            0.0f, c, N);
            } else {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N,
                            1.0f, c, N);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, N, M, 1.0f, a, K, c, N,
                            1.0f, d, N);
            }
            if (it >= 0)
                t[it] = vkg_os_now_ms() - t0;
        }
        qsort(t, (size_t)iters, sizeof *t, cmp_double);
        ms = t[iters / 2];
    }
    free(a), free(b), free(c), free(d), free(t);
    return ms;
}

double vkg_bench_sgemm_ms(int M, int N, int K, int iters)
{
    return timed(0, M, N, K, iters);
}

double vkg_bench_sgemm_bwd_ms(int N, int C, int OC, int iters)
{
    return timed(1, N, C, OC, iters);
}
#else
int vkg_bench_blas_available(void)
{
    return 0;
}

double vkg_bench_sgemm_ms(int M, int N, int K, int iters)
{
    (void)M, (void)N, (void)K, (void)iters;
    return -1.0;
}

double vkg_bench_sgemm_bwd_ms(int N, int C, int OC, int iters)
{
    (void)N, (void)C, (void)OC, (void)iters;
    return -1.0;
}
#endif
