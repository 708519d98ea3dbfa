/* Internal helpers shared by the op functions: size checks, grid arithmetic and the shader index
 * limit. */
#ifndef VKG_OP_UTIL_H
#define VKG_OP_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "vk/vk.h"

/* Check that tensor `t` (named `name`, argument of op `op`) holds at least `elems` fp32
 * elements and is 4-byte aligned; a bf16 tensor is refused (the op reads fp32 only). */
vkg_status vkg__op_need(const char *op, const char *name, vkg_tensor t, size_t elems);
/* As vkg__op_need for an argument that may be fp32 or bf16: `elems` of the tensor's type. */
vkg_status vkg__op_need_any(const char *op, const char *name, vkg_tensor t, size_t elems);

/* Workgroups needed to cover n items with `per_group` items each, at least 1 and capped at
 * 65535 (kernels that can be capped use grid-stride loops). */
uint32_t vkg__op_groups_capped(size_t n, uint32_t per_group);

/* ceil(n / d) */
static inline uint32_t vkg__ceil_div(size_t n, size_t d)
{
    return (uint32_t)((n + d - 1) / d);
}

/* ---- the shader index limit ------------------------------------------------------------- *
 * Shaders index tensors with 32-bit uint, and SPIR-V treats access-chain indices as signed: an
 * index of 2^31 or more reads or writes before the buffer on a driver that sign-extends it. So
 * within one dispatch, every index any invocation computes into any tensor (from the address the
 * dispatch was given) stays below the limit: VKG_OP_MAX_ELEMS elements, lowered by the
 * environment variable VKG_MAX_DISPATCH_ELEMS (read once per process) or, in tests, by
 * vkg__op_set_max_elems. Ops larger than the limit record several dispatches whose base addresses
 * advance (blocks of whole rows), or index within rows whose addresses the shader forms with
 * 64-bit arithmetic (docs/DESIGN-NOTES.md, "The shader index limit"). */
#define VKG_OP_MAX_ELEMS ((size_t)0x7FFFFFFF)

/* The limit in force, in *limit. Errors: VKG_ERR_INVALID_ARG naming op, the variable and its
 * value when VKG_MAX_DISPATCH_ELEMS is set to anything but an integer in [1, 2^31 - 1]. */
vkg_status vkg__op_limit(const char *op, size_t *limit);

/* Tests only: use n (1 <= n <= VKG_OP_MAX_ELEMS) as the limit from now on, for every device and
 * thread, over whatever the environment says; 0 goes back to the environment's (or the default)
 * limit. Not for use while another thread records ops. */
void vkg__op_set_max_elems(size_t n);

/* Check that `n` elements (what `what` names) fit one dispatch under the limit; the error names
 * op, what, n and the limit. */
vkg_status vkg__op_fits(const char *op, const char *what, size_t n, size_t limit);

/* Elements per dispatch of a flat op over more elements than the limit: the limit, rounded down
 * to a multiple of 1024 elements when that leaves any (so every dispatch but the last starts
 * 4 KiB-aligned relative to the first). */
size_t vkg__op_flat_chunk(size_t limit);

#endif
