/* OpenBLAS sgemm as the CPU reference point for `vkgpt bench ops` (present when the build found
 * OpenBLAS; see src/cli/CMakeLists.txt). */
#ifndef VKG_BENCH_BLAS_H
#define VKG_BENCH_BLAS_H

/* 1 when the binary was built with OpenBLAS. */
int vkg_bench_blas_available(void);
/* Median milliseconds of sgemm computing out (M,N) = A (M,K) x B(N,K)^T over `iters` runs after
 * one warm-up, on the threads OpenBLAS uses by default; < 0 when unavailable or out of memory. */
double vkg_bench_sgemm_ms(int M, int N, int K, int iters);
/* The same for a matmul's backward in llm.c's layout, as two accumulating sgemm calls:
 * dinp (N,C) += dout (N,OC) x W (OC,C) and dW (OC,C) += dout^T x inp (N,C). */
double vkg_bench_sgemm_bwd_ms(int N, int C, int OC, int iters);

#endif
