/* Buffers that live in the host's segment: vkg_comm_buffer_alloc / vkg_comm_buffer_free. Each
 * local rank has a pool in the segment (shm.h's layout) where its local peers can read a buffer
 * through their own mapping, so an allreduce on pool buffers copies nothing in (shm_direct.c).
 *
 * The pool's size is the host's first rank's VKG_COMM_SHM_POOL (bytes, K/M/G suffixes; default
 * 512 MiB per rank, enough for a GPT-2 124M gradient in fp32 plus slack; 0: no pools), capped so
 * that the pools of all local ranks together stay within 16 GiB (256 MiB per rank at 64 ranks):
 * the memfd is backed lazily, so untouched pool pages cost nothing, but every rank maps every
 * pool. Only the communicator's own segment has pools (not hier.c's or the groups').
 *
 * Allocation: first fit in this rank's pool, 4096-byte aligned, the allocations kept in an
 * array sorted by offset. Freeing punches the block's pages out of the memfd (MADV_REMOVE), so a
 * freed buffer stops costing memory. A request the pool cannot hold, and every request when the
 * communicator runs no segment, gets ordinary aligned memory instead (any buffer works in any
 * collective; the pool only saves copies). Not thread-safe, like the communicator.
 */
#include "shm.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "os/host.h"
#include "os/shm.h"

#define POOL_DEFAULT ((size_t)512 << 20)
#define POOL_ALL_MAX ((size_t)16 << 30) /* all local ranks' pools together */
#define ALIGN 4096u

vkg_status vkg__shm_pool_request(int n, size_t *bytes)
{
    const char *env = getenv("VKG_COMM_SHM_POOL");
    uint64_t mag = POOL_DEFAULT;
    int neg = 0;
    VKG_CHECK(!env || (vkg_parse_whole(env, &neg, &mag) && !neg), VKG_ERR_INVALID_ARG,
              "VKG_COMM_SHM_POOL='%.40s' is not a size in bytes (K/M/G suffixes allowed)", env);
    size_t cap = POOL_ALL_MAX / (size_t)(n > 0 ? n : 1);
    size_t want = mag > cap ? cap : (size_t)mag;
    *bytes = want / ALIGN * ALIGN;
    return VKG_OK;
}

/* First fit for bytes (a multiple of ALIGN) in this rank's pool: *at = the block's index. */
static int fit(const struct vkg_shm *s, size_t bytes, size_t *off, size_t *at)
{
    size_t prev_end = 0;
    for (size_t i = 0; i <= s->nblocks; i++) {
        size_t next = i < s->nblocks ? s->blocks[i].off : s->pool_bytes;
        if (next - prev_end >= bytes) {
            *off = prev_end;
            *at = i;
            return 1;
        }
        if (i < s->nblocks)
            prev_end = s->blocks[i].off + s->blocks[i].bytes;
    }
    return 0;
}

/* A block of bytes in this rank's pool, or NULL when it does not fit (or no memory). */
static void *pool_alloc(struct vkg_shm *s, size_t bytes)
{
    size_t off, at;
    if (!s->pool_bytes || bytes > s->pool_bytes || !fit(s, bytes, &off, &at))
        return NULL;
    if (s->nblocks == s->cap_blocks) {
        size_t cap = s->cap_blocks ? 2 * s->cap_blocks : 16;
        vkg_shm_block *b = realloc(s->blocks, cap * sizeof *b);
        if (!b)
            return NULL;
        s->blocks = b;
        s->cap_blocks = cap;
    }
    memmove(s->blocks + at + 1, s->blocks + at, (s->nblocks - at) * sizeof *s->blocks);
    s->blocks[at] = (vkg_shm_block){off, bytes};
    s->nblocks++;
    return s->pool + (size_t)s->me * s->pool_bytes + off;
}

vkg_status vkg_comm_buffer_alloc(vkg_comm_t *c, size_t bytes, void **out)
{
    VKG_CHECK(out != NULL && bytes > 0, VKG_ERR_INVALID_ARG,
              "a collective buffer needs > 0 bytes, got %zu", bytes);
    VKG_CHECK(bytes <= SIZE_MAX - ALIGN, VKG_ERR_INVALID_ARG, "%zu bytes is too large", bytes);
    size_t rounded = (bytes + ALIGN - 1) / ALIGN * ALIGN;
    *out = c && c->shm ? pool_alloc(c->shm, rounded) : NULL;
    if (!*out)
        *out = vkg_os_aligned_alloc(ALIGN, rounded);
    VKG_CHECK(*out, VKG_ERR_NOMEM, "no memory for a collective buffer of %zu bytes", bytes);
    return VKG_OK;
}

vkg_status vkg_comm_buffer_free(vkg_comm_t *c, void *p)
{
    if (!p)
        return VKG_OK;
    struct vkg_shm *s = c ? c->shm : NULL;
    uintptr_t lo = s ? (uintptr_t)(s->pool + (size_t)s->me * s->pool_bytes) : 0, x = (uintptr_t)p;
    if (!s || !s->pool_bytes || x < lo || x - lo >= s->pool_bytes) {
        vkg_os_aligned_free(p);
        return VKG_OK;
    }
    size_t off = x - lo;
    for (size_t i = 0; i < s->nblocks; i++)
        if (s->blocks[i].off == off) {
            /* give the pages back: the memfd keeps touched pages until they are punched out */
            vkg_os_shm_discard(p, s->blocks[i].bytes);
            memmove(s->blocks + i, s->blocks + i + 1, (s->nblocks - i - 1) * sizeof *s->blocks);
            s->nblocks--;
            return VKG_OK;
        }
    return VKG_FAIL(VKG_ERR_INVALID_ARG,
                    "vkg_comm_buffer_free: %p lies in this rank's pool but is no live buffer "
                    "(freed twice, or not the start of one)",
                    p);
}

int vkg__comm_shm_cma(const vkg_comm_t *c)
{
    return c && c->shm && c->shm->cma;
}

void vkg__comm_shm_engines(const vkg_comm_t *c, uint64_t out[4])
{
    for (int k = 0; k < VKG_SHM_ENGINES; k++)
        out[k] = c && c->shm ? c->shm->engine[k] : 0;
}

uint64_t vkg__comm_shm_resident(const vkg_comm_t *c)
{
    return c && c->shm ? (uint64_t)vkg_os_shm_resident(c->shm->fd) : 0;
}
