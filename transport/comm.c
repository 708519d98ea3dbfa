/* Communicator setup and teardown: validating the config, allocating, then binding this rank's
 * data socket, the rendezvous, connecting to every peer and a first barrier (create); a final
 * barrier when healthy, then closing everything (destroy); the accessors and vkg_comm_abort.
 * Not here: sockets and security (sockets.c), the rendezvous (rendezvous.c), the wait loop
 * (wait.c) and the collectives (coll.c, ring.c, a2a.c).
 */
#include "comm_internal.h"
#include "comm_testing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Defaults measured with `vkgpt bench allreduce` on 2 cores (docs/BENCHMARKS.md): 1 MiB segments
 * halve the per-message wakeups of 512 KiB ones; the one-step exchange beats the ring up to
 * about 2 MiB for two ranks (the same bytes, one round instead of two) and 512 KiB beyond. */
#define DEFAULT_SEGMENT (1u << 20)
#define DEFAULT_WINDOW 8
#define DEFAULT_SMALL_PAIR (2u << 20)
#define DEFAULT_SMALL (512u << 10)

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
    VKG_CHECK(cfg->transport != VKG_COMM_IPC || cfg->world_size == 1 || zmq_has("ipc"),
              VKG_ERR_UNSUPPORTED,
              "transport ipc: this libzmq has no ipc:// (Windows' has none); use tcp (127.0.0.1 "
              "between the ranks of one host)");
    VKG_CHECK(cfg->shm == VKG_COMM_SHM_AUTO || cfg->shm == VKG_COMM_SHM_REQUIRE ||
                  cfg->shm == VKG_COMM_SHM_OFF,
              VKG_ERR_INVALID_ARG, "shm policy %d is not auto, require or off", (int)cfg->shm);
    VKG_CHECK(cfg->shm_chunk_bytes <= (64u << 20), VKG_ERR_INVALID_ARG,
              "shm_chunk_bytes %zu above 64 MiB", cfg->shm_chunk_bytes);
    VKG_CHECK(cfg->timeout_ms > 0, VKG_ERR_INVALID_ARG, "timeout_ms must be > 0, got %d",
              cfg->timeout_ms);
    VKG_CHECK(cfg->job_id != 0, VKG_ERR_INVALID_ARG, "job_id must be nonzero");
    VKG_CHECK(cfg->window == 0 || cfg->window >= 2, VKG_ERR_INVALID_ARG,
              "window must be 0 (default) or >= 2, got %d", cfg->window);
    if (cfg->world_size > 1 && cfg->transport == VKG_COMM_TCP) {
        VKG_CHECK(cfg->master_addr[0], VKG_ERR_INVALID_ARG, "tcp needs a master address");
        VKG_CHECK(cfg->master_port > 0 && cfg->master_port < 65536, VKG_ERR_INVALID_ARG,
                  "master port %d out of range [1, 65535]", cfg->master_port);
        VKG_CHECK(cfg->listen_all ||
                      (strcmp(cfg->bind_addr, "*") && strcmp(cfg->bind_addr, "0.0.0.0") &&
                       strcmp(cfg->bind_addr, "::")),
                  VKG_ERR_INVALID_ARG,
                  "bind address '%s' is a wildcard: this rank would listen on every interface; "
                  "name the interface to listen on, or set VKG_COMM_LISTEN_ALL=1 to do so "
                  "deliberately",
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
                     : c->size == 2   ? DEFAULT_SMALL_PAIR
                                      : DEFAULT_SMALL;
    c->window = cfg->window ? cfg->window : DEFAULT_WINDOW;
    c->ring_min_ranks = cfg->ring_min_ranks > 0 ? cfg->ring_min_ranks : 9;
    c->shm_mode = cfg->shm;
    c->shm_chunk = cfg->shm_chunk_bytes;
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
    c->local = calloc((size_t)c->size, sizeof *c->local);
    c->across = calloc((size_t)c->size, sizeof *c->across);
    c->host_of = calloc((size_t)c->size, sizeof *c->host_of);
    c->leaders = calloc((size_t)c->size, sizeof *c->leaders);
    c->guard = calloc(1, sizeof *c->guard);
    VKG_CHECK(c->peers && c->credits && c->guard && c->local && c->across && c->host_of &&
                  c->leaders,
              VKG_ERR_NOMEM, "out of memory");
    VKG_TRY(vkg__host_identity(c->peers[c->rank].host, sizeof c->peers[c->rank].host));
    atomic_init(&c->guard->inflight, 0);
    atomic_init(&c->guard->waiting, 0);
    char why[160];
    VKG_CHECK(vkg_os_wake_create(&c->guard->wake, why, sizeof why) == 0, VKG_ERR_NETWORK,
              "the wake-up of zero-copy sends: %s", why);
    if (c->curve)
        snprintf(c->peers[0].pubkey, sizeof c->peers[0].pubkey, "%s",
                 cfg->curve_master[0] ? cfg->curve_master : cfg->curve_public);
    return VKG_OK;
}

/* Endpoint to bind (tcp: an IP; ipc: the directory) and rank 0's rendezvous endpoint. */
/* libzmq leaves ipc socket files behind when it closes a listener: remove ours. */
static void unlink_ipc(const vkg_comm_t *c, const char *endpoint)
{
    if (c->transport == VKG_COMM_IPC && !strncmp(endpoint, "ipc://", 6))
        remove(endpoint + 6);
}

static void close_rendezvous(vkg_comm_t *c, void *rdv, const char *master)
{
    if (!rdv)
        return;
    zmq_close(rdv);
    if (c->rank == 0)
        unlink_ipc(c, master);
}

static void comm_free(vkg_comm_t *c)
{
    vkg__close_monitor(c->tx, &c->mon);
    vkg__close_monitor(c->hb, &c->hbmon);
    if (c->hb)
        zmq_close(c->hb);
    c->hb = NULL;
    if (c->tx && c->failed) {
        /* vkg__comm_fail set no linger; the abort it queued for the peers may not have left
         * yet, and would be dropped by the close: give it a moment. No zero-copy payload is in
         * flight (vkg__comm_fail closed tx otherwise), so nothing of the caller's is held. */
        int ms = c->timeout_ms / 4 < 250 ? c->timeout_ms / 4 : 250;
        zmq_setsockopt(c->tx, ZMQ_LINGER, &ms, sizeof ms);
    }
    if (c->tx)
        zmq_close(c->tx);
    if (c->rx) {
        zmq_close(c->rx);
        unlink_ipc(c, c->peers[c->rank].endpoint);
    }
    c->tx = c->rx = NULL;
    vkg__stash_clear(c);
    if (c->ctx) {
        vkg__ctx_unregister(c->ctx, c);
        vkg__ctx_ref(c->ctx, -1);
        if (c->own_ctx)
            vkg_comm_ctx_destroy(&c->ctx);
    }
    if (c->guard && !c->guard_leaked) {
        vkg_os_wake_destroy(&c->guard->wake);
        free(c->guard);
    }
    vkg__shm_free(c);
    free(c->local);
    free(c->across);
    free(c->host_of);
    free(c->leaders);
    free(c->curve_keys);
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
        snprintf(c->path, sizeof c->path, "single rank");
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
        VKG_TRY_GOTO(st, vkg__register_keys(c, cfg), fail);
    VKG_TRY_GOTO(st, vkg__plan_endpoints(c, cfg, bind, sizeof bind, master, sizeof master), fail);
    VKG_TRY_GOTO(st, vkg__open_rx(c, bind), fail);
    if (c->rank == 0)
        VKG_TRY_GOTO(st, vkg__new_secret(c), fail);
    VKG_TRY_GOTO(st, vkg__rendezvous(c, master, &rdv), fail);
    if (c->rank != 0) {
        close_rendezvous(c, rdv, master);
        rdv = NULL;
    }
    VKG_TRY_GOTO(st, vkg__open_tx(c), fail);
    c->seq++;
    c->progress_ns = vkg__now_ns();
    st = vkg__barrier_impl(c);
    if (st < 0) {
        vkg__error_wrap(st, "first barrier after the rendezvous");
        goto fail;
    }
    close_rendezvous(c, rdv, master);
    rdv = NULL;
    vkg__find_local(c);
    vkg__find_hosts(c);
    VKG_TRY_GOTO(st, vkg__shm_setup(c), fail);
    *out = c;
    return VKG_OK;
fail:
    if (c) {
        vkg__comm_fail(c, st, 1);
        close_rendezvous(c, rdv, master);
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

vkg_status vkg__comm_unconnected(int world_size, int rank, vkg_comm_t **out)
{
    vkg_comm_config cfg;
    vkg_comm_config_default(&cfg);
    cfg.world_size = world_size;
    cfg.rank = rank;
    cfg.transport = VKG_COMM_INPROC;
    *out = NULL;
    vkg_comm_t *c = NULL;
    vkg_status st = comm_alloc(&cfg, &c);
    if (st < 0) {
        if (c)
            comm_free(c);
        return st;
    }
    *out = c;
    return VKG_OK;
}

void vkg__comm_unconnected_free(vkg_comm_t **pc)
{
    if (pc && *pc) {
        comm_free(*pc);
        *pc = NULL;
    }
}

void vkg__comm_secret(const vkg_comm_t *c, uint8_t out[16])
{
    memcpy(out, c->secret, VKG_SECRET_BYTES);
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

const char *vkg_comm_path(const vkg_comm_t *c)
{
    return c ? c->path : "";
}

int vkg_comm_uses_shm(const vkg_comm_t *c)
{
    return c && c->shm != NULL;
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
