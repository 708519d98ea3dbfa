/* What the transport's own tests need to play a peer that holds the job's secret (a peer with a
 * bug, or another version) and so reach the message validation behind the handshake. Not for use
 * outside tests/: the secret is what keeps foreign processes out of a job. */
#ifndef VKG_TRANSPORT_COMM_TESTING_H
#define VKG_TRANSPORT_COMM_TESTING_H

#include <stddef.h>
#include <stdint.h>

#include "vkgpt/comm.h"

/* The job's 16-byte secret as rank 0 drew it (all zero for a single rank). */
void vkg__comm_secret(const vkg_comm_t *c, uint8_t out[16]);

/* Steps of the shared-memory pipeline this rank has completed (0 without a segment): a test
 * reads it before and after a call to see that the call ran in the segment. */
uint32_t vkg__comm_shm_steps(const vkg_comm_t *c);

/* The single-copy allreduce (process_vm_readv) runs from this many bytes on by default
 * (VKG_COMM_CMA_MIN of the host's first rank overrides it; shm_direct.c); the in-pool one above
 * 64 KiB, when every rank's buffers are in its pool. */
#define VKG_SHM_CMA_MIN_BYTES (256u << 10)

/* Allreduces this rank ran in its segment per engine: [0] the segment's slots (copy in, reduce,
 * copy out), [1] single-copy (some peer's buffer read with process_vm_readv), [2] in-pool (every
 * buffer read through the mapping); [3] reduce-scatters and allgathervs run in the pools. All 0
 * without a segment. */
void vkg__comm_shm_engines(const vkg_comm_t *c, uint64_t out[4]);
/* Bytes of memory the segment holds now (its memfd's allocated blocks; 0 without one). */
uint64_t vkg__comm_shm_resident(const vkg_comm_t *c);
/* 1 when the segment's single-copy path (process_vm_readv) is on. */
int vkg__comm_shm_cma(const vkg_comm_t *c);

/* Payload bytes this rank has sent over ZeroMQ (message headers and credits not counted): a test
 * reads it before and after a call to see how many bytes the call put on the wire. */
uint64_t vkg__comm_tx_bytes(const vkg_comm_t *c);

/* 1 when group g runs its collectives in a segment of its own (decided at its first one). */
int vkg__group_uses_shm(const vkg_group_t *g);

/* Fuzzing the parsers a rank runs on network input (fuzz/fuzz_wire.c): each builds a rank of a
 * world of 4 with no sockets and feeds it `data`. The first byte picks the parser:
 *   0: a data-connection message (header frame = the next 64 bytes, payload = the rest, or a
 *      short header frame when fewer remain), validated and dispatched as a waiting rank would;
 *   1: a rendezvous hello at rank 0 (frames: routing id, header, hello body);
 *   2: rank 0's reply to a joining rank (header, then the peer table or a reject reason).
 * Returns the parser's status; never crashes on any input (that is what fuzzing checks). */
vkg_status vkg__fuzz_wire(const uint8_t *data, size_t size);

/* The shared-memory handover (shm.c), runnable on its own so that tests can play a process of
 * another job knocking at a job's socket. Credentials: what a process claims and proves. */
typedef struct vkg_shm_creds {
    uint64_t job_id;
    uint32_t generation;
    uint8_t secret[16];
} vkg_shm_creds;

/* The abstract socket name (without the leading NUL) where a segment's creator hands it out:
 * "vkgpt-shm-" and the hex of the tag it drew (random per segment, sent to the segment's ranks
 * over the job's messages). */
#define VKG_SHM_TAG_BYTES 16
void vkg__shm_socket_name(const uint8_t tag[VKG_SHM_TAG_BYTES], char *name, size_t cap);
/* Name the segments rank c creates from now on by tag instead of fresh random bytes, so that a
 * test can bind the name first (a squatter that guessed it). */
void vkg__comm_shm_fix_tag(vkg_comm_t *c, const uint8_t tag[VKG_SHM_TAG_BYTES]);
/* A sealed memfd segment for n local ranks with pools of pool bytes each (a multiple of 4 KiB;
 * may be 0), its header filled in, and its size. */
vkg_status vkg__shm_create_fd(const vkg_shm_creds *cr, int n, size_t chunk, size_t pool,
                              int *fd_out, size_t *bytes_out);
/* Listen at the abstract name. */
vkg_status vkg__shm_listen(const char *name, int *lfd_out);
/* The host's side: admit ranks 1..nranks-1 of the job cr (each once, after the challenge) and
 * pass them seg_fd; refuse everyone else (counted in *refusals when not NULL). Returns once all
 * attached, or VKG_ERR_TIMEOUT at the deadline (vkg__now_ns clock) naming the missing ranks. */
vkg_status vkg__shm_serve(int lfd, const vkg_shm_creds *cr, int nranks, int seg_fd,
                          size_t seg_bytes, int64_t deadline, int *refusals);
/* A rank's side: knock at `name` presenting cr as rank `rank`; on success *fd_out is the
 * segment's descriptor. VKG_ERR_PEER with the host's reason when refused. */
vkg_status vkg__shm_attach(const char *name, const vkg_shm_creds *cr, int rank, int64_t deadline,
                           int *fd_out, size_t *bytes_out);
/* Map a segment handed over, checking its seals, size and header against cr, n and chunk. */
vkg_status vkg__shm_map(int fd, const vkg_shm_creds *cr, int n, size_t chunk, uint8_t **base_out,
                        size_t *bytes_out);
int64_t vkg__now_ns(void);

#endif
