/* Communicator setup and teardown: validating the config, binding this rank's data socket, the
 * rendezvous through rank 0 (hello -> peer table), connecting to every peer with the job's
 * credentials, heartbeats and monitoring, and the collective destroy.
 *
 * Rendezvous: rank 0 binds a ROUTER at the master endpoint; every other rank connects a DEALER,
 * sends HELLO {world size, rank, data endpoint, CURVE public key} and waits for the TABLE (or a
 * REJECT that says why). Rank 0 rejects hellos of another job or generation and fails the whole
 * rendezvous on a wrong world size, a rank out of range or two processes claiming one rank.
 * Not here: the wait loop (io.c) and the collectives (coll.c, ring.c).
 */
#include "comm_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

/* Defaults measured with `vkgpt bench allreduce` on 2 cores (docs/BENCHMARKS.md): 1 MiB segments
 * halve the per-message wakeups of 512 KiB ones; the one-step exchange beats the ring up to
 * about 2 MiB for two ranks (the same bytes, one round instead of two) and 512 KiB beyond. */
#define DEFAULT_SEGMENT (1u << 20)
#define DEFAULT_WINDOW 8
#define DEFAULT_SMALL_PAIR (2u << 20)
#define DEFAULT_SMALL (512u << 10)
#define SOCK_BUF (4 << 20)
#define HELLO_BYTES (8 + VKG_COMM_ADDR_MAX + VKG_COMM_KEY_CHARS + 1)
#define ENTRY_BYTES (VKG_COMM_ADDR_MAX + VKG_COMM_KEY_CHARS + 1)

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static vkg_status setopt(void *s, int opt, const void *v, size_t n, const char *name)
{
    VKG_CHECK(zmq_setsockopt(s, opt, v, n) == 0, VKG_ERR_NETWORK, "setting %s: %s", name,
              zmq_strerror(zmq_errno()));
    return VKG_OK;
}

static vkg_status setint(void *s, int opt, int v, const char *name)
{
    return setopt(s, opt, &v, sizeof v, name);
}

/* ---- addresses ---- */

static vkg_status resolve_numeric(const char *host, char *out, size_t cap)
{
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    VKG_CHECK(rc == 0, VKG_ERR_NETWORK, "cannot resolve master address '%s': %s", host,
              gai_strerror(rc));
    rc = getnameinfo(res->ai_addr, res->ai_addrlen, out, (socklen_t)cap, NULL, 0, NI_NUMERICHOST);
    freeaddrinfo(res);
    VKG_CHECK(rc == 0, VKG_ERR_NETWORK, "cannot format the address of '%s': %s", host,
              gai_strerror(rc));
    return VKG_OK;
}

/* The local address the kernel would use to reach ip:port (a UDP connect sends nothing). */
static vkg_status route_source(const char *ip, int port, char *out, size_t cap)
{
    struct addrinfo hints = {0}, *res = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_DGRAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    int rc = getaddrinfo(ip, ps, &hints, &res);
    VKG_CHECK(rc == 0, VKG_ERR_NETWORK, "cannot parse %s: %s", ip, gai_strerror(rc));
    int fd = socket(res->ai_family, SOCK_DGRAM, 0);
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    vkg_status st = VKG_OK;
    if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) < 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &len) < 0 ||
        getnameinfo((struct sockaddr *)&ss, len, out, (socklen_t)cap, NULL, 0, NI_NUMERICHOST))
        st = VKG_FAIL(VKG_ERR_NETWORK,
                      "no route from this host to the master %s (%s); set the bind address", ip,
                      strerror(errno));
    if (fd >= 0)
        close(fd);
    freeaddrinfo(res);
    return st;
}

static void tcp_endpoint(char *out, size_t cap, const char *ip, const char *port)
{
    snprintf(out, cap, strchr(ip, ':') ? "tcp://[%s]:%s" : "tcp://%s:%s", ip, port);
}

/* ---- security ---- */

static vkg_status secure_server(vkg_comm_t *c, void *s)
{
    if (c->transport == VKG_COMM_INPROC)
        return VKG_OK;
    VKG_TRY(setopt(s, ZMQ_ZAP_DOMAIN, c->domain, strlen(c->domain), "ZMQ_ZAP_DOMAIN"));
    if (c->curve) {
        VKG_TRY(setint(s, ZMQ_CURVE_SERVER, 1, "ZMQ_CURVE_SERVER"));
        return setopt(s, ZMQ_CURVE_SECRETKEY, c->curve_sec, VKG_COMM_KEY_CHARS + 1,
                      "ZMQ_CURVE_SECRETKEY");
    }
    return setint(s, ZMQ_PLAIN_SERVER, 1, "ZMQ_PLAIN_SERVER");
}

static vkg_status secure_client(vkg_comm_t *c, void *s, const char *server_key)
{
    if (c->transport == VKG_COMM_INPROC)
        return VKG_OK;
    if (c->curve) {
        VKG_TRY(setopt(s, ZMQ_CURVE_SERVERKEY, server_key, VKG_COMM_KEY_CHARS + 1,
                       "ZMQ_CURVE_SERVERKEY"));
        VKG_TRY(setopt(s, ZMQ_CURVE_PUBLICKEY, c->curve_pub, VKG_COMM_KEY_CHARS + 1,
                       "ZMQ_CURVE_PUBLICKEY"));
        return setopt(s, ZMQ_CURVE_SECRETKEY, c->curve_sec, VKG_COMM_KEY_CHARS + 1,
                      "ZMQ_CURVE_SECRETKEY");
    }
    VKG_TRY(setopt(s, ZMQ_PLAIN_USERNAME, "vkgpt", 5, "ZMQ_PLAIN_USERNAME"));
    return setopt(s, ZMQ_PLAIN_PASSWORD, c->password, strlen(c->password), "ZMQ_PLAIN_PASSWORD");
}

/* Collect the authorized CURVE keys (config list, file, own key) and register them. */
static vkg_status register_keys(vkg_comm_t *c, const vkg_comm_config *cfg)
{
    size_t cap = 8, n = 0;
    uint8_t *keys = malloc(cap * 32);
    char *text = NULL;
    vkg_status st = VKG_OK;
    VKG_CHECK(keys != NULL, VKG_ERR_NOMEM, "out of memory");
    size_t tlen = (cfg->curve_authorized ? strlen(cfg->curve_authorized) : 0) + 2;
    FILE *f = NULL;
    if (cfg->curve_authorized_file[0]) {
        f = fopen(cfg->curve_authorized_file, "r");
        VKG_CHECK_GOTO(st, f != NULL, VKG_ERR_IO, fail, "cannot open authorized keys %s: %s",
                       cfg->curve_authorized_file, strerror(errno));
        fseek(f, 0, SEEK_END);
        tlen += (size_t)ftell(f) + 1;
        rewind(f);
    }
    text = calloc(1, tlen + VKG_COMM_KEY_CHARS + 2);
    VKG_CHECK_GOTO(st, text != NULL, VKG_ERR_NOMEM, fail, "out of memory");
    snprintf(text, tlen, "%s\n", cfg->curve_authorized ? cfg->curve_authorized : "");
    if (f) {
        size_t used = strlen(text), line_start = used;
        size_t got = fread(text + used, 1, tlen - used - 1, f);
        text[used + got] = '\0';
        for (size_t i = line_start; i < used + got; i++) { /* blank out comments */
            if (text[i] == '#')
                while (i < used + got && text[i] != '\n')
                    text[i++] = ' ';
        }
    }
    if (!cfg->curve_authorized && !f)
        strcat(text, c->curve_pub);
    for (char *tok = strtok(text, " ,\t\r\n"); tok; tok = strtok(NULL, " ,\t\r\n")) {
        if (!strcmp(tok, "public") || !strcmp(tok, "="))
            continue;
        VKG_CHECK_GOTO(st, strlen(tok) == VKG_COMM_KEY_CHARS, VKG_ERR_INVALID_ARG, fail,
                       "authorized key '%.48s' is not a 40-character Z85 CURVE key", tok);
        if (n == cap) {
            uint8_t *k = realloc(keys, (cap *= 2) * 32);
            VKG_CHECK_GOTO(st, k != NULL, VKG_ERR_NOMEM, fail, "out of memory");
            keys = k;
        }
        VKG_CHECK_GOTO(st, zmq_z85_decode(keys + 32 * n, tok) != NULL, VKG_ERR_INVALID_ARG, fail,
                       "authorized key '%s' is not valid Z85", tok);
        n++;
    }
    VKG_CHECK_GOTO(st, n > 0, VKG_ERR_INVALID_ARG, fail, "CURVE is on but no key is authorized");
    st = vkg__ctx_register(c->ctx, c, c->domain, keys, n);
fail:
    if (f)
        fclose(f);
    free(text);
    free(keys);
    return st;
}

/* ---- sockets ---- */

static vkg_status open_monitor(vkg_comm_t *c, void *s, const char *tag, void **pair)
{
    char ep[96];
    snprintf(ep, sizeof ep, "inproc://vkg-%s-%p", tag, (void *)c);
    int events = ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                 ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL;
    VKG_CHECK(zmq_socket_monitor(s, ep, events) == 0, VKG_ERR_NETWORK, "monitoring %s: %s", tag,
              zmq_strerror(zmq_errno()));
    *pair = zmq_socket(c->zctx, ZMQ_PAIR);
    VKG_CHECK(*pair != NULL, VKG_ERR_NETWORK, "monitor socket: %s", zmq_strerror(zmq_errno()));
    VKG_TRY(setint(*pair, ZMQ_LINGER, 0, "ZMQ_LINGER"));
    VKG_CHECK(zmq_connect(*pair, ep) == 0, VKG_ERR_NETWORK, "connecting monitor %s: %s", ep,
              zmq_strerror(zmq_errno()));
    return VKG_OK;
}

static void close_monitor(void *s, void **pair)
{
    if (*pair) {
        zmq_socket_monitor(s, NULL, 0);
        zmq_close(*pair);
        *pair = NULL;
    }
}

static vkg_status open_rx(vkg_comm_t *c, const char *bind_ip)
{
    char ep[2 * VKG_COMM_ADDR_MAX];
    c->rx = zmq_socket(c->zctx, ZMQ_DEALER);
    VKG_CHECK(c->rx != NULL, VKG_ERR_NETWORK, "socket: %s", zmq_strerror(zmq_errno()));
    VKG_TRY(setint(c->rx, ZMQ_RCVHWM, 0, "ZMQ_RCVHWM"));
    VKG_TRY(setint(c->rx, ZMQ_SNDHWM, 0, "ZMQ_SNDHWM"));
    VKG_TRY(setint(c->rx, ZMQ_LINGER, 0, "ZMQ_LINGER"));
    VKG_TRY(secure_server(c, c->rx));
    switch (c->transport) {
    case VKG_COMM_TCP:
        VKG_TRY(setint(c->rx, ZMQ_RCVBUF, SOCK_BUF, "ZMQ_RCVBUF"));
        if (strchr(bind_ip, ':'))
            VKG_TRY(setint(c->rx, ZMQ_IPV6, 1, "ZMQ_IPV6"));
        tcp_endpoint(ep, sizeof ep, bind_ip, "*");
        break;
    case VKG_COMM_IPC:
        VKG_TRY(setint(c->rx, ZMQ_RCVBUF, SOCK_BUF, "ZMQ_RCVBUF"));
        snprintf(ep, sizeof ep, "ipc://%s/vkg-%016llx-g%u-r%d.sock", bind_ip,
                 (unsigned long long)c->job_id, (unsigned)c->generation, c->rank);
        VKG_CHECK(strlen(ep) - 6 < 108, VKG_ERR_INVALID_ARG,
                  "ipc socket path %s is too long for a Unix socket (108 bytes); use a shorter "
                  "ipc directory",
                  ep + 6);
        break;
    case VKG_COMM_INPROC:
        snprintf(ep, sizeof ep, "inproc://vkg-%016llx-g%u-r%d", (unsigned long long)c->job_id,
                 (unsigned)c->generation, c->rank);
        break;
    }
    VKG_CHECK(zmq_bind(c->rx, ep) == 0, VKG_ERR_NETWORK, "binding this rank's data socket %s: %s",
              ep, zmq_strerror(zmq_errno()));
    size_t len = sizeof c->peers[c->rank].endpoint;
    VKG_CHECK(zmq_getsockopt(c->rx, ZMQ_LAST_ENDPOINT, c->peers[c->rank].endpoint, &len) == 0,
              VKG_ERR_NETWORK, "reading the bound endpoint: %s", zmq_strerror(zmq_errno()));
    snprintf(c->peers[c->rank].pubkey, sizeof c->peers[c->rank].pubkey, "%s", c->curve_pub);
    return VKG_OK;
}

static vkg_status open_tx(vkg_comm_t *c)
{
    c->tx = zmq_socket(c->zctx, ZMQ_ROUTER);
    VKG_CHECK(c->tx != NULL, VKG_ERR_NETWORK, "socket: %s", zmq_strerror(zmq_errno()));
    VKG_TRY(setint(c->tx, ZMQ_ROUTER_MANDATORY, 1, "ZMQ_ROUTER_MANDATORY"));
    VKG_TRY(setint(c->tx, ZMQ_SNDHWM, 0, "ZMQ_SNDHWM"));
    VKG_TRY(setint(c->tx, ZMQ_RCVHWM, 0, "ZMQ_RCVHWM"));
    VKG_TRY(setint(c->tx, ZMQ_LINGER, 200, "ZMQ_LINGER"));
    if (c->transport != VKG_COMM_INPROC) {
        int ivl = c->timeout_ms / 5 > 50 ? c->timeout_ms / 5 : 50;
        int hb_timeout = c->timeout_ms / 3 > 200 ? c->timeout_ms / 3 : 200;
        VKG_TRY(setint(c->tx, ZMQ_SNDBUF, SOCK_BUF, "ZMQ_SNDBUF"));
        VKG_TRY(setint(c->tx, ZMQ_RECONNECT_IVL, -1, "ZMQ_RECONNECT_IVL"));
        VKG_TRY(setint(c->tx, ZMQ_HEARTBEAT_IVL, ivl, "ZMQ_HEARTBEAT_IVL"));
        VKG_TRY(setint(c->tx, ZMQ_HEARTBEAT_TIMEOUT, hb_timeout, "ZMQ_HEARTBEAT_TIMEOUT"));
        VKG_TRY(open_monitor(c, c->tx, "txmon", &c->mon));
    }
    for (int q = 0; q < c->size; q++) {
        if (q == c->rank)
            continue;
        uint8_t rid[5] = {'R', (uint8_t)q, (uint8_t)(q >> 8), (uint8_t)(q >> 16),
                          (uint8_t)(q >> 24)};
        VKG_TRY(setopt(c->tx, ZMQ_CONNECT_ROUTING_ID, rid, sizeof rid, "ZMQ_CONNECT_ROUTING_ID"));
        VKG_TRY(secure_client(c, c->tx, c->peers[q].pubkey));
        if (strchr(c->peers[q].endpoint, '['))
            VKG_TRY(setint(c->tx, ZMQ_IPV6, 1, "ZMQ_IPV6"));
        VKG_CHECK(zmq_connect(c->tx, c->peers[q].endpoint) == 0, VKG_ERR_NETWORK,
                  "connecting to rank %d at %s: %s", q, c->peers[q].endpoint,
                  zmq_strerror(zmq_errno()));
    }
    return VKG_OK;
}

/* ---- rendezvous ---- */

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

/* Receive up to n frames of one message; returns the frame count (frames beyond n dropped). */
static int recv_frames(void *s, zmq_msg_t *f, int n)
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
        zmq_msg_size(&f[2]) != HELLO_BYTES) {
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
                            "rendezvous: %d of %d ranks joined within %.1f s; missing:%s", joined + 1,
                            c->size, c->timeout_ms / 1000.0, missing);
        }
        zmq_pollitem_t it = {rdv, 0, ZMQ_POLLIN, 0};
        int rc = zmq_poll(&it, 1, (long)((deadline - now) / 1000000) + 1);
        if (rc <= 0)
            continue;
        zmq_msg_t f[3];
        for (int i = 0; i < 3; i++)
            zmq_msg_init(&f[i]);
        int nf = recv_frames(rdv, f, 3);
        vkg_status st = nf >= 1 ? master_hello(c, rdv, js, &joined, f, nf) : VKG_OK;
        for (int i = 0; i < 3; i++)
            zmq_msg_close(&f[i]);
        VKG_TRY(st);
    }
    return VKG_OK;
}

static vkg_status master_send_table(vkg_comm_t *c, void *rdv, const joiner *js)
{
    size_t bytes = (size_t)c->size * ENTRY_BYTES;
    uint8_t *table = calloc(1, bytes);
    VKG_CHECK(table != NULL, VKG_ERR_NOMEM, "out of memory");
    for (int q = 0; q < c->size; q++) {
        memcpy(table + (size_t)q * ENTRY_BYTES, c->peers[q].endpoint, VKG_COMM_ADDR_MAX);
        memcpy(table + (size_t)q * ENTRY_BYTES + VKG_COMM_ADDR_MAX, c->peers[q].pubkey,
               VKG_COMM_KEY_CHARS + 1);
    }
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

static void master_reject_all(vkg_comm_t *c, void *rdv, const joiner *js)
{
    char why[1024];
    snprintf(why, sizeof why, "rank 0 gave up the rendezvous: %s", vkg_error_message());
    for (int q = 1; q < c->size; q++)
        if (js[q].joined)
            send_reject(c, rdv, js[q].rid, js[q].rid_len, why);
}

static vkg_status client_table(vkg_comm_t *c, zmq_msg_t *f, int nf, const char *master)
{
    vkg_wire_hdr h;
    VKG_CHECK(nf == 2 && zmq_msg_size(&f[0]) == VKG_WIRE_HDR_BYTES, VKG_ERR_PROTOCOL,
              "malformed reply from the rendezvous at %s", master);
    vkg__wire_decode(zmq_msg_data(&f[0]), &h);
    VKG_CHECK(h.magic == VKG_WIRE_MAGIC && h.version == VKG_WIRE_VERSION &&
                  h.job_id == c->job_id && h.generation == c->generation && h.sender == 0,
              VKG_ERR_PROTOCOL,
              "the rendezvous at %s answered with a header of another job, generation or version",
              master);
    if (h.kind == VKG_W_REJECT)
        return VKG_FAIL(VKG_ERR_PEER, "rank 0 (%s) rejected rank %d: %.*s", master, c->rank,
                        (int)(zmq_msg_size(&f[1]) > 800 ? 800 : zmq_msg_size(&f[1])),
                        (const char *)zmq_msg_data(&f[1]));
    VKG_CHECK(h.kind == VKG_W_TABLE && zmq_msg_size(&f[1]) == (size_t)c->size * ENTRY_BYTES,
              VKG_ERR_PROTOCOL, "the rendezvous at %s sent a %s of %zu bytes, expected a table",
              master, vkg__wire_kind_name(h.kind), zmq_msg_size(&f[1]));
    const uint8_t *t = zmq_msg_data(&f[1]);
    for (int q = 0; q < c->size; q++) {
        vkg_peer *p = &c->peers[q];
        memcpy(p->endpoint, t + (size_t)q * ENTRY_BYTES, VKG_COMM_ADDR_MAX);
        p->endpoint[VKG_COMM_ADDR_MAX - 1] = '\0';
        memcpy(p->pubkey, t + (size_t)q * ENTRY_BYTES + VKG_COMM_ADDR_MAX, VKG_COMM_KEY_CHARS + 1);
        p->pubkey[VKG_COMM_KEY_CHARS] = '\0';
    }
    return VKG_OK;
}

static vkg_status client_rendezvous(vkg_comm_t *c, void *rdv, void *mon, const char *master,
                                    int64_t deadline)
{
    uint8_t hello[HELLO_BYTES] = {0}, hb[VKG_WIRE_HDR_BYTES];
    put32(hello, (uint32_t)c->size);
    put32(hello + 4, (uint32_t)c->rank);
    memcpy(hello + 8, c->peers[c->rank].endpoint, VKG_COMM_ADDR_MAX);
    memcpy(hello + 8 + VKG_COMM_ADDR_MAX, c->curve_pub, VKG_COMM_KEY_CHARS + 1);
    vkg_wire_hdr h;
    vkg__hdr_init(c, &h, VKG_W_HELLO);
    h.bytes = sizeof hello;
    vkg__wire_encode(&h, hb);
    VKG_CHECK(zmq_send(rdv, hb, sizeof hb, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0 &&
                  zmq_send(rdv, hello, sizeof hello, ZMQ_DONTWAIT) >= 0,
              VKG_ERR_NETWORK, "sending hello to %s: %s", master, zmq_strerror(zmq_errno()));
    for (;;) {
        int64_t now = vkg__now_ns();
        VKG_CHECK(now < deadline, VKG_ERR_TIMEOUT,
                  "rendezvous: no peer table from rank 0 at %s within %.1f s (is rank 0 running, "
                  "with the same master address, port and world size?)",
                  master, c->timeout_ms / 1000.0);
        zmq_pollitem_t it[2] = {{rdv, 0, ZMQ_POLLIN, 0}, {mon, 0, ZMQ_POLLIN, 0}};
        int rc = zmq_poll(it, mon ? 2 : 1, (long)((deadline - now) / 1000000) + 1);
        if (rc <= 0)
            continue;
        if (mon && (it[1].revents & ZMQ_POLLIN)) {
            zmq_msg_t f[2];
            zmq_msg_init(&f[0]);
            zmq_msg_init(&f[1]);
            int nf = recv_frames(mon, f, 2);
            uint16_t ev = 0;
            if (nf >= 1 && zmq_msg_size(&f[0]) >= 2)
                memcpy(&ev, zmq_msg_data(&f[0]), 2);
            zmq_msg_close(&f[0]);
            zmq_msg_close(&f[1]);
            VKG_CHECK(ev != ZMQ_EVENT_HANDSHAKE_FAILED_AUTH &&
                          ev != ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL,
                      VKG_ERR_PEER,
                      "the rendezvous at %s refused this rank's credentials (job id, generation "
                      "or CURVE key mismatch)",
                      master);
        }
        if (it[0].revents & ZMQ_POLLIN) {
            zmq_msg_t f[2];
            zmq_msg_init(&f[0]);
            zmq_msg_init(&f[1]);
            int nf = recv_frames(rdv, f, 2);
            vkg_status st = client_table(c, f, nf, master);
            zmq_msg_close(&f[0]);
            zmq_msg_close(&f[1]);
            return st;
        }
    }
}

static vkg_status rendezvous(vkg_comm_t *c, const char *master, void **prdv)
{
    int64_t deadline = vkg__now_ns() + (int64_t)c->timeout_ms * 1000000;
    void *mon = NULL;
    vkg_status st = VKG_OK;
    int master_rank = c->rank == 0;
    void *rdv = *prdv = zmq_socket(c->zctx, master_rank ? ZMQ_ROUTER : ZMQ_DEALER);
    VKG_CHECK(rdv != NULL, VKG_ERR_NETWORK, "socket: %s", zmq_strerror(zmq_errno()));
    VKG_TRY(setint(rdv, ZMQ_LINGER, master_rank ? 1000 : 0, "ZMQ_LINGER"));
    if (strchr(master, '['))
        VKG_TRY(setint(rdv, ZMQ_IPV6, 1, "ZMQ_IPV6"));
    if (master_rank) {
        joiner *js = calloc((size_t)c->size, sizeof *js);
        VKG_CHECK(js != NULL, VKG_ERR_NOMEM, "out of memory");
        st = secure_server(c, rdv);
        if (st == VKG_OK && zmq_bind(rdv, master) != 0)
            st = VKG_FAIL(VKG_ERR_NETWORK,
                          "binding the rendezvous endpoint %s: %s (another job on this port?)",
                          master, zmq_strerror(zmq_errno()));
        if (st == VKG_OK)
            st = master_wait(c, rdv, js, deadline);
        if (st == VKG_OK)
            st = master_send_table(c, rdv, js);
        if (st < 0)
            master_reject_all(c, rdv, js);
        free(js);
        return st;
    }
    char server_key[VKG_COMM_KEY_CHARS + 1];
    snprintf(server_key, sizeof server_key, "%s", c->peers[0].pubkey);
    VKG_TRY(secure_client(c, rdv, server_key));
    if (c->transport != VKG_COMM_INPROC)
        VKG_TRY(open_monitor(c, rdv, "rdvmon", &mon));
    if (zmq_connect(rdv, master) != 0)
        st = VKG_FAIL(VKG_ERR_NETWORK, "connecting to the rendezvous %s: %s", master,
                      zmq_strerror(zmq_errno()));
    else
        st = client_rendezvous(c, rdv, mon, master, deadline);
    close_monitor(rdv, &mon);
    return st;
}

/* ---- create / destroy ---- */

static vkg_status check_config(const vkg_comm_config *cfg)
{
    VKG_CHECK(cfg->world_size >= 1 && cfg->world_size <= (1 << 20), VKG_ERR_INVALID_ARG,
              "world_size %d out of range [1, 2^20]", cfg->world_size);
    VKG_CHECK(cfg->rank >= 0 && cfg->rank < cfg->world_size, VKG_ERR_INVALID_ARG,
              "rank %d out of range [0, %d)", cfg->rank, cfg->world_size);
    VKG_CHECK(cfg->transport == VKG_COMM_TCP || cfg->transport == VKG_COMM_IPC ||
                  cfg->transport == VKG_COMM_INPROC,
              VKG_ERR_INVALID_ARG, "transport %d is not tcp, ipc or inproc", (int)cfg->transport);
    VKG_CHECK(cfg->timeout_ms > 0, VKG_ERR_INVALID_ARG, "timeout_ms must be > 0, got %d",
              cfg->timeout_ms);
    VKG_CHECK(cfg->job_id != 0, VKG_ERR_INVALID_ARG, "job_id must be nonzero");
    VKG_CHECK(cfg->window == 0 || cfg->window >= 2, VKG_ERR_INVALID_ARG,
              "window must be 0 (default) or >= 2, got %d", cfg->window);
    if (cfg->world_size > 1 && cfg->transport == VKG_COMM_TCP) {
        VKG_CHECK(cfg->master_addr[0], VKG_ERR_INVALID_ARG, "tcp needs a master address");
        VKG_CHECK(cfg->master_port > 0 && cfg->master_port < 65536, VKG_ERR_INVALID_ARG,
                  "master port %d out of range [1, 65535]", cfg->master_port);
        VKG_CHECK(strcmp(cfg->bind_addr, "*") && strcmp(cfg->bind_addr, "0.0.0.0") &&
                      strcmp(cfg->bind_addr, "::"),
                  VKG_ERR_INVALID_ARG,
                  "bind address '%s' is a wildcard; name the interface to listen on",
                  cfg->bind_addr);
    }
    VKG_CHECK(cfg->world_size == 1 || cfg->transport != VKG_COMM_INPROC || cfg->ctx,
              VKG_ERR_INVALID_ARG, "inproc ranks must share a vkg_comm_ctx_t (cfg->ctx)");
    if (cfg->curve_secret[0]) {
        VKG_CHECK(vkg_comm_has_curve(), VKG_ERR_UNSUPPORTED,
                  "CURVE keys given but this libzmq has no CURVE support");
        char derived[VKG_COMM_KEY_CHARS + 1];
        VKG_CHECK(strlen(cfg->curve_secret) == VKG_COMM_KEY_CHARS &&
                      zmq_curve_public(derived, cfg->curve_secret) == 0 &&
                      !strcmp(derived, cfg->curve_public),
                  VKG_ERR_INVALID_ARG,
                  "curve_secret is not a Z85 CURVE secret key matching curve_public");
        VKG_CHECK(!cfg->curve_master[0] || strlen(cfg->curve_master) == VKG_COMM_KEY_CHARS,
                  VKG_ERR_INVALID_ARG, "curve_master is not a 40-character Z85 key");
    }
    return VKG_OK;
}

static vkg_status comm_alloc(const vkg_comm_config *cfg, vkg_comm_t **out)
{
    vkg_comm_t *c = calloc(1, sizeof *c);
    VKG_CHECK(c != NULL, VKG_ERR_NOMEM, "out of memory");
    *out = c;
    c->rank = cfg->rank;
    c->size = cfg->world_size;
    c->local_rank = cfg->local_rank;
    c->transport = cfg->transport;
    c->job_id = cfg->job_id;
    c->generation = cfg->generation;
    c->timeout_ms = cfg->timeout_ms;
    c->seg_bytes = cfg->segment_bytes ? cfg->segment_bytes : DEFAULT_SEGMENT;
    c->seg_bytes = (c->seg_bytes + 3) & ~(size_t)3;
    c->small_bytes = cfg->small_bytes ? cfg->small_bytes
                                      : c->size == 2 ? DEFAULT_SMALL_PAIR : DEFAULT_SMALL;
    c->window = cfg->window ? cfg->window : DEFAULT_WINDOW;
    c->ring_min_ranks = cfg->ring_min_ranks > 0 ? cfg->ring_min_ranks : 9;
    c->credit_from = -1;
    c->progress_ns = vkg__now_ns();
    snprintf(c->password, sizeof c->password, "%016llx:%u", (unsigned long long)c->job_id,
             (unsigned)c->generation);
    snprintf(c->domain, sizeof c->domain, "vkgpt/%s", c->password);
    if (cfg->curve_secret[0]) {
        c->curve = 1;
        snprintf(c->curve_pub, sizeof c->curve_pub, "%s", cfg->curve_public);
        snprintf(c->curve_sec, sizeof c->curve_sec, "%s", cfg->curve_secret);
    }
    c->peers = calloc((size_t)c->size, sizeof *c->peers);
    c->credits = calloc((size_t)c->size, sizeof *c->credits);
    c->guard = calloc(1, sizeof *c->guard);
    if (c->guard)
        c->guard->efd = -1;
    VKG_CHECK(c->peers && c->credits && c->guard, VKG_ERR_NOMEM, "out of memory");
    atomic_init(&c->guard->inflight, 0);
    atomic_init(&c->guard->waiting, 0);
    c->guard->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    VKG_CHECK(c->guard->efd >= 0, VKG_ERR_NETWORK, "eventfd: %s", strerror(errno));
    if (c->curve)
        snprintf(c->peers[0].pubkey, sizeof c->peers[0].pubkey, "%s",
                 cfg->curve_master[0] ? cfg->curve_master : cfg->curve_public);
    return VKG_OK;
}

/* Endpoint to bind (tcp: an IP; ipc: the directory) and rank 0's rendezvous endpoint. */
static vkg_status plan_endpoints(vkg_comm_t *c, const vkg_comm_config *cfg, char *bind,
                                 size_t bcap, char *master, size_t mcap)
{
    if (c->transport == VKG_COMM_IPC) {
        snprintf(bind, bcap, "%s", cfg->ipc_dir);
        snprintf(master, mcap, "ipc://%s/vkg-%016llx-g%u-master.sock", cfg->ipc_dir,
                 (unsigned long long)c->job_id, (unsigned)c->generation);
        return VKG_OK;
    }
    if (c->transport == VKG_COMM_INPROC) {
        snprintf(bind, bcap, "-");
        snprintf(master, mcap, "inproc://vkg-%016llx-g%u-master", (unsigned long long)c->job_id,
                 (unsigned)c->generation);
        return VKG_OK;
    }
    char ip[VKG_COMM_ADDR_MAX], port[16];
    VKG_TRY(resolve_numeric(cfg->master_addr, ip, sizeof ip));
    snprintf(port, sizeof port, "%d", cfg->master_port);
    tcp_endpoint(master, mcap, ip, port);
    if (cfg->bind_addr[0])
        snprintf(bind, bcap, "%s", cfg->bind_addr);
    else if (c->rank == 0)
        snprintf(bind, bcap, "%s", ip);
    else
        VKG_TRY(route_source(ip, cfg->master_port, bind, bcap));
    return VKG_OK;
}

static void comm_free(vkg_comm_t *c)
{
    close_monitor(c->tx, &c->mon);
    if (c->tx)
        zmq_close(c->tx);
    if (c->rx)
        zmq_close(c->rx);
    c->tx = c->rx = NULL;
    vkg__stash_clear(c);
    if (c->ctx) {
        vkg__ctx_unregister(c->ctx, c);
        vkg__ctx_ref(c->ctx, -1);
        if (c->own_ctx)
            vkg_comm_ctx_destroy(&c->ctx);
    }
    if (c->guard && !c->guard_leaked) {
        if (c->guard->efd >= 0)
            close(c->guard->efd);
        free(c->guard);
    }
    free(c->peers);
    free(c->credits);
    free(c);
}

vkg_status vkg_comm_create(const vkg_comm_config *cfg, vkg_comm_t **out)
{
    VKG_CHECK(cfg != NULL && out != NULL, VKG_ERR_INVALID_ARG, "cfg and out must not be NULL");
    *out = NULL;
    VKG_TRY(check_config(cfg));
    vkg_comm_t *c = NULL;
    void *rdv = NULL;
    char bind[VKG_COMM_ADDR_MAX], master[VKG_COMM_ADDR_MAX + 64];
    vkg_status st = comm_alloc(cfg, &c);
    if (st < 0)
        goto fail;
    if (c->size == 1) {
        snprintf(c->peers[0].endpoint, sizeof c->peers[0].endpoint, "(single rank)");
        *out = c;
        return VKG_OK;
    }
    if (cfg->ctx) {
        c->ctx = cfg->ctx;
    } else {
        VKG_TRY_GOTO(st, vkg_comm_ctx_create(&c->ctx), fail);
        c->own_ctx = 1;
    }
    vkg__ctx_ref(c->ctx, 1);
    c->zctx = vkg__ctx_zmq(c->ctx);
    if (c->curve)
        VKG_TRY_GOTO(st, register_keys(c, cfg), fail);
    VKG_TRY_GOTO(st, plan_endpoints(c, cfg, bind, sizeof bind, master, sizeof master), fail);
    VKG_TRY_GOTO(st, open_rx(c, bind), fail);
    VKG_TRY_GOTO(st, rendezvous(c, master, &rdv), fail);
    if (c->rank != 0) {
        zmq_close(rdv);
        rdv = NULL;
    }
    VKG_TRY_GOTO(st, open_tx(c), fail);
    c->seq++;
    c->progress_ns = vkg__now_ns();
    st = vkg__barrier_impl(c);
    if (st < 0) {
        vkg__error_wrap(st, "first barrier after the rendezvous");
        goto fail;
    }
    if (rdv)
        zmq_close(rdv);
    *out = c;
    return VKG_OK;
fail:
    if (c) {
        vkg__comm_fail(c, st, 1);
        if (rdv)
            zmq_close(rdv);
        comm_free(c);
    }
    return st;
}

void vkg_comm_destroy(vkg_comm_t **pc)
{
    if (!pc || !*pc)
        return;
    vkg_comm_t *c = *pc;
    *pc = NULL;
    if (c->size > 1 && !c->failed && c->tx) {
        c->seq++;
        vkg_status st = vkg__barrier_impl(c);
        if (st < 0)
            vkg__comm_fail(c, st, 1);
    }
    comm_free(c);
}

int vkg_comm_rank(const vkg_comm_t *c)
{
    return c->rank;
}

int vkg_comm_size(const vkg_comm_t *c)
{
    return c->size;
}

int vkg_comm_local_rank(const vkg_comm_t *c)
{
    return c->local_rank;
}

vkg_status vkg_comm_set_timeout(vkg_comm_t *c, int timeout_ms)
{
    VKG_CHECK(c != NULL && timeout_ms > 0, VKG_ERR_INVALID_ARG, "timeout must be > 0 ms, got %d",
              timeout_ms);
    c->timeout_ms = timeout_ms;
    return VKG_OK;
}

vkg_status vkg_comm_peer_endpoint(const vkg_comm_t *c, int rank, char *buf, size_t size)
{
    VKG_CHECK(c != NULL && buf != NULL && size > 0, VKG_ERR_INVALID_ARG, "bad arguments");
    VKG_CHECK(rank >= 0 && rank < c->size, VKG_ERR_INVALID_ARG, "rank %d out of range [0, %d)",
              rank, c->size);
    VKG_CHECK(strlen(c->peers[rank].endpoint) < size, VKG_ERR_INVALID_ARG,
              "buffer of %zu bytes too small for %s", size, c->peers[rank].endpoint);
    snprintf(buf, size, "%s", c->peers[rank].endpoint);
    return VKG_OK;
}

void vkg_comm_abort(vkg_comm_t *c, const char *reason)
{
    if (!c || c->failed)
        return;
    vkg_status st = VKG_FAIL(VKG_ERR_ABORTED, "vkg_comm_abort on rank %d: %s", c->rank,
                             reason ? reason : "(no reason given)");
    vkg__comm_fail(c, st, 1);
}
