/* The sockets of a communicator: options, addresses, security (PLAIN or CURVE on both ends of a
 * connection, the authorized CURVE keys), connection monitors, binding this rank's data socket
 * and connecting to every peer. Nothing here blocks on the network.
 * Not here: the rendezvous (rendezvous.c), create and destroy (comm.c).
 */
#include "comm_internal.h"
#include "os/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SOCK_BUF (4 << 20)

static vkg_status setopt(void *s, int opt, const void *v, size_t n, const char *name)
{
    VKG_CHECK(zmq_setsockopt(s, opt, v, n) == 0, VKG_ERR_NETWORK, "setting %s: %s", name,
              zmq_strerror(zmq_errno()));
    return VKG_OK;
}

vkg_status vkg__setint(void *s, int opt, int v, const char *name)
{
    return setopt(s, opt, &v, sizeof v, name);
}

/* ---- addresses ---- */

/* The numeric address of rank 0's host. A name that does not resolve yet is asked again every
 * 250 ms for up to timeout_ms (the job's deadline): a Kubernetes pod's DNS record, or a cloud
 * host's, can appear seconds after the other pods start. Said once on stderr while waiting. */
static vkg_status resolve_numeric(const char *host, char *out, size_t cap, int timeout_ms)
{
    char why[160];
    double t0 = vkg_os_now_ms();
    int said = 0;
    while (vkg_os_resolve_numeric(host, out, cap, why, sizeof why) != 0) {
        if (vkg_os_now_ms() - t0 >= timeout_ms)
            return VKG_FAIL(VKG_ERR_NETWORK,
                            "cannot resolve master address '%s': %s (still, at the job's "
                            "deadline)",
                            host, why);
        if (!said++)
            fprintf(stderr,
                    "vkgpt: rank 0's host '%s' does not resolve yet (%s); asking again for up to "
                    "%g s\n",
                    host, why, timeout_ms / 1000.0);
        vkg_os_sleep_ms(250);
    }
    return VKG_OK;
}

/* The local address the system would use to reach ip:port. */
static vkg_status route_source(const char *ip, int port, char *out, size_t cap)
{
    char why[160];
    VKG_CHECK(vkg_os_route_source(ip, port, out, cap, why, sizeof why) == 0, VKG_ERR_NETWORK,
              "no route from this host to the master %s (%s); set the bind address", ip, why);
    return VKG_OK;
}

static void tcp_endpoint(char *out, size_t cap, const char *ip, const char *port)
{
    snprintf(out, cap, strchr(ip, ':') ? "tcp://[%s]:%s" : "tcp://%s:%s", ip, port);
}

/* ---- security ---- */

vkg_status vkg__secure_server(vkg_comm_t *c, void *s, const char *domain)
{
    if (c->transport == VKG_COMM_INPROC)
        return VKG_OK;
    VKG_TRY(setopt(s, ZMQ_ZAP_DOMAIN, domain, strlen(domain), "ZMQ_ZAP_DOMAIN"));
    if (c->curve) {
        VKG_TRY(vkg__setint(s, ZMQ_CURVE_SERVER, 1, "ZMQ_CURVE_SERVER"));
        return setopt(s, ZMQ_CURVE_SECRETKEY, c->curve_sec, VKG_COMM_KEY_CHARS + 1,
                      "ZMQ_CURVE_SECRETKEY");
    }
    return vkg__setint(s, ZMQ_PLAIN_SERVER, 1, "ZMQ_PLAIN_SERVER");
}

vkg_status vkg__secure_client(vkg_comm_t *c, void *s, const char *server_key, const char *password)
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
    return setopt(s, ZMQ_PLAIN_PASSWORD, password, strlen(password), "ZMQ_PLAIN_PASSWORD");
}

/* Collect the authorized CURVE keys (config list, file, own key) and register them. */
vkg_status vkg__register_keys(vkg_comm_t *c, const vkg_comm_config *cfg)
{
    size_t cap = 8, n = 0;
    uint8_t *keys = malloc(cap * 32);
    char *text = NULL;
    vkg_status st = VKG_OK;
    VKG_CHECK(keys != NULL, VKG_ERR_NOMEM, "out of memory");
    size_t tlen = (cfg->curve_authorized ? strlen(cfg->curve_authorized) : 0) + 2;
    FILE *f = NULL;
    if (cfg->curve_authorized_file[0]) {
        VKG_TRY_GOTO(
            st,
            vkg__open_small_file(cfg->curve_authorized_file, "authorized keys file", 16 << 20, &f),
            fail);
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
    st = vkg__ctx_register(c->ctx, c, c->domain, keys, n, NULL);
    if (st == VKG_OK) {
        c->curve_keys = keys; /* registered again for the data socket once the secret is known */
        c->ncurve_keys = n;
        keys = NULL;
    }
fail:
    if (f)
        fclose(f);
    free(text);
    free(keys);
    return st;
}

vkg_status vkg__admit_secret(vkg_comm_t *c)
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < VKG_SECRET_BYTES; i++) {
        c->secret_hex[2 * i] = hex[c->secret[i] >> 4];
        c->secret_hex[2 * i + 1] = hex[c->secret[i] & 15];
    }
    c->secret_hex[2 * VKG_SECRET_BYTES] = '\0';
    if (c->transport == VKG_COMM_INPROC)
        return VKG_OK;
    return vkg__ctx_register(c->ctx, c, c->data_domain, c->curve_keys, c->ncurve_keys,
                             c->curve ? NULL : c->secret_hex);
}

size_t vkg__max_payload(const vkg_comm_t *c)
{
    size_t m = c->seg_bytes > c->small_bytes ? c->seg_bytes : c->small_bytes;
    return m > 4096 ? m : 4096;
}

/* ---- sockets ---- */

vkg_status vkg__open_monitor(vkg_comm_t *c, void *s, const char *tag, void **pair)
{
    char ep[96];
    snprintf(ep, sizeof ep, "inproc://vkg-%s-%p", tag, (void *)c);
    int events = ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                 ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL;
    VKG_CHECK(zmq_socket_monitor(s, ep, events) == 0, VKG_ERR_NETWORK, "monitoring %s: %s", tag,
              zmq_strerror(zmq_errno()));
    *pair = zmq_socket(c->zctx, ZMQ_PAIR);
    VKG_CHECK(*pair != NULL, VKG_ERR_NETWORK, "monitor socket: %s", zmq_strerror(zmq_errno()));
    VKG_TRY(vkg__setint(*pair, ZMQ_LINGER, 0, "ZMQ_LINGER"));
    VKG_CHECK(zmq_connect(*pair, ep) == 0, VKG_ERR_NETWORK, "connecting monitor %s: %s", ep,
              zmq_strerror(zmq_errno()));
    return VKG_OK;
}

void vkg__close_monitor(void *s, void **pair)
{
    if (*pair) {
        zmq_socket_monitor(s, NULL, 0);
        zmq_close(*pair);
        *pair = NULL;
    }
}

vkg_status vkg__open_rx(vkg_comm_t *c, const char *bind_ip)
{
    char ep[2 * VKG_COMM_ADDR_MAX];
    c->rx = zmq_socket(c->zctx, ZMQ_DEALER);
    VKG_CHECK(c->rx != NULL, VKG_ERR_NETWORK, "socket: %s", zmq_strerror(zmq_errno()));
    VKG_TRY(vkg__setint(c->rx, ZMQ_RCVHWM, 0, "ZMQ_RCVHWM"));
    VKG_TRY(vkg__setint(c->rx, ZMQ_SNDHWM, 0, "ZMQ_SNDHWM"));
    VKG_TRY(vkg__setint(c->rx, ZMQ_LINGER, 0, "ZMQ_LINGER"));
    int64_t maxmsg = (int64_t)vkg__max_payload(c);
    VKG_TRY(setopt(c->rx, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg, "ZMQ_MAXMSGSIZE"));
    snprintf(c->data_domain, sizeof c->data_domain, "vkgpt-data/%p", (void *)c);
    VKG_TRY(vkg__secure_server(c, c->rx, c->data_domain));
    switch (c->transport) {
    case VKG_COMM_TCP:
        VKG_TRY(vkg__setint(c->rx, ZMQ_RCVBUF, SOCK_BUF, "ZMQ_RCVBUF"));
        if (strchr(bind_ip, ':'))
            VKG_TRY(vkg__setint(c->rx, ZMQ_IPV6, 1, "ZMQ_IPV6"));
        tcp_endpoint(ep, sizeof ep, bind_ip, "*");
        break;
    case VKG_COMM_IPC:
        VKG_TRY(vkg__setint(c->rx, ZMQ_RCVBUF, SOCK_BUF, "ZMQ_RCVBUF"));
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

vkg_status vkg__open_tx(vkg_comm_t *c)
{
    c->tx = zmq_socket(c->zctx, ZMQ_ROUTER);
    VKG_CHECK(c->tx != NULL, VKG_ERR_NETWORK, "socket: %s", zmq_strerror(zmq_errno()));
    VKG_TRY(vkg__setint(c->tx, ZMQ_ROUTER_MANDATORY, 1, "ZMQ_ROUTER_MANDATORY"));
    VKG_TRY(vkg__setint(c->tx, ZMQ_SNDHWM, 0, "ZMQ_SNDHWM"));
    VKG_TRY(vkg__setint(c->tx, ZMQ_RCVHWM, 0, "ZMQ_RCVHWM"));
    VKG_TRY(vkg__setint(c->tx, ZMQ_LINGER, 200, "ZMQ_LINGER"));
    if (c->transport != VKG_COMM_INPROC) {
        /* a peer whose I/O thread answers no heartbeat for the whole timeout is dead or frozen;
         * a shorter freeze (a stalled VM, a debugger) is survived */
        int ivl = c->timeout_ms / 10 > 50 ? c->timeout_ms / 10 : 50;
        int hb_timeout = c->timeout_ms > 200 ? c->timeout_ms : 200;
        VKG_TRY(vkg__setint(c->tx, ZMQ_SNDBUF, SOCK_BUF, "ZMQ_SNDBUF"));
        VKG_TRY(vkg__setint(c->tx, ZMQ_RECONNECT_IVL, -1, "ZMQ_RECONNECT_IVL"));
        VKG_TRY(vkg__setint(c->tx, ZMQ_HEARTBEAT_IVL, ivl, "ZMQ_HEARTBEAT_IVL"));
        VKG_TRY(vkg__setint(c->tx, ZMQ_HEARTBEAT_TIMEOUT, hb_timeout, "ZMQ_HEARTBEAT_TIMEOUT"));
        VKG_TRY(vkg__open_monitor(c, c->tx, "txmon", &c->mon));
        c->hb = zmq_socket(c->zctx, ZMQ_DEALER);
        VKG_CHECK(c->hb != NULL, VKG_ERR_NETWORK, "socket: %s", zmq_strerror(zmq_errno()));
        VKG_TRY(vkg__setint(c->hb, ZMQ_LINGER, 0, "ZMQ_LINGER"));
        VKG_TRY(vkg__setint(c->hb, ZMQ_RECONNECT_IVL, -1, "ZMQ_RECONNECT_IVL"));
        VKG_TRY(vkg__setint(c->hb, ZMQ_HEARTBEAT_IVL, ivl, "ZMQ_HEARTBEAT_IVL"));
        VKG_TRY(vkg__setint(c->hb, ZMQ_HEARTBEAT_TIMEOUT, hb_timeout, "ZMQ_HEARTBEAT_TIMEOUT"));
        VKG_TRY(vkg__open_monitor(c, c->hb, "hbmon", &c->hbmon));
    }
    for (int q = 0; q < c->size; q++) {
        if (q == c->rank)
            continue;
        uint8_t rid[5] = {'R', (uint8_t)q, (uint8_t)(q >> 8), (uint8_t)(q >> 16),
                          (uint8_t)(q >> 24)};
        VKG_TRY(setopt(c->tx, ZMQ_CONNECT_ROUTING_ID, rid, sizeof rid, "ZMQ_CONNECT_ROUTING_ID"));
        VKG_TRY(vkg__secure_client(c, c->tx, c->peers[q].pubkey, c->secret_hex));
        if (strchr(c->peers[q].endpoint, '['))
            VKG_TRY(vkg__setint(c->tx, ZMQ_IPV6, 1, "ZMQ_IPV6"));
        VKG_CHECK(zmq_connect(c->tx, c->peers[q].endpoint) == 0, VKG_ERR_NETWORK,
                  "connecting to rank %d at %s: %s", q, c->peers[q].endpoint,
                  zmq_strerror(zmq_errno()));
        if (c->hb) {
            VKG_TRY(vkg__secure_client(c, c->hb, c->peers[q].pubkey, c->secret_hex));
            if (strchr(c->peers[q].endpoint, '['))
                VKG_TRY(vkg__setint(c->hb, ZMQ_IPV6, 1, "ZMQ_IPV6"));
            VKG_CHECK(zmq_connect(c->hb, c->peers[q].endpoint) == 0, VKG_ERR_NETWORK,
                      "connecting heartbeats to rank %d at %s: %s", q, c->peers[q].endpoint,
                      zmq_strerror(zmq_errno()));
        }
    }
    return VKG_OK;
}

vkg_status vkg__plan_endpoints(vkg_comm_t *c, const vkg_comm_config *cfg, char *bind, size_t bcap,
                               char *master, size_t mcap)
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
    VKG_TRY(resolve_numeric(cfg->master_addr, ip, sizeof ip, cfg->timeout_ms));
    VKG_CHECK(
        cfg->listen_all || (strcmp(ip, "0.0.0.0") && strcmp(ip, "::")), VKG_ERR_INVALID_ARG,
        "master address '%s' is a wildcard: rank 0 would listen on every interface of its "
        "host; give the address of the interface the other ranks reach (this host's IP or "
        "name), or set listen_all (VKG_COMM_LISTEN_ALL=1, vkgpt's --listen-all) to listen on all "
        "deliberately",
        cfg->master_addr);
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
