/* Security and message validation. This test process plays the intruder with its own ZeroMQ
 * socket and hand-made frames (the wire header is encoded here from its documented layout, not
 * with the library):
 *  - holding the job's secret (a peer with a bug), a message of another job, of a stale
 *    generation, without the secret, with a bad magic, a short header, extra frames or a wrong
 *    payload size is rejected with a clear error and never lands in the receiver's buffer;
 *  - without credentials, with another job's, or with the guessable job-id password (all anyone
 *    who can reach the port could compute), the connection is refused and nothing arrives, and a
 *    forged allreduce contribution leaves the sum exactly what the ranks computed;
 *  - a rank of another job cannot join the rendezvous;
 *  - with CURVE, ranks holding the job key work, and a client with another key is refused.
 * Ranks are threads of this process over ipc or tcp (loopback only). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zmq.h>

#include "../transport/comm_testing.h"
#include "test_comm_harness.h"
#include "vkgpt/comm.h"

#define JOB 0x1234abcd5678ef01ull
#define TAG 7

/* ---- the wire header, from its documented layout (64 bytes, little-endian) ---- */

typedef struct hdr {
    uint32_t magic;
    uint16_t version;
    uint8_t kind, flags;
    uint64_t job;
    uint32_t gen, sender;
    uint64_t seq;
    uint32_t segment, tag;
    uint64_t bytes;
    uint8_t secret[16];
} hdr;

static void le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void encode(const hdr *h, uint8_t out[64])
{
    memset(out, 0, 64);
    le(out, h->magic, 4);
    le(out + 4, h->version, 2);
    out[6] = h->kind;
    out[7] = h->flags;
    le(out + 8, h->job, 8);
    le(out + 16, h->gen, 4);
    le(out + 20, h->sender, 4);
    le(out + 24, h->seq, 8);
    le(out + 32, h->segment, 4);
    le(out + 36, h->tag, 4);
    le(out + 40, h->bytes, 8);
    memcpy(out + 48, h->secret, 16);
}

/* A point-to-point message "rank 0 sends 16 bytes with TAG": what rank 1 waits for (the last
 * and only piece: flags bit 0). The secret is filled in once the job has drawn it. */
static hdr legit_p2p(void)
{
    return (hdr){.magic = 0x43474B56u,
                 .version = 3,
                 .kind = 7,
                 .flags = 1,
                 .job = JOB,
                 .gen = 0,
                 .sender = 0,
                 .seq = 0,
                 .tag = TAG,
                 .bytes = 16};
}

/* ---- the intruder ---- */

enum mech { MECH_NULL, MECH_PLAIN, MECH_CURVE };

typedef struct intruder {
    enum mech mech;
    char password[64];
    char server_key[41], pub[41], sec[41];
    int nframes;
    int secret_password; /* 1: the PLAIN password is the job's secret (hex), as ranks present */
    int secret_header;   /* 1: the header carries the job's secret */
    hdr h;               /* encoded into frame[0] (len[0] bytes of it) when connecting */
    const void *big;     /* when set: the payload frame instead of frame[1] */
    size_t big_len;
    uint8_t frame[3][80];
    size_t len[3];
    int handshake; /* ZMQ_EVENT_HANDSHAKE_SUCCEEDED or a HANDSHAKE_FAILED_* event, 0 = none */
} intruder;

/* Connect to endpoint with the given mechanism, send the frames, report the handshake. secret:
 * the job's, for an intruder that holds it. */
static void intrude(intruder *in, const char *endpoint, const uint8_t secret[16])
{
    if (in->secret_header)
        memcpy(in->h.secret, secret, 16);
    uint8_t full[64];
    encode(&in->h, full);
    memcpy(in->frame[0], full, in->len[0] < 64 ? in->len[0] : 64);
    if (in->secret_password)
        for (int i = 0; i < 16; i++)
            snprintf(in->password + 2 * i, 3, "%02x", secret[i]);
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int linger = 1000;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_socket_monitor(s, "inproc://intruder-mon", ZMQ_EVENT_ALL);
    void *mon = zmq_socket(ctx, ZMQ_PAIR);
    zmq_connect(mon, "inproc://intruder-mon");
    if (in->mech == MECH_PLAIN) {
        zmq_setsockopt(s, ZMQ_PLAIN_USERNAME, "vkgpt", 5);
        zmq_setsockopt(s, ZMQ_PLAIN_PASSWORD, in->password, strlen(in->password));
    } else if (in->mech == MECH_CURVE) {
        zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, in->server_key, 41);
        zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, in->pub, 41);
        zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, in->sec, 41);
    }
    zmq_connect(s, endpoint);
    for (int f = 0; f < in->nframes; f++)
        zmq_send(s, f == 1 && in->big ? in->big : in->frame[f],
                 f == 1 && in->big ? in->big_len : in->len[f],
                 f + 1 < in->nframes ? ZMQ_SNDMORE : 0);
    in->handshake = 0;
    double end = vkg_th_now() + 5;
    while (!in->handshake && vkg_th_now() < end) {
        zmq_pollitem_t it = {mon, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 100) <= 0)
            continue;
        zmq_msg_t ev, addr;
        zmq_msg_init(&ev);
        zmq_msg_init(&addr);
        zmq_msg_recv(&ev, mon, 0);
        zmq_msg_recv(&addr, mon, 0);
        uint16_t e;
        memcpy(&e, zmq_msg_data(&ev), 2);
        if (e == ZMQ_EVENT_HANDSHAKE_SUCCEEDED || e == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH ||
            e == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL || e == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
            in->handshake = e;
        zmq_msg_close(&ev);
        zmq_msg_close(&addr);
    }
    zmq_socket_monitor(s, NULL, 0);
    zmq_close(mon);
    zmq_close(s); /* linger delivers what was accepted */
    zmq_ctx_term(ctx);
}

static void plain_message(intruder *in, const hdr *h, const void *payload, size_t n)
{
    memset(in, 0, sizeof *in);
    in->mech = MECH_PLAIN;
    in->secret_header = 1;
    snprintf(in->password, sizeof in->password, "%016llx:%u", (unsigned long long)JOB, 0u);
    in->h = *h;
    in->len[0] = 64;
    in->nframes = 1;
    if (payload) {
        memcpy(in->frame[1], payload, n);
        in->len[1] = n;
        in->nframes = 2;
    }
}

/* ---- the two ranks ---- */

typedef struct scene {
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
} scene;

static void scene_wait(scene *sc, int *flag)
{
    pthread_mutex_lock(&sc->mu);
    while (!*flag)
        pthread_cond_wait(&sc->cv, &sc->mu);
    pthread_mutex_unlock(&sc->mu);
}

static void scene_set(scene *sc, int *flag)
{
    pthread_mutex_lock(&sc->mu);
    *flag = 1;
    pthread_cond_broadcast(&sc->cv);
    pthread_mutex_unlock(&sc->mu);
}

static int scene_body(vkg_th_rank *r, void *arg)
{
    scene *sc = arg;
    vkg_status st;
    if (sc->allreduce) {
        if (r->rank == 1) {
            vkg_comm_peer_endpoint(r->comm, 1, sc->endpoint, sizeof sc->endpoint);
            vkg__comm_secret(r->comm, sc->secret);
            scene_set(sc, &sc->published);
        }
        scene_wait(sc, &sc->attacked);
        for (int i = 0; i < 4; i++)
            sc->sum[r->rank][i] = (float)((i + 1) * (r->rank + 1));
        st = vkg_comm_allreduce(r->comm, sc->sum[r->rank], sc->sum[r->rank], 4, VKG_COMM_F32,
                                VKG_COMM_SUM);
    } else if (r->rank == 1) {
        vkg_comm_peer_endpoint(r->comm, 1, sc->endpoint, sizeof sc->endpoint);
        vkg__comm_secret(r->comm, sc->secret);
        scene_set(sc, &sc->published);
        memset(sc->got, 0xEE, sizeof sc->got); /* poison: must stay unless rank 0's data lands */
        st = vkg_comm_recv(r->comm, 0, TAG, sc->got, sizeof sc->got);
    } else {
        scene_wait(sc, &sc->attacked);
        if (sc->rank0_sends) {
            unsigned char legit[16];
            for (int i = 0; i < 16; i++)
                legit[i] = (unsigned char)(100 + i);
            st = vkg_comm_send(r->comm, 1, TAG, legit, sizeof legit);
        } else {
            unsigned char x[4];
            st = vkg_comm_recv(r->comm, 1, 99, x, sizeof x); /* ends with rank 1's abort */
        }
    }
    sc->st[r->rank] = st;
    snprintf(sc->msg[r->rank], sizeof sc->msg[r->rank], "%s", vkg_error_message());
    return 0;
}

static void scene_run(scene *sc, const vkg_th_opts *o, intruder *in, int rank0_sends)
{
    memset(sc, 0, sizeof *sc);
    pthread_mutex_init(&sc->mu, NULL);
    pthread_cond_init(&sc->cv, NULL);
    sc->rank0_sends = rank0_sends == 1;
    sc->allreduce = rank0_sends == 2;
    vkg_th_job *j = vkg_th_start(2, o, scene_body, sc);
    scene_wait(sc, &sc->published);
    intrude(in, sc->endpoint, sc->secret);
    scene_set(sc, &sc->attacked);
    vkg_th_result res[2];
    vkg_th_finish(j, res, 0);
    assert_int_equal(res[0].create_status, VKG_OK);
    assert_int_equal(res[1].create_status, VKG_OK);
}

static vkg_th_opts scene_opts(vkg_comm_transport t)
{
    return (vkg_th_opts){.transport = t, .timeout_ms = 5000, .job_id = JOB, .wall_s = 30};
}

/* A peer holding the job's secret sends a bad message: rank 1 rejects it, never writes its
 * buffer, and rank 0 learns from rank 1's abort. */
static void expect_rejected(vkg_comm_transport t, intruder *in, const char *needle)
{
    scene sc;
    in->secret_password = 1;
    vkg_th_opts o = scene_opts(t);
    scene_run(&sc, &o, in, 0);
    if (sc.st[1] != VKG_ERR_PROTOCOL || !strstr(sc.msg[1], needle) || sc.st[0] != VKG_ERR_PEER ||
        !strstr(sc.msg[0], "rank 1 aborted"))
        fprintf(stderr, "rank 1: %s %s\nrank 0: %s %s\n", vkg_status_name(sc.st[1]), sc.msg[1],
                vkg_status_name(sc.st[0]), sc.msg[0]);
    assert_int_equal(in->handshake, ZMQ_EVENT_HANDSHAKE_SUCCEEDED);
    assert_int_equal(sc.st[1], VKG_ERR_PROTOCOL);
    assert_non_null(strstr(sc.msg[1], needle));
    assert_non_null(strstr(sc.msg[1], "rejected"));
    assert_int_equal(sc.st[0], VKG_ERR_PEER);
    assert_non_null(strstr(sc.msg[0], "rank 1 aborted"));
    for (int i = 0; i < 16; i++)
        assert_int_equal(sc.got[i], 0xEE);
}

static void test_foreign_job_rejected(void **state)
{
    (void)state;
    const unsigned char payload[16] = "intruder payload";
    hdr h = legit_p2p();
    h.job ^= 1;
    intruder in;
    plain_message(&in, &h, payload, 16);
    expect_rejected(VKG_COMM_IPC, &in, "belongs to job");
    plain_message(&in, &h, payload, 16);
    expect_rejected(VKG_COMM_TCP, &in, "belongs to job");
}

static void test_stale_generation_rejected(void **state)
{
    (void)state;
    const unsigned char payload[16] = "intruder payload";
    hdr h = legit_p2p();
    h.gen = 3;
    intruder in;
    plain_message(&in, &h, payload, 16);
    expect_rejected(VKG_COMM_IPC, &in, "generation 3");
}

static void test_malformed_frames_rejected(void **state)
{
    (void)state;
    const unsigned char payload[16] = "intruder payload";
    intruder in;
    hdr h = legit_p2p();
    h.magic = 0x12345678u;
    plain_message(&in, &h, payload, 16);
    expect_rejected(VKG_COMM_IPC, &in, "magic");

    h = legit_p2p();
    plain_message(&in, &h, payload, 16);
    in.len[0] = 20; /* a truncated header */
    expect_rejected(VKG_COMM_IPC, &in, "first frame is 20 bytes");

    h = legit_p2p(); /* header says 16 bytes, 8 arrive */
    plain_message(&in, &h, payload, 8);
    expect_rejected(VKG_COMM_IPC, &in, "header says 16 payload bytes");

    h = legit_p2p(); /* a third frame */
    plain_message(&in, &h, payload, 16);
    memcpy(in.frame[2], "x", 1);
    in.len[2] = 1;
    in.nframes = 3;
    expect_rejected(VKG_COMM_IPC, &in, "more than two frames");

    h = legit_p2p(); /* a valid header that claims to be the receiver itself */
    h.sender = 1;
    plain_message(&in, &h, payload, 16);
    expect_rejected(VKG_COMM_IPC, &in, "not a peer");

    h = legit_p2p(); /* a stall notice (kind 8) naming a rank outside the job */
    h.kind = 8;
    h.segment = 5;
    h.bytes = 0;
    plain_message(&in, &h, NULL, 0);
    expect_rejected(VKG_COMM_IPC, &in, "stall notice from rank 0 rejected: it names rank 5");
}

/* Without the job's credentials the connection is refused: nothing arrives, and rank 1 gets
 * rank 0's real message. */
static void expect_refused(vkg_comm_transport t, intruder *in)
{
    scene sc;
    vkg_th_opts o = scene_opts(t);
    scene_run(&sc, &o, in, 1);
    if (sc.st[1] != VKG_OK)
        fprintf(stderr, "rank 1: %s %s\n", vkg_status_name(sc.st[1]), sc.msg[1]);
    assert_true(in->handshake == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH ||
                in->handshake == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
                in->handshake == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL);
    assert_int_equal(sc.st[1], VKG_OK);
    assert_int_equal(sc.st[0], VKG_OK);
    for (int i = 0; i < 16; i++)
        assert_int_equal(sc.got[i], 100 + i);
}

static void test_no_credentials_refused(void **state)
{
    (void)state;
    const unsigned char payload[16] = "intruder payload";
    hdr h = legit_p2p(); /* a perfectly valid message: only the credentials are missing */
    intruder in;
    plain_message(&in, &h, payload, 16);
    in.mech = MECH_NULL;
    expect_refused(VKG_COMM_IPC, &in);
    plain_message(&in, &h, payload, 16);
    in.mech = MECH_NULL;
    expect_refused(VKG_COMM_TCP, &in);
}

/* The job id is computed from public facts (launcher, address, port, world size), so its
 * password admits no data connection: a perfectly formed message from someone who computed it
 * is refused at the handshake. */
static void test_guessable_credentials_refused(void **state)
{
    (void)state;
    const unsigned char payload[16] = "intruder payload";
    hdr h = legit_p2p();
    intruder in;
    plain_message(&in, &h, payload, 16);
    in.secret_header = 0; /* the intruder cannot know the secret */
    expect_refused(VKG_COMM_IPC, &in);
    assert_int_equal(in.handshake, ZMQ_EVENT_HANDSHAKE_FAILED_AUTH);
    plain_message(&in, &h, payload, 16);
    in.secret_header = 0;
    expect_refused(VKG_COMM_TCP, &in);
    assert_int_equal(in.handshake, ZMQ_EVENT_HANDSHAKE_FAILED_AUTH);
}

/* A forged allreduce contribution (rank 0's one-step message of the first allreduce, with the
 * guessable credentials) is refused; both ranks get exactly the sum they computed. */
static void test_forged_allreduce_data_refused(void **state)
{
    (void)state;
    const float forged[4] = {1000, 1000, 1000, 1000};
    hdr h = legit_p2p();
    h.kind = 4; /* data */
    h.flags = 0;
    h.seq = 2;                                /* the first collective after create's barrier */
    h.tag = 1u | (0u << 8) | (0xffffu << 16); /* allreduce, f32, one-step */
    intruder in;
    for (int t = 0; t < 2; t++) {
        plain_message(&in, &h, forged, sizeof forged);
        in.secret_header = 0;
        scene sc;
        vkg_th_opts o = scene_opts(t ? VKG_COMM_TCP : VKG_COMM_IPC);
        scene_run(&sc, &o, &in, 2);
        if (sc.st[0] || sc.st[1])
            fprintf(stderr, "rank 0: %s\nrank 1: %s\n", sc.msg[0], sc.msg[1]);
        assert_int_equal(in.handshake, ZMQ_EVENT_HANDSHAKE_FAILED_AUTH);
        assert_int_equal(sc.st[0], VKG_OK);
        assert_int_equal(sc.st[1], VKG_OK);
        for (int r = 0; r < 2; r++)
            for (int i = 0; i < 4; i++)
                assert_true(sc.sum[r][i] == (float)(3 * (i + 1)));
    }
}

/* A peer with the right connection password whose header lacks the secret is rejected. */
static void test_message_without_secret_rejected(void **state)
{
    (void)state;
    const unsigned char payload[16] = "intruder payload";
    hdr h = legit_p2p();
    intruder in;
    plain_message(&in, &h, payload, 16);
    in.secret_header = 0;
    expect_rejected(VKG_COMM_IPC, &in, "does not carry this job's secret");
}

static void test_other_job_credentials_refused(void **state)
{
    (void)state;
    const unsigned char payload[16] = "intruder payload";
    hdr h = legit_p2p();
    intruder in;
    plain_message(&in, &h, payload, 16);
    snprintf(in.password, sizeof in.password, "%016llx:%u", (unsigned long long)(JOB + 1), 0u);
    expect_refused(VKG_COMM_TCP, &in);
    assert_int_equal(in.handshake, ZMQ_EVENT_HANDSHAKE_FAILED_AUTH);
}

/* A rank of another job points at our master port: refused at the handshake; our rank 0 then
 * misses its rank 1 and says so. */
typedef struct join_arg {
    vkg_comm_config cfg;
    vkg_status st;
    char msg[1024];
} join_arg;

/* Rank 0's configuration of a 2-rank tcp job on a free loopback port (rank 1's is a copy with
 * rank = 1). */
static void pair_config(vkg_comm_config *c0, int timeout_ms)
{
    vkg_comm_config_default(c0);
    c0->world_size = 2;
    c0->job_id = JOB;
    c0->timeout_ms = timeout_ms;
    assert_int_equal(vkg_comm_pick_port("127.0.0.1", &c0->master_port), VKG_OK);
}

static void *join_thread(void *p)
{
    join_arg *a = p;
    vkg_comm_t *c = NULL;
    a->st = vkg_comm_create(&a->cfg, &c);
    snprintf(a->msg, sizeof a->msg, "%s", vkg_error_message());
    vkg_comm_destroy(&c);
    return NULL;
}

static void join_pair(const vkg_comm_config *c0, const vkg_comm_config *c1, join_arg *a)
{
    pthread_t th[2];
    a[0].cfg = *c0;
    a[1].cfg = *c1;
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, join_thread, &a[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
}

static void test_rendezvous_refuses_other_job(void **state)
{
    (void)state;
    vkg_comm_config c0;
    pair_config(&c0, 1500);
    vkg_comm_config c1 = c0;
    c1.rank = 1;
    c1.job_id = JOB + 1;
    join_arg a[2];
    join_pair(&c0, &c1, a);
    assert_int_equal(a[1].st, VKG_ERR_PEER);
    assert_non_null(strstr(a[1].msg, "refused this rank's credentials"));
    assert_int_equal(a[0].st, VKG_ERR_TIMEOUT);
    assert_non_null(strstr(a[0].msg, "missing: 1"));
}

static void test_rendezvous_rejects_wrong_world(void **state)
{
    (void)state;
    vkg_comm_config c0;
    pair_config(&c0, 3000);
    vkg_comm_config c1 = c0;
    c1.rank = 1;
    c1.world_size = 3;
    join_arg a[2];
    join_pair(&c0, &c1, a);
    assert_int_equal(a[0].st, VKG_ERR_MISMATCH);
    assert_non_null(strstr(a[0].msg, "world size 3"));
    assert_int_equal(a[1].st, VKG_ERR_PEER);
    assert_non_null(strstr(a[1].msg, "rejected rank 1"));
}

/* Frames larger than any legitimate payload (here 4 MiB against 2 MiB) are refused before they
 * are buffered, even from a peer holding the secret: nothing arrives, and rank 1 then gets rank
 * 0's real message. */
static void test_oversized_frame_refused(void **state)
{
    (void)state;
    size_t n = 4u << 20;
    unsigned char *big = calloc(1, n);
    assert_non_null(big);
    hdr h = legit_p2p();
    h.bytes = n;
    intruder in;
    plain_message(&in, &h, "x", 1);
    in.secret_password = 1;
    in.big = big;
    in.big_len = n;
    scene sc;
    vkg_th_opts o = scene_opts(VKG_COMM_IPC);
    scene_run(&sc, &o, &in, 1);
    free(big);
    if (sc.st[1] != VKG_OK)
        fprintf(stderr, "rank 1: %s\n", sc.msg[1]);
    assert_int_equal(sc.st[1], VKG_OK);
    assert_int_equal(sc.st[0], VKG_OK);
    for (int i = 0; i < 16; i++)
        assert_int_equal(sc.got[i], 100 + i);
}

/* A wildcard master address would make rank 0 listen on every interface: refused unless asked
 * for; asked for, a job runs. */
static void test_wildcard_master_needs_listen_all(void **state)
{
    (void)state;
    vkg_comm_config c0;
    pair_config(&c0, 3000);
    snprintf(c0.master_addr, sizeof c0.master_addr, "0.0.0.0");
    vkg_comm_t *c = NULL;
    assert_int_equal(vkg_comm_create(&c0, &c), VKG_ERR_INVALID_ARG);
    assert_null(c);
    assert_non_null(strstr(vkg_error_message(), "every interface"));
    assert_non_null(strstr(vkg_error_message(), "VKG_COMM_LISTEN_ALL=1"));
    c0.listen_all = 1;
    vkg_comm_config c1 = c0;
    c1.rank = 1;
    join_arg a[2];
    join_pair(&c0, &c1, a);
    if (a[0].st || a[1].st)
        fprintf(stderr, "rank 0: %s\nrank 1: %s\n", a[0].msg, a[1].msg);
    assert_int_equal(a[0].st, VKG_OK);
    assert_int_equal(a[1].st, VKG_OK);
}

/* ---- CURVE ---- */

static int curve_body(vkg_th_rank *r, void *arg)
{
    (void)arg;
    float x[3000];
    for (int i = 0; i < 3000; i++)
        x[i] = (float)(i % 5 + r->rank);
    vkg_status st = vkg_comm_allreduce(r->comm, x, x, 3000, VKG_COMM_F32, VKG_COMM_SUM);
    int bad = st != VKG_OK;
    for (int i = 0; i < 3000 && !bad; i++)
        bad = x[i] != (float)(2 * (i % 5) + 1);
    vkg_th_report(r, "%s %s", vkg_status_name(st), vkg_error_message());
    return bad;
}

static void test_curve_admits_job_key(void **state)
{
    (void)state;
    if (!vkg_comm_has_curve())
        skip();
    vkg_th_opts o = {.transport = VKG_COMM_TCP, .timeout_ms = 5000, .job_id = JOB, .wall_s = 30};
    assert_int_equal(vkg_comm_curve_keypair(o.curve_pub, o.curve_sec), VKG_OK);
    vkg_th_result res[2];
    vkg_th_run(2, &o, curve_body, NULL, res);
    if (res[0].body_rc || res[1].body_rc)
        vkg_th_dump(res, 2);
    assert_int_equal(res[0].body_rc, 0);
    assert_int_equal(res[1].body_rc, 0);
}

static void test_curve_refuses_other_keys(void **state)
{
    (void)state;
    if (!vkg_comm_has_curve())
        skip();
    char job_pub[41], job_sec[41], other_pub[41], other_sec[41];
    assert_int_equal(vkg_comm_curve_keypair(job_pub, job_sec), VKG_OK);
    assert_int_equal(vkg_comm_curve_keypair(other_pub, other_sec), VKG_OK);
    const unsigned char payload[16] = "intruder payload";
    hdr h = legit_p2p();
    for (int variant = 0; variant < 2; variant++) {
        intruder in;
        plain_message(&in, &h, payload, 16);
        if (variant == 0) { /* the right server key, an unauthorized client key */
            in.mech = MECH_CURVE;
            snprintf(in.server_key, sizeof in.server_key, "%s", job_pub);
            snprintf(in.pub, sizeof in.pub, "%s", other_pub);
            snprintf(in.sec, sizeof in.sec, "%s", other_sec);
        } /* variant 1: the job id password, but PLAIN against a CURVE server */
        scene sc;
        vkg_th_opts o = scene_opts(VKG_COMM_IPC);
        snprintf(o.curve_pub, sizeof o.curve_pub, "%s", job_pub);
        snprintf(o.curve_sec, sizeof o.curve_sec, "%s", job_sec);
        scene_run(&sc, &o, &in, 1);
        if (sc.st[1] != VKG_OK)
            fprintf(stderr, "variant %d: rank 1: %s\n", variant, sc.msg[1]);
        assert_true(in.handshake != 0 && in.handshake != ZMQ_EVENT_HANDSHAKE_SUCCEEDED);
        assert_int_equal(sc.st[1], VKG_OK);
        for (int i = 0; i < 16; i++)
            assert_int_equal(sc.got[i], 100 + i);
    }
}

static void test_curve_rank_with_wrong_key_cannot_join(void **state)
{
    (void)state;
    if (!vkg_comm_has_curve())
        skip();
    vkg_comm_config c0;
    pair_config(&c0, 1500);
    assert_int_equal(vkg_comm_curve_keypair(c0.curve_public, c0.curve_secret), VKG_OK);
    vkg_comm_config c1 = c0;
    c1.rank = 1;
    snprintf(c1.curve_master, sizeof c1.curve_master, "%s", c0.curve_public);
    assert_int_equal(vkg_comm_curve_keypair(c1.curve_public, c1.curve_secret), VKG_OK);
    join_arg a[2];
    join_pair(&c0, &c1, a);
    assert_int_equal(a[1].st, VKG_ERR_PEER);
    assert_non_null(strstr(a[1].msg, "refused"));
    assert_int_equal(a[0].st, VKG_ERR_TIMEOUT);
}

/* Rank 1 holds a wrong copy of rank 0's public key: its error names the key, not "is rank 0
 * running?". */
static void test_curve_wrong_master_key_named(void **state)
{
    (void)state;
    if (!vkg_comm_has_curve())
        skip();
    vkg_comm_config c0;
    pair_config(&c0, 1500);
    assert_int_equal(vkg_comm_curve_keypair(c0.curve_public, c0.curve_secret), VKG_OK);
    vkg_comm_config c1 = c0;
    c1.rank = 1;
    char other_sec[41];
    assert_int_equal(vkg_comm_curve_keypair(c1.curve_master, other_sec), VKG_OK);
    join_arg a[2];
    join_pair(&c0, &c1, a);
    if (a[1].st != VKG_ERR_PEER || !strstr(a[1].msg, c1.curve_master))
        fprintf(stderr, "rank 1: %s\n", a[1].msg);
    assert_int_equal(a[1].st, VKG_ERR_PEER);
    assert_non_null(strstr(a[1].msg, "public key"));
    assert_non_null(strstr(a[1].msg, c1.curve_master));
    assert_null(strstr(a[1].msg, "is rank 0 running"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_foreign_job_rejected),
        cmocka_unit_test(test_stale_generation_rejected),
        cmocka_unit_test(test_malformed_frames_rejected),
        cmocka_unit_test(test_no_credentials_refused),
        cmocka_unit_test(test_other_job_credentials_refused),
        cmocka_unit_test(test_guessable_credentials_refused),
        cmocka_unit_test(test_forged_allreduce_data_refused),
        cmocka_unit_test(test_message_without_secret_rejected),
        cmocka_unit_test(test_rendezvous_refuses_other_job),
        cmocka_unit_test(test_rendezvous_rejects_wrong_world),
        cmocka_unit_test(test_oversized_frame_refused),
        cmocka_unit_test(test_wildcard_master_needs_listen_all),
        cmocka_unit_test(test_curve_admits_job_key),
        cmocka_unit_test(test_curve_refuses_other_keys),
        cmocka_unit_test(test_curve_rank_with_wrong_key_cannot_join),
        cmocka_unit_test(test_curve_wrong_master_key_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
