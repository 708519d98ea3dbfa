/* Gradients exchanged in bf16 (vkg_strategy_config.grad_dtype = VKG_COMM_BF16, --grad-dtype
 * bf16): each rank rounds its fp32 gradient to bf16 (nearest, ties to even) into a bf16 buffer,
 * the transport sums those in fp32 and rounds the sum once (VKG_COMM_BF16), and the sum is widened
 * back to fp32 before the global norm, clipping and AdamW, which stay fp32. bf16 is the upper 16
 * bits of an fp32: the same exponent range, 8 significant bits, so each rounding moves a value by
 * at most 2^-8 of itself (half a unit in the last of 8 places).
 *
 * Not here: where the exchange happens (reducer.c), the collectives
 * (transport/). Nothing here allocates, prints or talks to a device.
 */
#ifndef VKG_PARALLEL_GRAD_BF16_H
#define VKG_PARALLEL_GRAD_BF16_H

#include <stddef.h>
#include <stdint.h>

#include "vkgpt/comm.h"

/* dst[i] = src[i] rounded to bf16 (bitwise vkg_f32_to_bf16: nearest, ties to even; subnormals round
 * by their bits, never flushed to zero; values past the largest bf16 become infinities of their
 * sign; infinities stay; a NaN stays a quiet NaN of its sign), for n elements; and the exact
 * widening back (vkg_bf16_to_f32). */
void vkg_grad_bf16_narrow(const float *src, uint16_t *dst, size_t n);
void vkg_grad_bf16_widen(const uint16_t *src, float *dst, size_t n);

/* "fp32" or "bf16": the name --grad-dtype gives dt (NULL for any other dtype). */
const char *vkg_grad_dtype_name(vkg_comm_dtype dt);

#endif
