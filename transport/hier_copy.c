/* Broadcast and allgather over several hosts in two levels (c->hier: each host's segment holds its
 * own ranks; hosts may hold different numbers of them). No arithmetic: every rank ends up with
 * the bytes the flat ZeroMQ path gives.
 *
 * Broadcast from root: a chain over ZeroMQ through one rank per host, the carriers (the root,
 * then the first rank of each other host, hosts in order from the root's), pipelined in segments
 * (vkg__chain_broadcast_among), so each byte crosses the network once per host and every link
 * carries it once; then each host's carrier broadcasts it in the host's segment.
 *
 * Allgather: in the segment, every rank gets its host's block (its ranks' blocks in rank order);
 * the hosts' first ranks pass the host blocks around a ZeroMQ ring (vkg__ring_allgatherv_among;
 * blocks of unequal sizes when hosts hold different numbers of ranks), so each host block
 * crosses every link once; then each first rank broadcasts the other hosts' blocks in its
 * segment. The blocks are staged host by host (host 0's ranks' blocks, then host 1's, ...) and put
 * in rank order at the end; when every host holds consecutive ranks, the stage is the caller's
 * buffer itself.
 *
 * Faults are the segment's and the ring's (see hier.c). Not here: the allreduce (hier.c).
 */
#include "shm.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The local index of communicator rank q, which is on this host. */
static int local_index_of(const vkg_comm_t *c, int q)
{
    for (int i = 0; i < c->nlocal; i++)
        if (c->local[i] == q)
            return i;
    assert(!"the rank is not on this host");
    return 0;
}

static void what_of(const vkg_comm_t *c, const char *name, char *what, size_t cap)
{
    snprintf(what, cap, "%s #%llu (shm)", name, (unsigned long long)c->seq);
}

/* Broadcast bytes of buf in the host's segment from local rank root. */
static vkg_status seg_broadcast(vkg_comm_t *c, const char *name, void *buf, size_t bytes, int root)
{
    char what[48];
    what_of(c, name, what, sizeof what);
    if (bytes == 0)
        return VKG_OK;
    return vkg__shm_group_broadcast(c, c->shm, c->local, what, buf, bytes, root);
}

vkg_status vkg__hier_broadcast(vkg_comm_t *c, void *buf, size_t bytes, int root)
{
    int nh = c->nhosts, hr = c->host_of[root], mine = c->host_of[c->rank];
    int pos = (mine - hr + nh) % nh; /* this host's place in the chain */
    int carrier = pos == 0 ? root : c->leaders[mine];
    if (c->rank == carrier) {
        int *chain = malloc((size_t)nh * sizeof *chain);
        VKG_CHECK(chain != NULL, VKG_ERR_NOMEM, "broadcast: out of memory");
        chain[0] = root;
        for (int k = 1; k < nh; k++)
            chain[k] = c->leaders[(hr + k) % nh];
        vkg_status st = vkg__chain_broadcast_among(c, chain, nh, pos, buf, bytes);
        free(chain);
        VKG_TRY(st);
    }
    return seg_broadcast(c, "broadcast", buf, bytes, local_index_of(c, carrier));
}

/* Byte offsets of the hosts' blocks in the stage: off[h] .. off[h + 1] is host h's. */
static void host_offsets(const vkg_comm_t *c, size_t bytes, size_t *off)
{
    memset(off, 0, ((size_t)c->nhosts + 1) * sizeof *off);
    for (int q = 0; q < c->size; q++)
        off[c->host_of[q] + 1] += bytes;
    for (int h = 0; h < c->nhosts; h++)
        off[h + 1] += off[h];
}

/* Put the staged blocks (host by host) in rank order into recv; seen: nhosts counters. */
static void unstage(const vkg_comm_t *c, const size_t *off, size_t bytes, const uint8_t *stage,
                    uint8_t *recv, size_t *seen)
{
    memset(seen, 0, (size_t)c->nhosts * sizeof *seen);
    for (int q = 0; q < c->size; q++) {
        int h = c->host_of[q];
        memcpy(recv + (size_t)q * bytes, stage + off[h] + seen[h]++ * bytes, bytes);
    }
}

/* 1 when every host holds consecutive ranks: the stage is rank order. */
static int hosts_consecutive(const vkg_comm_t *c)
{
    for (int q = 1; q < c->size; q++)
        if (c->host_of[q] != c->host_of[q - 1] && c->host_of[q] != c->host_of[q - 1] + 1)
            return 0;
    return 1;
}

vkg_status vkg__hier_allgather(vkg_comm_t *c, const void *send, size_t bytes, void *recv)
{
    int nh = c->nhosts, mine = c->host_of[c->rank];
    size_t total = bytes * (size_t)c->size;
    size_t *off = malloc((2 * (size_t)nh + 1) * sizeof *off); /* offsets, then counters */
    uint8_t *stage = hosts_consecutive(c) ? recv : malloc(total);
    vkg_status st = VKG_OK;
    VKG_CHECK_GOTO(st, off && stage, VKG_ERR_NOMEM, out, "allgather: out of memory (%zu bytes)",
                   total);
    host_offsets(c, bytes, off);
    char what[48];
    what_of(c, "allgather", what, sizeof what);
    /* 1: the host's block in the segment */
    VKG_TRY_GOTO(
        st, vkg__shm_group_allgather(c, c->shm, c->local, what, send, bytes, stage + off[mine]),
        out);
    /* 2: the host blocks around the hosts' first ranks */
    if (c->local_index == 0)
        VKG_TRY_GOTO(st, vkg__ring_allgatherv_among(c, c->leaders, nh, mine, stage, off), out);
    /* 3: the other hosts' blocks, before and after this host's, in the segment */
    VKG_TRY_GOTO(st, seg_broadcast(c, "allgather", stage, off[mine], 0), out);
    VKG_TRY_GOTO(st, seg_broadcast(c, "allgather", stage + off[mine + 1], total - off[mine + 1], 0),
                 out);
    if (stage != recv)
        unstage(c, off, bytes, stage, recv, off + nh + 1);
out:
    if (stage != recv)
        free(stage);
    free(off);
    return st;
}
