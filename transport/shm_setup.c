/* Whether the collectives of a communicator use shared memory, decided collectively by create
 * after its first barrier (vkg__shm_setup): never for a single rank or with the policy OFF. When
 * every rank is on this host, the segment holds them all. When the ranks span hosts that each
 * hold the same number (2 or more) of ranks, each host gets a segment of its own ranks and the
 * allreduce runs in two levels (hier.c); otherwise (REQUIRE then fails, naming why) ZeroMQ only.
 * The host's first rank creates the segment and the others attach (shm.c). Two rounds of allgather
 * over ZeroMQ make the outcome collective: first whether the segment exists, then whether every
 * rank attached; with the automatic policy any failure falls back to ZeroMQ on every rank, with
 * REQUIRE it fails create naming the rank and its reason.
 */
#include "shm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- setup: the collective decision ---- */

typedef struct verdict {
    uint8_t ok;
    char why[255];
} verdict;

/* Every rank's verdict; *bad = the first rank that failed (-1: none). */
static vkg_status agree(vkg_comm_t *c, const verdict *mine, verdict *all, int *bad)
{
    VKG_TRY(vkg_comm_allgather(c, mine, sizeof *mine, all));
    *bad = -1;
    for (int q = 0; q < c->size && *bad < 0; q++)
        if (!all[q].ok)
            *bad = q;
    return VKG_OK;
}

static void note_failure(verdict *v, vkg_status st)
{
    (void)st;
    v->ok = 0;
    snprintf(v->why, sizeof v->why, "%s", vkg_error_message());
}

/* Shared memory could not be set up because rank q failed: fall back, or fail under REQUIRE. */
static vkg_status give_up(vkg_comm_t *c, int q, const char *why)
{
    vkg__shm_free(c);
    if (c->shm_mode == VKG_COMM_SHM_REQUIRE)
        return VKG_FAIL(VKG_ERR_UNSUPPORTED,
                        "shared memory required (--transport shm) but rank %d could not set it "
                        "up: %s",
                        q, why);
    snprintf(c->path, sizeof c->path, "zmq %s (shared memory failed on rank %d)",
             vkg_comm_transport_name(c->transport), q);
    return VKG_OK;
}

/* Create (the host's first rank) or attach to the segment of this host's nlocal ranks. With hier
 * the communicator spans hosts: the socket name carries the host's first rank, so hosts that
 * share an abstract socket namespace (the transport's tests fake hosts that way) stay apart. */
static vkg_status setup_segment(vkg_comm_t *c, int hier)
{
    int n = c->nlocal, me = c->local_index;
    vkg_shm_creds cr = {.job_id = c->job_id, .generation = c->generation};
    memcpy(cr.secret, c->secret, sizeof cr.secret);
    char name[112];
    vkg__shm_socket_name(&cr, name, sizeof name);
    if (hier)
        snprintf(name + strlen(name), sizeof name - strlen(name), "-h%d", c->local[0]);
    size_t chunk = c->shm_chunk ? c->shm_chunk : VKG_SHM_DEFAULT_CHUNK;
    chunk = (chunk + 4095) & ~(size_t)4095;
    int64_t deadline = vkg__now_ns() + (int64_t)c->timeout_ms * 1000000;
    verdict mine = {.ok = 1}, *all = calloc((size_t)c->size, sizeof *all);
    VKG_CHECK(all != NULL, VKG_ERR_NOMEM, "out of memory");
    int seg = -1, lfd = -1, bad = -1;
    size_t bytes = 0;
    uint8_t *base = NULL;
    vkg_status st = VKG_OK;
    if (me == 0) {
        st = vkg__shm_create_fd(&cr, n, chunk, &seg, &bytes);
        if (st == VKG_OK)
            st = vkg__shm_listen(name, &lfd);
        if (st < 0)
            note_failure(&mine, st);
    }
    VKG_TRY_GOTO(st, agree(c, &mine, all, &bad), out);
    if (bad >= 0) {
        st = give_up(c, bad, all[bad].why);
        goto out;
    }
    st = me == 0 ? vkg__shm_serve(lfd, &cr, n, seg, bytes, deadline, NULL)
                 : vkg__shm_attach(name, &cr, me, deadline, &seg, &bytes);
    if (st == VKG_OK)
        st = vkg__shm_map(seg, &cr, n, chunk, &base, &bytes);
    if (st < 0)
        note_failure(&mine, st);
    if (lfd >= 0)
        close(lfd);
    lfd = -1;
    VKG_TRY_GOTO(st, agree(c, &mine, all, &bad), out);
    if (bad >= 0) {
        if (base)
            munmap(base, bytes);
        st = give_up(c, bad, all[bad].why);
        goto out;
    }
    struct vkg_shm *s = calloc(1, sizeof *s);
    VKG_CHECK_GOTO(st, s != NULL, VKG_ERR_NOMEM, out, "out of memory");
    s->fd = seg;
    seg = -1;
    vkg__shm_bind(s, base, bytes, n, me);
    /* spinning helps only when every rank has a core of its own (and then adapts, see
     * shm_coll.c) */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    s->spin_max_ns = cpus >= n ? 50000 : 1000;
    s->spin_ns = s->spin_max_ns;
    c->shm = s;
    c->hier = hier;
    if (hier)
        snprintf(c->path, sizeof c->path,
                 "hier (%d hosts x %d ranks: shm in the host, zmq %s between)", c->nhosts, n,
                 vkg_comm_transport_name(c->transport));
    else
        snprintf(c->path, sizeof c->path, "shm (%d ranks on this host)", c->size);
out:
    if (lfd >= 0)
        close(lfd);
    if (seg >= 0)
        close(seg);
    free(all);
    return st;
}

vkg_status vkg__shm_setup(vkg_comm_t *c)
{
    const char *tr = vkg_comm_transport_name(c->transport);
    if (c->size == 1) {
        snprintf(c->path, sizeof c->path, "single rank");
        return VKG_OK;
    }
    if (c->shm_mode == VKG_COMM_SHM_OFF) {
        snprintf(c->path, sizeof c->path, "zmq %s (shared memory off)", tr);
        return VKG_OK;
    }
    /* several hosts of the same number (2 or more) of ranks each: two levels */
    int hier = c->nlocal != c->size && c->nlocal >= 2 && c->hosts_uniform &&
               c->nlocal <= VKG_SHM_MAX_RANKS;
    if (hier && c->shm_mode == VKG_COMM_SHM_AUTO && c->transport == VKG_COMM_INPROC) {
        snprintf(c->path, sizeof c->path, "zmq inproc (ranks on several hosts)");
        return VKG_OK;
    }
    if (hier)
        return setup_segment(c, 1);
    if (c->nlocal != c->size || c->size > VKG_SHM_MAX_RANKS) {
        VKG_CHECK(c->shm_mode != VKG_COMM_SHM_REQUIRE, VKG_ERR_UNSUPPORTED,
                  "shared memory required (--transport shm) but %s: only ranks sharing one host "
                  "(host name, boot id, IPC and network namespace) can use it, and only when "
                  "all of them do or every host holds the same number (2 or more) of ranks",
                  c->size > VKG_SHM_MAX_RANKS ? "there are more than 64 ranks"
                  : c->nlocal > 1             ? "some ranks run on other hosts"
                                              : "this rank shares its host with no other");
        snprintf(c->path, sizeof c->path, "zmq %s (ranks on several hosts)", tr);
        return VKG_OK;
    }
    if (c->shm_mode == VKG_COMM_SHM_AUTO && c->transport == VKG_COMM_INPROC) {
        snprintf(c->path, sizeof c->path, "zmq inproc");
        return VKG_OK;
    }
    return setup_segment(c, 0);
}

void vkg__shm_free(vkg_comm_t *c)
{
    struct vkg_shm *s = c->shm;
    if (!s)
        return;
    munmap(s->base, s->bytes);
    close(s->fd);
    free(s);
    c->shm = NULL;
    c->hier = 0;
}

uint32_t vkg__comm_shm_steps(const vkg_comm_t *c)
{
    return c->shm ? c->shm->step : 0;
}
