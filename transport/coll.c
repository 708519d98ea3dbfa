/* The public collectives and point-to-point calls: argument checks, sequence numbering, the
 * choice between the one-step (latency) algorithms here and the pipelined ring/chain (ring.c),
 * and turning any failure into a failed communicator that has told its peers.
 *
 * One-step algorithms, used up to small_bytes: allreduce sends the whole buffer to every peer and
 * each rank reduces the N inputs in rank order (so every rank computes the same bits); broadcast
 * sends from the root to each rank; allgather sends each rank's block to every peer; the barrier
 * is a dissemination barrier (ceil(log2 N) rounds). The reduce-scatter and allgather over chunks
 * of the caller's choosing run the all-to-all engine of a2a.c.
 */
#include "comm_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIRECT_STEP 0xffffu /* the step field of one-step algorithm messages */

static uint32_t data_tag(int coll, int dt, uint32_t step)
{
    return (uint32_t)coll | ((uint32_t)dt << 8) | (step << 16);
}

static vkg_status finish(vkg_comm_t *c, vkg_status st)
{
    return st < 0 ? vkg__comm_fail(c, st, 1) : st;
}

/* Check a one-step message: right collective, right size. Closes the body on failure. */
static vkg_status check_direct(const char *what, vkg_inmsg *m, uint32_t tag, size_t bytes)
{
    vkg_status st = VKG_OK;
    if (m->h.tag != tag)
        st = VKG_FAIL(VKG_ERR_PROTOCOL,
                      "%s: rank %u sent data of a %s (tag 0x%x, expected 0x%x): ranks called "
                      "different collectives or disagree on the algorithm thresholds",
                      what, (unsigned)m->h.sender, vkg__coll_name((int)(m->h.tag & 0xff)),
                      (unsigned)m->h.tag, (unsigned)tag);
    else if (m->h.bytes != bytes)
        st = VKG_FAIL(VKG_ERR_PROTOCOL, "%s: rank %u sent %llu bytes, expected %zu", what,
                      (unsigned)m->h.sender, (unsigned long long)m->h.bytes, bytes);
    if (st < 0)
        zmq_msg_close(&m->body);
    return st;
}

/* Send `bytes` of buf to every peer and receive one message from each into msgs[q]. */
static vkg_status exchange_all(vkg_comm_t *c, const char *what, uint32_t tag, const void *buf,
                               size_t bytes, vkg_inmsg *msgs, int *have)
{
    vkg_wire_hdr h;
    vkg__hdr_init(c, &h, VKG_W_DATA);
    h.seq = c->seq;
    h.tag = tag;
    for (int k = 1; k < c->size; k++) /* start with the next rank: spreads the load */
        VKG_TRY(vkg__send(c, (c->rank + k) % c->size, &h, buf, bytes, vkg__use_zc(c, bytes)));
    for (int k = 1; k < c->size; k++) {
        int missing = -1;
        for (int q = 0; q < c->size && missing < 0; q++)
            if (q != c->rank && !have[q])
                missing = q;
        vkg_expect ex = {.kind = VKG_W_DATA,
                         .sender = -1,
                         .seq = c->seq,
                         .all_peers = 1,
                         .waiting_on = missing,
                         .what = what};
        vkg_inmsg m;
        int ev;
        VKG_TRY(vkg__comm_wait(c, &ex, &m, &ev));
        int q = (int)m.h.sender;
        if (have[q]) {
            zmq_msg_close(&m.body);
            return VKG_FAIL(VKG_ERR_PROTOCOL, "%s: rank %d sent twice", what, q);
        }
        VKG_TRY(check_direct(what, &m, tag, bytes));
        msgs[q] = m;
        have[q] = 1;
    }
    return vkg__drain(c, what, -1);
}

static vkg_status direct_allreduce(vkg_comm_t *c, const void *send, void *recv, size_t count,
                                   vkg_comm_dtype dt, vkg_comm_op op)
{
    char what[48];
    snprintf(what, sizeof what, "allreduce #%llu", (unsigned long long)c->seq);
    size_t bytes = count * vkg_comm_dtype_size(dt);
    vkg_inmsg *msgs = calloc((size_t)c->size, sizeof *msgs);
    int *have = calloc((size_t)c->size, sizeof *have);
    const void **srcs = calloc((size_t)c->size, sizeof *srcs);
    vkg_status st = VKG_OK;
    VKG_CHECK_GOTO(st, msgs && have && srcs, VKG_ERR_NOMEM, out, "out of memory");
    st = exchange_all(c, what, data_tag(VKG_C_ALLREDUCE, dt, DIRECT_STEP), send, bytes, msgs, have);
    if (st < 0)
        goto out;
    for (int q = 0; q < c->size; q++)
        srcs[q] = q == c->rank ? send : zmq_msg_data(&msgs[q].body);
    vkg__reduce_ordered(recv, srcs, c->size, count, dt, op == VKG_COMM_AVG);
out:
    for (int q = 0; have && msgs && q < c->size; q++)
        if (have[q])
            zmq_msg_close(&msgs[q].body);
    free(msgs);
    free(have);
    free(srcs);
    return st;
}

static int overlaps(const void *a, size_t na, const void *b, size_t nb)
{
    const char *x = a, *y = b;
    return na && nb && x < y + nb && y < x + na;
}

vkg_status vkg_comm_allreduce(vkg_comm_t *c, const void *send, void *recv, size_t count,
                              vkg_comm_dtype dtype, vkg_comm_op op)
{
    VKG_TRY(vkg__comm_usable(c));
    VKG_CHECK(dtype == VKG_COMM_F32 || dtype == VKG_COMM_BF16 || dtype == VKG_COMM_F16,
              VKG_ERR_INVALID_ARG, "allreduce: dtype %d is not f32, bf16 or f16", (int)dtype);
    VKG_CHECK(op == VKG_COMM_SUM || op == VKG_COMM_AVG, VKG_ERR_INVALID_ARG,
              "allreduce: op %d is not sum or avg", (int)op);
    size_t es = vkg_comm_dtype_size(dtype);
    VKG_CHECK(count <= ((size_t)1 << 40), VKG_ERR_INVALID_ARG, "allreduce: count %zu too large",
              count);
    VKG_CHECK(count == 0 || (send && recv), VKG_ERR_INVALID_ARG, "allreduce: NULL buffer");
    VKG_CHECK(((uintptr_t)send % es) == 0 && ((uintptr_t)recv % es) == 0, VKG_ERR_INVALID_ARG,
              "allreduce: buffers must be aligned to the element size (%zu)", es);
    VKG_CHECK(send == recv || !overlaps(send, count * es, recv, count * es), VKG_ERR_INVALID_ARG,
              "allreduce: send and recv overlap without being the same buffer");
    c->seq++;
    if (count == 0)
        return VKG_OK;
    if (c->size == 1) {
        if (send != recv)
            memcpy(recv, send, count * es);
        return VKG_OK;
    }
    vkg_status st;
    if (c->hier)
        st = vkg__hier_allreduce(c, send, recv, count, dtype, op);
    else if (c->shm)
        st = vkg__shm_allreduce(c, send, recv, count, dtype, op);
    else if (count * es <= c->small_bytes)
        st = direct_allreduce(c, send, recv, count, dtype, op);
    else if (c->size > 2 && c->size < c->ring_min_ranks) /* for 2 ranks both are the same */
        st = vkg__a2a_allreduce(c, send, recv, count, dtype, op);
    else
        st = vkg__ring_allreduce(c, send, recv, count, dtype, op);
    return finish(c, st);
}

/* Chunks [bounds[q], bounds[q + 1]) of count elements of es bytes: the same list on every rank
 * (a peer that disagrees is caught by the sizes of its segments). */
static vkg_status check_chunks(const vkg_comm_t *c, const char *what, const void *buf, size_t count,
                               size_t es, const size_t *bounds)
{
    VKG_CHECK(bounds, VKG_ERR_INVALID_ARG, "%s: no chunk bounds", what);
    VKG_CHECK(count == 0 || buf, VKG_ERR_INVALID_ARG, "%s: NULL buffer", what);
    VKG_CHECK(count <= ((size_t)1 << 40), VKG_ERR_INVALID_ARG, "%s: count %zu too large", what,
              count);
    VKG_CHECK(((uintptr_t)buf % es) == 0, VKG_ERR_INVALID_ARG,
              "%s: the buffer must be aligned to the element size (%zu bytes)", what, es);
    VKG_CHECK(bounds[0] == 0 && bounds[c->size] == count, VKG_ERR_INVALID_ARG,
              "%s: the chunks span [%zu, %zu), not the %zu elements", what, bounds[0],
              bounds[c->size], count);
    for (int q = 0; q < c->size; q++)
        VKG_CHECK(bounds[q] <= bounds[q + 1], VKG_ERR_INVALID_ARG,
                  "%s: chunk %d ends at %zu before it starts at %zu", what, q, bounds[q + 1],
                  bounds[q]);
    return VKG_OK;
}

vkg_status vkg_comm_reduce_scatter(vkg_comm_t *c, float *buf, size_t count, const size_t *bounds)
{
    return vkg_comm_reduce_scatter_dtype(c, buf, count, bounds, VKG_COMM_F32);
}

vkg_status vkg_comm_reduce_scatter_dtype(vkg_comm_t *c, void *buf, size_t count,
                                         const size_t *bounds, vkg_comm_dtype dtype)
{
    VKG_TRY(vkg__comm_usable(c));
    VKG_CHECK(dtype == VKG_COMM_F32 || dtype == VKG_COMM_BF16, VKG_ERR_INVALID_ARG,
              "reduce-scatter: dtype %d is not f32 or bf16 (f16 and others have no "
              "reduce-scatter)",
              (int)dtype);
    size_t es = vkg_comm_dtype_size(dtype);
    VKG_TRY(check_chunks(c, "reduce-scatter", buf, count, es, bounds));
    c->seq++;
    if (c->size == 1 || count == 0)
        return VKG_OK;
    /* Across hosts: the two-level allreduce itself, in place, so that every chunk has its bits
     * (the order of additions of two levels cannot be had by sending chunks straight to their
     * owners); the bytes between hosts: vkg_comm_reduce_scatter's contract. */
    if (c->hier)
        return finish(c, vkg__hier_allreduce(c, buf, buf, count, dtype, VKG_COMM_SUM));
    /* The order of additions of vkg_comm_allreduce for this count and dtype: rank order (one
     * step, or straight to the owners), or the ring's. */
    int ring = count * es > c->small_bytes && (c->size == 2 || c->size >= c->ring_min_ranks);
    if (c->shm && !c->hier)
        return finish(c, vkg__shm_reduce_scatter(c, buf, count, bounds, dtype, ring));
    return finish(c, vkg__a2a_scatter(c, buf, count, bounds, dtype, 1, ring));
}

vkg_status vkg_comm_allgatherv(vkg_comm_t *c, float *buf, size_t count, const size_t *bounds)
{
    VKG_TRY(vkg__comm_usable(c));
    VKG_TRY(check_chunks(c, "allgatherv", buf, count, 4, bounds));
    c->seq++;
    if (c->size == 1 || count == 0)
        return VKG_OK;
    if (c->shm && !c->hier)
        return finish(c, vkg__shm_allgatherv(c, "allgatherv", buf, count, 4, bounds));
    return finish(c, vkg__a2a_scatter(c, buf, count, bounds, VKG_COMM_F32, 0, 0));
}

static vkg_status direct_broadcast(vkg_comm_t *c, void *buf, size_t bytes, int root)
{
    char what[48];
    snprintf(what, sizeof what, "broadcast #%llu", (unsigned long long)c->seq);
    uint32_t tag = data_tag(VKG_C_BCAST, 0, DIRECT_STEP);
    if (c->rank == root) {
        vkg_wire_hdr h;
        vkg__hdr_init(c, &h, VKG_W_DATA);
        h.seq = c->seq;
        h.tag = tag;
        for (int k = 1; k < c->size; k++)
            VKG_TRY(vkg__send(c, (root + k) % c->size, &h, buf, bytes, vkg__use_zc(c, bytes)));
        return vkg__drain(c, what, -1);
    }
    vkg_expect ex = {.kind = VKG_W_DATA,
                     .sender = root,
                     .seq = c->seq,
                     .all_peers = 1,
                     .waiting_on = root,
                     .what = what};
    vkg_inmsg m;
    int ev;
    VKG_TRY(vkg__comm_wait(c, &ex, &m, &ev));
    VKG_TRY(check_direct(what, &m, tag, bytes));
    memcpy(buf, zmq_msg_data(&m.body), bytes);
    zmq_msg_close(&m.body);
    return VKG_OK;
}

vkg_status vkg_comm_broadcast(vkg_comm_t *c, void *buf, size_t bytes, int root)
{
    VKG_TRY(vkg__comm_usable(c));
    VKG_CHECK(root >= 0 && root < c->size, VKG_ERR_INVALID_ARG,
              "broadcast: root %d out of range [0, %d)", root, c->size);
    VKG_CHECK(bytes == 0 || buf, VKG_ERR_INVALID_ARG, "broadcast: NULL buffer");
    c->seq++;
    if (c->size == 1 || bytes == 0)
        return VKG_OK;
    vkg_status st = c->hier                   ? vkg__hier_broadcast(c, buf, bytes, root)
                    : c->shm                  ? vkg__shm_broadcast(c, buf, bytes, root)
                    : bytes <= c->small_bytes ? direct_broadcast(c, buf, bytes, root)
                                              : vkg__chain_broadcast(c, buf, bytes, root);
    return finish(c, st);
}

static vkg_status direct_allgather(vkg_comm_t *c, const void *send, size_t bytes, void *recv)
{
    char what[48];
    snprintf(what, sizeof what, "allgather #%llu", (unsigned long long)c->seq);
    uint8_t *out = recv;
    vkg_inmsg *msgs = calloc((size_t)c->size, sizeof *msgs);
    int *have = calloc((size_t)c->size, sizeof *have);
    vkg_status st = VKG_OK;
    VKG_CHECK_GOTO(st, msgs && have, VKG_ERR_NOMEM, out, "out of memory");
    st = exchange_all(c, what, data_tag(VKG_C_ALLGATHER, 0, DIRECT_STEP), send, bytes, msgs, have);
    if (st < 0)
        goto out;
    if (send != out + (size_t)c->rank * bytes)
        memcpy(out + (size_t)c->rank * bytes, send, bytes);
    for (int q = 0; q < c->size; q++)
        if (q != c->rank)
            memcpy(out + (size_t)q * bytes, zmq_msg_data(&msgs[q].body), bytes);
out:
    for (int q = 0; have && msgs && q < c->size; q++)
        if (have[q])
            zmq_msg_close(&msgs[q].body);
    free(msgs);
    free(have);
    return st;
}

vkg_status vkg_comm_allgather(vkg_comm_t *c, const void *send, size_t bytes, void *recv)
{
    VKG_TRY(vkg__comm_usable(c));
    VKG_CHECK(bytes == 0 || (send && recv), VKG_ERR_INVALID_ARG, "allgather: NULL buffer");
    uint8_t *own = (uint8_t *)recv + (size_t)c->rank * bytes;
    VKG_CHECK(send == own || !overlaps(send, bytes, recv, bytes * (size_t)c->size),
              VKG_ERR_INVALID_ARG, "allgather: send overlaps recv without being this rank's block");
    c->seq++;
    if (bytes == 0)
        return VKG_OK;
    if (c->size == 1) {
        if (send != recv)
            memcpy(recv, send, bytes);
        return VKG_OK;
    }
    vkg_status st = c->hier  ? vkg__hier_allgather(c, send, bytes, recv)
                    : c->shm ? vkg__shm_allgather(c, send, bytes, recv)
                    : bytes * (size_t)(c->size - 1) <= c->small_bytes
                        ? direct_allgather(c, send, bytes, recv)
                        : vkg__ring_allgather(c, send, bytes, recv);
    return finish(c, st);
}

vkg_status vkg__barrier_impl(vkg_comm_t *c)
{
    char what[48];
    snprintf(what, sizeof what, "barrier #%llu", (unsigned long long)c->seq);
    uint32_t round = 0;
    for (int d = 1; d < c->size; d <<= 1, round++) {
        int to = (c->rank + d) % c->size, from = (c->rank - d + c->size) % c->size;
        vkg_wire_hdr h;
        vkg__hdr_init(c, &h, VKG_W_DATA);
        h.seq = c->seq;
        h.segment = round;
        h.tag = data_tag(VKG_C_BARRIER, 0, round);
        VKG_TRY(vkg__send(c, to, &h, NULL, 0, 0));
        vkg_expect ex = {.kind = VKG_W_DATA,
                         .sender = from,
                         .seq = c->seq,
                         .all_peers = 1,
                         .waiting_on = from,
                         .what = what};
        vkg_inmsg m;
        int ev;
        VKG_TRY(vkg__comm_wait(c, &ex, &m, &ev));
        zmq_msg_close(&m.body);
        VKG_CHECK(m.h.tag == h.tag && m.h.segment == round && m.h.bytes == 0, VKG_ERR_PROTOCOL,
                  "%s: rank %d sent tag 0x%x segment %u, expected barrier round %u", what, from,
                  (unsigned)m.h.tag, (unsigned)m.h.segment, (unsigned)round);
    }
    return VKG_OK;
}

vkg_status vkg_comm_barrier(vkg_comm_t *c)
{
    VKG_TRY(vkg__comm_usable(c));
    c->seq++;
    if (c->size == 1)
        return VKG_OK;
    return finish(c, vkg__barrier_impl(c));
}

/* Point-to-point messages travel in pieces of at most seg_bytes (data sockets refuse larger
 * frames); each piece is a P2P message of its own (the per-peer count numbers them), the last
 * one flagged, so a receiver expecting another length notices. */
#define P2P_LAST 1u

vkg_status vkg_comm_send(vkg_comm_t *c, int peer, uint32_t tag, const void *buf, size_t bytes)
{
    VKG_TRY(vkg__comm_usable(c));
    VKG_CHECK(peer >= 0 && peer < c->size && peer != c->rank, VKG_ERR_INVALID_ARG,
              "send: peer %d is not another rank of [0, %d) (this is rank %d)", peer, c->size,
              c->rank);
    VKG_CHECK(bytes == 0 || buf, VKG_ERR_INVALID_ARG, "send: NULL buffer");
    char what[64];
    snprintf(what, sizeof what, "send to rank %d (tag %u)", peer, (unsigned)tag);
    vkg_status st = VKG_OK;
    int any_zc = 0;
    size_t off = 0;
    do {
        size_t n = bytes - off < c->seg_bytes ? bytes - off : c->seg_bytes;
        vkg_wire_hdr h;
        vkg__hdr_init(c, &h, VKG_W_P2P);
        h.seq = c->peers[peer].p2p_sent++;
        h.tag = tag;
        h.flags = off + n == bytes ? P2P_LAST : 0;
        int zc = vkg__use_zc(c, n);
        any_zc |= zc;
        st = vkg__send(c, peer, &h, (const uint8_t *)buf + off, n, zc);
        off += n;
    } while (st == VKG_OK && off < bytes);
    if (st == VKG_OK && any_zc)
        st = vkg__drain(c, what, peer);
    return finish(c, st);
}

vkg_status vkg_comm_recv(vkg_comm_t *c, int peer, uint32_t tag, void *buf, size_t bytes)
{
    VKG_TRY(vkg__comm_usable(c));
    VKG_CHECK(peer >= 0 && peer < c->size && peer != c->rank, VKG_ERR_INVALID_ARG,
              "recv: peer %d is not another rank of [0, %d) (this is rank %d)", peer, c->size,
              c->rank);
    VKG_CHECK(bytes == 0 || buf, VKG_ERR_INVALID_ARG, "recv: NULL buffer");
    char what[64];
    snprintf(what, sizeof what, "recv from rank %d (tag %u)", peer, (unsigned)tag);
    vkg_expect ex = {
        .kind = VKG_W_P2P, .sender = peer, .tag = tag, .waiting_on = peer, .what = what};
    vkg_status st = VKG_OK;
    size_t off = 0;
    do {
        size_t n = bytes - off < c->seg_bytes ? bytes - off : c->seg_bytes;
        int last = off + n == bytes;
        vkg_inmsg m;
        int ev;
        st = vkg__comm_wait(c, &ex, &m, &ev);
        if (st < 0)
            break;
        if (m.h.bytes != n || !(m.h.flags & P2P_LAST) != !last)
            st = VKG_FAIL(
                VKG_ERR_PROTOCOL,
                "%s: the message is %s than the %zu bytes expected (piece at byte %zu "
                "has %llu bytes%s)",
                what, (m.h.bytes < n || ((m.h.flags & P2P_LAST) && !last)) ? "shorter" : "longer",
                bytes, off, (unsigned long long)m.h.bytes,
                (m.h.flags & P2P_LAST) ? " and is the last" : "");
        else if (n)
            memcpy((uint8_t *)buf + off, zmq_msg_data(&m.body), n);
        zmq_msg_close(&m.body);
        off += n;
    } while (st == VKG_OK && off < bytes);
    return finish(c, st);
}
