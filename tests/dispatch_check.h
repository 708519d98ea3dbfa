/* One op run twice from the same inputs, with the default shader index limit and with a limit
 * lowered below its tensors (vkg__op_set_max_elems), shared by the dispatch split tests
 * (test_dispatch_split: element-wise and row-wise ops, the encoder; test_dispatch_split_matmul:
 * matmul, gemm, transpose and attention). Every OUT tensor must be bitwise the same in both runs
 * and written (outputs start as NaN, or random where the op accumulates); a case marked split
 * must record more dispatches under the lowered limit, and each kernel it names must have had
 * its wide variant (64-bit row addresses) built by the lowered run and not by the default one.
 * Not here: the ops' cases, refusals and VKG_MAX_DISPATCH_ELEMS (test_dispatch_limit.c). */
#ifndef VKG_DISPATCH_CHECK_H
#define VKG_DISPATCH_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "gpu_fixture.h"
#include "ops/ops.h"

#define MAXT 9  /* tensors of one case */
#define MAXW 3  /* wide kernels one case expects */
#define MAXS 12 /* sizes of one case */

typedef enum role { IN, OUT, SCRATCH } role; /* OUT: compared; SCRATCH: neither compared nor read */

typedef struct op_case op_case;
/* Record the op of case k on tensors t (in the order of k's tensors). */
typedef vkg_status (*recorder)(vkg_cmd *c, const vkg_tensor *t, const op_case *k);

struct op_case {
    const char *name;
    recorder rec;
    int s[MAXS];  /* sizes, per recorder */
    float f[4];   /* scalars, per recorder */
    size_t limit; /* the lowered limit */
    int nt;
    size_t n[MAXT]; /* 4-byte elements per tensor */
    role role[MAXT];
    void *host[MAXT]; /* contents uploaded before each run; NULL: NaN */
    int split;        /* 1: the lowered run must record more dispatches */
    int nwide;
    vkg_kernel_id wide[MAXW]; /* kernels whose wide variant the lowered run must build */
    int wide_spec[MAXW];      /* the id of their WIDE specialization constant */
};

/* Seed the generator of the inputs below (once, before the first case). */
void vkg_dc_seed(uint64_t seed);
/* A new array of n floats uniform in [lo, hi), or of n token ids below V (free with free()). */
float *vkg_dc_rnd(size_t n, float lo, float hi);
int32_t *vkg_dc_tokens(size_t n, int V);
/* Append a tensor of n 4-byte elements to k, uploaded from host (k takes it; NULL: NaN). */
void vkg_dc_add(op_case *k, role r, size_t n, void *host);
/* The lowered run must build the wide variant of kernel (its WIDE constant is spec_id). */
void vkg_dc_expect_wide(op_case *k, vkg_kernel_id kernel, int spec_id);
/* Run case k with the default and the lowered limit; check what the header says; free k's host
 * arrays and clear k. */
void vkg_dc_check(vkg_gpu *g, op_case *k);

#endif
