/* Size checks and grid arithmetic shared by the ops. */
#include "ops/op_util.h"

vkg_status vkg__op_need(const char *op, const char *name, vkg_tensor t, size_t elems)
{
    VKG_CHECK(t.addr != 0, VKG_ERR_INVALID_ARG, "%s: tensor %s is not allocated", op, name);
    VKG_CHECK(t.addr % 4 == 0, VKG_ERR_INVALID_ARG, "%s: tensor %s is not 4-byte aligned", op,
              name);
    VKG_CHECK(t.bytes / 4 >= elems, VKG_ERR_INVALID_ARG,
              "%s: tensor %s holds %zu elements, the shape needs %zu", op, name, t.bytes / 4,
              elems);
    return VKG_OK;
}

uint32_t vkg__op_groups_capped(size_t n, uint32_t per_group)
{
    size_t g = (n + per_group - 1) / per_group;
    if (g < 1)
        g = 1;
    return g > 65535 ? 65535u : (uint32_t)g;
}

vkg_status vkg__op_fits_u32(const char *op, const char *what, size_t n)
{
    VKG_CHECK(n <= 0xFFFFFFFFu, VKG_ERR_INVALID_ARG, "%s: %s = %zu does not fit 32 bits", op, what,
              n);
    return VKG_OK;
}
