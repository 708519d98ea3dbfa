/* The rendezvous: rank 0 binds a ROUTER at the master endpoint; every other rank connects a
 * DEALER, sends HELLO {world size, rank, data endpoint, CURVE public key, host identity} and
 * waits for the TABLE
 * (or a REJECT that says why). Rank 0 rejects hellos of another job or generation and fails the
 * whole rendezvous on a wrong world size, a rank out of range or two processes claiming one rank.
 * The table ends with the job's secret, 16 random bytes rank 0 draws: each rank then admits it on
 * its data socket and answers READY, and once every rank is ready rank 0 sends GO, after which
 * the ranks connect to each other (so no connection can reach a data socket that does not yet
 * know the secret). Every wait is bounded by the communicator's timeout.
 * Here: rank 0's side, the entry both roles go through (vkg__rendezvous: the socket, its security
 * and its connection) and the fuzzing entry of the messages a rank parses.
 * Not here: the other ranks' side (rendezvous_client.c), the sockets' options and security
 * (sockets.c).
 */
#include "comm_testing.h"
#include "rendezvous.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void send_reject(vkg_comm_t *c, void *rdv, const void *rid, size_t rid_len, const char *why)
{
    vkg_wire_hdr h;
    uint8_t hb[VKG_WIRE_HDR_BYTES];
    vkg__hdr_init(c, &h, VKG_W_REJECT);
    h.bytes = strlen(why);
    vkg__wire_encode(&h, hb);
    zmq_send(rdv, rid, rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(rdv, hb, sizeof hb, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(rdv, why, strlen(why), ZMQ_DONTWAIT);
}

int vkg__rendezvous_recv(void *s, zmq_msg_t *f, int n)
{
    int got = 0, more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, s, 0) < 0) {
            zmq_msg_close(&m);
            break;
        }
        more = zmq_msg_more(&m);
        if (got < n)
            zmq_msg_move(&f[got], &m);
        zmq_msg_close(&m);
        got++;
    }
    return got;
}

typedef struct joiner {
    uint8_t rid[256];
    size_t rid_len;
    int joined;
} joiner;

/* One HELLO at rank 0. Returns VKG_OK (recorded or politely rejected) or a fatal error. */
static vkg_status master_hello(vkg_comm_t *c, void *rdv, joiner *js, int *joined, zmq_msg_t *f,
                               int nf)
{
    const uint8_t *rid = zmq_msg_data(&f[0]);
    size_t rid_len = zmq_msg_size(&f[0]);
    char why[512];
    vkg_wire_hdr h;
    if (nf != 3 || zmq_msg_size(&f[1]) != VKG_WIRE_HDR_BYTES) {
        send_reject(c, rdv, rid, rid_len, "malformed hello");
        return VKG_OK;
    }
    vkg__wire_decode(zmq_msg_data(&f[1]), &h);
    if (h.magic != VKG_WIRE_MAGIC || h.version != VKG_WIRE_VERSION || h.kind != VKG_W_HELLO ||
        zmq_msg_size(&f[2]) != VKG_RDV_HELLO_BYTES) {
        send_reject(c, rdv, rid, rid_len, "malformed hello (not a vkgpt rank of this version)");
        return VKG_OK;
    }
    if (h.job_id != c->job_id || h.generation != c->generation) {
        snprintf(why, sizeof why, "job %016llx generation %u is not this job (%016llx gen %u)",
                 (unsigned long long)h.job_id, (unsigned)h.generation,
                 (unsigned long long)c->job_id, (unsigned)c->generation);
        send_reject(c, rdv, rid, rid_len, why);
        return VKG_OK;
    }
    const uint8_t *p = zmq_msg_data(&f[2]);
    uint32_t world = get32(p), rank = get32(p + 4);
    vkg_status st = VKG_OK;
    if (world != (uint32_t)c->size)
        st = VKG_FAIL(VKG_ERR_MISMATCH, "rank %u was started with world size %u, rank 0 with %d",
                      (unsigned)rank, (unsigned)world, c->size);
    else if (rank == 0 || rank >= world)
        st = VKG_FAIL(VKG_ERR_MISMATCH, "a process announced rank %u (valid: 1..%d)",
                      (unsigned)rank, c->size - 1);
    else if (js[rank].joined)
        st = VKG_FAIL(VKG_ERR_MISMATCH, "two processes claim rank %u", (unsigned)rank);
    if (st < 0) {
        send_reject(c, rdv, rid, rid_len, vkg_error_message());
        return st;
    }
    vkg_peer *peer = &c->peers[rank];
    memcpy(peer->endpoint, p + 8, VKG_COMM_ADDR_MAX);
    peer->endpoint[VKG_COMM_ADDR_MAX - 1] = '\0';
    memcpy(peer->pubkey, p + 8 + VKG_COMM_ADDR_MAX, VKG_COMM_KEY_CHARS + 1);
    peer->pubkey[VKG_COMM_KEY_CHARS] = '\0';
    memcpy(peer->host, p + 8 + VKG_RDV_HOST_AT, VKG_HOST_BYTES);
    peer->host[VKG_HOST_BYTES - 1] = '\0';
    VKG_CHECK(rid_len <= sizeof js[rank].rid, VKG_ERR_PROTOCOL, "routing id too long");
    memcpy(js[rank].rid, rid, rid_len);
    js[rank].rid_len = rid_len;
    js[rank].joined = 1;
    (*joined)++;
    return VKG_OK;
}

static vkg_status master_wait(vkg_comm_t *c, void *rdv, joiner *js, int64_t deadline)
{
    int joined = 0;
    while (joined < c->size - 1) {
        int64_t now = vkg__now_ns();
        if (now >= deadline) {
            char missing[256] = "";
            size_t len = 0;
            for (int q = 1; q < c->size && len < sizeof missing - 12; q++)
                if (!js[q].joined)
                    len += (size_t)snprintf(missing + len, sizeof missing - len, " %d", q);
            return VKG_FAIL(VKG_ERR_TIMEOUT,
                            "rendezvous: %d of %d ranks joined within %.1f s; missing:%s",
                            joined + 1, c->size, c->timeout_ms / 1000.0, missing);
        }
        zmq_pollitem_t it = {rdv, 0, ZMQ_POLLIN, 0};
        int rc = zmq_poll(&it, 1, (long)((deadline - now) / 1000000) + 1);
        if (rc <= 0)
            continue;
        zmq_msg_t f[3];
        for (int i = 0; i < 3; i++)
            zmq_msg_init(&f[i]);
        int nf = vkg__rendezvous_recv(rdv, f, 3);
        vkg_status st = nf >= 1 ? master_hello(c, rdv, js, &joined, f, nf) : VKG_OK;
        for (int i = 0; i < 3; i++)
            zmq_msg_close(&f[i]);
        VKG_TRY(st);
    }
    return VKG_OK;
}

static vkg_status master_send_table(vkg_comm_t *c, void *rdv, const joiner *js)
{
    size_t bytes = (size_t)c->size * VKG_RDV_ENTRY_BYTES + VKG_SECRET_BYTES;
    uint8_t *table = calloc(1, bytes);
    VKG_CHECK(table != NULL, VKG_ERR_NOMEM, "out of memory");
    for (int q = 0; q < c->size; q++) {
        memcpy(table + (size_t)q * VKG_RDV_ENTRY_BYTES, c->peers[q].endpoint, VKG_COMM_ADDR_MAX);
        memcpy(table + (size_t)q * VKG_RDV_ENTRY_BYTES + VKG_COMM_ADDR_MAX, c->peers[q].pubkey,
               VKG_COMM_KEY_CHARS + 1);
        memcpy(table + (size_t)q * VKG_RDV_ENTRY_BYTES + VKG_RDV_HOST_AT, c->peers[q].host,
               VKG_HOST_BYTES);
    }
    memcpy(table + (size_t)c->size * VKG_RDV_ENTRY_BYTES, c->secret, VKG_SECRET_BYTES);
    vkg_wire_hdr h;
    uint8_t hb[VKG_WIRE_HDR_BYTES];
    vkg__hdr_init(c, &h, VKG_W_TABLE);
    h.bytes = bytes;
    vkg__wire_encode(&h, hb);
    vkg_status st = VKG_OK;
    for (int q = 1; q < c->size && st == VKG_OK; q++) {
        if (zmq_send(rdv, js[q].rid, js[q].rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
            zmq_send(rdv, hb, sizeof hb, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
            zmq_send(rdv, table, bytes, ZMQ_DONTWAIT) < 0)
            st = VKG_FAIL(VKG_ERR_NETWORK, "sending the peer table to rank %d: %s", q,
                          zmq_strerror(zmq_errno()));
    }
    free(table);
    return st;
}

/* After the table: every rank answers READY (its data socket admits the secret); then GO to all.
 * A hello arriving meanwhile is handled as before (a second claim to a rank fails the job). */
static vkg_status master_go(vkg_comm_t *c, void *rdv, joiner *js, int64_t deadline)
{
    int ready = 0, joined = c->size - 1;
    int *got = calloc((size_t)c->size, sizeof *got);
    VKG_CHECK(got != NULL, VKG_ERR_NOMEM, "out of memory");
    vkg_status st = VKG_OK;
    while (st == VKG_OK && ready < c->size - 1) {
        int64_t now = vkg__now_ns();
        if (now >= deadline) {
            st = VKG_FAIL(VKG_ERR_TIMEOUT,
                          "rendezvous: %d of %d ranks confirmed the peer table within %.1f s",
                          ready + 1, c->size, c->timeout_ms / 1000.0);
            break;
        }
        zmq_pollitem_t it = {rdv, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, (long)((deadline - now) / 1000000) + 1) <= 0)
            continue;
        zmq_msg_t f[3];
        for (int i = 0; i < 3; i++)
            zmq_msg_init(&f[i]);
        int nf = vkg__rendezvous_recv(rdv, f, 3);
        vkg_wire_hdr h = {0};
        if (nf >= 2 && zmq_msg_size(&f[1]) == VKG_WIRE_HDR_BYTES)
            vkg__wire_decode(zmq_msg_data(&f[1]), &h);
        if (h.kind == VKG_W_READY && nf == 2) {
            int q = 1;
            while (q < c->size && (js[q].rid_len != zmq_msg_size(&f[0]) ||
                                   memcmp(js[q].rid, zmq_msg_data(&f[0]), js[q].rid_len)))
                q++;
            if (q < c->size && h.magic == VKG_WIRE_MAGIC && h.version == VKG_WIRE_VERSION &&
                h.job_id == c->job_id && h.generation == c->generation && h.sender == (uint32_t)q &&
                vkg__same_secret(h.secret, c->secret) && !got[q]) {
                got[q] = 1;
                ready++;
            }
        } else if (nf >= 1) {
            st = master_hello(c, rdv, js, &joined, f, nf);
        }
        for (int i = 0; i < 3; i++)
            zmq_msg_close(&f[i]);
    }
    free(got);
    VKG_TRY(st);
    vkg_wire_hdr h;
    uint8_t hb[VKG_WIRE_HDR_BYTES];
    vkg__hdr_init(c, &h, VKG_W_GO);
    vkg__wire_encode(&h, hb);
    for (int q = 1; q < c->size; q++)
        VKG_CHECK(zmq_send(rdv, js[q].rid, js[q].rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0 &&
                      zmq_send(rdv, hb, sizeof hb, ZMQ_DONTWAIT) >= 0,
                  VKG_ERR_NETWORK, "sending the go-ahead to rank %d: %s", q,
                  zmq_strerror(zmq_errno()));
    return VKG_OK;
}

static void master_reject_all(vkg_comm_t *c, void *rdv, const joiner *js)
{
    char why[1024];
    snprintf(why, sizeof why, "rank 0 gave up the rendezvous: %s", vkg_error_message());
    for (int q = 1; q < c->size; q++)
        if (js[q].joined)
            send_reject(c, rdv, js[q].rid, js[q].rid_len, why);
}

vkg_status vkg__new_secret(vkg_comm_t *c)
{
    VKG_TRY(vkg__crypto_random(c->secret, VKG_SECRET_BYTES));
    return vkg__admit_secret(c);
}

vkg_status vkg__rendezvous(vkg_comm_t *c, const char *master, void **prdv)
{
    int64_t deadline = vkg__now_ns() + (int64_t)c->timeout_ms * 1000000;
    void *mon = NULL;
    vkg_status st = VKG_OK;
    int master_rank = c->rank == 0;
    void *rdv = *prdv = zmq_socket(c->zctx, master_rank ? ZMQ_ROUTER : ZMQ_DEALER);
    VKG_CHECK(rdv != NULL, VKG_ERR_NETWORK, "socket: %s", zmq_strerror(zmq_errno()));
    VKG_TRY(vkg__setint(rdv, ZMQ_LINGER, master_rank ? 1000 : 0, "ZMQ_LINGER"));
    if (strchr(master, '['))
        VKG_TRY(vkg__setint(rdv, ZMQ_IPV6, 1, "ZMQ_IPV6"));
    if (master_rank) {
        joiner *js = calloc((size_t)c->size, sizeof *js);
        VKG_CHECK(js != NULL, VKG_ERR_NOMEM, "out of memory");
        int64_t maxmsg = VKG_RDV_HELLO_BYTES + VKG_WIRE_HDR_BYTES;
        zmq_setsockopt(rdv, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
        st = vkg__secure_server(c, rdv, c->domain);
        if (st == VKG_OK && zmq_bind(rdv, master) != 0)
            st = VKG_FAIL(VKG_ERR_NETWORK,
                          "binding the rendezvous endpoint %s: %s (another job on this port?)",
                          master, zmq_strerror(zmq_errno()));
        if (st == VKG_OK)
            st = master_wait(c, rdv, js, deadline);
        if (st == VKG_OK)
            st = master_send_table(c, rdv, js);
        if (st == VKG_OK)
            st = master_go(c, rdv, js, deadline);
        if (st < 0)
            master_reject_all(c, rdv, js);
        free(js);
        return st;
    }
    char server_key[VKG_COMM_KEY_CHARS + 1];
    snprintf(server_key, sizeof server_key, "%s", c->peers[0].pubkey);
    int64_t maxmsg = (int64_t)c->size * VKG_RDV_ENTRY_BYTES + VKG_SECRET_BYTES + 1024;
    zmq_setsockopt(rdv, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    VKG_TRY(vkg__secure_client(c, rdv, server_key, c->password));
    if (c->transport != VKG_COMM_INPROC)
        VKG_TRY(vkg__open_monitor(c, rdv, "rdvmon", &mon));
    if (zmq_connect(rdv, master) != 0)
        st = VKG_FAIL(VKG_ERR_NETWORK, "connecting to the rendezvous %s: %s", master,
                      zmq_strerror(zmq_errno()));
    else
        st = vkg__rendezvous_client(c, rdv, mon, master, deadline);
    vkg__close_monitor(rdv, &mon);
    return st;
}

/* ---- fuzzing entry (comm_testing.h) ---- */

static void frame_of(zmq_msg_t *m, const uint8_t *p, size_t n)
{
    if (zmq_msg_init_size(m, n) == 0 && n)
        memcpy(zmq_msg_data(m), p, n);
}

static vkg_status fuzz_message(vkg_comm_t *c, const uint8_t *p, size_t n, int extra)
{
    size_t hsize = n < VKG_WIRE_HDR_BYTES ? n : VKG_WIRE_HDR_BYTES;
    int had_body = n > VKG_WIRE_HDR_BYTES;
    vkg_inmsg in, out;
    VKG_TRY(vkg__check_frames(c, hsize == VKG_WIRE_HDR_BYTES ? p : NULL, hsize,
                              had_body ? n - hsize : 0, had_body, extra, &in.h));
    frame_of(&in.body, p + hsize, n - hsize);
    vkg_expect ex = {.kind = VKG_W_P2P, .sender = 0, .tag = 7, .waiting_on = 0, .what = "fuzz"};
    int matched = 0;
    vkg_status st = vkg__dispatch(c, &ex, &in, &out, &matched);
    if (st == VKG_OK && matched)
        zmq_msg_close(&out.body);
    return st;
}

vkg_status vkg__fuzz_wire(const uint8_t *data, size_t size)
{
    if (size < 1)
        return VKG_OK;
    int mode = data[0] & 3, extra = data[0] >> 7;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    vkg_comm_t *c = NULL;
    VKG_TRY(vkg__comm_unconnected(4, mode == 1 ? 0 : 1, &c));
    memcpy(c->secret, "fuzzing-secret!!", VKG_SECRET_BYTES);
    c->seq = 5;
    c->credit_from = VKG_CREDIT_ALL;
    vkg_status st = VKG_OK;
    if (mode == 0) {
        st = fuzz_message(c, p, n, extra);
    } else if (mode == 1) { /* routing id (length byte + bytes), header, hello body */
        size_t rl = n ? p[0] : 0;
        rl = rl + 1 <= n ? rl : (n ? n - 1 : 0);
        size_t hl = n > 1 + rl ? n - 1 - rl : 0;
        hl = hl < VKG_WIRE_HDR_BYTES ? hl : VKG_WIRE_HDR_BYTES;
        zmq_msg_t f[3];
        frame_of(&f[0], p + (n ? 1 : 0), rl);
        frame_of(&f[1], p + 1 + rl, hl);
        frame_of(&f[2], p + 1 + rl + hl, n > 1 + rl + hl ? n - 1 - rl - hl : 0);
        joiner js[4];
        memset(js, 0, sizeof js);
        int joined = 0;
        st = master_hello(c, NULL, js, &joined, f, extra ? 2 : 3);
        for (int i = 0; i < 3; i++)
            zmq_msg_close(&f[i]);
    } else { /* rank 0's reply: header, then the table or a reason */
        size_t hl = n < VKG_WIRE_HDR_BYTES ? n : VKG_WIRE_HDR_BYTES;
        zmq_msg_t f[2];
        frame_of(&f[0], p, hl);
        frame_of(&f[1], p + hl, n - hl);
        st = vkg__rendezvous_table(c, f, extra ? 1 : 2, "fuzz");
        zmq_msg_close(&f[0]);
        zmq_msg_close(&f[1]);
    }
    vkg__stash_clear(c);
    vkg__comm_unconnected_free(&c);
    return st;
}
