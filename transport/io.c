/* Message I/O of a communicator: sending (copied or zero-copy), receiving with header validation,
 * the stash of messages that arrived before they were wanted, and the dispatch of each received
 * message (aborts, stall notices, credits, point-to-point sequence checks, stale data).
 * Not here: the wait loop, connection monitoring and failure handling (wait.c).
 */
#include "comm_internal.h"
#include "comm_testing.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os/clock.h"

int64_t vkg__now_ns(void)
{
    return (int64_t)vkg_os_now_ns();
}

void vkg__zc_free(void *data, void *hint)
{
    (void)data;
    vkg_guard *g = hint;
    long left = atomic_fetch_sub(&g->inflight, 1) - 1;
    if (left == 0 && atomic_load(&g->waiting))
        vkg_os_wake_signal(g->wake);
}

void vkg__hdr_init(const vkg_comm_t *c, vkg_wire_hdr *h, int kind)
{
    memset(h, 0, sizeof *h);
    h->magic = VKG_WIRE_MAGIC;
    h->version = VKG_WIRE_VERSION;
    h->kind = (uint8_t)kind;
    h->job_id = c->job_id;
    h->generation = c->generation;
    h->sender = (uint32_t)c->rank;
    memcpy(h->secret, c->secret, VKG_SECRET_BYTES);
}

/* ---- sending ---- */

static void routing_id(int peer, uint8_t rid[5])
{
    rid[0] = 'R';
    for (int i = 0; i < 4; i++)
        rid[1 + i] = (uint8_t)((uint32_t)peer >> (8 * i));
}

/* Returns 0 or the zmq errno. Takes over *body (closed on failure). Records no error message. */
int vkg__raw_send(vkg_comm_t *c, int peer, const vkg_wire_hdr *h, zmq_msg_t *body)
{
    uint8_t rid[5], hb[VKG_WIRE_HDR_BYTES];
    routing_id(peer, rid);
    vkg__wire_encode(h, hb);
    int err = 0;
    if (!c->tx)
        err = ENOTSOCK;
    else if (zmq_send(c->tx, rid, sizeof rid, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        err = zmq_errno();
    else if (zmq_send(c->tx, hb, sizeof hb, (body ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) < 0)
        err = zmq_errno();
    else if (body && zmq_msg_send(body, c->tx, ZMQ_DONTWAIT) < 0)
        err = zmq_errno();
    if (body && err)
        zmq_msg_close(body);
    else if (body)
        c->tx_bytes += h->bytes;
    return err;
}

uint64_t vkg__comm_tx_bytes(const vkg_comm_t *c)
{
    return c->tx_bytes;
}

static vkg_status send_error(vkg_comm_t *c, int peer, const vkg_wire_hdr *h, int err)
{
    if (err == EHOSTUNREACH)
        return vkg__explain_loss(
            c, VKG_FAIL(VKG_ERR_PEER,
                        "sending %s message to rank %d (%s): its connection is gone (the process "
                        "died, froze past its heartbeat or closed its communicator)",
                        vkg__wire_kind_name(h->kind), peer, c->peers[peer].endpoint));
    return VKG_FAIL(VKG_ERR_NETWORK, "sending %s message to rank %d (%s): %s",
                    vkg__wire_kind_name(h->kind), peer, c->peers[peer].endpoint, zmq_strerror(err));
}

vkg_status vkg__send_msg(vkg_comm_t *c, int peer, const vkg_wire_hdr *h, zmq_msg_t *body)
{
    vkg_wire_hdr hh = *h;
    hh.bytes = zmq_msg_size(body);
    int err = vkg__raw_send(c, peer, &hh, hh.bytes ? body : NULL);
    if (!hh.bytes)
        zmq_msg_close(body);
    return err ? send_error(c, peer, &hh, err) : VKG_OK;
}

vkg_status vkg__send(vkg_comm_t *c, int peer, const vkg_wire_hdr *h, const void *data, size_t bytes,
                     int zc)
{
    vkg_wire_hdr hh = *h;
    hh.bytes = bytes;
    if (!bytes) {
        int err = vkg__raw_send(c, peer, &hh, NULL);
        return err ? send_error(c, peer, &hh, err) : VKG_OK;
    }
    zmq_msg_t m;
    if (zc) {
        atomic_fetch_add(&c->guard->inflight, 1);
        if (zmq_msg_init_data(&m, (void *)data, bytes, vkg__zc_free, c->guard) < 0) {
            atomic_fetch_sub(&c->guard->inflight, 1);
            return VKG_FAIL(VKG_ERR_NOMEM, "zmq_msg_init_data(%zu bytes) failed", bytes);
        }
    } else {
        if (zmq_msg_init_size(&m, bytes) < 0)
            return VKG_FAIL(VKG_ERR_NOMEM, "out of memory for a %zu-byte message", bytes);
        memcpy(zmq_msg_data(&m), data, bytes);
    }
    int err = vkg__raw_send(c, peer, &hh, &m);
    return err ? send_error(c, peer, &hh, err) : VKG_OK;
}

/* ---- receiving and validation ---- */

static void drain_frames(void *sock)
{
    int more = 1;
    while (more) {
        zmq_msg_t f;
        zmq_msg_init(&f);
        if (zmq_msg_recv(&f, sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&f);
            return;
        }
        more = zmq_msg_more(&f);
        zmq_msg_close(&f);
    }
}

static vkg_status validate(const vkg_comm_t *c, const vkg_wire_hdr *h, size_t body_size,
                           int had_body)
{
    VKG_CHECK(h->magic == VKG_WIRE_MAGIC, VKG_ERR_PROTOCOL,
              "malformed message rejected: header magic 0x%08x, expected 0x%08x (not a vkgpt peer "
              "or a corrupted stream)",
              (unsigned)h->magic, (unsigned)VKG_WIRE_MAGIC);
    VKG_CHECK(h->version == VKG_WIRE_VERSION, VKG_ERR_PROTOCOL,
              "message claiming rank %u rejected: wire version %u, this build speaks %u",
              (unsigned)h->sender, (unsigned)h->version, (unsigned)VKG_WIRE_VERSION);
    VKG_CHECK(h->job_id == c->job_id, VKG_ERR_PROTOCOL,
              "message claiming rank %u rejected: it belongs to job %016llx, this is job %016llx",
              (unsigned)h->sender, (unsigned long long)h->job_id, (unsigned long long)c->job_id);
    VKG_CHECK(h->generation == c->generation, VKG_ERR_PROTOCOL,
              "stale message from rank %u rejected: generation %u, this communicator is "
              "generation %u",
              (unsigned)h->sender, (unsigned)h->generation, (unsigned)c->generation);
    VKG_CHECK(vkg__same_secret(h->secret, c->secret), VKG_ERR_PROTOCOL,
              "message claiming rank %u rejected: it does not carry this job's secret (it comes "
              "from a process that did not join this job's rendezvous)",
              (unsigned)h->sender);
    VKG_CHECK(h->sender < (uint32_t)c->size && h->sender != (uint32_t)c->rank, VKG_ERR_PROTOCOL,
              "message rejected: sender rank %u is not a peer (world size %d, this is rank %d)",
              (unsigned)h->sender, c->size, c->rank);
    VKG_CHECK(h->kind >= VKG_W_DATA && h->kind <= VKG_W_DATA_MAX, VKG_ERR_PROTOCOL,
              "message from rank %u rejected: kind %u (%s) is not valid on a data connection",
              (unsigned)h->sender, (unsigned)h->kind, vkg__wire_kind_name(h->kind));
    VKG_CHECK(h->bytes == body_size && had_body == (h->bytes > 0), VKG_ERR_PROTOCOL,
              "%s message from rank %u rejected: header says %llu payload bytes, %s %zu",
              vkg__wire_kind_name(h->kind), (unsigned)h->sender, (unsigned long long)h->bytes,
              had_body ? "payload frame has" : "no payload frame, so", body_size);
    return VKG_OK;
}

vkg_status vkg__check_frames(const vkg_comm_t *c, const uint8_t *hdr, size_t hsize,
                             size_t body_size, int had_body, int extra, vkg_wire_hdr *h)
{
    VKG_CHECK(hdr != NULL && hsize == VKG_WIRE_HDR_BYTES, VKG_ERR_PROTOCOL,
              "malformed message rejected: first frame is %zu bytes, a vkgpt header is %d", hsize,
              VKG_WIRE_HDR_BYTES);
    vkg__wire_decode(hdr, h);
    VKG_CHECK(!extra, VKG_ERR_PROTOCOL,
              "malformed message claiming rank %u rejected: more than two frames",
              (unsigned)h->sender);
    return validate(c, h, body_size, had_body);
}

/* Receive one message, waiting up to wait_ms (0: not at all). *got = 0 when none came. */
vkg_status vkg__recv_wait(vkg_comm_t *c, vkg_inmsg *m, int *got, int wait_ms)
{
    *got = 0;
    zmq_msg_t hm;
    zmq_msg_init(&hm);
    if (wait_ms > 0 && wait_ms != c->rcvtimeo) {
        zmq_setsockopt(c->rx, ZMQ_RCVTIMEO, &wait_ms, sizeof wait_ms);
        c->rcvtimeo = wait_ms;
    }
    if (zmq_msg_recv(&hm, c->rx, wait_ms > 0 ? 0 : ZMQ_DONTWAIT) < 0) {
        int e = zmq_errno();
        zmq_msg_close(&hm);
        if (e == EAGAIN || e == EINTR)
            return VKG_OK;
        return VKG_FAIL(VKG_ERR_NETWORK, "receiving on %s: %s", c->peers[c->rank].endpoint,
                        zmq_strerror(e));
    }
    size_t hsize = zmq_msg_size(&hm);
    uint8_t raw[VKG_WIRE_HDR_BYTES];
    if (hsize == VKG_WIRE_HDR_BYTES)
        memcpy(raw, zmq_msg_data(&hm), sizeof raw);
    int more = zmq_msg_more(&hm);
    zmq_msg_close(&hm);
    zmq_msg_init(&m->body);
    int had_body = 0, extra = 0;
    if (more) {
        had_body = 1;
        if (zmq_msg_recv(&m->body, c->rx, 0) < 0) {
            zmq_msg_close(&m->body);
            return VKG_FAIL(VKG_ERR_NETWORK, "receiving a payload frame: %s",
                            zmq_strerror(zmq_errno()));
        }
        if (zmq_msg_more(&m->body)) {
            extra = 1;
            drain_frames(c->rx);
        }
    }
    vkg_status st = vkg__check_frames(c, hsize == VKG_WIRE_HDR_BYTES ? raw : NULL, hsize,
                                      zmq_msg_size(&m->body), had_body, extra, &m->h);
    if (st < 0) {
        zmq_msg_close(&m->body);
        return st;
    }
    *got = 1;
    return VKG_OK;
}

/* ---- stash ---- */

static int matches(const vkg_expect *ex, const vkg_wire_hdr *h)
{
    if (!ex->kind || h->kind != ex->kind)
        return 0;
    if (ex->sender >= 0 && (int)h->sender != ex->sender)
        return 0;
    if (h->kind == VKG_W_DATA)
        return h->seq == ex->seq;
    return h->tag == ex->tag;
}

static vkg_status stash_put(vkg_comm_t *c, vkg_inmsg *m)
{
    if (c->nstash == c->cap_stash) {
        size_t cap = c->cap_stash ? 2 * c->cap_stash : 16;
        vkg_inmsg *s = realloc(c->stash, cap * sizeof *s);
        if (!s) {
            zmq_msg_close(&m->body);
            return VKG_FAIL(VKG_ERR_NOMEM, "out of memory stashing an early message");
        }
        c->stash = s;
        c->cap_stash = cap;
    }
    c->stash[c->nstash].h = m->h;
    zmq_msg_init(&c->stash[c->nstash].body);
    zmq_msg_move(&c->stash[c->nstash].body, &m->body);
    zmq_msg_close(&m->body);
    c->nstash++;
    return VKG_OK;
}

int vkg__stash_take(vkg_comm_t *c, const vkg_expect *ex, vkg_inmsg *m)
{
    for (size_t i = 0; i < c->nstash; i++) {
        if (!matches(ex, &c->stash[i].h))
            continue;
        m->h = c->stash[i].h;
        zmq_msg_init(&m->body);
        zmq_msg_move(&m->body, &c->stash[i].body);
        zmq_msg_close(&c->stash[i].body);
        memmove(&c->stash[i], &c->stash[i + 1], (c->nstash - i - 1) * sizeof *c->stash);
        c->nstash--;
        return 1;
    }
    return 0;
}

void vkg__stash_clear(vkg_comm_t *c)
{
    for (size_t i = 0; i < c->nstash; i++)
        zmq_msg_close(&c->stash[i].body);
    c->nstash = 0;
    free(c->stash);
    c->stash = NULL;
    c->cap_stash = 0;
}

/* ---- dispatch of one received message ---- */

vkg_status vkg__dispatch(vkg_comm_t *c, const vkg_expect *ex, vkg_inmsg *in, vkg_inmsg *out,
                         int *matched)
{
    vkg_wire_hdr *h = &in->h;
    *matched = 0;
    switch (h->kind) {
    case VKG_W_ABORT: {
        char why[900];
        vkg__escape(why, sizeof why, zmq_msg_data(&in->body), zmq_msg_size(&in->body));
        c->peer_aborted = 1;
        vkg_status st = VKG_FAIL(VKG_ERR_PEER, "rank %u aborted: %s", (unsigned)h->sender, why);
        zmq_msg_close(&in->body);
        return st;
    }
    case VKG_W_STALL:
        zmq_msg_close(&in->body);
        if (h->segment == VKG_STALL_OVER) { /* its stall is over: it is no longer seen stalled */
            c->peers[h->sender].stalled_on = 0;
            if (c->stall_seen == (int)h->sender + 1) {
                c->stall_seen = 0;
                for (int q = 0; q < c->size && !c->stall_seen; q++)
                    if (c->peers[q].stalled_on)
                        c->stall_seen = q + 1;
            }
            return VKG_OK;
        }
        VKG_CHECK(h->segment < (uint32_t)c->size && h->segment != h->sender, VKG_ERR_PROTOCOL,
                  "stall notice from rank %u rejected: it names rank %u (world size %d)",
                  (unsigned)h->sender, (unsigned)h->segment, c->size);
        c->peers[h->sender].stalled_on = (int)h->segment + 1;
        if (!c->stall_seen)
            c->stall_seen = (int)h->sender + 1;
        return VKG_OK;
    case VKG_W_CREDIT:
        zmq_msg_close(&in->body);
        VKG_CHECK(h->seq <= c->seq, VKG_ERR_PROTOCOL,
                  "credit from rank %u for collective #%llu, but this rank is only at #%llu",
                  (unsigned)h->sender, (unsigned long long)h->seq, (unsigned long long)c->seq);
        if (h->seq == c->seq && (int)h->sender == c->credit_from && h->segment > c->credit) {
            c->credit = h->segment;
            c->credit_moved = 1;
        } else if (h->seq == c->seq && c->credit_from == VKG_CREDIT_ALL &&
                   h->segment > c->credits[h->sender]) {
            c->credits[h->sender] = h->segment;
            c->credit_moved = 1;
        }
        return VKG_OK;
    case VKG_W_P2P: {
        vkg_peer *p = &c->peers[h->sender];
        if (h->seq != p->p2p_recvd) {
            zmq_msg_close(&in->body);
            return VKG_FAIL(VKG_ERR_PROTOCOL,
                            "point-to-point message #%llu from rank %u rejected: expected #%llu "
                            "(lost or duplicated message)",
                            (unsigned long long)h->seq, (unsigned)h->sender,
                            (unsigned long long)p->p2p_recvd);
        }
        p->p2p_recvd++;
        break;
    }
    case VKG_W_DATA:
        if (h->seq < c->seq) {
            zmq_msg_close(&in->body);
            return VKG_FAIL(VKG_ERR_PROTOCOL,
                            "stale data from rank %u rejected: it belongs to collective #%llu, "
                            "this rank finished that one and is at #%llu",
                            (unsigned)h->sender, (unsigned long long)h->seq,
                            (unsigned long long)c->seq);
        }
        break;
    default:
        zmq_msg_close(&in->body);
        return VKG_FAIL(VKG_ERR_PROTOCOL, "unexpected %s message from rank %u on a data connection",
                        vkg__wire_kind_name(h->kind), (unsigned)h->sender);
    }
    if (matches(ex, h)) {
        *out = *in;
        *matched = 1;
        return VKG_OK;
    }
    return stash_put(c, in);
}
