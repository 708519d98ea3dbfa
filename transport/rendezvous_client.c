/* The rendezvous as a rank other than 0 sees it: send HELLO {world size, rank, data endpoint,
 * CURVE public key, host identity} to rank 0's ROUTER, wait for the TABLE (or a REJECT that says
 * why, or a handshake rank 0 refused, which the connection's monitor reports), admit the job's
 * secret on this rank's data socket, answer READY and wait for GO. Every wait is bounded by the
 * deadline the caller gives.
 * Not here: opening and securing the socket (vkg__rendezvous, rendezvous.c), rank 0's side
 * (rendezvous.c).
 */
#include "rendezvous.h"

#include <stdio.h>
#include <string.h>

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static vkg_status client_reply(vkg_comm_t *c, zmq_msg_t *f, int nf, const char *master,
                               vkg_wire_hdr *h);

vkg_status vkg__rendezvous_table(vkg_comm_t *c, zmq_msg_t *f, int nf, const char *master)
{
    vkg_wire_hdr h;
    VKG_TRY(client_reply(c, f, nf, master, &h));
    VKG_CHECK(h.kind == VKG_W_TABLE && nf == 2 &&
                  zmq_msg_size(&f[1]) == (size_t)c->size * VKG_RDV_ENTRY_BYTES + VKG_SECRET_BYTES,
              VKG_ERR_PROTOCOL, "the rendezvous at %s sent a %s of %zu bytes, expected a table",
              master, vkg__wire_kind_name(h.kind), nf == 2 ? zmq_msg_size(&f[1]) : 0);
    const uint8_t *t = zmq_msg_data(&f[1]);
    for (int q = 0; q < c->size; q++) {
        vkg_peer *p = &c->peers[q];
        memcpy(p->endpoint, t + (size_t)q * VKG_RDV_ENTRY_BYTES, VKG_COMM_ADDR_MAX);
        p->endpoint[VKG_COMM_ADDR_MAX - 1] = '\0';
        memcpy(p->pubkey, t + (size_t)q * VKG_RDV_ENTRY_BYTES + VKG_COMM_ADDR_MAX,
               VKG_COMM_KEY_CHARS + 1);
        p->pubkey[VKG_COMM_KEY_CHARS] = '\0';
        memcpy(p->host, t + (size_t)q * VKG_RDV_ENTRY_BYTES + VKG_RDV_HOST_AT, VKG_HOST_BYTES);
        p->host[VKG_HOST_BYTES - 1] = '\0';
    }
    memcpy(c->secret, t + (size_t)c->size * VKG_RDV_ENTRY_BYTES, VKG_SECRET_BYTES);
    return vkg__admit_secret(c);
}

/* What the rendezvous connection's monitor reports, as an error for a refused handshake. */
static vkg_status client_monitor(vkg_comm_t *c, void *mon, const char *master)
{
    zmq_msg_t f[2];
    zmq_msg_init(&f[0]);
    zmq_msg_init(&f[1]);
    int nf = vkg__rendezvous_recv(mon, f, 2);
    uint16_t ev = 0;
    if (nf >= 1 && zmq_msg_size(&f[0]) >= 2)
        memcpy(&ev, zmq_msg_data(&f[0]), 2);
    zmq_msg_close(&f[0]);
    zmq_msg_close(&f[1]);
    if (ev == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH && c->curve)
        return VKG_FAIL(VKG_ERR_PEER,
                        "rank 0's rendezvous at %s refused this rank's CURVE public key %s: it is "
                        "not among the keys rank 0 authorizes (a different key file, or a "
                        "missing entry in the authorized keys)",
                        master, c->curve_pub);
    if (ev == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
        return VKG_FAIL(VKG_ERR_PEER,
                        "rank 0's rendezvous at %s refused this rank's credentials: it runs job "
                        "%016llx generation %u with other values (a different VKG_JOB_ID, launcher "
                        "job id or restart count)",
                        master, (unsigned long long)c->job_id, (unsigned)c->generation);
    if ((ev == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL || ev == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL ||
         ev == ZMQ_EVENT_DISCONNECTED) &&
        c->curve)
        return VKG_FAIL(
            VKG_ERR_PEER,
            "rank 0's rendezvous at %s dropped the CURVE handshake: this rank's copy of "
            "rank 0's public key (%s) does not match rank 0's secret key, or rank 0 "
            "does not use CURVE",
            master, c->peers[0].pubkey);
    if (ev == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL || ev == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
        return VKG_FAIL(VKG_ERR_PEER,
                        "the rendezvous at %s failed the handshake: rank 0 uses another security "
                        "mechanism (CURVE on one side only?) or is not a vkgpt rank",
                        master);
    return VKG_OK;
}

/* Wait for rank 0's next message (frames f[0..1]), failing on the deadline or a refused
 * handshake. `what` names what is awaited. */
static vkg_status client_next(vkg_comm_t *c, void *rdv, void *mon, const char *master,
                              int64_t deadline, const char *what, zmq_msg_t *f, int *nf)
{
    for (;;) {
        int64_t now = vkg__now_ns();
        VKG_CHECK(now < deadline, VKG_ERR_TIMEOUT,
                  "rendezvous: no %s from rank 0 at %s within %.1f s (is rank 0 running, with the "
                  "same master address, port and world size?)",
                  what, master, c->timeout_ms / 1000.0);
        zmq_pollitem_t it[2] = {{rdv, 0, ZMQ_POLLIN, 0}, {mon, 0, ZMQ_POLLIN, 0}};
        int rc = zmq_poll(it, mon ? 2 : 1, (long)((deadline - now) / 1000000) + 1);
        if (rc <= 0)
            continue;
        if (mon && (it[1].revents & ZMQ_POLLIN))
            VKG_TRY(client_monitor(c, mon, master));
        if (it[0].revents & ZMQ_POLLIN) {
            *nf = vkg__rendezvous_recv(rdv, f, 2);
            return VKG_OK;
        }
    }
}

/* The header of rank 0's reply; a REJECT becomes the error it carries. */
static vkg_status client_reply(vkg_comm_t *c, zmq_msg_t *f, int nf, const char *master,
                               vkg_wire_hdr *h)
{
    VKG_CHECK(nf >= 1 && nf <= 2 && zmq_msg_size(&f[0]) == VKG_WIRE_HDR_BYTES, VKG_ERR_PROTOCOL,
              "malformed reply from the rendezvous at %s", master);
    vkg__wire_decode(zmq_msg_data(&f[0]), h);
    VKG_CHECK(h->magic == VKG_WIRE_MAGIC && h->version == VKG_WIRE_VERSION &&
                  h->job_id == c->job_id && h->generation == c->generation && h->sender == 0,
              VKG_ERR_PROTOCOL,
              "the rendezvous at %s answered with a header of another job, generation or version",
              master);
    if (h->kind == VKG_W_REJECT) {
        char why[800];
        vkg__escape(why, sizeof why, nf == 2 ? zmq_msg_data(&f[1]) : "",
                    nf == 2 ? zmq_msg_size(&f[1]) : 0);
        return VKG_FAIL(VKG_ERR_PEER, "rank 0 (%s) rejected rank %d: %s", master, c->rank, why);
    }
    return VKG_OK;
}

vkg_status vkg__rendezvous_client(vkg_comm_t *c, void *rdv, void *mon, const char *master,
                                  int64_t deadline)
{
    uint8_t hello[VKG_RDV_HELLO_BYTES] = {0}, hb[VKG_WIRE_HDR_BYTES];
    put32(hello, (uint32_t)c->size);
    put32(hello + 4, (uint32_t)c->rank);
    memcpy(hello + 8, c->peers[c->rank].endpoint, VKG_COMM_ADDR_MAX);
    memcpy(hello + 8 + VKG_COMM_ADDR_MAX, c->curve_pub, VKG_COMM_KEY_CHARS + 1);
    memcpy(hello + 8 + VKG_RDV_HOST_AT, c->peers[c->rank].host, VKG_HOST_BYTES);
    vkg_wire_hdr h;
    vkg__hdr_init(c, &h, VKG_W_HELLO);
    h.bytes = sizeof hello;
    vkg__wire_encode(&h, hb);
    VKG_CHECK(zmq_send(rdv, hb, sizeof hb, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0 &&
                  zmq_send(rdv, hello, sizeof hello, ZMQ_DONTWAIT) >= 0,
              VKG_ERR_NETWORK, "sending hello to %s: %s", master, zmq_strerror(zmq_errno()));
    zmq_msg_t f[2];
    int nf = 0;
    zmq_msg_init(&f[0]);
    zmq_msg_init(&f[1]);
    vkg_status st = client_next(c, rdv, mon, master, deadline, "peer table", f, &nf);
    if (st == VKG_OK)
        st = vkg__rendezvous_table(c, f, nf, master);
    zmq_msg_close(&f[0]);
    zmq_msg_close(&f[1]);
    VKG_TRY(st);
    /* this rank's data socket now admits the secret: say so, and wait until every rank's does */
    vkg__hdr_init(c, &h, VKG_W_READY);
    vkg__wire_encode(&h, hb);
    VKG_CHECK(zmq_send(rdv, hb, sizeof hb, ZMQ_DONTWAIT) >= 0, VKG_ERR_NETWORK,
              "sending ready to %s: %s", master, zmq_strerror(zmq_errno()));
    zmq_msg_init(&f[0]);
    zmq_msg_init(&f[1]);
    st = client_next(c, rdv, mon, master, deadline, "go-ahead", f, &nf);
    if (st == VKG_OK)
        st = client_reply(c, f, nf, master, &h);
    if (st == VKG_OK)
        st = h.kind == VKG_W_GO && nf == 1 && vkg__same_secret(h.secret, c->secret)
                 ? VKG_OK
                 : VKG_FAIL(VKG_ERR_PROTOCOL,
                            "the rendezvous at %s sent a %s where the go-ahead was expected",
                            master, vkg__wire_kind_name(h.kind));
    zmq_msg_close(&f[0]);
    zmq_msg_close(&f[1]);
    return st;
}
