/* Internals shared by the transport files: the communicator struct, the wire header, the message
 * stash, the wait loop and the send helpers. Nothing here is visible outside transport/.
 *
 * Sockets of one rank:
 *   rx   DEALER bound at this rank's data endpoint; every peer's tx connects to it.
 *   tx   ROUTER connected to every peer's rx, each connection named by the peer's routing id, so a
 *        send picks its destination; ROUTER_MANDATORY turns a vanished peer into EHOSTUNREACH.
 *   mon  PAIR receiving tx's monitor events (tcp/ipc): a dropped connection (peer died, or its
 *        heartbeats stopped because it is frozen) or a refused handshake names the peer at once.
 *   hb   DEALER connected to every peer's rx that never sends a message: it only carries ZMTP
 *        heartbeats, which a full data pipe (a frozen peer stops reading) can never hold up, so
 *        a frozen peer loses this connection within the timeout; hbmon receives its events.
 * High-water marks are unlimited; flow is bounded by the ring's credit window instead.
 */
#ifndef VKG_TRANSPORT_COMM_INTERNAL_H
#define VKG_TRANSPORT_COMM_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include <zmq.h>

#include "base/error.h"
#include "base/escape.h"
#include "os/net.h"
#include "vkgpt/comm.h"

/* ---- wire header: 64 bytes, little-endian, first frame of every message ----
 * Layout: magic u32 @0, version u16 @4, kind u8 @6, flags u8 @7, job id u64 @8, generation u32
 * @16, sender u32 @20, seq u64 @24, segment u32 @32, tag u32 @36, bytes u64 @40, and the job's
 * 16-byte secret @48 (zero in hello, reject and peer table, which precede it). */

#define VKG_WIRE_MAGIC 0x43474B56u /* "VKGC" */
#define VKG_WIRE_VERSION 3
#define VKG_WIRE_HDR_BYTES 64
#define VKG_SECRET_BYTES 16

enum vkg_wire_kind {
    VKG_W_HELLO = 1,  /* rank -> rank 0: rank, world size, data endpoint, public key, host */
    VKG_W_TABLE = 2,  /* rank 0 -> rank: every rank's endpoint, key and host */
    VKG_W_REJECT = 3, /* rank 0 -> rank: why it cannot join */
    VKG_W_DATA = 4,   /* a collective's payload segment */
    VKG_W_CREDIT = 5, /* receiver -> sender: messages consumed so far in this collective */
    VKG_W_ABORT = 6,  /* a rank gives up; payload is the reason */
    VKG_W_P2P = 7,    /* point-to-point payload */
    VKG_W_STALL = 8,  /* a rank's deadline passed: segment = the rank it is waiting for, or
                         VKG_STALL_OVER: it is no longer stalled */
    VKG_W_READY = 9, /* rank -> rank 0: the table and secret arrived, its data socket admits them */
    VKG_W_GO = 10,   /* rank 0 -> rank: every rank is ready; connect to the peers */
    VKG_W_DATA_MAX = 8, /* kinds from VKG_W_DATA to this one travel on data connections */
    VKG_W_KIND_MAX = 10
};
#define VKG_STALL_OVER 0xFFFFFFFFu

/* Collective codes carried in the low byte of a DATA message's tag. */
enum vkg_coll {
    VKG_C_ALLREDUCE = 1,
    VKG_C_BCAST = 2,
    VKG_C_ALLGATHER = 3,
    VKG_C_BARRIER = 4,
    VKG_C_RSCATTER = 5,
    VKG_C_ALLGATHERV = 6,
};

typedef struct vkg_wire_hdr {
    uint32_t magic;
    uint16_t version;
    uint8_t kind;
    uint8_t flags;
    uint64_t job_id;
    uint32_t generation;
    uint32_t sender;
    uint64_t seq;     /* collective sequence number (DATA, CREDIT) or per-peer p2p count */
    uint32_t segment; /* message index within the collective on this link; credit count */
    uint32_t tag;     /* DATA: coll | dtype << 8 | step << 16; P2P: the user's tag */
    uint64_t bytes;   /* payload bytes in the second frame */
    uint8_t secret[VKG_SECRET_BYTES]; /* the job's secret (data connections) */
} vkg_wire_hdr;

void vkg__wire_encode(const vkg_wire_hdr *h, uint8_t out[VKG_WIRE_HDR_BYTES]);
/* 1 when the two secrets are equal (time independent of where they differ). */
int vkg__same_secret(const uint8_t *a, const uint8_t *b);
/* crypto.c, over libsodium. n random bytes into buf (VKG_ERR_IO when libsodium cannot start). */
vkg_status vkg__crypto_random(void *buf, size_t n);
/* out = keyed BLAKE2b of msg[0, n) under the job's secret (VKG_MAC_BYTES bytes). */
#define VKG_MAC_BYTES 32
void vkg__crypto_mac(const uint8_t key[VKG_SECRET_BYTES], const void *msg, size_t n,
                     uint8_t out[VKG_MAC_BYTES]);
/* 1 when the two MACs are equal (time independent of where they differ). */
int vkg__crypto_same_mac(const uint8_t *a, const uint8_t *b);
void vkg__wire_decode(const uint8_t in[VKG_WIRE_HDR_BYTES], vkg_wire_hdr *h);
const char *vkg__wire_kind_name(int kind);
const char *vkg__coll_name(int coll);

/* ---- the communicator ---- */

typedef struct vkg_guard {
    atomic_long inflight; /* zero-copy payloads zmq still holds */
    atomic_int waiting;   /* the owner sleeps until inflight reaches 0 */
    vkg_os_wake *wake;    /* signalled by the free callback to wake the owner */
} vkg_guard;

#define VKG_HOST_BYTES 192 /* host identity text (host.c), NUL-terminated */

typedef struct vkg_peer {
    char endpoint[VKG_COMM_ADDR_MAX];
    char host[VKG_HOST_BYTES]; /* "" = unknown: local to no other rank */
    char pubkey[VKG_COMM_KEY_CHARS + 1];
    int lost;           /* its connection dropped: died, froze (heartbeat) or closed */
    int refused;        /* it refused our handshake */
    int stalled_on;     /* its stall notice: 1 + the rank it waits for; 0: none came */
    int64_t last_rx_ns; /* when its last message arrived (0: none yet) */
    uint64_t p2p_sent, p2p_recvd;
} vkg_peer;

typedef struct vkg_inmsg {
    vkg_wire_hdr h;
    zmq_msg_t body; /* initialised; empty when h.bytes == 0 */
} vkg_inmsg;

struct vkg_comm {
    vkg_comm_ctx_t *ctx;
    int own_ctx;
    void *zctx;
    int rank, size, local_rank;
    vkg_comm_transport transport;
    uint64_t job_id;
    uint32_t generation;
    int timeout_ms;
    size_t seg_bytes, small_bytes;
    int window, ring_min_ranks;

    void *rx, *tx, *mon, *hb, *hbmon;
    vkg_peer *peers;
    char domain[64];   /* rendezvous ZAP domain "vkgpt/<job>:<gen>" */
    char password[48]; /* rendezvous PLAIN password "<job>:<gen>" (guessable: admits a join) */
    /* The job's secret, drawn by rank 0 and handed out in the peer table: data connections
     * present it as their PLAIN password (hex) and every message carries it. */
    uint8_t secret[VKG_SECRET_BYTES];
    char secret_hex[2 * VKG_SECRET_BYTES + 1];
    char data_domain[64]; /* ZAP domain of this rank's data socket: admits the secret only */
    int curve;
    char curve_pub[VKG_COMM_KEY_CHARS + 1], curve_sec[VKG_COMM_KEY_CHARS + 1];
    uint8_t *curve_keys; /* the authorized public keys, 32 bytes each */
    size_t ncurve_keys;

    uint64_t seq;      /* collectives started so far */
    uint64_t tx_bytes; /* payload bytes handed to the data socket (headers not counted) */
    vkg_inmsg *stash;
    size_t nstash, cap_stash;

    uint64_t credit;   /* credits granted by credit_from in the current collective */
    int credit_from;   /* -1 outside ring collectives; VKG_CREDIT_ALL: per peer, in credits[] */
    int credit_moved;  /* set by the wait loop when credit grew */
    uint64_t *credits; /* [size]: credits per peer when credit_from == VKG_CREDIT_ALL */

    int64_t progress_ns; /* last time anything arrived or completed */
    int stall_seen;      /* 1 + the first rank whose stall notice arrived; 0: none */
    int stall_told;      /* this rank sent its own stall notice */
    int64_t stall_end;   /* once a stall is known: when this rank gives up (0: no stall) */
    int peer_aborted;    /* the failure came from a peer's abort: do not echo it */
    int rcvtimeo;        /* ZMQ_RCVTIMEO currently set on rx (ms) */
    vkg_status failed;   /* VKG_OK while healthy */
    char fail_msg[1024];
    vkg_guard *guard;
    int guard_leaked;

    /* Ranks on this host (host.c): local[0..nlocal) in rank order, this one at local_index. */
    int *local;
    int nlocal, local_index;
    /* Hosts (host.c): nhosts of them, ordered by their first rank; across[0..nhosts) holds, per
     * host, the rank whose local index equals this rank's (-1 where that host has fewer ranks),
     * this rank at across_index; hosts_uniform: every host holds nlocal ranks; host_of[q]: rank
     * q's host; leaders[h]: host h's first rank; lanes / most_local: the fewest / most ranks a
     * host holds. */
    int *across, *host_of, *leaders;
    int nhosts, across_index, hosts_uniform, lanes, most_local;
    int hier; /* collectives in two levels: shm holds this host's ranks only (hier.c) */
    /* Segments of this rank's groups that run in shared memory (borrowed: each group owns its
     * segment and takes it off this list before freeing it; a group may outlive the
     * communicator, whose vkg__shm_free then unlinks them), so that a failing rank's abort word
     * reaches them as well as shm (vkg__shm_abort). */
    struct vkg_shm **group_segs;
    int ngroup_segs, cap_group_segs;
    vkg_comm_shm shm_mode;
    size_t shm_chunk;    /* bytes of a buffer one step of the shm pipeline moves (0 = default) */
    struct vkg_shm *shm; /* the host's segment when every rank is local and shm is used */
    /* tests only (vkg__comm_shm_fix_tag): name the segments this rank creates by shm_tag
     * instead of fresh random bytes */
    int shm_tag_fixed;
    uint8_t shm_tag[16];
    char path[256]; /* "shm (4 ranks on this host, single-copy on)": what the collectives use */
};

/* ---- context (ctx.c) ---- */

void *vkg__ctx_zmq(vkg_comm_ctx_t *ctx);
/* Admit, on connections to sockets of ZAP domain `domain` until vkg__ctx_unregister(ctx, owner),
 * CURVE clients holding one of these 32-byte public keys (keys may be NULL) and, when password
 * is not NULL, PLAIN clients presenting it. Domains "vkgpt/<p>" without a registration admit
 * PLAIN password <p> (the rendezvous); any other unregistered domain admits nobody. */
vkg_status vkg__ctx_register(vkg_comm_ctx_t *ctx, const void *owner, const char *domain,
                             const uint8_t *keys, size_t nkeys, const char *password);
void vkg__ctx_unregister(vkg_comm_ctx_t *ctx, const void *owner);
void vkg__ctx_ref(vkg_comm_ctx_t *ctx, int delta);

/* ---- host identity (host.c) and shared memory (shm.c, shm_coll.c) ---- */

/* This process's host identity: host name, boot id, IPC and network namespace ("" when they
 * cannot be read: then no rank counts as local). */
vkg_status vkg__host_identity(char *out, size_t cap);
/* Fill c->local / nlocal / local_index from the peers' host identities. */
void vkg__find_local(vkg_comm_t *c);
/* Fill c->nhosts, across, across_index, hosts_uniform, host_of, leaders, lanes and most_local
 * (after vkg__find_local). */
void vkg__find_hosts(vkg_comm_t *c);
/* After the first barrier: set up the host's segment when the policy and the hosts allow it
 * (collective over the communicator); sets c->shm and c->path. */
vkg_status vkg__shm_setup(vkg_comm_t *c);
/* Release the host's segment and the list of the groups' segments (which stay the groups'). */
void vkg__shm_free(vkg_comm_t *c);
/* A failing rank's abort word and reason, for the local peers waiting in the host's segment and
 * in its groups' segments. */
void vkg__shm_abort(vkg_comm_t *c, const char *reason);
vkg_status vkg__shm_allreduce(vkg_comm_t *c, const void *send, void *recv, size_t count,
                              vkg_comm_dtype dt, vkg_comm_op op);
vkg_status vkg__shm_broadcast(vkg_comm_t *c, void *buf, size_t bytes, int root);
vkg_status vkg__shm_allgather(vkg_comm_t *c, const void *send, size_t bytes, void *recv);
/* vkg_comm_reduce_scatter(_dtype) and vkg_comm_allgatherv in the segment (every rank local): the
 * same chunks and the same order of additions as the ZeroMQ engine (rank order, or with ring the
 * ring allreduce's order for this count; bf16 widened, summed in fp32, rounded once).
 * allgatherv works on count elements of es bytes; name is the collective named in errors. */
vkg_status vkg__shm_reduce_scatter(vkg_comm_t *c, void *buf, size_t count, const size_t *bounds,
                                   vkg_comm_dtype dt, int ring);
vkg_status vkg__shm_allgatherv(vkg_comm_t *c, const char *name, void *buf, size_t count, size_t es,
                               const size_t *bounds);
/* Allreduce over several hosts (c->hier): reduce-scatter in the host's segment, a ring between
 * the hosts per lane (c->lanes of them), allgather in the segment (hier.c). */
vkg_status vkg__hier_allreduce(vkg_comm_t *c, const void *send, void *recv, size_t count,
                               vkg_comm_dtype dt, vkg_comm_op op);
/* Broadcast and allgather over several hosts (c->hier): one copy per host over ZeroMQ, the rest
 * in each host's segment (hier_copy.c). */
vkg_status vkg__hier_broadcast(vkg_comm_t *c, void *buf, size_t bytes, int root);
vkg_status vkg__hier_allgather(vkg_comm_t *c, const void *send, size_t bytes, void *recv);

/* ---- small files (config.c) ---- */

/* Open path for reading as *out when it is a regular file of at most max_bytes (a key file, a
 * list of keys): a FIFO, a device or a directory is refused without blocking or reading, naming
 * `what` and path. */
vkg_status vkg__open_small_file(const char *path, const char *what, long max_bytes, FILE **out);

/* ---- sockets (sockets.c) and rendezvous (rendezvous.c) ---- */

vkg_status vkg__setint(void *s, int opt, int v, const char *name);
/* Make s a PLAIN or CURVE server of ZAP domain `domain`; no-op for inproc. */
vkg_status vkg__secure_server(vkg_comm_t *c, void *s, const char *domain);
/* Make s a PLAIN client presenting `password`, or a CURVE client of a server whose public key is
 * server_key. */
vkg_status vkg__secure_client(vkg_comm_t *c, void *s, const char *server_key, const char *password);
/* Register the authorized CURVE keys (cfg's list and file, else this rank's own key) for the
 * rendezvous domain. */
vkg_status vkg__register_keys(vkg_comm_t *c, const vkg_comm_config *cfg);
/* Once the secret is known: admit it (and the CURVE keys) on this rank's data socket. */
vkg_status vkg__admit_secret(vkg_comm_t *c);
/* The largest payload frame a peer of this job sends (a ring segment, a one-step collective, a
 * point-to-point piece); data sockets refuse larger frames. */
size_t vkg__max_payload(const vkg_comm_t *c);
/* Watch s's connections (lost, refused) on a new PAIR *pair; close with vkg__close_monitor. */
vkg_status vkg__open_monitor(vkg_comm_t *c, void *s, const char *tag, void **pair);
void vkg__close_monitor(void *s, void **pair);
/* What this rank binds (tcp: an IP; ipc: the directory) and rank 0's rendezvous endpoint. */
vkg_status vkg__plan_endpoints(vkg_comm_t *c, const vkg_comm_config *cfg, char *bind, size_t bcap,
                               char *master, size_t mcap);
vkg_status vkg__open_rx(vkg_comm_t *c, const char *bind);
vkg_status vkg__open_tx(vkg_comm_t *c);
/* A communicator with no sockets (world_size ranks, this one `rank`): what the fuzzing entry
 * feeds messages to. Free with vkg__comm_unconnected_free. */
vkg_status vkg__comm_unconnected(int world_size, int rank, vkg_comm_t **out);
void vkg__comm_unconnected_free(vkg_comm_t **pc);
/* Rank 0: draw the job's secret and admit it on this rank's data socket. */
vkg_status vkg__new_secret(vkg_comm_t *c);
/* Join through rank 0 and fill c->peers. *prdv is the rendezvous socket (rank 0 keeps it until
 * the first barrier; the caller closes it). */
vkg_status vkg__rendezvous(vkg_comm_t *c, const char *master, void **prdv);

/* ---- wait loop and sends (io.c, wait.c) ---- */

enum vkg_event { VKG_EV_MSG = 1, VKG_EV_CREDIT = 2, VKG_EV_DRAINED = 3 };
#define VKG_CREDIT_ALL (-2)

typedef struct vkg_expect {
    int kind;         /* VKG_W_DATA or VKG_W_P2P; 0 = no message wanted */
    int sender;       /* -1: any */
    uint64_t seq;     /* DATA: collective number */
    uint32_t tag;     /* P2P tag to match */
    int segment;      /* DATA: -1 any, else the exact message index */
    int credit;       /* return VKG_EV_CREDIT when credit from c->credit_from grows */
    int drain;        /* return VKG_EV_DRAINED when no zero-copy payload is in flight */
    int all_peers;    /* a lost connection to any peer fails the wait (collectives) */
    int waiting_on;   /* the rank named when the deadline passes */
    const char *what; /* "allreduce #3", for messages */
} vkg_expect;

/* Wait for what ex asks for. On VKG_EV_MSG *m holds the message (caller closes m->body). Fails
 * on the deadline (timeout without progress), an abort from a peer, a lost or refusing peer, or a
 * malformed/foreign message; those failures are recorded but the communicator is not yet failed:
 * the public entry points call vkg__comm_fail. */
vkg_status vkg__comm_wait(vkg_comm_t *c, const vkg_expect *ex, vkg_inmsg *m, int *event);
/* One look, without blocking, at what the ZeroMQ side knows (aborts, stall notices, lost or
 * frozen peers) and at the deadline, for waits that happen elsewhere (the segment's counters):
 * VKG_OK while the wait may go on. */
vkg_status vkg__comm_poll(vkg_comm_t *c, const vkg_expect *ex);

/* Decode and validate a received message given as its frames: the header frame (hsize bytes at
 * hdr; NULL when it is not header-sized), the payload frame's size (had_body: there was one)
 * and whether more frames followed (extra). *h is filled when the header could be decoded. */
vkg_status vkg__check_frames(const vkg_comm_t *c, const uint8_t *hdr, size_t hsize,
                             size_t body_size, int had_body, int extra, vkg_wire_hdr *h);

/* io.c internals shared with wait.c. recv_wait: receive one message, waiting up to wait_ms (0:
 * not at all), validated (*got = 0 when none came). dispatch: handle a received message (abort,
 * credit, sequence checks); a match for ex is moved to *out (*matched), others are stashed.
 * stash_take: the first stashed match for ex. raw_send: send without recording an error (returns
 * the zmq errno or 0; takes over body). explain_loss: see wait.c. */
vkg_status vkg__recv_wait(vkg_comm_t *c, vkg_inmsg *m, int *got, int wait_ms);
vkg_status vkg__dispatch(vkg_comm_t *c, const vkg_expect *ex, vkg_inmsg *in, vkg_inmsg *out,
                         int *matched);
int vkg__stash_take(vkg_comm_t *c, const vkg_expect *ex, vkg_inmsg *m);
int vkg__raw_send(vkg_comm_t *c, int peer, const vkg_wire_hdr *h, zmq_msg_t *body);
/* A peer vanished: give an abort that explains it a short moment to arrive and report that
 * instead; otherwise return loss unchanged. */
vkg_status vkg__explain_loss(vkg_comm_t *c, vkg_status loss);

/* Fill the common header fields (magic, version, job, generation, sender). */
void vkg__hdr_init(const vkg_comm_t *c, vkg_wire_hdr *h, int kind);

/* Send header + payload to peer. zc: the payload is referenced, not copied, until zmq is done
 * with it (tracked by the guard; drain before the buffer may change). */
vkg_status vkg__send(vkg_comm_t *c, int peer, const vkg_wire_hdr *h, const void *data, size_t bytes,
                     int zc);
/* Send header + a message body this call takes over (closed even on failure). */
vkg_status vkg__send_msg(vkg_comm_t *c, int peer, const vkg_wire_hdr *h, zmq_msg_t *body);
/* Wait until no zero-copy payload is in flight. */
vkg_status vkg__drain(vkg_comm_t *c, const char *what, int waiting_on);

/* Record a failure (first one wins), tell every peer to abort unless the failure came from a
 * peer's abort, release payloads zmq still holds, and return st. */
vkg_status vkg__comm_fail(vkg_comm_t *c, vkg_status st, int tell_peers);
/* VKG_OK when c may run a call; otherwise the recorded failure with its message. */
vkg_status vkg__comm_usable(vkg_comm_t *c);

void vkg__stash_clear(vkg_comm_t *c);
int64_t vkg__now_ns(void);

/* Zero-copy pays off from this size: below it a memcpy is cheaper than the wakeup that waiting
 * for zmq to release the buffer may cost. Never over inproc, where the receiver would read the
 * sender's buffer directly and a failed rank could leave it referenced. */
#ifndef VKG_ZC_MIN_BYTES
#define VKG_ZC_MIN_BYTES (256u << 10)
#endif
static inline int vkg__use_zc(const vkg_comm_t *c, size_t bytes)
{
    return bytes >= VKG_ZC_MIN_BYTES && c->transport != VKG_COMM_INPROC;
}

/* Free callback for zero-copy payloads: hint is the communicator's guard. */
void vkg__zc_free(void *data, void *hint);

/* ---- reduction kernels (reduce.c) ---- */

float vkg__bf16_to_f32(uint16_t h);
uint16_t vkg__f32_to_bf16(float f);
float vkg__f16_to_f32(uint16_t h);
uint16_t vkg__f32_to_f16(float f);

/* dst[i] = a[i] + b[i] (dst may alias b); then /n when avg_n > 0. */
void vkg__add_f32(float *dst, const float *a, const float *b, size_t n, int avg_n);
/* acc[i] += widen(x[i]) for a 16-bit dtype. */
void vkg__acc_16(float *acc, const uint16_t *x, size_t n, vkg_comm_dtype dt);
/* dst[i] = widen(x[i]). */
void vkg__widen_16(float *dst, const uint16_t *x, size_t n, vkg_comm_dtype dt);
/* dst[i] = widen(a[i]) + widen(b[i]), a being 16-bit values of dt at any byte offset (a
 * received payload). */
void vkg__sum_16(float *dst, const void *a, const uint16_t *b, size_t n, vkg_comm_dtype dt);
/* dst[i] = narrow((a[i] + widen(b[i])) [/avg_n]), a at any byte offset holding fp32 (a_es 4) or
 * 16-bit values of dt (a_es 2). */
void vkg__final_16(uint16_t *dst, const void *a, size_t a_es, const uint16_t *b, size_t n,
                   vkg_comm_dtype dt, int avg_n);
/* dst[i] = reduction over q of srcs[q][i] in q order (identical on every rank), /n for avg. */
void vkg__reduce_ordered(void *dst, const void *const *srcs, int nsrc, size_t n, vkg_comm_dtype dt,
                         int avg);

/* ---- collectives (ring.c, coll.c) ---- */

vkg_status vkg__ring_allreduce(vkg_comm_t *c, const void *send, void *recv, size_t count,
                               vkg_comm_dtype dt, vkg_comm_op op);
/* The ring allreduce among n ranks members[0..n) (this one members[me]; NULL: the whole
 * communicator in rank order); the same engine, messages and order of additions for that ring. */
vkg_status vkg__ring_allreduce_among(vkg_comm_t *c, const int *members, int n, int me,
                                     const void *send, void *recv, size_t count, vkg_comm_dtype dt,
                                     vkg_comm_op op);
/* Reduce-scatter and allgather with every peer directly (a2a.c): 2 hops instead of 2(N-1). */
vkg_status vkg__a2a_allreduce(vkg_comm_t *c, const void *send, void *recv, size_t count,
                              vkg_comm_dtype dt, vkg_comm_op op);
/* One phase of the all-to-all engine over chunks [bounds[q], bounds[q + 1]) of buf (count
 * elements of dt, in place): reduce (a SUM reduce-scatter: each rank's own chunk becomes the sum,
 * in rank order, or with ring in the order vkg__ring_allreduce adds each element for this count;
 * 16-bit values travel as they are, are widened, summed in fp32 and rounded once; the rest of buf
 * is left alone), or not (an allgather: each rank's chunk goes to every other rank). */
vkg_status vkg__a2a_scatter(vkg_comm_t *c, void *buf, size_t count, const size_t *bounds,
                            vkg_comm_dtype dt, int reduce, int ring);
/* floor(count * chunk / n) without overflow: chunks differ in length by at most one element. */
size_t vkg__chunk_start(size_t count, int chunk, int n);
vkg_status vkg__ring_allgather(vkg_comm_t *c, const void *send, size_t bytes, void *recv);
/* The ring allgather among members[0..n) (this one members[me]) of blocks of unequal sizes:
 * member k's block is bytes [off[k], off[k + 1]) of buf, which every member ends up holding. */
vkg_status vkg__ring_allgatherv_among(vkg_comm_t *c, const int *members, int n, int me,
                                      uint8_t *buf, const size_t *off);
vkg_status vkg__chain_broadcast(vkg_comm_t *c, void *buf, size_t bytes, int root);
/* The chain broadcast along members[0..n) (this one members[me]) from members[0]. */
vkg_status vkg__chain_broadcast_among(vkg_comm_t *c, const int *members, int n, int me, void *buf,
                                      size_t bytes);
vkg_status vkg__barrier_impl(vkg_comm_t *c);

#endif
