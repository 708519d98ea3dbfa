/* Pipelined ring and chain collectives for large payloads: ring allreduce (reduce-scatter then
 * allgather), ring allgather(v) and chain broadcast, all run by one engine, over the whole
 * communicator or along a list of its ranks (the hosts' ranks of hier.c and hier_copy.c).
 *
 * The engine streams a list of "send steps" to the next rank and a list of "recv steps" from the
 * previous one. Each step is a contiguous run of elements cut into segments; segment k of send
 * step i may leave once segment k of recv step i + dep has been processed, so the wire, the
 * reduction and the forwarding overlap. Flow is bounded by credits: at most `window` segments may
 * be unconsumed on a link, and the receiver returns credit every window/2 segments. Receiving
 * never waits for sending (a deferred send is just an index into the caller's buffer), so the ring
 * cannot deadlock on its own window.
 *
 * Payloads leave zero-copy from the caller's buffers (tcp/ipc); the engine drains them before
 * returning. Writes never touch a region that is still queued: a chunk sent in reduce-scatter is
 * only overwritten in allgather after its final sum came back around the ring, which requires
 * that the earlier send was read in full. Every chunk's final value is computed by one rank and
 * copied by the others, so all ranks hold identical bits. For bf16/fp16 the first reduce-scatter
 * hop carries the rank's own 16-bit input (widening is exact, so the receiver widens it), later
 * hops carry fp32 partial sums (rounded once, at the owner); the allgather carries 16-bit values.
 * Each recv step knows its element size on the wire, so a message of another size is refused.
 */
#include "comm_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum send_mode { SRC_ZC, SRC_HELD };
enum recv_mode { ACT_REDUCE, ACT_FINAL, ACT_COPY, ACT_REDUCE16, ACT_FINAL16 };

typedef struct ring_step {
    size_t len;         /* elements in this step */
    size_t nseg;        /* ceil(len / seg) */
    size_t wire_es;     /* bytes per element on the wire */
    const uint8_t *src; /* send: first element (buffer element size es) */
    uint8_t *dst;       /* recv: first destination element */
    const uint8_t *own; /* recv reductions: this rank's input for the same elements */
    int mode;
} ring_step;

typedef struct ring {
    vkg_comm_t *c;
    int coll;
    vkg_comm_dtype dt;
    int avg_n;  /* divide final sums by this (0 = sum) */
    size_t es;  /* bytes per element in the caller's buffers */
    size_t seg; /* elements per segment */
    int prev, next;
    int nsend, nrecv, dep;
    ring_step *send, *recv;
    zmq_msg_t *held; /* [nsend * maxseg]: 16-bit partial sums waiting for their send */
    size_t maxseg;
    char what[48];
} ring;

static size_t seg_len(const ring *r, const ring_step *s, size_t k)
{
    size_t e0 = k * r->seg;
    return s->len - e0 < r->seg ? s->len - e0 : r->seg;
}

static void skip_empty(const ring_step *steps, int n, int *i, size_t *k)
{
    while (*i < n && *k >= steps[*i].nseg) {
        (*i)++;
        *k = 0;
    }
}

static vkg_status ring_send(ring *r, int i, size_t k, uint32_t index)
{
    vkg_comm_t *c = r->c;
    const ring_step *s = &r->send[i];
    size_t e0 = k * r->seg, n = seg_len(r, s, k);
    vkg_wire_hdr h;
    vkg__hdr_init(c, &h, VKG_W_DATA);
    h.seq = c->seq;
    h.segment = index;
    h.tag = (uint32_t)r->coll | ((uint32_t)r->dt << 8) | ((uint32_t)i << 16);
    if (s->mode == SRC_HELD)
        return vkg__send_msg(c, r->next, &h, &r->held[(size_t)i * r->maxseg + k]);
    size_t bytes = n * s->wire_es;
    int zc = vkg__use_zc(c, bytes);
    return vkg__send(c, r->next, &h, s->src + e0 * r->es, bytes, zc);
}

/* Validate message `index` (segment k of recv step j) and apply it. Consumes m->body. */
static vkg_status ring_recv(ring *r, int j, size_t k, uint32_t index, vkg_inmsg *m)
{
    const ring_step *s = &r->recv[j];
    size_t e0 = k * r->seg, n = seg_len(r, s, k);
    const vkg_wire_hdr *h = &m->h;
    uint32_t tag = (uint32_t)r->coll | ((uint32_t)r->dt << 8) | ((uint32_t)j << 16);
    vkg_status st = VKG_OK;
    if ((h->tag & 0xff) != (uint32_t)r->coll)
        st = VKG_FAIL(VKG_ERR_PROTOCOL,
                      "%s: rank %u sent data of a %s as collective #%llu (ranks called different "
                      "collectives)",
                      r->what, (unsigned)h->sender, vkg__coll_name((int)(h->tag & 0xff)),
                      (unsigned long long)h->seq);
    else if (h->segment != index || h->tag != tag)
        st = VKG_FAIL(VKG_ERR_PROTOCOL,
                      "%s: rank %u sent message #%u (tag 0x%x), expected #%u (tag 0x%x)", r->what,
                      (unsigned)h->sender, (unsigned)h->segment, (unsigned)h->tag, (unsigned)index,
                      (unsigned)tag);
    else if (h->bytes != n * s->wire_es)
        st = VKG_FAIL(VKG_ERR_PROTOCOL,
                      "%s: rank %u sent %llu bytes for message #%u, expected %zu (counts or "
                      "dtypes differ between ranks)",
                      r->what, (unsigned)h->sender, (unsigned long long)h->bytes, (unsigned)index,
                      n * s->wire_es);
    if (st < 0) {
        zmq_msg_close(&m->body);
        return st;
    }
    void *data = zmq_msg_data(&m->body);
    switch (s->mode) {
    case ACT_REDUCE:
    case ACT_FINAL:
        vkg__add_f32((float *)(s->dst + e0 * 4), data, (const float *)(s->own + e0 * 4), n,
                     s->mode == ACT_FINAL ? r->avg_n : 0);
        break;
    case ACT_COPY:
        memcpy(s->dst + e0 * r->es, data, n * s->wire_es);
        break;
    case ACT_FINAL16:
        vkg__final_16((uint16_t *)(s->dst + e0 * 2), data, s->wire_es,
                      (const uint16_t *)(s->own + e0 * 2), n, r->dt, r->avg_n);
        break;
    case ACT_REDUCE16: {
        zmq_msg_t *slot = &r->held[(size_t)(j + 1) * r->maxseg + k];
        const uint16_t *own = (const uint16_t *)(s->own + e0 * 2);
        int wide_in = s->wire_es == 4;
        if (wide_in && ((uintptr_t)data & 3u) == 0) { /* fp32 partial sums: add in place */
            zmq_msg_move(slot, &m->body);
            zmq_msg_close(&m->body);
            vkg__acc_16(zmq_msg_data(slot), own, n, r->dt);
            return VKG_OK;
        }
        /* 16-bit input (first hop), or a small payload that is unaligned: into a new fp32 slot */
        if (zmq_msg_init_size(slot, n * 4) < 0) {
            zmq_msg_init(slot);
            zmq_msg_close(&m->body);
            return VKG_FAIL(VKG_ERR_NOMEM, "out of memory (%zu bytes)", n * 4);
        }
        if (wide_in) {
            memcpy(zmq_msg_data(slot), data, n * 4);
            vkg__acc_16(zmq_msg_data(slot), own, n, r->dt);
        } else {
            vkg__sum_16(zmq_msg_data(slot), data, own, n, r->dt);
        }
        zmq_msg_close(&m->body);
        return VKG_OK;
    }
    }
    zmq_msg_close(&m->body);
    return VKG_OK;
}

static vkg_status send_credit(ring *r, uint32_t consumed)
{
    vkg_wire_hdr h;
    vkg__hdr_init(r->c, &h, VKG_W_CREDIT);
    h.seq = r->c->seq;
    h.segment = consumed;
    return vkg__send(r->c, r->prev, &h, NULL, 0, 0);
}

static vkg_status ring_run(ring *r)
{
    vkg_comm_t *c = r->c;
    uint64_t window = (uint64_t)c->window;
    uint32_t sent = 0, consumed = 0, granted = 0;
    int si = 0, ri = 0;
    size_t sk = 0, rk = 0;
    vkg_status st = VKG_OK;
    c->credit = 0;
    c->credit_moved = 0;
    c->credit_from = r->next;
    skip_empty(r->send, r->nsend, &si, &sk);
    skip_empty(r->recv, r->nrecv, &ri, &rk);
    for (;;) {
        while (si < r->nsend && sent < c->credit + window) {
            int d = si + r->dep;
            if (d >= 0 && !(ri > d || (ri == d && rk > sk)))
                break;
            st = ring_send(r, si, sk, sent);
            if (st < 0)
                goto out;
            sent++;
            sk++;
            skip_empty(r->send, r->nsend, &si, &sk);
        }
        if (si >= r->nsend && ri >= r->nrecv)
            break;
        vkg_expect ex = {.kind = ri < r->nrecv ? VKG_W_DATA : 0,
                         .sender = r->prev,
                         .seq = c->seq,
                         .credit = si < r->nsend,
                         .all_peers = 1,
                         .waiting_on = ri < r->nrecv ? r->prev : r->next,
                         .what = r->what};
        vkg_inmsg m;
        int ev = 0;
        st = vkg__comm_wait(c, &ex, &m, &ev);
        if (st < 0)
            goto out;
        if (ev != VKG_EV_MSG)
            continue;
        st = ring_recv(r, ri, rk, consumed, &m);
        if (st < 0)
            goto out;
        consumed++;
        rk++;
        skip_empty(r->recv, r->nrecv, &ri, &rk);
        if (ri < r->nrecv && consumed - granted >= window / 2) {
            st = send_credit(r, consumed);
            if (st < 0)
                goto out;
            granted = consumed;
        }
    }
    st = vkg__drain(c, r->what, r->next);
out:
    c->credit_from = -1;
    return st;
}

static void set_step(ring *r, ring_step *s, size_t len, size_t wire_es, int mode)
{
    s->len = len;
    s->nseg = (len + r->seg - 1) / r->seg;
    s->wire_es = wire_es;
    s->mode = mode;
}

static vkg_status ring_alloc(ring *r, vkg_comm_t *c, int nsteps, int coll, const char *name)
{
    memset(r, 0, sizeof *r);
    r->c = c;
    r->coll = coll;
    r->prev = (c->rank + c->size - 1) % c->size;
    r->next = (c->rank + 1) % c->size;
    r->nsend = r->nrecv = nsteps;
    r->dep = -1;
    snprintf(r->what, sizeof r->what, "%s #%llu", name, (unsigned long long)c->seq);
    r->send = calloc((size_t)nsteps + 1, sizeof *r->send);
    r->recv = calloc((size_t)nsteps + 1, sizeof *r->recv);
    if (!r->send || !r->recv) {
        free(r->send);
        free(r->recv);
        return VKG_FAIL(VKG_ERR_NOMEM, "out of memory planning %s", r->what);
    }
    return VKG_OK;
}

static void ring_free(ring *r)
{
    if (r->held) {
        for (size_t i = 0; i < (size_t)r->nsend * r->maxseg; i++)
            zmq_msg_close(&r->held[i]);
        free(r->held);
    }
    free(r->send);
    free(r->recv);
}

/* Link r along members (NULL: ring_alloc linked the whole communicator). */
static void link_members(ring *r, const int *members, int n, int me)
{
    if (members) {
        r->prev = members[(me + n - 1) % n];
        r->next = members[(me + 1) % n];
    }
}

size_t vkg__chunk_start(size_t count, int chunk, int n)
{
    size_t q = count / (size_t)n, rem = count % (size_t)n;
    return q * (size_t)chunk + rem * (size_t)chunk / (size_t)n;
}

vkg_status vkg__ring_allreduce(vkg_comm_t *c, const void *send, void *recv, size_t count,
                               vkg_comm_dtype dt, vkg_comm_op op)
{
    return vkg__ring_allreduce_among(c, NULL, c->size, c->rank, send, recv, count, dt, op);
}

vkg_status vkg__ring_allreduce_among(vkg_comm_t *c, const int *members, int n, int me,
                                     const void *send, void *recv, size_t count, vkg_comm_dtype dt,
                                     vkg_comm_op op)
{
    ring r;
    VKG_TRY(ring_alloc(&r, c, 2 * (n - 1), VKG_C_ALLREDUCE, "allreduce"));
    link_members(&r, members, n, me);
    r.dt = dt;
    r.es = vkg_comm_dtype_size(dt);
    r.avg_n = op == VKG_COMM_AVG ? n : 0;
    r.seg = c->seg_bytes / 4 ? c->seg_bytes / 4 : 1;
    int wide = dt != VKG_COMM_F32;
    const uint8_t *in = send;
    uint8_t *out = recv;
    for (int i = 0; i < n - 1; i++) { /* reduce-scatter */
        int cs = ((me - i) % n + n) % n, cr = ((me - i - 1) % n + n) % n;
        size_t off_s = vkg__chunk_start(count, cs, n), off_r = vkg__chunk_start(count, cr, n);
        ring_step *s = &r.send[i], *q = &r.recv[i];
        size_t wire_es = i == 0 ? r.es : 4; /* 16-bit input leaves as is, partial sums as fp32 */
        set_step(&r, s, vkg__chunk_start(count, cs + 1, n) - off_s, wire_es,
                 wide && i > 0 ? SRC_HELD : SRC_ZC);
        s->src = (i == 0 ? in : out) + off_s * r.es;
        int last = i == n - 2;
        set_step(&r, q, vkg__chunk_start(count, cr + 1, n) - off_r, wire_es,
                 wide ? (last ? ACT_FINAL16 : ACT_REDUCE16) : (last ? ACT_FINAL : ACT_REDUCE));
        q->dst = out + off_r * r.es;
        q->own = in + off_r * r.es;
    }
    for (int t = 0; t < n - 1; t++) { /* allgather */
        int cs = ((me + 1 - t) % n + n) % n, cr = ((me - t) % n + n) % n;
        size_t off_s = vkg__chunk_start(count, cs, n), off_r = vkg__chunk_start(count, cr, n);
        ring_step *s = &r.send[n - 1 + t], *q = &r.recv[n - 1 + t];
        set_step(&r, s, vkg__chunk_start(count, cs + 1, n) - off_s, r.es, SRC_ZC);
        s->src = out + off_s * r.es;
        set_step(&r, q, vkg__chunk_start(count, cr + 1, n) - off_r, r.es, ACT_COPY);
        q->dst = out + off_r * r.es;
    }
    vkg_status st = VKG_OK;
    if (wide && n > 2) {
        r.maxseg = (count / (size_t)n + 1 + r.seg - 1) / r.seg;
        r.held = calloc((size_t)r.nsend * r.maxseg, sizeof *r.held);
        if (!r.held) {
            st = VKG_FAIL(VKG_ERR_NOMEM, "out of memory planning %s", r.what);
            goto out;
        }
        for (size_t i = 0; i < (size_t)r.nsend * r.maxseg; i++)
            zmq_msg_init(&r.held[i]);
    }
    st = ring_run(&r);
out:
    ring_free(&r);
    return st;
}

vkg_status vkg__ring_allgather(vkg_comm_t *c, const void *send, size_t bytes, void *recv)
{
    int n = c->size, me = c->rank;
    uint8_t *out = recv;
    if (send != out + (size_t)me * bytes)
        memcpy(out + (size_t)me * bytes, send, bytes);
    size_t *off = malloc(((size_t)n + 1) * sizeof *off);
    VKG_CHECK(off != NULL, VKG_ERR_NOMEM, "allgather: out of memory");
    for (int k = 0; k <= n; k++)
        off[k] = (size_t)k * bytes;
    vkg_status st = vkg__ring_allgatherv_among(c, NULL, n, me, out, off);
    free(off);
    return st;
}

vkg_status vkg__ring_allgatherv_among(vkg_comm_t *c, const int *members, int n, int me,
                                      uint8_t *buf, const size_t *off)
{
    ring r;
    VKG_TRY(ring_alloc(&r, c, n - 1, VKG_C_ALLGATHER, "allgather"));
    link_members(&r, members, n, me);
    r.es = 1;
    r.seg = c->seg_bytes ? c->seg_bytes : 1;
    for (int t = 0; t < n - 1; t++) {
        int bs = ((me - t) % n + n) % n, br = ((me - t - 1) % n + n) % n;
        set_step(&r, &r.send[t], off[bs + 1] - off[bs], 1, SRC_ZC);
        r.send[t].src = buf + off[bs];
        set_step(&r, &r.recv[t], off[br + 1] - off[br], 1, ACT_COPY);
        r.recv[t].dst = buf + off[br];
    }
    vkg_status st = ring_run(&r);
    ring_free(&r);
    return st;
}

vkg_status vkg__chain_broadcast(vkg_comm_t *c, void *buf, size_t bytes, int root)
{
    int n = c->size;
    int *order = malloc((size_t)n * sizeof *order);
    VKG_CHECK(order != NULL, VKG_ERR_NOMEM, "broadcast: out of memory");
    for (int k = 0; k < n; k++)
        order[k] = (root + k) % n;
    vkg_status st = vkg__chain_broadcast_among(c, order, n, (c->rank - root + n) % n, buf, bytes);
    free(order);
    return st;
}

vkg_status vkg__chain_broadcast_among(vkg_comm_t *c, const int *members, int n, int me, void *buf,
                                      size_t bytes)
{
    ring r;
    VKG_TRY(ring_alloc(&r, c, 1, VKG_C_BCAST, "broadcast"));
    link_members(&r, members, n, me);
    r.es = 1;
    r.seg = c->seg_bytes ? c->seg_bytes : 1;
    r.nsend = me < n - 1 ? 1 : 0;
    r.nrecv = me > 0 ? 1 : 0;
    r.dep = me > 0 ? 0 : -1;
    set_step(&r, &r.send[0], bytes, 1, SRC_ZC);
    r.send[0].src = buf;
    set_step(&r, &r.recv[0], bytes, 1, ACT_COPY);
    r.recv[0].dst = buf;
    vkg_status st = ring_run(&r);
    ring_free(&r);
    return st;
}
