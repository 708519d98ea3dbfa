/* DiLoCo's outer optimizer (Douillard et al. 2023; DESIGN.md section 6, "Slow links"): every
 * replica of a data-parallel group takes H inner AdamW steps alone, then the group averages the
 * pseudo-gradient delta_r = g - theta_r (g: the global parameters, theta_r: replica r's) and an
 * outer SGD step with Nesterov momentum (PyTorch's semantics, dampening 0) updates g:
 *     m' = mu m + mean_r(delta_r)
 *     g' = g - lr (mean_r(delta_r) + mu m')
 * after which every replica takes g' as its parameters. The state is g and m (n floats each, the
 * same bits on every rank); the inner optimizers' moments stay each replica's own.
 *
 * The exchange, in the dtype chosen once (--outer-dtype):
 *   fp32  the replicas' parameters themselves are summed by the transport's allreduce
 *         (vkg_comm_allreduce, fp32, bitwise the same sum on every rank); mean = sum / N and
 *         mean(delta) = g - mean: the same quantity with one rounding fewer, and the bits that
 *         make a round of lr 1 and momentum 0 land exactly on the replicas' mean (below);
 *   bf16  delta_r rounded to bf16 (nearest, ties to even: vkg_grad_bf16_narrow), every rank's
 *         allgathered, widened and summed in fp32 in rank order (no rounding of the sum);
 *   int8  delta_r cut into chunks of VKG_OUTER_INT8_CHUNK elements, each with its absmax scale
 *         s = absmax / 127 (fp32) and q = nearest(delta / s) in [-127, 127] (ties to even), every
 *         rank's scales and codes allgathered, dequantized (q s) and summed in fp32 in rank
 *         order (the group's allreduce with this file's codec, vkg_group_allreduce_codec; a
 *         ring cannot sum int8 codes of different scales, hence the gather). Each
 *         dequantized element is within s (1/2 + 2^-16) of delta_r (the rounding to the nearest
 *         code, plus the fp32 quotient and product), so the mean is within
 *         sum_r s_r / (2N) (1 + 2^-15) of the exact mean, plus the fp32 sum's rounding.
 *   int4  as int8 with s = absmax / 7 and q in [-7, 7], two codes a byte (element 2k in the low
 *         nibble of byte k, two's complement): half int8's bytes, the same form of bound with
 *         s_r 127/7 times larger (the streaming paper's 4-bit exchange).
 *   For bf16 and int8, mean = g - mean(delta).
 * The update is computed as g' = mean + u, u = (1 - lr) mean(delta) - lr mu m' (the same value as
 * above: g - mean(delta) = mean), and u == 0 leaves g' = mean bit for bit; so with lr 1 and
 * momentum 0 the fp32 exchange makes g' exactly the replicas' fp32 mean (sum in the allreduce's
 * order, divided by N).
 *
 * Host memory: g and m (8 bytes per parameter) and, for bf16, int8 and int4, the group's
 * buffer of the N payloads; the caller's parameters serve as the exchange's buffer.
 *
 * Not here: when a round ends and where the parameters come from (diloco.c), the collectives
 * (transport/), checkpoints (the trainer). Host memory only; nothing here prints.
 */
#ifndef VKG_PARALLEL_OUTER_H
#define VKG_PARALLEL_OUTER_H

#include <stddef.h>
#include <stdint.h>

#include "vkgpt/comm.h"
#include "vkgpt/status.h"

typedef enum vkg_outer_dtype {
    VKG_OUTER_F32 = 0,
    VKG_OUTER_BF16 = 1,
    VKG_OUTER_INT8 = 2,
    VKG_OUTER_INT4 = 3,
} vkg_outer_dtype;

#define VKG_OUTER_INT8_CHUNK 256

typedef struct vkg_outer vkg_outer;

/* "fp32", "bf16", "int8" or "int4" (NULL for anything else). */
const char *vkg_outer_dtype_name(vkg_outer_dtype dt);

/* An outer optimizer of n parameters: g and m zero (set g with vkg_outer_global before the first
 * step). Errors: VKG_ERR_INVALID_ARG naming --outer-lr (not finite or <= 0), --outer-momentum
 * (outside [0, 1)) or --outer-dtype; VKG_ERR_NOMEM. */
vkg_status vkg_outer_create(size_t n, float lr, float momentum, vkg_outer_dtype dt,
                            vkg_outer **out);
/* NULL-safe; nulls *po. */
void vkg_outer_destroy(vkg_outer **po);
/* The global parameters g and the outer momentum m (n floats each), owned by o. */
float *vkg_outer_global(vkg_outer *o);
float *vkg_outer_momentum(vkg_outer *o);
size_t vkg_outer_count(const vkg_outer *o);

/* Bytes of one rank's pseudo-gradient in the exchange of dt over n parameters: 4n (fp32: what
 * the allreduce sums), 2n (bf16), n + 4 ceil(n / VKG_OUTER_INT8_CHUNK) (int8: codes and scales),
 * ceil(n / 2) + 4 ceil(n / VKG_OUTER_INT8_CHUNK) (int4); bf16, int8 and int4 are allgathered, so
 * each rank receives N - 1 times that. */
uint64_t vkg_outer_payload_bytes(size_t n, vkg_outer_dtype dt);

/* One outer step over the members of group g (the job's data-parallel group: the whole job, or a
 * pipeline stage's; every member calls it; g NULL: one rank alone): params (this
 * replica's n parameters after its inner steps) in, used as the exchange's buffer; g and m
 * updated, the same bits on every rank; params = the new g. *payload (may be NULL) gets
 * vkg_outer_payload_bytes. Errors: the collectives'; VKG_ERR_NOMEM. */
vkg_status vkg_outer_step(vkg_outer *o, vkg_group_t *g, float *params, uint64_t *payload);

/* The same step in parts, so that the exchange can be cut into pieces (streaming, diloco.c):
 * vkg_outer_exchange over [first, first + count) of params, for ranges that cover every
 * parameter once (the exchange of each range is that of the whole restricted to it when every
 * range but the last starts and ends at a multiple of VKG_OUTER_INT8_CHUNK: the same chunks,
 * scales and sums; fp32's ring may add in another order with 3 or more ranks), then
 * vkg_outer_update over the N members of the exchange. fp32 is the group's allreduce; bf16, int8
 * and int4 the group's compressed allreduce (vkg_group_allreduce_codec) with this file's codec,
 * every member's payload summed in group-rank order.
 * Errors of the exchange: VKG_ERR_INVALID_ARG for a range outside the n parameters, the
 * collectives', VKG_ERR_NOMEM. */
vkg_status vkg_outer_exchange(vkg_outer *o, vkg_group_t *g, float *params, size_t first,
                              size_t count);
void vkg_outer_update(vkg_outer *o, int N, float *params);

/* int8 and int4: the chunks of n elements, and x (n floats) as codes q (n) and per-chunk scales
 * (chunks): scale = absmax / 127 (0 for a chunk of zeros, whose codes are 0), q = nearest(x /
 * scale). */
size_t vkg_outer_int8_chunks(size_t n);
void vkg_outer_int8_quantize(const float *x, size_t n, int8_t *q, float *scale);

#endif
