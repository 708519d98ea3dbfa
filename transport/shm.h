/* The shared-memory segment of one job on one host: its layout and the state each rank keeps
 * about it. Shared by shm.c (creating and handing over the segment), shm_wait.c (waiting and
 * signalling in it), shm_coll.c, hier.c and hier_copy.c (the collectives run in it), shm_direct.c
 * (the single-copy and in-pool allreduce) and shm_pool.c (the buffers that live in the segment).
 * Nothing here is visible outside transport/.
 *
 * Layout (offsets from the start of the memfd):
 *   0                  vkg_shm_hdr: identity of the job, sizes, the abort word
 *   128                vkg_shm_ctl[n]: each local rank's progress counters, its pid and the
 *                      buffers of its current direct allreduce, 128 bytes apiece
 *   128 + 128n         reasons[n][SHM_REASON]: the text of a rank's abort
 *   data_off (4 KiB)   regions: rank q's slot s is chunk bytes at data_off + (q * slots + s) *
 *                      chunk
 *   pool_off (4 KiB)   pools: rank q's buffer pool is pool_bytes at pool_off + q * pool_bytes
 *                      (vkg_comm_buffer_alloc; 0 bytes in the segments of hier.c and groups).
 *                      The memfd is backed lazily: pool pages nobody touched cost no memory.
 */
#ifndef VKG_TRANSPORT_SHM_H
#define VKG_TRANSPORT_SHM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "comm_internal.h"
#include "comm_testing.h"

#define VKG_SHM_MAGIC 0x4d48534bu /* "KSHM" */
#define VKG_SHM_VERSION 2         /* 2: pools, pid and direct buffers in the ctl */
#define VKG_SHM_SLOTS 4
#define VKG_SHM_REASON 512
#define VKG_SHM_DEFAULT_CHUNK (256u << 10)
#define VKG_SHM_MAX_RANKS 64

typedef struct vkg_shm_hdr {
    uint32_t magic, version;
    uint64_t job_id;
    uint32_t generation, nlocal;
    uint64_t chunk, slots, total_bytes, data_off;
    uint64_t pool_off, pool_bytes; /* the buffer pools (pool_bytes per rank; may be 0) */
    atomic_uint abort_word;        /* 0, or 1 + the rank whose abort reason is in reasons[] */
    atomic_uint sleepers; /* ranks inside FUTEX_WAIT on some counter: publishers wake them */
} vkg_shm_hdr;

/* Counters of one rank, in pipeline steps since the segment was made (wrapping u32; the futex
 * words). A step is one chunk of one collective; every rank numbers them alike. */
typedef struct vkg_shm_ctl {
    atomic_uint in;  /* steps whose input this rank has put in its region */
    atomic_uint red; /* steps whose slice of the result this rank has written */
    atomic_uint out; /* steps this rank has copied out: the others may reuse that slot */
    int32_t pid;     /* this rank's process id (as its peers see it; set at setup) */
    /* The send and recv buffer of this rank's current direct allreduce (shm_direct.c), written
     * before it raises `in` for that step: bit i of in_pool set means buf[i] is an offset into
     * this rank's pool, otherwise an address in this rank's process (read with
     * process_vm_readv). */
    uint64_t buf[2];
    uint32_t in_pool;
    uint32_t pad[23];
} vkg_shm_ctl;
_Static_assert(sizeof(vkg_shm_ctl) == 128, "a rank's counters fill 128 bytes");

/* Which engine ran an allreduce (counted per segment for the tests, comm_testing.h). */
enum {
    VKG_SHM_ENG_SEGMENT,   /* allreduces through the slots */
    VKG_SHM_ENG_CMA,       /* allreduces reading some rank's buffers with process_vm_readv */
    VKG_SHM_ENG_POOL,      /* allreduces reading every rank's buffers in its pool */
    VKG_SHM_ENG_ZERO_POOL, /* reduce-scatters and allgathervs in the pools */
    VKG_SHM_ENGINES
};

typedef struct vkg_shm_block {
    size_t off, bytes; /* an allocation in this rank's pool */
} vkg_shm_block;

struct vkg_shm {
    int fd;
    uint8_t *base;
    size_t bytes;
    vkg_shm_hdr *hdr;
    vkg_shm_ctl *ctl;
    char *reasons;
    uint8_t *data;
    size_t chunk;
    int slots, n, me;      /* local ranks (= the communicator's ranks) and this one */
    uint32_t step;         /* steps this rank has completed */
    int64_t spin_ns;       /* how long a wait spins before it sleeps (adapts, see shm_coll.c) */
    int64_t spin_max_ns;   /* its ceiling: 50 us with a core per rank, 1 us otherwise */
    vkg_comm_t *listed_in; /* a group's segment: the communicator whose group_segs lists it (NULL
                              once that communicator is gone: groups may outlive it) */
    /* single-copy (shm_direct.c): process_vm_readv works to every local peer (agreed) */
    int cma;
    uint64_t cma_min;               /* ... for allreduces of this many bytes and more */
    int32_t pid[VKG_SHM_MAX_RANKS]; /* each local rank's pid */
    uint64_t *canary;               /* the word the peers read at setup to prove it works */
    uint8_t *scratch;               /* n - 1 pieces that peers' slices are read into */
    /* pools (shm_pool.c): rank q's is pool + q * pool_bytes; this rank's allocations in blocks,
     * sorted by offset */
    uint8_t *pool;
    size_t pool_bytes;
    vkg_shm_block *blocks;
    size_t nblocks, cap_blocks;
    uint64_t engine[VKG_SHM_ENGINES]; /* allreduces run by each engine */
};

/* One collective in the segment (shm_coll.c, hier.c), with the waits of shm_wait.c. */
typedef struct vkg_shm_op {
    vkg_comm_t *c;
    struct vkg_shm *s;
    const int *ranks; /* communicator rank of each of the segment's ranks */
    uint32_t base;    /* the segment step of this collective's first chunk */
    char what[48];
} vkg_shm_op;

enum { VKG_SHM_IN, VKG_SHM_RED, VKG_SHM_OUT }; /* a rank's counters (vkg_shm_ctl) */

/* Begin a collective `name` at the segment's next step (fails at once on a recorded abort). */
vkg_status vkg__shm_start(vkg_shm_op *o, vkg_comm_t *c, const char *name);
/* The same in segment s, whose local rank q is communicator rank ranks[q]; what names it. */
vkg_status vkg__shm_start_on(vkg_shm_op *o, vkg_comm_t *c, struct vkg_shm *s, const int *ranks,
                             const char *what);
/* Wait until local rank q's counter `which` reaches target. */
vkg_status vkg__shm_wait_one(vkg_shm_op *o, int q, int which, uint32_t target);
/* Wait until every other local rank's counter `which` reaches target (names the one that lags,
 * sees aborts, dead and frozen peers and the deadline). */
vkg_status vkg__shm_wait_all(vkg_shm_op *o, int which, uint32_t target);
/* Wait until slot `step` may be rewritten: every rank copied out step - slots. */
vkg_status vkg__shm_wait_slot(vkg_shm_op *o, uint32_t step);
/* Publish this rank's counter `which` = v, waking sleepers. */
void vkg__shm_publish(struct vkg_shm *s, int which, uint32_t v);
/* Local rank q's slot for step. */
static inline uint8_t *vkg__shm_slot(const struct vkg_shm *s, int q, uint32_t step)
{
    return s->data + ((size_t)q * (size_t)s->slots + step % (uint32_t)s->slots) * s->chunk;
}

/* An allreduce in the segment (shm_coll.c, shm_direct.c). */
typedef struct vkg_shm_ar {
    vkg_shm_op o;
    const uint8_t *send;
    uint8_t *recv;
    size_t count, es, per; /* elements; bytes each; elements per step */
    vkg_comm_dtype dt;
    int avg, ring;
    const size_t *rb; /* with ring: [n + 1] the ring's chunks (chunk k is summed from rank k) */
} vkg_shm_ar;

/* Slice q of n elements among the segment's ranks: whole 64-byte lines, the last rank the rest. */
void vkg__shm_slice(const vkg_shm_ar *a, size_t n, int q, size_t *lo, size_t *hi);
/* dst[0, len) = the reduction of elements [e, e + len) of the whole buffer, in the order of a
 * (rank order, or around the ring from each element's ring chunk), from[q] pointing at local
 * rank q's element e. */
void vkg__shm_reduce_from(const vkg_shm_ar *a, const uint8_t *const *from, size_t e, size_t len,
                          uint8_t *dst);
/* The direct allreduce (shm_direct.c) of a, started at the segment's next step, when its size
 * calls for it: reads the peers' buffers in place (their pools through the mapping, or their
 * memory with process_vm_readv). *done = 0 when it did not run: the segment path must, from
 * a->o.base (which may have moved past one handshake step every rank took). */
vkg_status vkg__shm_direct_allreduce(vkg_shm_ar *a, int *done);
/* ZeRO's reduce-scatter (reduce) or allgatherv over chunks [bounds[q], bounds[q + 1]) of
 * a->recv (== a->send), in place, when every rank's buffer is in its pool: each rank reduces its
 * chunk straight from the peers' pools (in a's order of additions), or copies the others' chunks
 * from theirs. *done = 0 otherwise: the segment path must, from a->o.base. */
vkg_status vkg__shm_direct_zero(vkg_shm_ar *a, const size_t *bounds, int reduce, int *done);
/* After the segment is set up for the whole communicator: probe process_vm_readv to every
 * local peer, agree on the verdict (collective) and append it to c->path. Fails only when
 * VKG_COMM_CMA has a bad value on some rank, or the exchange fails. */
vkg_status vkg__shm_direct_setup(vkg_comm_t *c);
/* 1 when the segment's abort word is set; *st then is the abort's error. */
int vkg__shm_aborted(vkg_shm_op *o, vkg_status *st);
/* The pool bytes per rank the segment of n ranks gets (VKG_COMM_SHM_POOL, shm_pool.c). */
vkg_status vkg__shm_pool_request(int n, size_t *bytes);
/* Free what the direct paths and the pool keep beside the mapping. */
void vkg__shm_direct_free(struct vkg_shm *s);

/* Group collectives (group.c) in a group's own segment s, whose rank q is communicator rank
 * ranks[q]; `what` names the call in errors. allreduce: f32 sums in place, each element of ring
 * chunk k ([rb[k], rb[k + 1])) summed from rank k on around the ring, as the group's ZeroMQ ring
 * adds it. */
vkg_status vkg__shm_group_allreduce(vkg_comm_t *c, struct vkg_shm *s, const int *ranks,
                                    const char *what, float *buf, size_t count, const size_t *rb);
vkg_status vkg__shm_group_broadcast(vkg_comm_t *c, struct vkg_shm *s, const int *ranks,
                                    const char *what, void *buf, size_t bytes, int root);
vkg_status vkg__shm_group_allgather(vkg_comm_t *c, struct vkg_shm *s, const int *ranks,
                                    const char *what, const void *send, size_t bytes, void *recv);
/* Set up the segment of a group whose members (communicator ranks ranks[0..n), this one
 * ranks[me]) all share this host, collectively among them, over the group's own messages
 * (agree: an allgather of each member's verdict, reason and socket tag, in member order).
 * *out = NULL (and VKG_OK) when the policy or the hosts rule it out or the setup failed on some
 * member (every member then agrees on the fallback); with the policy REQUIRE that failure is
 * VKG_ERR_UNSUPPORTED on every member, naming the member and its reason. A segment made is listed
 * in c->group_segs so that a failing rank's abort reaches it. */
typedef vkg_status (*vkg_shm_agree_fn)(void *arg, const void *mine, size_t bytes, void *all);
vkg_status vkg__shm_group_setup(vkg_comm_t *c, const int *ranks, int n, int me, uint32_t id,
                                vkg_shm_agree_fn agree, void *arg, struct vkg_shm **out);
/* Free a group's segment (NULL-safe) after taking it off its communicator's group_segs. */
void vkg__shm_group_free(struct vkg_shm **ps);

/* Bytes of a segment for n ranks, chunk and pool bytes per rank, and where the regions and the
 * pools start. */
size_t vkg__shm_layout(int n, size_t chunk, size_t pool, size_t *data_off, size_t *pool_off);
/* Point s's fields into the mapping at base. */
void vkg__shm_bind(struct vkg_shm *s, uint8_t *base, size_t bytes, int n, int me);

#endif
