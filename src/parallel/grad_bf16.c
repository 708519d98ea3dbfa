/* bf16 gradients for the exchange between ranks (see grad_bf16.h): the rounding, the widening,
 * and the sum over a group's members for the pipeline's data-parallel groups. */
#include "parallel/grad_bf16.h"

#include "base/error.h"
#include "vkgpt/io.h"

void vkg_grad_bf16_narrow(const float *src, uint16_t *dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = vkg_f32_to_bf16(src[i]);
}

void vkg_grad_bf16_widen(const uint16_t *src, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = vkg_bf16_to_f32(src[i]);
}

const char *vkg_grad_dtype_name(vkg_comm_dtype dt)
{
    return dt == VKG_COMM_F32 ? "fp32" : dt == VKG_COMM_BF16 ? "bf16" : NULL;
}

vkg_status vkg_grad_bf16_group_sum(vkg_group_t *g, float *grads, size_t n, uint16_t *half,
                                   uint16_t *all)
{
    int members = vkg_group_size(g);
    vkg_grad_bf16_narrow(grads, half, n);
    VKG_TRY(vkg_group_allgather(g, half, n * sizeof *half, all));
    for (size_t i = 0; i < n; i++) {
        float sum = vkg_bf16_to_f32(all[i]);
        for (int k = 1; k < members; k++)
            sum += vkg_bf16_to_f32(all[(size_t)k * n + i]);
        grads[i] = vkg_bf16_to_f32(vkg_f32_to_bf16(sum));
    }
    return VKG_OK;
}
