/* vkgpt ops: one C function per shader. Each checks shapes and tensor sizes, fills the push
 * constants and records the dispatch(es) into a command list; nothing runs until the list is
 * submitted. Semantics match the CPU reference (src/ref/ref.h) op for op: forward functions
 * overwrite their outputs, backward functions ACCUMULATE into gradient outputs.
 * Tensors are float32 unless stated (token ids: int32). Shapes in comments.
 * Errors: VKG_ERR_INVALID_ARG naming the op and the tensor that is too small or the bad shape.
 */
#ifndef VKG_OPS_H
#define VKG_OPS_H

#include <stddef.h>

#include "vk/vk.h"

/* x[i] = value, i < n */
vkg_status vkg_op_fill(vkg_cmd *c, vkg_tensor x, size_t n, float value);
/* x[i] *= factor, i < n */
vkg_status vkg_op_scale(vkg_cmd *c, vkg_tensor x, size_t n, float factor);

#endif
