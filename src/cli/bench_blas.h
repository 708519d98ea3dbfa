/* OpenBLAS sgemm as the CPU reference point for `vkgpt bench ops` (present when the build found
 * OpenBLAS; see src/cli/CMakeLists.txt). */
#ifndef VKG_BENCH_BLAS_H
#define VKG_BENCH_BLAS_H

/* 1 when the binary was built with OpenBLAS. */
int vkg_bench_blas_available(void);
/* Median milliseconds of sgemm computing out (M,N) = A (M,K) x B(N,K)^T over `iters` runs after
 * one warm-up, on the threads OpenBLAS uses by default; < 0 when unavailable or out of memory. */
double vkg_bench_sgemm_ms(int M, int N, int K, int iters);

#endif
