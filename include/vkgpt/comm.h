/* vkgpt collectives: one vkg_comm_t per rank, ring allreduce and friends over ZeroMQ.
 *
 * A communicator joins `world_size` ranks. Rank 0 binds a rendezvous socket at the master address;
 * every other rank connects, announces its own data endpoint and receives the peer table. After
 * that each rank sends to every peer over one connection per pair and receives on one bound socket.
 *
 * Collectives (allreduce, reduce-scatter, broadcast, allgather(v), barrier) must be called by
 * every rank in the same order with matching arguments; point-to-point send/recv pair by (peer,
 * tag) in FIFO order.
 *
 * Deadlines: every blocking call counts only the time it spends waiting: from its start or the
 * last message that arrived, whichever is later (a rank's own work between calls never counts).
 * When that exceeds the communicator's timeout the rank tells the others whom it waits for.
 * Over tcp and ipc each connection carries heartbeats answered by the peer's I/O thread even
 * while the peer computes: a peer that answers none for the timeout (dead, or frozen by SIGSTOP
 * or a hung machine) loses its connection and is named by every rank within about twice the
 * timeout; a live peer that is computing is waited for, however long its step. A wait fails when
 * the chain of who waits for whom ends at a lost rank, or closes a cycle (ranks called different
 * collectives). Over inproc there is no liveness signal: a wait fails after the timeout plus a
 * grace of a quarter of it (at most 0.5 s), every rank naming the end of the chain (0 waits for
 * 1, which waits for a stuck 2: both name 2). A failure on one rank (timeout, dead peer, a
 * rejected message, vkg_comm_abort) is broadcast to the others, which then fail too. After a
 * failure a communicator only accepts vkg_comm_destroy.
 *
 * Transports: tcp (any hosts), ipc (Unix sockets, one host), inproc (ranks are threads of one
 * process sharing a vkg_comm_ctx_t). Shared memory: at the rendezvous every rank reports its host
 * (host name, boot id, IPC and network namespace). When every rank of the communicator is on one
 * host, the host's first rank creates an anonymous memfd segment and hands it to the others over
 * an abstract Unix socket after a challenge proving they hold the job's secret; allreduce,
 * broadcast and allgather then run in the segment (reduce-scatter + allgather in place, the same
 * order of additions as the ZeroMQ path, so the bits are the same), everything else over ZeroMQ.
 * Large allreduces read the peers' buffers in place: buffers from vkg_comm_buffer_alloc in the
 * segment's pools through the mapping, others with process_vm_readv (single-copy) where the
 * kernel allows it (VKG_COMM_CMA=0 turns that off; VKG_COMM_CMA_MIN sets its threshold).
 * Policy (cfg.shm): by default tcp and ipc use it where possible, inproc does not; REQUIRE fails
 * create when it is impossible; OFF never uses it. A rank that dies, freezes or fails while
 * others wait in the segment is reported by the same deadlines, heartbeats and aborts as above.
 *
 * Security. Rank 0 draws a 128-bit random secret per job and hands it to each rank in the peer
 * table at the rendezvous. Data connections authenticate with it (ZMTP PLAIN, checked by a ZAP
 * handler) and every message carries it in its validated header, so no process that did not
 * join the rendezvous can connect to a rank or inject a message; frames larger than the largest
 * legitimate payload are refused before they are buffered. The rendezvous itself admits any
 * process presenting the job id (computable from the launcher's variables: it keeps jobs apart,
 * it is not a secret), and rank 0 fails the start when two processes claim one rank.
 * What plain mode does NOT protect against: anyone who can read the network traffic (the
 * secret and all data travel in clear), or who reaches rank 0's port during start-up and joins
 * in place of a rank that has not yet arrived. Use it on a private network or one host. On any
 * network you do not control, use CURVE (curve_public/curve_secret, `vkgpt keygen`): every
 * connection is encrypted and only authorized public keys are admitted, at the rendezvous too.
 * By default nothing listens on a wildcard address: a master or bind address of 0.0.0.0 / :: is
 * refused unless listen_all (VKG_COMM_LISTEN_ALL=1) asks for it.
 *
 * Algorithms: payloads up to small_bytes take one step (everyone sends to everyone; allreduce
 * then reduces the N inputs in rank order). Larger allreduces are a reduce-scatter plus an
 * allgather streamed in segments under a credit window: around the ring for 2 ranks and from
 * ring_min_ranks on, straight to each chunk's owner for 3 to ring_min_ranks - 1. Either way one
 * rank computes each final value, so every rank gets identical bits. From 256 KiB payloads leave
 * zero-copy over tcp and ipc (copied over inproc, so no rank ever reads another's buffer).
 * Point-to-point messages travel in pieces of at most the segment size.
 *
 * Threading: a vkg_comm_t is used by one thread at a time. Several communicators (several ranks)
 * may live in one process; nothing here is global. This header exposes no ZeroMQ types.
 */
#ifndef VKGPT_COMM_H
#define VKGPT_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "vkgpt/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vkg_comm vkg_comm_t;
typedef struct vkg_comm_ctx vkg_comm_ctx_t;

typedef enum vkg_comm_transport {
    VKG_COMM_TCP = 0,
    VKG_COMM_IPC = 1,
    VKG_COMM_INPROC = 2,
} vkg_comm_transport;

typedef enum vkg_comm_shm {
    VKG_COMM_SHM_AUTO = 0,    /* the segment when every rank shares this host (not inproc) */
    VKG_COMM_SHM_REQUIRE = 1, /* the segment, or create fails saying why it cannot */
    VKG_COMM_SHM_OFF = 2,     /* ZeroMQ only */
} vkg_comm_shm;

typedef enum vkg_comm_dtype {
    VKG_COMM_F32 = 0,
    VKG_COMM_BF16 = 1, /* reduced in fp32, rounded once (nearest even) */
    VKG_COMM_F16 = 2,  /* IEEE half; reduced in fp32, rounded once */
} vkg_comm_dtype;

typedef enum vkg_comm_op {
    VKG_COMM_SUM = 0,
    VKG_COMM_AVG = 1, /* sum divided by world_size */
} vkg_comm_op;

typedef enum vkg_comm_launcher {
    VKG_COMM_LAUNCH_NONE = 0, /* no launcher variables: a single rank */
    VKG_COMM_LAUNCH_TORCHRUN,
    VKG_COMM_LAUNCH_SLURM,
    VKG_COMM_LAUNCH_OPENMPI,
    VKG_COMM_LAUNCH_VKGPT,    /* VKG_RANK / VKG_WORLD_SIZE */
    VKG_COMM_LAUNCH_KUBEFLOW, /* PET_NODE_RANK / PET_NNODES (a PyTorchJob without torchrun) */
    VKG_COMM_LAUNCH_PMI,      /* PMI_RANK / PMI_SIZE (MPICH's and Intel MPI's mpiexec) */
    VKG_COMM_LAUNCH_JOBSET,   /* JOB_COMPLETION_INDEX / VKG_WORLD_SIZE (Kubernetes indexed Jobs) */
    VKG_COMM_LAUNCH_FLUX,     /* FLUX_TASK_RANK / FLUX_JOB_SIZE */
} vkg_comm_launcher;

#define VKG_COMM_KEY_CHARS 40 /* a CURVE key in Z85 text */
#define VKG_COMM_ADDR_MAX 256

typedef struct vkg_comm_config {
    int rank;       /* 0 .. world_size-1 */
    int world_size; /* >= 1 */
    int local_rank; /* rank within the host (for device choice); informational */
    vkg_comm_launcher launcher;
    vkg_comm_transport transport;
    /* tcp: host or IP of rank 0's rendezvous socket and its port. */
    char master_addr[VKG_COMM_ADDR_MAX];
    int master_port;
    /* tcp: the interface (IP) this rank's data socket binds; "" = the local address that routes
     * to master_addr (127.0.0.1 for a loopback master). Never a wildcard. */
    char bind_addr[VKG_COMM_ADDR_MAX];
    /* tcp: 1 allows a wildcard master or bind address (0.0.0.0, ::, *), listening on every
     * interface of the host; 0 (default) refuses it, naming the fix. */
    int listen_all;
    /* ipc: directory holding the socket files (default $TMPDIR, or /tmp without it). */
    char ipc_dir[VKG_COMM_ADDR_MAX];
    uint64_t job_id;     /* shared by every rank of a job, nonzero; rejects foreign messages */
    uint32_t generation; /* restart count; messages of another generation are rejected */
    int timeout_ms; /* deadline of a wait without progress, and heartbeat limit (default 60000) */
    /* Tuning (0 = default). segment_bytes: ring pipeline unit (1 MiB); window: segments in flight
     * per link (8); small_bytes: allreduce and broadcast payloads up to this size (allgather:
     * bytes x (world_size - 1)) use the one-step algorithms (2 MiB for two ranks, 512 KiB
     * otherwise). Every rank must use the same values. */
    size_t segment_bytes;
    int window;
    size_t small_bytes;
    /* From 3 ranks up to ring_min_ranks - 1, larger allreduces go straight to each chunk's
     * owner and back (2 hops per segment); from ring_min_ranks on (and for 2 ranks) around the
     * ring (2(N-1) hops, one busy connection per rank). 0 = 9. */
    int ring_min_ranks;
    /* Shared memory between the ranks of one host (see the file comment), and the bytes of a
     * buffer one step of its pipeline moves (0 = 256 KiB; rounded up to 4 KiB; every rank must
     * use the same value). */
    vkg_comm_shm shm;
    size_t shm_chunk_bytes;
    /* CURVE (tcp/ipc): when curve_secret is set every connection is encrypted and a ZAP handler
     * admits only authorized public keys. curve_master: rank 0's public key ("" = curve_public:
     * one key pair for the whole job). curve_authorized: Z85 public keys separated by spaces,
     * commas or newlines; NULL = curve_public only. Borrowed during vkg_comm_create only.
     * curve_authorized_file: a file of such keys ('#' starts a comment), read by create and
     * added to curve_authorized. */
    char curve_public[VKG_COMM_KEY_CHARS + 1];
    char curve_secret[VKG_COMM_KEY_CHARS + 1];
    char curve_master[VKG_COMM_KEY_CHARS + 1];
    const char *curve_authorized;
    char curve_authorized_file[VKG_COMM_ADDR_MAX];
    /* Shared context: required for inproc (all ranks of the job in one context), optional
     * otherwise (NULL = a private context). Borrowed: must outlive the communicator. */
    vkg_comm_ctx_t *ctx;
} vkg_comm_config;

/* Defaults: a single rank over tcp on 127.0.0.1:29500, job id 1, timeout 60 s. */
void vkg_comm_config_default(vkg_comm_config *cfg);

/* Fill cfg from launcher variables, starting from vkg_comm_config_default(). envp is a
 * NULL-terminated "NAME=value" array, or NULL for the process environment. Recognised, first
 * match wins: torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT,
 * TORCHELASTIC_RUN_ID, TORCHELASTIC_RESTART_COUNT), Slurm (SLURM_PROCID, SLURM_NTASKS,
 * SLURM_LOCALID, SLURM_JOB_ID, SLURM_STEP_ID, SLURM_NNODES), Open MPI (OMPI_COMM_WORLD_RANK,
 * OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE), then vkgpt's own
 * VKG_RANK / VKG_WORLD_SIZE / VKG_LOCAL_RANK. Always honoured: VKG_JOB_ID (16 hex digits or any
 * string, hashed), VKG_COMM_TRANSPORT (as vkg_comm_transport_select), VKG_COMM_TIMEOUT (seconds),
 * VKG_COMM_IPC_DIR, VKG_COMM_BIND_ADDR, VKG_COMM_LISTEN_ALL (0|1), VKG_COMM_GENERATION,
 * VKG_COMM_CURVE_KEY (key file from `vkgpt keygen`), VKG_COMM_CURVE_AUTHORIZED (file of public
 * keys). Without MASTER_ADDR a job confined to one host uses 127.0.0.1; without a job id variable
 * the id is derived from the launcher and master address (this separates jobs, it is not a secret).
 * Under torchrun with TORCHELASTIC_USE_AGENT_STORE=True, torchrun's own store listens on
 * MASTER_PORT, so rank 0 binds MASTER_PORT + 1. No launcher variables: world_size 1. Errors
 * (VKG_ERR_INVALID_ARG) name the variable and its bad value. */
vkg_status vkg_comm_config_from_env(vkg_comm_config *cfg, char *const *envp);

/* "tcp", "ipc" or "inproc" to the enum; VKG_ERR_INVALID_ARG listing the valid names otherwise. */
vkg_status vkg_comm_transport_parse(const char *name, vkg_comm_transport *out);
const char *vkg_comm_transport_name(vkg_comm_transport t);
/* A --transport / VKG_COMM_TRANSPORT value: "tcp", "ipc" or "inproc" set *t (shared memory
 * stays automatic), "shm" requires shared memory and "zmq" forbids it (both leave *t as it
 * is). VKG_ERR_INVALID_ARG listing the valid names otherwise. */
vkg_status vkg_comm_transport_select(const char *name, vkg_comm_transport *t, vkg_comm_shm *shm);
const char *vkg_comm_shm_name(vkg_comm_shm s);
const char *vkg_comm_launcher_name(vkg_comm_launcher l);
/* Bytes per element of a dtype (4 or 2). */
size_t vkg_comm_dtype_size(vkg_comm_dtype dt);

/* A ZeroMQ context with its ZAP (authentication) handler. Several communicators may share one;
 * inproc ranks must. Destroy it only after every communicator using it is destroyed. */
vkg_status vkg_comm_ctx_create(vkg_comm_ctx_t **out);
void vkg_comm_ctx_destroy(vkg_comm_ctx_t **pctx);

/* Join the job described by cfg: bind this rank's data socket, rendezvous through rank 0,
 * connect to every peer and pass a first barrier. Blocks until all world_size ranks have joined
 * or cfg->timeout_ms passed. Errors: VKG_ERR_INVALID_ARG (bad config, named), VKG_ERR_NETWORK
 * (bind/connect failures with the endpoint), VKG_ERR_TIMEOUT (missing ranks), VKG_ERR_PROTOCOL /
 * VKG_ERR_PEER (rejected by rank 0: world size, duplicate rank, credentials). */
vkg_status vkg_comm_create(const vkg_comm_config *cfg, vkg_comm_t **out);

/* Leave the job. If the communicator is healthy this is collective: a final barrier (bounded by
 * the timeout) makes sure no rank closes while another still needs its messages. Then closes
 * every socket and frees everything. Accepts NULL; sets *pc to NULL. */
void vkg_comm_destroy(vkg_comm_t **pc);

int vkg_comm_rank(const vkg_comm_t *c);
int vkg_comm_size(const vkg_comm_t *c);
int vkg_comm_local_rank(const vkg_comm_t *c);
/* What the collectives of c run on, for start-up lines: "shm (2 ranks on this host)", or
 * "zmq tcp" / "zmq ipc" / "zmq inproc" with the reason shared memory is not used. */
const char *vkg_comm_path(const vkg_comm_t *c);
/* 1 when allreduce, broadcast and allgather run in the shared-memory segment. */
int vkg_comm_uses_shm(const vkg_comm_t *c);

/* A buffer for collectives of `bytes` bytes (> 0), aligned to 4096 bytes, in *out. When c's
 * collectives run in the host's shared-memory segment it lies in this rank's pool in it (size:
 * VKG_COMM_SHM_POOL of the host's first rank, default 512 MiB per rank), where the local peers
 * read it in place: an allreduce whose send and recv buffers are in their pools on every rank
 * copies nothing in. When the pool is full or there is no segment (and for c == NULL) it is
 * ordinary memory. Any buffer may be passed to the collectives; these only save copies. Free
 * with vkg_comm_buffer_free on the same c before vkg_comm_destroy (which unmaps the pools).
 * Errors: VKG_ERR_INVALID_ARG (bytes == 0), VKG_ERR_NOMEM. */
vkg_status vkg_comm_buffer_alloc(vkg_comm_t *c, size_t bytes, void **out);
/* Release a buffer of vkg_comm_buffer_alloc (NULL: nothing). VKG_ERR_INVALID_ARG, and nothing
 * freed, for a pointer into this rank's pool that is no live buffer (a double free). */
vkg_status vkg_comm_buffer_free(vkg_comm_t *c, void *p);
/* 1 when [p, p + bytes) lies in this rank's pool of c's segment (the local peers read it in
 * place), 0 otherwise: ordinary memory, a full pool, or no segment. */
int vkg_comm_buffer_in_segment(const vkg_comm_t *c, const void *p, size_t bytes);

/* Change the deadline of later blocking calls (milliseconds, > 0). */
vkg_status vkg_comm_set_timeout(vkg_comm_t *c, int timeout_ms);

/* The data endpoint of `rank` as the peer table has it ("tcp://127.0.0.1:40123"). */
vkg_status vkg_comm_peer_endpoint(const vkg_comm_t *c, int rank, char *buf, size_t size);

/* recv[i] = op over ranks of send[i], for count elements of dtype. send == recv is in place;
 * otherwise the buffers must not overlap. Every rank gets bitwise identical results. Buffers are
 * not referenced after return. */
vkg_status vkg_comm_allreduce(vkg_comm_t *c, const void *send, void *recv, size_t count,
                              vkg_comm_dtype dtype, vkg_comm_op op);

/* In-place SUM reduce-scatter of count floats over chunks of the caller's choosing: chunk q is
 * buf[bounds[q], bounds[q + 1]) (bounds: world_size + 1 offsets from 0 to count, nondecreasing,
 * the same on every rank; a chunk may be empty). On return rank q's chunk holds the sum over the
 * ranks, bitwise what vkg_comm_allreduce(c, buf, buf, count, VKG_COMM_F32, VKG_COMM_SUM) would
 * leave there (its order of additions is kept: rank order for the one-step and owner paths, and
 * from ring_min_ranks ranks on the ring's, which starts each of its chunks at another rank); the
 * rest of buf is left as it was. Each rank sends the others their chunks straight (N - 1
 * connections busy), about (N - 1)/N of the buffer; in the shared-memory segment when every rank
 * is on this host. Across hosts (the two-level path of a job whose hosts hold several ranks) it
 * is the two-level allreduce in place, so that its chunks have that allreduce's bits (the rest
 * of buf ends summed too); each host sends 2(H-1)/H of the buffer to the other H - 1 hosts,
 * where chunks sent straight would cost a host of L of the N ranks L(N-L)/N: more only where a
 * host holds a single rank (3/2 as much at 2 + 1 ranks). Errors:
 * VKG_ERR_INVALID_ARG naming bad bounds; VKG_ERR_PROTOCOL when a peer's chunks differ. Same as
 * vkg_comm_reduce_scatter_dtype(c, buf, count, bounds, VKG_COMM_F32). */
vkg_status vkg_comm_reduce_scatter(vkg_comm_t *c, float *buf, size_t count, const size_t *bounds);
/* vkg_comm_reduce_scatter for count elements of dtype VKG_COMM_F32 or VKG_COMM_BF16 (buf aligned
 * to the element size). For bf16 each rank's chunk holds bitwise what vkg_comm_allreduce(c, buf,
 * buf, count, VKG_COMM_BF16, VKG_COMM_SUM) would leave there: the inputs widened, summed in fp32
 * in the allreduce's order for this count (the order thresholds compare count x 2 bytes with
 * small_bytes, as the bf16 allreduce does) and rounded once to nearest even. Every path sends the
 * 16-bit inputs as they are, so a bf16 reduce-scatter moves half the bytes of an fp32 one (the
 * ZeroMQ engine and the segment alike; no path falls back to fp32). Across hosts it is the
 * two-level bf16 allreduce, as for fp32. Errors: vkg_comm_reduce_scatter's; VKG_ERR_INVALID_ARG for
 * any other dtype (f16 included), naming it, with the communicator left usable; over ZeroMQ,
 * VKG_ERR_PROTOCOL when a peer calls it with another dtype. */
vkg_status vkg_comm_reduce_scatter_dtype(vkg_comm_t *c, void *buf, size_t count,
                                         const size_t *bounds, vkg_comm_dtype dtype);
/* In-place allgather of unequal chunks: rank q's chunk buf[bounds[q], bounds[q + 1]) is copied
 * into every other rank's buf (bounds as for vkg_comm_reduce_scatter). After a reduce-scatter
 * with the same bounds, every rank holds vkg_comm_allreduce's result bit for bit. */
vkg_status vkg_comm_allgatherv(vkg_comm_t *c, float *buf, size_t count, const size_t *bounds);

/* Copy `bytes` of root's buf into every other rank's buf. */
vkg_status vkg_comm_broadcast(vkg_comm_t *c, void *buf, size_t bytes, int root);

/* recv (world_size * bytes) receives every rank's `bytes` of send, in rank order. send may be
 * recv + rank * bytes (in place). */
vkg_status vkg_comm_allgather(vkg_comm_t *c, const void *send, size_t bytes, void *recv);

/* Returns once every rank has entered the barrier. */
vkg_status vkg_comm_barrier(vkg_comm_t *c);

/* Point-to-point: send returns when buf may be reused; recv waits for the next message from peer
 * with this tag and fails (VKG_ERR_PROTOCOL) unless it has exactly `bytes` bytes. */
/* Tags with the high bit set (1 << 31) are the groups' (below). */
vkg_status vkg_comm_send(vkg_comm_t *c, int peer, uint32_t tag, const void *buf, size_t bytes);
vkg_status vkg_comm_recv(vkg_comm_t *c, int peer, uint32_t tag, void *buf, size_t bytes);

/* ---- groups ----
 * A group is a subset of a communicator's ranks (a pipeline stage's data-parallel ranks, the
 * first and last stage of a pipeline) with collectives of its own, carried by the communicator's
 * point-to-point messages under tags of the group's (id, sequence number), so that groups, their
 * successive calls and the communicator's own collectives never take each other's messages.
 * When every member shares this host (and the communicator's policy allows shared memory) the
 * collectives run in a segment of the members' own, with the same bits. The communicator's whole
 * world is a group too (vkg_group_world), whose collectives are the communicator's own (every
 * engine: the segment, the two-level path across hosts, the ring), so that a caller holds one
 * kind of object whatever it reduces over. Deadlines, liveness and aborts are the communicator's.
 * Every member calls every group collective in the same order with the same arguments (but its
 * own buffer); other ranks do not take part. Dtypes: VKG_COMM_F32 and VKG_COMM_BF16 (buffers of
 * float or uint16_t); any other is VKG_ERR_INVALID_ARG naming it. */
typedef struct vkg_group vkg_group_t;

#define VKG_GROUP_MAX_ID 2047 /* ids 0..VKG_GROUP_MAX_ID */

/* A group of the n distinct ranks `ranks` of c (listed in group-rank order; this rank must be
 * one of them), named by id (distinct among the groups this rank is in). c must outlive the
 * group. Errors: VKG_ERR_INVALID_ARG naming the bad rank, id or count. */
vkg_status vkg_group_create(vkg_comm_t *c, const int *ranks, int n, uint32_t id, vkg_group_t **out);
/* The group of every rank of c in rank order, whose collectives are c's own (vkg_comm_allreduce,
 * vkg_comm_reduce_scatter_dtype, vkg_comm_allgatherv, ...): the same bits. */
vkg_status vkg_group_world(vkg_comm_t *c, uint32_t id, vkg_group_t **out);
void vkg_group_destroy(vkg_group_t **pg);
int vkg_group_rank(const vkg_group_t *g);
int vkg_group_size(const vkg_group_t *g);
/* The communicator rank of group rank i. */
int vkg_group_member(const vkg_group_t *g, int i);
/* In-place SUM allreduce of n elements of dtype; every member gets bitwise identical results, in
 * the same order every run. World: vkg_comm_allreduce's. Other groups: fp32 is a ring
 * (reduce-scatter, allgather) over the members in group-rank order, each element of chunk k of
 * the buffer cut in size nearly equal chunks summed from member k on around the ring; bf16 sends
 * the 16-bit inputs as they are, each element widened, summed in fp32 in group-rank order and
 * rounded once to nearest even (each member sums its chunk, then the chunks are gathered). */
vkg_status vkg_group_allreduce(vkg_group_t *g, void *buf, size_t n, vkg_comm_dtype dtype);
/* In-place SUM reduce-scatter of n elements of dtype over chunks of the caller's choosing: chunk q
 * is buf[bounds[q], bounds[q + 1]) (bounds: size + 1 offsets from 0 to n, nondecreasing, the same
 * on every member; a chunk may be empty). On return member q's chunk holds bitwise what
 * vkg_group_allreduce(g, buf, n, dtype) leaves there; the rest of buf is left as it was or
 * summed too, by engine (the segment's fp32 path sums the whole, as does the world across hosts).
 * Over messages each member sends the others their chunks straight: (size - 1)/size of the
 * buffer. Errors: VKG_ERR_INVALID_ARG naming bad bounds or dtype. */
vkg_status vkg_group_reduce_scatter(vkg_group_t *g, void *buf, size_t n, const size_t *bounds,
                                    vkg_comm_dtype dtype);
/* In-place allgather of unequal chunks of n elements of dtype: member q's chunk buf[bounds[q],
 * bounds[q + 1]) is copied into every other member's buf (bounds as for the reduce-scatter).
 * After a reduce-scatter with the same bounds every member holds vkg_group_allreduce's result. */
vkg_status vkg_group_allgatherv(vkg_group_t *g, void *buf, size_t n, const size_t *bounds,
                                vkg_comm_dtype dtype);
/* A compressed form for vkg_group_allreduce_codec: bytes(n) is one member's block for n floats
 * (rounded up to 4 by the call); pack writes a member's n floats x into its block (zeroed
 * first); unpack_add adds a block's n values to sum in fp32 (first: stores them instead). ctx is
 * the caller's (pack may read state of its own there, e.g. to compress a difference). */
typedef struct vkg_comm_codec {
    size_t (*bytes)(size_t n, void *ctx);
    void (*pack)(const float *x, size_t n, void *block, void *ctx);
    void (*unpack_add)(const void *block, size_t n, int first, float *sum, void *ctx);
    void *ctx;
} vkg_comm_codec;
/* In-place SUM allreduce of n floats sent compressed (DiLoCo's bf16, int8 and int4
 * pseudo-gradients): each member packs buf, the blocks are gathered (vkg_group_allgather), and
 * every member leaves in buf the unpacked blocks summed in fp32 in group-rank order (member 0's
 * stored, then each next one added), bitwise the same on every member and every engine. n = 0
 * does nothing. Errors: VKG_ERR_INVALID_ARG for a codec missing a function, and the gather's. */
vkg_status vkg_group_allreduce_codec(vkg_group_t *g, float *buf, size_t n,
                                     const vkg_comm_codec *codec);
/* Copy bytes of group rank root's buf into every other member's buf. */
vkg_status vkg_group_broadcast(vkg_group_t *g, void *buf, size_t bytes, int root);
/* recv (size * bytes) receives every member's bytes of send, in group-rank order. */
vkg_status vkg_group_allgather(vkg_group_t *g, const void *send, size_t bytes, void *recv);

/* Tell every peer this rank gives up (their pending and later calls fail with VKG_ERR_PEER and
 * this reason), and put this communicator in the failed state. Never blocks beyond a short flush;
 * safe on a communicator that already failed. */
void vkg_comm_abort(vkg_comm_t *c, const char *reason);

/* 1 when this libzmq supports CURVE (built with libsodium), 0 otherwise. */
int vkg_comm_has_curve(void);

/* 1 when this build has the shared-memory collectives (Linux), 0 otherwise: then every
 * communicator runs over ZeroMQ, and the policy REQUIRE falls back to it, saying so in
 * vkg_comm_path. */
int vkg_comm_has_shm(void);

/* A fresh CURVE key pair in Z85 text (40 characters each, NUL-terminated). */
vkg_status vkg_comm_curve_keypair(char pub[VKG_COMM_KEY_CHARS + 1],
                                  char sec[VKG_COMM_KEY_CHARS + 1]);

/* Write a key file (mode 0600: "public = ...", "secret = ...") at path and the public half at
 * "<path>.pub". Refuses to overwrite an existing file (VKG_ERR_IO naming it). */
vkg_status vkg_comm_keyfile_write(const char *path, const char *pub, const char *sec);

/* Read a key file written by vkg_comm_keyfile_write (or a .pub file: sec is then ""). */
vkg_status vkg_comm_keyfile_read(const char *path, char pub[VKG_COMM_KEY_CHARS + 1],
                                 char sec[VKG_COMM_KEY_CHARS + 1]);

/* Process-wide malloc tuning for large transfers, for programs (not libraries) to call once,
 * early. ZeroMQ mallocs every received payload; glibc's defaults hand large freed blocks back to
 * the kernel, so each received megabyte page-faults again (costly in VMs). This raises glibc's
 * trim and mmap thresholds so freed receive buffers are reused. No-op without glibc. */
void vkg_comm_tune_malloc(void);

/* Pick a TCP port that is free on addr right now (racy by nature; for tests and local launches
 * that need to hand rank 0's port to every rank before any of them starts). */
vkg_status vkg_comm_pick_port(const char *addr, int *port);

#ifdef __cplusplus
}
#endif
#endif
