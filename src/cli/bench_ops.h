/* What `vkgpt bench ops` shares between its files: the bench context (device, command list,
 * random inputs, the arenas of the current row), timing and the pipeline statistics printed
 * after each row. The fused forms' section (bench_fused.c) uses them. */
#ifndef VKG_CLI_BENCH_OPS_H
#define VKG_CLI_BENCH_OPS_H

#include "cli/internal.h"

#define VKG_BENCH_TENSORS 12 /* the most tensors one row allocates */

typedef struct vkg_bench {
    vkg_device_t *dev;
    vkg_cmd *cmd;
    uint64_t rng;
    vkg_matmul_tiles tiles;
    vkg_arena *arenas[VKG_BENCH_TENSORS]; /* one per tensor of the current row */
    int narenas;
} vkg_bench;

/* A tensor of n elements of type dt (fp32 or bf16) in an arena of its own, uniform in
 * [-0.05, 0.05) (bf16: those values' upper halves). Errors: more than VKG_BENCH_TENSORS tensors
 * in a row, the arena's and the upload's. */
vkg_status vkg_bench_tensor(vkg_bench *b, size_t n, vkg_dtype dt, vkg_tensor *out);
/* Median over iters of the summed dispatch times of one run of b->cmd, in ms (after one
 * warm-up run). */
vkg_status vkg_bench_time(vkg_bench *b, int iters, double *ms);
/* Print, one line each starting "#   ", the driver's statistics of every pipeline the ops of
 * the row used (vk/pipestats.h; nothing when the device gives none: the header said why).
 * Returns the status of the query. */
vkg_status vkg_bench_print_stats(vkg_bench *b);
/* Destroy the row's command list and arenas. */
void vkg_bench_row_end(vkg_bench *b);

/* The fused forms' section of bench ops: each fused form beside its unfused pair (the product or
 * first op, then its element-wise pass), at GPT-2 124M's shapes for B = 4, T = 64 and B = 8,
 * T = 1024, in fp32 and with the bf16 tensors of --precision bf16, with the ratios fused / pair
 * and bf16 / fp32. A group runs when one of its ops starts with `only` and its shape contains
 * `shape` (NULL: any). Prints as it goes; returns the first error. */
vkg_status vkg_bench_fused(vkg_bench *b, const char *only, const char *shape, int iters);

#endif
