/* Internal helpers shared by the op functions: size checks and grid arithmetic. */
#ifndef VKG_OP_UTIL_H
#define VKG_OP_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "vk/vk.h"

/* Check that tensor `t` (named `name`, argument of op `op`) holds at least `elems` 4-byte
 * elements and is 4-byte aligned. */
vkg_status vkg__op_need(const char *op, const char *name, vkg_tensor t, size_t elems);

/* Workgroups needed to cover n items with `per_group` items each, at least 1 and capped at
 * 65535 (kernels that can be capped use grid-stride loops). */
uint32_t vkg__op_groups_capped(size_t n, uint32_t per_group);

/* ceil(n / d) */
static inline uint32_t vkg__ceil_div(size_t n, size_t d)
{
    return (uint32_t)((n + d - 1) / d);
}

/* Check the value fits a 32-bit shader index. */
vkg_status vkg__op_fits_u32(const char *op, const char *what, size_t n);

#endif
