/* Communicator groups (see vkgpt/comm.h): collectives over a subset of ranks, built on the
 * communicator's tagged point-to-point messages. A group call's tag is 1 << 31 | id << 20 |
 * (sequence number mod 2^20): user tags stay below 2^31, and a peer's messages of one call are
 * matched in order (point-to-point messages from one peer arrive in order; other tags wait in the
 * communicator's stash). Not here: the wire, deadlines and liveness (coll.c, wait.c).
 *
 * When every member shares this host (and the communicator's policy allows shared memory, as for
 * its own collectives), the group's first collective sets up a segment of the members' own
 * (shm_setup.c, agreed over the group's messages) and the collectives run in it with the ZeroMQ
 * ring's order of additions (chunk k of this file's chunking summed from member k on), so both
 * paths give the same bits. The segment is the group's; the communicator lists it while it exists
 * so that a failing rank sets its abort word too (vkg__shm_abort). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "comm_testing.h"
#include "shm.h"
#include "vkgpt/comm.h"

#define GROUP_TAG_BIT 0x80000000u

struct vkg_group {
    vkg_comm_t *comm;
    int *ranks; /* (n) communicator ranks in group-rank order */
    int n, me;  /* size, this rank's group rank */
    uint32_t id, seq;
    int shm_decided;     /* the segment question was settled (at the first collective) */
    struct vkg_shm *shm; /* the members' segment, or NULL: tagged messages */
};

vkg_status vkg_group_create(vkg_comm_t *c, const int *ranks, int n, uint32_t id, vkg_group_t **out)
{
    int world = vkg_comm_size(c), self = vkg_comm_rank(c), me = -1;
    VKG_CHECK(n >= 1 && n <= world, VKG_ERR_INVALID_ARG,
              "group %u: %d members for a communicator of %d ranks", (unsigned)id, n, world);
    VKG_CHECK(id <= VKG_GROUP_MAX_ID, VKG_ERR_INVALID_ARG, "group id %u is over %d", (unsigned)id,
              VKG_GROUP_MAX_ID);
    for (int i = 0; i < n; i++) {
        VKG_CHECK(ranks[i] >= 0 && ranks[i] < world, VKG_ERR_INVALID_ARG,
                  "group %u: member %d is rank %d, outside [0, %d)", (unsigned)id, i, ranks[i],
                  world);
        for (int j = 0; j < i; j++)
            VKG_CHECK(ranks[j] != ranks[i], VKG_ERR_INVALID_ARG,
                      "group %u: rank %d is listed twice", (unsigned)id, ranks[i]);
        if (ranks[i] == self)
            me = i;
    }
    VKG_CHECK(me >= 0, VKG_ERR_INVALID_ARG, "group %u: this rank (%d) is not a member",
              (unsigned)id, self);
    vkg_group_t *g = calloc(1, sizeof *g);
    int *r = malloc((size_t)n * sizeof *r);
    if (!g || !r) {
        free(g), free(r);
        return VKG_FAIL(VKG_ERR_NOMEM, "no memory for group %u", (unsigned)id);
    }
    memcpy(r, ranks, (size_t)n * sizeof *r);
    *g = (vkg_group_t){.comm = c, .ranks = r, .n = n, .me = me, .id = id};
    *out = g;
    return VKG_OK;
}

void vkg_group_destroy(vkg_group_t **pg)
{
    vkg_group_t *g = pg ? *pg : NULL;
    if (!g)
        return;
    vkg__shm_group_free(&g->shm);
    free(g->ranks);
    free(g);
    *pg = NULL;
}

int vkg__group_uses_shm(const vkg_group_t *g)
{
    return g->shm != NULL;
}

int vkg_group_rank(const vkg_group_t *g)
{
    return g->me;
}

int vkg_group_size(const vkg_group_t *g)
{
    return g->n;
}

int vkg_group_member(const vkg_group_t *g, int i)
{
    return i >= 0 && i < g->n ? g->ranks[i] : -1;
}

/* The tag of this group's next call. */
static uint32_t next_tag(vkg_group_t *g)
{
    uint32_t t = GROUP_TAG_BIT | g->id << 20 | (g->seq & 0xFFFFFu);
    g->seq++;
    return t;
}

/* Chunk k of n floats cut into g->n nearly equal chunks: [*off, *off + *len). */
static void chunk(const vkg_group_t *g, size_t n, int k, size_t *off, size_t *len)
{
    size_t base = n / (size_t)g->n, extra = n % (size_t)g->n;
    *off = (size_t)k * base + ((size_t)k < extra ? (size_t)k : extra);
    *len = base + ((size_t)k < extra ? 1 : 0);
}

static vkg_status p2p_allgather(vkg_group_t *g, const void *send, size_t bytes, void *recv);
static vkg_status p2p_allgather_tag(vkg_group_t *g, uint32_t tag, const void *send, size_t bytes,
                                    void *recv);

static vkg_status agree(void *arg, const void *mine, size_t bytes, void *all)
{
    return p2p_allgather(arg, mine, bytes, all);
}

/* At the first collective: the members' segment when they share this host. *on: use it. */
static vkg_status use_shm(vkg_group_t *g, int *on)
{
    if (!g->shm_decided) {
        g->shm_decided = 1;
        VKG_TRY(vkg__shm_group_setup(g->comm, g->ranks, g->n, g->me, g->id, agree, g, &g->shm));
    }
    *on = g->shm != NULL;
    return VKG_OK;
}

/* A failure in the segment fails the communicator and tells the peers, as a failed message
 * would. */
static vkg_status shm_done(vkg_group_t *g, vkg_status st)
{
    return st < 0 ? vkg__comm_fail(g->comm, st, 1) : st;
}

static void shm_what(const vkg_group_t *g, const char *name, char *what, size_t cap)
{
    snprintf(what, cap, "group %u %s #%u (shm)", (unsigned)g->id, name, (unsigned)(g->seq - 1));
}

vkg_status vkg_group_allreduce_sum(vkg_group_t *g, float *buf, size_t n)
{
    uint32_t tag = next_tag(g);
    if (g->n == 1 || n == 0)
        return VKG_OK;
    int on;
    VKG_TRY(use_shm(g, &on));
    if (on) {
        size_t rb[VKG_SHM_MAX_RANKS + 1], len;
        for (int k = 0; k < g->n; k++)
            chunk(g, n, k, &rb[k], &len);
        rb[g->n] = n;
        char what[64];
        shm_what(g, "allreduce", what, sizeof what);
        VKG_TRY(vkg__comm_usable(g->comm));
        return shm_done(g, vkg__shm_group_allreduce(g->comm, g->shm, g->ranks, what, buf, n, rb));
    }
    int next = g->ranks[(g->me + 1) % g->n], prev = g->ranks[(g->me + g->n - 1) % g->n];
    size_t most = n / (size_t)g->n + 1;
    float *tmp = malloc(most * sizeof *tmp);
    VKG_CHECK(tmp, VKG_ERR_NOMEM, "group %u: no memory for %zu floats", (unsigned)g->id, most);
    vkg_status st = VKG_OK;
    /* Reduce-scatter: after step s, chunk (me - s - 1) holds the sum of s + 2 members. */
    for (int s = 0; st == VKG_OK && s < g->n - 1; s++) {
        size_t so, sl, ro, rl;
        chunk(g, n, (g->me - s + g->n) % g->n, &so, &sl);
        chunk(g, n, (g->me - s - 1 + 2 * g->n) % g->n, &ro, &rl);
        st = vkg_comm_send(g->comm, next, tag, buf + so, sl * sizeof *buf);
        if (st == VKG_OK)
            st = vkg_comm_recv(g->comm, prev, tag, tmp, rl * sizeof *tmp);
        for (size_t i = 0; st == VKG_OK && i < rl; i++)
            buf[ro + i] = tmp[i] + buf[ro + i];
    }
    /* Allgather: member me owns the finished chunk (me + 1) and passes chunks along. */
    for (int s = 0; st == VKG_OK && s < g->n - 1; s++) {
        size_t so, sl, ro, rl;
        chunk(g, n, (g->me + 1 - s + g->n) % g->n, &so, &sl);
        chunk(g, n, (g->me - s + g->n) % g->n, &ro, &rl);
        st = vkg_comm_send(g->comm, next, tag, buf + so, sl * sizeof *buf);
        if (st == VKG_OK)
            st = vkg_comm_recv(g->comm, prev, tag, buf + ro, rl * sizeof *buf);
    }
    free(tmp);
    return st;
}

vkg_status vkg_group_broadcast(vkg_group_t *g, void *buf, size_t bytes, int root)
{
    uint32_t tag = next_tag(g);
    VKG_CHECK(root >= 0 && root < g->n, VKG_ERR_INVALID_ARG,
              "group %u: broadcast root %d outside [0, %d)", (unsigned)g->id, root, g->n);
    if (g->n == 1 || bytes == 0)
        return VKG_OK;
    int on;
    VKG_TRY(use_shm(g, &on));
    if (on) {
        char what[64];
        shm_what(g, "broadcast", what, sizeof what);
        VKG_TRY(vkg__comm_usable(g->comm));
        return shm_done(
            g, vkg__shm_group_broadcast(g->comm, g->shm, g->ranks, what, buf, bytes, root));
    }
    if (g->me != root)
        return vkg_comm_recv(g->comm, g->ranks[root], tag, buf, bytes);
    for (int i = 0; i < g->n; i++)
        if (i != root)
            VKG_TRY(vkg_comm_send(g->comm, g->ranks[i], tag, buf, bytes));
    return VKG_OK;
}

vkg_status vkg_group_allgather(vkg_group_t *g, const void *send, size_t bytes, void *recv)
{
    uint32_t tag = next_tag(g);
    if (g->n > 1 && bytes > 0) {
        int on;
        VKG_TRY(use_shm(g, &on));
        if (on) {
            char what[64];
            shm_what(g, "allgather", what, sizeof what);
            VKG_TRY(vkg__comm_usable(g->comm));
            return shm_done(
                g, vkg__shm_group_allgather(g->comm, g->shm, g->ranks, what, send, bytes, recv));
        }
    }
    return p2p_allgather_tag(g, tag, send, bytes, recv);
}

/* The allgather over tagged messages, under tag. */
static vkg_status p2p_allgather_tag(vkg_group_t *g, uint32_t tag, const void *send, size_t bytes,
                                    void *recv)
{
    unsigned char *out = recv;
    if (out + (size_t)g->me * bytes != send)
        memmove(out + (size_t)g->me * bytes, send, bytes);
    for (int i = 0; i < g->n; i++) /* send to everyone first: sends do not wait for receives */
        if (i != g->me)
            VKG_TRY(vkg_comm_send(g->comm, g->ranks[i], tag, out + (size_t)g->me * bytes, bytes));
    for (int i = 0; i < g->n; i++)
        if (i != g->me)
            VKG_TRY(vkg_comm_recv(g->comm, g->ranks[i], tag, out + (size_t)i * bytes, bytes));
    return VKG_OK;
}

static vkg_status p2p_allgather(vkg_group_t *g, const void *send, size_t bytes, void *recv)
{
    return p2p_allgather_tag(g, next_tag(g), send, bytes, recv);
}
