/* The collectives' shared memory where a build has none (Windows, for now): it replaces shm.c,
 * shm_setup.c, shm_wait.c, shm_coll.c, shm_direct.c, shm_pool.c, hier.c and hier_copy.c, which
 * stand on memfd, futexes, abstract Unix sockets and process_vm_readv. Every communicator runs
 * its collectives over ZeroMQ; with the policy REQUIRE (--transport shm, VKG_COMM_TRANSPORT=shm)
 * it says so in its path (vkg_comm_path, which vkgpt prints as "transport: collectives over
 * ..."), never silently: "zmq tcp (--transport shm asked for shared memory; this build has none:
 * ...)". Collective buffers are ordinary aligned memory. The segment's entry points below are
 * never reached (c->shm and c->hier stay unset) and fail naming what is missing if they were.
 */
#include "shm.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os/host.h"

#define NO_SHM "shared memory between ranks (memfd, futex, Unix sockets) is Linux-only"
#define BUFFER_ALIGN 4096u

vkg_status vkg__shm_setup(vkg_comm_t *c)
{
    const char *tr = vkg_comm_transport_name(c->transport);
    if (c->size == 1)
        snprintf(c->path, sizeof c->path, "single rank");
    else if (c->shm_mode == VKG_COMM_SHM_OFF)
        snprintf(c->path, sizeof c->path, "zmq %s (shared memory off)", tr);
    else if (c->shm_mode == VKG_COMM_SHM_REQUIRE)
        snprintf(c->path, sizeof c->path,
                 "zmq %s (--transport shm asked for shared memory; this build has none: %s)", tr,
                 NO_SHM);
    else
        snprintf(c->path, sizeof c->path, "zmq %s", tr);
    return VKG_OK;
}

int vkg_comm_has_shm(void)
{
    return 0;
}

void vkg__shm_free(vkg_comm_t *c)
{
    free(c->group_segs);
    c->group_segs = NULL;
    c->ngroup_segs = c->cap_group_segs = 0;
}

void vkg__shm_abort(vkg_comm_t *c, const char *reason)
{
    (void)c;
    (void)reason;
}

uint32_t vkg__comm_shm_steps(const vkg_comm_t *c)
{
    (void)c;
    return 0;
}

void vkg__comm_shm_engines(const vkg_comm_t *c, uint64_t out[4])
{
    (void)c;
    memset(out, 0, 4 * sizeof *out);
}

uint64_t vkg__comm_shm_resident(const vkg_comm_t *c)
{
    (void)c;
    return 0;
}

int vkg__comm_shm_cma(const vkg_comm_t *c)
{
    (void)c;
    return 0;
}

void vkg__comm_shm_fix_tag(vkg_comm_t *c, const uint8_t tag[VKG_SHM_TAG_BYTES])
{
    (void)c;
    (void)tag;
}

vkg_status vkg__shm_group_setup(vkg_comm_t *c, const int *ranks, int n, int me, uint32_t id,
                                vkg_shm_agree_fn agree, void *arg, struct vkg_shm **out)
{
    (void)c, (void)ranks, (void)n, (void)me, (void)id, (void)agree, (void)arg;
    *out = NULL; /* the group runs over ZeroMQ, as its communicator (whose path says so) */
    return VKG_OK;
}

void vkg__shm_group_free(struct vkg_shm **ps)
{
    *ps = NULL;
}

/* ---- buffers: ordinary aligned memory ---- */

vkg_status vkg_comm_buffer_alloc(vkg_comm_t *c, size_t bytes, void **out)
{
    (void)c;
    VKG_CHECK(out != NULL && bytes > 0, VKG_ERR_INVALID_ARG,
              "a collective buffer needs > 0 bytes, got %zu", bytes);
    VKG_CHECK(bytes <= SIZE_MAX - BUFFER_ALIGN, VKG_ERR_INVALID_ARG, "%zu bytes is too large",
              bytes);
    *out = vkg_os_aligned_alloc(BUFFER_ALIGN,
                                (bytes + BUFFER_ALIGN - 1) / BUFFER_ALIGN * BUFFER_ALIGN);
    VKG_CHECK(*out, VKG_ERR_NOMEM, "no memory for a collective buffer of %zu bytes", bytes);
    return VKG_OK;
}

vkg_status vkg_comm_buffer_free(vkg_comm_t *c, void *p)
{
    (void)c;
    vkg_os_aligned_free(p);
    return VKG_OK;
}

int vkg_comm_buffer_in_segment(const vkg_comm_t *c, const void *p, size_t bytes)
{
    (void)c;
    (void)p;
    (void)bytes;
    return 0;
}

/* ---- the segment's collectives: unreachable without a segment ---- */

static vkg_status no_segment(const char *what)
{
    return VKG_FAIL(VKG_ERR_UNSUPPORTED, "%s in shared memory: %s", what, NO_SHM);
}

vkg_status vkg__shm_allreduce(vkg_comm_t *c, const void *send, void *recv, size_t count,
                              vkg_comm_dtype dt, vkg_comm_op op)
{
    (void)c, (void)send, (void)recv, (void)count, (void)dt, (void)op;
    return no_segment("allreduce");
}

vkg_status vkg__shm_broadcast(vkg_comm_t *c, void *buf, size_t bytes, int root)
{
    (void)c, (void)buf, (void)bytes, (void)root;
    return no_segment("broadcast");
}

vkg_status vkg__shm_allgather(vkg_comm_t *c, const void *send, size_t bytes, void *recv)
{
    (void)c, (void)send, (void)bytes, (void)recv;
    return no_segment("allgather");
}

vkg_status vkg__shm_reduce_scatter(vkg_comm_t *c, void *buf, size_t count, const size_t *bounds,
                                   vkg_comm_dtype dt, int ring)
{
    (void)c, (void)buf, (void)count, (void)bounds, (void)dt, (void)ring;
    return no_segment("reduce-scatter");
}

vkg_status vkg__shm_allgatherv(vkg_comm_t *c, const char *name, void *buf, size_t count, size_t es,
                               const size_t *bounds)
{
    (void)c, (void)buf, (void)count, (void)es, (void)bounds;
    return no_segment(name);
}

vkg_status vkg__shm_group_allreduce(vkg_comm_t *c, struct vkg_shm *s, const int *ranks,
                                    const char *what, float *buf, size_t count, const size_t *rb)
{
    (void)c, (void)s, (void)ranks, (void)buf, (void)count, (void)rb;
    return no_segment(what);
}

vkg_status vkg__shm_group_broadcast(vkg_comm_t *c, struct vkg_shm *s, const int *ranks,
                                    const char *what, void *buf, size_t bytes, int root)
{
    (void)c, (void)s, (void)ranks, (void)buf, (void)bytes, (void)root;
    return no_segment(what);
}

vkg_status vkg__shm_group_allgather(vkg_comm_t *c, struct vkg_shm *s, const int *ranks,
                                    const char *what, const void *send, size_t bytes, void *recv)
{
    (void)c, (void)s, (void)ranks, (void)send, (void)bytes, (void)recv;
    return no_segment(what);
}

vkg_status vkg__hier_allreduce(vkg_comm_t *c, const void *send, void *recv, size_t count,
                               vkg_comm_dtype dt, vkg_comm_op op)
{
    (void)c, (void)send, (void)recv, (void)count, (void)dt, (void)op;
    return no_segment("two-level allreduce");
}

vkg_status vkg__hier_broadcast(vkg_comm_t *c, void *buf, size_t bytes, int root)
{
    (void)c, (void)buf, (void)bytes, (void)root;
    return no_segment("two-level broadcast");
}

vkg_status vkg__hier_allgather(vkg_comm_t *c, const void *send, size_t bytes, void *recv)
{
    (void)c, (void)send, (void)bytes, (void)recv;
    return no_segment("two-level allgather");
}
