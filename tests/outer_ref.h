/* A CPU reference of DiLoCo's outer step (src/parallel/outer.h), written apart from it, for the
 * tests: the replicas' pseudo-gradients averaged in fp32 (from the fp32 sum of their parameters
 * in rank order), or each quantized to bf16 (the model files' rounding), int8 or int4 (an absmax
 * scale per 256 elements over 127 or 7, codes the nearest integer, ties to even) and summed in
 * fp32 in rank order;
 * then the Nesterov update in the form outer.h states. */
#ifndef VKG_TEST_OUTER_REF_H
#define VKG_TEST_OUTER_REF_H

#include <stddef.h>

#include "parallel/outer.h"

/* How the reference is deliberately broken (to show a comparison bites). */
enum { VKG_TEST_OUTER_EXACT, VKG_TEST_OUTER_HEAVY_BALL, VKG_TEST_OUTER_TRUNCATE };

/* One outer step of N replicas' parameters P[r] (n each) on the global parameters g and the
 * momentum m (n each, updated), exchanged in dt, with lr and momentum mu; brk breaks it. */
void vkg_test_outer_ref(int N, size_t n, float *const *P, float *g, float *m, vkg_outer_dtype dt,
                        float lr, float mu, int brk);

#endif
