/* Size checks, grid arithmetic and the shader index limit shared by the ops. */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op_util.h"
#include "os/thread.h"

#define LIMIT_ENV "VKG_MAX_DISPATCH_ELEMS"

vkg_status vkg__op_need_any(const char *op, const char *name, vkg_tensor t, size_t elems)
{
    size_t have = t.bytes / vkg_dtype_bytes(t.dtype);
    VKG_CHECK(t.addr != 0, VKG_ERR_INVALID_ARG, "%s: tensor %s is not allocated", op, name);
    VKG_CHECK(t.addr % 4 == 0, VKG_ERR_INVALID_ARG, "%s: tensor %s is not 4-byte aligned", op,
              name);
    VKG_CHECK(have >= elems, VKG_ERR_INVALID_ARG,
              "%s: tensor %s holds %zu elements, the shape needs %zu", op, name, have, elems);
    return VKG_OK;
}

vkg_status vkg__op_need(const char *op, const char *name, vkg_tensor t, size_t elems)
{
    VKG_CHECK(t.dtype == VKG_F32, VKG_ERR_INVALID_ARG,
              "%s: tensor %s is bf16, but the op reads and writes fp32 only", op, name);
    return vkg__op_need_any(op, name, t, elems);
}

uint32_t vkg__op_groups_capped(size_t n, uint32_t per_group)
{
    size_t g = (n + per_group - 1) / per_group;
    if (g < 1)
        g = 1;
    return g > 65535 ? 65535u : (uint32_t)g;
}

/* The environment's limit, parsed once per process: env_limit > 0, or 0 with the offending value
 * in env_bad. Written only inside the once, read after it. */
static vkg_os_once env_once = VKG_OS_ONCE_INIT;
static size_t env_limit;
static char env_bad[64];
/* The tests' override (0: none). */
static atomic_size_t override_limit;

static void read_env(void)
{
    const char *s = getenv(LIMIT_ENV);
    env_limit = VKG_OP_MAX_ELEMS;
    if (!s)
        return;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    int ok =
        s[0] >= '0' && s[0] <= '9' && *end == '\0' && errno == 0 && v >= 1 && v <= VKG_OP_MAX_ELEMS;
    if (ok) {
        env_limit = (size_t)v;
        return;
    }
    env_limit = 0;
    size_t n = strlen(s);
    if (n >= sizeof env_bad) { /* keep the message short: the start of the value, then "..." */
        memcpy(env_bad, s, sizeof env_bad - 4);
        memcpy(env_bad + sizeof env_bad - 4, "...", 4);
    } else {
        memcpy(env_bad, s, n + 1);
    }
}

vkg_status vkg__op_limit(const char *op, size_t *limit)
{
    size_t o = atomic_load(&override_limit);
    if (o) {
        *limit = o;
        return VKG_OK;
    }
    vkg_os_once_run(&env_once, read_env);
    VKG_CHECK(env_limit > 0, VKG_ERR_INVALID_ARG,
              "%s: %s=\"%s\" is not a positive integer up to %zu (the most elements one shader "
              "dispatch may index; unset it for the default)",
              op, LIMIT_ENV, env_bad, VKG_OP_MAX_ELEMS);
    *limit = env_limit;
    return VKG_OK;
}

void vkg__op_set_max_elems(size_t n)
{
    atomic_store(&override_limit, n > VKG_OP_MAX_ELEMS ? VKG_OP_MAX_ELEMS : n);
}

vkg_status vkg__op_fits(const char *op, const char *what, size_t n, size_t limit)
{
    VKG_CHECK(n <= limit, VKG_ERR_INVALID_ARG,
              "%s: %s = %zu elements, more than the %zu one shader dispatch may index", op, what, n,
              limit);
    return VKG_OK;
}

size_t vkg__op_flat_chunk(size_t limit)
{
    return limit >= 1024 ? limit / 1024 * 1024 : limit;
}
