/* Whether the collectives of a communicator use shared memory, decided collectively by create
 * after its first barrier (vkg__shm_setup): never for a single rank or with the policy OFF. When
 * every rank is on this host, the segment holds them all. When the ranks span hosts and at least
 * one host holds 2 or more of them, each host gets a segment of its own ranks (a host of one rank
 * too, so that every rank runs the same code) and the collectives run in two levels (hier.c,
 * hier_copy.c); when every rank is alone on its host (REQUIRE then fails, naming why), ZeroMQ
 * only. The host's first rank creates the segment and the others attach (shm.c). Two rounds of
 * allgather over ZeroMQ make the outcome collective: first whether the segment exists, then
 * whether every rank attached; with the automatic policy any failure falls back to ZeroMQ on
 * every rank, with REQUIRE it fails create naming the rank and its reason. Groups' segments are
 * made here too (vkg__shm_group_setup) and listed in their communicator (c->group_segs) so
 * that a failing rank's abort reaches them. */
#include "shm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os/proc.h"
#include "os/shm.h"

/* ---- setup: the collective decision ---- */

typedef struct verdict {
    uint8_t ok;
    uint8_t timed_out; /* the failure was a deadline: another party's is likely the cause */
    char why[255];
    uint8_t tag[VKG_SHM_TAG_BYTES]; /* the creator's: names the socket it listens at */
} verdict;

/* Every party's verdict through agree (nall of them); *bad = the first that failed not by a
 * deadline, else the first that failed (-1: none). */
static vkg_status agree_all(vkg_shm_agree_fn agree, void *arg, int nall, const verdict *mine,
                            verdict *all, int *bad)
{
    VKG_TRY(agree(arg, mine, sizeof *mine, all));
    *bad = -1; /* the first failure that is not a deadline (the cause), else the first */
    for (int q = 0; q < nall && (*bad < 0 || all[*bad].timed_out); q++)
        if (!all[q].ok && (*bad < 0 || !all[q].timed_out))
            *bad = q;
    return VKG_OK;
}

static vkg_status comm_agree(void *arg, const void *mine, size_t bytes, void *all)
{
    return vkg_comm_allgather(arg, mine, bytes, all);
}

static void note_failure(verdict *v, vkg_status st)
{
    v->ok = 0;
    v->timed_out = st == VKG_ERR_TIMEOUT;
    snprintf(v->why, sizeof v->why, "%s", vkg_error_message());
}

int vkg_comm_has_shm(void)
{
    return 1;
}

void vkg__comm_shm_fix_tag(vkg_comm_t *c, const uint8_t tag[VKG_SHM_TAG_BYTES])
{
    c->shm_tag_fixed = 1;
    memcpy(c->shm_tag, tag, VKG_SHM_TAG_BYTES);
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

/* Create (me == 0) or attach to a segment of n ranks, the outcome agreed through agree among
 * nall parties (two rounds), of which party `creator` creates it. The creator names the socket
 * it hands the segment over at by random bytes that reach the others in the first round. *out:
 * the segment, or NULL with *bad = the first party that failed and its reason in why. pools:
 * the segment gets buffer pools (VKG_COMM_SHM_POOL, read by the creator). */
static vkg_status make_segment(vkg_comm_t *c, int n, int me, int creator, int pools,
                               vkg_shm_agree_fn agree, void *arg, int nall, struct vkg_shm **out,
                               int *bad, char *why, size_t cap)
{
    char name[64];
    vkg_shm_creds cr = {.job_id = c->job_id, .generation = c->generation};
    memcpy(cr.secret, c->secret, sizeof cr.secret);
    size_t chunk = c->shm_chunk ? c->shm_chunk : VKG_SHM_DEFAULT_CHUNK;
    chunk = (chunk + 4095) & ~(size_t)4095;
    int64_t deadline = vkg__now_ns() + (int64_t)c->timeout_ms * 1000000;
    verdict mine = {.ok = 1}, *all = calloc((size_t)nall, sizeof *all);
    VKG_CHECK(all != NULL, VKG_ERR_NOMEM, "out of memory");
    int seg = -1, lfd = -1;
    size_t bytes = 0;
    uint8_t *base = NULL;
    vkg_status st = VKG_OK;
    *out = NULL;
    if (me == 0) {
        size_t pool = 0; /* the creator's VKG_COMM_SHM_POOL: the others read it in the header */
        if (pools)
            st = vkg__shm_pool_request(n, &pool);
        if (st == VKG_OK)
            st = vkg__shm_create_fd(&cr, n, chunk, pool, &seg, &bytes);
        if (st == VKG_OK && c->shm_tag_fixed)
            memcpy(mine.tag, c->shm_tag, sizeof mine.tag);
        else if (st == VKG_OK)
            st = vkg__crypto_random(mine.tag, sizeof mine.tag);
        vkg__shm_socket_name(mine.tag, name, sizeof name);
        if (st == VKG_OK)
            st = vkg__shm_listen(name, &lfd);
        if (st < 0)
            note_failure(&mine, st);
    }
    VKG_TRY_GOTO(st, agree_all(agree, arg, nall, &mine, all, bad), out);
    if (*bad >= 0)
        goto out;
    vkg__shm_socket_name(all[creator].tag, name, sizeof name);
    st = me == 0 ? vkg__shm_serve(lfd, &cr, n, seg, bytes, deadline, NULL)
                 : vkg__shm_attach(name, &cr, me, deadline, &seg, &bytes);
    if (st == VKG_OK)
        st = vkg__shm_map(seg, &cr, n, chunk, &base, &bytes);
    if (st < 0)
        note_failure(&mine, st);
    if (lfd >= 0)
        vkg_os_shm_close(lfd);
    lfd = -1;
    VKG_TRY_GOTO(st, agree_all(agree, arg, nall, &mine, all, bad), out);
    if (*bad >= 0) {
        if (base)
            vkg_os_shm_unmap(base, bytes);
        goto out;
    }
    struct vkg_shm *s = calloc(1, sizeof *s);
    VKG_CHECK_GOTO(st, s != NULL, VKG_ERR_NOMEM, out, "out of memory");
    s->fd = seg;
    seg = -1;
    vkg__shm_bind(s, base, bytes, n, me);
    /* spinning helps only when every rank has a core of its own (and then adapts, see
     * shm_coll.c) */
    long cpus = vkg_os_cpu_count();
    s->spin_max_ns = cpus >= n ? 50000 : 1000;
    s->spin_ns = s->spin_max_ns;
    *out = s;
out:
    if (*bad >= 0)
        snprintf(why, cap, "%s", all[*bad].why);
    if (lfd >= 0)
        vkg_os_shm_close(lfd);
    if (seg >= 0)
        vkg_os_shm_close(seg);
    free(all);
    return st;
}

/* Create (the host's first rank) or attach to the segment of this host's nlocal ranks. With hier
 * the communicator spans hosts and each host's first rank names its own segment's socket. */
static vkg_status setup_segment(vkg_comm_t *c, int hier)
{
    char why[255];
    int bad = -1;
    struct vkg_shm *s = NULL;
    /* pools serve the single-host allreduce only */
    VKG_TRY(make_segment(c, c->nlocal, c->local_index, c->local[0], !hier, comm_agree, c, c->size,
                         &s, &bad, why, sizeof why));
    if (!s)
        return give_up(c, bad, why);
    c->shm = s;
    c->hier = hier;
    if (hier && c->hosts_uniform)
        snprintf(c->path, sizeof c->path,
                 "hier (%d hosts x %d ranks: shm in the host, zmq %s between)", c->nhosts,
                 c->nlocal, vkg_comm_transport_name(c->transport));
    else if (hier)
        snprintf(c->path, sizeof c->path,
                 "hier (%d hosts of %d to %d ranks, %d here: shm in the host, zmq %s between)",
                 c->nhosts, c->lanes, c->most_local, c->nlocal,
                 vkg_comm_transport_name(c->transport));
    else
        snprintf(c->path, sizeof c->path, "shm (%d ranks on this host)", c->size);
    return hier ? VKG_OK : vkg__shm_direct_setup(c);
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
    /* several hosts, some of 2 or more ranks (the same answer on every rank): two levels */
    int hier = c->nhosts >= 2 && c->nhosts < c->size && c->most_local <= VKG_SHM_MAX_RANKS;
    if (hier && c->shm_mode == VKG_COMM_SHM_AUTO && c->transport == VKG_COMM_INPROC) {
        snprintf(c->path, sizeof c->path, "zmq inproc (ranks on several hosts)");
        return VKG_OK;
    }
    if (hier)
        return setup_segment(c, 1);
    if (c->nlocal != c->size || c->size > VKG_SHM_MAX_RANKS) {
        VKG_CHECK(c->shm_mode != VKG_COMM_SHM_REQUIRE, VKG_ERR_UNSUPPORTED,
                  "shared memory required (--transport shm) but %s: only ranks sharing one host "
                  "(host name, boot id, IPC and network namespace) can use it, at most 64 of "
                  "them, and across hosts only when some host holds 2 or more ranks",
                  c->most_local > VKG_SHM_MAX_RANKS ? "a host holds more than 64 ranks"
                                                    : "every rank is alone on its host");
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
    for (int i = 0; i < c->ngroup_segs; i++) /* the groups keep their segments */
        c->group_segs[i]->listed_in = NULL;
    free(c->group_segs);
    c->group_segs = NULL;
    c->ngroup_segs = c->cap_group_segs = 0;
    struct vkg_shm *s = c->shm;
    if (!s)
        return;
    vkg_os_shm_unmap(s->base, s->bytes);
    vkg_os_shm_close(s->fd);
    vkg__shm_direct_free(s);
    free(s);
    c->shm = NULL;
    c->hier = 0;
}

uint32_t vkg__comm_shm_steps(const vkg_comm_t *c)
{
    return c->shm ? c->shm->step : 0;
}

/* List segment s of one of c's groups in c->group_segs (s stays the group's), or take it off. */
static vkg_status track(vkg_comm_t *c, struct vkg_shm *s)
{
    if (c->ngroup_segs == c->cap_group_segs) {
        int cap = c->cap_group_segs ? 2 * c->cap_group_segs : 4;
        struct vkg_shm **p = realloc(c->group_segs, (size_t)cap * sizeof *p);
        VKG_CHECK(p != NULL, VKG_ERR_NOMEM, "out of memory listing a group's segment");
        c->group_segs = p;
        c->cap_group_segs = cap;
    }
    c->group_segs[c->ngroup_segs++] = s;
    s->listed_in = c;
    return VKG_OK;
}

static void untrack(struct vkg_shm *s)
{
    vkg_comm_t *c = s->listed_in;
    for (int i = 0; c && i < c->ngroup_segs; i++)
        if (c->group_segs[i] == s) {
            c->group_segs[i] = c->group_segs[--c->ngroup_segs];
            break;
        }
    s->listed_in = NULL;
}

vkg_status vkg__shm_group_setup(vkg_comm_t *c, const int *ranks, int n, int me, uint32_t id,
                                vkg_shm_agree_fn agree, void *arg, struct vkg_shm **out)
{
    *out = NULL;
    if (n < 2 || n > VKG_SHM_MAX_RANKS || c->shm_mode == VKG_COMM_SHM_OFF ||
        (c->shm_mode == VKG_COMM_SHM_AUTO && c->transport == VKG_COMM_INPROC))
        return VKG_OK;
    const char *mine = c->peers[c->rank].host;
    for (int i = 0; i < n; i++) /* the same on every member: the peer table is common */
        if (!mine[0] || strcmp(c->peers[ranks[i]].host, mine) != 0)
            return VKG_OK;
    char why[255];
    int bad = -1;
    VKG_TRY(make_segment(c, n, me, 0, 0, agree, arg, n, out, &bad, why, sizeof why));
    VKG_CHECK(*out || c->shm_mode != VKG_COMM_SHM_REQUIRE, VKG_ERR_UNSUPPORTED,
              "shared memory required (--transport shm) but group %u could not set up its "
              "segment on rank %d: %s",
              (unsigned)id, ranks[bad], why);
    vkg_status st = *out ? track(c, *out) : VKG_OK;
    if (st < 0)
        vkg__shm_group_free(out);
    return st;
}

void vkg__shm_group_free(struct vkg_shm **ps)
{
    struct vkg_shm *s = *ps;
    if (!s)
        return;
    untrack(s);
    vkg_os_shm_unmap(s->base, s->bytes);
    vkg_os_shm_close(s->fd);
    vkg__shm_direct_free(s);
    free(s);
    *ps = NULL;
}
