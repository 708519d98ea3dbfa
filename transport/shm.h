/* The shared-memory segment of one job on one host: its layout and the state each rank keeps
 * about it. Shared by shm.c (creating and handing over the segment), shm_wait.c (waiting and
 * signalling in it) and shm_coll.c, hier.c and hier_copy.c (the collectives run in it). Nothing
 * here is visible outside transport/.
 *
 * Layout (offsets from the start of the memfd):
 *   0                  vkg_shm_hdr: identity of the job, sizes, the abort word
 *   128                vkg_shm_ctl[n]: each local rank's progress counters, 128 bytes apiece
 *   128 + 128n         reasons[n][SHM_REASON]: the text of a rank's abort
 *   data_off (4 KiB)   regions: rank q's slot s is chunk bytes at data_off + (q * slots + s) *
 *                      chunk
 */
#ifndef VKG_TRANSPORT_SHM_H
#define VKG_TRANSPORT_SHM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "comm_internal.h"
#include "comm_testing.h"

#define VKG_SHM_MAGIC 0x4d48534bu /* "KSHM" */
#define VKG_SHM_VERSION 1
#define VKG_SHM_SLOTS 4
#define VKG_SHM_REASON 512
#define VKG_SHM_DEFAULT_CHUNK (256u << 10)
#define VKG_SHM_MAX_RANKS 64

typedef struct vkg_shm_hdr {
    uint32_t magic, version;
    uint64_t job_id;
    uint32_t generation, nlocal;
    uint64_t chunk, slots, total_bytes, data_off;
    atomic_uint abort_word; /* 0, or 1 + the rank whose abort reason is in reasons[] */
    atomic_uint sleepers;   /* ranks inside FUTEX_WAIT on some counter: publishers wake them */
} vkg_shm_hdr;

/* Counters of one rank, in pipeline steps since the segment was made (wrapping u32; the futex
 * words). A step is one chunk of one collective; every rank numbers them alike. */
typedef struct vkg_shm_ctl {
    atomic_uint in;  /* steps whose input this rank has put in its region */
    atomic_uint red; /* steps whose slice of the result this rank has written */
    atomic_uint out; /* steps this rank has copied out: the others may reuse that slot */
    uint32_t pad[29];
} vkg_shm_ctl;

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
 * (agree: an allgather of each member's one-byte verdict and 255-byte reason, in member order).
 * *out = NULL (and VKG_OK) when the policy or the hosts rule it out or the setup failed on some
 * member (every member then agrees on the fallback). A segment made is listed in c->group_segs
 * so that a failing rank's abort reaches it. */
typedef vkg_status (*vkg_shm_agree_fn)(void *arg, const void *mine, size_t bytes, void *all);
vkg_status vkg__shm_group_setup(vkg_comm_t *c, const int *ranks, int n, int me, uint32_t id,
                                vkg_shm_agree_fn agree, void *arg, struct vkg_shm **out);
/* Free a group's segment (NULL-safe) after taking it off its communicator's group_segs. */
void vkg__shm_group_free(struct vkg_shm **ps);

/* Bytes of a segment for n ranks and chunk, and where the regions start. */
size_t vkg__shm_layout(int n, size_t chunk, size_t *data_off);
/* Point s's fields into the mapping at base. */
void vkg__shm_bind(struct vkg_shm *s, uint8_t *base, size_t bytes, int n, int me);

#endif
