/* Allreduce as a direct reduce-scatter plus a direct allgather, streamed in segments, for small
 * worlds (a few ranks, where one connection per peer is cheap).
 *
 * Rank q owns chunk q (the ring's chunking). Every rank sends segment k of chunk q straight to q;
 * once q holds segment k from every peer it reduces the N inputs in rank order (identical bits on
 * every rank, 16-bit inputs widened and rounded once) and sends the result to every peer. Each
 * rank sends 2(N-1)/N of the buffer, as in the ring, but every segment crosses two hops instead
 * of 2(N-1): on oversubscribed cores the ring's chain of wakeups leaves CPUs idle.
 *
 * Flow control: a credit window per link, as in ring.c. A reduce-scatter segment counts as
 * consumed when it is reduced, an allgather segment on arrival. Deadlock-free: segments go out in
 * index order on every link and each link is throttled on its own, so the lowest unreduced
 * segment anywhere can always be sent.
 * Zero-copy safety: reduce-scatter sends read chunks this rank never writes before their sum
 * came back (which needs the send to have been read in full); allgather sends read this rank's
 * chunk after its final write.
 *
 * The same engine runs either phase alone over chunks the caller chooses (vkg_comm_reduce_scatter,
 * vkg_comm_allgatherv): a phase left out starts out complete. A reduce-scatter adds in the order
 * the allreduce of the same count and dtype would (see vkg__a2a_scatter), so that it leaves the
 * same bits; in bf16 its segments carry the 16-bit inputs, widened and summed in fp32 by the owner
 * and rounded once, as the allreduce's are.
 */
#include "comm_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEP_RS 0xfff0u
#define STEP_AG 0xfff1u

typedef struct a2a_peer {
    size_t off, len, nseg;            /* its chunk: what this rank sends it, and gets back */
    size_t rs_sent, ag_sent;          /* next segment index of each phase sent to it */
    size_t rs_recv, ag_recv;          /* next segment index of each phase expected from it */
    uint32_t sent, consumed, granted; /* messages on each direction of the link */
    zmq_msg_t *held;                  /* [own_nseg]: its reduce-scatter segments awaiting the sum */
} a2a_peer;

typedef struct a2a {
    vkg_comm_t *c;
    int coll; /* the tag's collective code */
    vkg_comm_dtype dt;
    vkg_comm_op op;
    size_t es, seg;
    size_t count; /* elements of the whole buffer */
    int ring;     /* add each element in the ring allreduce's order instead of rank order */
    const uint8_t *in;
    uint8_t *out;
    size_t own_off, own_len, own_nseg, reduced;
    a2a_peer *p;
    const void **srcs;
    char what[48];
} a2a;

static size_t seg_elems(const a2a *a, size_t len, size_t k)
{
    size_t e0 = k * a->seg;
    return len - e0 < a->seg ? len - e0 : a->seg;
}

static vkg_status post_one(a2a *a, int q, uint32_t step, size_t k, const uint8_t *src, size_t elems)
{
    vkg_comm_t *c = a->c;
    vkg_wire_hdr h;
    vkg__hdr_init(c, &h, VKG_W_DATA);
    h.seq = c->seq;
    h.segment = (uint32_t)k;
    h.tag = (uint32_t)a->coll | ((uint32_t)a->dt << 8) | (step << 16);
    size_t bytes = elems * a->es;
    int zc = vkg__use_zc(c, bytes);
    VKG_TRY(vkg__send(c, q, &h, src, bytes, zc));
    a->p[q].sent++;
    return VKG_OK;
}

/* Send to every peer what its window allows: this rank's sums first, then its contributions. */
static vkg_status post_sends(a2a *a)
{
    vkg_comm_t *c = a->c;
    uint64_t window = (uint64_t)c->window;
    for (int d = 1; d < c->size; d++) {
        int q = (c->rank + d) % c->size;
        a2a_peer *p = &a->p[q];
        while (p->sent < c->credits[q] + window) {
            if (p->ag_sent < a->reduced) {
                size_t k = p->ag_sent++;
                VKG_TRY(post_one(a, q, STEP_AG, k, a->out + (a->own_off + k * a->seg) * a->es,
                                 seg_elems(a, a->own_len, k)));
            } else if (p->rs_sent < p->nseg) {
                size_t k = p->rs_sent++;
                VKG_TRY(post_one(a, q, STEP_RS, k, a->in + (p->off + k * a->seg) * a->es,
                                 seg_elems(a, p->len, k)));
            } else {
                break;
            }
        }
    }
    return VKG_OK;
}

/* The ring allreduce's chunk of element e: the last chunk that starts at or before it. */
static int ring_chunk(const a2a *a, size_t e)
{
    int n = a->c->size;
    int k = (int)((uint64_t)e * (uint64_t)n / a->count);
    while (k > 0 && vkg__chunk_start(a->count, k, n) > e)
        k--;
    while (k + 1 < n && vkg__chunk_start(a->count, k + 1, n) <= e)
        k++;
    return k;
}

/* Reduce every own segment that every peer has sent: in rank order, or (ring) as the ring
 * allreduce adds chunk k's elements, from rank k's input on around the ring. */
static void reduce_ready(a2a *a)
{
    vkg_comm_t *c = a->c;
    int n = c->size;
    while (a->reduced < a->own_nseg) {
        size_t k = a->reduced;
        for (int q = 0; q < n; q++)
            if (q != c->rank && a->p[q].rs_recv <= k)
                return;
        size_t e0 = a->own_off + k * a->seg, m = seg_elems(a, a->own_len, k);
        for (size_t done = 0, len; done < m; done += len) {
            size_t e = e0 + done;
            int first = 0;
            len = m - done;
            if (a->ring) {
                first = ring_chunk(a, e);
                size_t end = vkg__chunk_start(a->count, first + 1, n);
                len = end - e < len ? end - e : len;
            }
            for (int j = 0; j < n; j++) {
                int q = (first + j) % n;
                a->srcs[j] = q == c->rank
                                 ? (const void *)(a->in + e * a->es)
                                 : (const void *)((const uint8_t *)zmq_msg_data(&a->p[q].held[k]) +
                                                  done * a->es);
            }
            vkg__reduce_ordered(a->out + e * a->es, a->srcs, n, len, a->dt, a->op == VKG_COMM_AVG);
        }
        for (int q = 0; q < n; q++) {
            if (q == c->rank)
                continue;
            zmq_msg_close(&a->p[q].held[k]);
            zmq_msg_init(&a->p[q].held[k]);
            a->p[q].consumed++;
        }
        a->reduced++;
    }
}

static vkg_status take(a2a *a, vkg_inmsg *m)
{
    int q = (int)m->h.sender;
    a2a_peer *p = &a->p[q];
    uint32_t step = m->h.tag >> 16, k = m->h.segment;
    uint32_t base = (uint32_t)a->coll | ((uint32_t)a->dt << 8);
    vkg_status st = VKG_OK;
    size_t want = 0;
    if ((m->h.tag & 0xffffu) != base || (step != STEP_RS && step != STEP_AG))
        st = VKG_FAIL(VKG_ERR_PROTOCOL,
                      "%s: rank %d sent tag 0x%x, expected an all-to-all %s segment (tag "
                      "0x%x): ranks called different collectives, dtypes or thresholds",
                      a->what, q, (unsigned)m->h.tag, vkg__coll_name(a->coll),
                      (unsigned)(base | (STEP_RS << 16)));
    else if (step == STEP_RS && (k != p->rs_recv || k >= a->own_nseg))
        st = VKG_FAIL(VKG_ERR_PROTOCOL, "%s: rank %d sent reduce-scatter segment %u, expected %zu",
                      a->what, q, (unsigned)k, p->rs_recv);
    else if (step == STEP_AG && (k != p->ag_recv || k >= p->nseg))
        st = VKG_FAIL(VKG_ERR_PROTOCOL, "%s: rank %d sent allgather segment %u, expected %zu",
                      a->what, q, (unsigned)k, p->ag_recv);
    else if (m->h.bytes != (want = seg_elems(a, step == STEP_RS ? a->own_len : p->len, k) * a->es))
        st = VKG_FAIL(VKG_ERR_PROTOCOL,
                      "%s: rank %d sent %llu bytes for segment %u, expected %zu (counts or dtypes "
                      "differ between ranks)",
                      a->what, q, (unsigned long long)m->h.bytes, (unsigned)k, want);
    if (st < 0) {
        zmq_msg_close(&m->body);
        return st;
    }
    if (step == STEP_AG) {
        memcpy(a->out + (p->off + (size_t)k * a->seg) * a->es, zmq_msg_data(&m->body), want);
        zmq_msg_close(&m->body);
        p->ag_recv++;
        p->consumed++;
        return VKG_OK;
    }
    zmq_msg_close(&p->held[k]);
    zmq_msg_init(&p->held[k]);
    zmq_msg_move(&p->held[k], &m->body);
    zmq_msg_close(&m->body);
    p->rs_recv++;
    reduce_ready(a);
    return VKG_OK;
}

static int finished(const a2a *a)
{
    if (a->reduced < a->own_nseg)
        return 0;
    for (int q = 0; q < a->c->size; q++) {
        const a2a_peer *p = &a->p[q];
        if (q != a->c->rank &&
            (p->ag_sent < a->own_nseg || p->rs_sent < p->nseg || p->ag_recv < p->nseg))
            return 0;
    }
    return 1;
}

/* Of the peers whose messages this rank still needs, the one heard from least recently: the one
 * to name on a timeout (a frozen rank goes quiet before the ranks that wait for it). */
static int laggard(const a2a *a)
{
    const vkg_comm_t *c = a->c;
    int pick = -1;
    for (int pass = 0; pass < 2 && pick < 0; pass++) {
        for (int q = 0; q < c->size; q++) {
            const a2a_peer *p = &a->p[q];
            int behind = pass == 0 ? p->rs_recv <= a->reduced && a->reduced < a->own_nseg
                                   : p->ag_recv < p->nseg;
            if (q != c->rank && behind &&
                (pick < 0 || c->peers[q].last_rx_ns < c->peers[pick].last_rx_ns))
                pick = q;
        }
    }
    return pick;
}

static vkg_status grant(a2a *a)
{
    vkg_comm_t *c = a->c;
    for (int q = 0; q < c->size; q++) {
        a2a_peer *p = &a->p[q];
        int more = p->rs_recv < a->own_nseg || p->ag_recv < p->nseg;
        if (q == c->rank || !more || p->consumed - p->granted < (uint32_t)c->window / 2)
            continue;
        vkg_wire_hdr h;
        vkg__hdr_init(c, &h, VKG_W_CREDIT);
        h.seq = c->seq;
        h.segment = p->consumed;
        VKG_TRY(vkg__send(c, q, &h, NULL, 0, 0));
        p->granted = p->consumed;
    }
    return VKG_OK;
}

static vkg_status run(a2a *a)
{
    vkg_comm_t *c = a->c;
    for (;;) {
        VKG_TRY(post_sends(a));
        if (finished(a))
            break;
        vkg_expect ex = {.kind = VKG_W_DATA,
                         .sender = -1,
                         .seq = c->seq,
                         .credit = 1,
                         .all_peers = 1,
                         .waiting_on = laggard(a),
                         .what = a->what};
        vkg_inmsg m;
        int ev = 0;
        VKG_TRY(vkg__comm_wait(c, &ex, &m, &ev));
        if (ev != VKG_EV_MSG)
            continue;
        VKG_TRY(take(a, &m));
        VKG_TRY(grant(a));
    }
    return vkg__drain(c, a->what, -1);
}

/* Plan and run the engine over a's buffers: chunk q of every rank is [bounds[q], bounds[q + 1])
 * (NULL: the ring's chunking), with the reduce-scatter (rs) and the allgather (ag) phases. */
static vkg_status a2a_run(a2a *a, const size_t *bounds, int rs, int ag, const char *name)
{
    vkg_comm_t *c = a->c;
    int n = c->size;
    a->seg = c->seg_bytes / a->es ? c->seg_bytes / a->es : 1;
    a->own_off = bounds ? bounds[c->rank] : vkg__chunk_start(a->count, c->rank, n);
    a->own_len =
        (bounds ? bounds[c->rank + 1] : vkg__chunk_start(a->count, c->rank + 1, n)) - a->own_off;
    a->own_nseg = (a->own_len + a->seg - 1) / a->seg;
    a->reduced = rs ? 0 : a->own_nseg; /* without a reduce-scatter this rank's chunk is final */
    snprintf(a->what, sizeof a->what, "%s #%llu", name, (unsigned long long)c->seq);
    vkg_status st = VKG_OK;
    a->p = calloc((size_t)n, sizeof *a->p);
    a->srcs = calloc((size_t)n, sizeof *a->srcs);
    VKG_CHECK_GOTO(st, a->p && a->srcs, VKG_ERR_NOMEM, out, "out of memory planning %s", a->what);
    for (int q = 0; q < n; q++) {
        a2a_peer *p = &a->p[q];
        p->off = bounds ? bounds[q] : vkg__chunk_start(a->count, q, n);
        p->len = (bounds ? bounds[q + 1] : vkg__chunk_start(a->count, q + 1, n)) - p->off;
        p->nseg = (p->len + a->seg - 1) / a->seg;
        if (!rs) /* nothing to send it or to expect from it for a reduction */
            p->rs_sent = p->nseg, p->rs_recv = a->own_nseg;
        if (!ag) /* nothing to send it or to expect from it for an allgather */
            p->ag_sent = a->own_nseg, p->ag_recv = p->nseg;
        if (q == c->rank || !a->own_nseg || !rs)
            continue;
        p->held = calloc(a->own_nseg, sizeof *p->held);
        VKG_CHECK_GOTO(st, p->held != NULL, VKG_ERR_NOMEM, out, "out of memory planning %s",
                       a->what);
        for (size_t k = 0; k < a->own_nseg; k++)
            zmq_msg_init(&p->held[k]);
    }
    memset(c->credits, 0, (size_t)n * sizeof *c->credits);
    c->credit_moved = 0;
    c->credit_from = VKG_CREDIT_ALL;
    st = run(a);
    c->credit_from = -1;
out:
    for (int q = 0; a->p && q < n; q++) {
        if (!a->p[q].held)
            continue;
        for (size_t k = 0; k < a->own_nseg; k++)
            zmq_msg_close(&a->p[q].held[k]);
        free(a->p[q].held);
    }
    free(a->p);
    free(a->srcs);
    return st;
}

vkg_status vkg__a2a_allreduce(vkg_comm_t *c, const void *send, void *recv, size_t count,
                              vkg_comm_dtype dt, vkg_comm_op op)
{
    a2a a;
    memset(&a, 0, sizeof a);
    a.c = c;
    a.coll = VKG_C_ALLREDUCE;
    a.dt = dt;
    a.op = op;
    a.es = vkg_comm_dtype_size(dt);
    a.count = count;
    a.in = send;
    a.out = recv;
    return a2a_run(&a, NULL, 1, 1, "allreduce");
}

vkg_status vkg__a2a_scatter(vkg_comm_t *c, void *buf, size_t count, const size_t *bounds,
                            vkg_comm_dtype dt, int reduce, int ring)
{
    a2a a;
    memset(&a, 0, sizeof a);
    a.c = c;
    a.coll = reduce ? VKG_C_RSCATTER : VKG_C_ALLGATHERV;
    a.dt = dt;
    a.op = VKG_COMM_SUM;
    a.es = vkg_comm_dtype_size(dt);
    a.count = count;
    a.ring = reduce && ring;
    a.in = (const uint8_t *)buf;
    a.out = (uint8_t *)buf;
    return a2a_run(&a, bounds, reduce, !reduce, reduce ? "reduce-scatter" : "allgatherv");
}
