/* OpenBLAS reference timings for `vkgpt bench ops`. Compiled with VKG_HAVE_OPENBLAS when the
 * build found OpenBLAS; otherwise reports it unavailable. */
#include "cli/bench_blas.h"

#include <stdlib.h>
#include <time.h>

#ifdef VKG_HAVE_OPENBLAS
#include <cblas.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int vkg_bench_blas_available(void)
{
    return 1;
}

double vkg_bench_sgemm_ms(int M, int N, int K, int iters)
{
    float *a = malloc((size_t)M * K * sizeof *a), *b = malloc((size_t)N * K * sizeof *b);
    float *c = malloc((size_t)M * N * sizeof *c);
    double *t = malloc((size_t)(iters > 0 ? iters : 1) * sizeof *t);
    double ms = -1.0;
    if (a && b && c && t) {
        for (size_t i = 0; i < (size_t)M * K; i++)
            a[i] = (float)(i % 13) * 0.01f;
        for (size_t i = 0; i < (size_t)N * K; i++)
            b[i] = (float)(i % 7) * 0.01f;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K, 0.0f, c, N);
        for (int it = 0; it < iters; it++) {
            double t0 = now_ms();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K, 0.0f,
                        c, N);
            t[it] = now_ms() - t0;
        }
        qsort(t, (size_t)iters, sizeof *t, cmp_double);
        ms = t[iters / 2];
    }
    free(a);
    free(b);
    free(c);
    free(t);
    return ms;
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
#endif
