/* The intruder of the transport's security tests (test_comm_security: messages from a peer that
 * holds the job's secret; test_comm_security_auth: connections without the job's credentials):
 * the wire header encoded here from its documented layout, not with the library; a ZeroMQ socket
 * of this process that connects to a rank with a chosen mechanism and credentials and sends
 * hand-made frames; and a job of two thread ranks where rank 1 waits for a point-to-point message
 * of rank 0 (or both allreduce) while the intruder strikes.
 * Not here: the rendezvous (test_comm_security_join.c), launching ranks (test_comm_harness.h). */
#ifndef VKG_TEST_COMM_INTRUDER_H
#define VKG_TEST_COMM_INTRUDER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "test_comm_harness.h"
#include "vkgpt/comm.h"

#define JOB 0x1234abcd5678ef01ull
#define TAG 7

/* The wire header (64 bytes, little-endian). */
typedef struct vkg_wire_hdr {
    uint32_t magic;
    uint16_t version;
    uint8_t kind, flags;
    uint64_t job;
    uint32_t gen, sender;
    uint64_t seq;
    uint32_t segment, tag;
    uint64_t bytes;
    uint8_t secret[16];
} vkg_wire_hdr;

/* A point-to-point message "rank 0 sends 16 bytes with TAG": what rank 1 waits for (the last
 * and only piece: flags bit 0). The secret is filled in once the job has drawn it. */
vkg_wire_hdr vkg_intruder_p2p(void);

enum mech { MECH_NULL, MECH_PLAIN, MECH_CURVE };

typedef struct vkg_intruder {
    enum mech mech;
    char password[64];
    char server_key[41], pub[41], sec[41];
    int nframes;
    int secret_password; /* 1: the PLAIN password is the job's secret (hex), as ranks present */
    int secret_header;   /* 1: the header carries the job's secret */
    vkg_wire_hdr h;      /* encoded into frame[0] (len[0] bytes of it) when connecting */
    const void *big;     /* when set: the payload frame instead of frame[1] */
    size_t big_len;
    uint8_t frame[3][80];
    size_t len[3];
    int handshake; /* ZMQ_EVENT_HANDSHAKE_SUCCEEDED or a HANDSHAKE_FAILED_* event, 0 = none */
} vkg_intruder;

/* A message of header h and n bytes of payload (none when payload is NULL) over PLAIN with the
 * job-id password, its header carrying the job's secret: in is reset to that, then adjusted. */
void vkg_intruder_plain(vkg_intruder *in, const vkg_wire_hdr *h, const void *payload, size_t n);

typedef struct vkg_scene {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char endpoint[256]; /* rank 1's data endpoint */
    uint8_t secret[16]; /* the job's secret, which an intruder may be given */
    int published, attacked;
    int rank0_sends; /* 1: after the attack rank 0 sends the legit message */
    int allreduce;   /* 1: after the attack both ranks allreduce instead */
    float sum[2][4]; /* what each rank's allreduce returned */
    vkg_status st[2];
    char msg[2][1024];
    unsigned char got[16];
} vkg_scene;

/* Run the two ranks of options o: once rank 1 has published its endpoint and the job's secret,
 * in connects and sends; then rank 0 sends its message (rank0_sends 1), waits for rank 1's abort
 * (0), or both allreduce (2). Fails the test unless both ranks were created. */
void vkg_scene_run(vkg_scene *sc, const vkg_th_opts *o, vkg_intruder *in, int rank0_sends);
/* A job of 2 thread ranks over transport t (JOB, 5 s timeout, 30 s wall). */
vkg_th_opts vkg_scene_opts(vkg_comm_transport t);

/* A peer holding the job's secret sends a bad message: rank 1 rejects it, never writes its
 * buffer, and rank 0 learns from rank 1's abort. */
void vkg_intruder_expect_rejected(vkg_comm_transport t, vkg_intruder *in, const char *needle);
/* Without the job's credentials the connection is refused: nothing arrives, and rank 1 gets
 * rank 0's real message. */
void vkg_intruder_expect_refused(vkg_comm_transport t, vkg_intruder *in);

#endif
