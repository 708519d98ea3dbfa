/* The matmul passes against the CPU reference on one shape, shared by the matmul tests
 * (test_matmul: kernels and layouts; test_matmul_tiles: the per-vendor tile table, vec4 and
 * split-K). Bound: ||gpu - ref|| / ||ref|| <= 1e-5 (VKG_TEST_REL_BOUND) for every output, every
 * element finite. */
#ifndef VKG_MATMUL_CHECK_H
#define VKG_MATMUL_CHECK_H

#include <stdint.h>

#include "gpu_fixture.h"

typedef struct vkg_mm_shape {
    int N, C, OC; /* rows, input channels, output channels */
} vkg_mm_shape;

/* The forward pass (bias or not) on random inputs, its output poisoned first. */
void vkg_mm_check_fwd(vkg_gpu *g, vkg_mm_shape s, int with_bias, uint64_t seed);
/* The backward pass: gradients start from random values the reference starts from too (so
 * accumulation is checked), dweight gets a scratch as large as the model's matmul scratch (room
 * for split-K). split: the two halves (vkg_op_matmul_bwd_dweight, then _dinp) instead of the
 * whole pass. */
void vkg_mm_check_bwd(vkg_gpu *g, vkg_mm_shape s, int with_bias, int split, uint64_t seed);

/* Where the _out forms also put what they computed (NULL members: not wanted). */
typedef struct vkg_mm_got {
    float *out;            /* (N, OC): the forward output */
    float *dinp, *dw, *db; /* (N, C), (OC, C), (OC): the gradients */
} vkg_mm_got;
/* vkg_mm_check_fwd, the output also downloaded into got->out. */
void vkg_mm_check_fwd_out(vkg_gpu *g, vkg_mm_shape s, int with_bias, uint64_t seed,
                          const vkg_mm_got *got);
/* vkg_mm_check_bwd, the gradients also downloaded into got's. */
void vkg_mm_check_bwd_out(vkg_gpu *g, vkg_mm_shape s, int with_bias, int split, uint64_t seed,
                          const vkg_mm_got *got);

#endif
