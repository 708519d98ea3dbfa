/* The intruder of the transport's security tests (comm_intruder.h): its frames, its socket and
 * the two ranks it strikes at. Not here: the checks themselves (test_comm_security*.c). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zmq.h>

#include "../transport/comm_testing.h"
#include "comm_intruder.h"
#include "test_comm_harness.h"
#include "vkgpt/comm.h"

/* ---- the wire header, from its documented layout (64 bytes, little-endian) ---- */

static void le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void encode(const vkg_wire_hdr *h, uint8_t out[64])
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

vkg_wire_hdr vkg_intruder_p2p(void)
{
    return (vkg_wire_hdr){.magic = 0x43474B56u,
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

/* Connect to endpoint with the given mechanism, send the frames, report the handshake. secret:
 * the job's, for an intruder that holds it. */
static void intrude(vkg_intruder *in, const char *endpoint, const uint8_t secret[16])
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

void vkg_intruder_plain(vkg_intruder *in, const vkg_wire_hdr *h, const void *payload, size_t n)
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

static void scene_wait(vkg_scene *sc, int *flag)
{
    pthread_mutex_lock(&sc->mu);
    while (!*flag)
        pthread_cond_wait(&sc->cv, &sc->mu);
    pthread_mutex_unlock(&sc->mu);
}

static void scene_set(vkg_scene *sc, int *flag)
{
    pthread_mutex_lock(&sc->mu);
    *flag = 1;
    pthread_cond_broadcast(&sc->cv);
    pthread_mutex_unlock(&sc->mu);
}

static int scene_body(vkg_th_rank *r, void *arg)
{
    vkg_scene *sc = arg;
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

void vkg_scene_run(vkg_scene *sc, const vkg_th_opts *o, vkg_intruder *in, int rank0_sends)
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

vkg_th_opts vkg_scene_opts(vkg_comm_transport t)
{
    return (vkg_th_opts){.transport = t, .timeout_ms = 5000, .job_id = JOB, .wall_s = 30};
}

void vkg_intruder_expect_rejected(vkg_comm_transport t, vkg_intruder *in, const char *needle)
{
    vkg_scene sc;
    in->secret_password = 1;
    vkg_th_opts o = vkg_scene_opts(t);
    vkg_scene_run(&sc, &o, in, 0);
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

void vkg_intruder_expect_refused(vkg_comm_transport t, vkg_intruder *in)
{
    vkg_scene sc;
    vkg_th_opts o = vkg_scene_opts(t);
    vkg_scene_run(&sc, &o, in, 1);
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
